"""OTLP/HTTP ingest (``POST /v1/traces``): the real OpenTelemetry SDK and OTLP/HTTP exporter send
GenAI spans to a live MemoryHub; JSON bodies, retries, ordering and unassigned spans are checked
on the endpoint directly."""

from __future__ import annotations

import gzip
import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memoryhub.models import ConsumerTrace, Event, OtelSpan, Summary, SummaryStatus, Workflow

CONV = "conv_5j66UpCpwteGg4YSxUnt7lPY"


def _emit(
    tracer,
    conversation: str | None = CONV,
    *,
    compact_text: str | None = "Summary: user wants refunds fixed.",
) -> None:
    """One agent turn the way GenAI instrumentations emit it, then a compaction, then one more call."""
    base = {"gen_ai.conversation.id": conversation} if conversation else {}
    with tracer.start_as_current_span(
        "invoke_agent support-bot",
        attributes={
            **base,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support-bot",
            "gen_ai.agent.id": "asst_1",
            "x.custom.attribute": [1, 2, 3],
        },
    ):
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                **base,
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.agent.name": "support-bot",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 80,
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "text", "content": "Refund API returns 401 Unauthorized."}],
                        }
                    ]
                ),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_refund",
            attributes={
                **base,
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_refund",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"id": 7}',
                "gen_ai.tool.call.result": '{"status": 401}',
            },
        ):
            pass
        attrs = {
            **base,
            "gen_ai.operation.name": "compact",
            "gen_ai.conversation.compacted": True,
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4.1-mini",
            "gen_ai.compaction.trigger": "auto",
            "gen_ai.compaction.pre_tokens": 96000,
        }
        if compact_text:
            attrs["gen_ai.compaction.summary"] = compact_text
        with tracer.start_as_current_span("compact", attributes=attrs):
            pass
        with tracer.start_as_current_span(
            "chat gpt-4.1",
            attributes={
                **base,
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4.1",
                "gen_ai.usage.input_tokens": 300,
            },
        ):
            pass  # fmt: skip


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip])
def test_real_sdk_exporter_feeds_workflow_events_traces_and_an_observed_compaction(
    live_server, alice, compression
):
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {alice.key.secret}"},
        compression=compression,
        timeout=30,
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "support-svc"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _emit(provider.get_tracer("test"))
    _emit(provider.get_tracer("test"), conversation=None)  # five spans without a conversation id
    provider.shutdown()

    wf = Workflow.objects.get(external_id=CONV)
    assert wf.source == "otel"
    events = list(Event.objects.filter(workflow=wf).order_by("seq").values_list("kind", "content"))
    assert [k for k, _ in events] == [
        "message",
        "tool_call",
        "tool_result",
        "note",
    ]  # note: invoke_agent ends last
    assert "401 Unauthorized" in events[0][1] and events[1][1] == 'get_refund({"id": 7})'
    summary = Summary.objects.get(workflow=wf)
    assert (
        summary.compactor_name == "openai"
        and summary.model == "gpt-4.1-mini"
        and summary.status == SummaryStatus.ACTIVE
    )
    assert summary.covers_to_seq == 3 and "user wants refunds" in summary.content
    assert summary.job.attempts[0]["trigger"] == {"kind": "auto", "pre_tokens": 96000}
    traces = list(ConsumerTrace.objects.filter(workflow=wf).order_by("input_tokens"))
    assert [(t.input_tokens, t.summary_id) for t in traces] == [(300, summary.pk), (1200, None)]
    assert traces[1].model == "gpt-4.1" and traces[1].agent == "support-bot"
    # Usage and the span's own duration; a span says nothing of cost, which stays not recorded.
    assert [t.output_tokens for t in traces] == [None, 80]
    assert all(t.latency_ms is not None and t.latency_ms >= 0 for t in traces)
    assert all(t.cost_usd is None for t in traces)
    kept = OtelSpan.objects.get(workflow=wf, operation="invoke_agent")
    assert (
        kept.attributes["x.custom.attribute"] == [1, 2, 3] and kept.resource["service.name"] == "support-svc"
    )
    assert OtelSpan.objects.filter(workflow=None, mapped_to="unassigned").count() == 5
    status = alice.api.get("/api/v1/otel/status/").json()
    assert (
        status["unassigned"] == 5
        and status["by_mapping"]["compaction"] == 1
        and status["semconv_version"] == "1.41.0"
    )


def _request_bytes(conversation: str = CONV, **kw) -> bytes:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _emit(provider.get_tracer("t"), conversation, **kw)
    return encode_spans(memory.get_finished_spans()).SerializeToString()


def _spans_json(body: bytes) -> dict:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    data = MessageToDict(message)
    import base64

    for rs in data["resourceSpans"]:  # OTLP/JSON ids are hex, not base64
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return data


def _post(api, body, content_type="application/x-protobuf", **headers):
    return api.generic("POST", "/v1/traces", body, content_type=content_type, **headers)


def test_resent_batches_are_idempotent_by_span_id(api, tenant):
    body = _request_bytes()
    first = _post(api, body)
    assert first.status_code == 200 and first["Content-Type"] == "application/x-protobuf"
    assert "duplicates=0" in first["X-MemoryHub-Ingest"]
    again = _post(api, gzip.compress(body), HTTP_CONTENT_ENCODING="gzip")
    assert again.status_code == 200 and "duplicates=5" in again["X-MemoryHub-Ingest"]
    wf = Workflow.objects.get(external_id=CONV)
    assert wf.head_seq == 4 and Summary.objects.filter(workflow=wf).count() == 1
    assert (
        ConsumerTrace.objects.filter(workflow=wf).count() == 2
        and OtelSpan.objects.filter(workflow=wf).count() == 5
    )


def test_json_encoding_and_out_of_order_arrival(api, tenant):
    data = _spans_json(_request_bytes(compact_text=None))
    spans = data["resourceSpans"][0]["scopeSpans"][0]["spans"]
    compaction = [s for s in spans if s["name"] == "compact"]
    rest = [s for s in spans if s["name"] != "compact"]
    # The compaction span arrives first, alone: nothing to cover yet, so it waits.
    data["resourceSpans"][0]["scopeSpans"][0]["spans"] = compaction
    first = _post(api, json.dumps(data), "application/json")
    assert first.status_code == 200 and first.json() == {} and "deferred=1" in first["X-MemoryHub-Ingest"]
    assert OtelSpan.objects.get(name="compact").mapped_to == "deferred"
    data["resourceSpans"][0]["scopeSpans"][0]["spans"] = rest
    second = _post(api, json.dumps(data), "application/json")
    assert second.status_code == 200 and "compactions=1" in second["X-MemoryHub-Ingest"]
    summary = Summary.objects.get(workflow__external_id=CONV)
    # One batch is handled in start order: invoke_agent's note is seq 1, chat 2, the tool pair 3-4,
    # all started before the compaction; no summary text was sent, so the content is opaque.
    assert summary.covers_to_seq == 4 and summary.content_schema == "memoryhub.opaque/v1"
    assert summary.validations.get().result == "unverifiable"


def test_missing_conversation_id_is_reported_and_bad_bodies_are_clear_errors(api, carol, mallory, tenant):
    response = _post(api, _request_bytes(conversation=""))
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    parsed = ExportTraceServiceResponse()
    parsed.ParseFromString(response.content)
    assert parsed.partial_success.rejected_spans == 0
    assert parsed.partial_success.error_message.startswith(
        "5 span(s) had no conversation id (gen_ai.conversation.id"
    )
    assert OtelSpan.objects.filter(mapped_to="unassigned").count() == 5 and not Workflow.objects.exists()

    bad = _post(api, b"\xff\xfe not protobuf")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_body"
    assert _post(api, b"{}", "text/plain").status_code == 415
    assert _post(api, b"xx", HTTP_CONTENT_ENCODING="gzip").json()["error"] == "invalid_body"
    assert _post(
        api,
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "no ids"}, 5]}]}]}),
        "application/json",
    ).json() == {
        "partialSuccess": {
            "rejectedSpans": 2,
            "errorMessage": "2 span(s) without a valid trace/span id rejected",
        }
    }
    assert (
        carol.api.generic(
            "POST", "/v1/traces", _request_bytes(), content_type="application/x-protobuf"
        ).status_code
        == 403
    )
    from rest_framework.test import APIClient

    assert (
        APIClient().generic("POST", "/v1/traces", b"", content_type="application/x-protobuf").status_code
        == 401
    )
    # Another tenant's identical spans are its own (idempotency is per tenant).
    assert "duplicates=0" in _post(mallory.api, _request_bytes(conversation=CONV))["X-MemoryHub-Ingest"]


def test_a_failing_conversation_is_rejected_alone_and_writes_nothing(api, tenant):
    """One request, three conversations: an invalid id, one whose event id was already used for
    different content (a 409 on its own), one fine. 200 with partialSuccess: the two failing
    ones rejected with their reasons and nothing of theirs written but the spans (kept rejected);
    the good one written in full."""
    from memoryhub.core.actors import Actor
    from memoryhub.memory.events import append_events, parse_event
    from memoryhub.memory.workflows import create_workflow

    bodies = {conv: _spans_json(_request_bytes(conversation=conv)) for conv in ("bad/id", "clash", "good")}
    # "clash" already holds an event under the id its execute_tool span maps to, with other content.
    tool = next(
        s
        for s in bodies["clash"]["resourceSpans"][0]["scopeSpans"][0]["spans"]
        if s["name"].startswith("execute_tool")
    )
    clash, _ = create_workflow(tenant, "clash", actor=Actor.system("test"))
    append_events(
        clash, [parse_event({"kind": "note", "content": "x", "client_event_id": f"otel:{tool['spanId']}"}, 0)]
    )
    data = {"resourceSpans": [rs for body in bodies.values() for rs in body["resourceSpans"]]}
    response = _post(api, json.dumps(data), "application/json")
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert partial["rejectedSpans"] == 10
    assert "5 span(s) of conversation 'bad/id' rejected (invalid_external_id)" in partial["errorMessage"]
    assert "5 span(s) of conversation 'clash' rejected (client_event_id_conflict)" in partial["errorMessage"]
    assert OtelSpan.objects.filter(workflow=None, mapped_to="rejected").count() == 10
    assert not Workflow.objects.filter(external_id="bad/id").exists()
    clash.refresh_from_db()
    assert clash.head_seq == 1 and not ConsumerTrace.objects.filter(workflow=clash).exists()
    assert not Summary.objects.filter(workflow=clash).exists()
    good = Workflow.objects.get(external_id="good")
    assert good.head_seq == 4 and ConsumerTrace.objects.filter(workflow=good).count() == 2
    assert Summary.objects.filter(workflow=good).count() == 1
    # Re-sent (an exporter retrying): every span a duplicate, nothing written twice.
    again = _post(api, json.dumps(data), "application/json")
    assert "duplicates=15" in again["X-MemoryHub-Ingest"] and again.json() == {}
    assert OtelSpan.objects.count() == 15


def test_a_span_clock_or_usage_beyond_belief_is_left_out_of_its_trace_not_a_reason_to_drop_it():
    from memoryhub.otel.decode import SpanIn
    from memoryhub.otel.ingest import _span_ms, _usage

    def span(start: int, end: int) -> SpanIn:
        return SpanIn("t" * 32, "s" * 16, "", "chat", start, end, {}, {}, [])

    assert _span_ms(span(1_000_000_000, 1_250_000_000)) == 250
    assert _span_ms(span(0, 5)) is None  # no start time recorded
    assert _span_ms(span(2_000_000_000, 1_000_000_000)) is None  # ends before it starts
    assert _span_ms(span(1, 10**9 * 86_400 * 3)) is None  # three days: not a model call's latency
    assert _usage({"gen_ai.usage.output_tokens": 10**12}, "gen_ai.usage.output_tokens") is None
    assert _usage({"gen_ai.usage.output_tokens": 42}, "gen_ai.usage.output_tokens") == 42


STORED = 10_000


@pytest.mark.postgres
def test_stored_spans_are_found_by_index_probes_even_when_statistics_lag(tenant):
    """The idempotency lookup of a 512-span request, with 10,000 spans stored since the table was
    last analyzed (as on a fast-growing tenant between autovacuum runs): every key is one probe of
    the (tenant, trace, span) index. The old ``trace_id IN … AND span_id IN …`` read all of the
    tenant's spans there and filtered them (hundreds of ms, growing with the table)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from memoryhub.core.actors import Actor
    from memoryhub.otel.decode import SpanIn
    from memoryhub.otel.ingest import _stored, ingest

    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {OtelSpan._meta.db_table}")  # statistics of an empty table
    for lo in range(0, STORED, 1_000):  # spans without a conversation: stored, mapped to nothing
        spans = [
            SpanIn(f"{i // 50:032x}", f"{i:016x}", "", "chat", i, i + 1, {}, {}, [])
            for i in range(lo, lo + 1_000)
        ]
        ingest(tenant, spans, Actor.system("test"))
    assert OtelSpan.objects.filter(tenant=tenant).count() == STORED
    keys = [
        (f"{i // 50:032x}", f"{i:016x}") for i in range(STORED - 256, STORED + 256)
    ]  # half stored, half new
    with CaptureQueriesContext(connection) as queries:
        found = _stored(tenant, keys)
    assert set(found) == {k for k in keys if int(k[1], 16) < STORED}
    (query,) = queries.captured_queries
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query["sql"])
        plan = json.dumps(cursor.fetchone()[0])
    assert '"Rows Removed by Filter"' not in plan or '"Rows Removed by Filter": 0' in plan, plan
    assert (
        "Seq Scan" not in plan.replace('"Function Scan"', "") and "memoryhub_otelspan_unique_span" in plan
    ), plan
