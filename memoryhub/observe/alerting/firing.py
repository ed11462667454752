"""Which alert rules are firing now, and which workflows breach them (nav badge, overview, alerts).

A rule fires when its stored state (written by ``evaluate.evaluate_rule``) is warning or critical
and it is enabled and not muted. The workflows behind a firing rule are found by measuring the
rule's metric per workflow (the same ``metrics.compute`` the evaluation uses, narrowed to one
workflow) and classifying it with the rule's own thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from memoryhub.models import AlertEvent, AlertRule, AlertState, Tenant, Workflow
from memoryhub.observe.alerting.evaluate import classify
from memoryhub.observe.metrics import compute

BREACH_SCAN = 50  # workflows measured per firing rule (most recently updated first)
BREACH_SHOWN = 5


def firing_rules(tenant: Tenant | int, now: datetime | None = None) -> QuerySet[AlertRule]:
    now = now or timezone.now()
    return (
        AlertRule.objects.filter(
            tenant=tenant, enabled=True, state__in=[AlertState.WARNING, AlertState.CRITICAL]
        )
        .filter(Q(muted_until__isnull=True) | Q(muted_until__lte=now))
        .order_by("-state", "name")
    )


@dataclass
class Firing:
    rule: AlertRule
    workflows: list[tuple[Workflow, float | None, str]] = field(default_factory=list)  # (wf, value, state)


def breaching_workflows(
    rule: AlertRule, now: datetime | None = None
) -> list[tuple[Workflow, float | None, str]]:
    """The workflows (matching the rule's filter) whose own reading crosses the rule's thresholds."""
    now = now or timezone.now()
    since = now - timedelta(minutes=rule.window_minutes)
    workflows = Workflow.objects.filter(tenant_id=rule.tenant_id)
    if rule.workflow_filter:
        workflows = workflows.filter(external_id__startswith=rule.workflow_filter)
    if rule.source_filter:
        workflows = workflows.filter(source=rule.source_filter)
    out = []
    for wf in workflows.order_by("-updated_at")[:BREACH_SCAN]:
        # compute() narrows by external_id prefix: an id that extends this one (wf-1 / wf-10) is
        # measured with it, so a listed workflow may owe part of its reading to such a sibling.
        value = compute(
            rule.tenant, rule.metric, since=since, workflow_prefix=wf.external_id, source=rule.source_filter
        )
        state = classify(value, rule.comparator, rule.warning_threshold, rule.critical_threshold)
        if state != AlertState.OK:
            out.append((wf, value, str(state)))
        if len(out) >= BREACH_SHOWN:
            break
    return out


def firing(tenant: Tenant | int, now: datetime | None = None, *, with_workflows: bool = True) -> list[Firing]:
    rules = list(firing_rules(tenant, now).select_related("tenant"))
    return [Firing(rule, breaching_workflows(rule, now) if with_workflows else []) for rule in rules]


def delivery_summary(flip: AlertEvent) -> dict[str, Any]:
    """How a flip's deliveries went, from its notifications (prefetch them): state is
    pending | no_channel | sent | partly_failed | all_failed, with counts and a sentence."""
    notes = list(flip.notifications.all())
    ok = sum(1 for n in notes if n.ok)
    failed = len(notes) - ok
    if not notes:
        state = "pending" if flip.processed_at is None else "no_channel"
        text = "not delivered yet" if state == "pending" else "no channel attached: recorded only"
    elif failed == 0:
        state, text = "sent", f"sent to {ok} channel{'s' if ok != 1 else ''}"
    elif ok == 0:
        state, text = "all_failed", f"all {failed} deliver{'ies' if failed != 1 else 'y'} failed"
    else:
        state, text = "partly_failed", f"{ok} sent, {failed} failed"
    return {"state": state, "text": text, "ok": ok, "failed": failed}
