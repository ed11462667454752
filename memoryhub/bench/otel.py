"""OTLP ingest (``POST /v1/traces``, protobuf) versus the same rows through the events API, side by side.

Each conversation gets ``execute_tool`` spans (a tool_call + tool_result event pair each) and one
``invoke_agent`` span (a note) per 10 tools, in OTLP requests of ``batch`` spans (512: the SDK's
``BatchSpanProcessor`` default). The run is cut in ``slices``: each slice posts its OTLP requests,
then posts the very event rows those spans produced, read back from the database, through the
events API into twin workflows, in batches of the same number of rows — interleaved, so both
doors see the same machine and the same table sizes. Reports rows/s for both, their ratio, the
OTLP rate per slice (first ÷ last: flat as the tables grow) and a re-send of the first slice (all
duplicates: the idempotency check alone). ``manage.py bench otel --spans N``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
from django.conf import settings

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.models import Event, Workflow


def _bodies(lo: int, hi: int, batch: int, conversations: int, t0: int) -> Iterator[bytes]:
    """OTLP protobuf requests for spans ``lo``..``hi`` (made as they are sent, not held in memory)."""
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

    for start in range(lo, hi, batch):
        request = ExportTraceServiceRequest()
        resource_spans = request.resource_spans.add()
        resource_spans.resource.attributes.append(kv("service.name", "bench-agent-svc"))
        scope = resource_spans.scope_spans.add()
        for i in range(start, min(start + batch, hi)):
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
        yield request.SerializeToString()


def _rows_of(lo: int, hi: int, conversations: int, conv: int) -> int:
    """Event rows spans ``lo``..``hi`` of conversation ``conv`` make: a note per agent span, a
    tool_call + tool_result pair per tool span (as ``_bodies`` builds them)."""
    return sum(1 if i % 11 == 10 else 2 for i in range(lo, hi) if i % conversations == conv)


def _post_events(
    http: httpx.Client, workflow: str, events: list[dict[str, Any]], prefix: str = "api"
) -> None:
    body = [{**e, "client_event_id": f"{prefix}-{e['client_event_id']}"} for e in events]
    r = http.post(f"/api/v1/workflows/{workflow}/events/", json={"events": body})
    if r.status_code != 201:
        raise RuntimeError(f"events API failed: {r.status_code} {r.text[:200]}")


def _rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else 0.0


def run(
    spans: int = 10_000, batch: int = 512, conversations: int = 4, slices: int = 10, log=print
) -> dict[str, Any]:
    stamp = time.strftime("%Y%m%d%H%M%S") + f"-{os.getpid()}"
    tenant = create_tenant(f"bench-otel-{stamp}", "OTel ingest benchmark")
    secret = issue_api_key(tenant, "bench").secret
    headers = {"Authorization": f"Bearer {secret}"}
    protobuf = {"Content-Type": "application/x-protobuf"}
    t0 = time.time_ns()
    slices = max(1, min(slices, spans // batch or 1))
    per_slice = -(-spans // slices // batch) * batch  # whole requests per slice
    log(f"otel: {spans:,} spans, {batch} per OTLP request, {conversations} conversations, {slices} slices")
    otel_seconds = api_seconds = 0.0
    otel_spans = rows = api_rows = requests = 0
    slice_rates: list[float] = []
    api_slice_rates: list[float] = []
    flush_slice_rates: list[float] = []
    flush_rows, flush_seconds = 0, 0.0
    seen: dict[str, int] = {}  # workflow → last seq already posted through the API
    with running_server(workers=1) as base, httpx.Client(base_url=base, headers=headers, timeout=600) as http:
        # Warm the worker (tokenizer load, first connection) so neither side pays it.
        http.post("/api/v1/workflows/", json={"external_id": "warm-up"})
        http.post(
            "/api/v1/workflows/warm-up/events/", json={"events": [{"kind": "note", "content": "warm-up"}]}
        )
        for lo in range(0, spans, per_slice):
            hi = min(spans, lo + per_slice)
            bodies = list(_bodies(lo, hi, batch, conversations, t0))
            started = time.perf_counter()
            for body in bodies:
                r = http.post("/v1/traces", content=body, headers=protobuf)
                if r.status_code != 200 or r.content:  # an empty response: no partialSuccess
                    raise RuntimeError(f"OTLP ingest failed: {r.status_code} {r.content[:200]!r}")
            elapsed = time.perf_counter() - started
            # The rows this slice wrote, read back and sent through the events API into twins.
            slice_rows: list[tuple[str, list[dict[str, Any]]]] = []
            for wf in Workflow.objects.filter(tenant=tenant, source="otel").order_by("external_id"):
                # Twins made once, outside the timed loops.
                for twin in (f"api-{wf.external_id}", f"flush-{wf.external_id}"):
                    if twin not in seen:
                        http.post("/api/v1/workflows/", json={"external_id": twin})
                        seen[twin] = 0
                events = [
                    {"kind": e.kind, "content": e.content, "agent": e.agent, "role": e.role,
                     "tool_call_id": e.tool_call_id, "client_event_id": e.client_event_id}
                    for e in Event.objects.filter(workflow=wf, seq__gt=seen.get(wf.external_id, 0)).order_by("seq")
                ]  # fmt: skip
                seen[wf.external_id] = wf.head_seq
                slice_rows.append((wf.external_id, events))
            made = sum(len(e) for _, e in slice_rows)
            # (a) the same number of requests as OTLP: each carries one workflow's rows, so a
            #     request holds ~``conversations``× more rows per workflow than an OTLP request did.
            per_request = min(settings.MEMORYHUB_MAX_BATCH_EVENTS, max(1, made // max(1, len(bodies))))
            started = time.perf_counter()
            for external_id, events in slice_rows:
                for at in range(0, len(events), per_request):
                    _post_events(http, f"api-{external_id}", events[at : at + per_request])
                    api_rows += len(events[at : at + per_request])
            api_elapsed = time.perf_counter() - started
            api_seconds += api_elapsed
            api_slice_rates.append(_rate(made, api_elapsed))
            # (b) the same flush points as the exporter: for each OTLP request, one events request
            #     per conversation with the rows that request's spans of it made.
            started = time.perf_counter()
            for external_id, events in slice_rows:
                conv = int(external_id.rsplit("-", 1)[1])
                at = 0
                for start in range(lo, hi, batch):
                    count = _rows_of(start, min(start + batch, hi), conversations, conv)
                    _post_events(http, f"flush-{external_id}", events[at : at + count], prefix="flush")
                    at += count
                    flush_rows += count
            flush_elapsed = time.perf_counter() - started
            flush_seconds += flush_elapsed
            flush_slice_rates.append(_rate(made, flush_elapsed))
            otel_seconds += elapsed
            otel_spans += hi - lo
            rows += made
            requests += len(bodies)
            slice_rates.append(_rate(made, elapsed))
            log(
                f"  spans {lo:,}–{hi:,}: OTLP {slice_rates[-1]:,.0f} rows/s, events API "
                f"{api_slice_rates[-1]:,.0f} (same request count), {flush_slice_rates[-1]:,.0f} (same flush points)"
            )
        resend = list(_bodies(0, min(spans, per_slice), batch, conversations, t0))
        started = time.perf_counter()
        for body in resend:
            http.post("/v1/traces", content=body, headers=protobuf).raise_for_status()
        resend_seconds = time.perf_counter() - started
    otel_rows_per_s = rows / otel_seconds
    api_rows_per_s = api_rows / api_seconds
    return {
        "spans": otel_spans,
        "otlp_requests": requests,
        "spans_per_request": batch,
        "event_rows": rows,
        "events_api_rows": api_rows,
        "otel_seconds": round(otel_seconds, 3),
        "otel_spans_per_second": _rate(otel_spans, otel_seconds),
        "otel_event_rows_per_second": round(otel_rows_per_s, 1),
        "events_api_seconds": round(api_seconds, 3),
        "events_api_rows_per_second": round(api_rows_per_s, 1),
        "ratio_otel_to_events_api": round(otel_rows_per_s / api_rows_per_s, 3),
        "otel_rows_per_second_by_slice": slice_rates,
        "otel_first_over_last_slice": round(slice_rates[0] / slice_rates[-1], 3) if slice_rates[-1] else None,
        "events_api_rows_per_second_by_slice": api_slice_rates,
        "events_api_same_flush_points_rows": flush_rows,
        "events_api_same_flush_points_rows_per_second": _rate(flush_rows, flush_seconds),
        "ratio_otel_to_events_api_same_flush_points": round(
            otel_rows_per_s / (flush_rows / flush_seconds), 3
        ),
        "events_api_same_flush_points_by_slice": flush_slice_rates,
        "events_api_first_over_last_slice": round(api_slice_rates[0] / api_slice_rates[-1], 3)
        if api_slice_rates[-1]
        else None,
        "otel_resend_spans_per_second": _rate(min(spans, per_slice), resend_seconds),
    }
