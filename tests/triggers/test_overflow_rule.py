"""One definition of an overflow incident: ``triggers.engine.is_overflow_incident``. The metric's
SQL (``memoryhub.observe.metrics.OVERFLOW_INCIDENTS``) must pick the same logged decisions, and the
simulator counts exactly the incidents its policy answered "continue"."""

from __future__ import annotations

import pytest

from memoryhub.observe import metrics
from tests import factories as f
from tests.factories import make_workflow
from triggers.engine import ACTION_CONTINUE, PolicySpec, is_overflow_incident, simulate

# (action, projected tokens, hard limit): over, at and under the limit, caught or not, and an
# unknown limit (0: logged before the hard limit was recorded).
CASES = [
    ("continue", 26_000, 25_000),
    ("continue", 25_000, 25_000),
    ("continue", 1_000, 25_000),
    ("compact", 25_001, 25_000),
    ("compact", 20_000, 25_000),
    ("retrieve_or_block", 30_000, 25_000),
    ("retrieve_or_block", 19_000, 25_000),
    ("continue", 26_000, 0),
    ("compact", 40_000, 32_000),
]


def test_the_predicate_on_its_edges():
    assert is_overflow_incident(25_001, 25_000)
    assert not is_overflow_incident(25_000, 25_000)
    assert not is_overflow_incident(26_000, 0)


@pytest.mark.django_db
@pytest.mark.impossible_state(
    "logged decisions with chosen numbers: a continue over the limit, an unknown limit"
)
def test_the_metric_counts_the_decisions_the_predicate_names(tenant):
    wf = make_workflow(tenant, "wf-overflow")
    rows = [f.decision_row_bypassing_services(wf, a, projected=p, hard_limit=h) for a, p, h in CASES]
    expected = {row.pk for row in rows if is_overflow_incident(row.projected_tokens, row.hard_limit)}
    assert len(expected) == 4  # the cases do exercise both answers
    assert set(metrics.OVERFLOW_INCIDENTS.of_tenant(tenant).values_list("pk", flat=True)) == expected


def test_the_simulator_counts_the_incidents_answered_continue():
    off = {
        name: {"enabled": False} for name in ("emergency_guard", "projected_next_step", "workflow_boundary")
    }
    policy = PolicySpec(strategies=off)
    result = simulate(policy, [5_000] * 7, know_remaining_steps=False)
    continued = [
        context
        for context, action in zip(result.context_tokens, result.actions, strict=True)
        if action == ACTION_CONTINUE
    ]
    assert (
        result.overflow_incidents == sum(is_overflow_incident(c, policy.hard_limit) for c in continued) == 2
    )
