"""How many SQL statements one activation costs (SQLite and PostgreSQL alike). A count, not a
timing: a change that adds a round trip to the compare-and-swap shows up here.

An activation's own statements: the workflow lock (its tenant joined); one read of the target
and the active summary with their watermark tokens and approval state; the pointer UPDATE; a
status UPDATE per summary that changes; the lifecycle events' reason payloads and the events
(one INSERT each, however many events). Each lifecycle event also gets an audit entry, whose
statements (``audit.log.record``) are measured here rather than assumed.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit.log import record
from memoryhub.memory import lifecycle
from memoryhub.models import Summary, Tenant, Workflow
from tests.factories import REVIEWER, WORKER, activated, build_workflow, validated

pytestmark = pytest.mark.django_db


def _statements(run) -> tuple[object, list[str]]:
    """``run()``'s SQL statements, without the SAVEPOINT/RELEASE pair that the test's own
    transaction turns the action's atomic block into."""
    with CaptureQueriesContext(connection) as ctx:
        result = run()
    sql = [q["sql"] for q in ctx.captured_queries]
    return result, [s for s in sql if not s.upper().startswith(("SAVEPOINT", "RELEASE SAVEPOINT"))]


def _per_audit_entry(summary: Summary) -> int:
    """Statements of one audit entry with the shape of a lifecycle event's (text in its data)."""
    tenant = Tenant.objects.get(pk=summary.tenant_id)
    data = {"workflow": "wf", "version": 1, "result": "applied", "from": "VALIDATED", "to": "ACTIVE"}

    def run() -> None:
        with transaction.atomic():
            record(tenant, WORKER, "summary.activate", summary, {**data, "reason": "count me"})

    return len(_statements(run)[1])


def _revision(wf: Workflow) -> int:
    return Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)


def test_an_activation_that_supersedes_costs_seven_statements_plus_two_audit_entries(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    target = validated(wf)
    audit, revision = _per_audit_entry(target), _revision(wf)
    result, sql = _statements(lambda: lifecycle.activate(target, revision, WORKER))
    assert result.applied and result.superseded is not None
    assert len(sql) == 7 + 2 * audit, "\n".join(sql)


def test_a_first_activation_costs_six_statements_plus_one_audit_entry(tenant):
    wf = build_workflow(tenant)
    target = validated(wf)
    audit = _per_audit_entry(target)
    result, sql = _statements(lambda: lifecycle.activate(target, 0, WORKER))
    assert result.applied and result.superseded is None
    assert len(sql) == 6 + audit, "\n".join(sql)


def test_a_rollback_costs_what_an_activation_does(tenant):
    wf = build_workflow(tenant)
    old = activated(wf)
    activated(wf)
    audit, revision = _per_audit_entry(old), _revision(wf)
    result, sql = _statements(lambda: lifecycle.rollback(old, revision, REVIEWER, "back to S1"))
    assert result.applied
    assert len(sql) == 7 + 2 * audit, "\n".join(sql)


def test_a_stale_attempt_costs_four_statements_plus_one_audit_entry(tenant):
    wf = build_workflow(tenant)
    activated(wf)
    late = validated(wf)
    audit = _per_audit_entry(late)
    result, sql = _statements(lambda: lifecycle.activate(late, 0, WORKER))
    assert result.outcome == "stale"
    assert len(sql) == 4 + audit, "\n".join(sql)
