"""OpenTelemetry GenAI spans → workflows, events, consumer traces and observed compactions.

``POST /v1/traces`` reads its body through ``memoryhub.otel.decode`` and hands the spans here. The
mapping follows the GenAI semantic conventions as of semantic-conventions **v1.41.0** (the last
release that holds the ``gen_ai.*`` registry in the main repository), and reads the attributes
the OpenInference and OpenLLMetry instrumentations emit:

* **Conversation** (the workflow's external id): ``gen_ai.conversation.id``, then the attributes
  named by ``MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES``, then OpenInference ``session.id``, then
  OpenLLMetry ``traceloop.association.properties.{conversation_id,session_id,thread_id,chat_id}``;
  a span with none of them inherits the conversation of its nearest ancestor in the same trace
  (in the request or already stored). A span whose ancestor has not arrived yet is kept
  *unassigned* and adopted when that ancestor arrives (children end, and are exported, first).
* **Inference** (operation ``chat``/``generate_content``/``text_completion``, OpenInference kind
  ``LLM``, OpenLLMetry ``llm.request.type``): a consumer trace; its input and output messages
  (``gen_ai.input.messages``/``gen_ai.output.messages``, the older span events
  ``gen_ai.{system,user,assistant,tool}.message``/``gen_ai.choice``, OpenInference
  ``llm.{input,output}_messages.N.message.*``, OpenLLMetry ``gen_ai.{prompt,completion}.N.*``)
  become ``message`` events once each: a message's id is its role, text and occurrence number, so
  the history re-sent on every call is appended once. The trace read everything before the call's
  own output (its tail and head), computed in span order within a batch.
* ``invoke_agent``/``create_agent``/``invoke_workflow``: a ``note``; ``execute_tool``: a
  ``tool_call`` + ``tool_result`` pair.
* **Compaction** (``gen_ai.conversation.compacted = true``, operation ``compact``, or a span event
  ``gen_ai.compaction``): an observed compaction covering the events of spans that started before
  it; a compacted inference span is also a consumer trace that read the new summary.

Each conversation is written in its own transaction: one that fails (an invalid id, a conflict)
is rejected alone (OTLP ``partialSuccess``: rejected count and reason) and writes nothing but its
spans, kept as ``rejected``. Ingest is idempotent by (trace id, span id). Rows go in batches: one
event append and one span INSERT per conversation, whatever the number of spans.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Field, Max
from django.utils import timezone

from memoryhub.context.traces import MAX_LATENCY_MS, MAX_TOKENS, record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, DomainError
from memoryhub.memory.events import append_events, parse_event
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import OtelSpan, SpanMapping, Summary, Tenant, Workflow, WorkflowSource
from memoryhub.otel.decode import SpanIn

SEMCONV_VERSION = "1.41.0"
INFERENCE_OPS = frozenset({"chat", "generate_content", "text_completion"})
AGENT_OPS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
TOOL_OPS = frozenset({"execute_tool"})
COMPACTION_OPS = frozenset({"compact", "compaction"})
COMPACTION_EVENTS = frozenset({"gen_ai.compaction", "compaction"})
EMPTY_DIGEST = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

# Where the instrumentations put the conversation, after gen_ai.conversation.id and the setting's names.
OPENINFERENCE_SESSION = "session.id"
TRACELOOP_ASSOCIATION = "traceloop.association.properties."
TRACELOOP_CONVERSATION_KEYS = ("conversation_id", "session_id", "thread_id", "chat_id")
# OpenInference span kinds and OpenLLMetry span kinds / request types → GenAI operation names.
OPENINFERENCE_KINDS = {"LLM": "chat", "TOOL": "execute_tool", "AGENT": "invoke_agent", "CHAIN": ""}
TRACELOOP_KINDS = {"tool": "execute_tool", "agent": "invoke_agent", "workflow": "invoke_workflow"}
TRACELOOP_REQUEST_TYPES = {"chat": "chat", "completion": "text_completion"}
# The older, event-based form of the GenAI conventions.
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
FLAT_MESSAGE = re.compile(
    r"^(llm\.input_messages|llm\.output_messages|gen_ai\.prompt|gen_ai\.completion)\.(\d+)\.(?:message\.)?(role|content)$"
)
FLAT_INPUT = frozenset({"llm.input_messages", "gen_ai.prompt"})


def conversation_keys() -> tuple[str, ...]:
    """Attributes that name a span's conversation, in the order they are read."""
    extra = tuple(getattr(settings, "MEMORYHUB_OTEL_CONVERSATION_ATTRIBUTES", ()))
    traceloop = tuple(TRACELOOP_ASSOCIATION + key for key in TRACELOOP_CONVERSATION_KEYS)
    return ("gen_ai.conversation.id", *extra, OPENINFERENCE_SESSION, *traceloop)


def own_conversation(span: SpanIn, keys: Iterable[str]) -> str:
    for key in keys:
        value = span.attrs.get(key)
        if value not in (None, "") and not isinstance(value, (dict, list, bool)):
            return str(value).strip()[:200]
    return ""


def operation(span: SpanIn) -> str:
    attrs = span.attrs
    op = attrs.get("gen_ai.operation.name")
    if isinstance(op, str) and op:
        return op[:64]
    mapped = (
        OPENINFERENCE_KINDS.get(str(attrs.get("openinference.span.kind") or ""))
        or TRACELOOP_REQUEST_TYPES.get(str(attrs.get("llm.request.type") or ""))
        or TRACELOOP_KINDS.get(str(attrs.get("traceloop.span.kind") or ""))
    )
    if mapped:
        return mapped
    return (span.name.split(" ", 1)[0] if span.name else "")[:64]


def compaction_event(span_events: list[dict[str, Any]]) -> dict[str, Any] | None:
    for event in span_events:
        if (
            event.get("name") in COMPACTION_EVENTS
            or event["attributes"].get("gen_ai.conversation.compacted") is True
        ):
            return event
    return None


def is_compaction(span: SpanIn, op: str) -> bool:
    return (
        span.attrs.get("gen_ai.conversation.compacted") is True
        or op in COMPACTION_OPS
        or compaction_event(span.events) is not None
    )


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


def _model(attrs: dict[str, Any]) -> str:
    return str(
        attrs.get("gen_ai.response.model")
        or attrs.get("gen_ai.request.model")
        or attrs.get("llm.model_name")
        or ""
    )[:100]


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _part_text(part: Any) -> str:
    if not isinstance(part, dict):
        return _text(part)
    if part.get("type") == "text" and isinstance(part.get("content"), str):
        return part["content"]
    if part.get("type") == "tool_call":
        return f"{part.get('name') or 'tool'}({_text(part.get('arguments'))})"
    if part.get("type") == "tool_call_response":
        return _text(part.get("response") if "response" in part else part.get("result"))
    return json.dumps(part, sort_keys=True)


def _structured(value: Any) -> list[tuple[str, str]]:
    """gen_ai.input/output.messages (a JSON string or a list of {role, parts}) → [(role, text)]."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [("", value)] if value else []
    out = []
    for message in value if isinstance(value, list) else []:
        if not isinstance(message, dict):
            continue
        if "parts" in message:
            text = "\n".join(t for t in (_part_text(p) for p in message.get("parts") or []) if t)
        else:  # {role, content}: the shape several SDKs log
            text = _text(message.get("content"))
        if text:
            out.append((str(message.get("role") or ""), text))
    return out


def _event_message(name: str, attrs: dict[str, Any]) -> tuple[str, str] | None:
    """One message of the older event-based form (``gen_ai.user.message``, ``gen_ai.choice``, …)."""
    if name in MESSAGE_EVENTS:
        text = _text(attrs.get("content"))
        return (str(attrs.get("role") or MESSAGE_EVENTS[name]), text) if text else None
    message = attrs.get("message")
    if isinstance(message, str):
        try:
            message = json.loads(message)
        except ValueError:
            return ("assistant", message) if message else None
    if isinstance(message, dict):
        text = _text(message.get("content"))
        return (str(message.get("role") or "assistant"), text) if text else None
    return None


def messages(span: SpanIn) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(input, output) messages of an inference span as (role, text), from whichever form it used."""
    attrs = span.attrs
    inputs = _structured(attrs.get("gen_ai.input.messages"))
    outputs = _structured(attrs.get("gen_ai.output.messages"))
    if not inputs and not outputs:
        for event in span.events:
            name = event.get("name")
            if name in MESSAGE_EVENTS:
                found = _event_message(name, event["attributes"])
                if found:
                    inputs.append(found)
            elif name == "gen_ai.choice":
                found = _event_message(name, event["attributes"])
                if found:
                    outputs.append(found)
    if not inputs and not outputs:
        flat: dict[tuple[str, int], dict[str, str]] = defaultdict(dict)
        for key, value in attrs.items():
            match = FLAT_MESSAGE.match(key)
            if match:
                flat[(match[1], int(match[2]))][match[3]] = _text(value)
        for (prefix, _), message in sorted(flat.items()):
            if message.get("content"):
                target = inputs if prefix in FLAT_INPUT else outputs
                target.append((message.get("role", ""), message["content"]))
    return inputs, outputs


def _message_events(
    agent: str, inputs: list[tuple[str, str]], outputs: list[tuple[str, str]], max_chars: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Message events whose ids are (role, text, occurrence number): the history an agent re-sends
    on every call maps to the events it already made, so it is appended once. Outputs count on
    from the inputs, so a reply re-sent as the next call's input is the same event."""
    seen: dict[tuple[str, str], int] = defaultdict(int)

    def event(role: str, text: str) -> dict[str, Any]:
        role = (role or "user")[:32]
        seen[(role, text)] += 1
        digest = hashlib.sha256(f"{role}\0{seen[(role, text)]}\0{text}".encode()).hexdigest()[:40]
        return {
            "kind": "message",
            "agent": agent,
            "role": role,
            "content": text[:max_chars],
            "client_event_id": f"otel:msg:{digest}",
        }

    ins = [event(role, text) for role, text in inputs]
    outs = [event(role or "assistant", text) for role, text in outputs]
    return ins, outs


def span_events(span: SpanIn, op: str, max_chars: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(events the span read, events it produced), API shape; both empty for spans with no events."""
    agent, sid, attrs = _agent(span), span.span_id, span.attrs
    if op in TOOL_OPS:
        call_id = str(attrs.get("gen_ai.tool.call.id") or f"otel-{sid}")[:200]
        name = str(
            attrs.get("gen_ai.tool.name")
            or attrs.get("tool.name")
            or attrs.get("traceloop.entity.name")
            or "tool"
        )
        args = _text(
            attrs.get("gen_ai.tool.call.arguments")
            or attrs.get("tool.parameters")
            or attrs.get("input.value")
            or attrs.get("traceloop.entity.input")
        )
        result = _text(
            attrs.get("gen_ai.tool.call.result")
            or attrs.get("output.value")
            or attrs.get("traceloop.entity.output")
        )
        error = (span.status or {}).get("code") in (2, "STATUS_CODE_ERROR")
        if not result:
            result = (
                "error: " + str((span.status or {}).get("message") or "")
                if error
                else "(result not recorded)"
            )
        return [], [
            {"kind": "tool_call", "agent": agent, "role": "assistant", "tool_call_id": call_id,
             "content": f"{name}({args})"[:max_chars], "client_event_id": f"otel:{sid}"},
            {"kind": "tool_result", "agent": agent, "role": "tool", "tool_call_id": call_id,
             "content": result[:max_chars], "client_event_id": f"otel:{sid}:result"},
        ]  # fmt: skip
    if op in AGENT_OPS:
        desc = attrs.get("gen_ai.agent.description")
        named = attrs.get("gen_ai.agent.name") or attrs.get("traceloop.entity.name") or agent
        content = f"{op} {named}" + (f": {desc}" if desc else "")
        note = {"kind": "note", "agent": agent, "role": "system", "content": content[:max_chars]}
        return [], [{**note, "client_event_id": f"otel:{sid}"}]
    if op in INFERENCE_OPS:
        return _message_events(agent, *messages(span), max_chars)
    return [], []


def _mapping(op: str, compaction: bool) -> str:
    if compaction:
        return SpanMapping.COMPACTION
    if op in INFERENCE_OPS:
        return SpanMapping.TRACE
    if op in TOOL_OPS | AGENT_OPS:
        return SpanMapping.EVENT
    return SpanMapping.KEPT


@dataclass
class IngestResult:
    received: int = 0
    duplicates: int = 0
    malformed: int = 0
    unassigned: int = 0
    adopted: int = 0
    rejected: int = 0
    events: int = 0
    traces: int = 0
    compactions: int = 0
    deferred: int = 0
    kept: int = 0
    workflows_created: int = 0
    errors: list[str] = field(default_factory=list)

    def partial_success(self) -> dict[str, Any] | None:
        """OTLP partial success: rejected = malformed + spans of rejected conversations, with why;
        unassigned spans are kept (not rejected) and named so the sender can fix them."""
        notes = list(self.errors[:5])
        if len(self.errors) > 5:
            notes.append(f"… {len(self.errors) - 5} more rejected conversation(s)")
        if self.malformed:
            notes.append(f"{self.malformed} span(s) without a valid trace/span id rejected")
        if self.unassigned:
            notes.append(
                f"{self.unassigned} span(s) had no conversation id (gen_ai.conversation.id, session.id, "
                "traceloop.association.properties.*) on themselves or an ancestor: kept unassigned, "
                "mapped when an ancestor with one arrives"
            )
        if not notes:
            return None
        return {"rejectedSpans": self.malformed + self.rejected, "errorMessage": "; ".join(notes)}

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}

    def header(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.to_dict().items() if k != "errors")


# -- conversations: own ids, inherited ids, adopted spans ------------------------------------------


@dataclass
class _Span:
    """A span being mapped: the decoded span, its conversation, and whether its row already exists."""

    span: SpanIn
    conversation: str = ""
    op: str = ""
    stored_pk: int | None = None  # adopted: stored unassigned earlier, now with a conversation


def _stored_as_span(row: OtelSpan) -> SpanIn:
    return SpanIn(
        trace_id=row.trace_id,
        span_id=row.span_id,
        parent_span_id=row.parent_span_id,
        name=row.name,
        start=row.start_time_unix_nano,
        end=row.end_time_unix_nano,
        attrs=row.attributes,
        resource=row.resource,
        events=row.span_events,
    )


def _resolve(tenant: Tenant, fresh: list[SpanIn]) -> list[_Span]:
    """Each fresh span with its conversation (own or inherited), plus stored unassigned spans of the
    same traces that an arriving ancestor now assigns (adopted)."""
    keys = conversation_keys()
    items = [_Span(span, own_conversation(span, keys)) for span in fresh]
    by_key = {(i.span.trace_id, i.span.span_id): i for i in items}
    named_traces = {i.span.trace_id for i in items if i.conversation}
    orphans = [i for i in items if not i.conversation]
    if named_traces:  # unassigned spans already stored whose ancestor may be in this request
        for row in OtelSpan.objects.filter(
            tenant=tenant, trace_id__in=named_traces, mapped_to=SpanMapping.UNASSIGNED
        ):
            item = _Span(_stored_as_span(row), stored_pk=row.pk)
            by_key[(row.trace_id, row.span_id)] = item
            items.append(item)
            orphans.append(item)
    if not orphans:
        return items
    # Parents outside the request: their stored conversation (already resolved when they came).
    wanted = {
        (i.span.trace_id, i.span.parent_span_id)
        for i in orphans
        if i.span.parent_span_id and (i.span.trace_id, i.span.parent_span_id) not in by_key
    }
    stored_parent: dict[tuple[str, str], str] = {}
    if wanted:
        stored_parent = {(t, s): c for (t, s), c in _stored(tenant, wanted).items() if c}

    def inherited(item: _Span, depth: int = 0) -> str:
        if item.conversation or depth > 64:
            return item.conversation
        parent_key = (item.span.trace_id, item.span.parent_span_id)
        if not item.span.parent_span_id:
            return ""
        parent = by_key.get(parent_key)
        if parent is None:
            return stored_parent.get(parent_key, "")
        return inherited(parent, depth + 1)

    for item in orphans:
        item.conversation = inherited(item)
    return [i for i in items if i.stored_pk is None or i.conversation]


# -- span rows: one INSERT per conversation ------------------------------------------------------

_SPAN_COLUMNS = (
    "tenant_id", "trace_id", "span_id", "parent_span_id", "workflow_id", "conversation_id", "name",
    "operation", "mapped_to", "start_time_unix_nano", "end_time_unix_nano", "attributes", "resource",
    "span_events", "seq", "summary_id", "received_at",
)  # fmt: skip
_JSON_COLUMNS = frozenset({"attributes", "resource", "span_events"})
SQLITE_ROWS_PER_INSERT = 500


def insert_spans(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """INSERT span rows, skipping (trace id, span id) pairs already stored; the pairs inserted.

    PostgreSQL: all rows as one JSON parameter (``json_populate_recordset``) in one statement;
    SQLite: multi-row VALUES. Either way ``ON CONFLICT DO NOTHING RETURNING`` says which rows
    this request wrote, so a concurrent re-send of the same spans maps them once."""
    if not rows:
        return set()
    table = connection.ops.quote_name(OtelSpan._meta.db_table)
    columns = ", ".join(_SPAN_COLUMNS)
    inserted: set[tuple[str, str]] = set()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT {columns} FROM json_populate_recordset(NULL::{table}, %s) "
                "ON CONFLICT DO NOTHING RETURNING trace_id, span_id",
                [json.dumps(rows, ensure_ascii=False, separators=(",", ":"), default=str)],
            )
            inserted.update(cursor.fetchall())
            return inserted
        row_sql = "(" + ", ".join(["%s"] * len(_SPAN_COLUMNS)) + ")"
        for lo in range(0, len(rows), SQLITE_ROWS_PER_INSERT):
            chunk = rows[lo : lo + SQLITE_ROWS_PER_INSERT]
            params = [
                json.dumps(row[c], ensure_ascii=False) if c in _JSON_COLUMNS else row[c]
                for row in chunk
                for c in _SPAN_COLUMNS
            ]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([row_sql] * len(chunk))} "
                "ON CONFLICT DO NOTHING RETURNING trace_id, span_id",
                params,
            )
            inserted.update(cursor.fetchall())
    return inserted


def _span_row(
    tenant: Tenant, workflow: Workflow | None, item: _Span, mapped_to: str, seq: int | None, now: str
) -> dict[str, Any]:
    span = item.span
    return {
        "tenant_id": tenant.pk,
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "workflow_id": workflow.pk if workflow else None,
        "conversation_id": item.conversation,
        "name": span.name,
        "operation": item.op,
        "mapped_to": mapped_to,
        "start_time_unix_nano": span.start,
        "end_time_unix_nano": span.end,
        "attributes": span.attrs,
        "resource": span.resource,
        "span_events": span.events,
        "seq": seq,
        "summary_id": None,
        "received_at": now,
    }


def _now() -> Any:
    """received_at as the span INSERT carries it (ISO text in PostgreSQL's JSON, SQLite's own text)."""
    now = timezone.now()
    return (
        now.isoformat()
        if connection.vendor == "postgresql"
        else connection.ops.adapt_datetimefield_value(now)
    )


# -- compactions and traces ----------------------------------------------------------------------


def _watermark(workflow: Workflow, start: int, exclude_pk: int | None = None) -> int:
    """Last event seq of a span of this workflow that started no later than ``start`` (but the
    compaction's own span: a compacted call's own messages are what follows the summary)."""
    query = OtelSpan.objects.filter(workflow=workflow, seq__isnull=False, start_time_unix_nano__lte=start)
    if exclude_pk is not None:
        query = query.exclude(pk=exclude_pk)
    return int(query.aggregate(m=Max("seq"))["m"] or 0)


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
    covers = _watermark(workflow, row.start_time_unix_nano, exclude_pk=row.pk)
    if covers < 1:
        return False
    attrs = dict(row.attributes)
    event = compaction_event(row.span_events)
    if event is not None:
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
    settings_used = {
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
            compactor={"name": str(provider)[:100], "model": _model(attrs), "settings": settings_used},
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
    # A compaction span's seq is the watermark it recorded, unless it produced events of its own
    # (a compacted chat span keeps its messages' seq for the compactions after it).
    OtelSpan.objects.filter(pk=row.pk).update(
        mapped_to=SpanMapping.COMPACTION,
        seq=row.seq if row.seq is not None else covers,
        summary=result.summary,
    )
    return True


def _usage(attrs: dict[str, Any], *keys: str) -> int | None:
    """A token count a span reports; an implausible one is left out, not a reason to drop the trace."""
    tokens = _int_attr(attrs, *keys)
    return tokens if tokens is not None and tokens <= MAX_TOKENS else None


def _span_ms(span: SpanIn) -> int | None:
    """The span's duration in milliseconds (None when its clock is missing or implausible)."""
    ms = (span.end - span.start) // 1_000_000
    return ms if span.start and 0 <= ms <= MAX_LATENCY_MS else None


def _trace(workflow: Workflow, span: SpanIn, read_head: int, actor: Actor) -> None:
    """The consumer trace of one inference call that read everything up to ``read_head``."""
    summary = _summary_before(workflow, span.start)
    tail = max(read_head, summary.covers_to_seq if summary else 0)
    record_trace(
        workflow,
        {
            "agent": _agent(span),
            "agent_run_id": str(span.attrs.get("gen_ai.agent.id") or span.trace_id)[:200],
            "model_call_id": f"otel:{span.span_id}",
            "model": _model(span.attrs),
            "summary_id": summary.summary_id if summary else None,
            "tail_to_seq": tail,
            "input_tokens": _usage(
                span.attrs,
                "gen_ai.usage.input_tokens",
                "llm.token_count.prompt",
                "gen_ai.usage.prompt_tokens",
            ),
            "output_tokens": _usage(
                span.attrs,
                "gen_ai.usage.output_tokens",
                "llm.token_count.completion",
                "gen_ai.usage.completion_tokens",
            ),
            "latency_ms": _span_ms(span),
            "source_refs": [f"otel:{span.trace_id}/{span.span_id}"],
            # The framework assembled the context: attested when it is exactly the read served.
            "attest_read": True,
        },
        actor,
        head_at_read=tail,
    )


# -- ingest --------------------------------------------------------------------------------------


def _stored(tenant: Tenant, keys: Iterable[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """The stored spans among these (trace id, span id) keys, with their conversation ids.

    On PostgreSQL one probe of the (tenant, trace id, span id) index per key (a LATERAL subquery
    with LIMIT is never turned into a join): ``trace_id IN (…) AND span_id IN (…)`` let the planner
    read every span of the tenant when its statistics lagged a fast-growing table (200–500 ms per
    512-span request at 250k–500k stored spans, and growing with them), whatever the query's shape.
    """
    keys = sorted(set(keys))
    if not keys:
        return {}
    if connection.vendor != "postgresql":
        rows = OtelSpan.objects.filter(
            tenant=tenant, trace_id__in={t for t, _ in keys}, span_id__in={s for _, s in keys}
        ).order_by()
        wanted = set(keys)  # the two INs also match pairs across the keys: keep the asked ones
        return {
            (t, s): c
            for t, s, c in rows.values_list("trace_id", "span_id", "conversation_id")
            if (t, s) in wanted
        }
    qn = connection.ops.quote_name
    meta = OtelSpan._meta

    def col(name: str) -> str:
        return qn(cast(Field, meta.get_field(name)).column)

    sql = (
        f"SELECT k.t, k.s, hit.c FROM unnest(%s::text[], %s::text[]) AS k(t, s) CROSS JOIN LATERAL "
        f"(SELECT o.{col('conversation_id')} AS c FROM {qn(meta.db_table)} o WHERE o.{col('tenant')} = %s "
        f"AND o.{col('trace_id')} = k.t AND o.{col('span_id')} = k.s LIMIT 1) AS hit"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [[t for t, _ in keys], [s for _, s in keys], tenant.pk])
        return {(t, s): c for t, s, c in cursor.fetchall()}


def ingest(
    tenant: Tenant, spans: list[SpanIn], actor: Actor, *, malformed: int = 0, max_chars: int = 100_000
) -> IngestResult:
    """Map one request's spans; idempotent by (trace id, span id); each conversation on its own."""
    out = IngestResult(received=len(spans) + malformed, malformed=malformed)
    if not spans:
        return out
    unique: dict[tuple[str, str], SpanIn] = {}
    for span in spans:
        unique.setdefault((span.trace_id, span.span_id), span)
    out.duplicates = len(spans) - len(unique)
    existing = set(_stored(tenant, unique))
    fresh = [span for key, span in unique.items() if key not in existing]
    out.duplicates += len(unique) - len(fresh)

    by_conversation: dict[str, list[_Span]] = defaultdict(list)
    for item in _resolve(tenant, fresh):
        item.op = operation(item.span)
        by_conversation[item.conversation].append(item)
    # The request's workflows in one query (a new conversation is created in its own savepoint).
    known = {
        wf.external_id: wf
        for wf in Workflow.objects.filter(tenant=tenant, external_id__in=[c for c in by_conversation if c])
    }
    # Which of them hold compactions still waiting for their events (one query, not one each).
    waiting = (
        set(
            OtelSpan.objects.filter(
                tenant=tenant, mapped_to=SpanMapping.DEFERRED, workflow__in=known.values()
            )
            .values_list("workflow_id", flat=True)
            .distinct()
        )
        if known
        else set()
    )
    unassigned = by_conversation.pop("", [])
    for group in by_conversation.values():
        group.sort(key=lambda i: (i.span.start, i.span.end))

    # One transaction (one commit) per request. Optimistically without a savepoint per
    # conversation (two round trips each); if one conversation fails, the whole attempt rolls
    # back and the request is written again with savepoints, so that one is rejected alone.
    def attempt(savepoints: bool) -> IngestResult:
        written = IngestResult(**{**out.to_dict(), "errors": []})
        with transaction.atomic():
            _write(
                tenant,
                unassigned,
                by_conversation,
                known,
                waiting,
                actor,
                written,
                max_chars,
                savepoints=savepoints,
            )
        return written

    try:
        written = attempt(savepoints=False)
    except DomainError:
        written = attempt(savepoints=True)
    return written


def _write(
    tenant: Tenant,
    unassigned: list[_Span],
    by_conversation: dict[str, list[_Span]],
    known: dict[str, Workflow],
    waiting: set[int],
    actor: Actor,
    out: IngestResult,
    max_chars: int,
    *,
    savepoints: bool,
) -> None:
    if unassigned:
        inserted = insert_spans(
            [_span_row(tenant, None, i, SpanMapping.UNASSIGNED, None, _now()) for i in unassigned]
        )
        out.unassigned = len(inserted)
        out.duplicates += len(unassigned) - len(inserted)
    for conversation_id in sorted(by_conversation):  # one lock order: no deadlock between requests
        group = by_conversation[conversation_id]
        if not savepoints:
            _ingest_conversation(
                tenant, conversation_id, group, actor, out, max_chars, known.get(conversation_id), waiting
            )
            continue
        done = IngestResult()
        try:
            with transaction.atomic():  # a savepoint: a rejected conversation rolls back alone
                _ingest_conversation(
                    tenant,
                    conversation_id,
                    group,
                    actor,
                    done,
                    max_chars,
                    known.get(conversation_id),
                    waiting,
                )
        except DomainError as exc:  # rejected alone: the other conversations are written
            out.rejected += len(group)
            out.errors.append(
                f"{len(group)} span(s) of conversation {conversation_id[:60]!r} rejected "
                f"({exc.code}): {exc.detail}"
            )
            insert_spans(
                [
                    _span_row(tenant, None, i, SpanMapping.REJECTED, None, _now())
                    for i in group
                    if i.stored_pk is None
                ]
            )
        else:
            for name in ("duplicates", "adopted", "events", "traces", "compactions", "deferred", "kept"):
                setattr(out, name, getattr(out, name) + getattr(done, name))
            out.workflows_created += done.workflows_created


def _ingest_conversation(
    tenant: Tenant,
    conversation_id: str,
    group: list[_Span],
    actor: Actor,
    out: IngestResult,
    max_chars: int,
    known: Workflow | None,
    waiting: set[int],
) -> None:
    workflow, created = known, False
    if workflow is None:
        workflow, created = create_workflow(
            tenant,
            conversation_id,
            name=f"OTel conversation {conversation_id[:60]}",
            source=WorkflowSource.OTEL,
            actor=actor,
        )
    # 1. Every span's events in span order, one append (ids make re-sent messages the same events).
    #    ``cut``: how many of the batch's events a span had read before its own output.
    batch: list[dict[str, Any]] = []
    index_of: dict[str, int] = {}  # client_event_id → first position (a message repeated in the batch)
    positions: list[list[int]] = []
    cut: list[int] = []
    for item in group:
        read, produced = span_events(item.span, item.op, max_chars)
        mine = []
        for n, event in enumerate(read + produced):
            if n == len(read):
                cut.append(len(batch))
            cid = event["client_event_id"]
            if cid not in index_of:
                index_of[cid] = len(batch)
                batch.append(event)
            mine.append(index_of[cid])
        if len(cut) < len(positions) + 1:
            cut.append(len(batch))
        positions.append(mine)
    seqs: list[int] = []
    if batch:
        result = append_events(workflow, [parse_event(e, i, max_chars) for i, e in enumerate(batch)])
        seqs = [e["seq"] for e in result.events]
        head_before = result.head_seq - result.written
        out.events += result.written
    else:
        head_before = Workflow.objects.filter(pk=workflow.pk).values_list("head_seq", flat=True).get()
    prefix_max = [head_before]
    for appended in seqs:
        prefix_max.append(max(prefix_max[-1], appended))

    # 2. The span rows, in one statement; adopted spans (stored unassigned before) are updated.
    now = _now()
    compaction = [is_compaction(i.span, i.op) for i in group]
    rows: list[dict[str, Any]] = []
    adopted: list[tuple[_Span, str, int | None]] = []
    for item, mine, is_comp in zip(group, positions, compaction, strict=True):
        seq = max((seqs[p] for p in mine), default=None)
        mapping = _mapping(item.op, is_comp)
        if item.stored_pk is None:
            rows.append(_span_row(tenant, workflow, item, mapping, seq, now))
        else:
            adopted.append((item, mapping, seq))
    claimed = insert_spans(rows)
    for item, mapping, adopted_seq in adopted:
        assert item.stored_pk is not None
        if OtelSpan.objects.filter(pk=item.stored_pk, mapped_to=SpanMapping.UNASSIGNED).update(
            workflow=workflow,
            conversation_id=item.conversation,
            operation=item.op,
            mapped_to=mapping,
            seq=adopted_seq,
        ):
            claimed.add((item.span.trace_id, item.span.span_id))
            out.adopted += 1
    out.duplicates += len(group) - len(claimed)
    out.workflows_created += int(created)

    # 3. Compactions and traces in span order, for the spans this request wrote.
    for item, is_comp, end in zip(group, compaction, cut, strict=True):
        span = item.span
        if (span.trace_id, span.span_id) not in claimed:
            continue
        if is_comp:
            row = OtelSpan.objects.get(tenant=tenant, trace_id=span.trace_id, span_id=span.span_id)
            if _record_compaction(workflow, row, actor):
                out.compactions += 1
            else:
                OtelSpan.objects.filter(pk=row.pk).update(mapped_to=SpanMapping.DEFERRED)
                out.deferred += 1
        if item.op in INFERENCE_OPS:
            _trace(workflow, span, prefix_max[end], actor)
            out.traces += 1
        elif not is_comp and item.op not in TOOL_OPS | AGENT_OPS:
            out.kept += 1
    # 4. Compactions that were waiting for their events (they arrived before them) get another try.
    #    Found through the tenant's partial "attention" index: by workflow alone the lookup would
    #    read every span of the conversation, and ingest would slow down as it grows.
    if seqs and (known is None or workflow.pk in waiting):
        deferred = OtelSpan.objects.filter(tenant=tenant, mapped_to=SpanMapping.DEFERRED, workflow=workflow)
        for row in deferred.order_by("start_time_unix_nano"):
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
        "rejected": counts.get(SpanMapping.REJECTED, 0),
    }
