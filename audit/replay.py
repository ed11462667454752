"""Replay bundles: everything preserved to re-run one consumer's model call, as one JSON document.

Reproduction is best effort (models are nondeterministic and external tools change), so the bundle
is explicit about what it could not include: ``unavailable`` names each missing part and why
(e.g. "events 5-9: purged by prg_… on 2026-…"). Bytes are verified against their recorded hashes
so a replay never silently runs on altered inputs.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from audit.content import range_label, runs, summary_unavailable
from audit.lineage import job_ref, summary_job, validation_records
from memoryhub.context.assembly import manifest_hash, parse_context_id, recompute_manifest_hash
from memoryhub.core.canonical import hash_text, sha256_hex
from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.memory.summaries import compactor_config, summary_dict, trace_dict
from memoryhub.models import ConsumerTrace, Event, Summary, Tenant
from memoryhub.models.traces import TRACE_RESULT_FIELDS
from memoryhub.models.workflows import EVENT_CLIENT_FIELDS

BUNDLE_SCHEMA = "memoryhub.replay/v1"
# The summary a replay runs on: its bytes (unless purged), whether they hash right, what it covers.
BUNDLE_SUMMARY_FIELDS = (
    "summary_id",
    "version",
    "status",
    "status_at_read",
    "content_schema",
    "content",
    "content_hash",
    "hash_verified",
    "covers_from_seq",
    "covers_to_seq",
    "source_revision",
    "source_refs",
    "excluded_categories",
    "token_count",
    "storage_location",
)
# The model call being replayed.
BUNDLE_TRACE_FIELDS = (
    "trace_id",
    "agent",
    "agent_run_id",
    "model_call_id",
    "at",
    "flags",
    "input_tokens",
    "source_refs",
    "head_seq_at_read",
    "thread_id",
    "fallback_reason",
    # What the call was sent and answered, where recorded (null: not recorded): a replay compares
    # its own answer with this one.
    *TRACE_RESULT_FIELDS,
)


def get_trace(tenant: Tenant, trace_id: str | int) -> ConsumerTrace:
    """The tenant's consumer trace by its id (404 for unknown ids and other tenants' traces)."""
    try:
        pk = int(trace_id)
    except (TypeError, ValueError):
        raise NotFound(f"trace {trace_id!r} not found", code="trace_not_found")
    trace = (
        ConsumerTrace.objects.filter(tenant=tenant, pk=pk)
        .select_related("workflow", "summary", "summary__purged_by", "summary__job")
        .first()
    )
    if trace is None:
        raise NotFound(f"trace {trace_id!r} not found", code="trace_not_found")
    return trace


def _event_dict(e: Event) -> dict[str, Any]:
    # Only unpurged events reach the bundle: their ids are shown as sent.
    return {**{key: getattr(e, key) for key in EVENT_CLIENT_FIELDS}, "created_at": e.created_at.isoformat()}


def _missing(part: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"part": part, "reason": reason, "text": f"{part}: {reason}", **extra}


def _manifest_check(trace: ConsumerTrace, summary: Summary | None, watermark: int) -> dict[str, Any]:
    """Recompute the manifest of what the consumer says it read (events keep their hashes after a
    purge, so this works on purged tails too) and compare it with the recorded manifest_hash. When
    the trace quotes a context id of ours, the manifest of that exact read is recomputed as well."""

    workflow = trace.workflow
    rows = Event.objects.filter(workflow=workflow, seq__gt=watermark, seq__lte=trace.tail_to_seq)
    tail = list(rows.order_by("seq").values_list("seq", "content_hash", "token_count"))
    claimed = manifest_hash(workflow, summary, tail, trace.tail_to_seq)
    served = None
    try:
        coords = parse_context_id(trace.context_id) if trace.context_id else None
    except InvalidInput:
        coords = None
    if coords is not None and coords.workflow_pk == workflow.pk:
        served = recompute_manifest_hash(workflow, coords)
    recorded = trace.manifest_hash
    return {
        "recorded": recorded,
        "recomputed": claimed,
        "served": served,
        "matches": bool(recorded) and recorded in (claimed, served),
    }


def replay_bundle(trace: ConsumerTrace) -> dict[str, Any]:
    """The replay bundle of ``trace`` (see the module docstring)."""
    workflow = trace.workflow
    summary = trace.summary
    unavailable: list[dict[str, Any]] = []
    watermark = summary.covers_to_seq if summary is not None else trace.summary_watermark

    summary_part: dict[str, Any] | None = None
    validator: list[dict[str, Any]] = []
    job = None
    if summary is not None:
        purged = summary_unavailable(summary)
        content = None if purged else summary.content
        summary_part = summary_dict(
            summary,
            BUNDLE_SUMMARY_FIELDS,
            status_at_read=trace.summary_status_at_read,
            content=content,
            hash_verified=None
            if content is None
            else sha256_hex(content.encode("utf-8")) == summary.content_hash,
        )
        purge = summary.purged_by if purged else None
        if purge is not None:
            unavailable.append(
                _missing(
                    f"summary {summary.label} content",
                    f"purged by {purge.purge_id} on {purge.at.date().isoformat()}",
                    purge_id=purge.purge_id,
                )
            )
        elif not summary_part["hash_verified"]:
            unavailable.append(
                _missing(
                    f"summary {summary.label} content",
                    "its bytes do not match the recorded content_hash (integrity failure)",
                )
            )
        validator = validation_records(summary)
        if not validator:
            unavailable.append(
                _missing("validator configuration", f"{summary.label} has no validation record")
            )
        job = summary_job(summary)

    tail_from, tail_to = watermark + 1, trace.tail_to_seq
    events = list(
        Event.objects.filter(workflow=workflow, seq__gte=tail_from, seq__lte=tail_to)
        .select_related("purge")
        .order_by("seq")
    )
    tail_events, purged_by_run, bad_hash = [], [], []
    for e in events:
        if e.purged_at is not None:
            purged_by_run.append(e)
            continue
        if hash_text(e.content) != e.content_hash:
            bad_hash.append(e.seq)
        tail_events.append(_event_dict(e))
    _purged_parts(purged_by_run, unavailable)
    for a, b in runs(bad_hash):
        unavailable.append(_missing(range_label(a, b), "content does not match the recorded content_hash"))

    for field, label in (
        ("context_id", "context id"),
        ("manifest_hash", "context manifest hash"),
        ("graph_release", "graph release"),
        ("checkpoint_id", "checkpoint id"),
        ("model", "consumer model id"),
    ):
        if not getattr(trace, field):
            unavailable.append(_missing(label, "not recorded by the consumer trace"))

    return {
        "schema": BUNDLE_SCHEMA,
        "generated_at": timezone.now().isoformat(),
        "tenant": workflow.tenant.slug,
        "workflow": {
            "external_id": workflow.external_id,
            "name": workflow.name,
            "graph_release": workflow.graph_release,
            "head_seq": workflow.head_seq,
        },
        "trace": trace_dict(
            trace,
            BUNDLE_TRACE_FIELDS,
            at=trace.at.isoformat(),
            cost_usd=float(trace.cost_usd) if trace.cost_usd is not None else None,
        ),
        "context_id": trace.context_id,
        "manifest_hash": trace.manifest_hash,
        "manifest_check": _manifest_check(trace, summary, watermark),
        "graph_release": trace.graph_release,
        "checkpoint_id": trace.checkpoint_id,
        "model_ids": {
            "consumer": trace.model,
            "compactor": summary.model if summary is not None else None,
        },
        "summary": summary_part,
        "compactor": compactor_config(summary) if summary is not None else None,
        "validator": validator,
        "compaction_job": job_ref(job),
        "tail": {
            "from_seq": tail_from,
            "to_seq": tail_to,
            "expected_events": max(0, tail_to - tail_from + 1),
            "events": tail_events,
        },
        "tail_gap": (
            {"from_seq": max(tail_to, watermark) + 1, "to_seq": trace.head_seq_at_read}
            if trace.head_seq_at_read > max(tail_to, watermark)
            else None
        ),
        "unavailable": unavailable,
        "complete": not unavailable,
    }


def _purged_parts(purged: list[Event], unavailable: list[dict[str, Any]]) -> None:
    """Group purged tail events into runs per purge: "events 5-9: purged by prg_… on <date>"."""
    group: list[Event] = []

    def flush() -> None:
        if group:
            p = group[0]
            purge_id = p.purge.purge_id if p.purge else "unknown purge"
            day = p.purged_at.date().isoformat() if p.purged_at else "an unknown date"
            unavailable.append(
                _missing(
                    range_label(group[0].seq, group[-1].seq),
                    f"purged by {purge_id} on {day}",
                    purge_id=purge_id,
                )
            )

    for e in purged:
        if group and (e.seq != group[-1].seq + 1 or e.purge_id != group[0].purge_id):
            flush()
            group = []
        group.append(e)
    flush()
