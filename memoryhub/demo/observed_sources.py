"""Demo workflows fed by frameworks that compact on their own (issue 18): Claude Code, OpenTelemetry
GenAI spans and the Anthropic Messages API.

Each is fed at load time by the real integration code, in-process (no network):

- ``claude-code``: a session transcript in Claude Code's JSONL format (compacted twice; the
  second summary drops the "401 for an expired token" requirement) goes through
  ``memoryhub.integrations.claude_code.sync_session`` — the code the ``memoryhub-hook`` runs;
- ``otel``: GenAI spans made by the real ``opentelemetry-sdk`` and encoded by the OTLP exporter's
  own encoder go through the ``POST /v1/traces`` decoder and mapping (needs ``memoryhub[otel]``);
- ``anthropic``: a Messages API response with a ``compaction`` block (the shape of the
  ``anthropic`` package's ``BetaMessage``) goes through ``record_anthropic_response``.

``ServiceSink`` stands in for the HTTP client: same method names, calling the services directly.
Each workflow gets an artifact, so its lineage runs through the observed compaction; the Claude
Code one is investigated ("which compaction dropped the fact").
"""

from __future__ import annotations

import json
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from audit.investigate import investigate
from memoryhub.client.anthropic import record_anthropic_response
from memoryhub.context.timeline import record_timeline
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.integrations.claude_code import sync_session
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.memory.workflows import create_workflow, get_workflow
from memoryhub.models import ConsumerTrace, Tenant, WorkflowSource
from memoryhub.otel import ingest, read_spans
from triggers.steps import run_step

Out = Callable[[str], None]
CLAUDE_SESSION = "7d3f0b52-cc01-4c8e-9a3e-5b1f2e0c9a11"
CLAUDE_ARTIFACT = "PR-118"
CLAUDE_FACT = "401 for an expired token"
OTEL_CONVERSATION = "conv_support_7Yq2"
ANTHROPIC_WORKFLOW = "ticket-991"


class ServiceSink:
    """The client methods the integrations call, answered by the services of one tenant."""

    def __init__(self, tenant: Tenant, actor: Actor) -> None:
        self.tenant, self.actor = tenant, actor

    def _wf(self, external_id: str):
        return get_workflow(self.tenant, external_id)

    def create_workflow(self, external_id: str, name: str | None = None, **extra: Any):
        workflow, _ = create_workflow(self.tenant, external_id, name=name or "", actor=self.actor, **extra)
        return workflow

    def get_workflow(self, external_id: str):
        wf = self._wf(external_id)
        active = wf.active_summary.summary_id if wf.active_summary_id else None
        return SimpleNamespace(head_seq=wf.head_seq, active_summary_id=active)

    def append_events(self, external_id: str, events):
        parsed, _ = parse_batch({"events": list(events)})
        return append_events(self._wf(external_id), parsed)

    def record_observed_compaction(self, external_id: str, covers_to_seq: int, compactor: dict, **kw: Any):
        return record_observed_compaction(
            self._wf(external_id), covers_to_seq=covers_to_seq, compactor=compactor, actor=self.actor, **kw
        ).to_dict()

    def step(self, external_id: str, body: dict):
        return run_step(self.tenant, external_id, body, self.actor)

    def record_timeline(self, external_id: str, items: list[dict]):
        result = record_timeline(self._wf(external_id), {"items": items}, self.actor)
        return {"head_seq": result.head_seq, "traces": result.traces}

    def record_trace(self, external_id: str, **kw: Any):
        body = {k: v for k, v in kw.items() if v is not None or k == "summary_id"}
        trace, _ = record_trace(self._wf(external_id), body, self.actor)
        return {"trace_id": trace.pk}


# -- Claude Code ------------------------------------------------------------------------------------


def claude_transcript() -> list[dict[str, Any]]:
    """A Claude Code session (JSONL entries) compacted twice: auto at 158k tokens, then manual."""
    entries: list[dict[str, Any]] = []
    parent: list[str | None] = [None]

    def add(entry: dict[str, Any]) -> dict[str, Any]:
        n = len(entries) + 1
        entry = {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{CLAUDE_SESSION}/{n}")),
            "parentUuid": parent[0],
            "sessionId": CLAUDE_SESSION,
            "timestamp": f"2026-11-28T09:{n // 60:02d}:{n % 60:02d}Z",
            "version": "2.1.3",
            "cwd": "/home/dev/payments-api",
            **entry,
        }
        parent[0] = entry["uuid"]
        entries.append(entry)
        return entry

    def user(text: str) -> None:
        add({"type": "user", "message": {"role": "user", "content": text}})

    def assistant(text: str, tokens: int, tool: tuple[str, str, str] | None = None) -> None:
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        if tool:
            blocks.append({"type": "tool_use", "id": tool[0], "name": "Bash", "input": {"command": tool[1]}})
        add(
            {
                "type": "assistant",
                "message": {
                    "id": f"msg_cc_{len(entries) + 1:03d}",
                    "role": "assistant",
                    "model": "claude-sonnet-4-5",
                    "content": blocks,
                    "usage": {"input_tokens": tokens, "cache_read_input_tokens": 0, "output_tokens": 120},
                },
            }
        )
        if tool:
            add(
                {
                    "type": "user",
                    "message": {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": tool[0], "content": tool[2]}],
                    },
                }
            )

    def compact(trigger: str, pre: int, summary: str) -> None:
        add(
            {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "compactMetadata": {"trigger": trigger, "preTokens": pre},
            }
        )
        add(
            {
                "type": "user",
                "isCompactSummary": True,
                "message": {
                    "role": "user",
                    "content": "This session is being continued from a previous conversation. " + summary,
                },
            }
        )

    user(
        "Add tests for POST /refunds. Requirements: idempotency key required, amount <= captured amount, "
        f"and the endpoint must return {CLAUDE_FACT} (not 403)."
    )
    assistant(
        "Reading the refunds handler first.",
        12_400,
        ("toolu_01", "rg -n 'def create_refund' src", "src/refunds/api.py:41"),
    )
    assistant("The handler checks scope before expiry, so an expired token gets 403 today.", 31_000)
    user("Fix that too, then write the tests.")
    assistant(
        "Reordered the checks: expiry first (401), then scope (403).",
        64_000,
        ("toolu_02", "pytest tests/refunds -q", "12 passed"),
    )
    compact(
        "auto",
        158_200,
        "Task: tests for POST /refunds (idempotency key required; amount <= captured; "
        f"{CLAUDE_FACT}). Handler fixed to check expiry before scope. 12 tests pass.",
    )
    assistant(
        "Adding the idempotency-key tests.",
        41_000,
        ("toolu_03", "pytest tests/refunds/test_idempotency.py -q", "4 passed"),
    )
    user("Also cover partial refunds.")
    assistant("Partial refund tests added; amount above captured returns 422.", 77_500)
    compact(
        "manual",
        96_000,
        "Task: tests for POST /refunds: idempotency key and partial refunds are covered; amount above "
        "captured returns 422. Remaining: open the pull request.",
    )
    assistant("Opened PR-118: refunds endpoint tests (idempotency, partial refunds, amount limits).", 18_300)
    return entries


def load_claude_code(tenant: Tenant, actor: Actor, out: Out) -> None:
    sink = ServiceSink(tenant, actor)
    with tempfile.TemporaryDirectory(prefix="memoryhub-demo-") as tmp:
        path = Path(tmp) / f"{CLAUDE_SESSION}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in claude_transcript()))
        stats = sync_session(sink, CLAUDE_SESSION, path, Path(tmp) / "hook")
    last = ConsumerTrace.objects.filter(workflow__tenant=tenant, workflow__external_id=CLAUDE_SESSION).latest(
        "id"
    )
    artifact, _ = record_artifact(
        get_workflow(tenant, CLAUDE_SESSION),
        {
            "artifact_id": CLAUDE_ARTIFACT,
            "kind": "pull_request",
            "produced_by": {"model_call_id": last.model_call_id},
        },
        actor,
    )
    inv = investigate(artifact, CLAUDE_FACT, Actor.system("load_demo"))
    out(
        f"  workflow {tenant.slug}/{CLAUDE_SESSION[:8]}… (claude-code): {stats['events']} events, "
        f"{stats['compactions']} observed compactions, {stats['traces']} traces; "
        f"investigation of {CLAUDE_FACT!r} on {CLAUDE_ARTIFACT}: {inv.verdict}"
    )


# -- OpenTelemetry ----------------------------------------------------------------------------------


def otel_request_bytes() -> bytes | None:
    """An OTLP protobuf ExportTraceServiceRequest made by the real SDK (None without memoryhub[otel])."""
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-assistant"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("memoryhub.demo")
    conv: dict[str, Any] = {"gen_ai.conversation.id": OTEL_CONVERSATION, "gen_ai.agent.name": "support-bot"}

    def chat(text: str, tokens: int) -> None:
        output = [{"role": "assistant", "parts": [{"type": "text", "content": text}]}]
        attrs: dict[str, Any] = {**conv, "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                 "gen_ai.request.model": "gpt-4.1", "gen_ai.usage.input_tokens": tokens,
                 "gen_ai.output.messages": json.dumps(output)}  # fmt: skip
        with tracer.start_as_current_span("chat gpt-4.1", attributes=attrs):
            pass

    with tracer.start_as_current_span(
        "invoke_agent support-bot", attributes={**conv, "gen_ai.operation.name": "invoke_agent"}
    ):
        chat("Customer 5521 reports a double charge on order 4417.", 3_200)
        with tracer.start_as_current_span(
            "execute_tool lookup_order",
            attributes={**conv, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
                        "gen_ai.tool.call.id": "call_lookup_1", "gen_ai.tool.call.arguments": '{"order": 4417}',
                        "gen_ai.tool.call.result": '{"charges": 2, "amount": "49.00 EUR"}'},
        ):  # fmt: skip
            pass
        chat("Two captures of 49.00 EUR found; refund of the duplicate is due.", 88_000)
        compaction: dict[str, Any] = {**conv, "gen_ai.operation.name": "compact", "gen_ai.conversation.compacted": True,
                      "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4.1-mini",
                      "gen_ai.compaction.trigger": "auto", "gen_ai.compaction.pre_tokens": 96_000,
                      "gen_ai.compaction.threshold_tokens": 95_000,
                      "gen_ai.compaction.summary": "Customer 5521, order 4417: duplicate capture of 49.00 EUR; refund due."}  # fmt: skip
        with tracer.start_as_current_span("compact", attributes=compaction):
            pass
        chat("Refund of 49.00 EUR issued for order 4417.", 2_100)
    provider.shutdown()
    return encode_spans(memory.get_finished_spans()).SerializeToString()


def load_otel(tenant: Tenant, actor: Actor, out: Out) -> None:
    body = otel_request_bytes()
    if body is None:
        out("  OpenTelemetry workflow skipped: install memoryhub[otel] (opentelemetry-sdk) to feed it")
        return
    spans, malformed = read_spans(body, "application/x-protobuf")
    result = ingest(tenant, spans, actor, malformed=malformed)
    wf = get_workflow(tenant, OTEL_CONVERSATION)
    last = ConsumerTrace.objects.filter(workflow=wf).latest("id")
    record_artifact(
        wf,
        {
            "artifact_id": "REFUND-4417",
            "kind": "refund",
            "produced_by": {"model_call_id": last.model_call_id},
        },
        actor,
    )
    out(
        f"  workflow {tenant.slug}/{OTEL_CONVERSATION} (otel): {result.received} spans → {result.events} events, "
        f"{result.traces} traces, {result.compactions} observed compaction(s)"
    )


# -- Anthropic --------------------------------------------------------------------------------------


def anthropic_response() -> dict[str, Any]:
    """A Messages API response (``BetaMessage`` shape) whose context was compacted by the API."""
    return {
        "id": "msg_01DemoCompaction",
        "type": "message",
        "role": "assistant",
        "model": "claude-opus-4-6",
        "content": [
            {
                "type": "compaction",
                "content": "Ticket 991: merchant asks why payout 3310 is on hold; KYC document expired on 2026-11-20; "
                "new document requested.",
            },
            {"type": "text", "text": "Payout 3310 is on hold until the renewed KYC document is verified."},
        ],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 7_900,
            "output_tokens": 160,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": 152_300,
                    "output_tokens": 1_400,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
                {
                    "type": "message",
                    "input_tokens": 7_900,
                    "output_tokens": 160,
                    "model": "claude-opus-4-6",
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            ],  # fmt: skip
        },
    }


def load_anthropic(tenant: Tenant, actor: Actor, out: Out) -> None:
    sink = ServiceSink(tenant, actor)
    wf = sink.create_workflow(
        ANTHROPIC_WORKFLOW, name="Payout hold ticket 991", source=WorkflowSource.ANTHROPIC
    )
    # The history the API compacted: everything its summary states is said here (a summary naming a
    # ticket or a date no message mentions is a fabrication, and the validator says so).
    messages = [
        {"role": "user", "content": text}
        for text in [
            "Ticket 991: why is payout 3310 on hold?",
            "We uploaded our KYC document last year; the portal says it expired on 2026-11-20.",
            "We have requested a new document. Can you check whether anything else expired?",
        ]
    ]
    cm = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150_000}}]}
    result = record_anthropic_response(
        sink,
        ANTHROPIC_WORKFLOW,
        anthropic_response(),
        messages=messages,
        context_management=cm,
    )
    record_artifact(
        wf,
        {
            "artifact_id": "REPLY-991",
            "kind": "reply",
            "produced_by": {"model_call_id": "anthropic:msg_01DemoCompaction"},
        },
        actor,
    )
    out(
        f"  workflow {tenant.slug}/{ANTHROPIC_WORKFLOW} (anthropic): "
        f"{len(result['compactions'])} observed compaction(s), {result['events']} event(s)"
    )


def load(tenant: Tenant, actor: Actor, out: Out) -> None:
    load_claude_code(tenant, actor, out)
    load_otel(tenant, actor, out)
    load_anthropic(tenant, actor, out)
