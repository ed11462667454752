"""Keys follow their humans (issue #30, item 3).

A key records the human it ultimately acts for, however it was made: in the browser, through the
API with another key, or by rotating a key. Removing that member revokes every such key (one
transaction, one audit entry per key, the member entry lists them); demoting them narrows every
such key to the new role. Authentication enforces the same rule, so a membership changed behind
the services' back (admin site, shell) cannot leave a key answering above its human.
"""

from __future__ import annotations

import re
from importlib import import_module

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from audit.models import AuditEntry
from memoryhub.accounts import tenancy
from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.models import ApiKey, Membership, Role, narrower_role
from memoryhub.models.tenancy import ROLE_RANK
from tests.helpers import form_post

pytestmark = pytest.mark.django_db


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def status_of(secret: str, url: str = "/api/v1/workflows/") -> int:
    return bearer(secret).get(url).status_code


def secret_on_page(response) -> str:
    return re.search(r'data-testid="secret">([^<]+)<', response.content.decode()).group(1)


def offboarding_chain(bob, tenant) -> dict[str, str]:
    """Bob (an admin) makes a key in the browser, mints a key with it through the API, rotates that
    one with itself, and mints a fourth with the rotated key: four secrets, three levels deep."""
    browser = secret_on_page(form_post(bob.web, "/settings/keys/", {"name": "laptop", "role": "admin"}))
    minted = bearer(browser).post("/api/v1/api-keys/", {"name": "ci", "role": "admin"}, format="json")
    assert minted.status_code == 201, minted.json()
    minted_prefix = minted.json()["prefix"]
    rotated = bearer(minted.json()["key"]).post(f"/api/v1/api-keys/{minted_prefix}/rotate/")
    assert rotated.status_code == 201, rotated.json()
    deep = bearer(rotated.json()["key"]).post(
        "/api/v1/api-keys/", {"name": "agent", "role": "reviewer"}, format="json"
    )
    assert deep.status_code == 201, deep.json()
    assert deep.json()["acts_for"] == "bob" and rotated.json()["acts_for"] == "bob"
    return {"browser": browser, "rotated": rotated.json()["key"], "deep": deep.json()["key"]}


@pytest.fixture
def bob_admin(alice, bob):
    tenancy.change_member_role(bob.membership, Role.ADMIN, tenancy.Actor.user("alice"))
    return bob


def test_every_key_of_the_chain_acts_for_the_human_who_started_it(alice, bob_admin, tenant):
    offboarding_chain(bob_admin, tenant)
    made = ApiKey.objects.filter(tenant=tenant).exclude(name__in=["alice-key", "bob-key"])
    assert sorted(made.values_list("name", "acts_for__username")) == [
        ("agent", "bob"),
        ("ci", "bob"),  # minted with the browser key
        ("ci", "bob"),  # its rotation
        ("laptop", "bob"),
    ]
    # the API-made keys still name the key that made them, as the audit log names actors
    laptop = made.get(name="laptop")
    first_ci, rotated_ci = made.filter(name="ci").order_by("pk")
    assert laptop.created_by == bob_admin.user
    assert first_ci.created_by_actor == f"api_key:laptop({laptop.prefix})"
    assert rotated_ci.created_by_actor == f"api_key:ci({first_ci.prefix})"
    assert made.get(name="agent").created_by_actor == f"api_key:ci({rotated_ci.prefix})"
    assert first_ci.replaced_by == rotated_ci


@pytest.mark.parametrize("door", ["api", "page"])
def test_removing_a_member_revokes_the_whole_chain_and_the_log_names_each_key(alice, bob_admin, tenant, door):
    secrets = offboarding_chain(bob_admin, tenant)
    alices = issue_api_key(tenant, "alice-laptop", role=Role.ADMIN, created_by=alice.user)
    assert all(status_of(s) == 200 for s in secrets.values())
    active = set(
        ApiKey.objects.filter(tenant=tenant, acts_for=bob_admin.user, revoked_at=None).values_list(
            "prefix", flat=True
        )
    )
    assert len(active) == 3  # laptop, the rotated ci, agent (the first ci was revoked by its rotation)

    if door == "api":
        r = alice.api.delete("/api/v1/members/bob/")
        assert r.status_code == 200 and set(r.json()["revoked_keys"]) == active
    else:
        assert form_post(alice.web, "/settings/members/bob/remove/").status_code == 302

    assert {name: status_of(s) for name, s in secrets.items()} == dict.fromkeys(secrets, 401)
    assert status_of(alices.secret) == 200 and status_of(alice.key.secret) == 200
    remove = AuditEntry.objects.get(tenant=tenant, action="member.remove")
    assert set(remove.data["revoked_keys"]) == active
    revokes = AuditEntry.objects.filter(tenant=tenant, action="api_key.revoke")
    revoked = {e.data["prefix"]: e.data["reason"] for e in revokes}
    assert revoked.keys() >= active and all("removed" in revoked[p] for p in active)


def test_removal_is_one_transaction_a_failure_revokes_nothing(alice, bob_admin, tenant, monkeypatch):
    secrets = offboarding_chain(bob_admin, tenant)
    real_revoke, calls = tenancy.revoke_api_key, []

    def revoke_then_fail(key, actor, reason=""):
        calls.append(key.prefix)
        if len(calls) == 2:
            raise RuntimeError("the database went away mid-offboarding")
        return real_revoke(key, actor, reason=reason)

    monkeypatch.setattr(tenancy, "revoke_api_key", revoke_then_fail)
    with pytest.raises(RuntimeError):
        tenancy.remove_member(bob_admin.membership, tenancy.Actor.user("alice"))
    assert len(calls) == 2
    assert Membership.objects.filter(pk=bob_admin.membership.pk).exists()
    assert all(status_of(s) == 200 for s in secrets.values())
    assert not AuditEntry.objects.filter(
        tenant=tenant, action__in=["member.remove", "api_key.revoke"]
    ).exists()


def test_demotion_narrows_every_key_of_the_chain_to_the_new_role(alice, bob_admin, tenant):
    secrets = offboarding_chain(bob_admin, tenant)
    viewer = bearer(secrets["rotated"]).post(
        "/api/v1/api-keys/", {"name": "ro", "role": "viewer"}, format="json"
    )
    assert viewer.status_code == 201
    assert status_of(secrets["browser"], "/api/v1/api-keys/") == 200

    r = alice.api.patch("/api/v1/members/bob/", {"role": "reviewer"}, format="json")
    assert r.status_code == 200 and r.json()["role"] == "reviewer"

    keys = ApiKey.objects.filter(tenant=tenant, acts_for=bob_admin.user, revoked_at=None)
    assert dict(keys.values_list("name", "role")) == {
        "laptop": Role.REVIEWER,
        "ci": Role.REVIEWER,
        "agent": Role.REVIEWER,  # was reviewer already
        "ro": Role.VIEWER,  # below the new role: untouched
    }
    for secret in secrets.values():
        assert status_of(secret) == 200  # still reads
        assert status_of(secret, "/api/v1/api-keys/") == 403  # no longer manages keys
    entry = AuditEntry.objects.filter(tenant=tenant, action="member.role").latest("pk")
    narrowed = set(keys.filter(name__in=["laptop", "ci"]).values_list("prefix", flat=True))
    assert set(entry.data["narrowed_keys"]) == narrowed
    logged = AuditEntry.objects.filter(tenant=tenant, action="api_key.narrow")
    assert {(e.data["prefix"], e.data["from"], e.data["role"]) for e in logged} == {
        (p, Role.ADMIN, Role.REVIEWER) for p in narrowed
    }
    assert status_of(viewer.json()["key"]) == 200


def test_a_key_rotated_by_another_admin_acts_for_that_admin(alice, bob_admin, tenant):
    """The rotated secret goes to whoever rotated: removing the old key's human does not stop it,
    removing the rotator's does."""
    bobs = issue_api_key(tenant, "bob-ci", role=Role.REVIEWER, created_by=bob_admin.user)
    alices_key = issue_api_key(tenant, "alice-laptop", role=Role.ADMIN, created_by=alice.user)
    r = bearer(alices_key.secret).post(f"/api/v1/api-keys/{bobs.key.prefix}/rotate/")
    assert r.status_code == 201 and r.json()["acts_for"] == "alice"
    assert alice.api.delete("/api/v1/members/bob/").status_code == 200
    assert status_of(r.json()["key"]) == 200


@pytest.mark.impossible_state("the admin site or a shell edits a membership without the services")
def test_a_membership_changed_behind_the_services_back_still_binds_the_key(alice, bob_admin, tenant):
    """The admin site or a shell can delete or edit a membership without the services: the key
    then authenticates only as far as its human's current membership allows."""
    secrets = offboarding_chain(bob_admin, tenant)
    Membership.objects.filter(pk=bob_admin.membership.pk).update(role=Role.VIEWER)
    assert status_of(secrets["browser"]) == 200
    assert status_of(secrets["browser"], "/api/v1/api-keys/") == 403
    assert bearer(secrets["browser"]).post("/api/v1/workflows/", {}, format="json").status_code == 403
    Membership.objects.filter(pk=bob_admin.membership.pk).delete()
    assert {name: status_of(s) for name, s in secrets.items()} == dict.fromkeys(secrets, 401)


def test_a_deactivated_or_deleted_human_stops_their_keys(alice, bob_admin, tenant):
    secrets = offboarding_chain(bob_admin, tenant)
    get_user_model().objects.filter(pk=bob_admin.user.pk).update(is_active=False)
    assert status_of(secrets["deep"]) == 401
    get_user_model().objects.filter(pk=bob_admin.user.pk).update(is_active=True)
    assert status_of(secrets["deep"]) == 200
    bob_admin.user.delete()
    assert {name: status_of(s) for name, s in secrets.items()} == dict.fromkeys(secrets, 401)
    assert not ApiKey.objects.filter(
        tenant=tenant, revoked_at=None, name__in=["laptop", "ci", "agent"]
    ).exists()


def test_keys_made_by_the_system_act_for_no_human_and_keep_working(alice, bob_admin, tenant):
    setup = issue_api_key(tenant, "setup")
    r = bearer(setup.secret).post("/api/v1/api-keys/", {"name": "bot", "role": "viewer"}, format="json")
    assert r.status_code == 201 and r.json()["acts_for"] is None
    assert alice.api.delete("/api/v1/members/bob/").status_code == 200
    assert status_of(r.json()["key"]) == 200


def test_every_role_is_ranked_so_narrowing_covers_new_roles():
    """Narrowing compares ranks: a role added to Role without a rank would break it."""
    assert set(ROLE_RANK) == set(Role.values)
    ranked = sorted(Role.values, key=lambda role: ROLE_RANK[Role(role)])
    for i, lower in enumerate(ranked):
        for higher in ranked[i:]:
            assert narrower_role(lower, higher) == lower == narrower_role(higher, lower)


@pytest.mark.impossible_state("keys as they were before acts_for existed")
def test_the_migration_backfills_the_human_of_existing_keys(alice, bob_admin, tenant):
    offboarding_chain(bob_admin, tenant)
    system = issue_api_key(tenant, "setup")
    expected = dict(ApiKey.objects.values_list("pk", "acts_for_id"))
    assert expected[system.key.pk] is None and sum(v == bob_admin.user.pk for v in expected.values()) == 4
    ApiKey.objects.update(acts_for=None)
    migration = import_module("memoryhub.migrations.0022_trustdata_key_acts_for")
    from django.apps import apps

    migration.backfill_acts_for(apps, None)
    assert dict(ApiKey.objects.values_list("pk", "acts_for_id")) == expected
