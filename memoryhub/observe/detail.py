"""What the workflow page and the summary page show, read from the database: plain functions
returning plain dataclasses (no request, no response, no template).

Query counts do not grow with rows: lists are bounded, the event pages and the history curve
read events by seq ranges and sampled seqs (seqs are gapless) — never OFFSET.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from django.db.models import Count, Q

from audit.diff import diff_summaries
from audit.models import SummaryComment
from memoryhub.memory import lifecycle
from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.memory.lifecycle import ActionPolicy
from memoryhub.memory.summaries import summary_content
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    Event,
    LifecycleEvent,
    LifecycleResult,
    Role,
    Summary,
    SummaryStatus,
    Tenant,
    ValidationRecord,
    Workflow,
    role_at_least,
)
from memoryhub.observe import figures, framework, metrics
from triggers.engine import PolicySpec
from triggers.policy import is_over_budget

CURVE_POINTS = 240  # at most this many sampled seqs (plus activation points) on the history curve
RECENT_ROWS = 50
POINTER_EVENTS = 200  # activations considered for the curve's saw-tooth


# --------------------------------------------------------------------------------------------
# Workflow page
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowNumbers:
    history: int
    budget_share: float
    over_budget: bool
    age: timedelta | None  # since the active summary was activated


def workflow_numbers(workflow: Workflow, spec: PolicySpec, now: datetime) -> WorkflowNumbers:
    history = workflow.history_tokens
    return WorkflowNumbers(
        history=history,
        budget_share=(history / spec.safe_budget) if spec.safe_budget else 0,
        over_budget=is_over_budget(history, spec.safe_budget),
        age=(now - workflow.activated_at) if workflow.activated_at and workflow.active_summary_id else None,
    )


@dataclass(frozen=True)
class EventPage:
    """One page of a workflow's events: seqs ``first_seq``..``last_seq``."""

    events: list[Event]
    number: int
    num_pages: int
    first_seq: int
    last_seq: int

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.num_pages

    @property
    def previous(self) -> int:
        return self.number - 1

    @property
    def next(self) -> int:
        return self.number + 1


def page_of_seq(seq: int) -> int:
    """The event page that holds ``seq``."""
    return (seq - 1) // EVENTS_PER_PAGE + 1


def event_page(workflow: Workflow, page_no: int) -> EventPage:
    """Events of page ``page_no`` (clamped) as a seq range: seqs are gapless, so no OFFSET and no COUNT."""
    num_pages = max(1, math.ceil(workflow.head_seq / EVENTS_PER_PAGE))
    page_no = min(max(page_no, 1), num_pages)
    lo = (page_no - 1) * EVENTS_PER_PAGE + 1
    # The LIMIT matters: it makes PostgreSQL walk the (workflow, seq) index even when its estimate for
    # the range is far off (a million-event workflow among many small ones).
    events = list(
        Event.objects.filter(workflow=workflow, seq__gte=lo, seq__lt=lo + EVENTS_PER_PAGE)
        .select_related("purge")
        .order_by("seq")[:EVENTS_PER_PAGE]
    )
    return EventPage(events, page_no, num_pages, lo, events[-1].seq if events else lo)


@dataclass(frozen=True)
class PointerChange:
    """A change of the active-summary pointer (or a refused attempt at one) on the history curve."""

    seq: int  # head when it happened
    tokens: int  # history tokens there (after an applied change)
    summary_id: str
    version: int
    action: str
    result: str
    watermark: int  # the summary's covers_to_seq
    observed_revision: int | None


@dataclass(frozen=True)
class History:
    """The history-token curve: sampled points (every ``sampled_every``-th seq plus the pointer
    changes), the activations and the stale or refused attempts."""

    points: list[figures.CurvePoint]
    activations: list[PointerChange]
    attempts: list[PointerChange]
    sampled_every: int


def change_positions(changes: list[LifecycleEvent], head: int) -> list[int]:
    """The seq (head at the time) of each pointer change, never before the previous one.

    Activations record it (source_revision_at_activation). A quarantine of the active version
    does not: it takes the position of the automatic fallback written in the same transaction,
    or head when it is the latest change (the pointer is still empty now).
    """
    positions: list[int] = []
    position = 0
    for i, change in enumerate(changes):
        seq = change.source_revision_at_activation
        if seq is None:
            following = changes[i + 1] if i + 1 < len(changes) else None
            if following is None:
                seq = head
            elif (
                following.source_revision_at_activation is not None
                and abs((following.at - change.at).total_seconds()) < 5
            ):
                seq = following.source_revision_at_activation
            else:
                seq = position
        position = min(max(position, seq), head)
        positions.append(position)
    return positions


def _pointer_change(seq: int, tokens: int, change: LifecycleEvent) -> PointerChange:
    return PointerChange(
        seq,
        tokens,
        change.summary.summary_id,
        change.summary.version,
        change.action,
        change.result,
        change.summary.covers_to_seq,
        change.observed_revision,
    )


def history(workflow: Workflow) -> History:
    """The curve from sampled cum_tokens (two queries, bounded rows).

    History tokens at seq s = tokens of the summary active then + cum(s) − cum(its watermark).
    The pointer timeline comes from applied lifecycle events that set or cleared ACTIVE, and the
    refused attempts are the stale-activation metric's rows.
    """
    head = workflow.head_seq
    if head == 0:
        return History([], [], [], 1)
    changes = list(
        LifecycleEvent.objects.filter(workflow=workflow)
        .filter(
            Q(result=LifecycleResult.APPLIED, to_status=SummaryStatus.ACTIVE)
            | (Q(result=LifecycleResult.APPLIED, from_status=SummaryStatus.ACTIVE) & ~Q(action="supersede"))
            | metrics.STALE_ATTEMPTS.condition()
        )
        .select_related("summary")
        .only(
            "at",
            "action",
            "result",
            "from_status",
            "to_status",
            "source_revision_at_activation",
            "observed_revision",
            "summary__summary_id",
            "summary__version",
            "summary__covers_to_seq",
            "summary__token_count",
        )
        .order_by("-at", "-id")[:POINTER_EVENTS]
    )
    changes.reverse()

    step = max(1, math.ceil(head / CURVE_POINTS))
    wanted = set(range(step, head + 1, step)) | {1, head}
    timeline = list(zip(change_positions(changes, head), changes, strict=True))
    for seq, change in timeline:
        wanted.update((seq, change.summary.covers_to_seq))
    wanted = {s for s in wanted if 1 <= s <= head}
    cum = dict(
        Event.objects.filter(workflow=workflow, seq__in=sorted(wanted)).values_list("seq", "cum_tokens")
    )

    def history_at(seq: int, active: Summary | None) -> int:
        raw = cum.get(seq, 0)
        if active is None:
            return raw
        return active.token_count + max(0, raw - cum.get(active.covers_to_seq, 0))

    points: list[figures.CurvePoint] = []
    activations: list[PointerChange] = []
    attempts: list[PointerChange] = []
    active: Summary | None = None
    pending = iter(timeline)
    upcoming = next(pending, None)
    for seq in sorted(wanted):
        # Apply every pointer change that happened at or before this seq: a vertical drop.
        while upcoming is not None and upcoming[0] <= seq:
            at_seq, change = upcoming
            if change.result != LifecycleResult.APPLIED:
                attempts.append(_pointer_change(at_seq, history_at(at_seq, active), change))
            else:
                before = history_at(at_seq, active)
                if change.to_status == SummaryStatus.ACTIVE:
                    active = change.summary
                elif active is not None and active.pk == change.summary.pk:
                    active = None
                points.append(figures.CurvePoint(at_seq, before, cum.get(at_seq, 0)))
                after = history_at(at_seq, active)
                points.append(figures.CurvePoint(at_seq, after, cum.get(at_seq, 0)))
                if change.to_status == SummaryStatus.ACTIVE:
                    activations.append(_pointer_change(at_seq, after, change))
            upcoming = next(pending, None)
        if seq in cum:
            points.append(figures.CurvePoint(seq, history_at(seq, active), cum[seq]))
    return History(points, activations, attempts, step)


@dataclass
class WorkflowReport:
    summaries: list[Summary]  # newest versions first, each with ``awaiting_approval``
    awaiting: list[Summary]  # those of them waiting for an approval
    lifecycle: list[LifecycleEvent]
    results: dict[str, int]  # activation/rollback attempts by result
    stale_attempts: int  # the stale_activation_attempts metric's rows of this workflow, all time
    traces: list[ConsumerTrace]
    artifacts: Sequence[Artifact]  # each with ``producers``
    jobs: list[CompactionJob]
    history: History
    watermark: int  # the active summary's covers_to_seq, 0 without one


def workflow_report(workflow: Workflow) -> WorkflowReport:
    lean = ("content",)
    summaries = list(workflow.summaries.defer(*lean).order_by("-version")[:RECENT_ROWS])
    waiting = set(
        lifecycle.awaiting_approval(workflow.tenant_id).filter(workflow=workflow).values_list("pk", flat=True)
    )
    for s in summaries:
        s.awaiting_approval = s.pk in waiting  # type: ignore[attr-defined]
    changes = list(
        workflow.lifecycle_events.select_related("summary", "prior_active_summary")
        .defer("summary__content", "prior_active_summary__content")
        .order_by("-at", "-id")[:RECENT_ROWS]
    )
    # By result, and the stale_activation_attempts metric's own rows among them (stale or refused),
    # so this page and the workflow list's column agree, in the same query.
    stale_rows = metrics.counted_rows("stale_activation_attempts")
    grouped = list(
        workflow.lifecycle_events.filter(action__in=["activate", "rollback"])
        .values("result")
        .annotate(n=Count("pk"), stale=Count("pk", filter=stale_rows.condition()))
        .order_by()
        .values_list("result", "n", "stale")
    )
    results = {result: n for result, n, _stale in grouped}
    traces = list(
        workflow.traces.select_related("summary")
        .defer("summary__content")
        .order_by("-at", "-id")[:RECENT_ROWS]
    )
    artifacts = list(
        Artifact.objects.filter(workflow=workflow)
        .annotate(producers=Count("produced_by"))
        .order_by("-at", "-id")[:RECENT_ROWS]
    )
    jobs = list(
        workflow.compaction_jobs.select_related("summary")
        .defer("summary__content")
        .order_by("-created_at", "-id")[:10]
    )
    return WorkflowReport(
        summaries=summaries,
        awaiting=[s for s in summaries if s.pk in waiting],
        lifecycle=changes,
        results={r: results.get(r, 0) for r in LifecycleResult.values},
        stale_attempts=sum(stale for _result, _n, stale in grouped),
        traces=traces,
        artifacts=artifacts,
        jobs=jobs,
        history=history(workflow),
        watermark=cast(Summary, workflow.active_summary).covers_to_seq if workflow.active_summary_id else 0,
    )


# --------------------------------------------------------------------------------------------
# Summary page
# --------------------------------------------------------------------------------------------


def find_summary(tenant: Tenant, summary_id: str) -> Summary | None:
    return (
        Summary.objects.filter(tenant=tenant, summary_id=summary_id)
        .select_related("workflow", "workflow__active_summary", "job", "purged_by")
        .defer("workflow__active_summary__content")
        .first()
    )


def awaiting_approval(summary: Summary) -> bool:
    return lifecycle.action_policy(summary, summary.workflow).awaiting_approval(summary)


@dataclass
class SummaryReport:
    content: dict[str, Any]  # empty once purged
    facts: list[dict[str, Any]]  # each with ``sources``: (seq, event or None, its event page)
    validations: list[ValidationRecord]  # newest first
    latest_validation: ValidationRecord | None
    checks: list[dict[str, Any]]  # the latest validation's, each with its ``state`` (core.checks)
    failed_checks: list[str]
    previous: Summary | None
    diff: dict[str, Any] | None  # against the previous version
    lifecycle: list[LifecycleEvent]
    traces: list[ConsumerTrace]
    trace_total: int
    policy: ActionPolicy  # the buttons: ``review_actions_for`` (lifecycle.allowed_actions) with it
    read_only: bool  # the role may take no review action at all
    admin_only: list[str]  # actions an admin could take now that this role may not
    status_label: str
    awaiting_approval: bool
    comments: list[SummaryComment]
    can_comment: bool
    opaque: framework.Opaque | None = None  # provider-encrypted content: its digest, shown once
    observed: framework.ObservedVersion | None = None  # a framework's compaction: who, which trigger


def summary_report(summary: Summary, role: str | None) -> SummaryReport:
    workflow = summary.workflow
    content = {} if summary.purged_by_id else summary_content(summary)
    validations = list(summary.validations.order_by("-created_at", "-id"))
    latest = validations[0] if validations else None
    policy = lifecycle.action_policy(summary, workflow, latest=latest)
    seqs = sorted(
        {s for f in content.get("facts", []) for s in f.get("source_seqs", []) if isinstance(s, int)}
    )
    sources = {
        e.seq: e
        for e in Event.objects.filter(workflow=workflow, seq__in=seqs[:500]).only(
            "seq", "kind", "agent", "content", "purged_at", "workflow_id"
        )
    }
    facts = [
        {
            **f,
            "sources": [(s, sources.get(s), page_of_seq(s)) for s in f.get("source_seqs", [])],
        }
        for f in content.get("facts", [])
    ]
    previous = workflow.summaries.filter(version__lt=summary.version).order_by("-version").first()
    changes = list(
        summary.lifecycle_events.select_related("prior_active_summary")
        .defer("prior_active_summary__content")
        .order_by("-at", "-id")[:100]
    )
    traces = list(summary.traces.order_by("-at", "-id")[:RECENT_ROWS])
    trace_total = summary.traces.count()
    diff = diff_summaries(previous, summary) if previous is not None else None
    mine = lifecycle.allowed_actions(summary, role, policy)
    comments = list(summary.comments.order_by("at", "id"))
    opaque = framework.opaque_of(content)
    checks = latest.checks_with_state() if latest else []
    if opaque is not None:
        checks = [
            dict(c, detail=framework.without_digest(str(c.get("detail") or ""), opaque)) for c in checks
        ]
    return SummaryReport(
        content=content,
        facts=facts,
        validations=validations,
        latest_validation=latest,
        checks=checks,
        failed_checks=list(policy.failed_checks),
        previous=previous,
        diff=diff,
        lifecycle=changes,
        traces=traces,
        trace_total=trace_total,
        policy=policy,
        read_only=not any(role_at_least(role, needed) for needed in lifecycle.ACTION_ROLES.values()),
        admin_only=[a for a in lifecycle.allowed_actions(summary, Role.ADMIN, policy) if a not in mine],
        status_label=lifecycle.status_label(summary, policy),
        awaiting_approval=policy.awaiting_approval(summary),
        comments=comments,
        can_comment=role_at_least(role, lifecycle.ACTION_ROLES["comment"]),
        opaque=opaque,
        observed=framework.observed_version(summary),
    )
