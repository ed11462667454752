"""Template tags for the compaction-quality partials (the pages include one line each)."""

from __future__ import annotations

from typing import Any

from django import template

from memoryhub.core import quality
from memoryhub.memory import quality_service
from memoryhub.models import Summary, Workflow
from memoryhub.observe import figures

register = template.Library()


@register.simple_tag
def summary_quality(summary: Summary) -> dict[str, Any]:
    """The retention table of ``summary`` (see ``quality_service.summary_quality``)."""
    return quality_service.summary_quality(summary)


@register.simple_tag
def workflow_quality(workflow: Workflow) -> dict[str, Any]:
    """Decay across versions (table + chart), token-estimate drift and thresholds in force."""
    report = quality_service.workflow_quality(workflow)
    decay = report["decay"]
    report["chart"] = None
    versions, unknown = decay.get("versions") or [], decay.get("unknown_versions") or []
    # Every version opaque: there is no retention to chart, and nothing is known to be lost.
    decay["all_unknown"] = bool(versions) and len(unknown) >= len(versions)
    if decay.get("available") and not decay["all_unknown"]:
        figure = figures.decay_curve(decay["versions"], decay["curve"], quality.CLASS_LABELS)
        report["chart"] = {
            "key": "decay",
            "title": "Summary-of-summary decay",
            "json": figures.to_json(figure),
            "points": figures.point_count(figure),
        }
    return report


@register.filter
def percent(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"
