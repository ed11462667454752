"""Concurrent re-sends of one observed compaction and of one OTLP batch (real threads, PostgreSQL)."""

from __future__ import annotations

import pytest

from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.memory.workflows import get_workflow
from memoryhub.models import CompactionJob, ConsumerTrace, Event, OtelSpan, Summary, Workflow
from memoryhub.otel.decode import json_spans
from memoryhub.otel.ingest import ingest
from tests.factories import append, event, make_workflow
from tests.helpers import race

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ACTOR = Actor.system("hook")


def test_eight_concurrent_sends_of_one_observation_make_one_version(tenant):
    wf = make_workflow(tenant, "sess")
    append(wf, [event(i) for i in range(1, 9)])
    results = race(
        8,
        lambda: record_observed_compaction(
            get_workflow(tenant, "sess"), covers_to_seq=6, text="summary", compactor={"name": "claude-code"},
            trigger={"kind": "auto", "pre_tokens": 150_000}, observation_id="boundary-1", actor=ACTOR,
        ),
    )  # fmt: skip
    assert Summary.objects.count() == 1 and CompactionJob.objects.count() == 1
    assert sorted(r.created for r in results) == [False] * 7 + [True]
    assert {r.summary.pk for r in results} == {Summary.objects.get().pk}
    wf.refresh_from_db()
    assert wf.active_summary_id == Summary.objects.get().pk and wf.active_revision == 1


def _otlp(conversation: str) -> dict:
    def span(i: int, op: str, **attrs) -> dict:
        values = [{"key": "gen_ai.conversation.id", "value": {"stringValue": conversation}},
                  {"key": "gen_ai.operation.name", "value": {"stringValue": op}}]  # fmt: skip
        values += [
            {"key": k.replace("_", ".", 1) if k.startswith("gen_") else k, "value": v}
            for k, v in attrs.items()
        ]
        return {"traceId": "ab" * 16, "spanId": f"{i:016x}", "name": op, "startTimeUnixNano": str(1_000 + i),
                "endTimeUnixNano": str(1_500 + i), "attributes": values}  # fmt: skip

    spans = [span(i, "execute_tool") for i in range(1, 6)]
    spans.append(span(6, "chat", **{"gen_ai.usage.input_tokens": {"intValue": "900"}}))
    spans.append(span(7, "compact", **{"gen_ai.compaction.summary": {"stringValue": "tools ran"}}))
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def test_concurrent_resends_of_one_otlp_batch_write_everything_once(tenant):
    race(6, lambda: ingest(tenant, json_spans(_otlp("conv-1"))[0], ACTOR))
    wf = Workflow.objects.get(external_id="conv-1")
    assert Event.objects.filter(workflow=wf).count() == 10  # five tool call/result pairs
    assert OtelSpan.objects.filter(workflow=wf).count() == 7
    assert (
        ConsumerTrace.objects.filter(workflow=wf).count() == 1
        and Summary.objects.filter(workflow=wf).count() == 1
    )
