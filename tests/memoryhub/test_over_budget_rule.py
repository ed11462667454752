"""One definition of "over budget" (``triggers.policy.is_over_budget``): a workflow's history exceeds
the safe budget of the policy that governs it — its override, else the tenant default, the budget
the trigger engine decides against. The overview's count (SQL) and the workflow page's flag agree
with it, overrides included."""

from __future__ import annotations

import pytest
from django.utils import timezone

from memoryhub.models import Workflow
from memoryhub.observe.detail import workflow_numbers
from memoryhub.observe.reports import WINDOWS, overview_numbers
from tests import factories as f
from tests.factories import add_tokens, make_workflow
from triggers.policy import is_over_budget, policy_for, tenant_safe_budget

pytestmark = pytest.mark.django_db


def test_the_rule_is_strictly_more_than_the_budget():
    assert is_over_budget(18_001, 18_000)
    assert not is_over_budget(18_000, 18_000)


def test_overview_count_and_workflow_page_agree_with_the_rule_under_overrides(tenant):
    # Tenant default: 20,000 − 6,000 reserves − 2,000 margin = 12,000; "small" overrides it to 6,000
    # and "large" to 40,000 − 6,000 − 2,000 = 32,000.
    f.policy(
        tenant, context_window=20_000, reserve_system=2_000, reserve_retrieval=2_000, reserve_output=2_000
    )
    tokens = {"under": 5_000, "over": 13_000, "small": 7_000, "large": 13_000}
    workflows = {name: make_workflow(tenant, name) for name in tokens}
    for name, n in tokens.items():
        add_tokens(workflows[name], n)
    small = dict(context_window=10_000, reserve_system=1_000, reserve_retrieval=1_000, reserve_output=1_000)
    f.policy(tenant, workflows["small"], **small, safety_margin=1_000, target_tokens=2_000)
    f.policy(tenant, workflows["large"], context_window=40_000)

    now = timezone.now()
    over = set()
    for name in tokens:
        wf = Workflow.objects.get(pk=workflows[name].pk)
        spec = policy_for(wf)
        flagged = workflow_numbers(wf, spec, now).over_budget
        assert flagged == is_over_budget(wf.history_tokens, spec.safe_budget)
        if flagged:
            over.add(name)
    # The tenant default alone would say "over" and "large"; the workflows' own budgets say otherwise.
    assert over == {"over", "small"}
    numbers = overview_numbers(tenant, WINDOWS["24h"], now, tenant_safe_budget(tenant))
    assert numbers.state["over_budget"] == len(over)
    assert numbers.budget == 12_000
