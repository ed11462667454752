"""The payload scheme: text of append-only rows lives in a purgeable Payload; the row (and the audit
hash) keeps only its structure, the reference and the digest."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction

from audit.log import record
from audit.models import AuditEntry, Payload
from audit.payloads import split_audit_data
from audit.purge import purge_events
from audit.verify import verify_chain
from memoryhub.core.actors import Actor
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.models import LifecycleEvent, ValidationRecord
from tests.audit.test_audit_chain import append_only_off, tampering
from tests.factories import append, event, make_workflow

pytestmark = pytest.mark.django_db
ACTOR = Actor.user("alice")


def raw_row(table: str, pk: int, column: str):
    with connection.cursor() as cur:
        cur.execute(f"SELECT {column} FROM {table} WHERE id = %s", [pk])
        value = cur.fetchone()[0]
    return json.loads(value) if isinstance(value, str) and value and value[0] in "[{" else value


def test_structure_stays_chained_and_text_goes_to_the_payload():
    chained, text = split_audit_data(
        {
            "workflow": "wf-1",
            "version": 3,
            "reason": "Jane Roe asked",
            "selector": {"subject": "jane"},
            "x": "a b",
        }
    )
    assert chained == {"workflow": "wf-1", "version": 3}
    assert set(text) == {"reason", "selector", "x"}  # unknown keys with text are payload by default


@tampering
def test_an_audit_entry_keeps_only_digest_and_reference_in_the_chain(tenant):
    with transaction.atomic():
        entry = record(tenant, ACTOR, "note.add", ("note", "n1"), {"version": 2, "note": "Jane Roe called"})
    entry = AuditEntry.objects.get(pk=entry.pk)
    assert entry.data == {"version": 2, "note": "Jane Roe called"}
    stored = raw_row("audit_auditentry", entry.pk, "data")
    assert "Jane" not in json.dumps(stored) and stored["$text"] == ["note"]
    assert entry.payload.body == {"note": "Jane Roe called"} and entry.payload_digest == entry.payload.digest
    assert verify_chain(tenant)["ok"] is True
    # Only the purge tombstone may change a payload ...
    with pytest.raises(DatabaseError), transaction.atomic():
        Payload.objects.filter(pk=entry.payload_id).update(body={"note": "someone else"})
    with pytest.raises(DatabaseError), transaction.atomic():
        Payload.objects.filter(pk=entry.payload_id).delete()
    # ... and an owner who drops the trigger to edit it behind the chain's back is caught by its digest.
    with append_only_off():
        Payload.objects.filter(pk=entry.payload_id).update(body={"note": "someone else"})
    result = verify_chain(tenant)
    assert (result["ok"], result["problem"], result["first_bad_seq"]) == (False, "edited", entry.seq)


def test_validation_and_lifecycle_text_is_purged_while_rows_and_chain_stay(tenant):
    wf = make_workflow(tenant, "wf-p")
    secret = "Jane Roe disputes charge ch_8812 by phone"
    append(wf, [event(1, content=secret + "."), event(2), event(3)])
    fact = {"key": "cust-jane-roe", "kind": "issue", "text": secret, "state": "open", "source_seqs": [2]}
    s = create_summary(
        wf,
        content={"schema": "memoryhub.summary/v1", "narrative": "n", "facts": [fact]},
        covers_from_seq=1,
        covers_to_seq=3,
        compactor={"name": "manual"},
        actor=ACTOR,
    )
    lifecycle.validate(s, ACTOR)
    record_ = ValidationRecord.objects.get(summary=s)
    assert not record_.passed and "cust-jane-roe" in json.dumps(record_.checks)
    assert "cust-jane-roe" not in json.dumps(raw_row("memoryhub_validationrecord", record_.pk, "checks"))
    assert "cust-jane-roe" not in json.dumps(raw_row("memoryhub_validationrecord", record_.pk, "reasons"))
    validate_event = LifecycleEvent.objects.get(summary=s, action="validate")
    assert "cust-jane-roe" in validate_event.reason
    assert "cust-jane-roe" not in (raw_row("memoryhub_lifecycleevent", validate_event.pk, "reason") or "")

    outcome = purge_events(wf, {"seqs": [1]}, ACTOR, "erasure")
    assert outcome.payloads
    record_ = ValidationRecord.objects.get(pk=record_.pk)
    validate_event = LifecycleEvent.objects.get(pk=validate_event.pk)
    marker = f"unavailable: purged by {outcome.purge.purge_id}"
    assert all(c["detail"].startswith(marker) for c in record_.checks)
    assert [c["name"] for c in record_.checks] and record_.passed is False  # the structure stays
    assert record_.reasons[0].startswith(marker) and validate_event.reason.startswith(marker)
    texts = json.dumps([e.data for e in AuditEntry.objects.filter(tenant=tenant)])
    assert "cust-jane-roe" not in texts and "Jane Roe" not in texts
    assert verify_chain(tenant)["ok"] is True  # digests kept: the chain still verifies


@pytest.mark.impossible_state(
    "a validation record no validator wrote, bulk-inserted to test the payload split of bulk_create itself"
)
def test_bulk_inserted_rows_get_their_payloads_too(tenant):
    wf = make_workflow(tenant, "wf-b")
    append(wf, [event(1)])
    s = create_summary(
        wf,
        content={"schema": "memoryhub.summary/v1", "narrative": "n", "facts": []},
        covers_from_seq=1,
        covers_to_seq=1,
        compactor={"name": "manual"},
        actor=ACTOR,
    )
    rows = [
        ValidationRecord(
            summary=s,
            validator_version="t",
            checks=[{"name": "x", "passed": False, "detail": "quotes Jane Roe"}],
            passed=False,
            reasons=["x: quotes Jane Roe"],
        )
    ]
    ValidationRecord.objects.bulk_create(rows)
    stored = ValidationRecord.objects.get(summary=s, validator_version="t")
    assert stored.checks[0]["detail"] == "quotes Jane Roe" and stored.reasons == ["x: quotes Jane Roe"]
    assert "Jane" not in json.dumps(raw_row("memoryhub_validationrecord", stored.pk, "checks"))
