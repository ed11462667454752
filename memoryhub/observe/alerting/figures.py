"""Plotly figure builders for the alert pages (built in Python, drawn by Plotly.newPlot)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from memoryhub.models import AlertEvaluation, AlertRule
from memoryhub.observe.metrics import METRICS

STATE_COLORS = {"ok": "#15803d", "warning": "#b45309", "critical": "#b91c1c"}


def time_range(times: Sequence[datetime], at_least: timedelta) -> list[str] | None:
    """An x range spanning at least ``at_least`` and ending just after the last point: with one
    point (or a few close ones) Plotly would zoom to milliseconds and label 07:07:33.194/.1945/.195."""
    if not times:
        return None
    first, last = min(times), max(times)
    pad = max(at_least / 20, timedelta(seconds=1))
    start = min(first, last - at_least) - pad
    return [start.isoformat(), (last + pad).isoformat()]


def rule_history_figure(rule: AlertRule, evaluations: Sequence[AlertEvaluation]) -> dict[str, Any]:
    """The evaluated value over time against the warning and critical thresholds in force at
    each evaluation (step lines: a threshold edit shows where it changed)."""
    times = [e.at for e in evaluations]
    definition = METRICS.get(rule.metric)
    unit = definition.unit if definition else ""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=times,
            y=[e.value for e in evaluations],
            mode="lines+markers",
            name=f"{rule.metric} ({rule.aggregation}, {rule.window_minutes} min)",
            line={"color": "#1f2937", "width": 1.5},
            marker={"color": [STATE_COLORS.get(e.state, "#6b7280") for e in evaluations], "size": 6},
            customdata=[e.state for e in evaluations],
            hovertemplate="%{x}<br>value %{y}<br>state %{customdata}<extra></extra>",
            connectgaps=False,
        )
    )
    for label, attr, color in (
        ("warning", "warning_threshold", STATE_COLORS["warning"]),
        ("critical", "critical_threshold", STATE_COLORS["critical"]),
    ):
        values = [getattr(e, attr) for e in evaluations]
        if any(v is not None for v in values):
            fig.add_trace(
                go.Scatter(
                    x=times,
                    y=values,
                    mode="lines",
                    name=f"{label} threshold",
                    line={"color": color, "dash": "dash", "shape": "hv", "width": 1.5},
                    hovertemplate=f"{label} %{{y}}<extra></extra>",
                )
            )
    fig.update_layout(
        height=320,
        margin={"l": 56, "r": 16, "t": 24, "b": 40},
        xaxis={
            "title": {"text": "evaluated at (UTC)"},
            "range": time_range(times, timedelta(minutes=max(rule.window_minutes, 5))),
        },
        yaxis={"title": {"text": unit}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.2},
        hovermode="closest",
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
    )
    # A plain JSON-able dict (numpy arrays and datetimes already serialised by Plotly).
    return json.loads(fig.to_json())
