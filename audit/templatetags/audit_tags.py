"""Template helpers for audit partials."""

from __future__ import annotations

from django import template

from audit.review import available_actions

register = template.Library()


@register.simple_tag
def review_actions_for(summary, role, actions=None):
    """Review actions the current role may take on ``summary`` (a list of ActionSpec)."""
    names = [a.strip() for a in actions.split(",")] if isinstance(actions, str) else actions
    return available_actions(summary, role, names)
