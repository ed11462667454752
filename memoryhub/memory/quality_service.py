"""Compaction quality in the database: token-estimate drift, missed compactions, and the reports
the summary and workflow pages show (retention table, decay across versions).

The measurements themselves are ``memoryhub.core.quality`` (pure Python); this module feeds it rows
and records what clients tell us about their own token counters.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from memoryhub.core import quality as q
from memoryhub.core import verdicts
from memoryhub.core.errors import InvalidInput
from memoryhub.core.opaque import unreadable
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
    """The retention table of one summary: per class kept (and declared dropped) against the
    policy's floors, obligation sentences, fabricated units and contradictions. From its latest
    rules-7/8 (else rules-6) validation record, else measured now with the default validator. Opaque content is
    "unknown": nothing can be read, so nothing is reported kept, lost or below a floor."""

    quality = q.merged_quality(policy_for(summary.workflow).quality)
    content = json.loads(summary.content)
    opaque = unreadable(content)
    record = (
        summary.validations.filter(validator_version__in=(*q.VERDICT_VALIDATORS, q.RULES_6))
        .order_by("-created_at", "-id")
        .first()
    )
    if opaque:
        return {
            "available": True,
            "opaque": True,
            "reason": f"{opaque}: retention, fabrication and contradictions are unknown",
            "validator": record.validator_version if record is not None else q.DEFAULT_VALIDATOR,
            "source": "record" if record is not None else "live",
            "rows": [
                {"name": name, "label": q.CLASS_LABELS[name], "unknown": True}
                for name in (*q.UNIT_CLASSES, q.OBLIGATIONS)
            ],
        }
    if record is not None and record.validator_version == q.RULES_6:
        return _rules_6_table(summary, record, quality)
    checks = {c["name"]: c for c in record.checks} if record is not None else {}
    source = "record"
    if "unit_retention" not in checks:
        covered = summary.covers_to_seq - summary.covers_from_seq + 1
        if covered > _page_limit():
            return {"available": False, "reason": f"{covered} covered events: too many to measure on a page"}
        source = "live"
        checks = _live_verdict_checks(summary, content, quality)
    validator = record.validator_version if record is not None and source == "record" else q.DEFAULT_VALIDATOR
    return _rules_7_table(checks, quality, source, validator)


# Live measurements kept per process, keyed by a digest of everything the verdict is a function
# of: the summary's content, its source events as the validator reads them (a purge changes them),
# the validator and the policy's floors. In memory rather than the shared cache: the checks quote
# the summary's text, and a purge must leave none of it in a table.
LIVE_VERDICTS_KEPT = 256
_live_verdicts: OrderedDict[str, dict[str, dict[str, Any]]] = OrderedDict()
_live_verdicts_lock = threading.Lock()


def _live_verdict_checks(
    summary: Summary, content: Any, quality: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """_verdict_checks, judged once per input: judging the demo's incident summary took ~0.6 s,
    on every view of its page (reading its events is the cheap part)."""
    events = _source_events(summary.workflow, summary.covers_from_seq, summary.covers_to_seq)
    inputs = (
        summary.content_hash,
        events,
        q.DEFAULT_VALIDATOR,
        json.dumps(quality, sort_keys=True, default=str),
    )
    key = hashlib.sha256(repr(inputs).encode()).hexdigest()
    with _live_verdicts_lock:
        checks = _live_verdicts.get(key)
        if checks is not None:
            _live_verdicts.move_to_end(key)
            return checks
    checks = _verdict_checks(events, content, quality)
    with _live_verdicts_lock:
        _live_verdicts[key] = checks
        while len(_live_verdicts) > LIVE_VERDICTS_KEPT:
            _live_verdicts.popitem(last=False)
    return checks


def _verdict_checks(events: list, content: Any, quality: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The default validator's (rules-8) quality checks measured now (the shape a record stores)."""
    verdict = verdicts.judge(verdicts.build_evidence(events), content, census=True)
    report = verdict.to_dict()
    checks: dict[str, dict[str, Any]] = {
        name: {"name": name, "passed": not problems, "detail": "; ".join(problems) or ok}
        for name, problems, ok in verdicts.all_checks(
            verdict, content, quality["floors"], quality["max_fabricated"]
        )
    }
    checks["unit_retention"]["retention"] = report["units"]
    checks["obligations"]["obligations"] = report["obligations"]
    checks["obligations"]["totals"] = {
        "total": report["obligations_total"],
        "kept": report["obligations_kept"],
        "declared": sum(1 for o in verdict.obligations if o.state == "declared"),
    }
    checks["fabricated"]["fabricated"] = report["fabricated"]
    checks["contradictions"]["contradictions"] = report["contradictions"]
    checks["declared_drops"]["dropped"] = verdicts.declared_list(verdict, content)
    return checks


def _rules_7_table(checks: dict[str, dict[str, Any]], quality: dict[str, Any], source: str, validator: str):
    floors = quality["floors"]
    units = checks.get("unit_retention", {}).get("retention") or {}
    rows = []
    for kind in q.UNIT_KINDS:
        r = units.get(kind)
        if not r:
            continue
        name = f"unit_{kind}"
        floor = floors.get(name, 0.0)
        rows.append(
            {
                "name": name,
                "label": q.CLASS_LABELS[name],
                "total": r["total"],
                "kept": r["kept"],
                "declared": r["declared"],
                "ratio": r["ratio"],
                "floor": floor,
                "passed": r["ratio"] is None or r["ratio"] >= floor,
                "missing": r["missing"],
            }
        )
    ob = checks.get("obligations", {})
    totals = ob.get("totals") or {"total": 0, "kept": 0, "declared": 0}
    accounted = totals["kept"] + totals["declared"]
    ratio = accounted / totals["total"] if totals["total"] else None
    floor = floors.get(q.OBLIGATIONS, 1.0)
    rows.append(
        {
            "name": q.OBLIGATIONS,
            "label": q.CLASS_LABELS[q.OBLIGATIONS],
            "total": totals["total"],
            "kept": totals["kept"],
            "declared": totals["declared"],
            "ratio": ratio,
            "floor": floor,
            "passed": ratio is None or ratio >= floor,
            "missing": [
                f"seq {o['seq']} ({o['state']}): {o['sentence']}"
                for o in ob.get("obligations") or []
                if o["state"] != "declared"
            ],
        }
    )
    fabricated = checks.get("fabricated", {}).get("fabricated") or []
    return {
        "available": True,
        "source": source,
        "validator": validator,
        "rows": rows,
        "fabricated": [{"token": f["token"], "class": f["kind"]} for f in fabricated],
        "fabricated_count": len(fabricated),
        "max_fabricated": quality["max_fabricated"],
        "contradictions": checks.get("contradictions", {}).get("contradictions") or [],
        "dropped": checks.get("declared_drops", {}).get("dropped") or [],
    }


def _rules_6_table(summary: Summary, record: Any, quality: dict[str, Any]) -> dict[str, Any]:
    """The table a rules-6 record wrote (token classes, mandatory events), read as recorded."""
    floors = quality["floors"]
    checks = {c["name"]: c for c in record.checks}
    numbers = checks.get("salient_retention", {}).get("retention") or {}
    fabricated = checks.get("fabricated", {}).get("fabricated") or []
    rows = []
    for name in (*q.TOKEN_CLASSES, q.MANDATORY_EVENTS):
        r = numbers.get(name) or {"total": 0, "kept": 0, "ratio": None, "missing": []}
        floor = floors.get(name, 0.0)
        rows.append(
            {
                "name": name,
                "label": q.CLASS_LABELS[name],
                "total": r["total"],
                "kept": r["kept"],
                "declared": None,
                "ratio": r["ratio"],
                "floor": floor,
                "passed": r["ratio"] is None or r["ratio"] >= floor,
                "missing": r["missing"],
            }
        )
    return {
        "available": True,
        "source": "record",
        "validator": record.validator_version,
        "rows": rows,
        "fabricated": fabricated,
        "fabricated_count": len(fabricated),
        "max_fabricated": quality["max_fabricated"],
        "contradictions": [],
        "dropped": [],
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
