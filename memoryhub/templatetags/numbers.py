"""Numbers as people read them: thousands separators, no ``5124.0``, ratios as %, durations.

``{{ value|num }}``, ``{{ value|pct }}``, ``{{ value|metric_value:"tail_tokens" }}`` (the unit comes
from the metric registry, so an alert, a chart label and a table agree).
"""

from __future__ import annotations

from typing import Any

from django import template

from memoryhub.observe.metrics import METRICS

register = template.Library()


def format_number(value: Any, decimals: int = 2) -> str:
    """12,345 for whole numbers (5124.0 → 5,124), else up to ``decimals`` places (0.5 → 0.5)."""
    if value is None or value == "":
        return "—"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if number.is_integer():
        return f"{int(number):,}"
    return f"{number:,.{decimals}f}".rstrip("0").rstrip(".")


def format_percent(value: Any) -> str:
    if value is None or value == "":
        return "—"
    try:
        return f"{format_number(float(value) * 100, 1)}%"
    except (TypeError, ValueError):
        return str(value)


def format_duration(seconds: Any) -> str:
    if seconds is None:
        return "—"
    s = int(float(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            major, rest = divmod(s, size)
            minor = {"d": (rest // 3600, "h"), "h": (rest // 60, "min"), "min": (rest, "s")}[unit]
            return f"{major:,} {unit}" + (f" {minor[0]} {minor[1]}" if minor[0] else "")
    return f"{s} s"


def format_metric(value: Any, metric: str) -> str:
    """``value`` of ``metric`` with the metric's unit (see memoryhub.observe.metrics.METRICS)."""

    if value is None:
        return "no data"
    definition = METRICS.get(metric)
    unit = definition.unit if definition else ""
    if unit == "ratio":
        return format_percent(value)
    if unit == "seconds":
        return format_duration(value)
    if unit == "milliseconds":
        return f"{format_number(value, 1)} ms"
    if unit == "usd":
        return f"${float(value):,.4f}".rstrip("0").rstrip(".")
    return f"{format_number(value)} {unit}".strip()


register.filter("num", format_number)
register.filter("pct", format_percent)
register.filter("duration", format_duration)
register.filter("metric_value", format_metric)
