"""Plotly figure builders for the dashboard (the one place figures are made).

Each builder takes plain numbers and returns a Plotly figure as a dict (``{"data", "layout"}``)
that the page hands to ``Plotly.newPlot``. Plain dicts keep rendering cheap; the tests run every
figure through ``plotly.graph_objects.Figure`` so a misspelt attribute still fails loudly.

Drill-down: a point's ``customdata`` is the URL it leads to (static/memoryhub/app.js follows it on
click), so every bar and bucket opens the workflows behind it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Figure = dict[str, Any]

# The CSS palette (static/memoryhub/app.css), so charts and badges agree.
ACCENT = "#2f5bd3"
OK = "#1f8a4c"
WARN = "#b7791f"
BAD = "#c53030"
MUTED = "#6b7385"
PURPLE = "#6b46c1"
GRID = "#e2e5ea"

HEIGHT = 270


@dataclass(frozen=True)
class Line:
    """A horizontal reference line (budget, trigger, target)."""

    value: float
    label: str
    color: str = BAD
    dash: str = "dash"


@dataclass(frozen=True)
class Bar:
    """One bar of a per-workflow chart; ``url`` is where a click goes."""

    label: str
    value: float
    url: str
    hover: str = ""


def _layout(title: str, *, y_title: str = "", x_title: str = "", **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        "height": HEIGHT,
        "margin": {"l": 56, "r": 16, "t": 40, "b": 48},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "font": {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 11, "color": "#1d2330"},
        "xaxis": {"title": {"text": x_title}, "gridcolor": GRID, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "gridcolor": GRID, "rangemode": "tozero", "zeroline": False},
        "hovermode": "closest",
        "showlegend": False,
        "bargap": 0.25,
    }
    layout.update(extra)
    return layout


def _empty_note(text: str) -> dict[str, Any]:
    return {
        "text": text,
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": 0.5,
        "font": {"size": 12, "color": MUTED},
    }


def _reference_lines(lines: Sequence[Line]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    shapes, notes = [], []
    for line in lines:
        shapes.append(
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "yref": "y",
                "y0": line.value,
                "y1": line.value,
                "line": {"color": line.color, "width": 1.5, "dash": line.dash},
            }
        )
        notes.append(
            {
                "text": f"{line.label} {line.value:,.0f}",
                "showarrow": False,
                "xref": "paper",
                "x": 1,
                "xanchor": "right",
                "yref": "y",
                "y": line.value,
                "yanchor": "bottom",
                "font": {"size": 10, "color": line.color},
            }
        )
    return shapes, notes


@dataclass(frozen=True)
class Series:
    """One trace of a time chart: values per bucket start, each with its drill-down URL."""

    name: str
    starts: Sequence[datetime]
    values: Sequence[float | None]
    urls: Sequence[str]
    unit: str = ""
    color: str = ACCENT
    kind: str = "bar"  # bar (counts) | line (gauges, rates)
    secondary: bool = False  # drawn against a right-hand axis


def _series_trace(series: Series, percent: bool) -> dict[str, Any]:
    x = [s.isoformat() for s in series.starts]
    scale = 100 if percent else 1
    y = [None if v is None else round(v * scale, 2) for v in series.values]
    unit = "%" if percent else f" {series.unit}"
    hover = "%{x|%Y-%m-%d %H:%M}<br>%{y:,}" + unit + "<br><i>click for the workflows</i><extra>" + series.name
    trace: dict[str, Any] = {
        "name": series.name,
        "x": x,
        "y": y,
        "customdata": list(series.urls),
        "hovertemplate": hover + "</extra>",
    }
    if series.kind == "bar":
        trace.update(type="bar", marker={"color": series.color})
    else:
        trace.update(
            type="scatter",
            mode="lines+markers",
            line={"color": series.color, "width": 2},
            marker={"size": 6},
            connectgaps=False,
        )
    if series.secondary:
        trace["yaxis"] = "y2"
    return trace


def time_series(
    title: str,
    series: Sequence[Series],
    *,
    percent: bool = False,
    lines: Sequence[Line] = (),
    span: tuple[datetime, datetime] | None = None,
    empty_text: str = "Nothing in this window",
) -> Figure:
    """Values per time bucket (bars for counts, lines for gauges and rates); a click drills down.

    A second series can use a right-hand axis (e.g. hours and events of the same gauge).
    """
    data = [_series_trace(s, percent) for s in series]
    primary = next((s for s in series if not s.secondary), None)
    layout = _layout(title, y_title="%" if percent else (primary.unit if primary else ""))
    layout["xaxis"]["type"] = "date"
    if span is not None:
        layout["xaxis"]["range"] = [span[0].isoformat(), span[1].isoformat()]
    if percent:
        layout["yaxis"].update(range=[0, 105], rangemode="normal", ticksuffix="%")
    counts = [v for s in series if s.kind == "bar" and not s.secondary for v in s.values if v is not None]
    if counts and all(float(v).is_integer() for v in counts) and max(counts) <= 5:
        layout["yaxis"]["dtick"] = 1  # small counts: whole ticks, not 0.2 steps
    second = next((s for s in series if s.secondary), None)
    if second is not None:
        layout["yaxis2"] = {
            "title": {"text": second.unit, "font": {"color": second.color}},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "showgrid": False,
            "tickfont": {"color": second.color},
        }
        layout["margin"]["r"] = 56
    if len(series) > 1:
        layout["showlegend"] = True
        # Legend between the title and the plot, where tick labels cannot push it out of view.
        layout["legend"] = {"orientation": "h", "y": 1.0, "x": 0, "yanchor": "bottom", "font": {"size": 10}}
        layout["margin"]["t"] = 62
        layout["title"]["y"] = 0.97
        layout["title"]["yanchor"] = "top"
    shapes, notes = _reference_lines(lines)
    layout["shapes"] = shapes
    layout["annotations"] = notes
    if not any(v for s in series for v in s.values):
        layout["annotations"].append(_empty_note(empty_text))
    return {"data": data, "layout": layout}


TICK_CHARS = 18


def short_label(label: str, limit: int = TICK_CHARS) -> str:
    """``label`` cut to ``limit`` characters with an ellipsis (axis ticks; hover has the full text)."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def workflow_bars(
    title: str,
    bars: Sequence[Bar],
    *,
    unit: str = "",
    color: str = ACCENT,
    lines: Sequence[Line] = (),
    empty_text: str = "No workflows to show",
) -> Figure:
    """One bar per workflow (biggest first); a click opens that workflow's page."""
    trace: dict[str, Any] = {
        "type": "bar",
        "name": title,
        "x": [b.label for b in bars],
        "y": [b.value for b in bars],
        "customdata": [b.url for b in bars],
        "text": [b.hover or f"{b.value:,.0f} {unit}" for b in bars],
        "textposition": "none",
        "hovertemplate": "<b>%{x}</b><br>%{text}<br><i>click to open</i><extra></extra>",
        "marker": {"color": color},
    }
    if len(bars) < 4:
        trace["width"] = 0.45  # a lone bar should not fill the whole chart
    layout = _layout(title, y_title=unit)
    layout["xaxis"]["type"] = "category"
    layout["xaxis"]["tickangle"] = -30
    layout["xaxis"]["automargin"] = True
    # Real thread ids run past 100 characters: the axis shows a short label (the bar keeps the
    # full id as its category, shown on hover), so a long id cannot squash the plot.
    layout["xaxis"]["tickmode"] = "array"
    layout["xaxis"]["tickvals"] = [b.label for b in bars]
    layout["xaxis"]["ticktext"] = [short_label(b.label) for b in bars]
    shapes, notes = _reference_lines(lines)
    layout["shapes"] = shapes
    layout["annotations"] = notes + ([] if bars else [_empty_note(empty_text)])
    return {"data": [trace], "layout": layout}


@dataclass(frozen=True)
class CurvePoint:
    seq: int
    history_tokens: int  # what the model reads: active summary + tail
    raw_tokens: int  # the whole history, had nothing been compacted


@dataclass(frozen=True)
class Marker:
    """A point of interest on the history curve (an activation, a stale attempt)."""

    seq: int
    tokens: int
    label: str
    url: str


def history_curve(
    points: Sequence[CurvePoint],
    *,
    activations: Sequence[Marker] = (),
    attempts: Sequence[Marker] = (),
    lines: Sequence[Line] = (),
    sampled_every: int = 1,
) -> Figure:
    """History tokens against seq: a saw-tooth that drops at each activation, with budget lines.

    ``points`` are sampled (every k-th seq plus the activation points), never every event.
    """
    seqs = [p.seq for p in points]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "without compaction",
            "x": seqs,
            "y": [p.raw_tokens for p in points],
            "line": {"color": MUTED, "width": 1, "dash": "dot"},
            "hovertemplate": "seq %{x}<br>%{y:,} tokens without compaction<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "history tokens (summary + tail)",
            "x": seqs,
            "y": [p.history_tokens for p in points],
            "line": {"color": ACCENT, "width": 2},
            "fill": "tozeroy",
            "fillcolor": "rgba(47,91,211,0.08)",
            "hovertemplate": "seq %{x}<br>%{y:,} history tokens<extra></extra>",
        },
    ]
    if activations:
        data.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "name": "activations",
                "x": [m.seq for m in activations],
                "y": [m.tokens for m in activations],
                "text": [m.label.split(" ", 1)[0] for m in activations],
                "hovertext": [m.label for m in activations],
                "textposition": "top center",
                "customdata": [m.url for m in activations],
                "marker": {"color": OK, "size": 10, "symbol": "diamond"},
                "hovertemplate": "%{hovertext}<br>seq %{x}, %{y:,} tokens after<extra></extra>",
            }
        )
    if attempts:
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "stale / refused attempts",
                "x": [m.seq for m in attempts],
                "y": [m.tokens for m in attempts],
                "hovertext": [m.label for m in attempts],
                "customdata": [m.url for m in attempts],
                "marker": {"color": WARN, "size": 10, "symbol": "x"},
                "hovertemplate": "%{hovertext}<br>seq %{x}<extra></extra>",
            }
        )
    sampled = f" (every {sampled_every} events)" if sampled_every > 1 else ""
    layout = _layout("History tokens by event" + sampled, y_title="tokens", x_title="event seq")
    layout["height"] = 320
    layout["showlegend"] = True
    layout["legend"] = {"orientation": "h", "y": -0.25, "x": 0}
    layout["margin"]["b"] = 70
    shapes, notes = _reference_lines(lines)
    layout["shapes"] = shapes
    layout["annotations"] = notes + ([] if points else [_empty_note("No events yet")])
    return {"data": data, "layout": layout}


def to_json(figure: Figure) -> str:
    """JSON for a ``data-figure`` attribute (escaped by the template)."""
    return json.dumps(figure, separators=(",", ":"), default=str)


def point_count(figure: Figure) -> int:
    """How many points the figure's traces carry (a chart with 0 points shows its empty state)."""
    return sum(len(trace.get("x") or ()) for trace in figure.get("data", ()))


# The decay chart's palette: one colour per salient class (and facts), stable across pages.
DECAY_COLORS = {
    "facts": ACCENT,
    "identifiers": PURPLE,
    "paths": OK,
    "urls": "#2b8a9e",
    "numbers": WARN,
    "status_codes": BAD,
    "commands": MUTED,
}


def decay_curve(
    versions: Sequence[int], curve: dict[str, Sequence[float | None]], labels: dict[str, str]
) -> Figure:
    """Summary-of-summary decay: the share of S1's salient content each later version still
    holds, one line per class (facts, identifiers, paths …) over S1, S2, S3 …."""
    x = [f"S{v}" for v in versions]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": labels.get(name, name),
            "x": x,
            "y": [None if v is None else round(v * 100, 1) for v in shares],
            "line": {"color": DECAY_COLORS.get(name, MUTED), "width": 2},
            "marker": {"size": 7},
            "hovertemplate": "%{x}: %{y:.1f}% of S1's " + labels.get(name, name).lower() + "<extra></extra>",
        }
        for name, shares in curve.items()
    ]
    first = f"S{versions[0]}" if versions else "S1"
    layout = _layout(f"Retention of {first}'s salient content across versions", y_title="% still present")
    layout["yaxis"]["range"] = [0, 105]
    layout["yaxis"]["rangemode"] = "normal"
    layout["showlegend"] = True
    layout["legend"] = {"orientation": "h", "y": -0.25, "x": 0}
    layout["margin"]["b"] = 70
    if not data:
        layout["annotations"] = [_empty_note("No summary versions with salient content yet")]
    return {"data": data, "layout": layout}
