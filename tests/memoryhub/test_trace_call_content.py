"""What a trace records of its model call beyond the read: messages, output, output tokens,
latency and cost — accepted bounded and validated, served back, and null when not sent."""

from __future__ import annotations

import pytest

from memoryhub.models import ConsumerTrace
from tests.factories import activated, build_workflow
from tests.helpers import post
from tests.memoryhub.test_traces import TRACES, context, trace_body

pytestmark = pytest.mark.django_db

CALL = {
    "input_messages": [
        {"role": "system", "content": "You write API tests."},
        {"role": "tool", "name": "fetch", "content": '{"status": 401}'},
    ],
    "output": "TC-58 asserts 401 for an unauthenticated request.",
    "output_tokens": 14,
    "latency_ms": 1234,
    "cost_usd": 0.012345,
}


@pytest.fixture
def workflow(tenant):
    workflow = build_workflow(tenant, "wf", n=30)
    activated(workflow, 1, 25)
    return workflow


def test_the_call_content_is_stored_and_served_back(api, workflow):
    r = post(api, TRACES.format("wf"), trace_body(context(api), **CALL))
    assert r.status_code == 201, r.content
    listed = api.get(TRACES.format("wf")).json()["results"][0]
    for key, value in CALL.items():
        assert listed[key] == value, key
    trace = ConsumerTrace.objects.get()
    assert str(trace.cost_usd) == "0.012345" and trace.latency_ms == 1234


def test_a_call_sent_without_content_reads_null_not_zero(api, workflow):
    assert post(api, TRACES.format("wf"), trace_body(context(api))).status_code == 201
    listed = api.get(TRACES.format("wf")).json()["results"][0]
    assert {k: listed[k] for k in CALL} == dict.fromkeys(CALL)


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"input_messages": "hello"}, "input_messages"),
        ({"input_messages": [{"content": "no role"}]}, "input_messages"),
        ({"input_messages": [{"role": "user", "content": "x" * 1_000_001}]}, "input_messages"),
        ({"output": {"tool_calls": []}}, "output"),
        ({"output": "x" * 200_001}, "output"),
        ({"output_tokens": -1}, "output_tokens"),
        ({"output_tokens": 10**12}, "output_tokens"),
        ({"latency_ms": 1.5}, "latency_ms"),
        ({"latency_ms": 10**10}, "latency_ms"),
        ({"cost_usd": "0.01"}, "cost_usd"),
        ({"cost_usd": True}, "cost_usd"),
        ({"cost_usd": -0.5}, "cost_usd"),
        ({"cost_usd": 1e300}, "cost_usd"),
    ],
)
def test_bad_call_content_is_refused_naming_the_field(api, workflow, overrides, field):
    r = post(api, TRACES.format("wf"), trace_body(context(api), **overrides))
    assert r.status_code == 400, r.content
    body = r.json()
    assert body["error"] == "invalid_field" and body["detail"].startswith(f"{field}:"), body
    assert not ConsumerTrace.objects.exists()
