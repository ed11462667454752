"""The ingest role (integration keys): it reads what a viewer reads and appends what it observes
— workflows, events, traces, timelines, observed compactions, OTLP spans — and nothing else.

Every API route is found by walking the URL resolver (a new route is checked without being
listed here), and every method its view answers is tried with an ingest key."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.models import Role, role_at_least

pytestmark = pytest.mark.django_db

# The only (route name, method) pairs beyond reading an ingest key may use: what the issue names.
INGEST_WRITES = {
    ("v1:workflow-list", "POST"),
    ("v1:workflow-events", "POST"),
    ("v1:workflow-traces", "POST"),
    ("v1:workflow-timeline", "POST"),
    ("v1:workflow-step", "POST"),
    ("v1:workflow-observed", "POST"),
    # the verdict an integration asks before it uses a framework's summary (#32): writes nothing
    ("v1:workflow-repair", "POST"),
    ("otlp:otlp-traces", "POST"),
}
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")


def _api_routes(resolver: URLResolver = None, prefix: str = "", ns: str = ""):
    resolver = resolver or get_resolver()
    for p in resolver.url_patterns:
        if isinstance(p, URLResolver):
            inner_ns = f"{ns}{p.namespace}:" if p.namespace else ns
            yield from _api_routes(p, prefix + str(p.pattern), inner_ns)
        elif isinstance(p, URLPattern):
            view = getattr(p.callback, "view_class", None) or getattr(p.callback, "cls", None)
            route = prefix + str(p.pattern)
            if view is not None and (route.startswith("api/v1/") or route == "v1/traces"):
                yield f"{ns}{p.name}", route, view


def _url(route: str) -> str:
    """The route with every converter filled in (the permission is checked before any lookup)."""
    route = re.sub(r"<int:[^>]+>", "1", route)
    route = re.sub(r"<(?:str|slug|uuid|path):[^>]+>|<[^>]+>", "x", route)
    return "/" + route.lstrip("^").rstrip("$")


ROUTES = sorted(_api_routes(), key=lambda r: r[0])


def test_the_walk_finds_every_ingest_route_and_more():
    names = {name for name, _, _ in ROUTES}
    assert {name for name, _ in INGEST_WRITES} <= names and len(names) > 30


def test_rank_ingest_is_between_viewer_and_reviewer():
    assert role_at_least(Role.INGEST, Role.VIEWER) and not role_at_least(Role.INGEST, Role.REVIEWER)
    assert role_at_least(Role.REVIEWER, Role.INGEST) and not role_at_least(Role.VIEWER, Role.INGEST)


@pytest.mark.parametrize(("name", "route", "view"), ROUTES, ids=[r[0] for r in ROUTES])
def test_every_route_and_method_for_an_ingest_key(tenant, name, route, view):
    key = issue_api_key(tenant, "laptop-hook", role=Role.INGEST)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key.secret}")
    url = _url(route)
    for method in [
        m.upper() for m in view.http_method_names if hasattr(view, m) and m not in ("options", "head")
    ]:
        answer = getattr(client, method.lower())(url, {}, format="json")
        forbidden = answer.status_code == 403 and answer.json().get("error") in (
            "forbidden",
            "permission_denied",
        )
        if method in UNSAFE and (name, method) not in INGEST_WRITES:
            read_only_compute = getattr(view, "write_role", Role.REVIEWER) == Role.VIEWER
            assert forbidden or read_only_compute, (
                f"{method} {url} ({name}) let an ingest key through: {answer.status_code}"
            )
        elif method in UNSAFE:
            assert not forbidden, f"{method} {url} ({name}) refused an ingest key"
        else:
            admin_only = getattr(view, "read_role", Role.VIEWER) == Role.ADMIN
            assert forbidden == admin_only, f"{method} {url} ({name}): {answer.status_code}"
