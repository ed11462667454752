"""Who is behind a request: the API key first, then the session user."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.request import Request

from memoryhub.core.actors import Actor
from memoryhub.models import ApiKey


def request_actor(request: HttpRequest | Request) -> Actor:
    """The actor behind an API or page request (API key first, then the session user)."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return Actor.api_key(auth.name, auth.prefix)
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return Actor.user(user.get_username())
    return Actor.system("anonymous")


def request_principal(request: HttpRequest | Request) -> ApiKey | User | None:
    """Who makes a key on this request: its API key first, else the signed-in user (or None).
    A key made through another key acts for that key's human (accounts.tenancy)."""
    auth = getattr(request, "auth", None)
    if isinstance(auth, ApiKey):
        return auth
    user = getattr(request, "user", None)
    return user if isinstance(user, User) and user.pk else None
