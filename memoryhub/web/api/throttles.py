"""Rate limits keyed by who is calling: the API key (by prefix) or the user, never one shared bucket.

DRF's ScopedRateThrottle keys on ``request.user.pk``; an API-key principal has none, which would
put every key of every tenant into a single bucket. And DRF's own counting (read the history list,
append, write it back) loses updates when several web processes serve one caller at once; the
budget is taken through memoryhub.web.ratelimit instead, which is exact on any shared cache.
"""

from __future__ import annotations

from rest_framework.throttling import ScopedRateThrottle

from memoryhub.models import ApiKey
from memoryhub.web.ratelimit import take


class PrincipalScopedThrottle(ScopedRateThrottle):
    _retry_after: int | None = None

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated and getattr(request.user, "pk", None):
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view):
        self._retry_after = None
        # ScopedRateThrottle.allow_request sets scope, rate, num_requests and duration from the view.
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope:
            return True
        self.rate = self.get_rate()
        self.num_requests, self.duration = self.parse_rate(self.rate)
        self.key = self.get_cache_key(request, view)
        # parse_rate gives both numbers or neither; checking both narrows them for take().
        if self.key is None or self.num_requests is None or self.duration is None:
            return True
        self._retry_after = take(self.key, self.num_requests, self.duration)
        return self._retry_after is None

    def wait(self):
        return self._retry_after


class ReviewThrottle(PrincipalScopedThrottle):
    """Applied to review actions only (GETs are free)."""

    def allow_request(self, request, view):
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)
