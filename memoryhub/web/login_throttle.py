"""Login lockout shared by every web process, through the configured cache (Redis or the database).

Each login POST spends one attempt from two budgets (memoryhub.web.ratelimit): the client address's
and the account's (the username as typed, case-folded). Counting every attempt, not only
failures, means the check happens before the password is, so concurrent guesses cannot slip past
a budget that is about to run out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings

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


def take_login_attempt(request, username: str) -> Refusal | None:
    """Spend one login attempt of this client address and of this account, or say which is spent."""
    limit, window = login_rate()
    address = client_address(request)
    retry = take(f"login:addr:{address}", limit, window)
    if retry is not None:
        return Refusal("address", retry)
    account = username.strip().casefold()
    if account:
        # The cache key must stay short and printable whatever was typed.
        digest = hashlib.sha256(account.encode()).hexdigest()[:32]
        retry = take(f"login:acct:{digest}", limit, window)
        if retry is not None:
            return Refusal("account", retry)
    return None
