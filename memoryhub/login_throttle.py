"""Login lockout shared by every web process, through the configured cache (Redis or the database).

Each login POST spends one attempt from two budgets: the client address's and the account's (the
username as typed, case-folded). A budget of ``limit`` per ``window`` is ``limit`` slots
``<budget>:1 … <budget>:<limit>``; an attempt claims a free one with ``cache.add`` (Redis SET NX,
an INSERT on the database cache's primary key — atomic on every backend), and each slot expires
``window`` seconds after it was claimed. So however many processes serve the login page, no
more than ``limit`` attempts per budget get through in any ``window``-long interval. When no
slot is free, the budget is locked for a whole ``window`` (one cache read answers every attempt
during a lockout).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

WINDOWS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'20/min' -> (20, 60)."""
    count, period = rate.split("/")
    return int(count), WINDOWS[period.strip()[0]]


def login_rate() -> tuple[int, int]:
    return parse_rate(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["login"])


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


def _take(budget_key: str, limit: int, window: int) -> int | None:
    """Claim one attempt of a budget; None if granted, else seconds until it may be retried."""
    now = time.time()
    locked_until = cache.get(f"{budget_key}:locked")
    if locked_until is not None and locked_until > now:
        return max(1, int(locked_until - now + 0.999))
    start = cache.get(f"{budget_key}:next", 1)
    for i in range(limit):
        slot = (start - 1 + i) % limit + 1
        if cache.add(f"{budget_key}:{slot}", 1, timeout=window):
            cache.set(f"{budget_key}:next", slot % limit + 1, timeout=window)
            return None
    cache.set(f"{budget_key}:locked", now + window, timeout=window)
    return window


def take_login_attempt(request, username: str) -> Refusal | None:
    """Spend one login attempt of this client address and of this account, or say which is spent."""
    limit, window = login_rate()
    address = client_address(request)
    retry = _take(f"login:addr:{address}", limit, window)
    if retry is not None:
        return Refusal("address", retry)
    account = username.strip().casefold()
    if account:
        # The cache key must stay short and printable whatever was typed.
        digest = hashlib.sha256(account.encode()).hexdigest()[:32]
        retry = _take(f"login:acct:{digest}", limit, window)
        if retry is not None:
            return Refusal("account", retry)
    return None
