"""Bearer API-key authentication (tenant-scoped). Session auth (with CSRF) is DRF's own."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions

from memoryhub.accounts.tenancy import verify_api_key


class ApiKeyUser(AnonymousUser):
    """The principal of an API-key request: authenticated, but not a Django user."""

    @property
    def is_authenticated(self) -> bool:  # type: ignore[override]  # stubs: a plain attribute on AnonymousUser
        return True


class ApiKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        parts = header.split()
        if len(parts) != 2 or parts[0].lower() != self.keyword.lower():
            raise exceptions.AuthenticationFailed("Authorization header must be 'Bearer <api key>'.")
        key = verify_api_key(parts[1])
        if key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return ApiKeyUser(), key

    def authenticate_header(self, request) -> str:
        return self.keyword


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memoryhub.web.api.auth.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "MemoryHub API key (mh_…)"}
