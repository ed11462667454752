"""OTLP ingest (``POST /v1/traces``, protobuf) versus the same rows through the events API, side by side.

Each conversation gets ``execute_tool`` spans (a tool_call + tool_result event pair each) and one
``invoke_agent`` span (a note) per 10 tools; the events API then receives exactly the events the
span mapping produced, in batches of the same number of rows, on a real gunicorn server. Reports
spans/s and events/s for OTLP and events/s for the API, plus a re-send of the OTLP batches (all
duplicates: the idempotency check alone). Small by default (``manage.py bench otel --spans N``).
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.models import Event, Workflow


def _requests(spans: int, batch: int, conversations: int) -> list[bytes]:
    # The memoryhub[otel] extra: imported when this benchmark runs, not when `manage.py bench` loads.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    def kv(key: str, value: Any) -> KeyValue:
        item = KeyValue(key=key)
        if isinstance(value, int):
            item.value.int_value = value
        else:
            item.value.string_value = str(value)
        return item

    bodies = []
    t0 = time.time_ns()
    for lo in range(0, spans, batch):
        request = ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for i in range(lo, min(lo + batch, spans)):
            span = scope.spans.add()
            span.trace_id = (i // 50 + 1).to_bytes(16, "big")
            span.span_id = (i + 1).to_bytes(8, "big")
            span.start_time_unix_nano = t0 + i * 1000
            span.end_time_unix_nano = t0 + i * 1000 + 500
            conv = f"bench-conv-{i % conversations}"
            if i % 11 == 10:
                span.name = "invoke_agent bench-agent"
                span.attributes.extend([kv("gen_ai.conversation.id", conv), kv("gen_ai.operation.name", "invoke_agent"),
                                        kv("gen_ai.agent.name", "bench-agent")])  # fmt: skip
            else:
                span.name = "execute_tool lookup"
                span.attributes.extend([
                    kv("gen_ai.conversation.id", conv), kv("gen_ai.operation.name", "execute_tool"),
                    kv("gen_ai.tool.name", "lookup"), kv("gen_ai.tool.call.id", f"call_{i}"),
                    kv("gen_ai.tool.call.arguments", f'{{"order": {i}, "region": "eu-west-1"}}'),
                    kv("gen_ai.tool.call.result", f'{{"status": "shipped", "order": {i}, "items": {i % 7 + 1}}}'),
                ])  # fmt: skip
        bodies.append(request.SerializeToString())
    return bodies


def run(spans: int = 2_000, batch: int = 200, conversations: int = 4, log=print) -> dict[str, Any]:
    stamp = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    tenant = create_tenant(f"bench-otel-{stamp}", "OTel ingest benchmark")
    secret = issue_api_key(tenant, "bench").secret
    bodies = _requests(spans, batch, conversations)
    headers = {"Authorization": f"Bearer {secret}"}
    log(f"otel: {spans:,} spans in {len(bodies)} OTLP requests over {conversations} conversations")
    with running_server(workers=1) as base, httpx.Client(base_url=base, headers=headers, timeout=300) as http:

        def post_all() -> float:
            started = time.perf_counter()
            for body in bodies:
                r = http.post("/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"})
                if r.status_code != 200:
                    raise RuntimeError(f"OTLP ingest failed: {r.status_code} {r.text[:200]}")
            return time.perf_counter() - started

        # Warm the worker (tokenizer load, first connection) so neither side pays it.
        http.post("/api/v1/workflows/", json={"external_id": "warm-up"})
        http.post(
            "/api/v1/workflows/warm-up/events/", json={"events": [{"kind": "note", "content": "warm-up"}]}
        )
        otel_seconds = post_all()
        resend_seconds = post_all()  # every span a duplicate
        # The very same rows, through the events API, into fresh workflows.
        rows_by_wf: dict[str, list[dict[str, Any]]] = {}
        for wf in Workflow.objects.filter(tenant=tenant, source="otel").order_by("external_id"):
            rows_by_wf[wf.external_id] = [
                {"kind": e.kind, "content": e.content, "agent": e.agent, "role": e.role,
                 "tool_call_id": e.tool_call_id, "client_event_id": f"api-{e.client_event_id}"}
                for e in Event.objects.filter(workflow=wf).order_by("seq")
            ]  # fmt: skip
        rows = sum(len(v) for v in rows_by_wf.values())
        per_request = max(1, rows // max(1, len(bodies)))
        started = time.perf_counter()
        for external_id, events in rows_by_wf.items():
            target = f"api-{external_id}"
            http.post("/api/v1/workflows/", json={"external_id": target})
            for lo in range(0, len(events), per_request):
                r = http.post(
                    f"/api/v1/workflows/{target}/events/", json={"events": events[lo : lo + per_request]}
                )
                if r.status_code != 201:
                    raise RuntimeError(f"events API failed: {r.status_code} {r.text[:200]}")
        api_seconds = time.perf_counter() - started
    return {
        "spans": spans,
        "otlp_requests": len(bodies),
        "event_rows": rows,
        "otel_seconds": round(otel_seconds, 3),
        "otel_spans_per_second": round(spans / otel_seconds),
        "otel_event_rows_per_second": round(rows / otel_seconds),
        "otel_resend_spans_per_second": round(spans / resend_seconds),
        "events_api_seconds": round(api_seconds, 3),
        "events_api_rows_per_second": round(rows / api_seconds),
        "ratio_otel_to_events_api": round((rows / otel_seconds) / (rows / api_seconds), 3),
    }
