"""Request middleware: API body limit (413 before anything is parsed), compressed bodies inflated
under the same limit, unstorable text in the URL and headers (400 before anything reads them),
login lockout answers, and current tenant for pages."""

from __future__ import annotations

import io
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.http import HttpResponse, HttpResponseBadRequest
from django.template import loader
from django.utils.functional import SimpleLazyObject

from memoryhub.core.errors import DomainError
from memoryhub.core.inflate import inflate
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


MAX_QUERY_VALUE_CHARS = 4096


def _error(request, code: str, detail: str, status: int) -> HttpResponse:
    """The JSON error for API and OTLP paths, the 4xx page elsewhere."""
    if request.path.startswith(("/api/", "/v1/")):
        return json_error(code, detail, status)
    page = loader.render_to_string("400.html", {"detail": detail}, request=None)
    return HttpResponse(page, status=status)


class BodyDecodingMiddleware:
    """Every door takes a Content-Encoding (gzip, deflate, zstd) the same way: the body is
    inflated here, streamed, under MEMORYHUB_MAX_BODY_BYTES of INFLATED bytes (memoryhub.core.inflate),
    before any view, parser or form reads it; the request then looks uncompressed (the header is
    removed, CONTENT_LENGTH is the inflated size). A bomb is a 413, a corrupt body a 400, an unknown
    coding a 415."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        coding = request.META.get("HTTP_CONTENT_ENCODING", "").strip()
        if coding and coding.lower() != "identity":
            try:
                body = inflate(request.body, coding, settings.MEMORYHUB_MAX_BODY_BYTES)
            except DomainError as exc:
                return _error(request, exc.code, exc.detail, exc.status)
            # Django reads request.body / request.POST from these two (HttpRequest.body).
            request._body = body
            request._stream = io.BytesIO(body)
            request.META["CONTENT_LENGTH"] = str(len(body))
            request.META["MEMORYHUB_CONTENT_ENCODING"] = request.META.pop("HTTP_CONTENT_ENCODING")
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
        # Django decodes invalid UTF-8 in a query string or form body to U+FFFD, silently
        # changing the value (a lone surrogate arrives so): refuse it instead.
        raw_form = b""
        if request.method == "POST" and request.content_type == "application/x-www-form-urlencoded":
            raw_form = request.body
        for where, raw in (
            ("the query string", request.META.get("QUERY_STRING", "").encode("latin-1", "replace")),
            ("the form body", raw_form),
        ):
            try:
                unquote_to_bytes(raw.replace(b"+", b" ")).decode("utf-8")
            except UnicodeDecodeError:
                return where, "is not valid UTF-8 (a lone surrogate or a broken byte sequence)"
        for name, value in request.META.items():
            if name.startswith("HTTP_") and isinstance(value, str):
                why = text_problem(value)
                if why:
                    return f"header {name[5:].replace('_', '-').title()}", why
        for key, value in request.GET.items():
            # No filter or search term needs more; longer ones only burden the database (SQLite
            # refuses LIKE patterns over 50,000 bytes with an error).
            if len(value) > MAX_QUERY_VALUE_CHARS:
                return f"query parameter {key[:50]!r}", f"is longer than {MAX_QUERY_VALUE_CHARS} characters"
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
