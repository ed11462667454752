"""Which trigger decisions wait for a synchronous commit, and that the asynchronous one stays LOCAL.

A plain "continue" (the check an agent makes before every step) is logged with
``synchronous_commit = off`` for its own one-statement transaction and answered without a
decision_id; compact / retrieve_or_block decisions, enqueue requests and decisions made inside a
caller's transaction are committed synchronously and answered with their decision_id.
"""

from __future__ import annotations

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from memoryhub.core.actors import Actor
from tests.factories import add_tokens, make_workflow
from triggers import services
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


def _statement_text(sql: str) -> str:
    """The SQL a write ran: itself, or the prepared statement it EXECUTEd in this session."""
    if not sql.startswith("EXECUTE "):
        return sql
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements WHERE name = %s", [sql.split()[1]])
        return cursor.fetchone()[0]


def test_server_default_is_synchronous():
    # Every assertion below about "synchronous" relies on the server default being on.
    assert setting() == "on"


def test_continue_is_committed_asynchronously_in_its_own_transaction(tenant, wf):
    row, sql = decide(tenant, CONTINUE)
    assert row.action == "continue"
    assert row.durable is False
    # One write: the INSERT itself, or EXECUTE of it prepared once per session.
    writes = [s for s in sql if s.startswith(("INSERT", "EXECUTE memoryhub_continue_decision"))]
    assert len(writes) == 1
    assert "set_config('synchronous_commit', 'off', true)" in _statement_text(writes[0])
    # Committed (another session sees it) and logged with every number it used.
    assert committed_elsewhere(row.pk)
    stored = TriggerDecision.objects.get(pk=row.pk)
    assert (stored.action, stored.current_tokens, stored.projected_tokens) == ("continue", 17_000, 18_000)
    payload = services.decision_payload(row)
    assert (payload["decision_id"], payload["durable"]) == (None, False)


def test_async_setting_does_not_leak_to_the_next_statement_or_transaction(tenant, wf):
    decide(tenant, CONTINUE)
    assert setting() == "on"  # next statement on the same connection
    with transaction.atomic():
        assert setting() == "on"  # next transaction on the same connection
    compact, sql = decide(tenant, COMPACT)  # a durable decision right after an async one
    assert compact.durable is True
    assert not any("set_config" in s for s in sql)


@pytest.mark.parametrize(("body", "action"), [(COMPACT, "compact"), (RETRIEVE, "retrieve_or_block")])
def test_acting_decisions_commit_synchronously_with_their_id(tenant, wf, body, action):
    row, sql = decide(tenant, body)
    assert row.action == action
    assert row.durable is True
    assert not any("set_config" in s for s in sql)
    assert setting() == "on"
    assert committed_elsewhere(row.pk)
    assert services.decision_payload(row)["decision_id"] == row.pk


def test_enqueue_and_callers_transaction_keep_continue_synchronous(tenant, wf):
    workflow = services.workflow_for_decision(tenant, "wf-durable")
    with CaptureQueriesContext(connection) as queries:
        queued = services.decide(workflow, dict(CONTINUE), Actor.system("tests"), enqueue=True)
        # Inside a caller's transaction the setting would cover the caller's writes too.
        with transaction.atomic():
            nested = services.decide(workflow, dict(CONTINUE), Actor.system("tests"))
            assert setting() == "on"
    assert (queued.action, nested.action) == ("continue", "continue")
    assert queued.durable and nested.durable
    assert not any("set_config" in q["sql"] for q in queries.captured_queries)


def test_api_answers_continue_without_an_id_and_compact_with_one(api, wf):
    url = "/api/v1/workflows/wf-durable/trigger/"
    cont = api.post(url, CONTINUE, format="json").json()
    assert (cont["action"], cont["decision_id"], cont["durable"]) == ("continue", None, False)
    comp = api.post(url, COMPACT, format="json").json()
    assert comp["action"] == "compact" and comp["durable"] is True
    assert TriggerDecision.objects.get(pk=comp["decision_id"]).action == "compact"
    log = api.get("/api/v1/workflows/wf-durable/decisions/").json()
    assert [d["action"] for d in log["results"]] == ["compact", "continue"]


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
