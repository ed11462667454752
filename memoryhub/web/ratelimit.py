"""Rate limits shared by every web process, exact under concurrency, on any Django cache.

A budget of ``limit`` per ``window`` is ``limit`` slots ``<key>:1 … <key>:<limit>``; a request
claims a free one with ``cache.add`` (Redis SET NX; an INSERT on the database cache's primary
key; a lock in locmem), and each slot expires ``window`` seconds after it was claimed. So however
many processes or machines share the cache, no more than ``limit`` requests of one budget get
through in any ``window``-long interval. When no slot is free the budget is locked for a whole
``window``, and one cache read answers every request during the lockout.
"""

from __future__ import annotations

import time

from django.core.cache import cache

WINDOWS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'20/min' -> (20, 60)."""
    count, period = rate.split("/")
    return int(count), WINDOWS[period.strip()[0]]


def take(budget_key: str, limit: int, window: int) -> int | None:
    """Claim one attempt of a budget; None if granted, else seconds until it may be retried."""
    now = time.time()
    # One round trip for both reads (a review action pays this on every call).
    state = cache.get_many([f"{budget_key}:locked", f"{budget_key}:next"])
    locked_until = state.get(f"{budget_key}:locked")
    if locked_until is not None and locked_until > now:
        return max(1, int(locked_until - now + 0.999))
    start = state.get(f"{budget_key}:next", 1)
    for i in range(limit):
        slot = (start - 1 + i) % limit + 1
        if cache.add(f"{budget_key}:{slot}", 1, timeout=window):
            cache.set(f"{budget_key}:next", slot % limit + 1, timeout=window)
            return None
    cache.set(f"{budget_key}:locked", now + window, timeout=window)
    return window
