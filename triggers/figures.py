"""Plotly figures for the trigger pages, built in Python and sent as JSON to ``Plotly.newPlot``.

Plain dicts (no plotly import at request time): the figure is small and its shape is tested by
loading it into ``plotly.graph_objects.Figure``.
"""

from __future__ import annotations

from typing import Any

CURRENT_COLOR = "#6b7385"
CANDIDATE_COLOR = "#2f5bd3"
LINE_STYLES = {
    "hard_limit": ("hard limit", "#c53030", "solid"),
    "safe_budget": ("safe budget", "#b7791f", "dash"),
    "trigger_tokens": ("trigger", "#6b46c1", "dot"),
    "target_tokens": ("target", "#1f8a4c", "dashdot"),
}


def _series(run: dict[str, Any], label: str, color: str) -> list[dict[str, Any]]:
    series = run["series"]
    points = run["compaction_points"]
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"{label}: context per call",
            "x": series["step"],
            "y": series["context_tokens"],
            "line": {"color": color, "width": 2, "shape": "hv"},
            "hovertemplate": "step %{x}<br>%{y:,} tokens<extra>" + label + "</extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"{label}: compactions ({len(points)})",
            "x": [p["step"] for p in points],
            "y": [p["after"] for p in points],
            "customdata": [p["before"] for p in points],
            "marker": {"color": color, "symbol": "triangle-down", "size": 10},
            "hovertemplate": "step %{x}: compacted %{customdata:,} → %{y:,}<extra>" + label + "</extra>",
        },
    ]


def _hlines(lines: dict[str, int], label: str, steps: int, *, faint: bool) -> list[dict[str, Any]]:
    """Budget, trigger, target and hard-limit lines as legend-visible traces."""
    traces = []
    for key, (name, color, dash) in LINE_STYLES.items():
        value = lines[key]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{label} {name} {value:,}",
                "x": [1, max(1, steps)],
                "y": [value, value],
                "line": {"color": color, "dash": dash, "width": 1},
                "opacity": 0.45 if faint else 0.9,
                "hoverinfo": "name",
            }
        )
    return traces


def simulation_figure(result: dict[str, Any]) -> dict[str, Any]:
    """Current vs candidate history per step with budget/trigger/target/hard-limit lines."""
    current, candidate = result["current"], result["candidate"]
    steps = len(candidate["series"]["step"])
    data = _series(current, "current", CURRENT_COLOR) + _series(candidate, "candidate", CANDIDATE_COLOR)
    data += _hlines(candidate["lines"], "candidate", steps, faint=False)
    if current["lines"] != candidate["lines"]:
        data += _hlines(current["lines"], "current", steps, faint=True)
    return {
        "data": data,
        "layout": {
            "title": {"text": "History tokens per step: current vs candidate policy"},
            "xaxis": {"title": {"text": "step"}, "rangemode": "tozero"},
            "yaxis": {"title": {"text": "tokens"}, "rangemode": "tozero", "tickformat": ","},
            "legend": {"orientation": "h", "y": -0.2},
            "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
            "height": 460,
        },
    }
