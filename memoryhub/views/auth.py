"""Login with a rate limit: repeated POSTs from one client address get 429 with Retry-After."""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpResponse

WINDOWS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(rate: str) -> tuple[int, int]:
    """'20/min' -> (20, 60)."""
    count, period = rate.split("/")
    return int(count), WINDOWS[period.strip()[0]]


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "unknown")


class ThrottledLoginView(auth_views.LoginView):
    template_name = "memoryhub/login.html"

    def post(self, request, *args, **kwargs):
        limit, window = parse_rate(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["login"])
        bucket = int(time.time() // window)
        key = f"login-throttle:{client_address(request)}:{bucket}"
        attempts = cache.get_or_set(key, 0, timeout=window)
        if attempts >= limit:
            retry_after = window - int(time.time() % window)
            response = HttpResponse(
                f"Too many login attempts. Try again in {retry_after} seconds.",
                status=429,
                content_type="text/plain",
            )
            response["Retry-After"] = str(retry_after)
            return response
        try:
            cache.incr(key)
        except ValueError:  # expired between get and incr
            cache.set(key, 1, timeout=window)
        return super().post(request, *args, **kwargs)
