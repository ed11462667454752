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
from memoryhub.models import Artifact, CompactionJob, ConsumerTrace, Summary, Tenant


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


def summary_ref(summary: Summary) -> dict[str, Any]:
    """The identity, lineage, compactor and integrity groups of a summary version."""
    return {
        "summary_id": summary.summary_id,
        "version": summary.version,
        "label": summary.label,
        "status": summary.status,
        "created_at": _iso(summary.created_at),
        "created_by": summary.created_by,
        "covers_from_seq": summary.covers_from_seq,
        "covers_to_seq": summary.covers_to_seq,
        "source_revision": summary.source_revision,
        "source_refs": summary.source_refs,
        "excluded_categories": summary.excluded_categories,
        "compactor": compactor_config(summary),
        "content_hash": summary.content_hash,
        "storage_location": summary.storage_location,
        "token_count": summary.token_count,
        "purged": summary_unavailable(summary),
        "url": f"/summaries/{summary.summary_id}/",
        "diff_url": reverse("memoryhub:summary-diff", args=[summary.summary_id]),
    }


def compactor_config(summary: Summary) -> dict[str, Any]:
    return {
        "name": summary.compactor_name,
        "version": summary.compactor_version,
        "model": summary.model,
        "prompt_template_version": summary.prompt_template_version,
        "algorithm_version": summary.algorithm_version,
        "token_budget": summary.token_budget,
        "tool_schema_version": summary.tool_schema_version,
    }


def validation_records(summary: Summary) -> list[dict[str, Any]]:
    """Every validator run over the summary, oldest first, with failed and waived checks spelled out."""
    out = []
    for v in summary.validations.order_by("created_at", "id"):
        out.append(
            {
                "id": v.pk,
                "validator_version": v.validator_version,
                "passed": v.passed,
                "mandatory_coverage": v.mandatory_coverage,
                "checks": v.checks_with_state(),
                "failed_checks": v.failed_checks,
                "reasons": v.reasons,
                "waived_checks": v.waived_checks,
                "waived_by": v.waived_by,
                "actor": v.actor,
                "created_at": _iso(v.created_at),
            }
        )
    return out


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


def lifecycle_events(summary: Summary) -> list[dict[str, Any]]:
    """The summary's append-only lifecycle history (validations, activations incl. stale ones, …)."""
    rows = summary.lifecycle_events.select_related("prior_active_summary").order_by("at", "id")
    return [
        {
            "id": e.pk,
            "action": e.action,
            "result": e.result,
            "from_status": e.from_status,
            "to_status": e.to_status,
            "actor": e.actor,
            "actor_kind": e.actor_kind,
            "task_attempt_id": e.task_attempt_id,
            "reason": e.reason,
            "expected_revision": e.expected_revision,
            "observed_revision": e.observed_revision,
            "prior_active_summary": e.prior_active_summary.summary_id if e.prior_active_summary else None,
            "source_revision_at_activation": e.source_revision_at_activation,
            "at": _iso(e.at),
        }
        for e in rows
    ]


def trace_ref(trace: ConsumerTrace) -> dict[str, Any]:
    return {
        "trace_id": trace.pk,
        "agent": trace.agent,
        "agent_run_id": trace.agent_run_id,
        "model_call_id": trace.model_call_id,
        "model": trace.model,
        "at": _iso(trace.at),
        "summary_status_at_read": trace.summary_status_at_read,
        "summary_watermark": trace.summary_watermark,
        "tail_to_seq": trace.tail_to_seq,
        "head_seq_at_read": trace.head_seq_at_read,
        "context_id": trace.context_id,
        "manifest_hash": trace.manifest_hash,
        "graph_release": trace.graph_release,
        "thread_id": trace.thread_id,
        "checkpoint_id": trace.checkpoint_id,
        "fallback_reason": trace.fallback_reason,
        "input_tokens": trace.input_tokens,
        "source_refs": trace.source_refs,
        "flags": trace.flags,
    }


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
