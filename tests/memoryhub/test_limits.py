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


PRODUCTION_ENV = {
    "DEBUG": "0",
    "SECRET_KEY": "k7Qv9-production-secret-9f3b2c1d8e7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8",
    "ALLOWED_HOSTS": "memoryhub.example.com",
    "CSRF_TRUSTED_ORIGINS": "https://memoryhub.example.com",
    "SECURE_SSL_REDIRECT": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
}


def test_production_settings_pass_check_deploy_without_warnings():
    import os
    import subprocess
    import sys

    from django.conf import settings

    env = {**os.environ, **PRODUCTION_ENV}
    env.pop("MEMORYHUB_TESTING", None)
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no issues" in out.stdout


def test_development_defaults_are_flagged_by_check_deploy():
    import os
    import subprocess
    import sys

    from django.conf import settings

    env = {k: v for k, v in os.environ.items() if k not in PRODUCTION_ENV}
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode != 0 and "security.W" in out.stdout + out.stderr


def test_review_actions_are_throttled_per_api_key(alice, bob, tenant, monkeypatch):
    from memoryhub.api.throttles import ReviewThrottle

    # DRF reads the rates into the class when it is defined: patch them there.
    monkeypatch.setattr(
        ReviewThrottle, "THROTTLE_RATES", {**ReviewThrottle.THROTTLE_RATES, "review": "2/min"}
    )
    url = "/api/v1/summaries/sum_0000000000000000/approve/"
    codes = [bob.api.post(url, {"reason": "ok"}, format="json").status_code for _ in range(3)]
    assert codes == [404, 404, 429]
    r = bob.api.post(url, {"reason": "ok"}, format="json")
    assert r.json()["error"] == "rate_limited" and int(r["Retry-After"]) > 0
    # another key has its own bucket, and reads are never throttled
    assert alice.api.post(url, {"reason": "ok"}, format="json").status_code == 404
    assert bob.api.get("/api/v1/summaries/sum_0000000000000000/").status_code == 404
