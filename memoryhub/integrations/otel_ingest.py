"""OpenTelemetry GenAI spans → workflows, events, consumer traces and observed compactions.

``POST /v1/traces`` (OTLP/HTTP, protobuf or JSON) hands the decoded request here. The mapping
follows the GenAI semantic conventions as of semantic-conventions **v1.41.0** (the last release
that holds the ``gen_ai.*`` registry in the main repository; the conventions are in development):

| span / attribute                                   | becomes                                            |
|----------------------------------------------------|----------------------------------------------------|
| ``gen_ai.conversation.id``                         | the workflow with that external id (created on first sight, source ``otel``) |
| operation ``chat`` / ``generate_content`` / ``text_completion`` | a consumer trace (``model_call_id = otel:<span id>``, ``input_tokens = gen_ai.usage.input_tokens``, model, agent = ``gen_ai.agent.name``/``.id``); its ``gen_ai.output.messages``, if sent, a message event |
| operation ``invoke_agent`` / ``create_agent`` / ``invoke_workflow`` | a ``note`` event naming the agent           |
| operation ``execute_tool``                         | a ``tool_call`` + ``tool_result`` event pair (``gen_ai.tool.call.id``) |
| ``gen_ai.conversation.compacted = true``, operation ``compact``/``compaction``, or a span event named ``gen_ai.compaction``/``compaction`` | an observed compaction (``memoryhub.memory.observed``): watermark = last event of a span that started before it; text from ``gen_ai.compaction.summary``, else opaque (``gen_ai.compaction.digest``/``.size_bytes``); trigger from ``gen_ai.compaction.trigger`` and ``.pre_tokens`` (or ``gen_ai.usage.input_tokens``) |
| anything else                                      | kept (stored with every attribute), no event       |
| no ``gen_ai.conversation.id``                      | kept *unassigned* and counted in the response     |

``gen_ai.conversation.compacted`` and the ``gen_ai.compaction.*`` attributes are not (yet) in the
registry: they are MemoryHub's names until the conventions define compaction. Unknown or missing
attributes are kept, never an error. Ingest is idempotent by (trace id, span id): a re-sent span
is skipped, and every write below it is idempotent too (client_event_id, model_call_id,
observation_id). Spans of one request are handled in start-time order; a compaction whose events
have not arrived yet is kept ``deferred`` and retried when later spans of its conversation arrive.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import Count, Max

from memoryhub.context.traces import record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.core.inflate import inflate
from memoryhub.memory.events import append_events, parse_event
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import OtelSpan, SpanMapping, Summary, Tenant, Workflow, WorkflowSource

SEMCONV_VERSION = "1.41.0"
INFERENCE_OPS = frozenset({"chat", "generate_content", "text_completion"})
AGENT_OPS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
TOOL_OPS = frozenset({"execute_tool"})
COMPACTION_OPS = frozenset({"compact", "compaction"})
COMPACTION_EVENTS = frozenset({"gen_ai.compaction", "compaction"})
MAX_DECODED_BYTES = 64 * 1024 * 1024
EMPTY_DIGEST = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


# -- decoding ------------------------------------------------------------------------------------


def decompress(body: bytes, encoding: str) -> bytes:
    # Streamed, the limit on the inflated bytes (BodyDecodingMiddleware has normally done it already).
    return inflate(body, encoding, MAX_DECODED_BYTES)


def decode_request(body: bytes, content_type: str) -> tuple[dict[str, Any], str]:
    """(request as OTLP/JSON-shaped dict, id encoding 'hex' | 'base64')."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/json":
        try:
            data = json.loads(body or b"{}")
        except (ValueError, RecursionError) as exc:
            raise InvalidInput(f"body is not JSON: {exc}", code="invalid_body") from exc
        if not isinstance(data, dict):
            raise InvalidInput("body must be an ExportTraceServiceRequest object", code="invalid_body")
        return data, "hex"
    if ctype in ("application/x-protobuf", "application/protobuf"):
        try:
            from google.protobuf.json_format import MessageToDict
            from google.protobuf.message import DecodeError
            from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
        except ImportError as exc:  # optional extra memoryhub[otel]
            raise InvalidInput(
                "protobuf OTLP needs the optional extra memoryhub[otel] on the server; send JSON instead",
                code="protobuf_unavailable",
                status=415,
            ) from exc
        message = ExportTraceServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise InvalidInput(
                f"body is not an OTLP protobuf ExportTraceServiceRequest: {exc}", code="invalid_body"
            ) from exc
        return MessageToDict(message), "base64"
    raise InvalidInput(
        f"Content-Type {content_type!r}: use application/x-protobuf or application/json",
        code="unsupported_media_type",
        status=415,
    )


def encode_response(partial: dict[str, Any] | None, content_type: str) -> tuple[bytes, str]:
    """ExportTraceServiceResponse in the request's encoding."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if ctype == "application/json":
        return json.dumps({"partialSuccess": partial} if partial else {}).encode(), "application/json"
    # The memoryhub[otel] extra: decode_request has already needed it for a protobuf request.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    response = ExportTraceServiceResponse()
    if partial:
        response.partial_success.rejected_spans = int(partial.get("rejectedSpans", 0))
        response.partial_success.error_message = partial.get("errorMessage", "")
    return response.SerializeToString(), "application/x-protobuf"


def any_value(value: Any) -> Any:
    """OTLP AnyValue (JSON shape) → a plain JSON value."""
    if not isinstance(value, dict):
        return value
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return value["intValue"]
    if "doubleValue" in value:
        return value["doubleValue"]
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in value:
        return attributes((value["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def attributes(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        if isinstance(item, dict) and isinstance(item.get("key"), str):
            out[item["key"]] = any_value(item.get("value"))
    return out


def _id(value: Any, encoding: str, size: int) -> str:
    if not isinstance(value, str) or not value:
        return ""
    if encoding == "base64":
        try:
            return base64.b64decode(value).hex()[: size * 2]
        except (binascii.Error, ValueError):
            return ""
    return value.lower()[: size * 2]


def _nanos(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


@dataclass
class SpanIn:
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    resource: dict[str, Any]
    events: list[dict[str, Any]]
    status: dict[str, Any] = field(default_factory=dict)

    @property
    def conversation_id(self) -> str:
        value = self.attrs.get("gen_ai.conversation.id")
        return str(value).strip()[:200] if value not in (None, "") else ""

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        if isinstance(op, str) and op:
            return op[:64]
        return (self.name.split(" ", 1)[0] if self.name else "")[:64]

    def compaction_event(self) -> dict[str, Any] | None:
        for event in self.events:
            if (
                event.get("name") in COMPACTION_EVENTS
                or event["attributes"].get("gen_ai.conversation.compacted") is True
            ):
                return event
        return None

    @property
    def is_compaction(self) -> bool:
        return (
            self.attrs.get("gen_ai.conversation.compacted") is True
            or self.operation in COMPACTION_OPS
            or self.compaction_event() is not None
        )


def iter_spans(request: dict[str, Any], encoding: str) -> tuple[list[SpanIn], int]:
    """Every span of the request (and how many were malformed: no trace/span id)."""
    spans: list[SpanIn] = []
    malformed = 0
    for rs in request.get("resourceSpans") or []:
        if not isinstance(rs, dict):
            continue
        resource = attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            if not isinstance(ss, dict):
                continue
            for raw in ss.get("spans") or []:
                if not isinstance(raw, dict):
                    malformed += 1
                    continue
                trace_id, span_id = _id(raw.get("traceId"), encoding, 16), _id(raw.get("spanId"), encoding, 8)
                if not trace_id or not span_id:
                    malformed += 1
                    continue
                events = [
                    {
                        "name": str(e.get("name") or ""),
                        "time": _nanos(e.get("timeUnixNano")),
                        "attributes": attributes(e.get("attributes")),
                    }
                    for e in raw.get("events") or []
                    if isinstance(e, dict)
                ]
                spans.append(
                    SpanIn(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=_id(raw.get("parentSpanId"), encoding, 8),
                        name=str(raw.get("name") or "")[:200],
                        start=_nanos(raw.get("startTimeUnixNano")),
                        end=_nanos(raw.get("endTimeUnixNano")),
                        attrs=attributes(raw.get("attributes")),
                        resource=resource,
                        events=events,
                        status=raw.get("status") or {},
                    )
                )
    return spans, malformed


# -- mapping -------------------------------------------------------------------------------------


def _int_attr(attrs: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and value >= 0:
            return value
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def _agent(span: SpanIn) -> str:
    for key in ("gen_ai.agent.name", "gen_ai.agent.id"):
        if span.attrs.get(key):
            return str(span.attrs[key])[:100]
    return str(span.resource.get("service.name") or "otel")[:100]


def _messages_text(value: Any) -> str:
    """Text of gen_ai.input/output.messages (a JSON string or structured list of {role, parts})."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    texts: list[str] = []
    for message in value if isinstance(value, list) else []:
        if not isinstance(message, dict):
            continue
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str):
                texts.append(part["content"])
    return "\n".join(texts)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def span_events(span: SpanIn, max_chars: int) -> list[dict[str, Any]]:
    """Events (API shape) a span becomes; empty for inference/compaction/unknown spans."""
    op, agent, sid = span.operation, _agent(span), span.span_id
    if op in TOOL_OPS:
        call_id = str(span.attrs.get("gen_ai.tool.call.id") or f"otel-{sid}")[:200]
        name = str(span.attrs.get("gen_ai.tool.name") or "tool")
        args = _text(span.attrs.get("gen_ai.tool.call.arguments"))
        result = _text(span.attrs.get("gen_ai.tool.call.result"))
        error = (span.status or {}).get("code") in (2, "STATUS_CODE_ERROR")
        if not result:
            result = (
                "error: " + str((span.status or {}).get("message") or "")
                if error
                else "(result not recorded)"
            )
        return [
            {"kind": "tool_call", "agent": agent, "role": "assistant", "tool_call_id": call_id,
             "content": f"{name}({args})"[:max_chars], "client_event_id": f"otel:{sid}"},
            {"kind": "tool_result", "agent": agent, "role": "tool", "tool_call_id": call_id,
             "content": result[:max_chars], "client_event_id": f"otel:{sid}:result"},
        ]  # fmt: skip
    if op in AGENT_OPS:
        desc = span.attrs.get("gen_ai.agent.description")
        content = f"{op} {agent}" + (f": {desc}" if desc else "")
        return [
            {
                "kind": "note",
                "agent": agent,
                "role": "system",
                "content": content[:max_chars],
                "client_event_id": f"otel:{sid}",
            }
        ]
    if op in INFERENCE_OPS:
        text = _messages_text(span.attrs.get("gen_ai.output.messages"))
        if text:
            return [
                {
                    "kind": "message",
                    "agent": agent,
                    "role": "assistant",
                    "content": text[:max_chars],
                    "client_event_id": f"otel:{sid}",
                }
            ]
    return []


def _mapping(span: SpanIn) -> str:
    if not span.conversation_id:
        return SpanMapping.UNASSIGNED
    if span.is_compaction:
        return SpanMapping.COMPACTION
    if span.operation in INFERENCE_OPS:
        return SpanMapping.TRACE
    if span.operation in TOOL_OPS | AGENT_OPS:
        return SpanMapping.EVENT
    return SpanMapping.KEPT


@dataclass
class IngestResult:
    received: int = 0
    duplicates: int = 0
    malformed: int = 0
    unassigned: int = 0
    events: int = 0
    traces: int = 0
    compactions: int = 0
    deferred: int = 0
    kept: int = 0
    workflows_created: int = 0
    errors: list[str] = field(default_factory=list)

    def partial_success(self) -> dict[str, Any] | None:
        """OTLP partial success: rejected = malformed; a warning message for what needs attention."""
        notes = []
        if self.unassigned:
            notes.append(
                f"{self.unassigned} span(s) had no gen_ai.conversation.id: kept unassigned, not mapped"
            )
        if self.malformed:
            notes.append(f"{self.malformed} span(s) without trace/span id rejected")
        notes += self.errors[:5]
        if not notes:
            return None
        return {"rejectedSpans": self.malformed, "errorMessage": "; ".join(notes)}

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def _watermark(workflow: Workflow, start: int) -> int:
    """Last event seq of a span of this workflow that started no later than ``start``."""
    found = (
        OtelSpan.objects.filter(workflow=workflow, seq__isnull=False, start_time_unix_nano__lte=start)
        .exclude(mapped_to__in=[SpanMapping.COMPACTION, SpanMapping.DEFERRED])
        .aggregate(m=Max("seq"))["m"]
    )
    return int(found or 0)


def _summary_before(workflow: Workflow, start: int) -> Summary | None:
    row = (
        OtelSpan.objects.filter(
            workflow=workflow,
            mapped_to=SpanMapping.COMPACTION,
            summary__isnull=False,
            start_time_unix_nano__lte=start,
        )
        .select_related("summary")
        .order_by("-start_time_unix_nano", "-id")
        .first()
    )
    return row.summary if row else None


def _record_compaction(workflow: Workflow, row: OtelSpan, actor: Actor) -> bool:
    """Record the observed compaction of a stored span; False while none of its events arrived."""
    covers = _watermark(workflow, row.start_time_unix_nano)
    if covers < 1:
        return False
    attrs = dict(row.attributes)
    for event in row.span_events:
        if (
            event.get("name") in COMPACTION_EVENTS
            or event["attributes"].get("gen_ai.conversation.compacted") is True
        ):
            attrs = {**attrs, **event["attributes"]}
    text = attrs.get("gen_ai.compaction.summary")
    opaque = None
    if not isinstance(text, str) or not text.strip():
        text = None
        digest = attrs.get("gen_ai.compaction.digest")
        size = _int_attr(attrs, "gen_ai.compaction.size_bytes")
        if isinstance(digest, str) and digest.startswith("sha256:") and size is not None:
            opaque = {"digest": digest.lower(), "size_bytes": size}
        else:  # the sender told us a compaction happened, not what it produced
            opaque = {"digest": EMPTY_DIGEST, "size_bytes": 0, "media_type": "application/x-not-sent"}
    trigger_kind = attrs.get("gen_ai.compaction.trigger")
    trigger: dict[str, Any] = {
        "kind": trigger_kind if trigger_kind in ("auto", "manual", "threshold") else "unknown"
    }
    pre = _int_attr(attrs, "gen_ai.compaction.pre_tokens", "gen_ai.usage.input_tokens")
    if pre is not None:
        trigger["pre_tokens"] = pre
    threshold = _int_attr(attrs, "gen_ai.compaction.threshold_tokens")
    if threshold is not None:
        trigger["threshold_tokens"] = threshold
    provider = (
        attrs.get("gen_ai.provider.name")
        or attrs.get("gen_ai.system")
        or row.resource.get("service.name")
        or "otel"
    )
    model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or ""
    settings = {
        k: v
        for k, v in attrs.items()
        if k.startswith(("gen_ai.request.", "gen_ai.compaction.")) and k != "gen_ai.compaction.summary"
    }
    try:
        result = record_observed_compaction(
            workflow,
            covers_to_seq=covers,
            text=text,
            opaque=opaque,
            compactor={"name": str(provider)[:100], "model": str(model)[:100], "settings": settings},
            trigger=trigger,
            observation_id=f"otel-{row.trace_id}-{row.span_id}",
            source_refs=[f"otel:{row.trace_id}/{row.span_id}"],
            actor=actor,
            read_epoch=workflow.purge_epoch,  # read before the span row: a purge since wins (#30)
        )
    except Conflict as exc:  # the purge settled this span (audit.purge): never built from it
        if exc.code != "purged_since_read":
            raise
        return False
    OtelSpan.objects.filter(pk=row.pk).update(
        mapped_to=SpanMapping.COMPACTION, seq=covers, summary=result.summary
    )
    return True


def ingest(
    tenant: Tenant, request: dict[str, Any], encoding: str, actor: Actor, *, max_chars: int = 100_000
) -> IngestResult:
    """Map one decoded ExportTraceServiceRequest; idempotent by (trace id, span id)."""
    spans, malformed = iter_spans(request, encoding)
    out = IngestResult(received=len(spans) + malformed, malformed=malformed)
    if not spans:
        return out
    keys = {(s.trace_id, s.span_id) for s in spans}
    existing = set(
        OtelSpan.objects.filter(tenant=tenant, span_id__in={k[1] for k in keys}).values_list(
            "trace_id", "span_id"
        )
    )
    fresh: dict[tuple[str, str], SpanIn] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        if key in existing or key in fresh:
            out.duplicates += 1
        else:
            fresh[key] = span
    by_conversation: dict[str, list[SpanIn]] = defaultdict(list)
    for span in fresh.values():
        by_conversation[span.conversation_id].append(span)

    unassigned = by_conversation.pop("", [])
    if unassigned:
        OtelSpan.objects.bulk_create(
            [_row(tenant, None, s, SpanMapping.UNASSIGNED) for s in unassigned], ignore_conflicts=True
        )
        out.unassigned = len(unassigned)

    for conversation_id, group in by_conversation.items():
        group.sort(key=lambda s: (s.start, s.end))
        try:
            _ingest_conversation(tenant, conversation_id, group, actor, out, max_chars)
        except InvalidInput as exc:  # one bad conversation (e.g. an invalid id) must not lose the others
            out.errors.append(
                f"{len(group)} span(s) of conversation {conversation_id[:60]!r} kept unassigned: {exc.detail}"
            )
            # Its spans are still kept (unassigned), so nothing is dropped silently.
            OtelSpan.objects.bulk_create(
                [_row(tenant, None, s, SpanMapping.UNASSIGNED) for s in group], ignore_conflicts=True
            )
    return out


def _row(
    tenant: Tenant, workflow: Workflow | None, span: SpanIn, mapped_to: str, seq: int | None = None
) -> OtelSpan:
    return OtelSpan(
        tenant=tenant,
        trace_id=span.trace_id,
        span_id=span.span_id,
        parent_span_id=span.parent_span_id,
        workflow=workflow,
        conversation_id=span.conversation_id,
        name=span.name,
        operation=span.operation,
        mapped_to=mapped_to,
        start_time_unix_nano=span.start,
        end_time_unix_nano=span.end,
        attributes=span.attrs,
        resource=span.resource,
        span_events=span.events,
        seq=seq,
    )


def _ingest_conversation(
    tenant: Tenant, conversation_id: str, group: list[SpanIn], actor: Actor, out: IngestResult, max_chars: int
) -> None:
    workflow, created = create_workflow(
        tenant,
        conversation_id,
        name=f"OTel conversation {conversation_id[:60]}",
        source=WorkflowSource.OTEL,
        actor=actor,
    )
    out.workflows_created += int(created)
    # 1. Events of every event-producing span, appended in start order in one batch (idempotent ids).
    batch: list[dict[str, Any]] = []
    owners: list[SpanIn] = []
    for span in group:
        for event in span_events(span, max_chars):
            batch.append(event)
            owners.append(span)
    seq_of: dict[str, int] = {}
    if batch:
        parsed = [parse_event(e, i, max_chars) for i, e in enumerate(batch)]
        result = append_events(workflow, parsed)
        for span, appended in zip(owners, result.events, strict=True):
            seq_of[span.span_id] = max(seq_of.get(span.span_id, 0), appended["seq"])
        out.events += len(batch)
    rows = []
    for span in group:
        mapping = _mapping(span)
        rows.append(_row(tenant, workflow, span, mapping, seq_of.get(span.span_id)))
    with transaction.atomic():
        OtelSpan.objects.bulk_create(rows, ignore_conflicts=True)
    compactions = [s.span_id for s in group if _mapping(s) == SpanMapping.COMPACTION]
    stored: dict[tuple[str, str], OtelSpan] = (
        {
            (r.trace_id, r.span_id): r
            for r in OtelSpan.objects.filter(workflow=workflow, span_id__in=compactions)
        }
        if compactions
        else {}
    )
    # 2. Inference spans → consumer traces; compaction spans → observed compactions; in start order.
    for span in group:
        mapping = _mapping(span)
        if mapping == SpanMapping.TRACE:
            summary = _summary_before(workflow, span.start)
            head = Workflow.objects.filter(pk=workflow.pk).values_list("head_seq", flat=True).get()
            tail = max(_watermark(workflow, span.start), summary.covers_to_seq if summary else 0)
            record_trace(
                workflow,
                {
                    "agent": _agent(span),
                    "agent_run_id": str(span.attrs.get("gen_ai.agent.id") or span.trace_id)[:200],
                    "model_call_id": f"otel:{span.span_id}",
                    "model": str(
                        span.attrs.get("gen_ai.response.model")
                        or span.attrs.get("gen_ai.request.model")
                        or ""
                    )[:100],
                    "summary_id": summary.summary_id if summary else None,
                    "tail_to_seq": min(tail, head),
                    "input_tokens": _int_attr(span.attrs, "gen_ai.usage.input_tokens"),
                    "source_refs": [f"otel:{span.trace_id}/{span.span_id}"],
                },
                actor,
            )
            out.traces += 1
        elif mapping == SpanMapping.COMPACTION:
            row = stored.get((span.trace_id, span.span_id))
            if row is None:
                continue
            if _record_compaction(workflow, row, actor):
                out.compactions += 1
            else:
                OtelSpan.objects.filter(pk=row.pk).update(mapped_to=SpanMapping.DEFERRED)
                out.deferred += 1
        elif mapping == SpanMapping.KEPT:
            out.kept += 1
    # 3. Compactions that were waiting for their events (they arrived before them) get another try.
    if seq_of:
        for row in OtelSpan.objects.filter(workflow=workflow, mapped_to=SpanMapping.DEFERRED).order_by(
            "start_time_unix_nano"
        ):
            if _record_compaction(workflow, row, actor):
                out.compactions += 1
                out.deferred = max(0, out.deferred - 1)


def ingest_status(tenant: Tenant) -> dict[str, Any]:
    """Counts for the ingest page/API: what was mapped to what, what needs attention."""
    counts = dict(
        OtelSpan.objects.filter(tenant=tenant)
        .values_list("mapped_to")
        .annotate(n=Count("id"))
        .values_list("mapped_to", "n")
    )
    return {
        "semconv_version": SEMCONV_VERSION,
        "spans": sum(counts.values()),
        "by_mapping": {m.value: counts.get(m.value, 0) for m in SpanMapping},
        "unassigned": counts.get(SpanMapping.UNASSIGNED, 0),
        "deferred": counts.get(SpanMapping.DEFERRED, 0),
    }
