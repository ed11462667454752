"""Rule evaluation: due rules by next_eval_at, compare-and-set claims, stored evaluations, flips
only on change, gauge aggregation over the window, muting, and two workers at once."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection

from memoryhub.accounts.alerts_defaults import DEFAULT_RULES
from memoryhub.models import AlertEvaluation, AlertEvent, AlertRule
from memoryhub.observe.alerting import evaluate
from memoryhub.observe.alerting.evaluate import classify, evaluate_due_rules, evaluate_rule
from memoryhub.observe.alerting.services import clean_rule, update_rule
from tests import factories as f
from tests.factories import ADMIN, add_tokens, build_workflow, make_workflow
from tests.helpers import T0, frozen

pytestmark = pytest.mark.django_db


SPEC = {"name": "stale", "warning_threshold": 0, "critical_threshold": 2, "interval_seconds": 60}


def only_rule(tenant, **fields) -> AlertRule:
    """A rule on stale activations (counter) unless told otherwise, due at T0; the others are off."""
    with frozen(T0):
        return f.only_rule(tenant, **{**SPEC, **fields})


def stale(workflow, n: int = 1) -> None:
    summary = workflow.active_summary or f.activated(workflow)
    for _ in range(n):
        f.stale_activation(summary)


@pytest.mark.parametrize(
    ("value", "comparator", "warning", "critical", "expected"),
    [
        (None, "gt", 0, 1, "ok"),
        (0, "gt", 0, 1, "ok"),
        (1, "gt", 0, 1, "warning"),
        (2, "gt", 0, 1, "critical"),
        (1, "gte", 1, 5, "warning"),
        (0.1, "lt", 0.5, 0.2, "critical"),
        (0.3, "lte", 0.3, 0.2, "warning"),
        (5, "gt", None, 4, "critical"),
        (5, "gt", 4, None, "warning"),
    ],
)
def test_classify(value, comparator, warning, critical, expected):
    assert classify(value, comparator, warning, critical) == expected


def test_every_new_tenant_gets_valid_default_rules_due_at_once(tenant):
    rules = AlertRule.objects.filter(tenant=tenant, is_default=True)
    assert {r.name for r in rules} == {spec["name"] for spec in DEFAULT_RULES}
    metrics = set(rules.values_list("metric", flat=True))
    assert {
        "unvalidated_consumptions",
        "missing_provenance",
        "stale_activation_attempts",
        "validation_failure_rate",
        "active_summary_age_events",
        "tail_budget_fraction",
        "overflow_incidents",
    } <= metrics
    assert AlertRule.objects.get(tenant=tenant, metric="stale_activation_attempts").window_minutes == 15
    for spec in DEFAULT_RULES:  # each default passes the same validation as a user's rule
        clean_rule(tenant, {k: v for k, v in spec.items()})
    assert all(r.next_eval_at is not None for r in rules)
    with frozen(T0):
        outcomes = evaluate_due_rules()
    assert {o.evaluation.rule_id for o in outcomes} == {r.pk for r in rules}


def test_flips_only_on_change_and_every_evaluation_is_stored(tenant):
    wf = build_workflow(tenant, "wf", n=10)
    rule = only_rule(tenant)
    results = []
    with frozen(T0):
        results.append(evaluate_due_rules())  # 0 stale → ok
    with frozen(T0 + timedelta(minutes=1)):
        stale(wf)
        results.append(evaluate_due_rules())  # 1 → warning (flip)
    with frozen(T0 + timedelta(minutes=2)):
        results.append(evaluate_due_rules())  # still 1 → warning (no flip)
    with frozen(T0 + timedelta(minutes=3)):
        stale(wf, 2)
        results.append(evaluate_due_rules())  # 3 → critical (flip)
    with frozen(T0 + timedelta(minutes=4)):
        results.append(evaluate_due_rules())  # critical again (no flip)
    with frozen(T0 + timedelta(minutes=20)):
        results.append(evaluate_due_rules())  # window passed → ok (resolve flip)

    assert [len(r) for r in results] == [1] * 6
    evaluations = list(AlertEvaluation.objects.filter(rule=rule).order_by("at"))
    assert [(e.value, e.state) for e in evaluations] == [
        (0, "ok"),
        (1, "warning"),
        (1, "warning"),
        (3, "critical"),
        (3, "critical"),
        (0, "ok"),
    ]
    assert all(e.warning_threshold == 0 and e.critical_threshold == 2 for e in evaluations)
    flips = list(
        AlertEvent.objects.filter(rule=rule).order_by("at").values_list("from_state", "to_state", "value")
    )
    assert flips == [("ok", "warning", 1), ("warning", "critical", 3), ("critical", "ok", 0)]
    rule.refresh_from_db()
    assert (rule.state, rule.last_value, rule.last_evaluated_at) == ("ok", 0, T0 + timedelta(minutes=20))


def test_rules_are_due_by_next_eval_at_and_rescheduled_by_their_interval(tenant):
    rule = only_rule(tenant, interval_seconds=300)
    with frozen(T0):
        assert len(evaluate_due_rules()) == 1
    rule.refresh_from_db()
    assert rule.next_eval_at == T0 + timedelta(minutes=5)
    with frozen(T0 + timedelta(minutes=4)):
        assert evaluate_due_rules() == []  # not due yet
    with frozen(T0 + timedelta(minutes=5)):
        assert len(evaluate_due_rules()) == 1
    update_rule(rule, {"enabled": False}, ADMIN)
    with frozen(T0 + timedelta(hours=1)):
        assert evaluate_due_rules() == []  # disabled rules are never due


def test_claim_is_compare_and_set(tenant):
    rule = only_rule(tenant)
    assert evaluate.claim(rule.pk, T0, T0 + timedelta(minutes=1)) is True
    assert evaluate.claim(rule.pk, T0, T0 + timedelta(minutes=1)) is False  # already moved on
    assert evaluate.claim(rule.pk, T0 + timedelta(minutes=1), T0 + timedelta(minutes=2)) is True


def test_gauge_max_over_the_window_reduces_the_rules_samples(tenant):
    wf = make_workflow(tenant, "wf")
    rule = only_rule(
        tenant,
        name="tail",
        metric="tail_tokens",
        aggregation="max",
        warning_threshold=5_000,
        critical_threshold=10_000,
        window_minutes=10,
    )
    add_tokens(wf, 11_000)
    add_tokens(wf, 1_000)
    with frozen(T0):
        evaluate_rule(rule)
    f.activated(
        wf, 1, 1, content=f.content_for(1, 1, narrative="Event 1 is filler.")
    )  # compacted: 1,000 tail tokens left
    with frozen(T0 + timedelta(minutes=5)):
        outcome = evaluate_rule(rule)
    assert (outcome.evaluation.sample, outcome.evaluation.value) == (
        1_000,
        12_000,
    )  # the peak is in the window
    assert outcome.flip is None
    with frozen(T0 + timedelta(minutes=11)):
        outcome = evaluate_rule(rule)  # the peak left the window; only raw samples are reduced
    assert outcome.evaluation.value == 1_000
    assert outcome.flip is not None and (outcome.flip.from_state, outcome.flip.to_state) == ("critical", "ok")

    rule.aggregation = "last"
    add_tokens(wf, 5_000)
    with frozen(T0 + timedelta(minutes=12)):
        assert evaluate_rule(rule).evaluation.value == 6_000


def test_workflow_filter_scopes_the_rule(tenant):
    pay = build_workflow(tenant, "payments-1", n=10)
    make_workflow(tenant, "shipping-1")
    rule = only_rule(tenant, workflow_filter="shipping-")
    with frozen(T0):
        stale(pay, 5)
        outcome = evaluate_rule(rule)
    assert (outcome.evaluation.value, outcome.evaluation.state, outcome.flip) == (0, "ok", None)


def test_source_filter_scopes_the_rule_and_its_breaching_workflows(tenant):
    from memoryhub.observe.alerting.firing import breaching_workflows

    pay = build_workflow(tenant, "pay-lc", n=10, source="langchain")
    ship = build_workflow(tenant, "ship-cc", n=10, source="claude-code")
    rule = only_rule(tenant, source_filter="claude-code")
    with frozen(T0):
        stale(pay, 5)
        outcome = evaluate_rule(rule)
    assert (outcome.evaluation.value, outcome.evaluation.state) == (0, "ok")
    with frozen(T0 + timedelta(minutes=1)):
        stale(ship, 5)
        outcome = evaluate_rule(rule)
        breaching = breaching_workflows(rule)
    assert outcome.evaluation.state == "critical"
    assert [wf.external_id for wf, _, _ in breaching] == ["ship-cc"]  # not the LangChain one


def test_muted_rules_still_evaluate_and_flip(tenant):
    wf = build_workflow(tenant, "wf", n=10)
    rule = only_rule(tenant, muted_until=T0 + timedelta(hours=1))
    with frozen(T0):
        stale(wf, 5)
        (outcome,) = evaluate_due_rules()
    assert outcome.evaluation.state == "critical"
    assert outcome.flip is not None  # recorded; delivery skips it (test_alert_delivery)
    rule.refresh_from_db()
    assert rule.state == "critical"


@pytest.mark.impossible_state(
    "create_rule refuses an unknown metric; a rule whose metric left the registry must not stop the others"
)
def test_a_broken_rule_does_not_stop_the_others(tenant):
    only_rule(tenant)
    AlertRule.objects.create(
        tenant=tenant, name="broken", metric="gone_metric", critical_threshold=1, next_eval_at=T0
    )
    with frozen(T0):
        outcomes = evaluate_due_rules()
    assert [o.evaluation.rule.name for o in outcomes] == ["stale"]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_workers_racing_for_one_rule_evaluate_it_once(tenant, monkeypatch):
    """Both workers read the same due rule, then both try to claim it at the same moment."""
    rule = only_rule(tenant)
    barrier = threading.Barrier(2, timeout=10)
    real_claim = evaluate.claim
    claims: list[bool] = []

    def racing_claim(*args):
        barrier.wait()  # both have seen next_eval_at=T0; now both compare-and-set
        won = real_claim(*args)
        claims.append(won)
        return won

    monkeypatch.setattr(evaluate, "claim", racing_claim)
    errors: list[BaseException] = []

    def worker():
        try:
            evaluate_due_rules(T0)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert sorted(claims) == [False, True]
    assert AlertEvaluation.objects.filter(rule=rule).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_four_workers_evaluate_each_of_many_due_rules_exactly_once(tenant):
    only_rule(tenant)
    with frozen(T0):
        for i in range(24):
            f.alert_rule(tenant, **{**SPEC, "name": f"rule-{i}"})
    start = threading.Barrier(4, timeout=10)
    done: list[int] = []

    def worker():
        try:
            start.wait()
            done.append(len(evaluate_due_rules(T0)))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(done) == 25
    counts = list(
        AlertEvaluation.objects.filter(rule__tenant=tenant)
        .values_list("rule_id", flat=True)
        .order_by("rule_id")
    )
    assert len(counts) == len(set(counts)) == 25


def test_changing_what_a_rule_measures_drops_old_samples_from_the_window(tenant):
    add_tokens(make_workflow(tenant, "big-1"), 20_000)
    add_tokens(make_workflow(tenant, "small-1"), 100)
    rule = only_rule(tenant, name="tail", metric="tail_tokens", aggregation="max", critical_threshold=10_000)
    with frozen(T0):
        assert evaluate_rule(rule).evaluation.state == "critical"
    with frozen(T0 + timedelta(minutes=1)):
        update_rule(rule, {"workflow_filter": "small-"}, ADMIN)
        outcome = evaluate_rule(rule)
    assert outcome.evaluation.value == 100  # not the 20,000 peak of another scope
    assert AlertEvaluation.objects.filter(rule=rule).count() == 2  # the history stays on the chart
