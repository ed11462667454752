"""Template helpers for audit partials."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template

from audit.review import ActionSpec, available_actions, inbox_count
from memoryhub.memory.lifecycle import ActionPolicy
from memoryhub.models import Summary
from memoryhub.observe.alerting.firing import firing_rules

register = template.Library()


@register.simple_tag
def review_actions_for(
    summary: Summary, role: str | None, policy: ActionPolicy | None = None
) -> list[ActionSpec]:
    """The review buttons ``role`` gets on ``summary`` (ActionSpecs; ``lifecycle.allowed_actions``
    decides). Pass the page's ActionPolicy when it has one (saves its queries)."""
    return available_actions(summary, role, policy)


@register.filter
def when(value: object) -> str:
    """An ISO timestamp (as the lineage dict carries it) or a datetime, shown to the second in UTC."""
    if not value:
        return "—"
    if isinstance(value, str):
        text = value
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return text
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    return str(value)


@register.inclusion_tag("audit/partials/nav_review.html", takes_context=True)
def review_nav(context: template.Context) -> dict[str, Any]:
    """Nav items with counts: the review inbox, and firing alerts (two small queries per page; a
    page that counted the inbox already, the overview, hands its total over as ``inbox_total``)."""

    tenant = context.get("current_tenant")
    if tenant is None:
        return {"tenant": None}
    inbox = context.get("inbox_total")
    if inbox is None:
        inbox = inbox_count(tenant.pk)
    return {"tenant": tenant, "inbox": inbox, "firing": firing_rules(tenant).count()}
