"""Settings pages: admins manage members and API keys in the browser; everyone else gets 403 and
sees no link; a new or rotated key's secret is shown once; policy pages say when they are read-only."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry
from memoryhub.accounts.tenancy import add_member, issue_api_key
from memoryhub.models import ApiKey, Membership, Role
from tests.factories import make_workflow
from tests.helpers import form_post

pytestmark = pytest.mark.django_db


def token_of(client: Client, url: str) -> str:
    page = client.get(url)
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert match, f"{url} has a CSRF token"
    return match.group(1)


def actions(tenant) -> list[str]:
    return list(AuditEntry.objects.filter(tenant=tenant).order_by("pk").values_list("action", flat=True))


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_non_admins_get_403_and_no_settings_link(request, who, alice):
    party = request.getfixturevalue(who)
    log = actions(party.tenant)
    for url in ("/settings/", "/settings/members/", "/settings/keys/"):
        assert party.web.get(url).status_code == 403, url
    token = token_of(party.web, "/workflows/")
    for url, data in [
        ("/settings/members/", {"username": "x", "role": "admin", "password": "a-long-passphrase"}),
        ("/settings/members/alice/role/", {"role": "viewer"}),
        ("/settings/members/alice/remove/", {}),
        ("/settings/keys/", {"name": "mine", "role": "admin"}),
        (f"/settings/keys/{alice.key.key.prefix}/rotate/", {}),
        (f"/settings/keys/{alice.key.key.prefix}/revoke/", {}),
    ]:
        assert party.web.post(url, {**data, "csrfmiddlewaretoken": token}).status_code == 403, url
    assert actions(party.tenant) == log
    assert 'data-nav="settings"' not in party.web.get("/workflows/").content.decode()


def test_admin_sees_the_link_and_both_pages(alice, bob):
    assert 'href="/settings/members/" data-nav="settings"' in alice.web.get("/workflows/").content.decode()
    html = alice.web.get("/settings/members/").content.decode()
    assert 'data-member="alice"' in html and 'data-member="bob"' in html
    html = alice.web.get("/settings/keys/").content.decode()
    assert f'data-prefix="{alice.key.key.prefix}"' in html and "system:setup" in html
    assert alice.key.secret not in html


def test_admin_adds_rerole_and_removes_a_member(alice, tenant):
    r = form_post(
        alice.web,
        "/settings/members/",
        {"username": "dave", "role": "viewer", "password": "a-long-passphrase"},
    )
    assert r.status_code == 302
    assert Membership.objects.get(tenant=tenant, user__username="dave").role == Role.VIEWER
    r = form_post(alice.web, "/settings/members/dave/role/", {"role": "reviewer"})
    assert r.status_code == 302
    assert Membership.objects.get(tenant=tenant, user__username="dave").role == Role.REVIEWER
    assert "dave is now reviewer." in alice.web.get("/settings/members/").content.decode()
    r = form_post(alice.web, "/settings/members/dave/remove/")
    assert r.status_code == 302
    assert not Membership.objects.filter(tenant=tenant, user__username="dave").exists()
    assert get_user_model().objects.filter(username="dave").exists()  # the account stays
    assert actions(tenant)[-3:] == ["member.add", "member.role", "member.remove"]


def test_bad_member_form_shows_the_error_and_writes_nothing(alice, bob, tenant):
    log = actions(tenant)
    r = form_post(alice.web, "/settings/members/", {"username": "bob", "role": "viewer"})
    assert r.status_code == 400 and "already a member" in r.content.decode()
    r = form_post(
        alice.web, "/settings/members/", {"username": "erin", "role": "viewer", "password": "short"}
    )
    assert r.status_code == 400 and "too short" in r.content.decode()
    r = form_post(alice.web, "/settings/members/bob/role/", {"role": "emperor"})
    assert (
        r.status_code == 302
        and "role: must be one of" in alice.web.get("/settings/members/").content.decode()
    )
    r = form_post(alice.web, "/settings/members/alice/remove/")
    assert "last admin" in alice.web.get("/settings/members/").content.decode()
    assert form_post(alice.web, "/settings/members/nobody/remove/").status_code == 404
    assert actions(tenant) == log
    assert Membership.objects.get(tenant=tenant, user__username="alice").role == Role.ADMIN


def test_a_new_key_is_shown_once_then_rotated_and_revoked(alice, tenant):
    r = form_post(alice.web, "/settings/keys/", {"name": "ci", "role": "reviewer"})
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    secret = re.search(r'data-testid="secret">([^<]+)<', r.content.decode()).group(1)
    key = ApiKey.objects.get(tenant=tenant, name="ci")
    assert key.role == Role.REVIEWER and key.created_by == alice.user
    assert secret not in alice.web.get("/settings/keys/").content.decode()  # once
    r = form_post(alice.web, f"/settings/keys/{key.prefix}/rotate/")
    new_secret = re.search(r'data-testid="secret">([^<]+)<', r.content.decode()).group(1)
    assert new_secret != secret
    key.refresh_from_db()
    assert key.revoked_at is not None and key.replaced_by.name == "ci"
    form_post(alice.web, f"/settings/keys/{key.replaced_by.prefix}/revoke/")
    assert ApiKey.objects.filter(tenant=tenant, name="ci", revoked_at__isnull=True).count() == 0
    assert actions(tenant)[-3:] == ["api_key.issue", "api_key.rotate", "api_key.revoke"]


def test_another_tenants_key_or_member_is_404(alice, mallory):
    assert form_post(alice.web, f"/settings/keys/{mallory.key.key.prefix}/revoke/").status_code == 404
    assert form_post(alice.web, "/settings/members/mallory/remove/").status_code == 404
    assert ApiKey.objects.get(pk=mallory.key.key.pk).revoked_at is None


def test_settings_pages_queries_do_not_grow_with_rows(alice, tenant):
    def count(url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert alice.web.get(url).status_code == 200
        return len(ctx.captured_queries)

    urls = ("/settings/members/", "/settings/keys/")
    for url in urls:
        count(url)  # warm up: the first request of a session loads per-process caches
    base = {url: count(url) for url in urls}
    for i in range(8):
        member = add_member(tenant, f"user{i}", Role.VIEWER, password="a-long-passphrase")
        issue_api_key(tenant, f"key{i}", role=Role.VIEWER, created_by=member.user)
    assert {url: count(url) for url in base} == base


def test_policy_pages_are_read_only_for_viewers_with_a_note(carol, alice, tenant):
    make_workflow(tenant, "wf-ro")
    for url in ("/triggers/policy/", "/triggers/workflows/wf-ro/policy/"):
        html = carol.web.get(url).content.decode()
        assert 'data-testid="readonly-note"' in html, url
        assert 'name="action" value="save"' not in html and "disabled" in html
        token = token_of(carol.web, url)
        assert carol.web.post(url, {"csrfmiddlewaretoken": token, "action": "save"}).status_code == 403
    assert 'data-testid="readonly-note"' not in alice.web.get("/triggers/policy/").content.decode()
