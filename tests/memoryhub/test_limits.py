"""Limits: login throttling with Retry-After, pagination caps, CSRF on session POSTs."""

from __future__ import annotations

import pytest
from django.test import override_settings

from tests.factories import make_workflow

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
    from memoryhub.web.api.pagination import StandardPagination

    assert StandardPagination.max_page_size == 500
    r = api.get("/api/v1/workflows/wf-0/events/?limit=100000")
    assert r.status_code == 400 and r.json()["error"] == "invalid_parameter"


def test_session_post_without_csrf_is_403(alice, tenant):
    make_workflow(tenant, "wf")
    r = alice.web.post("/api/v1/workflows/", data={"external_id": "x"}, content_type="application/json")
    assert r.status_code == 403 and "CSRF" in r.json()["detail"]
    r = alice.web.post("/tenant/switch/", {"tenant": "acme"})
    assert r.status_code == 403


def readme_production_env() -> dict[str, str]:
    """The README's production variables, exactly as documented (the block after
    ``<!-- production-env -->``), with a fresh random value where it asks for one."""
    import re
    import secrets

    from django.conf import settings

    readme = (settings.BASE_DIR / "README.md").read_text()
    block = readme.split("<!-- production-env -->", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    env = {}
    for line in block.strip().splitlines():
        name, value = line.split("=", 1)
        env[name] = secrets.token_urlsafe(50) if re.match(r"^<.*>$", value) else value
    assert {"SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"} <= env.keys()
    return env


def _check_deploy(env: dict[str, str]):
    import subprocess
    import sys

    from django.conf import settings

    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "DEBUG"],
        cwd=settings.BASE_DIR,
        env={**env, "DJANGO_SETTINGS_MODULE": "memoryhub.settings"},
        capture_output=True,
        text=True,
        timeout=180,
    )


def _without_settings_env() -> dict[str, str]:
    """This process's environment minus every variable the settings read for security."""
    import os

    drop = set(readme_production_env()) | {"DJANGO_SETTINGS_MODULE", "REDIS_CACHE_URL"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_readme_production_settings_pass_check_deploy_with_no_issues():
    out = _check_deploy({**_without_settings_env(), **readme_production_env()})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout, out.stdout + out.stderr


def test_each_readme_production_variable_is_needed():
    """Dropping any one hardening variable is flagged: the block is the minimum, not decoration."""
    production = readme_production_env()
    for name in ("SECURE_SSL_REDIRECT", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD"):
        env = {**_without_settings_env(), **{k: v for k, v in production.items() if k != name}}
        out = _check_deploy(env)
        assert out.returncode != 0 and "security.W" in out.stdout + out.stderr, name


def test_debug_defaults_are_flagged_by_check_deploy():
    out = _check_deploy({**_without_settings_env(), "DEBUG": "true"})
    assert out.returncode != 0 and "security.W018" in out.stdout + out.stderr


def test_review_actions_are_throttled_per_api_key(alice, bob, tenant, monkeypatch):
    from memoryhub.web.api.throttles import ReviewThrottle

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
