"""Concurrent retries of the same trace / artifact record exactly one row (real threads, PostgreSQL)."""

from __future__ import annotations

import pytest

from memoryhub.context.assembly import assemble_context
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.memory.workflows import get_workflow
from memoryhub.models import Artifact, ConsumerTrace
from tests.factories import append, event, make_workflow
from tests.helpers import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
AGENT = Actor.api_key("agent", "abc")


def test_eight_concurrent_retries_of_one_trace_and_artifact_make_one_row_each(tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(i) for i in range(1, 6)])
    ctx = assemble_context(get_workflow(tenant, "wf"))
    body = {
        "agent": "publisher",
        "agent_run_id": "run-1",
        "model_call_id": "call-1",
        "summary_id": None,
        "tail_to_seq": ctx["tail_to_seq"],
        "context_id": ctx["context_id"],
        "manifest_hash": ctx["manifest_hash"],
    }
    traces = race(8, lambda: record_trace(get_workflow(tenant, "wf"), dict(body), AGENT))
    assert ConsumerTrace.objects.count() == 1
    assert {t.pk for t, _ in traces} == {ConsumerTrace.objects.get().pk}
    assert sorted(created for _, created in traces) == [False] * 7 + [True]

    artifact = {"artifact_id": "T57", "kind": "test_suite", "produced_by": {"model_call_id": "call-1"}}
    artifacts = race(8, lambda: record_artifact(get_workflow(tenant, "wf"), dict(artifact), AGENT))
    assert Artifact.objects.count() == 1
    assert sorted(created for _, created in artifacts) == [False] * 7 + [True]
