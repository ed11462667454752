"""How many round trips to the database one activation costs (SQLite and PostgreSQL). A count,
not a timing: a change that adds a round trip to the compare-and-swap shows up here.

An applied activation that supersedes sends, on PostgreSQL (``memoryhub.core.rows.run_together``
joins statements into one round trip), two round trips before its commit:

1. the workflow lock (its tenant joined) + one read of the target and the active summary with
   their watermark tokens and approval state + the ids its rows will take, drawn from the
   lifecycle-event and payload sequences;
2. the pointer UPDATE + a status UPDATE per summary that changes + the INSERTs of the reason
   payloads (an audit entry whose text is its event's reason shares the event's payload row; an
   empty reason has none), of the lifecycle events and of their audit entries.

On SQLite, which cannot draw ids ahead, each statement is its own call and the rows go in three
steps, each needing the ids of the one before: 2 + (4 + 1) + 1. The audit entries are sequenced
after the commit, off the writer's path (``audit.sequencer``), so they cost the writer nothing more.
The transaction is real here (``transaction=True``), as in production: no savepoints.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.log import background
from audit.models import AuditEntry, Payload
from memoryhub.memory import lifecycle
from memoryhub.models import LifecycleEvent, Workflow
from tests.factories import REVIEWER, WORKER, activated, build_workflow, validated

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def background_sequencer(settings):
    settings.MEMORYHUB_AUDIT_SEQUENCER = "background"


def expected(postgresql: tuple[int, ...], sqlite: tuple[int, ...]) -> int:
    """Calls expected for round trips of so many statements each: one per round trip on
    PostgreSQL, one per statement on SQLite."""
    return len(postgresql) if connection.vendor == "postgresql" else sum(sqlite)


def _calls(run) -> tuple[object, list[str]]:
    """``run()``'s calls to the database (a statement, or statements sent together), without
    PREPARE (once per session) and the transaction's BEGIN and COMMIT."""
    with CaptureQueriesContext(connection) as ctx:
        result = run()
    control = ("PREPARE", "BEGIN", "COMMIT")  # once per session; the transaction's own
    return result, [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(control)]


def _revision(wf: Workflow) -> int:
    return Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)


def test_an_activation_that_supersedes_costs_two_round_trips(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    target = validated(wf)
    revision = _revision(wf)
    result, calls = _calls(lambda: lifecycle.activate(target, revision, WORKER))
    assert result.applied and result.superseded is not None
    assert len(calls) == expected(postgresql=(2 + 2, 3 + 1 + 1 + 1), sqlite=(2, 3 + 1, 1, 1)), "\n".join(
        calls
    )
    # The supersede and the activation each have their event and their audit entry, linked.
    events = LifecycleEvent.objects.filter(workflow=wf).order_by("-id")[:2]
    entries = AuditEntry.objects.filter(chained_data__lifecycle_event__in=[e.pk for e in events])
    assert entries.count() == 2
    # The supersede's reason is written once, for its event and its audit entry alike.
    supersede = events[1]
    assert supersede.action == "supersede" and supersede.payload_id is not None
    assert entries.get(chained_data__lifecycle_event=supersede.pk).payload_id == supersede.payload_id


def test_a_first_activation_costs_as_many_round_trips(tenant):
    wf = build_workflow(tenant)
    target = validated(wf)
    result, calls = _calls(lambda: lifecycle.activate(target, 0, WORKER))
    assert result.applied and result.superseded is None
    # No reason given, so no payload: the pointer and the status go alone.
    assert len(calls) == expected(postgresql=(2 + 2, 2 + 1 + 1), sqlite=(2, 2, 1, 1)), "\n".join(calls)
    assert 'INSERT INTO "audit_payload"' not in " ".join(calls)


def test_a_rollback_costs_what_an_activation_does(tenant):
    wf = build_workflow(tenant)
    old = activated(wf)
    activated(wf)
    revision = _revision(wf)
    result, calls = _calls(lambda: lifecycle.rollback(old, revision, REVIEWER, "back to S1"))
    assert result.applied
    assert len(calls) == expected(postgresql=(2 + 2, 3 + 1 + 1 + 1), sqlite=(2, 3 + 1, 1, 1)), "\n".join(
        calls
    )


def test_a_stale_attempt_costs_as_many_round_trips(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    late = validated(wf)
    result, calls = _calls(lambda: lifecycle.activate(late, 0, WORKER))
    assert result.outcome == "stale"
    # The lock, the read and the ids; the refusal's payload, its event and its audit entry.
    assert len(calls) == expected(postgresql=(2 + 2, 1 + 1 + 1), sqlite=(2, 1, 1, 1)), "\n".join(calls)


def test_too_few_reserved_ids_fall_back_to_numbering_by_the_database(tenant, monkeypatch):
    """Ids drawn ahead that do not cover every row are not used at all: the rows go in as
    without them (three steps), linked the same way."""
    monkeypatch.setattr(lifecycle, "SWAP_IDS", {LifecycleEvent: 1, Payload: 4})
    wf = build_workflow(tenant)
    activated(wf)
    target = validated(wf)
    revision = _revision(wf)
    result, calls = _calls(lambda: lifecycle.activate(target, revision, WORKER))
    assert result.applied and result.superseded is not None
    assert len(calls) == expected(postgresql=(2 + 2, 3 + 1, 1, 1), sqlite=(2, 3 + 1, 1, 1)), "\n".join(calls)
    events = list(LifecycleEvent.objects.filter(workflow=wf).order_by("-id")[:2])
    for event in events:
        entry = AuditEntry.objects.get(chained_data__lifecycle_event=event.pk)
        assert entry.payload_id == event.payload_id


def test_the_audit_entries_are_sequenced_after_the_commit(tenant):
    wf = build_workflow(tenant)
    target = validated(wf)
    lifecycle.activate(target, 0, WORKER)
    background.drain()
    assert not AuditEntry.objects.filter(tenant=tenant, seq__isnull=True).exists()
