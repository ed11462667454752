"""How many round trips to the database one activation costs (SQLite and PostgreSQL). A count,
not a timing: a change that adds a round trip to the compare-and-swap shows up here.

An applied activation that supersedes sends, on PostgreSQL (``memoryhub.core.rows.run_together``
joins statements into one round trip):

1. the workflow lock (its tenant joined) + one read of the target and the active summary with
   their watermark tokens and approval state;
2. the pointer UPDATE + a status UPDATE per summary that changes + the INSERT of the reason
   payloads (an audit entry whose text is its event's reason shares the event's payload row; an
   empty reason has none);
3. the INSERT of the lifecycle events (however many);
4. the INSERT of their audit entries (however many).

On SQLite each statement is its own call: 2 + 4 + 1 + 1. The audit entries are sequenced after
the commit, off the writer's path (``audit.sequencer``), so they cost the writer nothing more.
The transaction is real here (``transaction=True``), as in production: no savepoints.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.log import background
from audit.models import AuditEntry
from memoryhub.memory import lifecycle
from memoryhub.models import LifecycleEvent, Workflow
from tests.factories import REVIEWER, WORKER, activated, build_workflow, validated

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def background_sequencer(settings):
    settings.MEMORYHUB_AUDIT_SEQUENCER = "background"


def together(*statements: int) -> int:
    """Calls for round trips of ``statements`` statements each: one per round trip on
    PostgreSQL, one per statement elsewhere."""
    return len(statements) if connection.vendor == "postgresql" else sum(statements)


def _calls(run) -> tuple[object, list[str]]:
    """``run()``'s calls to the database (a statement, or statements sent together), without
    PREPARE (once per session) and the transaction's BEGIN and COMMIT."""
    with CaptureQueriesContext(connection) as ctx:
        result = run()
    control = ("PREPARE", "BEGIN", "COMMIT")  # once per session; the transaction's own
    return result, [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith(control)]


def _revision(wf: Workflow) -> int:
    return Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)


def test_an_activation_that_supersedes_costs_four_round_trips(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    target = validated(wf)
    revision = _revision(wf)
    result, calls = _calls(lambda: lifecycle.activate(target, revision, WORKER))
    assert result.applied and result.superseded is not None
    assert len(calls) == together(2, 4, 1, 1), "\n".join(calls)
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
    assert len(calls) == together(2, 2, 1, 1), "\n".join(calls)
    assert "audit_payload" not in " ".join(calls)


def test_a_rollback_costs_what_an_activation_does(tenant):
    wf = build_workflow(tenant)
    old = activated(wf)
    activated(wf)
    revision = _revision(wf)
    result, calls = _calls(lambda: lifecycle.rollback(old, revision, REVIEWER, "back to S1"))
    assert result.applied
    assert len(calls) == together(2, 4, 1, 1), "\n".join(calls)


def test_a_stale_attempt_costs_three_round_trips(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    late = validated(wf)
    result, calls = _calls(lambda: lifecycle.activate(late, 0, WORKER))
    assert result.outcome == "stale"
    # The lock and read; the refusal's payload; its event; its audit entry.
    assert len(calls) == together(2, 1, 1, 1), "\n".join(calls)


def test_the_audit_entries_are_sequenced_after_the_commit(tenant):
    wf = build_workflow(tenant)
    target = validated(wf)
    lifecycle.activate(target, 0, WORKER)
    background.drain()
    assert not AuditEntry.objects.filter(tenant=tenant, seq__isnull=True).exists()
