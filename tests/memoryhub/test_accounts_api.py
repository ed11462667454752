"""Members and API keys managed through the API: list, create (secret shown once), rotate, revoke;
add, re-role, remove members; admins only; every change audited; bad input writes nothing."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from audit.models import AuditEntry
from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.models import ApiKey, Membership, Role

pytestmark = pytest.mark.django_db


def actions(tenant) -> list[str]:
    return list(AuditEntry.objects.filter(tenant=tenant).order_by("pk").values_list("action", flat=True))


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def test_admin_lists_keys_with_role_creator_and_use_never_the_secret(alice, bob, carol):
    r = alice.api.get("/api/v1/api-keys/")
    assert r.status_code == 200
    rows = {row["name"]: row for row in r.json()["results"]}
    assert set(rows) == {"alice-key", "bob-key", "carol-key"}
    assert rows["bob-key"]["role"] == "reviewer" and rows["bob-key"]["created_by"] == "system:setup"
    assert rows["alice-key"]["last_used_at"] is not None  # this very call used it
    assert rows["carol-key"]["last_used_at"] is None and rows["carol-key"]["active"] is True
    assert all("key" not in row and "secret_hash" not in row for row in rows.values())
    assert set(rows["bob-key"]) >= {"prefix", "created_at", "revoked_at", "replaced_by"}


@pytest.mark.parametrize("who", ["bob", "carol"])
def test_only_admins_see_or_change_keys_and_members(request, who, alice):
    party = request.getfixturevalue(who)
    before = actions(party.tenant)
    for client in (party.api, party.web):
        assert client.get("/api/v1/api-keys/").status_code == 403
        assert client.get("/api/v1/members/").status_code == 403
    assert party.api.post("/api/v1/api-keys/", {"name": "x"}, format="json").status_code == 403
    assert party.api.post(f"/api/v1/api-keys/{alice.key.key.prefix}/revoke/").status_code == 403
    assert party.api.patch("/api/v1/members/alice/", {"role": "viewer"}, format="json").status_code == 403
    assert party.api.delete("/api/v1/members/alice/").status_code == 403
    assert actions(party.tenant) == before
    assert ApiKey.objects.get(pk=alice.key.key.pk).revoked_at is None


def test_another_tenants_keys_and_members_are_404(alice, mallory):
    prefix = mallory.key.key.prefix
    assert alice.api.get(f"/api/v1/api-keys/{prefix}/").status_code == 404
    assert alice.api.post(f"/api/v1/api-keys/{prefix}/revoke/").status_code == 404
    assert alice.api.post(f"/api/v1/api-keys/{prefix}/rotate/").status_code == 404
    assert alice.api.patch("/api/v1/members/mallory/", {"role": "viewer"}, format="json").status_code == 404
    assert alice.api.delete("/api/v1/members/mallory/").status_code == 404
    assert "mallory-key" not in {row["name"] for row in alice.api.get("/api/v1/api-keys/").json()["results"]}
    assert ApiKey.objects.get(pk=mallory.key.key.pk).revoked_at is None


def test_create_shows_the_secret_once_and_records_the_creator(alice, tenant):
    api = APIClient()  # a browser session (the settings page's way in)
    api.force_login(alice.user)
    r = api.post("/api/v1/api-keys/", {"name": "ci-runner", "role": "reviewer"}, format="json")
    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["key"].startswith("mh_" + body["prefix"]) and body["created_by"] == "alice"
    assert body["role"] == "reviewer"
    assert bearer(body["key"]).get("/api/v1/workflows/").status_code == 200
    listed = alice.api.get(f"/api/v1/api-keys/{body['prefix']}/").json()
    assert "key" not in listed and listed["created_by"] == "alice"
    # a key made by a key names that key as its creator
    r = alice.api.post("/api/v1/api-keys/", {"name": "bot"}, format="json")
    assert r.json()["created_by"] == f"api_key:alice-key({alice.key.key.prefix})"
    assert r.json()["role"] == "viewer"  # least privilege unless asked
    assert actions(tenant)[-2:] == ["api_key.issue", "api_key.issue"]


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "ok", "role": "owner"}, "role"),
        ({"role": "viewer"}, "name"),
        ({"name": ["a"]}, "name"),
    ],
)
def test_bad_key_input_is_400_and_writes_nothing(alice, tenant, body, field):
    keys, log = ApiKey.objects.count(), actions(tenant)
    r = alice.api.post("/api/v1/api-keys/", body, format="json")
    assert r.status_code == 400 and r.json()["field"] == field
    assert ApiKey.objects.count() == keys and actions(tenant) == log


def test_rotate_replaces_the_secret_and_the_old_one_stops_at_once(alice, bob, tenant):
    old = bob.key
    r = alice.api.post(f"/api/v1/api-keys/{old.key.prefix}/rotate/")
    assert r.status_code == 201
    new = r.json()
    assert new["name"] == "bob-key" and new["role"] == "reviewer" and new["prefix"] != old.key.prefix
    assert bearer(old.secret).get("/api/v1/workflows/").status_code == 401
    assert bearer(new["key"]).get("/api/v1/workflows/").status_code == 200
    replaced = alice.api.get(f"/api/v1/api-keys/{old.key.prefix}/").json()
    assert replaced["active"] is False and replaced["replaced_by"] == new["prefix"]
    entry = AuditEntry.objects.filter(tenant=tenant, action="api_key.rotate").get()
    assert entry.data["old_prefix"] == old.key.prefix and entry.data["prefix"] == new["prefix"]
    # a revoked key cannot be rotated back to life
    r = alice.api.post(f"/api/v1/api-keys/{old.key.prefix}/rotate/")
    assert r.status_code == 409 and r.json()["error"] == "api_key_revoked"


def test_revoke_stops_the_key_and_is_idempotent(alice, carol, tenant):
    r = alice.api.post(f"/api/v1/api-keys/{carol.key.key.prefix}/revoke/")
    assert r.status_code == 200 and r.json()["active"] is False and r.json()["revoked_at"]
    assert carol.api.get("/api/v1/workflows/").status_code == 401
    log = actions(tenant)
    assert alice.api.delete(f"/api/v1/api-keys/{carol.key.key.prefix}/").status_code == 200
    assert actions(tenant) == log  # nothing new to record
    assert log.count("api_key.revoke") == 1
    assert [row["name"] for row in alice.api.get("/api/v1/api-keys/?state=revoked").json()["results"]] == [
        "carol-key"
    ]


def test_members_added_reroled_and_removed_through_the_api(alice, bob, tenant):
    r = alice.api.get("/api/v1/members/")
    assert [(m["username"], m["role"]) for m in r.json()["results"]] == [
        ("alice", "admin"),
        ("bob", "reviewer"),
    ]
    r = alice.api.post(
        "/api/v1/members/",
        {"username": "dave", "role": "viewer", "password": "a-long-passphrase"},
        format="json",
    )
    assert r.status_code == 201 and r.json() == {**r.json(), "username": "dave", "role": "viewer"}
    from django.contrib.auth import authenticate

    assert authenticate(username="dave", password="a-long-passphrase") is not None
    r = alice.api.patch("/api/v1/members/dave/", {"role": "reviewer"}, format="json")
    assert r.status_code == 200 and r.json()["role"] == "reviewer"
    r = alice.api.delete("/api/v1/members/dave/")
    assert r.status_code == 200 and r.json() == {"username": "dave", "revoked_keys": []}
    assert not Membership.objects.filter(tenant=tenant, user__username="dave").exists()
    assert actions(tenant)[-3:] == ["member.add", "member.role", "member.remove"]


def test_each_tenant_lists_exactly_its_own_members(alice, bob, mallory, tenant):
    from memoryhub.accounts.tenancy import add_member

    add_member(mallory.tenant, "bob", Role.VIEWER)  # bob belongs to both tenants now

    def names(party):
        return {(m["username"], m["role"]) for m in party.api.get("/api/v1/members/").json()["results"]}

    assert names(alice) == {("alice", "admin"), ("bob", "reviewer")}
    assert names(mallory) == {("mallory", "admin"), ("bob", "viewer")}


def test_an_existing_user_joins_without_a_password_change(alice, mallory, tenant):
    before = mallory.user.password
    r = alice.api.post(
        "/api/v1/members/",
        {"username": "mallory", "role": "viewer", "password": "new-password-1"},
        format="json",
    )
    assert r.status_code == 400 and r.json()["field"] == "password"
    r = alice.api.post("/api/v1/members/", {"username": "mallory", "role": "viewer"}, format="json")
    assert r.status_code == 201
    mallory.user.refresh_from_db()
    assert mallory.user.password == before


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"username": "bob", "role": "viewer"}, 409, "already_member"),
        ({"username": "erin", "role": "viewer"}, 400, "invalid_field"),  # new user needs a password
        ({"username": "erin", "role": "viewer", "password": "short"}, 400, "invalid_field"),
        ({"username": "erin", "role": "boss", "password": "a-long-passphrase"}, 400, "invalid_field"),
        ({"username": "bad name!", "role": "viewer", "password": "a-long-passphrase"}, 400, "invalid_field"),
        ({"username": 7, "role": "viewer"}, 400, "invalid_field"),
    ],
)
def test_bad_member_input_is_a_clear_4xx_and_writes_nothing(alice, bob, tenant, body, status, code):
    from django.contrib.auth import get_user_model

    users, log = get_user_model().objects.count(), actions(tenant)
    r = alice.api.post("/api/v1/members/", body, format="json")
    assert r.status_code == status and r.json()["error"] == code, r.json()
    assert get_user_model().objects.count() == users and actions(tenant) == log


def test_the_last_admin_can_be_neither_demoted_nor_removed(alice, bob, tenant):
    log = actions(tenant)
    r = alice.api.patch("/api/v1/members/alice/", {"role": "viewer"}, format="json")
    assert r.status_code == 409 and r.json()["error"] == "last_admin"
    r = alice.api.delete("/api/v1/members/alice/")
    assert r.status_code == 409 and r.json()["error"] == "last_admin"
    assert actions(tenant) == log
    assert alice.api.patch("/api/v1/members/bob/", {"role": "admin"}, format="json").status_code == 200
    assert alice.api.patch("/api/v1/members/alice/", {"role": "viewer"}, format="json").status_code == 200


def test_removing_a_member_revokes_the_keys_they_created(alice, bob, tenant):
    mine = issue_api_key(tenant, "bob-made", role=Role.REVIEWER, created_by=bob.user)
    theirs = issue_api_key(tenant, "alice-made", role=Role.REVIEWER, created_by=alice.user)
    r = alice.api.delete("/api/v1/members/bob/")
    assert r.status_code == 200 and r.json()["revoked_keys"] == [mine.key.prefix]
    assert bearer(mine.secret).get("/api/v1/workflows/").status_code == 401
    assert bearer(theirs.secret).get("/api/v1/workflows/").status_code == 200
    revoke = AuditEntry.objects.filter(tenant=tenant, action="api_key.revoke").get()
    assert revoke.data["prefix"] == mine.key.prefix and "removed" in revoke.data["reason"]


def test_a_demoted_member_keeps_no_key_above_their_new_role(alice, bob, tenant):
    assert alice.api.patch("/api/v1/members/bob/", {"role": "admin"}, format="json").status_code == 200
    admin_key = issue_api_key(tenant, "bob-admin", role=Role.ADMIN, created_by=bob.user)
    viewer_key = issue_api_key(tenant, "bob-viewer", role=Role.VIEWER, created_by=bob.user)
    assert bearer(admin_key.secret).get("/api/v1/api-keys/").status_code == 200
    r = alice.api.patch("/api/v1/members/bob/", {"role": "viewer"}, format="json")
    assert r.status_code == 200
    # narrowed, not revoked: it still reads, as a viewer, and can no longer manage keys
    assert bearer(admin_key.secret).get("/api/v1/workflows/").status_code == 200
    assert bearer(admin_key.secret).get("/api/v1/api-keys/").status_code == 403
    assert ApiKey.objects.get(pk=admin_key.key.pk).role == Role.VIEWER
    assert bearer(viewer_key.secret).get("/api/v1/workflows/").status_code == 200
    entry = AuditEntry.objects.filter(tenant=tenant, action="member.role").order_by("pk").last()
    assert entry.data["narrowed_keys"] == [admin_key.key.prefix]
    narrow = AuditEntry.objects.filter(tenant=tenant, action="api_key.narrow").get()
    assert (narrow.data["prefix"], narrow.data["from"], narrow.data["role"]) == (
        admin_key.key.prefix,
        Role.ADMIN,
        Role.VIEWER,
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_admins_removing_each_other_at_once_leave_one_admin(tenant):
    from memoryhub.accounts.tenancy import add_member, remove_member
    from memoryhub.core.actors import Actor
    from memoryhub.core.errors import Conflict

    if connection.vendor != "postgresql":
        pytest.fail("needs PostgreSQL: SQLite serialises writers, so there is no race to test")
    first = add_member(tenant, "ann", Role.ADMIN, password="x-long-password")
    second = add_member(tenant, "ben", Role.ADMIN, password="x-long-password")
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def remove(membership, by):
        from django.db import connection as thread_connection

        try:
            barrier.wait()
            remove_member(membership, Actor.user(by))
            outcomes.append("removed")
        except Conflict as exc:
            outcomes.append(exc.code)
        finally:
            thread_connection.close()

    threads = [
        threading.Thread(target=remove, args=(first, "ben")),
        threading.Thread(target=remove, args=(second, "ann")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["last_admin", "removed"]
    assert Membership.objects.filter(tenant=tenant, role=Role.ADMIN).count() == 1
