"""The record is append-only in the database itself: raw SQL UPDATE/DELETE is refused by triggers
on SQLite and PostgreSQL (run this file under both; CI runs both)."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from audit.models import AuditEntry, Purge
from memoryhub.memory import lifecycle
from memoryhub.models import Event, LifecycleEvent, Summary, ValidationRecord
from tests.factories import WORKER, activated, build_workflow

pytestmark = pytest.mark.django_db
# The database half of a purge done by hand (a Purge row, then the tombstone UPDATE in SQL), to test
# the append-only trigger's exception; audit.purge.purge_events is the only writer in the app.
hand_purge = pytest.mark.impossible_state("a purge tombstone written by hand, not by audit.purge")


def refused(sql: str, params: list) -> None:
    """The statement fails with the trigger's message and changes nothing (own savepoint)."""
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql, params)


def allowed(sql: str, params: list) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@pytest.fixture
def history(tenant):
    wf = build_workflow(tenant, n=20)
    s1 = activated(wf)
    return wf, s1


def test_the_database_under_test(history):
    # Printed in the report header too; here so a run names what it proved.
    assert connection.vendor in {"sqlite", "postgresql"}


# -- events ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [("content", "rewritten history"), ("seq", 99), ("content_hash", "sha256:00"), ("token_count", 1),
     ("kind", "note"), ("cum_tokens", 0)],
)  # fmt: skip
def test_event_columns_cannot_be_updated(history, column, value):
    wf, _ = history
    refused(f"UPDATE memoryhub_event SET {column} = %s WHERE workflow_id = %s AND seq = 5", [value, wf.pk])
    assert Event.objects.get(workflow=wf, seq=5).content.startswith("message number 5")


def test_events_cannot_be_deleted(history):
    wf, _ = history
    refused("DELETE FROM memoryhub_event WHERE workflow_id = %s AND seq = 5", [wf.pk])
    refused("DELETE FROM memoryhub_event WHERE workflow_id = %s", [wf.pk])
    assert Event.objects.filter(workflow=wf).count() == 20


@hand_purge
def test_only_the_purge_tombstone_update_is_allowed_and_only_once(history, tenant):
    wf, _ = history
    purge = Purge.objects.create(
        tenant=tenant, workflow=wf, purge_id="pur_test", reason="GDPR", actor="user:alice"
    )
    before = Event.objects.get(workflow=wf, seq=5)
    now = timezone.now()
    tombstone = (
        "UPDATE memoryhub_event SET content = '', facts = '[]', purged_at = %s, purge_id = %s WHERE id = %s"
    )
    # A tombstone that also rewrites identity or hashes is refused.
    refused(
        "UPDATE memoryhub_event SET content = '', purged_at = %s, content_hash = 'sha256:x' WHERE id = %s",
        [now, before.pk],
    )
    refused(
        "UPDATE memoryhub_event SET content = '', purged_at = %s, seq = 77 WHERE id = %s", [now, before.pk]
    )
    assert allowed(tombstone, [now, purge.pk, before.pk]) == 1
    after = Event.objects.get(pk=before.pk)
    assert after.content == "" and after.purged_at is not None
    assert (after.seq, after.content_hash, after.token_count, after.cum_tokens) == (
        before.seq, before.content_hash, before.token_count, before.cum_tokens,
    )  # fmt: skip
    # Once purged, the row is frozen: no second rewrite, no un-purge.
    refused("UPDATE memoryhub_event SET content = 'back' WHERE id = %s", [before.pk])
    refused("UPDATE memoryhub_event SET purged_at = NULL WHERE id = %s", [before.pk])


# -- summaries -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("content", '{"narrative":"forged","facts":[]}'),
        ("content_hash", "sha256:" + "1" * 64),
        ("covers_from_seq", 2),
        ("covers_to_seq", 3),
        ("source_revision", 1),
        ("source_refs", '["spec-v1"]'),
        ("excluded_categories", '["facts"]'),
        ("compactor_name", "other"),
        ("model", "gpt-evil"),
        ("prompt_template_version", "p0"),
        ("token_budget", 1),
        ("token_count", 1),
        ("version", 7),
        ("summary_id", "sum_0000000000000000"),
        ("created_by", "user:mallory"),
    ],
)
def test_summary_content_lineage_config_and_hash_cannot_be_updated(history, column, value):
    _, s1 = history
    refused(f"UPDATE memoryhub_summary SET {column} = %s WHERE id = %s", [value, s1.pk])
    fresh = Summary.objects.get(pk=s1.pk)
    assert (fresh.content, fresh.content_hash, fresh.covers_to_seq) == (
        s1.content,
        s1.content_hash,
        s1.covers_to_seq,
    )


@pytest.mark.impossible_state(
    "a raw status UPDATE, to show the trigger lets status change (the lifecycle is the only writer in the app)"
)
def test_summary_status_may_change_but_rows_never_disappear(history):
    _, s1 = history
    assert allowed("UPDATE memoryhub_summary SET status = 'QUARANTINED' WHERE id = %s", [s1.pk]) == 1
    refused("DELETE FROM memoryhub_summary WHERE id = %s", [s1.pk])


@hand_purge
def test_summary_content_purge_sets_purged_by_once(history, tenant):
    wf, s1 = history
    purge = Purge.objects.create(
        tenant=tenant, workflow=wf, purge_id="pur_1", reason="GDPR", actor="user:alice"
    )
    other = Purge.objects.create(tenant=tenant, workflow=wf, purge_id="pur_2", reason="x", actor="user:alice")
    # Content may only be emptied together with setting purged_by (hash kept as provenance).
    refused("UPDATE memoryhub_summary SET content = '' WHERE id = %s", [s1.pk])
    assert (
        allowed(
            "UPDATE memoryhub_summary SET content = '', purged_by_id = %s WHERE id = %s", [purge.pk, s1.pk]
        )
        == 1
    )
    assert Summary.objects.get(pk=s1.pk).content_hash == s1.content_hash
    # The purge marker is set once: it can be neither cleared nor re-pointed, nor the content refilled.
    refused("UPDATE memoryhub_summary SET purged_by_id = NULL WHERE id = %s", [s1.pk])
    refused("UPDATE memoryhub_summary SET purged_by_id = %s WHERE id = %s", [other.pk, s1.pk])
    refused("UPDATE memoryhub_summary SET content = %s WHERE id = %s", [s1.content, s1.pk])


# -- validation records, lifecycle events, audit entries -------------------------------------------


def test_validation_records_are_immutable(history):
    _, s1 = history
    record = ValidationRecord.objects.get(summary=s1)
    refused("UPDATE memoryhub_validationrecord SET passed = %s WHERE id = %s", [False, record.pk])
    refused("UPDATE memoryhub_validationrecord SET waived_checks = '[]' WHERE id = %s", [record.pk])
    refused("DELETE FROM memoryhub_validationrecord WHERE id = %s", [record.pk])
    assert ValidationRecord.objects.get(pk=record.pk).passed is True


def test_lifecycle_events_are_immutable(history):
    wf, s1 = history
    lifecycle.activate(s1, 0, WORKER)  # a stale attempt: the row a cover-up would target
    stale = LifecycleEvent.objects.get(summary=s1, result="stale")
    refused("UPDATE memoryhub_lifecycleevent SET result = 'applied' WHERE id = %s", [stale.pk])
    refused("UPDATE memoryhub_lifecycleevent SET actor = 'user:nobody' WHERE id = %s", [stale.pk])
    refused("DELETE FROM memoryhub_lifecycleevent WHERE id = %s", [stale.pk])
    refused("DELETE FROM memoryhub_lifecycleevent WHERE workflow_id = %s", [wf.pk])
    assert LifecycleEvent.objects.filter(workflow=wf).count() == 3


def test_audit_entries_are_immutable(history):
    entry = AuditEntry.objects.filter(action="summary.activate").first()
    refused("UPDATE audit_auditentry SET action = 'nothing' WHERE id = %s", [entry.pk])
    refused("DELETE FROM audit_auditentry WHERE id = %s", [entry.pk])
