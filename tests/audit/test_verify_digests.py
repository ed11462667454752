"""audit_verify covers every digest, whatever owns it (issue #30, item 6).

Every model keeping text in a purgeable payload (found by walking the models), every payload, the
content hashes of summaries (observed compactions included) and events, and comments against the
digest their audit entry kept: an owner's edit of any of them, behind the append-only triggers, is
reported as ``edited`` with the object that owns it — by the service, the command and the API. A
walker fails on a digest column of any model that no check covers.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEntry, Payload, SummaryComment
from audit.review import add_comment
from audit.verify import CHAIN_COLUMNS, DIGEST_CHECKS, UNVERIFIABLE, payload_owners, verify_chain
from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.models import Event, LifecycleEvent, Summary, ValidationRecord
from tests.audit.tamper import append_only_off
from tests.factories import activated, history, make_workflow, purge

tampering = pytest.mark.impossible_state("rows edited by a table owner behind the append-only triggers")
DIGEST_SUFFIXES = ("hash", "digest", "sha256")


def test_every_digest_column_of_every_model_is_checked_or_declared_unverifiable():
    pairs = {f"{model._meta.label}.{digest}" for model, _, digest in payload_owners()}
    assert {"memoryhub.ValidationRecord.payload_digest", "memoryhub.LifecycleEvent.payload_digest"} <= pairs
    columns = {
        f"{model._meta.label}.{field.name}"
        for model in apps.get_models()
        for field in model._meta.concrete_fields
        if field.name.endswith(DIGEST_SUFFIXES)
    }
    covered = pairs | set(DIGEST_CHECKS) | CHAIN_COLUMNS | set(UNVERIFIABLE)
    assert not columns - covered, f"digest columns verify does not check: {sorted(columns - covered)}"
    assert not (set(DIGEST_CHECKS) | CHAIN_COLUMNS | set(UNVERIFIABLE)) - columns, "stale entries"


def owner_update(model, pk, **values) -> None:
    with append_only_off():
        assert model._base_manager.filter(pk=pk).update(**values) == 1


@pytest.fixture
def world(tenant):
    """A workflow with an active summary (validation records, lifecycle events), a comment, and an
    observed compaction — every digest-bearing record, made by the services."""
    wf = make_workflow(tenant)
    history(wf, 12)
    summary = activated(wf, 1, 6)
    comment = add_comment(summary, Actor.user("bob"), "Reads well; keep the 401 requirement.")
    observed = record_observed_compaction(
        wf,
        covers_to_seq=12,
        text="Observed: the refund API must return 401 for an expired token.",
        compactor={"name": "claude-code"},
        actor=Actor.system("probe"),
    ).summary
    assert verify_chain(tenant)["ok"], verify_chain(tenant)
    return {"wf": wf, "summary": summary, "comment": comment, "observed": observed}


def _edited_payload(record):
    return record.payload_id, {**record.payload.body, "note": "rewritten by the owner"}


def edit_validation_record(world):
    record = ValidationRecord.objects.filter(summary=world["summary"]).exclude(payload=None).first()
    pk, body = _edited_payload(record)
    owner_update(Payload, pk, body=body)
    return record


def edit_lifecycle_event(world):
    event = LifecycleEvent.objects.filter(summary=world["summary"]).exclude(payload=None).first()
    pk, body = _edited_payload(event)
    owner_update(Payload, pk, body=body)
    return event


def edit_comment(world):
    owner_update(SummaryComment, world["comment"].pk, text="Reads well; drop the 401 requirement.")
    return world["comment"]


def edit_observed_compaction(world):
    summary = world["observed"]
    content = json.loads(summary.content)
    content["narrative"] = "Observed: the refund API may return 403."
    owner_update(Summary, summary.pk, content=json.dumps(content, sort_keys=True, separators=(",", ":")))
    return summary


def edit_event(world):
    event = Event.objects.get(workflow=world["wf"], seq=3)
    owner_update(Event, event.pk, content="something else entirely")
    return event


def edit_audit_entry_payload(world):
    entry = AuditEntry.objects.filter(tenant=world["wf"].tenant).exclude(payload=None).order_by("seq").last()
    pk, body = _edited_payload(entry)
    owner_update(Payload, pk, body=body)
    return entry


def wipe_validation_payload(world):
    record = ValidationRecord.objects.filter(summary=world["summary"]).exclude(payload=None).first()
    owner_update(Payload, record.payload_id, body={})
    return record


EDITS = [
    edit_validation_record,
    edit_lifecycle_event,
    edit_comment,
    edit_observed_compaction,
    edit_event,
    edit_audit_entry_payload,
    wipe_validation_payload,
]


@tampering
@pytest.mark.parametrize("edit", EDITS, ids=lambda f: f.__name__)
def test_an_edit_anywhere_is_reported_with_its_owner(world, tenant, edit):
    owner = edit(world)
    result = verify_chain(tenant)
    assert result["ok"] is False and result["problem"] == "edited", result
    if isinstance(owner, AuditEntry):  # the chain walk names it by seq
        assert result["first_bad_seq"] == owner.seq
        return
    problems = result["digests"]["problems"]
    assert [(p["object_type"], p["object_id"]) for p in problems] == [(owner._meta.label, owner.pk)]
    assert result["edited_object"] == problems[0]
    # its own payload may also be an audit entry's (one text, one payload): the chain then says so first
    assert str(owner.pk) in result["detail"] or result["first_bad_seq"] is not None


@tampering
def test_the_command_and_the_api_name_the_edited_validation_record(world, tenant, alice, capsys):
    record = edit_validation_record(world)
    with pytest.raises(CommandError):
        call_command("audit_verify", "--tenant", tenant.slug)
    err = capsys.readouterr().err
    assert "edited" in err and f"validation record {record.pk}" in err
    body = alice.api.get("/api/v1/audit/verify/").json()
    assert body["ok"] is False and body["edited_object"]["object_id"] == record.pk
    assert body["edited_object"]["object_type"] == "memoryhub.ValidationRecord"


def test_a_purge_is_not_an_edit(world, tenant):
    """Purged payloads, tombstoned summaries and events, and comments scrubbed with the purge's
    note are gone on purpose: verify stays ok."""
    add_comment(world["summary"], Actor.user("bob"), "Event 3 said: message number 3 about POST /payments")
    purge(world["wf"], [3])
    result = verify_chain(tenant)
    assert result["ok"] is True and result["digests"]["problems"] == [], result


def test_verify_on_an_untouched_tenant_checks_every_kind(world, tenant):
    result = verify_chain(tenant)
    assert result["ok"] and result["digests"] == {
        "problems": [],
        "more": 0,
        "checks": ["payload_rows", "payloads", "summaries", "events", "comments"],
    }
