"""Which trigger decisions are committed before their call returns, and which are buffered.

A plain "continue" (the check an agent makes before every step) is buffered in the process
(triggers.decision_log), written by a synchronous batch flush and answered without a
decision_id; compact / retrieve_or_block decisions, enqueue requests, a continue with a token
estimate or past the hard limit, and decisions made inside a caller's transaction are committed
before the call returns and answered with their decision_id.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memoryhub.core.actors import Actor
from tests.factories import add_tokens, make_workflow
from triggers import decision_log, services
from triggers.decision_log import flush_decision_buffer
from triggers.models import TriggerDecision

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

CONTINUE = {"expected_next_step_tokens": 1_000}
COMPACT = {"expected_next_step_tokens": 4_000}
RETRIEVE = {"expected_next_step_tokens": 4_000, "unresolved_tool_calls": 1, "pending_side_effects": 1}


@pytest.fixture
def wf(tenant):
    workflow = make_workflow(tenant, "wf-durable")
    add_tokens(workflow, 17_000)
    return workflow


def setting() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('synchronous_commit')")
        return cursor.fetchone()[0]


def decide(tenant, body):
    workflow = services.workflow_for_decision(tenant, "wf-durable")
    with CaptureQueriesContext(connection) as queries:
        row = services.decide(workflow, dict(body), Actor.system("tests"))
    return row, [q["sql"] for q in queries.captured_queries]


def committed_elsewhere(pk: int) -> bool:
    """Seen from another session: the row's transaction has committed (not merely been issued)."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other:
        return (
            other.execute("SELECT 1 FROM triggers_triggerdecision WHERE id = %s", [pk]).fetchone() is not None
        )


def count_elsewhere() -> int:
    """Decision rows committed, as another session sees them."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params) as other:
        return other.execute("SELECT count(*) FROM triggers_triggerdecision").fetchone()[0]


def test_server_default_is_synchronous():
    # Every assertion below about "synchronous" relies on the server default being on.
    assert setting() == "on"


def test_continue_is_buffered_and_written_by_a_synchronous_flush(tenant, wf):
    row, sql = decide(tenant, CONTINUE)
    assert (row.action, row.durable, row.pk) == ("continue", False, None)
    # No write on the call: the row waits in this process's buffer.
    assert not [s for s in sql if s.startswith(("INSERT", "EXECUTE", "COPY"))]
    assert count_elsewhere() == 0
    payload = services.decision_payload(row)
    assert (payload["decision_id"], payload["durable"]) == (None, False)
    with CaptureQueriesContext(connection) as queries:
        assert flush_decision_buffer() == 1
    assert any(q["sql"].startswith('COPY "triggers_triggerdecision"') for q in queries.captured_queries), (
        queries.captured_queries
    )
    assert setting() == "on"  # the flush commits synchronously: written means durable
    assert count_elsewhere() == 1
    stored = TriggerDecision._base_manager.get()
    assert (stored.action, stored.current_tokens, stored.projected_tokens) == ("continue", 17_000, 18_000)
    assert stored.at == row.at  # stamped when decided, not when flushed


def test_a_compact_after_buffered_continues_is_written_before_it_returns(tenant, wf):
    decide(tenant, CONTINUE)
    compact, sql = decide(tenant, COMPACT)
    assert compact.durable is True
    assert committed_elsewhere(compact.pk)
    assert count_elsewhere() == 1  # the compact only; the continue is still buffered
    flush_decision_buffer()
    assert count_elsewhere() == 2


@pytest.mark.parametrize(("body", "action"), [(COMPACT, "compact"), (RETRIEVE, "retrieve_or_block")])
def test_acting_decisions_commit_synchronously_with_their_id(tenant, wf, body, action):
    row, sql = decide(tenant, body)
    assert row.action == action
    assert row.durable is True
    assert setting() == "on"
    assert committed_elsewhere(row.pk)
    assert services.decision_payload(row)["decision_id"] == row.pk


def test_enqueue_and_callers_transaction_keep_continue_synchronous(tenant, wf):
    workflow = services.workflow_for_decision(tenant, "wf-durable")
    queued = services.decide(workflow, dict(CONTINUE), Actor.system("tests"), enqueue=True)
    assert committed_elsewhere(queued.pk)
    # Inside a caller's transaction the row is written with the caller's other writes.
    with transaction.atomic():
        nested = services.decide(workflow, dict(CONTINUE), Actor.system("tests"))
        assert TriggerDecision._base_manager.filter(pk=nested.pk).exists()
    assert committed_elsewhere(nested.pk)
    assert (queued.action, nested.action) == ("continue", "continue")
    assert queued.durable and nested.durable
    assert len(decision_log.buffer) == 0


def test_a_continue_past_the_hard_limit_is_an_incident_written_at_once(tenant, wf):
    """With every strategy off nothing fires, so a step past the hard limit answers "continue":
    an overflow incident the metrics count and alerts fire on, so its row is not buffered."""
    off = {
        name: {"enabled": False} for name in ("emergency_guard", "projected_next_step", "workflow_boundary")
    }
    services.save_policy(tenant, {"strategies": off}, Actor.system("tests"), workflow=wf, partial=True)
    row, _ = decide(tenant, {"expected_next_step_tokens": 10_000})
    assert row.action == "continue" and row.projected_tokens > row.hard_limit
    assert row.durable is True and committed_elsewhere(row.pk)
    assert len(decision_log.buffer) == 0


def test_api_answers_continue_without_an_id_and_compact_with_one(api, wf):
    url = "/api/v1/workflows/wf-durable/trigger/"
    cont = api.post(url, CONTINUE, format="json").json()
    assert (cont["action"], cont["decision_id"], cont["durable"]) == ("continue", None, False)
    comp = api.post(url, COMPACT, format="json").json()
    assert comp["action"] == "compact" and comp["durable"] is True
    assert TriggerDecision.objects.get(pk=comp["decision_id"]).action == "compact"
    # Reading the log writes this process's buffer first: the continue is there, older.
    log = api.get("/api/v1/workflows/wf-durable/decisions/").json()
    assert [d["action"] for d in log["results"]] == ["compact", "continue"]
    assert log["results"][1]["decision_id"] is not None and log["results"][1]["durable"] is True


def test_a_continue_with_a_token_estimate_records_the_drift_synchronously(tenant, wf):
    """The asynchronous path is only for the bare decision row: an estimate's drift row is written
    with it, in one synchronous transaction (the fast path once skipped the estimate entirely)."""
    from memoryhub.models import TokenEstimate

    row, _ = decide(tenant, {**CONTINUE, "token_estimate": 13_000})
    assert row.action == "continue" and getattr(row, "durable", True)
    assert committed_elsewhere(row.pk)
    estimate = TokenEstimate.objects.get(workflow=wf, source="trigger")
    assert (estimate.estimated, estimate.exact) == (13_000, 17_000)
    assert row.details["token_estimate"]["drift"] == round(estimate.drift, 4)
