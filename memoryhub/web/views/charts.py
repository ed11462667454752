"""Chart composition for the dashboard pages: reports (memoryhub.observe) in, Plotly figures
(memoryhub.observe.figures) out, with the drill-down URLs each point opens. No queries here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.urls import reverse
from django.utils.http import urlencode

from memoryhub.observe import figures
from memoryhub.observe.detail import History
from memoryhub.observe.framework import FrameworkCompaction
from memoryhub.observe.reports import SIGNALS, OverviewCharts, OverviewSeries, Signal, Window
from triggers.engine import PolicySpec

SIGNAL_COLORS = {
    "stale": figures.WARN,
    "failure": figures.BAD,
    "compaction": figures.OK,
    "overflow": figures.BAD,
    "unvalidated": figures.PURPLE,
}


def list_url(**params: Any) -> str:
    return f"{reverse('memoryhub:workflow-list')}?{urlencode(params, doseq=True)}"


def _drill_url(key: str, start: datetime, window: Window) -> str:
    return list_url(has=key, since=start.isoformat(), until=(start + window.bucket).isoformat())


def _bucket_label(window: Window) -> str:
    minutes = int(window.bucket.total_seconds() // 60)
    if minutes < 60:
        return f"{minutes} min"
    if minutes < 1440:
        return "hour" if minutes == 60 else f"{minutes // 60} h"
    return "day"


def overview_figures(
    data: OverviewCharts, window: Window, now: datetime, budget: int
) -> list[dict[str, Any]]:
    """Every overview chart as {key, title, figure, points, json}; every point drills down."""
    series = data.series
    span = (window.since(now), now)  # the counts' window: charts and numbers start together
    per = _bucket_label(window)
    charts: list[tuple[str, str, figures.Figure]] = []

    # Gauges over time: how far behind the active summaries were, and the largest tail.
    age_url, behind_url, tokens_url = (
        list_url(status="active", sort="age"),
        list_url(sort="tail_events"),
        list_url(sort="tail_tokens"),
    )
    hx, age_hours = data.gauges["active_summary_age_seconds"]
    ex, events = data.gauges["active_summary_age_events"]
    charts.append(
        (
            "age",
            "Active-summary age",
            figures.time_series(
                "Active-summary age (oldest)",
                [
                    figures.Series(
                        "hours since activation", hx, age_hours, [age_url] * len(hx), "hours", kind="line"
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
    tx, tokens = data.gauges["tail_tokens"]
    vx, tail_events = data.gauges["tail_events"]
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
    bars = [
        figures.Bar(
            w.external_id,
            w.hours,
            reverse(detail, args=[w.external_id]),
            f"{w.hours:,} h since activation<br>{w.tail_events:,} events behind head {w.head_seq:,}",
        )
        for w in data.oldest
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
    bars = [
        figures.Bar(
            t.external_id,
            t.tail_tokens,
            reverse(detail, args=[t.external_id]),
            f"{t.tail_tokens:,} tail tokens, {t.tail_events:,} events behind head<br>"
            f"+ {t.summary_tokens:,} summary tokens",
        )
        for t in data.tails
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
                    SIGNAL_COLORS[signal.key],
                )
            ],
            span=span,
            empty_text=f"None in the {window.label}",
        ),
    )


def summary_url(summary_id: str) -> str:
    return reverse("memoryhub:summary-detail", args=[summary_id])


def history_figure(
    history: History, spec: PolicySpec, compacted_by: FrameworkCompaction | None = None
) -> figures.Figure:
    """The workflow's history-token curve with its budget lines and pointer changes marked. A
    workflow a framework compacts gets no MemoryHub policy lines (they are not what compacts it);
    the framework's threshold, when it reported one, is its own count of tokens, so it is not
    drawn on this axis either (the threshold table shows it)."""
    lines: list[figures.Line] = []
    if compacted_by is None:
        same = spec.trigger_tokens == spec.safe_budget
        lines.append(
            figures.Line(spec.safe_budget, "safe budget = trigger" if same else "safe budget", figures.WARN)
        )
        if not same:
            lines.append(figures.Line(spec.trigger_tokens, "trigger", figures.PURPLE, "dot"))
        lines.append(figures.Line(spec.target_tokens, "target", figures.OK, "dashdot"))
        lines.append(figures.Line(spec.hard_limit, "hard limit", figures.BAD, "solid"))
    activations = [
        figures.Marker(
            c.seq,
            c.tokens,
            f"S{c.version} {c.action} (watermark {c.watermark})",
            summary_url(c.summary_id),
        )
        for c in history.activations
    ]
    attempts = [
        figures.Marker(
            c.seq,
            c.tokens,
            f"S{c.version} {c.action} {c.result} (observed revision {c.observed_revision})",
            summary_url(c.summary_id),
        )
        for c in history.attempts
    ]
    return figures.history_curve(
        history.points,
        activations=activations,
        attempts=attempts,
        lines=lines,
        sampled_every=history.sampled_every,
    )
