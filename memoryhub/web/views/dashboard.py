"""Dashboard pages: tenant overview with charts, workflow browser, workflow page, summary page.

Views stay thin: they read running totals and bounded, indexed queries, build Plotly figures with
``memoryhub.observe.figures`` and render templates. Every page has fragment endpoints that
static/memoryhub/app.js polls (slower when the tab is hidden) so numbers refresh without a reload.
Query counts do not grow with rows: lists are bounded, per-row numbers come from annotations, and
the event timeline and history curve read events by seq ranges (seqs are gapless) — never OFFSET.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any, cast

from django import forms
from django.contrib.auth.decorators import login_required
from django.db import connection
from django.db.models import Count, Exists, F, Max, Min, Model, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce, Trunc
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.urls import path, reverse
from django.utils import timezone
from django.utils.http import urlencode

from audit.diff import diff_summaries
from audit.review import available_actions as allowed
from audit.review import inbox_counts
from memoryhub.memory import lifecycle as lifecycle_rules
from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.memory.summaries import summary_content
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    Event,
    JobStatus,
    LifecycleEvent,
    LifecycleResult,
    Summary,
    SummaryStatus,
    TraceFlag,
    ValidationRecord,
    Workflow,
    WorkflowSource,
    role_at_least,
)
from memoryhub.models.workflows import EventKind
from memoryhub.observe import figures, metrics
from memoryhub.observe.alerting.firing import firing
from memoryhub.web.api.fields import SafeDateTimeField
from memoryhub.web.views.base import page_tenant, page_workflow
from triggers.models import TriggerDecision
from triggers.policy import effective_policy

# --------------------------------------------------------------------------------------------
# Time windows, and the signals charted over them (definitions shared with memoryhub.observe.metrics)
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


def _has_flag(flag: str) -> Q:
    """JSON-list membership (as memoryhub.observe.metrics: jsonb containment, or a quoted substring on SQLite)."""
    if connection.vendor == "postgresql":
        return Q(flags__contains=[flag])
    return Q(flags__icontains=f'"{flag}"')


@dataclass(frozen=True)
class Signal:
    """Something that happens to workflows over time: a memoryhub.observe.metrics counter on the overview
    and a workflow-list filter (``?has=<key>``) that its chart points drill down to."""

    key: str
    title: str
    metric: str
    unit: str
    model: type[Model]
    time_field: str
    workflow_path: str
    condition: Callable[[], Q]
    color: str = figures.ACCENT

    tenant_path: str = "tenant"
    short: str = ""  # chart title ("Compactions per hour")

    def rows(self, tenant: Any) -> QuerySet:
        return self.model.objects.filter(**{self.tenant_path: tenant}).filter(self.condition())  # type: ignore[attr-defined]

    def exists_for_workflow(self, since: datetime | None, until: datetime | None) -> Exists:
        qs = self.model.objects.filter(**{self.workflow_path: OuterRef("pk")}).filter(self.condition())  # type: ignore[attr-defined]
        if since is not None:
            qs = qs.filter(**{f"{self.time_field}__gte": since})
        if until is not None:
            qs = qs.filter(**{f"{self.time_field}__lt": until})
        return Exists(qs)


SIGNALS = {
    s.key: s
    for s in (
        Signal(
            "stale",
            "Stale activation attempts",
            "stale_activation_attempts",
            "attempts",
            LifecycleEvent,
            "at",
            "workflow",
            lambda: Q(
                result__in=[LifecycleResult.STALE, LifecycleResult.REFUSED],
                action__in=["activate", "rollback"],
            ),
            figures.WARN,
            short="Stale activations",
        ),
        Signal(
            "failure",
            "Validation failures",
            "validation_failures",
            "failures",
            ValidationRecord,
            "created_at",
            "summary__workflow",
            lambda: Q(passed=False),
            figures.BAD,
            tenant_path="summary__tenant",
            short="Validation failures",
        ),
        Signal(
            "compaction",
            "Compactions",
            "compactions",
            "jobs",
            CompactionJob,
            "finished_at",
            "workflow",
            lambda: Q(status=JobStatus.SUCCEEDED),
            figures.OK,
            short="Compactions",
        ),
        Signal(
            "overflow",
            "Overflow incidents",
            "overflow_incidents",
            "incidents",
            TriggerDecision,
            "at",
            "workflow",
            lambda: Q(hard_limit__gt=0, projected_tokens__gt=F("hard_limit")),
            figures.BAD,
            short="Overflow incidents",
        ),
        Signal(
            "unvalidated",
            "Consumers of unvalidated summaries",
            "unvalidated_consumptions",
            "model calls",
            ConsumerTrace,
            "at",
            "workflow",
            # Non-empty flags first: that matches the partial index memoryhub_trace_flagged.
            lambda: ~Q(flags=[]) & _has_flag(TraceFlag.UNVALIDATED_SUMMARY),
            figures.PURPLE,
            short="Unvalidated-summary reads",
        ),
    )
}
HAS_CHOICES = [(s.key, s.title) for s in SIGNALS.values()]
VALIDATED_STATES = (SummaryStatus.VALIDATED, SummaryStatus.ACTIVE, SummaryStatus.SUPERSEDED)


def window_from(request: HttpRequest) -> Window:
    return WINDOWS.get(request.GET.get("window", ""), WINDOWS[DEFAULT_WINDOW])


def _list_url(**params: Any) -> str:
    return f"{reverse('memoryhub:workflow-list')}?{urlencode(params, doseq=True)}"


def _drill_url(key: str, start: datetime, window: Window) -> str:
    return _list_url(has=key, since=start.isoformat(), until=(start + window.bucket).isoformat())


def tenant_safe_budget(tenant: Any) -> int:
    return effective_policy(tenant)[0].safe_budget


# --------------------------------------------------------------------------------------------
# Overview
# --------------------------------------------------------------------------------------------

BAR_LIMIT = 12


def overview_numbers(
    tenant: Any, window: Window, now: datetime, budget: int, series: OverviewSeries | None = None
) -> dict[str, Any]:
    """Headline numbers: live state from running totals; the window's counts are the sums of the
    chart buckets (so a number always agrees with its chart)."""
    series = series or overview_series(tenant, window, now)
    state = Workflow.objects.filter(tenant=tenant).aggregate(
        workflows=Count("pk"),
        with_summary=Count("pk", filter=Q(active_summary__isnull=False)),
        max_tail_events=Max("tail_events"),
        tail_token_sum=Sum("tail_tokens"),
        oldest_activation=Min("activated_at", filter=Q(active_summary__isnull=False)),
        over_budget=Count("pk", filter=Q(tail_tokens__gt=budget - F("summary_tokens"))),
    )
    # The review inbox's counts in one statement (audit.review owns what waits for a reviewer).

    review = inbox_counts(tenant.pk)
    return {
        "state": state,
        "review": review,
        "by_source": compactions_by_source(tenant, now - window.span, now),
        "counts": {key: sum(counts) for key, counts in series.counts.items()},
        "acceptance": series.acceptance_total,
        "budget": budget,
    }


def compactions_by_source(tenant: Any, since: datetime, until: datetime) -> list[dict[str, Any]]:
    """Per workflow source: workflows, and compactions finished in the window (observed ones apart).

    Observed compactions (performed by a framework or provider) are jobs keyed ``observed/…``
    (``memoryhub.memory.observed``); the rest ran in MemoryHub. Sources with neither are left out.
    """
    workflows = dict(
        Workflow.objects.filter(tenant=tenant)
        .values("source")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("source", "n")
    )
    jobs = {
        row["workflow__source"]: row
        for row in CompactionJob.objects.filter(
            tenant=tenant, status=JobStatus.SUCCEEDED, finished_at__gte=since, finished_at__lt=until
        )
        .values("workflow__source")
        .annotate(n=Count("pk"), observed=Count("pk", filter=Q(idempotency_key__startswith="observed/")))
        .order_by()
    }
    rows = []
    for value, label in WorkflowSource.choices:
        job = jobs.get(value, {})
        if workflows.get(value) or job:
            rows.append(
                {
                    "source": value,
                    "label": label,
                    "workflows": workflows.get(value, 0),
                    "compactions": job.get("n", 0),
                    "observed": job.get("observed", 0),
                }
            )
    return rows


# Past this many separate gaps in the rollups, one live count over the window is cheaper.
MAX_GAP_RANGES = 24


def _in_ranges(field: str, ranges: list[tuple[datetime, datetime | None]]) -> Q:
    q = Q()
    for start, end in ranges:
        part = Q(**{f"{field}__gte": start})
        if end is not None:
            part &= Q(**{f"{field}__lt": end})
        q |= part
    return q


def _bins(window: Window, starts: list[datetime], rows: Any, width: int = 2) -> list[list[float]]:
    """Fold (time, *values) rows into the window's buckets."""
    first, size = starts[0].timestamp(), window.bucket.total_seconds()
    bins: list[list[float]] = [[0] * width for _ in starts]
    for at, *values in rows:
        index = int((at.timestamp() - first) // size) if at is not None else -1
        if 0 <= index < len(bins):
            for i, value in enumerate(values):
                bins[index][i] += value
    return bins


@dataclass
class OverviewSeries:
    """The window's per-bucket counts and acceptance rates, read once per page."""

    starts: list[datetime]
    counts: dict[str, list[int]]
    acceptance: list[float | None]
    acceptance_total: float | None


def overview_series(tenant: Any, window: Window, now: datetime) -> OverviewSeries:
    """Per-bucket counts for every signal and the acceptance rate over the window.

    Whatever the MetricSample rollups (written by beat every 5 minutes) cover is read from them:
    whole hours/days added up in the database, then the current hour/day by its 5-minute
    samples (two queries for all metrics). The rest — the current 5 minutes, a stretch when beat
    was down, a tenant never rolled up — is counted live from the rows through the same
    definitions memoryhub.observe.metrics uses. Exact either way; the cost follows the gaps, not the
    tenant's volume.
    """
    starts = window.starts(now)
    slots = _Slots(window, starts[0], now)
    names = [s.metric for s in SIGNALS.values()] + ["acceptance_rate"]
    whole = metrics.rolled_up(tenant, names, slots.since, slots.unit_floor, window.trunc)
    recent = metrics.rolled_up(tenant, names, slots.unit_floor, slots.bucket_floor, "minute")
    rolled = {name: whole[name] | recent[name] for name in names}
    counts = {
        key: [int(b[0]) for b in _signal_bins(signal, tenant, window, starts, slots, rolled[signal.metric])]
        for key, signal in SIGNALS.items()
    }
    acceptance, total = _acceptance(
        tenant, window, starts, slots, rolled["compactions"], rolled["acceptance_rate"]
    )
    return OverviewSeries(starts, counts, acceptance, total)


@dataclass(frozen=True)
class _Slots:
    """The window cut into what the rollups can cover: whole truncation units (hour/day) up to the
    current one, then its 5-minute buckets up to the current bucket, which is always live."""

    window: Window
    since: datetime
    now: datetime

    @property
    def unit(self) -> timedelta:
        # A minute holds at most one 5-minute rollup: step by the rollup bucket there.
        return max(timedelta(seconds=metrics.UNIT_SECONDS[self.window.trunc]), metrics.ROLLUP_BUCKET)

    @property
    def unit_floor(self) -> datetime:
        return max(self.since, metrics.bucket_floor(self.now, self.unit))

    @property
    def bucket_floor(self) -> datetime:
        return metrics.bucket_floor(self.now, metrics.ROLLUP_BUCKET)

    def covered(self, rolled: dict[datetime, tuple[float, int, float]]) -> dict[datetime, float]:
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

    def split(
        self, rolled: dict[datetime, tuple[float, int, float]]
    ) -> tuple[dict[datetime, float], list[tuple[datetime, datetime | None]]]:
        """(covered slot start → counter total, the stretches to count live). The stretches are
        merged; the last is open-ended (the current bucket on)."""
        covered = self.covered(rolled)
        ranges: list[tuple[datetime, datetime | None]] = []
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


def _signal_bins(
    signal: Signal,
    tenant: Any,
    window: Window,
    starts: list[datetime],
    slots: _Slots,
    rolled: dict[datetime, tuple[float, int, float]],
) -> list[list[float]]:
    covered, ranges = slots.split(rolled)
    live = (
        signal.rows(tenant)
        .filter(_in_ranges(signal.time_field, ranges))
        .annotate(b=Trunc(signal.time_field, window.trunc, tzinfo=UTC))
        .values("b")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("b", "n")
    )
    return _bins(window, starts, [*live, *covered.items()], width=1)


def _acceptance(
    tenant: Any,
    window: Window,
    starts: list[datetime],
    slots: _Slots,
    compactions: dict[datetime, tuple[float, int, float]],
    rates: dict[datetime, tuple[float, int, float]],
) -> tuple[list[float | None], float | None]:
    """Share of finished compactions whose summary was accepted, per bucket and over the window.

    Where the rollups cover a unit, its mean rate counts with the unit's compactions as weight
    (a rollup keeps the rate, not its denominator); gaps are counted exactly from the jobs.
    """
    covered, ranges = slots.split(compactions)  # a counter: written for every bucket rolled up
    live = (
        CompactionJob.objects.filter(tenant=tenant, status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED])
        .filter(_in_ranges("finished_at", ranges))
        .annotate(b=Trunc("finished_at", window.trunc, tzinfo=UTC))
        .values("b")
        .annotate(total=Count("pk"), ok=Count("pk", filter=Q(summary__status__in=VALIDATED_STATES)))
        .order_by()
        .values_list("b", "total", "ok")
    )
    weighted = []
    for start, weight in covered.items():
        if start in rates:
            weight = max(weight, 1.0)
            weighted.append((start, weight, rates[start][2] * weight))
    bins = _bins(window, starts, [*live, *weighted])
    per_bucket = [(ok / total) if total else None for total, ok in bins]
    total, ok = sum(b[0] for b in bins), sum(b[1] for b in bins)
    return per_bucket, (ok / total) if total else None


def gauge_series(
    tenant: Any, metric: str, window: Window, now: datetime, *, scale: float = 1.0
) -> tuple[list[datetime], list[float | None]]:
    """A gauge per bucket: the past from memoryhub.observe.metrics rollups (beat writes them every 5
    minutes), the current bucket live. Buckets without a rollup are gaps, not zeros."""
    points = metrics.series(tenant, metric, now - window.span, window.bucket, now=now)
    return [p[0] for p in points], [None if p[1] is None else p[1] * scale for p in points]


def _hours(delta: timedelta) -> float:
    return round(delta.total_seconds() / 3600, 2)


def overview_charts(
    tenant: Any, window: Window, now: datetime, budget: int, series: OverviewSeries | None = None
) -> list[dict[str, Any]]:
    """Every overview chart as {key, title, figure, points, json}; every point drills down."""
    series = series or overview_series(tenant, window, now)
    span = (now - window.span, now)
    per = _bucket_label(window)
    charts: list[tuple[str, str, figures.Figure]] = []

    # Gauges over time: how far behind the active summaries were, and the largest tail.
    age_url, behind_url, tokens_url = (
        _list_url(status="active", sort="age"),
        _list_url(sort="tail_events"),
        _list_url(sort="tail_tokens"),
    )
    hx, hours = gauge_series(tenant, "active_summary_age_seconds", window, now, scale=1 / 3600)
    ex, events = gauge_series(tenant, "active_summary_age_events", window, now)
    charts.append(
        (
            "age",
            "Active-summary age",
            figures.time_series(
                "Active-summary age (oldest)",
                [
                    figures.Series(
                        "hours since activation", hx, hours, [age_url] * len(hx), "hours", kind="line"
                    ),
                    figures.Series(
                        "events behind head",
                        ex,
                        events,
                        [behind_url] * len(ex),
                        "events",
                        figures.PURPLE,
                        kind="line",
                        secondary=True,
                    ),
                ],
                span=span,
                empty_text="No active summary yet",
            ),
        )
    )
    tx, tokens = gauge_series(tenant, "tail_tokens", window, now)
    vx, tail_events = gauge_series(tenant, "tail_events", window, now)
    charts.append(
        (
            "tail",
            "Unconsumed tail",
            figures.time_series(
                "Unconsumed tail (largest)",
                [
                    figures.Series(
                        "tail tokens", tx, tokens, [tokens_url] * len(tx), "tokens", figures.WARN, kind="line"
                    ),
                    figures.Series(
                        "tail events",
                        vx,
                        tail_events,
                        [behind_url] * len(vx),
                        "events",
                        figures.PURPLE,
                        kind="line",
                        secondary=True,
                    ),
                ],
                lines=[figures.Line(budget, "safe budget", figures.BAD)],
                span=span,
                empty_text="No uncompacted tail",
            ),
        )
    )

    # Right now, per workflow (a bar opens the workflow).
    detail = "memoryhub:workflow-detail"
    aged = (
        Workflow.objects.filter(tenant=tenant, active_summary__isnull=False, activated_at__isnull=False)
        .order_by("activated_at", "id")
        .values("external_id", "activated_at", "tail_events", "head_seq")[:BAR_LIMIT]
    )
    bars = [
        figures.Bar(
            w["external_id"],
            _hours(now - cast(datetime, w["activated_at"])),
            reverse(detail, args=[w["external_id"]]),
            f"{_hours(now - cast(datetime, w['activated_at'])):,} h since activation<br>"
            f"{w['tail_events']:,} events behind head {w['head_seq']:,}",
        )
        for w in aged
    ]
    charts.append(
        (
            "age_now",
            "Oldest active summaries",
            figures.workflow_bars(
                "Oldest active summaries now",
                bars,
                unit="hours",
                empty_text="No workflow has an active summary",
            ),
        )
    )
    tails = (
        Workflow.objects.filter(tenant=tenant, tail_events__gt=0)
        .order_by("-tail_tokens", "-id")
        .values("external_id", "tail_events", "tail_tokens", "summary_tokens")[:BAR_LIMIT]
    )
    bars = [
        figures.Bar(
            w["external_id"],
            w["tail_tokens"],
            reverse(detail, args=[w["external_id"]]),
            f"{w['tail_tokens']:,} tail tokens, {w['tail_events']:,} events behind head<br>"
            f"+ {w['summary_tokens']:,} summary tokens",
        )
        for w in tails
    ]
    charts.append(
        (
            "tail_now",
            "Largest tails",
            figures.workflow_bars(
                "Largest unconsumed tails now",
                bars,
                unit="tokens",
                color=figures.WARN,
                lines=[figures.Line(budget, "safe budget")],
                empty_text="No uncompacted tail",
            ),
        )
    )

    # Counts per bucket (a bucket opens the workflows it counted).
    for key in ("stale", "failure", "compaction"):
        charts.append(_signal_chart(SIGNALS[key], series, window, span, per))
    rx, rates = series.starts, series.acceptance
    charts.append(
        (
            "acceptance",
            "Acceptance rate",
            figures.time_series(
                "Acceptance rate of compactions",
                [
                    figures.Series(
                        "accepted",
                        rx,
                        rates,
                        [_drill_url("compaction", s, window) for s in rx],
                        "%",
                        figures.OK,
                        kind="line",
                    )
                ],
                percent=True,
                span=span,
                empty_text=f"No finished compactions in the {window.label}",
            ),
        )
    )
    for key in ("overflow", "unvalidated"):
        charts.append(_signal_chart(SIGNALS[key], series, window, span, per))
    return [
        {
            "key": key,
            "title": title,
            "figure": fig,
            "points": figures.point_count(fig),
            "json": figures.to_json(fig),
        }
        for key, title, fig in charts
    ]


def _signal_chart(
    signal: Signal, series: OverviewSeries, window: Window, span: tuple[datetime, datetime], per: str
) -> tuple[str, str, figures.Figure]:
    starts, counts = series.starts, series.counts[signal.key]
    return (
        signal.key,
        signal.title,
        figures.time_series(
            f"{signal.short} per {per}",
            [
                figures.Series(
                    signal.title,
                    starts,
                    counts,
                    [_drill_url(signal.key, s, window) for s in starts],
                    signal.unit,
                    signal.color,
                )
            ],
            span=span,
            empty_text=f"None in the {window.label}",
        ),
    )


def _bucket_label(window: Window) -> str:
    minutes = int(window.bucket.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 1440:
        return "hour" if minutes == 60 else f"{minutes // 60} h"
    return "day"


def _overview_context(request: HttpRequest) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    return {
        "tenant": tenant,
        "window": window_from(request),
        "windows": list(WINDOWS.values()),
        "now": timezone.now(),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    budget = tenant_safe_budget(ctx["tenant"])
    series = overview_series(ctx["tenant"], ctx["window"], ctx["now"])
    ctx.update(overview_numbers(ctx["tenant"], ctx["window"], ctx["now"], budget, series))
    ctx["charts"] = overview_charts(ctx["tenant"], ctx["window"], ctx["now"], budget, series)
    ctx["firing"] = firing(ctx["tenant"], ctx["now"])
    ctx["needs_plotly"] = True
    return render(request, "memoryhub/overview.html", ctx)


@login_required
def overview_numbers_fragment(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    ctx.update(overview_numbers(ctx["tenant"], ctx["window"], ctx["now"], tenant_safe_budget(ctx["tenant"])))
    return render(request, "memoryhub/partials/overview_numbers.html", ctx)


@login_required
def overview_charts_fragment(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    ctx["charts"] = overview_charts(
        ctx["tenant"], ctx["window"], ctx["now"], tenant_safe_budget(ctx["tenant"])
    )
    return render(request, "memoryhub/partials/overview_charts.html", ctx)


# --------------------------------------------------------------------------------------------
# Workflow browser (keyset pagination: the cursor is the last row's sort key and id)
# --------------------------------------------------------------------------------------------

WORKFLOWS_PER_PAGE = 25


@dataclass(frozen=True)
class Sort:
    field: str
    label: str
    descending: bool = True
    datetime: bool = False


SORTS = {
    "recent": Sort("updated_at", "Recently updated", datetime=True),
    "tail_tokens": Sort("tail_tokens", "Tail tokens"),
    "tail_events": Sort("tail_events", "Events behind head"),
    "head": Sort("head_seq", "Longest history"),
    # Oldest activation first; only workflows that have an active summary.
    "age": Sort("activated_at", "Oldest active summary", descending=False, datetime=True),
}
STATUS_CHOICES = [
    ("", "Any"),
    ("active", "Has an active summary"),
    ("none", "No active summary"),
    *[(s.value, f"Has a {s.value} summary") for s in SummaryStatus if s != SummaryStatus.ACTIVE],
]


class WorkflowFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES, label="Summary status")
    source = forms.ChoiceField(required=False, choices=[("", "Any"), *WorkflowSource.choices], label="Source")
    min_tail_events = forms.IntegerField(required=False, min_value=0, label="Tail ≥ events")
    min_tail_tokens = forms.IntegerField(required=False, min_value=0, label="Tail ≥ tokens")
    has = forms.MultipleChoiceField(required=False, choices=HAS_CHOICES, label="With")
    window = forms.ChoiceField(
        required=False, choices=[("", "any time")] + [(w.key, w.label) for w in WINDOWS.values()], label="In"
    )
    since = SafeDateTimeField(required=False)
    until = SafeDateTimeField(required=False)
    sort = forms.ChoiceField(required=False, choices=[(k, v.label) for k, v in SORTS.items()])


def _encode_cursor(value: Any, pk: int, page: int, direction: str) -> str:
    raw = json.dumps([value.isoformat() if isinstance(value, datetime) else value, pk, page, direction])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(token: str, sort: Sort) -> tuple[Any, int, int, str] | None:
    """(sort value, id, page number, direction) from a cursor, or None if it is not one of ours."""
    try:
        value, pk, page, direction = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        value = datetime.fromisoformat(value) if sort.datetime else value
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        return None
    if (
        not isinstance(value, datetime if sort.datetime else int)
        or not isinstance(pk, int)
        or not isinstance(page, int)
        or direction not in ("next", "prev")
    ):
        return None
    return value, pk, max(page, 1), direction


def filtered_workflows(tenant: Any, data: dict[str, Any], now: datetime) -> QuerySet[Workflow]:
    """The tenant's workflows narrowed by the (validated) filter form data."""
    qs = Workflow.objects.filter(tenant=tenant)
    if q := (data.get("q") or "").strip():
        qs = qs.filter(Q(external_id__icontains=q) | Q(name__icontains=q))
    if data.get("source"):
        qs = qs.filter(source=data["source"])
    status = data.get("status")
    if status == "active":
        qs = qs.filter(active_summary__isnull=False)
    elif status == "none":
        qs = qs.filter(active_summary__isnull=True)
    elif status:
        qs = qs.filter(Exists(Summary.objects.filter(workflow=OuterRef("pk"), status=status)))
    if data.get("min_tail_events") is not None:
        qs = qs.filter(tail_events__gte=data["min_tail_events"])
    if data.get("min_tail_tokens") is not None:
        qs = qs.filter(tail_tokens__gte=data["min_tail_tokens"])
    since, until = data.get("since"), data.get("until")
    if data.get("window") and since is None:
        since = now - WINDOWS[data["window"]].span
    for key in data.get("has") or ():
        qs = qs.filter(SIGNALS[key].exists_for_workflow(since, until))
    if data.get("sort") == "age":
        qs = qs.filter(active_summary__isnull=False, activated_at__isnull=False)
    return qs


def _count_of(qs: QuerySet) -> Coalesce:
    return Coalesce(Subquery(qs.order_by().values("workflow").annotate(c=Count("pk")).values("c")[:1]), 0)


def annotate_rows(qs: QuerySet[Workflow]) -> QuerySet[Workflow]:
    """Per-row numbers for the list, as correlated subqueries (one query for the whole page)."""
    latest = Summary.objects.filter(workflow=OuterRef("pk")).order_by("-version")
    return (
        qs.select_related("active_summary")
        .defer("active_summary__content")
        .annotate(
            stale_attempts=_count_of(
                LifecycleEvent.objects.filter(workflow=OuterRef("pk")).filter(SIGNALS["stale"].condition())
            ),
            unvalidated_reads=_count_of(
                ConsumerTrace.objects.filter(workflow=OuterRef("pk")).filter(
                    SIGNALS["unvalidated"].condition()
                )
            ),
            latest_version=Subquery(latest.values("version")[:1]),
            latest_status=Subquery(latest.values("status")[:1]),
        )
    )


@dataclass
class WorkflowPage:
    rows: list[Workflow]
    number: int
    num_pages: int
    total: int
    next_cursor: str | None
    prev_cursor: str | None


def _keyset(
    qs: QuerySet[Workflow], sort: Sort, after: tuple[Any, int] | None, forward: bool
) -> list[Workflow]:
    """Up to one page + 1 rows past ``after`` (sort value, id), in display order."""
    f = sort.field
    downwards = sort.descending == forward  # walking towards smaller sort values
    if after is not None:
        value, pk = after
        op = "lt" if downwards else "gt"
        qs = qs.filter(Q(**{f"{f}__{op}": value}) | Q(**{f: value, f"id__{op}": pk}))
    order = (f"-{f}", "-id") if downwards else (f, "id")
    rows = list(annotate_rows(qs).order_by(*order)[: WORKFLOWS_PER_PAGE + 1])
    mark_awaiting_approval(rows)
    return rows if forward else rows[:WORKFLOWS_PER_PAGE][::-1] + rows[WORKFLOWS_PER_PAGE:]


def mark_awaiting_approval(workflows: list[Workflow]) -> None:
    """Set ``awaiting_versions`` (the versions waiting for an approval) on each row, in one query."""
    if not workflows:
        return
    waiting: dict[int, list[int]] = {}
    rows = (
        lifecycle_rules.awaiting_approval(workflows[0].tenant_id)
        .filter(workflow_id__in=[w.pk for w in workflows])
        .order_by("version")
        .values_list("workflow_id", "version")
    )
    for workflow_id, version in rows:
        waiting.setdefault(workflow_id, []).append(version)
    for wf in workflows:
        wf.awaiting_versions = waiting.get(wf.pk, [])  # type: ignore[attr-defined]


def workflow_page(qs: QuerySet[Workflow], sort_key: str, cursor: str | None) -> WorkflowPage:
    """One page by keyset on (sort key, id) — never OFFSET; two queries whatever the page."""
    sort = SORTS[sort_key]
    total = qs.count()
    decoded = _decode_cursor(cursor, sort) if cursor else None
    if decoded is None:
        page_no, forward = 1, True
        rows = _keyset(qs, sort, None, True)
    else:
        value, pk, page_no, direction = decoded
        forward = direction == "next"
        rows = _keyset(qs, sort, (value, pk), forward)
    more = len(rows) > WORKFLOWS_PER_PAGE  # another page beyond, in the direction walked
    rows = rows[:WORKFLOWS_PER_PAGE]
    num_pages = max(1, math.ceil(total / WORKFLOWS_PER_PAGE))
    has_next = more if forward else bool(rows)
    has_prev = (page_no > 1) if forward else more
    page_no = page_no if forward or more else 1  # walked back to the start
    next_cursor = prev_cursor = None
    if rows and has_next:
        last = rows[-1]
        next_cursor = _encode_cursor(getattr(last, sort.field), last.pk, page_no + 1, "next")
    if rows and has_prev:
        first = rows[0]
        prev_cursor = _encode_cursor(getattr(first, sort.field), first.pk, page_no - 1, "prev")
    return WorkflowPage(rows, page_no, max(num_pages, page_no), total, next_cursor, prev_cursor)


def _query_without(request: HttpRequest, *drop: str, **extra: str) -> str:
    params = request.GET.copy()
    for key in (*drop, *extra):
        params.pop(key, None)
    for key, value in extra.items():
        params[key] = value
    return params.urlencode()


def _workflow_list_context(request: HttpRequest) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    form = WorkflowFilterForm(request.GET or None)
    data: dict[str, Any] = {}
    if form.is_bound:
        form.is_valid()  # invalid fields drop out of cleaned_data; the page shows their errors
        data = form.cleaned_data
    sort = data.get("sort") or "recent"
    now = timezone.now()
    page = workflow_page(filtered_workflows(tenant, data, now), sort, request.GET.get("cursor"))
    filtered = any(data.get(k) not in (None, "", []) for k in data if k not in ("sort",))
    return {
        "form": form,
        "page": page,
        "sort": sort,
        "sorts": [(k, v.label) for k, v in SORTS.items()],
        "filtered": filtered,
        "q": data.get("q", ""),
        "next_query": _query_without(request, "fragment", cursor=page.next_cursor)
        if page.next_cursor
        else "",
        "prev_query": _query_without(request, "fragment", cursor=page.prev_cursor)
        if page.prev_cursor
        else "",
        "fragment_query": _query_without(request, fragment="table"),
        "drill": {
            "since": data.get("since"),
            "until": data.get("until"),
            "has": data.get("has") or [],
            "titles": [SIGNALS[k].title.lower() for k in data.get("has") or []],
        },
    }


@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    ctx = _workflow_list_context(request)
    if request.GET.get("fragment") == "table":
        return render(request, "memoryhub/partials/workflow_table.html", ctx)
    return render(request, "memoryhub/workflow_list.html", ctx)


# --------------------------------------------------------------------------------------------
# Workflow page
# --------------------------------------------------------------------------------------------

CURVE_POINTS = 240  # at most this many sampled seqs (plus activation points) on the history curve
RECENT_ROWS = 50
POINTER_EVENTS = 200  # activations considered for the curve's saw-tooth


def _summary_url(summary_id: str) -> str:
    return reverse("memoryhub:summary-detail", args=[summary_id])


def _change_positions(changes: list[LifecycleEvent], head: int) -> list[int]:
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


def history_curve(workflow: Workflow, spec: Any) -> dict[str, Any]:
    """The history-token curve from sampled cum_tokens (two queries, bounded rows).

    History tokens at seq s = tokens of the summary active then + cum(s) − cum(its watermark).
    The pointer timeline comes from applied lifecycle events that set or cleared ACTIVE.
    """
    head = workflow.head_seq
    same = spec.trigger_tokens == spec.safe_budget
    lines = [figures.Line(spec.safe_budget, "safe budget = trigger" if same else "safe budget", figures.WARN)]
    if not same:
        lines.append(figures.Line(spec.trigger_tokens, "trigger", figures.PURPLE, "dot"))
    lines.append(figures.Line(spec.target_tokens, "target", figures.OK, "dashdot"))
    lines.append(figures.Line(spec.hard_limit, "hard limit", figures.BAD, "solid"))
    if head == 0:
        return figures.history_curve([], lines=lines)

    changes = list(
        LifecycleEvent.objects.filter(workflow=workflow)
        .filter(
            Q(result=LifecycleResult.APPLIED, to_status=SummaryStatus.ACTIVE)
            | (Q(result=LifecycleResult.APPLIED, from_status=SummaryStatus.ACTIVE) & ~Q(action="supersede"))
            | Q(
                result__in=[LifecycleResult.STALE, LifecycleResult.REFUSED],
                action__in=["activate", "rollback"],
            )
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
    timeline = list(zip(_change_positions(changes, head), changes, strict=True))
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
    activations: list[figures.Marker] = []
    attempts: list[figures.Marker] = []
    active: Summary | None = None
    pending = iter(timeline)
    upcoming = next(pending, None)
    for seq in sorted(wanted):
        # Apply every pointer change that happened at or before this seq: a vertical drop.
        while upcoming is not None and upcoming[0] <= seq:
            at_seq, change = upcoming
            if change.result != LifecycleResult.APPLIED:
                attempts.append(
                    figures.Marker(
                        at_seq,
                        history_at(at_seq, active),
                        f"S{change.summary.version} {change.action} {change.result}"
                        f" (observed revision {change.observed_revision})",
                        _summary_url(change.summary.summary_id),
                    )
                )
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
                    activations.append(
                        figures.Marker(
                            at_seq,
                            after,
                            f"S{change.summary.version} {change.action} (watermark {change.summary.covers_to_seq})",
                            _summary_url(change.summary.summary_id),
                        )
                    )
            upcoming = next(pending, None)
        if seq in cum:
            points.append(figures.CurvePoint(seq, history_at(seq, active), cum[seq]))
    return figures.history_curve(
        points, activations=activations, attempts=attempts, lines=lines, sampled_every=step
    )


def event_page(workflow: Workflow, page_no: int) -> dict[str, Any]:
    """Events of page ``page_no`` as a seq range (seqs are gapless, so no OFFSET and no COUNT)."""
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
    return {
        "events": events,
        "number": page_no,
        "num_pages": num_pages,
        "first_seq": lo,
        "last_seq": events[-1].seq if events else lo,
        "has_previous": page_no > 1,
        "has_next": page_no < num_pages,
        "previous": page_no - 1,
        "next": page_no + 1,
    }


def _int(raw: str | None, default: int) -> int:
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        return default


def workflow_numbers(workflow: Workflow, spec: Any) -> dict[str, Any]:
    history = workflow.history_tokens
    return {
        "history": history,
        "budget_share": (history / spec.safe_budget) if spec.safe_budget else 0,
        "over_budget": history > spec.safe_budget,
        "age": (timezone.now() - workflow.activated_at)
        if workflow.activated_at and workflow.active_summary_id
        else None,
    }


@login_required
def workflow_detail(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    spec, policy_source, _ = effective_policy(workflow.tenant_id, workflow)
    if request.GET.get("fragment") == "stats":
        return render(
            request,
            "memoryhub/partials/workflow_stats.html",
            {"workflow": workflow, "spec": spec, **workflow_numbers(workflow, spec)},
        )
    page_no = _int(request.GET.get("page"), 1)
    if seq := _int(request.GET.get("seq"), 0):
        page_no = (seq - 1) // EVENTS_PER_PAGE + 1
    lean = ("content",)
    summaries = list(workflow.summaries.defer(*lean).order_by("-version")[:RECENT_ROWS])
    waiting = set(
        lifecycle_rules.awaiting_approval(workflow.tenant_id)
        .filter(workflow=workflow)
        .values_list("pk", flat=True)
    )
    for s in summaries:
        s.awaiting_approval = s.pk in waiting  # type: ignore[attr-defined]
    lifecycle = list(
        workflow.lifecycle_events.select_related("summary", "prior_active_summary")
        .defer("summary__content", "prior_active_summary__content")
        .order_by("-at", "-id")[:RECENT_ROWS]
    )
    results = dict(
        workflow.lifecycle_events.filter(action__in=["activate", "rollback"])
        .values("result")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("result", "n")
    )
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
    curve = history_curve(workflow, spec)
    return render(
        request,
        "memoryhub/workflow_detail.html",
        {
            "workflow": workflow,
            "spec": spec,
            "policy_source": policy_source,
            **workflow_numbers(workflow, spec),
            "needs_plotly": True,
            "curve_json": figures.to_json(curve),
            "curve_points": figures.point_count(curve),
            "summaries": summaries,
            "awaiting": [s for s in summaries if s.pk in waiting],
            "lifecycle": lifecycle,
            "results": {r: results.get(r, 0) for r in LifecycleResult.values},
            "traces": traces,
            "artifacts": artifacts,
            "jobs": jobs,
            "page": event_page(workflow, page_no),
            "event_kinds": EventKind.values,
            "watermark": cast(Summary, workflow.active_summary).covers_to_seq
            if workflow.active_summary_id
            else 0,
        },
    )


# --------------------------------------------------------------------------------------------
# Summary page and review actions
# --------------------------------------------------------------------------------------------

DIFF_TEMPLATE = "audit/partials/diff.html"


def available_actions(summary: Summary, role: str | None, policy: Any) -> list[dict[str, Any]]:
    """Review buttons for this role, status and policy (``lifecycle.allowed_actions`` decides,
    through audit.review which adds labels). Each posts a reason (and the revision seen, or the
    checks waived) to audit's ``memoryhub:summary-action`` view."""

    return [
        {
            "action": spec.name,
            "label": spec.label,
            "help": spec.help,
            "style": "danger" if spec.danger else "primary",
            "needs_revision": spec.needs_revision,
            "needs_checks": spec.needs_checks,
            "url": reverse("memoryhub:summary-action", args=[summary.summary_id, spec.name]),
        }
        for spec in allowed(summary, role, policy=policy)
    ]


def _summary_content(summary: Summary) -> dict[str, Any]:
    if summary.purged_by_id:
        return {}
    return summary_content(summary)


def _diff(previous: Summary | None, summary: Summary) -> Any:
    if previous is None:
        return None
    return diff_summaries(previous, summary)


def _diff_template() -> str | None:
    """audit's diff partial when it is installed (helper of the audit area)."""
    try:
        get_template(DIFF_TEMPLATE)
    except TemplateDoesNotExist:
        return None
    return DIFF_TEMPLATE


def _summary_for(request: HttpRequest, summary_id: str) -> tuple[Summary, str | None]:
    tenant, role = page_tenant(request)
    summary = (
        Summary.objects.filter(tenant=tenant, summary_id=summary_id)
        .select_related("workflow", "workflow__active_summary", "job", "purged_by")
        .defer("workflow__active_summary__content")
        .first()
    )
    if summary is None:
        raise Http404("No such summary in this tenant.")
    return summary, role


@login_required
def summary_detail(request: HttpRequest, summary_id: str) -> HttpResponse:
    summary, role = _summary_for(request, summary_id)
    workflow = summary.workflow
    if request.GET.get("fragment") == "status":
        awaiting = lifecycle_rules.action_policy(summary, workflow).awaiting_approval(summary)
        return render(
            request,
            "memoryhub/partials/summary_status.html",
            {"summary": summary, "workflow": workflow, "awaiting_approval": awaiting},
        )
    content = _summary_content(summary)
    validations = list(summary.validations.order_by("-created_at", "-id"))
    latest = validations[0] if validations else None
    policy = lifecycle_rules.action_policy(summary, workflow, latest=latest)
    failed = list(policy.failed_checks)
    checks = [
        {**c, "waived": bool(c.get("name")) and not c.get("passed") and c.get("name") not in failed}
        for c in ((latest.checks or []) if latest else [])
        if isinstance(c, dict)
    ]
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
            "sources": [
                (s, sources.get(s), (s - 1) // EVENTS_PER_PAGE + 1) for s in f.get("source_seqs", [])
            ],
        }
        for f in content.get("facts", [])
    ]
    previous = workflow.summaries.filter(version__lt=summary.version).order_by("-version").first()
    lifecycle = list(
        summary.lifecycle_events.select_related("prior_active_summary")
        .defer("prior_active_summary__content")
        .order_by("-at", "-id")[:100]
    )
    traces = list(summary.traces.order_by("-at", "-id")[:RECENT_ROWS])
    trace_total = summary.traces.count()
    diff = _diff(previous, summary)
    actions = available_actions(summary, role, policy)
    comments = list(summary.comments.order_by("at", "id"))
    return render(
        request,
        "memoryhub/summary_detail.html",
        {
            "summary": summary,
            "workflow": workflow,
            "content": content,
            "facts": facts,
            "validations": validations,
            "latest_validation": latest,
            "checks": checks,
            "failed_checks": failed,
            "previous": previous,
            "diff": diff,
            "lifecycle": lifecycle,
            "traces": traces,
            "trace_total": trace_total,
            "actions": actions,
            "policy": policy,
            "status_label": lifecycle_rules.status_label(summary, policy),
            "awaiting_approval": policy.awaiting_approval(summary),
            "comments": comments,
            "can_comment": role_at_least(role, lifecycle_rules.ACTION_ROLES["comment"]),
            "diff_template": _diff_template() if diff is not None else None,
            "role": role,
            "events_per_page": EVENTS_PER_PAGE,
        },
    )


urlpatterns = [
    path("overview/", overview, name="overview"),
    path("overview/numbers/", overview_numbers_fragment, name="overview-numbers"),
    path("overview/charts/", overview_charts_fragment, name="overview-charts"),
    path("workflows/", workflow_list, name="workflow-list"),
    path("workflows/<str:wf>/", workflow_detail, name="workflow-detail"),
    path("summaries/<str:summary_id>/", summary_detail, name="summary-detail"),
]
