"""Rule evaluation, run by beat every minute (task memoryhub.alerting.evaluate_due_rules).

Due rules come from the partial index on next_eval_at. Each rule is claimed by compare-and-set on
that column, so two beats or two workers that see the same due rule evaluate it exactly once.
Every evaluation is stored (the history chart); a flip (AlertEvent) is written only when the
state changes. Nothing here sends anything: delivery reads the flips later.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Avg, Count, F, Max, Min, Q
from django.utils import timezone

from memoryhub.models import AlertEvaluation, AlertEvent, AlertRule, AlertState
from memoryhub.observe.metrics import COUNTER, METRICS, compute

logger = logging.getLogger(__name__)

COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    "gt": operator.gt,
    "gte": operator.ge,
    "lt": operator.lt,
    "lte": operator.le,
}
SAMPLE_REDUCERS = {"max": Max, "min": Min, "avg": Avg}
DUE_BATCH = 500


def classify(
    value: float | None, comparator: str, warning: float | None, critical: float | None
) -> AlertState:
    """critical if the critical threshold is crossed, else warning if that one is, else ok.
    No data (None) is ok: there is nothing to alert on."""
    if value is None:
        return AlertState.OK
    crossed = COMPARATORS[comparator]
    if critical is not None and crossed(value, critical):
        return AlertState.CRITICAL
    if warning is not None and crossed(value, warning):
        return AlertState.WARNING
    return AlertState.OK


def measure(rule: AlertRule, now: datetime) -> tuple[float | None, float | None]:
    """``(sample, value)``: the metric's reading now over the rule's window and workflow filter,
    and that reading reduced by the rule's aggregation.

    Counters (sum/count) are their count in the window, ratios/means ("last") their value over
    the window. For max/min/avg the current sample is reduced together with the raw samples this
    rule stored in the window — a gauge like tail tokens is only ever observed now, so its "max
    over 15 minutes" is the max of what was observed in those 15 minutes.
    """
    since = now - timedelta(minutes=rule.window_minutes)
    sample = compute(
        rule.tenant,
        rule.metric,
        since=since,
        until=None,
        workflow_prefix=rule.workflow_filter,
        source=rule.source_filter,
    )
    definition = METRICS.get(rule.metric)
    reducer = SAMPLE_REDUCERS.get(rule.aggregation)
    if definition is None or definition.kind == COUNTER or reducer is None:
        return sample, sample
    past = rule.evaluations.filter(at__gt=since, at__lt=now, sample__isnull=False).aggregate(
        v=reducer("sample"), n=Count("id")
    )
    if past["v"] is None:
        return sample, sample
    if sample is None:
        return sample, float(past["v"])
    if rule.aggregation == "max":
        return sample, max(sample, past["v"])
    if rule.aggregation == "min":
        return sample, min(sample, past["v"])
    return sample, (past["v"] * past["n"] + sample) / (past["n"] + 1)


@dataclass(frozen=True)
class Outcome:
    evaluation: AlertEvaluation
    flip: AlertEvent | None


def claim(rule_id: int, seen_next_eval_at: datetime | None, new_next_eval_at: datetime) -> bool:
    """Compare-and-set on next_eval_at: True for exactly one of several concurrent claimers."""
    qs = AlertRule.objects.filter(pk=rule_id, enabled=True)
    if seen_next_eval_at is None:
        qs = qs.filter(next_eval_at__isnull=True)
    else:
        qs = qs.filter(next_eval_at=seen_next_eval_at)
    return qs.update(next_eval_at=new_next_eval_at) == 1


def evaluate_rule(rule: AlertRule, now: datetime | None = None) -> Outcome:
    """Measure, classify and store one evaluation; write a flip if the state changed.

    Callers claim the rule first (evaluate_due_rules); the row lock below also orders two
    evaluations of one rule that overlap (an interval shorter than an evaluation).
    """
    now = now or timezone.now()
    sample, value = measure(rule, now)
    state = classify(value, rule.comparator, rule.warning_threshold, rule.critical_threshold)
    with transaction.atomic():
        previous = AlertRule.objects.select_for_update().values_list("state", flat=True).get(pk=rule.pk)
        evaluation = AlertEvaluation.objects.create(
            rule=rule,
            at=now,
            value=value,
            sample=sample,
            state=state,
            warning_threshold=rule.warning_threshold,
            critical_threshold=rule.critical_threshold,
        )
        flip = None
        if previous != state:
            flip = AlertEvent.objects.create(
                rule=rule, tenant_id=rule.tenant_id, from_state=previous, to_state=state, value=value, at=now
            )
        AlertRule.objects.filter(pk=rule.pk).update(state=state, last_value=value, last_evaluated_at=now)
    rule.state, rule.last_value, rule.last_evaluated_at = state, value, now
    return Outcome(evaluation, flip)


def due_rule_ids(now: datetime, limit: int = DUE_BATCH) -> list[tuple[int, datetime | None, int]]:
    """(id, next_eval_at, interval) of enabled rules due now — served by memoryhub_rule_due."""
    return list(
        AlertRule.objects.filter(enabled=True)
        .filter(Q(next_eval_at__lte=now) | Q(next_eval_at__isnull=True))
        .order_by(F("next_eval_at").asc(nulls_first=True), "pk")
        .values_list("pk", "next_eval_at", "interval_seconds")[:limit]
    )


def evaluate_due_rules(now: datetime | None = None, *, limit: int = DUE_BATCH) -> list[Outcome]:
    """Evaluate every due rule this caller manages to claim; returns what it evaluated."""
    now = now or timezone.now()
    outcomes: list[Outcome] = []
    for rule_id, seen, interval in due_rule_ids(now, limit):
        if not claim(rule_id, seen, now + timedelta(seconds=interval)):
            continue  # another beat/worker claimed it first
        rule = AlertRule.objects.select_related("tenant").filter(pk=rule_id).first()
        if rule is None:
            continue
        try:
            outcomes.append(evaluate_rule(rule, now))
        except Exception:  # one broken rule must not stop the others; it is retried next interval
            logger.exception("alert rule %s failed to evaluate", rule_id)
    return outcomes
