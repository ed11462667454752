"""History cannot be wiped quietly: TRUNCATE of an append-only table is refused, the audit chain head
(the truncation witness) only moves forward, an emptied chain never verifies, and the event table's
one allowed UPDATE is a real purge tombstone."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction

from audit.models import AuditChainHead, AuditEntry, Purge
from audit.verify import verify_chain
from memoryhub.core.append_only import AUDIT_RULES, UPDATE_RULES
from memoryhub.models import Event
from tests.audit.test_audit_chain import add_entries, append_only_off, tampering
from tests.factories import append, event, make_workflow
from tests.memoryhub.test_append_only import hand_purge

pytestmark = pytest.mark.django_db

APPEND_ONLY_TABLES = sorted([*UPDATE_RULES, *AUDIT_RULES])


def refused(sql: str, params: list | None = None) -> str:
    with pytest.raises(DatabaseError) as err, transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params or [])
    return str(err.value)


@pytest.mark.postgres
@pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
def test_truncate_of_every_append_only_table_is_refused(tenant, table):
    add_entries(tenant, 2)
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no pending FK checks: the trigger decides
    message = refused(f"TRUNCATE {table} CASCADE")
    assert "TRUNCATE of" in message and "append-only" in message
    assert AuditEntry.objects.filter(tenant=tenant).count() == 3  # tenant.create + 2


def test_the_chain_head_only_moves_forward(tenant):
    add_entries(tenant, 3)
    head = AuditChainHead.objects.get(tenant=tenant).seq
    assert "refused" in refused("UPDATE audit_auditchainhead SET seq = 1 WHERE tenant_id = %s", [tenant.pk])
    assert "refused" in refused(
        "UPDATE audit_auditchainhead SET entry_hash = 'sha256:0' WHERE tenant_id = %s", [tenant.pk]
    )
    assert "refused" in refused("DELETE FROM audit_auditchainhead WHERE tenant_id = %s", [tenant.pk])
    assert AuditChainHead.objects.get(tenant=tenant).seq == head
    add_entries(tenant, 1)  # appending still moves it
    assert AuditChainHead.objects.get(tenant=tenant).seq == head + 1


@tampering
def test_an_emptied_chain_does_not_verify(tenant):
    add_entries(tenant, 5)
    with append_only_off(), connection.cursor() as cur:  # an owner who dropped the triggers
        cur.execute("DELETE FROM audit_auditentry WHERE tenant_id = %s", [tenant.pk])
    assert not AuditEntry.objects.filter(tenant=tenant).exists()
    result = verify_chain(tenant)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "truncated", 1)


@pytest.fixture
def stored(tenant):
    wf = make_workflow(tenant, "tomb-1")
    append(
        wf,
        [
            event(
                1,
                content="Jane Roe called about ch_8812",
                kind="tool_call",
                tool_call_id="call-1",
                side_effect="pending",
                facts=[{"key": "customer:jane", "kind": "issue", "text": "Jane Roe", "state": "open"}],
                refs=["ticket-1"],
            )
        ],
    )
    ev = Event.objects.get(workflow=wf, seq=1)
    purge = Purge.objects.create(tenant=tenant, workflow=wf, purge_id="prg_test", reason="t", actor="t")
    return ev, purge


TOMBSTONE = {"content": "''", "facts": "'[]'", "refs": "'[]'", "purged_at": "CURRENT_TIMESTAMP"}


def tombstone_sql(**overrides: str) -> str:
    columns = {**TOMBSTONE, "purge_id": "%s", **overrides}
    return (
        "UPDATE memoryhub_event SET " + ", ".join(f"{k} = {v}" for k, v in columns.items()) + " WHERE id = %s"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {"facts": """'[{"key": "customer:jane"}]'"""},  # facts kept
        {"refs": """'["ticket-1"]'"""},  # refs kept
        {"content": "'[redacted]'"},  # text smuggled in
        {"purge_id": "NULL"},  # no purge reference
        {"agent": "'someone-else'"},
        {"role": "'user'"},
        {"kind": "'message'"},
        {"tool_call_id": "'call-2'"},
        {"side_effect": "'done'"},
        {"content_hash": "'sha256:00'"},
        {"token_count": "token_count + 1"},
    ],
    ids=lambda o: next(iter(o)),
)
@hand_purge
def test_the_event_purge_exception_accepts_only_a_real_tombstone(stored, overrides):
    ev, purge = stored
    sql = tombstone_sql(**overrides)
    params = [ev.pk] if overrides.get("purge_id") == "NULL" else [purge.pk, ev.pk]
    assert "refused" in refused(sql, params)
    ev.refresh_from_db()
    assert ev.purged_at is None and ev.content.startswith("Jane Roe")


@hand_purge
def test_a_real_tombstone_is_accepted_once(stored):
    ev, purge = stored
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(tombstone_sql(), [purge.pk, ev.pk])
    ev.refresh_from_db()
    assert (ev.content, ev.facts, ev.refs, ev.purge_id) == ("", [], [], purge.pk)
    assert (ev.agent, ev.kind, ev.tool_call_id, ev.side_effect) == (
        "requirements-agent",
        "tool_call",
        "call-1",
        "pending",
    )
    assert "refused" in refused(tombstone_sql(), [purge.pk, ev.pk])  # once only
    assert json.dumps(ev.facts) == "[]"
