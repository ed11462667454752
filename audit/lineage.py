"""Lineage of a published artifact, hop by hop (seed: "How do you audit an unexpected output?").

artifact → consumer trace(s) → summary version + tail watermark → validation records (incl. waived
checks) → covered source events and consumed tail → compaction job and its attempts → lifecycle
(activation) events. Each hop carries what the UI needs to link to it; purged source events are
named with the purge that removed them. The number of queries grows with the number of traces
behind the artifact, never with the number of events.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.urls import reverse

from audit.content import seq_range, summary_unavailable
from memoryhub.core.errors import NotFound
from memoryhub.memory.summaries import (
    LIFECYCLE_CHANGE_FIELDS,
    lifecycle_event_dict,
    summary_dict,
    trace_dict,
    validation_dict,
)
from memoryhub.models import Artifact, CompactionJob, ConsumerTrace, Summary, Tenant
from memoryhub.models.traces import TRACE_CALL_FIELDS, TRACE_READ_FIELDS, TRACE_RUN_FIELDS


def get_artifact(tenant: Tenant, artifact_id: str) -> Artifact:
    """The tenant's artifact or a 404 (another tenant's artifact is indistinguishable from none)."""
    artifact = (
        Artifact.objects.filter(tenant=tenant, artifact_id=artifact_id).select_related("workflow").first()
    )
    if artifact is None:
        raise NotFound(f"artifact {artifact_id!r} not found", code="artifact_not_found")
    return artifact


def producing_traces(artifact: Artifact) -> list[ConsumerTrace]:
    """The consumer traces behind ``artifact``, oldest first, with their summaries loaded."""
    return list(
        artifact.produced_by.select_related("summary", "summary__purged_by", "summary__job").order_by(
            "at", "id"
        )
    )


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# A summary version in a lineage hop: its identity, lineage, compactor and integrity groups.
SUMMARY_REF_FIELDS = (
    "summary_id",
    "version",
    "label",
    "status",
    "created_at",
    "created_by",
    "covers_from_seq",
    "covers_to_seq",
    "source_revision",
    "source_refs",
    "excluded_categories",
    "compactor",
    "content_hash",
    "storage_location",
    "token_count",
    "purged",
    "url",
    "diff_url",
)
# Every validator run over the summary, failed and waived checks spelled out.
VALIDATION_RECORD_FIELDS = (
    "id",
    "validator_version",
    "passed",
    "mandatory_coverage",
    "checks",
    "failed_checks",
    "reasons",
    "waived_checks",
    "waived_by",
    "actor",
    "created_at",
)


def summary_ref(summary: Summary) -> dict[str, Any]:
    """The identity, lineage, compactor and integrity groups of a summary version."""
    return summary_dict(
        summary,
        SUMMARY_REF_FIELDS,
        created_at=_iso(summary.created_at),
        purged=summary_unavailable(summary),
        url=f"/summaries/{summary.summary_id}/",
        diff_url=reverse("memoryhub:summary-diff", args=[summary.summary_id]),
    )


def validation_records(summary: Summary) -> list[dict[str, Any]]:
    """Every validator run over the summary, oldest first, with failed and waived checks spelled out."""
    return [
        validation_dict(
            v, VALIDATION_RECORD_FIELDS, checks=v.checks_with_state(), created_at=_iso(v.created_at)
        )
        for v in summary.validations.order_by("created_at", "id")
    ]


def job_ref(job: CompactionJob | None) -> dict[str, Any] | None:
    if job is None:
        return None
    return {
        "id": job.pk,
        "status": job.status,
        "outcome": job.outcome,
        "compactor": job.compactor,
        "source_revision": job.source_revision,
        "idempotency_key": job.idempotency_key,
        "expected_revision": job.expected_revision,
        "requested_by": job.requested_by,
        "attempts": job.attempts,
        "error": job.error,
        "tokens_in": job.tokens_in,
        "tokens_out": job.tokens_out,
        "latency_ms": job.latency_ms,
        "created_at": _iso(job.created_at),
        "started_at": _iso(job.started_at),
        "finished_at": _iso(job.finished_at),
        "api_url": f"/api/v1/compactions/{job.pk}/",
    }


def summary_job(summary: Summary) -> CompactionJob | None:
    """The job that produced the summary (Summary.job, else a job that names it as its result)."""
    if summary.job_id:
        return summary.job
    return CompactionJob.objects.filter(summary=summary).order_by("-created_at").first()


# The lifecycle history in a lineage hop: the prior active summary by its id, the time last.
LIFECYCLE_FIELDS = (
    "id",
    *LIFECYCLE_CHANGE_FIELDS,
    "prior_active_summary",
    "source_revision_at_activation",
    "at",
)
# A consumer trace as a lineage hop starts: what it read, how, and what it flagged.
TRACE_REF_FIELDS = (
    "trace_id",
    *TRACE_CALL_FIELDS,
    "at",
    *TRACE_READ_FIELDS,
    *TRACE_RUN_FIELDS,
    "source_refs",
    "flags",
)


def lifecycle_events(summary: Summary) -> list[dict[str, Any]]:
    """The summary's append-only lifecycle history (validations, activations incl. stale ones, …)."""
    rows = summary.lifecycle_events.select_related("prior_active_summary").order_by("at", "id")
    return [
        lifecycle_event_dict(
            e,
            LIFECYCLE_FIELDS,
            prior_active_summary=e.prior_active_summary.summary_id if e.prior_active_summary else None,
            at=_iso(e.at),
        )
        for e in rows
    ]


def trace_ref(trace: ConsumerTrace) -> dict[str, Any]:
    return trace_dict(trace, TRACE_REF_FIELDS, at=_iso(trace.at))


def trace_lineage(trace: ConsumerTrace) -> dict[str, Any]:
    """One consumer trace with everything below it in the chain."""
    workflow = trace.workflow
    summary = trace.summary
    watermark = summary.covers_to_seq if summary is not None else trace.summary_watermark
    hop: dict[str, Any] = trace_ref(trace)
    hop["watermark"] = watermark
    hop["replay_url"] = reverse("memoryhub:trace-replay", args=[trace.pk])
    hop["replay_api_url"] = f"/api/v1/traces/{trace.pk}/replay/"
    hop["summary"] = summary_ref(summary) if summary is not None else None
    hop["validations"] = validation_records(summary) if summary is not None else []
    hop["covered"] = seq_range(workflow, summary.covers_from_seq, summary.covers_to_seq) if summary else None
    hop["tail"] = seq_range(workflow, watermark + 1, trace.tail_to_seq)
    # Events that existed at read time but were not handed to the consumer (flagged tail loss).
    hop["tail_gap"] = seq_range(workflow, max(trace.tail_to_seq, watermark) + 1, trace.head_seq_at_read)
    job = summary_job(summary) if summary is not None else None
    hop["job"] = job_ref(job)
    hop["lifecycle"] = lifecycle_events(summary) if summary is not None else []
    hop["gaps"] = _gaps(hop)
    return hop


def _gaps(hop: dict[str, Any]) -> list[str]:
    """Why this chain is not complete (empty when every hop is present and readable)."""
    gaps = []
    if not hop["context_id"] or not hop["manifest_hash"]:
        gaps.append("the trace recorded no context id / manifest hash")
    summary = hop["summary"]
    if summary is not None:
        if not hop["validations"]:
            gaps.append(f"{summary['label']} has no validation record")
        if summary["purged"]:
            gaps.append(summary["purged"])
        if hop["job"] is None:
            gaps.append(f"{summary['label']} was not produced by a recorded compaction job")
    for part in ("covered", "tail"):
        rng = hop[part]
        for run in (rng or {}).get("unavailable", []):
            gaps.append(f"{run['label']}: {run['text']}")
    if hop["tail_gap"]:
        gaps.append(f"{hop['tail_gap']['label']} existed at read time but were not in the consumed context")
    return gaps


def artifact_lineage(artifact: Artifact) -> dict[str, Any]:
    """The whole chain behind ``artifact`` as plain data (the API shape and the page's context)."""
    workflow = artifact.workflow
    traces = [trace_lineage(t) for t in producing_traces(artifact)]
    gaps = [] if traces else ["no consumer trace produced this artifact"]
    for t in traces:
        gaps += [f"trace {t['model_call_id']}: {g}" for g in t["gaps"]]
    return {
        "artifact": {
            "artifact_id": artifact.artifact_id,
            "kind": artifact.kind,
            "uri": artifact.uri,
            "content_hash": artifact.content_hash,
            "quality_score": artifact.quality_score,
            "actor": artifact.actor,
            "at": _iso(artifact.at),
            "url": reverse("memoryhub:artifact-detail", args=[artifact.artifact_id]),
        },
        "workflow": {
            "external_id": workflow.external_id,
            "name": workflow.name,
            "graph_release": workflow.graph_release,
            "head_seq": workflow.head_seq,
            "active_summary_id": workflow.active_summary.summary_id if workflow.active_summary else None,
            "url": reverse("memoryhub:workflow-detail", args=[workflow.external_id]),
        },
        "traces": traces,
        "complete": not gaps,
        "gaps": gaps,
    }
