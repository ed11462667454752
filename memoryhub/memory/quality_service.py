"""Compaction quality in the database: token-estimate drift, missed compactions, and the reports
the summary and workflow pages show (retention table, decay across versions).

The measurements themselves are ``memoryhub.core.quality`` (pure Python); this module feeds it rows
and records what clients tell us about their own token counters.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memoryhub.core import quality as q
from memoryhub.core.errors import InvalidInput
from memoryhub.memory.sources import source_events
from memoryhub.models import (
    CompactionJob,
    EstimateSource,
    Event,
    JobStatus,
    Summary,
    SummaryStatus,
    TokenEstimate,
    Workflow,
)
from triggers.engine import PolicySpec
from triggers.policy import policy_for

ACTIVE_JOB_STATUSES = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.RUNNING)
# Pages compute retention live for summaries up to this many covered events.
DEFAULT_PAGE_MAX_EVENTS = 50_000


# -- client token estimates -----------------------------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    tokens: int
    model: str


def parse_estimate(raw: Any, model: Any, where: str, *, index: int | None = None) -> Estimate | None:
    """A client's own token count (``None`` when absent); 400 on anything but a whole number ≥ 0."""
    if raw is None:  # a model name alone records nothing
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0 or raw > 2**53:
        raise _bad(where, "must be a whole number of tokens ≥ 0", index)
    if model is not None and (not isinstance(model, str) or len(model) > 100):
        raise _bad(f"{where}_model", "must be a string of at most 100 characters", index)
    return Estimate(raw, model or "")


def _bad(field: str, message: str, index: int | None) -> InvalidInput:
    if index is None:
        return InvalidInput(f"{field}: {message}", code="invalid_token_estimate", field=field)
    return InvalidInput(f"events[{index}].{field}: {message}", code="invalid_event", index=index, field=field)


def _drift(estimated: int, exact: int) -> float:
    return (estimated - exact) / exact


def record_event_estimates(workflow: Workflow, rows: list[tuple[int, Estimate, int]], model: str) -> None:
    """(seq, estimate, exact tokens) of freshly appended events; call inside the append's transaction.
    Events whose exact count is 0 (empty content) cannot have a relative drift and are skipped."""
    TokenEstimate.objects.bulk_create(
        [
            TokenEstimate(
                tenant_id=workflow.tenant_id,
                workflow=workflow,
                source=EstimateSource.EVENT,
                model=estimate.model or model,
                seq=seq,
                estimated=estimate.tokens,
                exact=exact,
                drift=_drift(estimate.tokens, exact),
            )
            for seq, estimate, exact in rows
            if exact > 0
        ]
    )


def record_trigger_estimate(workflow: Workflow, estimate: Estimate, model: str) -> TokenEstimate | None:
    """The client's count of the whole history at a trigger call against the running total."""
    exact = workflow.history_tokens
    if exact <= 0:
        return None
    return TokenEstimate.objects.create(
        tenant_id=workflow.tenant_id,
        workflow=workflow,
        source=EstimateSource.TRIGGER,
        model=estimate.model or model,
        seq=workflow.head_seq,
        estimated=estimate.tokens,
        exact=exact,
        drift=_drift(estimate.tokens, exact),
    )


def drift_by_model(workflow: Workflow, *, limit: int = 5000) -> list[dict[str, Any]]:
    """Per model and source over the newest ``limit`` estimates (one query): how many, mean signed
    drift, mean and worst |drift|."""
    rows = (
        TokenEstimate.objects.filter(workflow=workflow)
        .order_by("-at", "-id")
        .values_list("model", "source", "drift")[:limit]
    )
    groups: dict[tuple[str, str], list[float]] = {}
    for model, source, drift in rows:
        groups.setdefault((model, source), []).append(drift)
    return [
        {
            "model": model or "—",
            "source": source,
            "estimates": len(drifts),
            "mean_drift": sum(drifts) / len(drifts),
            "mean_abs_drift": sum(abs(d) for d in drifts) / len(drifts),
            "worst_drift": max(drifts, key=abs),
        }
        for (model, source), drifts in sorted(groups.items())
    ]


# -- missed compactions ----------------------------------------------------------------------------


def missed_compaction(workflow: Workflow) -> bool:
    """History over the policy's safe budget at a model call, and no compaction requested/running."""

    totals = Workflow.objects.filter(pk=workflow.pk).values("summary_tokens", "tail_tokens").get()
    history = totals["summary_tokens"] + totals["tail_tokens"]
    if history <= policy_for(workflow).safe_budget:
        return False
    return not CompactionJob.objects.filter(workflow=workflow, status__in=ACTIVE_JOB_STATUSES).exists()


def thresholds(
    workflow: Workflow, spec: PolicySpec, summaries: Sequence[Mapping[str, Any]], cum: dict[int, int]
) -> dict:
    """The policy's trigger and safe budget next to the history sizes at which compactions really
    happened (the threshold in force — for frameworks that compact by themselves, theirs).
    ``cum`` maps a seq to the tokens of events 1..seq."""
    points = []
    previous_to, previous_tokens = 0, 0
    for s in summaries:
        new_tokens = cum.get(s["covers_to_seq"], 0) - cum.get(previous_to, 0)
        points.append(
            {
                "version": s["version"],
                "compactor": s["compactor_name"],
                "history_tokens": previous_tokens + new_tokens,
            }
        )
        previous_to, previous_tokens = s["covers_to_seq"], s["token_count"]
    observed = [p["history_tokens"] for p in points]
    return {
        "policy_trigger_tokens": spec.trigger_tokens,
        "policy_safe_budget": spec.safe_budget,
        "observed": points,
        "observed_median": int(statistics.median(observed)) if observed else None,
        "observed_last": observed[-1] if observed else None,
    }


# -- page reports ----------------------------------------------------------------------------------


def _page_limit() -> int:
    return int(getattr(settings, "MEMORYHUB_QUALITY_PAGE_MAX_EVENTS", DEFAULT_PAGE_MAX_EVENTS))


def _source_events(workflow: Workflow, start: int, end: int):
    return source_events(workflow, start, end)


def summary_quality(summary: Summary) -> dict[str, Any]:
    """The retention table of one summary: per class kept/total against the policy's floors, and
    the fabricated tokens. From its rules-6 validation record when it has one, else measured now."""

    quality = q.merged_quality(policy_for(summary.workflow).quality)
    floors = quality["floors"]
    record = summary.validations.filter(validator_version=q.RULES_6).order_by("-created_at", "-id").first()
    source = "record"
    numbers: dict[str, Any] | None = None
    fabricated: list[dict[str, str]] = []
    fabricated_count = 0
    if record is not None:
        checks = {c["name"]: c for c in record.checks}
        numbers = checks.get("salient_retention", {}).get("retention")
        fabricated = checks.get("fabricated", {}).get("fabricated") or []
        fabricated_count = len(fabricated)
    if numbers is None:
        covered = summary.covers_to_seq - summary.covers_from_seq + 1
        if covered > _page_limit():
            return {"available": False, "reason": f"{covered} covered events: too many to measure on a page"}
        source = "live"
        index = q.build_index(
            _source_events(summary.workflow, summary.covers_from_seq, summary.covers_to_seq)
        )
        report = q.measure(index, json.loads(summary.content))
        data = report.to_dict()
        numbers, fabricated, fabricated_count = (
            data["retention"],
            data["fabricated"],
            data["fabricated_count"],
        )
    rows = []
    for name in q.RETENTION_CLASSES:
        r = numbers.get(name) or {"total": 0, "kept": 0, "ratio": None, "missing": []}
        floor = floors.get(name, 0.0)
        rows.append(
            {
                "name": name,
                "label": q.CLASS_LABELS[name],
                "total": r["total"],
                "kept": r["kept"],
                "ratio": r["ratio"],
                "floor": floor,
                "passed": r["ratio"] is None or r["ratio"] >= floor,
                "missing": r["missing"],
            }
        )
    return {
        "available": True,
        "source": source,
        "validator": record.validator_version if record is not None else q.RULES_6,
        "rows": rows,
        "fabricated": fabricated,
        "fabricated_count": fabricated_count,
        "max_fabricated": quality["max_fabricated"],
    }


def workflow_quality(workflow: Workflow, *, max_versions: int = 20) -> dict[str, Any]:
    """Decay across the workflow's summary versions (lost rows + S1-retention curve), the
    thresholds in force and the token-estimate drift, in a fixed handful of queries."""

    spec = policy_for(workflow)
    summaries = list(
        Summary.objects.filter(workflow=workflow)
        .exclude(status=SummaryStatus.REJECTED)
        .order_by("-version")
        .values("version", "covers_from_seq", "covers_to_seq", "token_count", "compactor_name", "content")[
            :max_versions
        ]
    )[::-1]
    head = workflow.head_seq
    report: dict[str, Any] = {"drift": drift_by_model(workflow)}
    if head > _page_limit():
        cum = dict(
            Event.objects.filter(
                workflow=workflow, seq__in={s["covers_to_seq"] for s in summaries}
            ).values_list("seq", "cum_tokens")
        )
        report["thresholds"] = thresholds(workflow, spec, summaries, cum)
        report["decay"] = {"available": False, "reason": f"{head:,} events: too many to measure on a page"}
        return report
    events = _source_events(workflow, 1, head)
    cum, running = {}, 0
    for e in events:
        running += e.token_count
        cum[e.seq] = running
    report["thresholds"] = thresholds(workflow, spec, summaries, cum)
    if not summaries:
        report["decay"] = {"available": False, "reason": "no summary versions yet"}
        return report
    end = max(s["covers_to_seq"] for s in summaries)
    index = q.build_index([e for e in events if e.seq <= end])
    tail = q.build_index([e for e in events if e.seq > end])
    versions = [
        q.VersionContent(s["version"], s["covers_to_seq"], json.loads(s["content"])) for s in summaries
    ]
    decay = q.decay(index, versions, tail)
    lost = [row for row in decay["rows"] if row["first_lost"] is not None]
    decay.update(available=True, lost=lost, lost_count=len(lost))
    decay["restored_count"] = sum(1 for row in lost if row["restored_by"])
    report["decay"] = decay
    return report
