"""Consumer traces (which model call consumed which memory) and the artifacts they produced.

``record_trace`` checks what the consumer claims against what the server knows: the summary must
belong to the workflow, the consumed tail cannot pass the head, and when the consumer quotes a
``context_id`` issued by :mod:`memoryhub.context.assembly` the server takes the head and summary status *at
read time* from it (and re-derives the manifest). It flags, rather than refuses, consumption that
went wrong — those flags feed the alerts:

* ``unvalidated_summary`` — the summary was CANDIDATE / REJECTED / QUARANTINED when read;
* ``tail_loss`` — summary watermark + consumed tail stopped short of the head at read time;
* ``missing_provenance`` — no context_id or manifest_hash to tie the call to a read (a call whose
  context a framework assembled can ask for ``attest_read``: when its summary and tail are exactly
  the read the server would serve at its head, the server attaches that read's id and manifest);
* ``context_mismatch`` — the signed read says another workflow/summary, or the manifest differs;
* ``fallback_retrieval`` — the consumer sent a targeted retrieval instead of summary + tail;
* ``missed_compaction`` — the history was over the policy's safe budget at this call and no
  compaction was requested or running (a trigger that should have fired).

Both records are idempotent: the same model_call_id (per workflow) or artifact_id (per tenant)
sent again with the same data returns the stored row; with different data it is a 409.
"""

from __future__ import annotations

import math
import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.db import IntegrityError, transaction

from audit.log import record
from memoryhub.context.assembly import (
    MANIFEST_MAX_TAIL_EVENTS,
    ReadCoordinates,
    issue_context_id,
    parse_context_id,
    recompute_manifest_hash,
    served_summary,
)
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import canonical_bytes, hash_value
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory.quality_service import missed_compaction
from memoryhub.models import Artifact, ConsumerTrace, Summary, SummaryStatus, TraceFlag, Workflow
from memoryhub.models.traces import TRACE_INPUT_FIELDS

VALIDATED_STATUSES = {SummaryStatus.VALIDATED, SummaryStatus.ACTIVE, SummaryStatus.SUPERSEDED}
HASH_RE = re.compile(r"^sha256:[0-9a-f]{64}$")

# What must match for a repeated model_call_id to be "the same trace" (a retry), not a conflict.
TRACE_IDENTITY = ("agent", "agent_run_id", "summary_id", "tail_to_seq", "context_id", "manifest_hash")

ARTIFACT_FIELDS = {"artifact_id", "kind", "uri", "content_hash", "content", "quality_score", "produced_by"}


def _bad(field: str, message: str, code: str = "invalid_field") -> InvalidInput:
    return InvalidInput(f"{field}: {message}", code=code, field=field)


def _text(data: dict[str, Any], key: str, max_len: int, *, required: bool = False) -> str:
    value = data.get(key)
    if value is None or value == "":
        if required:
            raise _bad(key, "is required", "missing_field")
        return ""
    if not isinstance(value, str):
        raise _bad(key, "must be a string")
    if len(value) > max_len:
        raise _bad(key, f"at most {max_len} characters")
    return value


def _int(data: dict[str, Any], key: str, *, required: bool = False) -> int | None:
    value = data.get(key)
    if value is None:
        if required:
            raise _bad(key, "is required", "missing_field")
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(key, "must be a non-negative integer")
    return value


# Bounds of what a trace may carry of its call: a prompt of a long agent run fits, a dump does not.
MAX_MESSAGES = 1000
MAX_MESSAGES_BYTES = 1_000_000
MAX_OUTPUT_CHARS = 200_000
MAX_LATENCY_MS = 24 * 3600 * 1000  # a day
MAX_TOKENS = 100_000_000
MAX_COST_USD = Decimal(1_000_000)
COST_PLACES = Decimal("0.000001")  # CompactionJob.cost_usd's precision


def _messages(data: dict[str, Any], key: str) -> list[dict[str, Any]] | None:
    """The call's messages: a list of objects, each with a string ``role``; content is any JSON
    (text, or a framework's parts and tool calls). None when not sent."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(m, dict) and isinstance(m.get("role"), str) and 0 < len(m["role"]) <= 50 for m in value
    ):
        raise _bad(key, "must be a list of objects, each with a 'role' string (at most 50 characters)")
    if len(value) > MAX_MESSAGES:
        raise _bad(key, f"at most {MAX_MESSAGES} messages")
    if len(canonical_bytes(value)) > MAX_MESSAGES_BYTES:
        raise _bad(key, f"at most {MAX_MESSAGES_BYTES} bytes of JSON")
    return value


def _output(data: dict[str, Any], key: str) -> str | None:
    """The model's answer as text (None when not sent; "" is an empty answer, recorded)."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(key, "must be a string (JSON-encode structured output such as tool calls)")
    if len(value) > MAX_OUTPUT_CHARS:
        raise _bad(key, f"at most {MAX_OUTPUT_CHARS} characters")
    return value


def _bounded_int(data: dict[str, Any], key: str, maximum: int) -> int | None:
    value = _int(data, key)
    if value is not None and value > maximum:
        raise _bad(key, f"at most {maximum}")
    return value


def _cost(data: dict[str, Any], key: str) -> Decimal | None:
    """A cost in USD: a non-negative finite number, kept to the micro-dollar."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(key, "must be a number (USD)")
    # Bounded before quantize: a huge number has more digits than Decimal's context allows.
    if not 0 <= value <= MAX_COST_USD:
        raise _bad(key, f"must be between 0 and {MAX_COST_USD}")
    return Decimal(str(value)).quantize(COST_PLACES)


def _refs(data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(r, str) and 0 < len(r) <= 200 for r in value):
        raise _bad(key, "must be a list of non-empty strings (at most 200 characters each)")
    if len(value) > 1000:
        raise _bad(key, "at most 1000 entries")
    return value


def _hash(data: dict[str, Any], key: str) -> str:
    value = _text(data, key, 71)
    if value and not HASH_RE.match(value):
        raise _bad(key, "must be 'sha256:' followed by 64 lowercase hex digits")
    return value


def _object(data: Any, allowed: AbstractSet[str]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    unknown = set(data) - allowed
    if unknown:
        raise InvalidInput(
            f"unknown field(s) {sorted(unknown)}", code="unknown_field", fields=sorted(unknown)
        )
    return data


# -- consumer traces -------------------------------------------------------------------------------


@dataclass
class TraceIn:
    agent: str
    agent_run_id: str
    model_call_id: str
    summary_id: str | None
    tail_to_seq: int
    model: str = ""
    context_id: str = ""
    manifest_hash: str = ""
    source_refs: list[str] = field(default_factory=list)
    graph_release: str = ""
    thread_id: str = ""
    checkpoint_id: str = ""
    input_tokens: int | None = None
    fallback_reason: str = ""
    input_messages: list[dict[str, Any]] | None = None
    output: str | None = None
    output_tokens: int | None = None
    latency_ms: int | None = None
    cost_usd: Decimal | None = None
    attest_read: bool = False


def parse_trace(data: Any) -> TraceIn:
    """Validate a trace body (API shape); raises InvalidInput naming the field."""
    data = _object(data, TRACE_INPUT_FIELDS)
    summary_id = data.get("summary_id")
    if summary_id is not None and (not isinstance(summary_id, str) or not summary_id):
        raise _bad("summary_id", "must be a summary id or null")
    fallback = data.get("fallback_retrieval", False)
    if not isinstance(fallback, bool):
        raise _bad("fallback_retrieval", "must be true or false")
    reason = _text(data, "fallback_reason", 500)
    if fallback and not reason:
        reason = "targeted retrieval (no reason given)"
    attest = data.get("attest_read", False)
    if not isinstance(attest, bool):
        raise _bad("attest_read", "must be true or false")
    tail_to_seq = _int(data, "tail_to_seq", required=True)
    assert tail_to_seq is not None
    return TraceIn(
        agent=_text(data, "agent", 100, required=True),
        agent_run_id=_text(data, "agent_run_id", 200, required=True),
        model_call_id=_text(data, "model_call_id", 200, required=True),
        summary_id=summary_id,
        tail_to_seq=tail_to_seq,
        model=_text(data, "model", 100),
        context_id=_text(data, "context_id", 100),
        manifest_hash=_hash(data, "manifest_hash"),
        source_refs=_refs(data, "source_refs"),
        graph_release=_text(data, "graph_release", 100),
        thread_id=_text(data, "thread_id", 200),
        checkpoint_id=_text(data, "checkpoint_id", 200),
        input_tokens=_bounded_int(data, "input_tokens", MAX_TOKENS),
        fallback_reason=reason,
        input_messages=_messages(data, "input_messages"),
        output=_output(data, "output"),
        output_tokens=_bounded_int(data, "output_tokens", MAX_TOKENS),
        latency_ms=_bounded_int(data, "latency_ms", MAX_LATENCY_MS),
        cost_usd=_cost(data, "cost_usd"),
        attest_read=attest,
    )


def _trace_identity(trace: ConsumerTrace) -> tuple:
    summary_id = trace.summary.summary_id if trace.summary is not None else None
    values = {
        "agent": trace.agent,
        "agent_run_id": trace.agent_run_id,
        "summary_id": summary_id,
        "tail_to_seq": trace.tail_to_seq,
        "context_id": trace.context_id,
        "manifest_hash": trace.manifest_hash,
    }
    return tuple(values[k] for k in TRACE_IDENTITY)


def _same_trace(existing: ConsumerTrace, new: TraceIn) -> ConsumerTrace:
    if _trace_identity(existing) != tuple(getattr(new, k) for k in TRACE_IDENTITY):
        raise Conflict(
            f"model_call_id {new.model_call_id!r} was already traced with different data (trace {existing.pk})",
            code="trace_conflict",
            trace_id=existing.pk,
        )
    return existing


@dataclass(frozen=True)
class ReadPoint:
    """The moment a call read its context, as a caller replaying a timeline knows it (better than
    "now", when later events of the same request are already written): the head then, the history
    size then, and whether a compaction was running (``memoryhub.context.timeline``)."""

    head_seq: int
    history_tokens: int
    safe_budget: int
    compaction_running: bool

    @property
    def missed_compaction(self) -> bool:
        return self.history_tokens > self.safe_budget and not self.compaction_running


def attested_read(
    workflow: Workflow, summary: Summary | None, tail_to_seq: Any, head_at_read: int
) -> tuple[str, str] | None:
    """``(context_id, manifest_hash)`` of the read a call made whose context a framework assembled,
    when that read is exactly the one the server serves at ``head_at_read``: its tail reaches that
    head and its summary is the one served now. Checked, not trusted: anything else is None (and
    the trace is flagged ``missing_provenance``), as is a tail too long to hash cheaply."""
    current = Workflow.objects.select_related("active_summary").get(pk=workflow.pk)
    served = served_summary(current)
    if tail_to_seq != head_at_read or (summary.pk if summary else None) != (served.pk if served else None):
        return None
    coords = ReadCoordinates.served(workflow, served, head_at_read)
    if head_at_read - coords.watermark > MANIFEST_MAX_TAIL_EVENTS:
        return None
    return issue_context_id(coords), recompute_manifest_hash(workflow, coords)


def record_trace(
    workflow: Workflow,
    data: Any,
    actor: Actor,
    *,
    read: ReadPoint | None = None,
    head_at_read: int | None = None,
) -> tuple[ConsumerTrace, bool]:
    """Record (or find) the trace of one model call; returns (trace, created).

    ``read``: the read point a caller replaying a timeline knows (head, history, budget).
    ``head_at_read``: the head the call read when the caller knows only that (an OTLP span, mapped
    after later events of its batch were appended); by default the head now."""

    trace_in = data if isinstance(data, TraceIn) else parse_trace(data)
    existing = (
        ConsumerTrace.objects.select_related("summary")
        .filter(workflow=workflow, model_call_id=trace_in.model_call_id)
        .first()
    )
    if existing is not None:
        if trace_in.attest_read and not trace_in.context_id:  # a retry: the attested read is the first one
            trace_in.context_id, trace_in.manifest_hash = existing.context_id, existing.manifest_hash
        return _same_trace(existing, trace_in), False

    summary: Summary | None = None
    if trace_in.summary_id is not None:
        summary = Summary.objects.filter(workflow=workflow, summary_id=trace_in.summary_id).first()
        if summary is None:
            raise _bad(
                "summary_id", f"{trace_in.summary_id!r} is not a summary of this workflow", "unknown_summary"
            )
    head_now = (
        read.head_seq
        if read is not None
        else Workflow.objects.filter(pk=workflow.pk).values_list("head_seq", flat=True).get()
    )
    if trace_in.tail_to_seq > head_now:
        raise _bad(
            "tail_to_seq",
            f"{trace_in.tail_to_seq} is beyond the workflow head {head_now}",
            "tail_beyond_head",
        )
    if summary is not None and trace_in.tail_to_seq < summary.covers_to_seq:
        raise _bad(
            "tail_to_seq",
            f"{trace_in.tail_to_seq} is below the summary's watermark {summary.covers_to_seq}",
            "tail_before_watermark",
        )

    flags: list[str] = []
    head_at_read = head_now if head_at_read is None else min(head_at_read, head_now)
    if trace_in.attest_read and not trace_in.context_id:
        attested = attested_read(workflow, summary, trace_in.tail_to_seq, head_at_read)
        if attested is not None:
            trace_in.context_id, trace_in.manifest_hash = attested
    status_at_read = summary.status if summary else ""
    coords = parse_context_id(trace_in.context_id) if trace_in.context_id else None
    if coords is not None:
        if coords.workflow_pk != workflow.pk:
            flags.append(TraceFlag.CONTEXT_MISMATCH)
        else:
            # The signed read tells what was served and when: trust it over the state now.
            head_at_read = coords.head_seq
            if summary is not None and coords.summary_pk == summary.pk:
                status_at_read = coords.summary_status
            elif not trace_in.fallback_reason and (summary.pk if summary else None) != coords.summary_pk:
                flags.append(TraceFlag.CONTEXT_MISMATCH)
            if trace_in.tail_to_seq > coords.head_seq:  # claims more tail than that read served
                flags.append(TraceFlag.CONTEXT_MISMATCH)
            if trace_in.manifest_hash and recompute_manifest_hash(workflow, coords) != trace_in.manifest_hash:
                flags.append(TraceFlag.CONTEXT_MISMATCH)
    if summary is not None and status_at_read not in VALIDATED_STATUSES:
        flags.append(TraceFlag.UNVALIDATED_SUMMARY)
    if trace_in.tail_to_seq < head_at_read:
        flags.append(TraceFlag.TAIL_LOSS)
    if not trace_in.context_id or not trace_in.manifest_hash:
        flags.append(TraceFlag.MISSING_PROVENANCE)
    if trace_in.fallback_reason:
        flags.append(TraceFlag.FALLBACK_RETRIEVAL)
    if read.missed_compaction if read is not None else missed_compaction(workflow):
        flags.append(TraceFlag.MISSED_COMPACTION)
    flags = list(dict.fromkeys(str(f) for f in flags))

    try:
        with transaction.atomic():
            trace = ConsumerTrace.objects.create(
                tenant_id=workflow.tenant_id,
                workflow=workflow,
                agent=trace_in.agent,
                agent_run_id=trace_in.agent_run_id,
                model_call_id=trace_in.model_call_id,
                model=trace_in.model,
                summary=summary,
                summary_status_at_read=status_at_read,
                summary_watermark=summary.covers_to_seq if summary else 0,
                tail_to_seq=trace_in.tail_to_seq,
                head_seq_at_read=head_at_read,
                context_id=trace_in.context_id,
                manifest_hash=trace_in.manifest_hash,
                source_refs=trace_in.source_refs,
                graph_release=trace_in.graph_release,
                thread_id=trace_in.thread_id,
                checkpoint_id=trace_in.checkpoint_id,
                fallback_reason=trace_in.fallback_reason,
                input_tokens=trace_in.input_tokens,
                input_messages=trace_in.input_messages,
                output=trace_in.output,
                output_tokens=trace_in.output_tokens,
                latency_ms=trace_in.latency_ms,
                cost_usd=trace_in.cost_usd,
                flags=flags,
                actor=str(actor),
            )
            record(
                workflow.tenant,
                actor,
                "trace.record",
                ("consumertrace", trace.model_call_id),
                {
                    "workflow": workflow.external_id,
                    "agent": trace.agent,
                    "summary_id": trace_in.summary_id,
                    "tail_to_seq": trace.tail_to_seq,
                    "head_seq_at_read": head_at_read,
                    "flags": flags,
                },
            )
    except IntegrityError:  # a concurrent retry of the same call won the insert
        existing = ConsumerTrace.objects.select_related("summary").get(
            workflow=workflow, model_call_id=trace_in.model_call_id
        )
        return _same_trace(existing, trace_in), False
    return trace, True


# -- artifacts -----------------------------------------------------------------------------------


@dataclass
class ArtifactIn:
    artifact_id: str
    kind: str
    uri: str
    content_hash: str
    quality_score: float | None
    model_call_ids: list[str]
    agent_run_id: str


def parse_artifact(data: Any) -> ArtifactIn:
    """Validate an artifact body; ``content`` (optional) is only used to compute/check the hash."""
    data = _object(data, ARTIFACT_FIELDS)
    artifact_id = _text(data, "artifact_id", 200, required=True)
    if "/" in artifact_id or artifact_id != artifact_id.strip():
        raise _bad("artifact_id", "must not contain '/' or surrounding spaces")
    content_hash = _hash(data, "content_hash")
    if "content" in data:
        computed = hash_value(data["content"])
        if content_hash and content_hash != computed:
            raise _bad(
                "content_hash", f"does not match the content (computed {computed})", "content_hash_mismatch"
            )
        content_hash = computed
    score = data.get("quality_score")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
            raise _bad("quality_score", "must be a number between 0 and 1")
        if not 0 <= score <= 1:
            raise _bad("quality_score", "must be between 0 and 1")
        score = float(score)
    produced_by = data.get("produced_by")
    if not isinstance(produced_by, dict) or not produced_by:
        raise _bad(
            "produced_by",
            'is required: {"model_call_id"} or {"model_call_ids"} or {"agent_run_id"}',
            "missing_field",
        )
    unknown = set(produced_by) - {"model_call_id", "model_call_ids", "agent_run_id"}
    if unknown:
        raise _bad("produced_by", f"unknown field(s) {sorted(unknown)}")
    calls: list[str] = []
    if "model_call_id" in produced_by:
        calls.append(_text(produced_by, "model_call_id", 200, required=True))
    if "model_call_ids" in produced_by:
        many = produced_by["model_call_ids"]
        if not isinstance(many, list) or not many or not all(isinstance(c, str) and c for c in many):
            raise _bad("produced_by.model_call_ids", "must be a non-empty list of model call ids")
        calls.extend(many)
    run = _text(produced_by, "agent_run_id", 200)
    return ArtifactIn(
        artifact_id=artifact_id,
        kind=_text(data, "kind", 100, required=True),
        uri=_text(data, "uri", 500),
        content_hash=content_hash,
        quality_score=score,
        model_call_ids=list(dict.fromkeys(calls)),
        agent_run_id=run,
    )


def _producers(workflow: Workflow, artifact_in: ArtifactIn) -> list[ConsumerTrace]:
    traces: dict[int, ConsumerTrace] = {}
    if artifact_in.model_call_ids:
        found = {
            t.model_call_id: t
            for t in ConsumerTrace.objects.filter(
                workflow=workflow, model_call_id__in=artifact_in.model_call_ids
            )
        }
        missing = [c for c in artifact_in.model_call_ids if c not in found]
        if missing:
            raise _bad(
                "produced_by",
                f"no consumer trace for model call(s) {missing} in this workflow",
                "unknown_trace",
            )
        traces.update({t.pk: t for t in found.values()})
    if artifact_in.agent_run_id:
        by_run = list(ConsumerTrace.objects.filter(workflow=workflow, agent_run_id=artifact_in.agent_run_id))
        if not by_run:
            raise _bad(
                "produced_by",
                f"no consumer trace for agent run {artifact_in.agent_run_id!r} in this workflow",
                "unknown_trace",
            )
        traces.update({t.pk: t for t in by_run})
    return sorted(traces.values(), key=lambda t: t.pk)


def _same_artifact(
    existing: Artifact, workflow: Workflow, new: ArtifactIn, producers: list[ConsumerTrace]
) -> Artifact:
    same = (
        existing.workflow_id == workflow.pk
        and existing.kind == new.kind
        and existing.uri == new.uri
        and existing.content_hash == new.content_hash
        and existing.quality_score == new.quality_score
        and sorted(existing.produced_by.values_list("pk", flat=True)) == [t.pk for t in producers]
    )
    if not same:
        raise Conflict(
            f"artifact {new.artifact_id!r} already exists with different data",
            code="artifact_conflict",
            artifact_id=new.artifact_id,
        )
    return existing


def record_artifact(workflow: Workflow, data: Any, actor: Actor) -> tuple[Artifact, bool]:
    """Record (or find, if identical) a published artifact and link it to the producing traces."""

    artifact_in = parse_artifact(data)
    producers = _producers(workflow, artifact_in)
    existing = Artifact.objects.filter(
        tenant_id=workflow.tenant_id, artifact_id=artifact_in.artifact_id
    ).first()
    if existing is not None:
        return _same_artifact(existing, workflow, artifact_in, producers), False
    try:
        with transaction.atomic():
            artifact = Artifact.objects.create(
                tenant_id=workflow.tenant_id,
                workflow=workflow,
                artifact_id=artifact_in.artifact_id,
                kind=artifact_in.kind,
                uri=artifact_in.uri,
                content_hash=artifact_in.content_hash,
                quality_score=artifact_in.quality_score,
                actor=str(actor),
            )
            artifact.produced_by.set(producers)
            record(
                workflow.tenant,
                actor,
                "artifact.record",
                artifact,
                {
                    "workflow": workflow.external_id,
                    "kind": artifact.kind,
                    "content_hash": artifact.content_hash,
                    "quality_score": artifact.quality_score,
                    "produced_by": [t.model_call_id for t in producers],
                },
            )
    except IntegrityError:
        existing = Artifact.objects.get(tenant_id=workflow.tenant_id, artifact_id=artifact_in.artifact_id)
        return _same_artifact(existing, workflow, artifact_in, producers), False
    return artifact, True
