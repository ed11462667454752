"""Consumer traces and artifacts: checks, flags, idempotency, isolation and the audit trail."""

from __future__ import annotations

import pytest

from audit.models import AuditEntry
from memoryhub.core.canonical import hash_value
from memoryhub.memory import lifecycle
from memoryhub.models import Artifact, ConsumerTrace
from tests.factories import (
    REVIEWER,
    activated,
    add_events,
    append,
    build_workflow,
    candidate,
    event,
    make_workflow,
)
from tests.helpers import post

pytestmark = pytest.mark.django_db

TRACES = "/api/v1/workflows/{}/traces/"
ARTIFACTS = "/api/v1/workflows/{}/artifacts/"


def context(client, wf: str = "wf") -> dict:
    r = client.get(f"/api/v1/workflows/{wf}/context/")
    assert r.status_code == 200, r.content
    return r.json()


def trace_body(ctx: dict, call: str = "call-1", **overrides) -> dict:
    """The trace of a model call that consumed ``ctx`` exactly as served."""
    body = {
        "agent": "publisher",
        "agent_run_id": "run-7",
        "model_call_id": call,
        "summary_id": ctx["summary"]["summary_id"] if ctx["summary"] else None,
        "tail_to_seq": ctx["tail_to_seq"],
        "context_id": ctx["context_id"],
        "manifest_hash": ctx["manifest_hash"],
        "graph_release": "payments-api-tests@1.0.0",
        "thread_id": "thread-42",
        "checkpoint_id": "ckpt-3",
        "source_refs": ["spec-v7"],
        "input_tokens": ctx["tokens"]["total"],
    }
    body.update(overrides)
    return body


@pytest.fixture
def workflow(tenant):
    workflow = build_workflow(tenant, "wf", n=30)
    activated(workflow, 1, 25)
    return workflow


# -- consumer traces -------------------------------------------------------------------------------


def test_a_clean_read_is_recorded_unflagged_with_read_time_facts(api, workflow):
    ctx = context(api)
    add_events(workflow, 31, 33)  # other agents write after the read: not this call's tail loss
    r = post(api, TRACES.format("wf"), trace_body(ctx))
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["flags"] == []
    assert body["summary_id"] == ctx["summary"]["summary_id"] and body["summary_version"] == 1
    assert body["summary_status_at_read"] == "ACTIVE"
    assert body["summary_watermark"] == 25 and body["tail_to_seq"] == 30
    assert body["head_seq_at_read"] == 30
    assert (body["graph_release"], body["thread_id"], body["checkpoint_id"]) == (
        "payments-api-tests@1.0.0",
        "thread-42",
        "ckpt-3",
    )
    entry = AuditEntry.objects.get(action="trace.record")
    assert entry.object_id == "call-1" and entry.data["flags"] == []


def test_tail_loss_is_flagged(api, workflow):
    ctx = context(api)
    body = post(api, TRACES.format("wf"), trace_body(ctx, tail_to_seq=27)).json()
    assert body["flags"] == ["tail_loss"]
    assert body["head_seq_at_read"] == 30


def test_raw_history_consumer_without_summary_must_reach_head(api, workflow):
    ctx = context(api)
    body = post(api, TRACES.format("wf"), trace_body(ctx, summary_id=None, tail_to_seq=30)).json()
    # the read served S1: claiming to have consumed no summary contradicts the signed read
    assert body["flags"] == ["context_mismatch"]
    plain = post(
        api,
        TRACES.format("wf"),
        {
            "agent": "a",
            "agent_run_id": "r",
            "model_call_id": "call-raw",
            "summary_id": None,
            "tail_to_seq": 12,
        },
    ).json()
    assert plain["flags"] == ["tail_loss", "missing_provenance"]


def test_consuming_a_candidate_is_flagged_unvalidated(api, workflow):
    pending = candidate(workflow, 1, 30)
    body = post(
        api,
        TRACES.format("wf"),
        {
            "agent": "test_generator",
            "agent_run_id": "run-1",
            "model_call_id": "call-c",
            "summary_id": pending.summary_id,
            "tail_to_seq": 30,
        },
    ).json()
    assert body["summary_status_at_read"] == "CANDIDATE"
    assert body["flags"] == ["unvalidated_summary", "missing_provenance"]


def test_status_at_read_comes_from_the_read_not_from_later_changes(api, workflow):
    ctx = context(api)
    summary = workflow.summaries.get(version=1)
    lifecycle.quarantine(summary, REVIEWER, "omits payments:write scope")
    with_read = post(api, TRACES.format("wf"), trace_body(ctx, call="call-a")).json()
    assert with_read["summary_status_at_read"] == "ACTIVE" and with_read["flags"] == []
    without_read = post(
        api, TRACES.format("wf"), trace_body(ctx, call="call-b", context_id=None, manifest_hash=None)
    ).json()
    assert without_read["summary_status_at_read"] == "QUARANTINED"
    assert without_read["flags"] == ["unvalidated_summary", "missing_provenance"]


def test_manifest_or_context_from_elsewhere_is_flagged(api, tenant, workflow):
    ctx = context(api)
    other = make_workflow(tenant, "other")
    append(other, [event(1)])
    foreign = context(api, "other")
    body = post(
        api, TRACES.format("wf"), trace_body(ctx, call="c1", manifest_hash=foreign["manifest_hash"])
    ).json()
    assert body["flags"] == ["context_mismatch"]
    body = post(api, TRACES.format("wf"), trace_body(ctx, call="c2", context_id=foreign["context_id"])).json()
    assert body["flags"] == ["context_mismatch"]


def test_fallback_retrieval_is_recorded_and_flagged(api, workflow):
    ctx = context(api)
    body = post(
        api,
        TRACES.format("wf"),
        trace_body(ctx, tail_to_seq=25, fallback_retrieval=True, fallback_reason="compaction job 9 late"),
    ).json()
    assert body["fallback_reason"] == "compaction job 9 late"
    assert body["flags"] == ["tail_loss", "fallback_retrieval"]


def test_same_model_call_is_recorded_once(api, workflow):
    ctx = context(api)
    first = post(api, TRACES.format("wf"), trace_body(ctx))
    again = post(api, TRACES.format("wf"), trace_body(ctx))
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["trace_id"] == again.json()["trace_id"]
    changed = post(api, TRACES.format("wf"), trace_body(ctx, tail_to_seq=28))
    assert changed.status_code == 409 and changed.json()["error"] == "trace_conflict"
    assert ConsumerTrace.objects.count() == 1
    assert AuditEntry.objects.filter(action="trace.record").count() == 1


@pytest.mark.parametrize(
    ("overrides", "status", "code"),
    [
        ({"tail_to_seq": 31}, 400, "tail_beyond_head"),
        ({"tail_to_seq": 20}, 400, "tail_before_watermark"),
        ({"summary_id": "sum_does_not_exist"}, 400, "unknown_summary"),
        ({"agent": ""}, 400, "missing_field"),
        ({"tail_to_seq": -1}, 400, "invalid_field"),
        ({"tail_to_seq": "30"}, 400, "invalid_field"),
        ({"manifest_hash": "md5:abc"}, 400, "invalid_field"),
        ({"context_id": "ctx_1.1.ACTIVE.25.30:forged"}, 400, "invalid_context_id"),
        ({"surprise": 1}, 400, "unknown_field"),
    ],
)
def test_bad_traces_are_refused_and_nothing_is_written(api, workflow, overrides, status, code):
    r = post(api, TRACES.format("wf"), trace_body(context(api), **overrides))
    assert r.status_code == status, r.content
    assert r.json()["error"] == code and r.json()["detail"]
    assert ConsumerTrace.objects.count() == 0


def test_summary_of_another_workflow_is_refused(api, tenant, workflow):
    other = build_workflow(tenant, "other", n=10)
    foreign = activated(other, 1, 10)
    r = post(api, TRACES.format("wf"), trace_body(context(api), summary_id=foreign.summary_id))
    assert r.status_code == 400 and r.json()["error"] == "unknown_summary"


def test_trace_isolation_and_roles(api, carol, mallory, workflow):
    ctx = context(api)
    assert post(mallory.api, TRACES.format("wf"), trace_body(ctx)).status_code == 404
    assert post(carol.api, TRACES.format("wf"), trace_body(ctx)).status_code == 403
    created = post(api, TRACES.format("wf"), trace_body(ctx)).json()
    listing = carol.api.get(TRACES.format("wf")).json()
    assert [t["trace_id"] for t in listing["results"]] == [created["trace_id"]]
    assert carol.api.get(f"/api/v1/traces/{created['trace_id']}/").status_code == 200
    assert mallory.api.get(f"/api/v1/traces/{created['trace_id']}/").status_code == 404


def test_trace_list_filters_flagged(api, workflow):
    ctx = context(api)
    post(api, TRACES.format("wf"), trace_body(ctx, call="ok"))
    post(api, TRACES.format("wf"), trace_body(ctx, call="lossy", tail_to_seq=26))
    flagged = api.get(TRACES.format("wf"), {"flagged": "true"}).json()["results"]
    clean = api.get(TRACES.format("wf"), {"flagged": "false"}).json()["results"]
    assert [t["model_call_id"] for t in flagged] == ["lossy"]
    assert [t["model_call_id"] for t in clean] == ["ok"]


# -- artifacts -------------------------------------------------------------------------------------


@pytest.fixture
def traced(api, workflow):
    ctx = context(api)
    post(api, TRACES.format("wf"), trace_body(ctx, call="call-pub-1", agent_run_id="run-pub"))
    post(api, TRACES.format("wf"), trace_body(ctx, call="call-pub-2", agent_run_id="run-pub"))
    return ctx


def artifact_body(**overrides) -> dict:
    suite = {"artifact_id": "T57", "tests": ["T50", "T51"]}
    body = {
        "artifact_id": "T57",
        "kind": "test_suite",
        "uri": "s3://acme-artifacts/wf/T57.json",
        "content": suite,
        "quality_score": 0.81,
        "produced_by": {"model_call_id": "call-pub-2"},
    }
    body.update(overrides)
    return body


def test_artifact_is_linked_to_the_producing_call(api, traced):
    r = post(api, ARTIFACTS.format("wf"), artifact_body())
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["content_hash"] == hash_value({"artifact_id": "T57", "tests": ["T50", "T51"]})
    assert body["quality_score"] == 0.81
    assert [p["model_call_id"] for p in body["produced_by"]] == ["call-pub-2"]
    assert body["produced_by"][0]["summary_id"] == traced["summary"]["summary_id"]
    assert AuditEntry.objects.filter(action="artifact.record", object_id="T57").count() == 1
    detail = api.get("/api/v1/artifacts/T57/").json()
    assert detail["workflow"] == "wf" and detail["produced_by"] == body["produced_by"]


def test_agent_run_id_links_every_call_of_the_run(api, traced):
    body = post(api, ARTIFACTS.format("wf"), artifact_body(produced_by={"agent_run_id": "run-pub"})).json()
    assert sorted(p["model_call_id"] for p in body["produced_by"]) == ["call-pub-1", "call-pub-2"]


def test_duplicate_artifact_is_a_conflict_unless_identical(api, traced):
    assert post(api, ARTIFACTS.format("wf"), artifact_body()).status_code == 201
    same = post(api, ARTIFACTS.format("wf"), artifact_body())
    assert same.status_code == 200
    other = post(api, ARTIFACTS.format("wf"), artifact_body(quality_score=0.5))
    assert other.status_code == 409 and other.json()["error"] == "artifact_conflict"
    assert Artifact.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"produced_by": {"model_call_id": "never-traced"}}, "unknown_trace"),
        ({"produced_by": {"agent_run_id": "no-such-run"}}, "unknown_trace"),
        ({"produced_by": None}, "missing_field"),
        ({"quality_score": 1.5}, "invalid_field"),
        ({"content_hash": "sha256:" + "0" * 64}, "content_hash_mismatch"),
        ({"artifact_id": "T/57"}, "invalid_field"),
        ({"kind": ""}, "missing_field"),
    ],
)
def test_bad_artifacts_are_refused(api, traced, overrides, code):
    r = post(api, ARTIFACTS.format("wf"), artifact_body(**overrides))
    assert r.status_code == 400, r.content
    assert r.json()["error"] == code
    assert Artifact.objects.count() == 0


def test_artifact_ids_are_per_tenant(api, mallory, traced):
    assert post(api, ARTIFACTS.format("wf"), artifact_body()).status_code == 201
    assert mallory.api.get("/api/v1/artifacts/T57/").status_code == 404
    other_wf = make_workflow(mallory.tenant, "wf")
    append(other_wf, [event(1)])
    ctx = context(mallory.api)
    post(mallory.api, TRACES.format("wf"), trace_body(ctx, call="call-pub-2"))
    assert post(mallory.api, ARTIFACTS.format("wf"), artifact_body()).status_code == 201


def test_attest_read_on_the_traces_route_gives_the_served_read_or_nothing(api, workflow):
    """A call whose context a framework assembled asks for attest_read: reading S1 up to the head is
    exactly the server's read (attested, as if the call had quoted it); a shorter tail is not (it
    keeps its flags, with no made-up provenance)."""
    ctx = context(api)
    bare = {
        "agent": "a",
        "agent_run_id": "r",
        "summary_id": ctx["summary"]["summary_id"],
        "attest_read": True,
    }
    exact = post(api, TRACES.format("wf"), {**bare, "model_call_id": "c-exact", "tail_to_seq": 30}).json()
    assert exact["flags"] == []
    assert (exact["context_id"], exact["manifest_hash"]) == (ctx["context_id"], ctx["manifest_hash"])
    short = post(api, TRACES.format("wf"), {**bare, "model_call_id": "c-short", "tail_to_seq": 27}).json()
    assert short["flags"] == ["tail_loss", "missing_provenance"] and short["context_id"] == ""
    again = post(api, TRACES.format("wf"), {**bare, "model_call_id": "c-exact", "tail_to_seq": 30})
    assert again.status_code == 200  # a retry of an attested trace is the same trace
