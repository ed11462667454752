"""POST /api/v1/workflows/<id>/step/: append + compaction + traces + decision in one idempotent call."""

from __future__ import annotations

import pytest

from memoryhub.models import ConsumerTrace, Event, Summary, Workflow
from triggers.models import TriggerDecision

URL = "/api/v1/workflows/{}/step/"


def ev(i: int, content: str | None = None, role: str = "user") -> dict:
    return {"kind": "message", "role": role, "content": content or f"message {i}", "client_event_id": f"e{i}"}


def step(api, body, wf="lc-1"):
    return api.post(URL.format(wf), body, format="json")


COMPACTION = {
    "observation_id": "obs-1",
    "covers_to_event": "e2",
    "text": "The user said message 1; the assistant answered message 2.",
    "compactor": {"name": "langchain-summarization", "model": "fake"},
    "trigger": {"kind": "threshold", "pre_tokens": 30, "threshold_tokens": 20},
}
TRACE = {
    "agent": "agent",
    "agent_run_id": "run-1",
    "model_call_id": "call-1",
    "summary_observation_id": "obs-1",
    "tail_to_event": "e3",
    "input_tokens": 40,
}


def test_one_call_creates_appends_records_and_decides(api, tenant):
    body = {
        "create": {"name": "chat", "source": "langchain"},
        "events": [ev(1), ev(2, role="assistant"), ev(3)],
        "compactions": [COMPACTION],  # covers events of this very step
        "decide": {"expected_next_step_tokens": 10},
    }
    response = step(api, body)
    assert response.status_code == 200, response.json()
    data = response.json()
    assert data["created"] is True and data["head_seq"] == 3
    assert [(e["client_event_id"], e["seq"]) for e in data["events"]] == [("e1", 1), ("e2", 2), ("e3", 3)]
    summary = Summary.objects.get(workflow__external_id="lc-1")
    assert data["compactions"][0]["summary_id"] == summary.summary_id and summary.covers_to_seq == 2
    assert data["traces"] == []
    assert data["decision"]["action"] in {"continue", "compact", "retrieve_or_block"}
    assert data["decision"]["head_seq"] == 3 and data["decision"]["expected_next_step_tokens"] == 10
    assert Workflow.objects.get(external_id="lc-1").source == "langchain"

    # The next call's step carries the trace of the model call in between (it read S1 + e3) and
    # that call's answer: the trace is checked against the head the call saw, not the new one.
    follow = {"create": {}, "traces": [TRACE], "events": [ev(4, role="assistant")]}
    second = step(api, follow).json()
    trace = ConsumerTrace.objects.get(model_call_id="call-1")
    assert trace.summary_id == summary.pk and trace.tail_to_seq == 3 and trace.head_seq_at_read == 3
    assert "tail_loss" not in trace.flags
    assert second["traces"] == [
        {"model_call_id": "call-1", "trace_id": trace.pk, "created": True, "flags": trace.flags}
    ]
    assert second["head_seq"] == 4

    # The very same bodies again (retries after lost answers): same answers, nothing written twice.
    again = step(api, body).json()
    assert again["created"] is False
    assert again["events"] == data["events"] and again["head_seq"] == 4
    assert again["compactions"][0]["summary_id"] == summary.summary_id
    again = step(api, follow).json()
    assert again["traces"][0]["trace_id"] == trace.pk and again["traces"][0]["created"] is False
    assert Event.objects.filter(workflow__external_id="lc-1").count() == 4
    assert Summary.objects.filter(workflow__external_id="lc-1").count() == 1
    assert ConsumerTrace.objects.count() == 1


def test_without_decide_nothing_is_decided_and_without_create_the_workflow_must_exist(api, tenant):
    assert step(api, {"events": [ev(1)]}).status_code == 404
    assert step(api, {"create": {}, "events": [ev(1)]}).json()["decision"] is None
    assert TriggerDecision.objects.count() == 0


BAD_BODIES = [
    ([], "invalid_step"),
    ({"unknown": 1}, "invalid_step"),
    ({"create": "yes"}, "invalid_step"),
    ({"create": {"source": "nowhere"}}, "invalid_step"),
    ({"create": {"name": 5}}, "invalid_step"),
    ({"create": {}, "events": "x"}, "invalid_body"),
    (
        {"create": {}, "events": [{"kind": "message", "role": "user", "content": "no id"}]},
        "client_event_id_required",
    ),
    ({"create": {}, "events": [ev(1), ev(1)]}, None),
    (
        {"create": {}, "compactions": [{"observation_id": "o", "compactor": {"name": "x"}, "text": "t"}]},
        "invalid_step",
    ),
    (
        {
            "create": {},
            "compactions": [
                {"observation_id": "o", "covers_to_event": "nope", "compactor": {"name": "x"}, "text": "t"}
            ],
        },
        "unknown_event",
    ),
    (
        {"create": {}, "compactions": [{"covers_to_seq": 1, "compactor": {"name": "x"}, "text": "t"}]},
        "invalid_step",
    ),
    ({"create": {}, "compactions": ["x"]}, "invalid_step"),
    ({"create": {}, "traces": [{"agent": "a"}]}, "invalid_step"),
    ({"create": {}, "traces": [{"tail_to_event": 5}]}, "invalid_step"),
    (
        {
            "create": {},
            "events": [ev(1)],
            "traces": [
                {
                    "agent": "a",
                    "agent_run_id": "r",
                    "model_call_id": "m",
                    "summary_observation_id": "missing",
                    "tail_to_seq": 0,
                }
            ],
        },
        "unknown_summary",
    ),
    ({"create": {}, "decide": [1]}, "invalid_step"),
    ({"create": {}, "context": "yes"}, "invalid_step"),
    ({"create": {}, "traces": [{"tail_to_seq": 0, "attest_read": "yes"}]}, "invalid_step"),
    ({"create": {}, "decide": {"current_tokens": 5}}, "invalid_trigger_input"),
    ({"create": {}, "traces": [{}] * 101}, "step_too_large"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
def test_bad_input_is_a_4xx_json_error_and_writes_nothing(api, tenant, body, code):
    response = step(api, body, wf="bad")
    assert 400 <= response.status_code < 500, response.content
    payload = response.json()
    assert set(payload) >= {"error", "detail"}
    if code:
        assert payload["error"] == code
    if isinstance(body, dict) and "decide" not in body:
        # Everything in the body is one transaction: the events before the bad part are not kept.
        assert Event.objects.filter(workflow__external_id="bad").count() == 0
        assert Summary.objects.count() == 0 and ConsumerTrace.objects.count() == 0


def test_context_is_answered_only_when_asked_and_names_the_read(api, tenant):
    assert step(api, {"create": {}, "events": [ev(1)]}).json()["context"] is None
    asked = step(api, {"create": {}, "events": [ev(2)], "context": True}).json()["context"]
    assert asked["head_seq"] == 2 and asked["summary_id"] is None
    assert asked["context_id"].startswith("ctx_") and asked["manifest_hash"].startswith("sha256:")
    # The same read through GET …/context/ has the same id and manifest.
    read = api.get("/api/v1/workflows/lc-1/context/").json()
    assert (read["context_id"], read["manifest_hash"]) == (asked["context_id"], asked["manifest_hash"])


def test_a_batch_over_the_maximum_is_413(api, tenant, settings):
    settings.MEMORYHUB_MAX_BATCH_EVENTS = 3
    response = step(api, {"create": {}, "events": [ev(i) for i in range(4)]})
    assert response.status_code == 413 and response.json()["error"] == "batch_too_large"


def test_tenant_isolation_and_roles(api, mallory, carol, tenant):
    assert step(api, {"create": {}, "events": [ev(1)]}).status_code == 200
    # Another tenant's key: the same external id is a different (its own) workflow, never ours.
    response = step(mallory.api, {"events": [ev(2)]})
    assert response.status_code == 404
    assert Event.objects.filter(workflow__tenant=tenant).count() == 1
    # A viewer cannot write.
    assert step(carol.api, {"events": [ev(3)]}).status_code == 403


def test_step_is_in_the_openapi_schema(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    assert "post" in schema["paths"]["/api/v1/workflows/{wf}/step/"]


def test_architecture_lists_the_step_route_with_exactly_its_fields():
    import re
    from pathlib import Path

    from django.conf import settings

    from triggers.steps import STEP_FIELDS

    text = Path(settings.BASE_DIR, "docs", "ARCHITECTURE.md").read_text()
    line = next(x for x in text.splitlines() if x.startswith("POST /api/v1/workflows/{wf}/step/"))
    assert set(re.findall(r'"(\w+)"', line)) == set(STEP_FIELDS)
