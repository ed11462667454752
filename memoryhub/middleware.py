"""Request middleware: API body limit (413 before anything is parsed) and current tenant for pages."""

from __future__ import annotations

from django.conf import settings
from django.utils.functional import SimpleLazyObject

from memoryhub.api.errors import json_error
from memoryhub.tenancy_context import resolve_tenant


class ApiBodyLimitMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith(("/api/", "/v1/")):  # /v1/traces: OTLP ingest
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.MEMORYHUB_MAX_BODY_BYTES
            if length > limit:
                return json_error(
                    "payload_too_large",
                    f"request body of {length} bytes is over the limit of {limit} bytes",
                    413,
                )
        return self.get_response(request)


class CurrentTenantMiddleware:
    """request.tenant / request.role for server-rendered pages (lazy: no query unless used)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith("/api/"):
            request.tenant = SimpleLazyObject(lambda: resolve_tenant(request)[0])
            request.role = SimpleLazyObject(lambda: resolve_tenant(request)[1] or "")
        return self.get_response(request)
