"""Request middleware: API body limit (413 before anything is parsed), unstorable text in the URL
and headers (400 before anything reads them), and current tenant for pages."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse, HttpResponseBadRequest
from django.template import loader
from django.utils.functional import SimpleLazyObject

from memoryhub.web.api.errors import json_error
from memoryhub.web.api.parsers import text_problem
from memoryhub.web.tenancy_context import resolve_tenant


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


class HostileInputMiddleware:
    """A NUL character or a lone surrogate in the path (any path id), the query string, a form
    field or a header (cookies, Authorization) is a 400 before any view, session or key lookup
    sends it to the database (PostgreSQL rejects NUL in text). JSON bodies are the parser's
    (memoryhub.web.api.parsers.SafeJSONParser)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        problem = self._problem(request)
        if problem:
            where, why = problem
            detail = f"{where} {why}"
            if request.path_info.startswith("/api/") or request.path.startswith("/api/"):
                return json_error("invalid_text", detail, 400)
            return HttpResponseBadRequest(
                loader.render_to_string("400.html", {"detail": detail}, request=None)
            )
        return self.get_response(request)

    @staticmethod
    def _problem(request) -> tuple[str, str] | None:
        why = text_problem(request.path_info) or text_problem(request.path)
        if why:
            return "the URL path", why
        for name, value in request.META.items():
            if name.startswith("HTTP_") and isinstance(value, str):
                why = text_problem(value)
                if why:
                    return f"header {name[5:].replace('_', '-').title()}", why
        for label, query in (("query parameter", request.GET), ("form field", None)):
            if query is None:
                if request.method != "POST" or request.content_type != "application/x-www-form-urlencoded":
                    continue
                query = request.POST
            for key, values in query.lists():
                for text in (key, *values):
                    why = text_problem(text)
                    if why:
                        return f"{label} {key.encode('utf-8', 'backslashreplace').decode()[:50]!r}", why
        return None


class LoginLockoutMiddleware:
    """A login refused because a lockout budget is spent (memoryhub.web.login_throttle, on any
    door: /accounts/login/, /admin/login/) is a 429 with Retry-After, not the form again."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        refusal = getattr(request, "login_refusal", None)
        if refusal is None:
            return response
        detail = f"Too many login attempts. Try again in {refusal.retry_after} seconds."
        if request.path.startswith("/api/"):
            response = json_error("rate_limited", detail, 429, retry_after=refusal.retry_after)
        else:
            response = HttpResponse(detail, status=429, content_type="text/plain")
        response["Retry-After"] = str(refusal.retry_after)
        return response


class CurrentTenantMiddleware:
    """request.tenant / request.role for server-rendered pages (lazy: no query unless used)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith("/api/"):
            request.tenant = SimpleLazyObject(lambda: resolve_tenant(request)[0])
            request.role = SimpleLazyObject(lambda: resolve_tenant(request)[1] or "")
        return self.get_response(request)
