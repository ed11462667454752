"""Settings in a real browser: an admin adds a member, changes a role, creates, rotates and
revokes an API key (each key shown once, and the old secret refused by the API); a viewer gets
403 and no controls."""

from __future__ import annotations

import httpx
import pytest

from audit.models import AuditEntry
from memoryhub.models import ApiKey, Membership, Role
from tests.conftest import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def api_status(base: str, secret: str) -> int:
    return httpx.get(f"{base}/api/v1/workflows/", headers={"Authorization": f"Bearer {secret}"}).status_code


def test_admin_manages_members_and_keys(page, login, live_server, alice, tenant, shoot):
    page.on("dialog", lambda dialog: dialog.accept())  # the remove/revoke confirmations
    login("alice", PASSWORD)
    page.click("a[data-nav=settings]")
    assert page.url.endswith("/settings/members/")

    # add a member
    page.fill("#id_username", "dave")
    page.select_option("#id_role", "viewer")
    page.fill("#id_password", "a-long-passphrase")
    page.click("#add-member button[type=submit]")
    page.wait_for_selector("tr[data-member=dave]")
    assert "dave added as viewer (new account)." in page.inner_text(".messages")
    assert Membership.objects.get(tenant=tenant, user__username="dave").role == Role.VIEWER

    # change the role
    row = page.locator("tr[data-member=dave]")
    row.locator("select[name=role]").select_option("reviewer")
    row.locator("button[data-action=change-role]").click()
    page.wait_for_load_state()
    assert "dave is now reviewer." in page.inner_text(".messages")
    assert Membership.objects.get(tenant=tenant, user__username="dave").role == Role.REVIEWER
    assert page.locator("tr[data-member=dave] select[name=role]").input_value() == "reviewer"
    shoot("settings-members")

    # create a key: shown once
    page.click("nav.settings-tabs >> text=API keys")
    page.fill("#id_name", "ci-runner")
    page.select_option("#id_role", "reviewer")
    page.click("#create-key button[type=submit]")
    first = page.inner_text("[data-testid=secret]").strip()
    assert first.startswith("mh_") and api_status(live_server.url, first) == 200
    shoot("settings-key-created")
    page.goto(f"{live_server.url}/settings/keys/")
    assert first not in page.content()
    key = ApiKey.objects.get(tenant=tenant, name="ci-runner")
    row = page.locator(f"tr[data-prefix='{key.prefix}']")
    assert row.locator("td").nth(2).inner_text() == "reviewer" and "alice" in row.inner_text()

    # rotate: a new secret, the old one refused
    row.locator("button[data-action=rotate]").click()
    page.wait_for_selector("[data-testid=secret]")
    second = page.inner_text("[data-testid=secret]").strip()
    assert second != first
    assert api_status(live_server.url, first) == 401 and api_status(live_server.url, second) == 200
    assert page.locator(f"tr[data-prefix='{key.prefix}']").get_attribute("data-state") == "revoked"

    # revoke the rotated key
    new_prefix = ApiKey.objects.get(pk=key.pk).replaced_by.prefix
    page.locator(f"tr[data-prefix='{new_prefix}'] button[data-action=revoke]").click()
    page.wait_for_selector(f"tr[data-prefix='{new_prefix}'][data-state=revoked]")
    assert api_status(live_server.url, second) == 401
    shoot("settings-keys")

    actions = list(AuditEntry.objects.filter(tenant=tenant).order_by("pk").values_list("action", flat=True))
    assert actions[-5:] == ["member.add", "member.role", "api_key.issue", "api_key.rotate", "api_key.revoke"]
    assert page.js_errors == []


def test_viewer_gets_403_and_no_controls(page, login, live_server, alice, carol):
    login("carol", PASSWORD)
    assert page.locator("a[data-nav=settings]").count() == 0
    for path in ("/settings/members/", "/settings/keys/"):
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 403, path
        assert page.locator("button[data-action]").count() == 0
    page.goto(f"{live_server.url}/triggers/policy/")
    assert page.locator("[data-testid=readonly-note]").is_visible()
    assert page.locator("button[name=action][value=save]").count() == 0
