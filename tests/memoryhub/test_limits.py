"""Limits: login throttling with Retry-After, pagination caps, CSRF on session POSTs."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.helpers import make_workflow

pytestmark = pytest.mark.django_db


def test_login_is_throttled_with_retry_after(client, alice):
    rates = {"review": "120/min", "purge": "10/min", "login": "3/min"}
    from django.conf import settings

    with override_settings(REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": rates}):
        for _ in range(3):
            r = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
            assert r.status_code == 200  # the form again, with an error
        r = client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
        assert r.status_code == 429 and 0 < int(r["Retry-After"]) <= 60


def test_page_size_is_capped(api, tenant):
    for i in range(3):
        make_workflow(tenant, f"wf-{i}")
    r = api.get("/api/v1/workflows/?page_size=100000")
    assert r.status_code == 200 and len(r.json()["results"]) == 3
    from memoryhub.api.pagination import StandardPagination

    assert StandardPagination.max_page_size == 500
    r = api.get("/api/v1/workflows/wf-0/events/?limit=100000")
    assert r.status_code == 400 and r.json()["error"] == "invalid_parameter"


def test_session_post_without_csrf_is_403(alice, tenant):
    make_workflow(tenant, "wf")
    r = alice.web.post("/api/v1/workflows/", data={"external_id": "x"}, content_type="application/json")
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]
    r = alice.web.post("/tenant/switch/", {"tenant": "acme"})
    assert r.status_code == 403
