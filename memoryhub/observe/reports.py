"""What the overview, alert and trace pages show, computed from a tenant: plain functions
returning plain dataclasses (no request, no response, no template). Views parse a request, read
one of these and render it; charts are composed from them by memoryhub.web.views.charts.

The overview charts signals — each one row counter of the memoryhub.observe.metrics registry —
per bucket of a time window. Counts come from the MetricSample rollups (written by beat every 5 minutes)
wherever those cover a stretch completely; the gaps are counted live from the rows through the
metric's own ``Rows`` definition. Exact either way; the cost follows the gaps, not the tenant's
volume, and the number of queries does not grow with rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, cast

from django.db.models import Count, Exists, Max, Min, OuterRef, Prefetch, Q, QuerySet, Sum
from django.db.models.functions import Trunc

from audit.content import summary_unavailable
from audit.replay import replay_bundle
from audit.review import inbox_counts
from memoryhub.core.opaque import unreadable
from memoryhub.models import (
    AlertEvaluation,
    AlertEvent,
    AlertRule,
    Artifact,
    Channel,
    ConsumerTrace,
    Event,
    Notification,
    Summary,
    Tenant,
    Workflow,
    WorkflowSource,
)
from memoryhub.observe import metrics
from memoryhub.observe.alerting.firing import delivery_summary
from triggers.policy import over_budget_q, tenant_safe_budget

# --------------------------------------------------------------------------------------------
# Time windows
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    span: timedelta
    bucket: timedelta  # a whole multiple of the 5-minute metric rollup bucket
    trunc: str  # database truncation unit the bucket is a whole, UTC-aligned multiple of

    def starts(self, now: datetime) -> list[datetime]:
        """Bucket starts covering the window, oldest first (epoch-aligned, as metric rollups)."""
        size = int(self.bucket.total_seconds())
        last = datetime.fromtimestamp(int(now.timestamp()) // size * size, tz=UTC)
        return [last - self.bucket * i for i in range(math.ceil(self.span / self.bucket) - 1, -1, -1)]

    def since(self, now: datetime) -> datetime:
        """Where the window starts: its first bucket. Every figure over the window (the counts, the
        charts, the per-source table, the workflow list's drill-down) counts from here, so they
        count the same rows; up to one bucket later than ``now - span`` (the page says when)."""
        return self.starts(now)[0]


WINDOWS = {
    w.key: w
    for w in (
        Window("1h", "last hour", timedelta(hours=1), timedelta(minutes=5), "minute"),
        Window("24h", "last 24 hours", timedelta(hours=24), timedelta(hours=1), "hour"),
        Window("7d", "last 7 days", timedelta(days=7), timedelta(hours=6), "hour"),
        Window("30d", "last 30 days", timedelta(days=30), timedelta(days=1), "day"),
    )
}
DEFAULT_WINDOW = "7d"


def window_for(key: str | None) -> Window:
    """The window named ``key``; the default for anything else."""
    return WINDOWS.get(key or "", WINDOWS[DEFAULT_WINDOW])


# --------------------------------------------------------------------------------------------
# Signals: registry counters charted over a window and offered as workflow filters
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signal:
    """Something that happens to workflows over time: a row counter of memoryhub.observe.metrics,
    shown as a headline number and a chart on the overview, and a workflow-list filter
    (``?has=<key>``) its chart points drill down to."""

    key: str
    metric: str
    title: str
    short: str  # chart title ("Compactions per hour")
    unit: str  # what one counted row is, on the chart

    @property
    def rows(self) -> metrics.Rows:
        return metrics.counted_rows(self.metric)

    def exists_for_workflow(self, since: datetime | None, until: datetime | None) -> Exists:
        return Exists(self.rows.of_workflow(OuterRef("pk"), since, until))


SIGNALS = {
    s.key: s
    for s in (
        Signal(
            "stale", "stale_activation_attempts", "Stale activation attempts", "Stale activations", "attempts"
        ),
        Signal("failure", "validation_failures", "Validation failures", "Validation failures", "failures"),
        Signal("compaction", "compactions", "Compactions", "Compactions", "jobs"),
        Signal("overflow", "overflow_incidents", "Overflow incidents", "Overflow incidents", "incidents"),
        Signal(
            "unvalidated",
            "unvalidated_consumptions",
            "Consumers of unvalidated summaries",
            "Unvalidated-summary reads",
            "model calls",
        ),
    )
}
ACCEPTANCE_METRIC = "acceptance_rate"


# --------------------------------------------------------------------------------------------
# Rollup gaps: which stretches of a window the rollups cover, which to count live
# --------------------------------------------------------------------------------------------

# Past this many separate gaps in the rollups, one live count over the window is cheaper.
MAX_GAP_RANGES = 24

Rolled = dict[datetime, tuple[float, int, float]]  # unit start → (sum, samples, mean)
Ranges = list[tuple[datetime, datetime | None]]  # [start, end) stretches; None: open-ended


@dataclass(frozen=True)
class Slots:
    """The window cut into what the rollups can cover: whole truncation units (hour/day) up to the
    current one, then its 5-minute buckets up to the current bucket, which is always live."""

    window: Window
    since: datetime
    now: datetime

    @property
    def unit(self) -> timedelta:
        # A minute holds at most one 5-minute rollup: step by the rollup bucket there.
        return max(timedelta(seconds=metrics.UNIT_SECONDS[self.window.trunc]), metrics.ROLLUP_BUCKET)

    @cached_property  # read once per slot by covered()
    def unit_floor(self) -> datetime:
        return max(self.since, metrics.bucket_floor(self.now, self.unit))

    @cached_property
    def bucket_floor(self) -> datetime:
        return metrics.bucket_floor(self.now, metrics.ROLLUP_BUCKET)

    def covered(self, rolled: Rolled) -> dict[datetime, float]:
        """Slot start → counter total, for the slots the rollups cover completely."""
        need = metrics.unit_samples(self.window.trunc)
        return {
            start: total
            for start, (total, samples, _mean) in rolled.items()
            if samples >= (need if start < self.unit_floor else 1)
        }

    @cached_property
    def slots(self) -> list[datetime]:
        """Every slot start: whole units up to the current one, then its 5-minute buckets."""
        starts: list[datetime] = []
        for first, last, step in (
            (self.since, self.unit_floor, self.unit),
            (self.unit_floor, self.bucket_floor, metrics.ROLLUP_BUCKET),
        ):
            moment = first
            while moment < last:
                starts.append(moment)
                moment += step
        return starts

    def split(self, rolled: Rolled) -> tuple[dict[datetime, float], Ranges]:
        """(covered slot start → counter total, the stretches to count live). The stretches are
        merged; the last is open-ended (the current bucket on)."""
        covered = self.covered(rolled)
        ranges: Ranges = []
        start: datetime | None = None
        for slot in self.slots:
            if slot in covered:
                if start is not None:
                    ranges.append((start, slot))
                    start = None
            elif start is None:
                start = slot
        ranges.append((start if start is not None else self.bucket_floor, None))
        if len(ranges) > MAX_GAP_RANGES:  # one live count over the window is cheaper
            return {}, [(self.since, None)]
        return covered, ranges


def _in_ranges(field: str, ranges: Ranges) -> Q:
    q = Q()
    for start, end in ranges:
        part = Q(**{f"{field}__gte": start})
        if end is not None:
            part &= Q(**{f"{field}__lt": end})
        q |= part
    return q


def bins(window: Window, starts: list[datetime], rows: Any, width: int = 2) -> list[list[float]]:
    """Fold (time, *values) rows into the window's buckets (rows outside them are dropped)."""
    first, size = starts[0].timestamp(), window.bucket.total_seconds()
    folded: list[list[float]] = [[0] * width for _ in starts]
    for at, *values in rows:
        index = int((at.timestamp() - first) // size) if at is not None else -1
        if 0 <= index < len(folded):
            for i, value in enumerate(values):
                folded[index][i] += value
    return folded


def _live(rows: metrics.Rows, tenant: Tenant, window: Window, ranges: Ranges) -> QuerySet:
    """The rows in the live stretches, grouped by the window's truncation unit."""
    return (
        rows.of_tenant(tenant)
        .filter(_in_ranges(rows.time_field, ranges))
        .annotate(b=Trunc(rows.time_field, window.trunc, tzinfo=UTC))
        .values("b")
    )


def signal_counts(
    signal: Signal, tenant: Tenant, window: Window, starts: list[datetime], slots: Slots, rolled: Rolled
) -> list[int]:
    """The signal's count per bucket: rollups where they cover, the metric's rows elsewhere."""
    covered, ranges = slots.split(rolled)
    live = _live(signal.rows, tenant, window, ranges).annotate(n=Count("pk")).order_by().values_list("b", "n")
    return [int(b[0]) for b in bins(window, starts, [*live, *covered.items()], width=1)]


def rates(tallies: list[list[float]]) -> tuple[list[float | None], float | None]:
    """Per bucket and overall, part / total of ``[total, part]`` tallies (None where total is 0)."""
    total, part = sum(t[0] for t in tallies), sum(t[1] for t in tallies)
    return [metrics.ratio(p, t) for t, p in tallies], metrics.ratio(part, total)


def acceptance(
    tenant: Tenant,
    window: Window,
    starts: list[datetime],
    slots: Slots,
    compactions: Rolled,
    rolled_rates: Rolled,
) -> tuple[list[float | None], float | None]:
    """Share of finished compactions whose summary was accepted, per bucket and over the window.

    Where the rollups cover a unit, its mean rate counts with the unit's compactions as weight
    (a rollup keeps the rate, not its denominator); gaps are counted exactly from the jobs.
    """
    share = metrics.share(ACCEPTANCE_METRIC)
    covered, ranges = slots.split(compactions)  # a counter: written for every bucket rolled up
    live = (
        _live(share.rows, tenant, window, ranges)
        .annotate(**share.tallies())
        .order_by()
        .values_list("b", "total", "part")
    )
    weighted = []
    for start, weight in covered.items():
        if start in rolled_rates:
            weight = max(weight, 1.0)
            weighted.append((start, weight, rolled_rates[start][2] * weight))
    return rates(bins(window, starts, [*live, *weighted]))


# --------------------------------------------------------------------------------------------
# Overview
# --------------------------------------------------------------------------------------------

BAR_LIMIT = 12


@dataclass
class OverviewSeries:
    """The window's per-bucket counts and acceptance rates, read once per page."""

    starts: list[datetime]
    counts: dict[str, list[int]]
    acceptance: list[float | None]
    acceptance_total: float | None
    per_source: dict[str, dict[str, int]]  # the window's compactions per source and part


def overview_series(tenant: Tenant, window: Window, now: datetime) -> OverviewSeries:
    """Per-bucket counts for every signal and the acceptance rate over the window.

    Whole hours/days are added up from the rollups in the database, then the current hour/day by
    its 5-minute samples (two queries for all metrics); the rest — the current 5 minutes, a
    stretch when beat was down, a tenant never rolled up — is counted live (one query a metric).
    """
    starts = window.starts(now)
    slots = Slots(window, starts[0], now)
    names = [s.metric for s in SIGNALS.values()] + [ACCEPTANCE_METRIC] + metrics.source_metric_names()
    whole = metrics.rolled_up(tenant, names, slots.since, slots.unit_floor, window.trunc)
    recent = metrics.rolled_up(tenant, names, slots.unit_floor, slots.bucket_floor, "minute")
    rolled = {name: whole[name] | recent[name] for name in names}
    counts = {
        key: signal_counts(signal, tenant, window, starts, slots, rolled[signal.metric])
        for key, signal in SIGNALS.items()
    }
    per_bucket, _approx = acceptance(
        tenant, window, starts, slots, rolled[SIGNALS["compaction"].metric], rolled[ACCEPTANCE_METRIC]
    )
    # The headline rate is the metric itself over the window, not a mean of rolled-up rates: a
    # summary quarantined after its bucket was rolled up would leave that disagreeing with the
    # alert and the API. Its succeeded jobs are the compactions counted above; only the few jobs
    # not accepted are counted live.
    total = metrics.acceptance_given_succeeded(tenant, starts[0], now, sum(counts["compaction"]))
    return OverviewSeries(starts, counts, per_bucket, total, source_counts(tenant, slots, rolled))


def source_counts(tenant: Tenant, slots: Slots, rolled: dict[str, Rolled]) -> dict[str, dict[str, int]]:
    """The window's compactions per source and part (metrics.SOURCE_PARTS): the per-source rollups
    where they cover, one grouped count of the jobs elsewhere (the current 5 minutes at least)."""
    covered, ranges = slots.split(rolled[metrics.SOURCE_MARK])
    jobs = metrics.counted_rows(SIGNALS["compaction"].metric)
    counts = metrics.compactions_per_source(
        jobs.between(tenant, None, slots.now).filter(_in_ranges(jobs.time_field, ranges))
    )
    for source in WorkflowSource.values:
        for part in metrics.SOURCE_PARTS:
            samples = rolled[metrics.source_metric(source, part)]
            n = int(sum(total for start, (total, _n, _mean) in samples.items() if start in covered))
            if n:
                parts = counts.setdefault(source, dict.fromkeys(metrics.SOURCE_PARTS, 0))
                parts[part] += n
    return counts


@dataclass(frozen=True)
class SourceRow:
    source: str
    label: str
    workflows: int
    compactions: int
    observed: int
    needed_repair: int = 0  # observed compactions whose summary lost something (memoryhub.memory.repair)


@dataclass(frozen=True)
class WorkflowState:
    """The tenant's workflows right now, from their running totals, in one pass over them: the
    headline state, the WORKFLOW_GAUGES' current values and the workflows per source (three
    scans of a 10k-workflow tenant before, each as long as the others)."""

    state: dict[str, Any]
    gauges: dict[str, float | None]
    per_source: dict[str, int]


def workflow_state(tenant: Tenant, budget: int, now: datetime) -> WorkflowState:
    gauges = metrics.WORKFLOW_GAUGES
    sources = {f"source_{i}": value for i, value in enumerate(WorkflowSource.values)}
    found = Workflow.objects.filter(tenant=tenant).aggregate(
        workflows=Count("pk"),
        with_summary=Count("pk", filter=Q(active_summary__isnull=False)),
        max_tail_events=Max("tail_events"),
        tail_token_sum=Sum("tail_tokens"),
        oldest_activation=Min("activated_at", filter=Q(active_summary__isnull=False)),
        over_budget=Count("pk", filter=over_budget_q(budget)),
        **{f"gauge_{name}": aggregate for name, (aggregate, _value) in gauges.items()},
        **{key: Count("pk", filter=Q(source=value)) for key, value in sources.items()},
    )
    return WorkflowState(
        state={key: found[key] for key in STATE_KEYS},
        gauges={name: value(found[f"gauge_{name}"], now) for name, (_aggregate, value) in gauges.items()},
        per_source={value: found[key] for key, value in sources.items() if found[key]},
    )


STATE_KEYS = (
    "workflows",
    "with_summary",
    "max_tail_events",
    "tail_token_sum",
    "oldest_activation",
    "over_budget",
)


@dataclass
class OverviewNumbers:
    """Headline numbers: live state from running totals, and the window's counts."""

    state: dict[str, Any]
    review: dict[str, int]
    since: datetime  # where the window's counts start (Window.since)
    by_source: list[SourceRow]
    counts: dict[str, int]
    acceptance: float | None
    budget: int


def overview_numbers(
    tenant: Tenant,
    window: Window,
    now: datetime,
    budget: int,
    series: OverviewSeries | None = None,
    workflows: WorkflowState | None = None,
) -> OverviewNumbers:
    """The window's counts are the sums of the chart buckets (so a number always agrees with its
    chart); the review inbox's counts are audit.review's, in one statement."""
    series = series or overview_series(tenant, window, now)
    workflows = workflows or workflow_state(tenant, budget, now)
    return OverviewNumbers(
        state=workflows.state,
        review=inbox_counts(tenant.pk),
        since=series.starts[0],
        by_source=source_rows(workflows.per_source, series.per_source),
        counts={key: sum(counts) for key, counts in series.counts.items()},
        acceptance=series.acceptance_total,
        budget=budget,
    )


def source_rows(workflows: dict[str, int], per_source: dict[str, dict[str, int]]) -> list[SourceRow]:
    """Per workflow source: workflows (``WorkflowState.per_source``), and the window's
    compactions (observed ones apart, and of those the ones that needed repair). Sources with
    neither are left out.

    Observed compactions (performed by a framework or provider) are jobs keyed ``observed/…``
    (``memoryhub.memory.observed``); the rest ran in MemoryHub.
    """
    rows = []
    for value, label in WorkflowSource.choices:
        job = per_source.get(value, {})
        if workflows.get(value) or job:
            rows.append(
                SourceRow(
                    value,
                    label,
                    workflows.get(value, 0),
                    job.get("compactions", 0),
                    job.get("observed", 0),
                    job.get("needed_repair", 0),
                )
            )
    return rows


def gauge_series(
    tenant: Tenant,
    metric: str,
    window: Window,
    now: datetime,
    *,
    current: float | None | object = metrics.LIVE,
    scale: float = 1.0,
) -> tuple[list[datetime], list[float | None]]:
    """A gauge per bucket: the past from memoryhub.observe.metrics rollups, the current bucket
    ``current`` (its value now, when read already) or live. Buckets without a rollup are gaps, not zeros."""
    points = metrics.series(tenant, metric, window.since(now), window.bucket, now=now, current=current)
    return [p[0] for p in points], [None if p[1] is None else p[1] * scale for p in points]


def hours(delta: timedelta) -> float:
    return round(delta.total_seconds() / 3600, 2)


@dataclass(frozen=True)
class ActiveAge:
    external_id: str
    hours: float  # since activation
    tail_events: int
    head_seq: int


@dataclass(frozen=True)
class Tail:
    external_id: str
    tail_tokens: int
    tail_events: int
    summary_tokens: int


@dataclass
class OverviewCharts:
    """What the overview charts show: the window's series, gauges over time (x, y per metric)
    and, right now, the oldest active summaries and the largest tails."""

    series: OverviewSeries
    gauges: dict[str, tuple[list[datetime], list[float | None]]]
    oldest: list[ActiveAge]
    tails: list[Tail]


def overview_charts(
    tenant: Tenant,
    window: Window,
    now: datetime,
    series: OverviewSeries | None = None,
    workflows: WorkflowState | None = None,
) -> OverviewCharts:
    series = series or overview_series(tenant, window, now)
    now_values = (workflows or workflow_state(tenant, tenant_safe_budget(tenant), now)).gauges
    gauges = {
        name: gauge_series(
            tenant, name, window, now, current=value, scale=1 / 3600 if name.endswith("_seconds") else 1.0
        )
        for name, value in now_values.items()
    }
    aged = (
        Workflow.objects.filter(tenant=tenant, active_summary__isnull=False, activated_at__isnull=False)
        .order_by("activated_at", "id")
        .values_list("external_id", "activated_at", "tail_events", "head_seq")[:BAR_LIMIT]
    )
    oldest = [ActiveAge(wf, hours(now - cast(datetime, at)), tail, head) for wf, at, tail, head in aged]
    tails = [
        Tail(*row)
        for row in Workflow.objects.filter(tenant=tenant, tail_events__gt=0)
        .order_by("-tail_tokens", "-id")
        .values_list("external_id", "tail_tokens", "tail_events", "summary_tokens")[:BAR_LIMIT]
    ]
    return OverviewCharts(series, gauges, oldest, tails)


# --------------------------------------------------------------------------------------------
# Alert pages
# --------------------------------------------------------------------------------------------

MAX_CHART_POINTS = 2000
RECENT_FLIPS = 20


@dataclass
class AlertIndex:
    rules: QuerySet[AlertRule]
    channels: QuerySet[Channel]
    flips: list[AlertEvent]  # newest first, each with ``delivery``


def alert_index(tenant: Tenant) -> AlertIndex:
    rules = (
        AlertRule.objects.filter(tenant=tenant)
        .prefetch_related(Prefetch("channels", Channel.objects.order_by("name")))
        .order_by("name", "pk")
    )
    channels = Channel.objects.filter(tenant=tenant).order_by("name", "pk")
    flips = list(
        AlertEvent.objects.filter(tenant=tenant)
        .select_related("rule")
        .prefetch_related("notifications")
        .order_by("-at", "-id")[:RECENT_FLIPS]
    )
    for flip in flips:
        flip.delivery = delivery_summary(flip)  # type: ignore[attr-defined]  # for the template only
    return AlertIndex(rules, channels, flips)


@dataclass
class RuleHistory:
    evaluations: list[AlertEvaluation]  # oldest first, the newest MAX_CHART_POINTS
    flips: list[AlertEvent]  # newest first, each with ``delivery``


def rule_history(rule: AlertRule, since: datetime) -> RuleHistory:
    # Newest points if there are more than the chart can show; drawn oldest first.
    evaluations = list(rule.evaluations.filter(at__gte=since).order_by("-at", "-id")[:MAX_CHART_POINTS])
    flips = list(
        rule.events.order_by("-at", "-id").prefetch_related(
            Prefetch("notifications", Notification.objects.select_related("channel"))
        )[:RECENT_FLIPS]
    )
    for flip in flips:
        flip.delivery = delivery_summary(flip)  # type: ignore[attr-defined]  # for the template only
    return RuleHistory(evaluations[::-1], flips)


def channel_notifications(channel: Channel) -> QuerySet[Notification]:
    return channel.notifications.select_related("alert_event__rule").order_by("-at", "-id")[:RECENT_FLIPS]


# --------------------------------------------------------------------------------------------
# Trace and artifact lists, trace page
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceFilters:
    """What both lists narrow by. Times bound ``at``: at or after ``window_start`` and ``since``,
    before ``until``; agent and flag match a trace (an artifact: any trace that produced it)."""

    agent: str = ""
    flag: str = ""
    workflow: str = ""  # external_id
    window_start: datetime | None = None
    since: datetime | None = None
    until: datetime | None = None

    def time_range(self, field: str) -> Q:
        q = Q()
        for lookup, value in (("gte", self.window_start), ("gte", self.since), ("lt", self.until)):
            if value is not None:
                q &= Q(**{f"{field}__{lookup}": value})
        return q


def filtered_traces(tenant: Tenant, filters: TraceFilters) -> QuerySet[ConsumerTrace]:
    qs = ConsumerTrace.objects.filter(tenant=tenant).filter(filters.time_range("at"))
    if filters.agent:
        qs = qs.filter(agent=filters.agent)
    if filters.flag:
        qs = qs.filter(metrics.has_flag(filters.flag))
    if filters.workflow:
        qs = qs.filter(workflow__external_id=filters.workflow)
    return qs.select_related("workflow", "summary").defer("summary__content").order_by("-at", "-id")


def filtered_artifacts(tenant: Tenant, filters: TraceFilters) -> QuerySet[Artifact]:
    """Artifacts by when they were published; agent and flag match any of the traces that produced them."""
    qs = Artifact.objects.filter(tenant=tenant).filter(filters.time_range("at"))
    producers = Q()
    if filters.agent:
        producers &= Q(produced_by__agent=filters.agent)
    if filters.flag:
        producers &= metrics.has_flag(filters.flag, "produced_by__")
    if producers:
        qs = qs.filter(pk__in=Artifact.objects.filter(tenant=tenant).filter(producers).values("pk"))
    if filters.workflow:
        qs = qs.filter(workflow__external_id=filters.workflow)
    traces = ConsumerTrace.objects.only("id", "agent", "model_call_id", "flags").order_by("at", "id")
    return (
        qs.select_related("workflow")
        .prefetch_related(Prefetch("produced_by", queryset=traces))
        .order_by("-at", "-id")
    )


def trace_agents(tenant: Tenant) -> list[str]:
    """The agents that made the tenant's model calls (the lists' agent filter), at most 200."""
    return list(
        ConsumerTrace.objects.filter(tenant=tenant)
        .values_list("agent", flat=True)
        .distinct()
        .order_by("agent")[:200]
    )


# Tail events shown on a trace page; the rest are one link away on the event range page.
TRACE_TAIL_SHOWN = 100


@dataclass
class ServedSummary:
    """The summary a call was served, as the trace page shows it: its narrative when readable,
    else why not (purged, opaque, no narrative)."""

    summary: Summary
    narrative: str
    unavailable: str


@dataclass
class TraceReport:
    """A model call: what it read (summary up to ``watermark``, then the tail from ``tail_from``),
    what it produced, and its replay bundle."""

    watermark: int
    tail_from: int
    artifacts: list[Artifact]
    bundle: dict[str, Any]
    served_summary: ServedSummary | None
    tail: list[Event]  # the first TRACE_TAIL_SHOWN served tail events, in seq order
    tail_count: int  # every event of the served tail (seq tail_from..tail_to_seq)
    messages: list[ShownMessage] | None  # None: the integration recorded none


@dataclass
class ShownMessage:
    """One recorded message: who spoke, what it said, and whatever else it carried (tool calls,
    ids) kept apart so each is shown once."""

    role: str
    name: str
    content: Any
    extra: dict[str, Any]


def shown_messages(messages: list[dict[str, Any]] | None) -> list[ShownMessage] | None:
    if messages is None:
        return None
    return [
        ShownMessage(
            role=str(m.get("role", "")),
            name=str(m.get("name") or ""),
            content=m.get("content"),
            extra={k: v for k, v in m.items() if k not in ("role", "name", "content")},
        )
        for m in messages
        if isinstance(m, dict)
    ]


def summary_as_served(summary: Summary) -> ServedSummary:
    purged = summary_unavailable(summary)
    if purged:
        return ServedSummary(summary, "", purged)
    try:
        content = json.loads(summary.content)
    except ValueError:
        return ServedSummary(summary, "", "its content is not JSON")
    opaque = unreadable(content)
    if opaque:
        return ServedSummary(summary, "", opaque)
    narrative = content.get("narrative") if isinstance(content, dict) else None
    if not isinstance(narrative, str) or not narrative.strip():
        return ServedSummary(summary, "", "no narrative: facts and open items only")
    return ServedSummary(summary, narrative, "")


def trace_report(trace: ConsumerTrace) -> TraceReport:
    summary = trace.summary
    watermark = summary.covers_to_seq if summary is not None else trace.summary_watermark
    bundle = replay_bundle(trace)
    tail = Event.objects.filter(workflow=trace.workflow, seq__gt=watermark, seq__lte=trace.tail_to_seq)
    return TraceReport(
        watermark,
        watermark + 1,
        list(trace.artifacts.order_by("at", "id")),
        bundle,
        summary_as_served(summary) if summary is not None else None,
        list(tail.select_related("purge").order_by("seq")[:TRACE_TAIL_SHOWN]),
        max(trace.tail_to_seq - watermark, 0),
        shown_messages(trace.input_messages),
    )
