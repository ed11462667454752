"""Rate limits keyed by who is calling: the API key (by prefix) or the user, never one shared bucket.

DRF's ScopedRateThrottle keys on ``request.user.pk``; an API-key principal has none, which would
put every key of every tenant into a single bucket.
"""

from __future__ import annotations

from rest_framework.throttling import ScopedRateThrottle

from memoryhub.models import ApiKey


class PrincipalScopedThrottle(ScopedRateThrottle):
    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiKey):
            ident = f"key:{request.auth.prefix}"
        elif request.user and request.user.is_authenticated and getattr(request.user, "pk", None):
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class ReviewThrottle(PrincipalScopedThrottle):
    """Applied to review actions only (GETs are free)."""

    def allow_request(self, request, view):
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return True
        return super().allow_request(request, view)
