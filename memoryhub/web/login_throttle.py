"""Login lockout shared by every web process, through the configured cache (Redis or the database).

Each password check made for an HTTP request spends one attempt from two budgets
(memoryhub.web.ratelimit): the client address's and the account's. The account is the username
as Django resolves it at login (``normalize_username``: NFKC, so the full-width ``ａｌｉｃｅ`` is
``alice``), case-folded. Counting every attempt, not only failures, means the check happens
before the password is, so concurrent guesses cannot slip past a budget about to run out.

One policy for every door: the lockout is an authentication backend (:class:`LoginLockoutBackend`,
first in ``AUTHENTICATION_BACKENDS``), so ``/accounts/login/``, ``/admin/login/`` and any login
form added later spend the same budgets — each of them calls ``authenticate(request, ...)``. A spent
budget makes ``authenticate`` fail before any password is checked, and
:class:`memoryhub.web.middleware.LoginLockoutMiddleware` turns the answer into a 429.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied

from memoryhub.web.ratelimit import parse_rate, take


def login_rate() -> tuple[int, int]:
    rates: dict[str, str] = settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]  # type: ignore[assignment]  # REST_FRAMEWORK mixes value types: mypy infers dict[str, object]
    return parse_rate(rates["login"])


def client_address(request) -> str:
    """The client's address: REMOTE_ADDR, or the configured proxy header's trusted entry.

    With ``MEMORYHUB_CLIENT_IP_HEADER = "X-Forwarded-For"`` and ``MEMORYHUB_TRUSTED_PROXIES = n``,
    the n-th address from the right is the one the outermost of your n proxies saw; addresses to
    its left were written by the client and are not trusted.
    """
    header = settings.MEMORYHUB_CLIENT_IP_HEADER
    if header:
        meta_key = "HTTP_" + header.upper().replace("-", "_")
        entries = [part.strip() for part in request.META.get(meta_key, "").split(",") if part.strip()]
        if entries:
            trusted = max(1, settings.MEMORYHUB_TRUSTED_PROXIES)
            return entries[-trusted] if len(entries) >= trusted else entries[0]
    return request.META.get("REMOTE_ADDR") or "unknown"


@dataclass(frozen=True)
class Refusal:
    budget: str  # "address" or "account"
    retry_after: int  # seconds


def account_key(username: str) -> str:
    """The account a typed username logs into, as one budget key: Django's login normalisation
    (NFKC), case-folded (NFKC again: case folding can leave compatibility forms)."""
    normal = AbstractBaseUser.normalize_username(username.strip())
    return unicodedata.normalize("NFKC", normal.casefold())


def take_login_attempt(request, username: str) -> Refusal | None:
    """Spend one login attempt of this client address and of this account, or say which is spent."""
    limit, window = login_rate()
    address = client_address(request)
    retry = take(f"login:addr:{address}", limit, window)
    if retry is not None:
        return Refusal("address", retry)
    account = account_key(username)
    if account:
        # The cache key must stay short and printable whatever was typed.
        digest = hashlib.sha256(account.encode()).hexdigest()[:32]
        retry = take(f"login:acct:{digest}", limit, window)
        if retry is not None:
            return Refusal("account", retry)
    return None


class LoginLockoutBackend:
    """First authentication backend: spends the attempt, then lets the next backend check the
    password (returns None), or refuses every backend when a budget is spent.

    Only password checks made for an HTTP request count (``request.method`` is set); a
    ``Client.login()`` in a test or a management command builds no such request."""

    def authenticate(self, request, username=None, password=None, **credentials):
        if request is None or not getattr(request, "method", None) or password is None:
            return None
        if username is None:
            username = credentials.get(get_user_model().USERNAME_FIELD)
        refusal = take_login_attempt(request, str(username or ""))
        if refusal is not None:
            request.login_refusal = refusal
            raise PermissionDenied(f"login budget of this {refusal.budget} is spent")
        return None
