"""The pure trigger engine: the seed's numbers, every strategy, guard, hysteresis and export.

No database and no Django: ``triggers.engine`` is plain Python.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triggers.engine import (
    ACTION_COMPACT,
    ACTION_CONTINUE,
    ACTION_RETRIEVE_OR_BLOCK,
    GUARD_NAMES,
    STRATEGY_NAMES,
    DecisionInputs,
    PolicySpec,
    compare,
    cost_benefit_for,
    evaluate,
    export_langchain,
    export_langmem,
    simulate,
    with_overrides,
)

SEED = PolicySpec()


def only(*names: str, **thresholds: dict) -> dict[str, dict]:
    """A strategies mapping with exactly ``names`` enabled (plus threshold overrides)."""
    out = {name: {"enabled": name in names} for name in STRATEGY_NAMES}
    for name, cfg in thresholds.items():
        out[name] |= cfg
    return out


def policy_with(*names: str, **thresholds: dict) -> PolicySpec:
    return with_overrides(SEED, strategies=only(*names, **thresholds))


def decide(policy: PolicySpec = SEED, **inputs) -> dict:
    return evaluate(policy, DecisionInputs(**inputs)).to_dict()


# --------------------------------------------------------------------------------------------
# The seed, exactly
# --------------------------------------------------------------------------------------------


def test_seed_budget_is_18000():
    assert (SEED.context_window, SEED.reserve_system, SEED.reserve_retrieval) == (32_000, 4_000, 5_000)
    assert (SEED.reserve_output, SEED.safety_margin, SEED.target_tokens) == (3_000, 2_000, 8_000)
    assert SEED.safe_budget == 32_000 - 4_000 - 5_000 - 3_000 - 2_000 == 18_000
    assert SEED.hard_limit == 32_000 - 4_000 - 3_000 == 25_000
    assert SEED.validate() == []


def test_seed_step1_15000_plus_2000_continues():
    d = decide(current_tokens=15_000, expected_next_step_tokens=2_000)
    assert d["action"] == ACTION_CONTINUE
    assert d["strategy"] is None
    assert d["projected_tokens"] == 17_000
    assert d["safe_budget"] == 18_000
    assert d["over_by"] == 0
    assert "15,000 + 2,000 = 17,000" in d["reasons"][0]


def test_seed_step2_17000_plus_4000_compacts_3000_over():
    d = decide(current_tokens=17_000, expected_next_step_tokens=4_000, checkpoint_safe=True)
    assert d["action"] == ACTION_COMPACT
    assert d["strategy"] == "projected_next_step"
    assert d["projected_tokens"] == 21_000
    assert d["over_by"] == 3_000
    assert d["target_tokens"] == 8_000
    assert any("21,000 exceeds the safe budget 18,000 by 3,000" in r for r in d["reasons"])


def test_seed_step3_after_compaction_11000_leaves_7000():
    d = decide(current_tokens=7_000, expected_next_step_tokens=4_000, tokens_since_last_compaction=0)
    assert d["action"] == ACTION_CONTINUE
    assert d["projected_tokens"] == 11_000
    assert d["headroom"] == 7_000
    assert "(7,000 to spare)" in d["reasons"][0]


def test_seed_step4_cost_benefit_50000_gross_47000_net():
    inputs = DecisionInputs(
        current_tokens=17_000,
        remaining_steps=5,
        expected_savings_per_step=10_000,
        compaction_cost_tokens=3_000,
    )
    benefit = cost_benefit_for(SEED, inputs)
    assert benefit is not None
    assert (benefit.gross, benefit.net) == (50_000, 47_000)

    policy = policy_with("cost_benefit")
    d = evaluate(policy, inputs).to_dict()
    assert d["action"] == ACTION_COMPACT
    assert d["strategy"] == "cost_benefit"
    assert d["cost_benefit"] == {
        "savings_per_step": 10_000,
        "remaining_steps": 5,
        "cost_tokens": 3_000,
        "gross_tokens": 50_000,
        "net_tokens": 47_000,
    }
    assert any("50,000 gross, 47,000 net" in r for r in d["reasons"])


def test_decision_shape_has_design_keys():
    d = decide(current_tokens=1, expected_next_step_tokens=1)
    for key in (
        "action",
        "strategy",
        "reasons",
        "current_tokens",
        "expected_next_step_tokens",
        "projected_tokens",
        "safe_budget",
        "target_tokens",
        "blocked_by",
        "over_by",
    ):
        assert key in d


# --------------------------------------------------------------------------------------------
# Every strategy, on and off
# --------------------------------------------------------------------------------------------

# name -> (thresholds, inputs that make it fire with nothing else enabled)
FIRING = {
    "absolute_tokens": ({"tokens": 12_000}, {"current_tokens": 12_001}),
    "window_fraction": ({"fraction": 0.5}, {"current_tokens": 10_001}),  # 50% of 20,000
    "projected_next_step": ({}, {"current_tokens": 17_000, "expected_next_step_tokens": 4_000}),
    "message_count": ({"messages": 50}, {"current_tokens": 9_000, "message_count": 51}),
    "workflow_boundary": (
        {"min_history_tokens": 10_000},
        {"current_tokens": 10_000, "checkpoint_safe": True},
    ),
    "cost_benefit": (
        {"min_net_savings": 5_000},
        {"current_tokens": 10_000, "remaining_steps": 4, "compaction_cost_tokens": 1_000},
    ),
    "quality_signal": ({"min_score": 0.7}, {"current_tokens": 9_000, "quality_score": 0.4}),
    "emergency_guard": ({}, {"current_tokens": 24_000, "expected_next_step_tokens": 2_000}),
}


def test_firing_table_covers_every_strategy():
    assert set(FIRING) == set(STRATEGY_NAMES)
    assert len(STRATEGY_NAMES) == 8


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_strategy_fires_when_on(name):
    thresholds, inputs = FIRING[name]
    d = decide(policy_with(name, **{name: thresholds}), **inputs)
    assert d["action"] == ACTION_COMPACT, d["reasons"]
    assert d["strategy"] == name
    assert d["fired"] == [name]
    assert d["reasons"][0].startswith(f"{name}: ")


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_strategy_silent_when_off(name):
    thresholds, inputs = FIRING[name]
    d = decide(policy_with(**{name: thresholds | {"enabled": False}}), **inputs)
    assert d["action"] == ACTION_CONTINUE
    assert d["strategy"] is None
    assert d["fired"] == []


@pytest.mark.parametrize(
    ("name", "inputs"),
    [
        ("absolute_tokens", {"current_tokens": 12_000}),  # "exceeds": equal does not fire
        ("window_fraction", {"current_tokens": 10_000}),
        ("projected_next_step", {"current_tokens": 14_000, "expected_next_step_tokens": 4_000}),
        ("message_count", {"current_tokens": 9_000, "message_count": 50}),
        ("workflow_boundary", {"current_tokens": 9_999, "checkpoint_safe": True}),
        ("workflow_boundary", {"current_tokens": 15_000, "checkpoint_safe": False}),
        (
            "cost_benefit",
            {"current_tokens": 10_000, "remaining_steps": 2, "compaction_cost_tokens": 1_000},
        ),  # 2,000 × 2 − 1,000 = 3,000 ≤ 5,000
        ("quality_signal", {"current_tokens": 9_000, "quality_score": 0.7}),
        ("quality_signal", {"current_tokens": 9_000, "quality_score": None}),
        ("emergency_guard", {"current_tokens": 23_000, "expected_next_step_tokens": 2_000}),
    ],
)
def test_strategy_below_threshold_does_not_fire(name, inputs):
    thresholds, _ = FIRING[name]
    d = decide(policy_with(name, **{name: thresholds}), **inputs)
    assert d["action"] == ACTION_CONTINUE
    assert d["fired"] == []


def test_boundary_floor_defaults_halfway_between_target_and_trigger():
    assert SEED.strategy("workflow_boundary")["min_history_tokens"] is None
    assert SEED.boundary_floor == 8_000 + (18_000 - 8_000) // 2 == 13_000
    d = decide(SEED, current_tokens=13_000, expected_next_step_tokens=1_000, checkpoint_safe=True)
    assert (d["action"], d["strategy"]) == ("compact", "workflow_boundary")
    assert "floor 13,000" in d["reasons"][0]
    assert decide(SEED, current_tokens=12_999, checkpoint_safe=True)["action"] == ACTION_CONTINUE
    # It follows the policy: a bigger window moves the floor with the trigger.
    wide = with_overrides(SEED, context_window=64_000, target_tokens=20_000)
    assert wide.validate() == []
    assert wide.boundary_floor == 20_000 + (50_000 - 20_000) // 2


def test_quality_signal_needs_history_above_target():
    policy = policy_with("quality_signal", quality_signal={"min_score": 0.7})
    d = decide(policy, current_tokens=8_000, quality_score=0.1)
    assert d["action"] == ACTION_CONTINUE
    assert d["fired"] == []


def test_cost_benefit_default_savings_is_current_minus_target():
    policy = policy_with("cost_benefit")
    inputs = DecisionInputs(current_tokens=17_000, remaining_steps=5)
    benefit = cost_benefit_for(policy, inputs)
    assert benefit is not None
    # 17,000 − 8,000 = 9,000 saved per later call; cost from the strategy threshold (3,000).
    assert (benefit.savings_per_step, benefit.cost_tokens, benefit.net) == (9_000, 3_000, 42_000)
    assert cost_benefit_for(policy, DecisionInputs(current_tokens=17_000)) is None


def test_message_count_with_tiny_history_has_nothing_to_compact():
    policy = policy_with("message_count", message_count={"messages": 10})
    d = decide(policy, current_tokens=5_000, message_count=40)
    assert d["action"] == ACTION_CONTINUE
    assert d["fired"] == ["message_count"]
    assert d["suppressed_by"] == "nothing_to_compact"


def test_several_strategies_report_all_and_name_the_first():
    policy = policy_with("projected_next_step", "absolute_tokens", absolute_tokens={"tokens": 16_000})
    d = decide(policy, current_tokens=17_000, expected_next_step_tokens=4_000)
    assert d["strategy"] == "projected_next_step"
    assert d["fired"] == ["projected_next_step", "absolute_tokens"]
    assert any("absolute threshold 16,000" in r for r in d["reasons"])


# --------------------------------------------------------------------------------------------
# Guards
# --------------------------------------------------------------------------------------------

GUARD_INPUTS = {
    "unresolved_tool_calls": ({"unresolved_tool_calls": 2}, "2 tool call(s) still wait"),
    "pending_side_effects": ({"pending_side_effects": 1}, "1 external side effect(s) still pending"),
    "evidence_not_safeguarded": ({"evidence_safeguarded": False}, "source evidence is not archived"),
    "last_validation_failed": ({"last_validation_failed": True}, "failed validation"),
    "insufficient_reuse": (
        {"remaining_steps": 1, "expected_savings_per_step": 2_000, "compaction_cost_tokens": 3_000},
        "only 1 step(s) remain: saving 2,000 × 1 = 2,000 does not pay for a 3,000-token compaction",
    ),
}


def test_guard_table_covers_every_guard():
    assert set(GUARD_INPUTS) == set(GUARD_NAMES)


@pytest.mark.parametrize("guard", GUARD_NAMES)
def test_guard_blocks_over_budget_into_retrieve_or_block(guard):
    extra, text = GUARD_INPUTS[guard]
    d = decide(current_tokens=17_000, expected_next_step_tokens=4_000, **extra)
    assert d["action"] == ACTION_RETRIEVE_OR_BLOCK
    assert d["blocked_by"] == [guard]
    assert d["strategy"] == "projected_next_step"
    assert any(r.startswith(f"blocked by {guard}: ") and text in r for r in d["reasons"]), d["reasons"]
    assert any("never drop required evidence silently" in r for r in d["reasons"])


@pytest.mark.parametrize("guard", GUARD_NAMES)
def test_guard_postpones_compaction_within_budget(guard):
    extra, text = GUARD_INPUTS[guard]
    policy = policy_with("absolute_tokens", absolute_tokens={"tokens": 12_000})
    d = decide(policy, current_tokens=13_000, expected_next_step_tokens=1_000, **extra)
    assert d["action"] == ACTION_CONTINUE
    assert d["blocked_by"] == [guard]
    assert any(text in r for r in d["reasons"])


@pytest.mark.parametrize("guard", GUARD_NAMES)
def test_guard_blocks_at_hard_limit_too(guard):
    extra, _ = GUARD_INPUTS[guard]
    d = decide(current_tokens=24_000, expected_next_step_tokens=2_000, **extra)
    assert d["action"] == ACTION_RETRIEVE_OR_BLOCK
    assert d["strategy"] == "emergency_guard"
    assert guard in d["blocked_by"]


def test_all_guards_are_reported_together():
    everything = {}
    for extra, _ in GUARD_INPUTS.values():
        everything |= extra
    d = decide(current_tokens=17_000, expected_next_step_tokens=4_000, **everything)
    assert d["action"] == ACTION_RETRIEVE_OR_BLOCK
    assert d["blocked_by"] == list(GUARD_NAMES)


def test_enough_reuse_does_not_block():
    d = decide(
        current_tokens=17_000,
        expected_next_step_tokens=4_000,
        remaining_steps=5,
        expected_savings_per_step=10_000,
        compaction_cost_tokens=3_000,
    )
    assert d["action"] == ACTION_COMPACT
    assert d["blocked_by"] == []


# --------------------------------------------------------------------------------------------
# Emergency guard, boundary preference, compaction that cannot help
# --------------------------------------------------------------------------------------------


def test_emergency_guard_alone_compacts_past_hard_limit():
    d = decide(policy_with("emergency_guard"), current_tokens=24_000, expected_next_step_tokens=2_000)
    assert d["action"] == ACTION_COMPACT
    assert d["strategy"] == "emergency_guard"
    assert "26,000 exceeds the hard limit 25,000 by 1,000" in d["reasons"][0]


def test_emergency_guard_off_says_so_instead_of_staying_silent():
    d = decide(policy_with(), current_tokens=24_000, expected_next_step_tokens=2_000)
    assert d["action"] == ACTION_CONTINUE
    assert "emergency_guard is off" in d["reasons"][0]


def test_emergency_when_compaction_cannot_fit_the_next_step():
    # Even at the 8,000 target, a 20,000-token step gives 28,000 > 25,000.
    d = decide(current_tokens=17_000, expected_next_step_tokens=20_000)
    assert d["action"] == ACTION_RETRIEVE_OR_BLOCK
    assert d["strategy"] == "emergency_guard"
    assert d["blocked_by"] == ["compaction_insufficient"]
    assert any("28,000 > hard limit 25,000" in r for r in d["reasons"])


def test_small_history_with_huge_step_is_retrieve_or_block():
    d = decide(current_tokens=6_000, expected_next_step_tokens=14_000)
    assert d["action"] == ACTION_RETRIEVE_OR_BLOCK
    assert d["blocked_by"] == ["nothing_to_compact"]


def test_explicit_hard_limit():
    policy = with_overrides(SEED, hard_limit_tokens=20_000)
    assert policy.validate() == []
    d = decide(policy, current_tokens=17_000, expected_next_step_tokens=4_000)
    assert d["strategy"] == "emergency_guard"
    assert d["action"] == ACTION_COMPACT


def test_boundary_deferral_waits_below_hard_limit():
    policy = policy_with(
        "projected_next_step",
        "workflow_boundary",
        "emergency_guard",
        workflow_boundary={"defer_to_boundary": True},
    )
    d = decide(policy, current_tokens=17_000, expected_next_step_tokens=4_000, checkpoint_safe=False)
    assert d["action"] == ACTION_CONTINUE
    assert d["suppressed_by"] == "defer_to_boundary"
    assert any("4,000 tokens of headroom remain before the hard limit 25,000" in r for r in d["reasons"])
    at_boundary = decide(policy, current_tokens=17_000, expected_next_step_tokens=4_000, checkpoint_safe=True)
    assert at_boundary["action"] == ACTION_COMPACT


def test_boundary_preference_never_delays_past_hard_limit():
    policy = policy_with(
        "projected_next_step",
        "workflow_boundary",
        "emergency_guard",
        workflow_boundary={"defer_to_boundary": True},
    )
    d = decide(policy, current_tokens=22_000, expected_next_step_tokens=4_000, checkpoint_safe=False)
    assert d["action"] == ACTION_COMPACT
    assert d["strategy"] == "emergency_guard"
    assert d["suppressed_by"] is None


def test_require_approval_is_carried_into_the_decision():
    policy = with_overrides(SEED, require_approval=True)
    d = decide(policy, current_tokens=17_000, expected_next_step_tokens=4_000)
    assert d["action"] == ACTION_COMPACT
    assert d["require_approval"] is True
    assert "human approval" in d["reasons"][-1]


# --------------------------------------------------------------------------------------------
# Hysteresis
# --------------------------------------------------------------------------------------------

# The seed's naive loop: trigger at 18,000, a compaction lands at 17,500, no minimum new content.
NAIVE = with_overrides(
    SEED,
    target_tokens=17_500,
    min_new_tokens=0,
    min_interval_seconds=0,
    strategies={"workflow_boundary": {"enabled": False}},
)


def test_naive_policy_is_valid_but_has_no_hysteresis():
    assert NAIVE.validate() == []
    assert (NAIVE.safe_budget, NAIVE.target_tokens) == (18_000, 17_500)


def test_hysteresis_min_new_tokens_suppresses_retrigger():
    # Just compacted 18,000 → 17,500; 500 new tokens arrive; the next step adds 1,000.
    inputs = dict(current_tokens=18_000, expected_next_step_tokens=1_000, tokens_since_last_compaction=500)
    naive = with_overrides(NAIVE, target_tokens=17_500)
    assert decide(naive, **inputs)["action"] == ACTION_COMPACT
    d = decide(SEED, **inputs)
    assert d["action"] == ACTION_CONTINUE
    assert d["suppressed_by"] == "min_new_tokens"
    assert any("only 500 new tokens since the last compaction (minimum 2,000)" in r for r in d["reasons"])


def test_hysteresis_min_interval_suppresses_retrigger():
    d = decide(
        SEED,
        current_tokens=18_000,
        expected_next_step_tokens=1_000,
        tokens_since_last_compaction=5_000,
        seconds_since_last_compaction=10,
    )
    assert d["action"] == ACTION_CONTINUE
    assert d["suppressed_by"] == "min_interval_seconds"
    assert any("only 10s since the last compaction (minimum 60s)" in r for r in d["reasons"])


def test_hysteresis_gives_way_when_hard_limit_is_at_risk():
    d = decide(
        SEED,
        current_tokens=24_000,
        expected_next_step_tokens=2_000,
        tokens_since_last_compaction=100,
        seconds_since_last_compaction=1,
    )
    assert d["action"] == ACTION_COMPACT
    assert d["suppressed_by"] is None


def test_replay_naive_18000_to_17500_loop_retriggers_and_hysteresis_does_not():
    """The seed's naive loop: compact at 18,000, get a 17,500 summary, trigger again at once."""
    steps = [1_000] * 10
    naive = simulate(NAIVE, steps, initial_tokens=18_000, know_remaining_steps=False)
    # Every step re-triggers: 17,500 + 1,000 > 18,000, compacted back to 17,500, repeat.
    assert naive.compactions == 10
    assert naive.actions == [ACTION_COMPACT] * 10
    assert all(p["after"] == 17_500 for p in naive.compaction_points)

    hysteresis = simulate(SEED, steps, initial_tokens=18_000, know_remaining_steps=False)
    assert hysteresis.compactions == 1
    assert hysteresis.compaction_points == [{"step": 1, "before": 18_000, "after": 8_000}]
    # 10,000 new tokens later (8,000 → 17,000 + 1,000 = 18,000) it still does not re-trigger.
    assert hysteresis.history_before[-1] == 17_000
    assert hysteresis.overflow_incidents == naive.overflow_incidents == 0
    assert hysteresis.net_tokens_saved > naive.net_tokens_saved


def test_replay_poor_compactor_with_hysteresis_waits_for_new_content():
    """Same 17,500-token summary, but min_new_tokens 5,000 spaces the re-compactions out."""
    poor = with_overrides(NAIVE, min_new_tokens=5_000)
    result = simulate(poor, [1_000] * 12, initial_tokens=18_000, know_remaining_steps=False)
    assert [p["step"] for p in result.compaction_points] == [1, 6, 11]
    assert result.overflow_incidents == 0


# --------------------------------------------------------------------------------------------
# Simulator and compare
# --------------------------------------------------------------------------------------------


def test_simulate_seed_growth_series_and_counts():
    # 15,000 → +2,000 (fits) → +4,000 at 17,000 would be 21,000: compact to 8,000 first.
    result = simulate(SEED, [2_000, 4_000, 4_000], initial_tokens=15_000, know_remaining_steps=False)
    assert result.actions == [ACTION_CONTINUE, ACTION_COMPACT, ACTION_CONTINUE]
    assert result.history_before == [15_000, 17_000, 12_000]
    assert result.context_tokens == [17_000, 12_000, 16_000]
    assert result.history_after == [17_000, 12_000, 16_000]
    assert result.compaction_points == [{"step": 2, "before": 17_000, "after": 8_000}]
    counts = result.to_dict()["counts"]
    # Baseline replays 17,000 + 21,000 + 25,000 = 63,000; policy 45,000 + one 3,000 compaction.
    assert counts["baseline_replay_tokens"] == 63_000
    assert counts["replay_tokens"] == 45_000
    assert counts["net_tokens_saved"] == 15_000
    assert counts["overflow_incidents"] == 0
    lines = result.to_dict()["lines"]
    assert lines == {
        "safe_budget": 18_000,
        "trigger_tokens": 18_000,
        "target_tokens": 8_000,
        "hard_limit": 25_000,
    }


def test_simulate_counts_overflow_when_policy_never_compacts():
    nothing = policy_with()
    result = simulate(nothing, [5_000] * 6, know_remaining_steps=False)
    # Contexts 5k, 10k, … 30k: 30,000 > 25,000 once; 20,000 and 25,000 are over budget only.
    assert result.compactions == 0
    assert result.overflow_incidents == 1
    assert result.over_budget_steps == 2
    assert result.net_tokens_saved == 0


def test_simulate_boundaries_and_compaction_ratio():
    policy = policy_with(
        "workflow_boundary", "emergency_guard", workflow_boundary={"min_history_tokens": 9_000}
    )
    result = simulate(
        policy,
        [3_000] * 6,
        boundaries=[5],
        compaction_ratio=0.25,
        know_remaining_steps=False,
    )
    assert result.compaction_points == [{"step": 5, "before": 12_000, "after": 3_000}]


def test_simulate_insufficient_reuse_at_the_end_is_fallback_not_overflow():
    result = simulate(SEED, [6_000] * 4, know_remaining_steps=True)
    # Step 4: 18,000 + 6,000 > 18,000 with one step left: (18,000 − 8,000) × 1 − 3,000 > 0, compacts.
    assert result.actions[-1] == ACTION_COMPACT
    costly = with_overrides(SEED, strategies={"cost_benefit": {"compaction_cost_tokens": 50_000}})
    tight = simulate(costly, [6_000] * 4)
    assert tight.actions[-1] == ACTION_RETRIEVE_OR_BLOCK
    assert tight.fallback_retrievals == 1
    assert tight.overflow_incidents == 0


def test_compare_reports_delta():
    out = compare(NAIVE, SEED, [1_000] * 10, initial_tokens=18_000, know_remaining_steps=False)
    assert out["current"]["counts"]["compactions"] == 10
    assert out["candidate"]["counts"]["compactions"] == 1
    assert out["delta"]["compactions"] == -9
    assert (
        out["delta"]["net_tokens_saved"]
        == out["candidate"]["counts"]["net_tokens_saved"] - out["current"]["counts"]["net_tokens_saved"]
    )


def test_simulate_rejects_bad_ratio():
    with pytest.raises(ValueError):
        simulate(SEED, [1], compaction_ratio=1.5)


# --------------------------------------------------------------------------------------------
# Policy validation and (de)serialisation
# --------------------------------------------------------------------------------------------


def errors_of(**data) -> dict[str, str]:
    return dict(PolicySpec.from_dict(data).validate())


def test_negative_numbers_are_refused():
    errs = errors_of(reserve_retrieval=-1, min_new_tokens=-5, min_interval_seconds=-1)
    assert errs["reserve_retrieval"] == "must not be negative (got -1)"
    assert "min_new_tokens" in errs
    assert "min_interval_seconds" in errs


def test_reserves_at_or_above_window_are_refused():
    errs = errors_of(context_window=14_000)  # 4,000 + 5,000 + 3,000 + 2,000 = 14,000
    assert (
        "reserves and safety margin (14,000) must be below the context window (14,000)"
        in errs["context_window"]
    )


def test_target_at_or_above_trigger_is_refused():
    errs = errors_of(target_tokens=18_000)
    assert "must be below the trigger budget (18,000)" in errs["target_tokens"]
    # An enabled absolute threshold lowers the trigger.
    errs = errors_of(strategies={"absolute_tokens": {"enabled": True, "tokens": 7_000}})
    assert "must be below the trigger budget (7,000)" in errs["target_tokens"]


def test_unknown_strategy_and_bad_thresholds_are_refused():
    errs = errors_of(
        strategies={
            "vibes": {"enabled": True},
            "window_fraction": {"fraction": 1.5},
            "message_count": {"messages": "many"},
            "quality_signal": {"enabled": "yes", "min_score": -0.1},
            "absolute_tokens": {"tokenz": 1},
        }
    )
    assert errs["strategies.vibes"].startswith("unknown strategy")
    assert errs["strategies.window_fraction.fraction"] == "must be at most 1"
    assert errs["strategies.message_count.messages"] == "must be an integer"
    assert errs["strategies.quality_signal.enabled"] == "must be true or false"
    assert errs["strategies.quality_signal.min_score"] == "must be at least 0"
    assert errs["strategies.absolute_tokens.tokenz"].startswith("unknown threshold")


def test_bad_types_are_refused_without_crashing():
    errs = errors_of(context_window="big", model="", require_approval="no", hard_limit_tokens=1.5)
    assert set(errs) >= {"context_window", "model", "require_approval", "hard_limit_tokens"}


def test_hard_limit_bounds():
    assert "at least the safe budget" in errors_of(hard_limit_tokens=17_999)["hard_limit_tokens"]
    assert "must not exceed" in errors_of(hard_limit_tokens=25_001)["hard_limit_tokens"]


def test_boundary_floor_must_be_above_target():
    errs = errors_of(strategies={"workflow_boundary": {"min_history_tokens": 8_000}})
    assert "must be above target_tokens (8,000)" in errs["strategies.workflow_boundary.min_history_tokens"]


def test_round_trip_and_partial_strategies():
    data = SEED.to_dict()
    assert data["safe_budget"] == 18_000
    assert set(data["strategies"]) == set(STRATEGY_NAMES)
    again = PolicySpec.from_dict(data)
    assert again.to_dict() == data
    partial = PolicySpec.from_dict({"strategies": {"message_count": {"enabled": True}}})
    assert partial.strategy("message_count") == {"enabled": True, "messages": 200}
    assert partial.enabled("projected_next_step")


def test_parse_refuses_unknown_fields_and_accepts_derived_ones():
    policy, errors = PolicySpec.parse(SEED.to_dict() | {"colour": "red"})
    assert policy is None
    assert errors == [("colour", "unknown field")]
    policy, errors = PolicySpec.parse(SEED.to_dict())
    assert errors == [] and policy is not None
    assert PolicySpec.parse([1, 2])[1] == [("policy", "must be a JSON object")]


def test_decision_inputs_parse():
    inputs, errors = DecisionInputs.parse({"current_tokens": 17_000, "expected_next_step_tokens": 4_000})
    assert errors == [] and inputs is not None and inputs.current_tokens == 17_000
    _, errors = DecisionInputs.parse(
        {
            "current_tokens": -1,
            "checkpoint_safe": "yes",
            "quality_score": 1.5,
            "remaining_steps": True,
            "bogus": 1,
        }
    )
    assert dict(errors) == {
        "bogus": "unknown field",
        "current_tokens": "must not be negative",
        "checkpoint_safe": "must be true or false",
        "quality_score": "must be between 0 and 1",
        "remaining_steps": "must be an integer",
    }
    assert DecisionInputs.parse({})[1] == [("current_tokens", "is required")]


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def test_export_langmem_shape():
    out = export_langmem(SEED)
    assert out["class"] == "SummarizationNode"
    assert out["params"] == {
        "max_tokens_before_summary": 18_000,
        "max_tokens": 8_000,
        "max_summary_tokens": 4_000,
    }
    text = " ".join(out["cannot_express"])
    for word in ("projection", "guards", "hysteresis", "emergency guard", "workflow boundary"):
        assert word in text
    assert "cost–benefit" not in text  # off in the seed policy
    with_cb = export_langmem(policy_with("projected_next_step", "cost_benefit"))
    assert any(n.startswith("cost–benefit") for n in with_cb["cannot_express"])
    approx = export_langmem(SEED, keep_recent_tokens=3_000, typical_step_tokens=4_000)
    assert approx["params"] == {
        "max_tokens_before_summary": 14_000,
        "max_tokens": 8_000,
        "max_summary_tokens": 5_000,
    }


def test_export_langchain_shape():
    out = export_langchain(SEED)
    assert out["class"] == "SummarizationMiddleware"
    assert out["params"] == {"trigger": ("tokens", 18_000), "keep": ("tokens", 4_000)}
    assert "trigger=('tokens', 18000)" in out["python"]
    counted = export_langchain(
        policy_with(
            "projected_next_step",
            "message_count",
            "window_fraction",
            window_fraction={"fraction": 0.8},
            message_count={"messages": 40},
        )
    )
    # 80 % of the 20,000 usable tokens, exported as tokens; messages as a second OR clause.
    assert counted["params"]["trigger"] == [("tokens", 16_000), ("messages", 40)]
    assert not any(n.startswith("message count") for n in counted["cannot_express"])
    assert any(n.startswith("projection") for n in counted["cannot_express"])


def test_export_rejects_keep_above_target():
    with pytest.raises(ValueError):
        export_langchain(SEED, keep_recent_tokens=9_000)


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

valid_policies = st.builds(
    lambda window, sys_, ret, out, margin, target_share, min_new, strategies, hard_share: _policy(
        window, sys_, ret, out, margin, target_share, min_new, strategies, hard_share
    ),
    st.integers(16_000, 200_000),
    st.integers(0, 4_000),
    st.integers(0, 4_000),
    st.integers(0, 4_000),
    st.integers(0, 2_000),
    st.floats(0.05, 0.9),
    st.integers(0, 5_000),
    st.sets(st.sampled_from([n for n in STRATEGY_NAMES if n != "emergency_guard"])),
    st.one_of(st.none(), st.floats(0, 1)),
)


def _policy(window, sys_, ret, out, margin, target_share, min_new, enabled, hard_share) -> PolicySpec:
    base = PolicySpec(
        context_window=window,
        reserve_system=sys_,
        reserve_retrieval=ret,
        reserve_output=out,
        safety_margin=margin,
        target_tokens=0,
        min_new_tokens=min_new,
        strategies=only(*enabled, "emergency_guard"),
    )
    trigger = base.trigger_tokens
    floor = int(trigger * target_share)
    strategies = only(
        *enabled,
        "emergency_guard",
        workflow_boundary={"min_history_tokens": floor + 1},
        absolute_tokens={"tokens": max(floor + 1, trigger)},
    )
    hard = None
    if hard_share is not None:
        ceiling = window - sys_ - out
        hard = base.safe_budget + int((ceiling - base.safe_budget) * hard_share)
    policy = with_overrides(base, target_tokens=floor, strategies=strategies, hard_limit_tokens=hard)
    assert policy.validate() == [], policy.validate()
    return policy


decision_inputs = st.builds(
    DecisionInputs,
    current_tokens=st.integers(0, 250_000),
    expected_next_step_tokens=st.integers(0, 50_000),
    message_count=st.integers(0, 1_000),
    checkpoint_safe=st.booleans(),
    unresolved_tool_calls=st.integers(0, 2),
    pending_side_effects=st.integers(0, 2),
    evidence_safeguarded=st.booleans(),
    last_validation_failed=st.booleans(),
    remaining_steps=st.one_of(st.none(), st.integers(0, 30)),
    quality_score=st.one_of(st.none(), st.floats(0, 1)),
    tokens_since_last_compaction=st.one_of(st.none(), st.integers(0, 20_000)),
    seconds_since_last_compaction=st.one_of(st.none(), st.floats(0, 600)),
)


@settings(max_examples=200, deadline=None)
@given(valid_policies, decision_inputs)
def test_never_continue_past_the_hard_limit(policy, inputs):
    d = evaluate(policy, inputs)
    if d.projected_tokens > policy.hard_limit:
        assert d.action != ACTION_CONTINUE, d.reasons


@settings(max_examples=200, deadline=None)
@given(valid_policies, decision_inputs)
def test_decision_invariants(policy, inputs):
    d = evaluate(policy, inputs)
    assert d.action in (ACTION_CONTINUE, ACTION_COMPACT, ACTION_RETRIEVE_OR_BLOCK)
    assert d.projected_tokens == inputs.current_tokens + inputs.expected_next_step_tokens
    assert d.over_by == max(0, d.projected_tokens - policy.safe_budget)
    assert d.reasons and all(isinstance(r, str) and r for r in d.reasons)
    if d.action == ACTION_COMPACT:
        assert d.blocked_by == []  # a guard never lets compaction through
        assert d.strategy is not None
        assert inputs.current_tokens > policy.target_tokens
    if d.action == ACTION_RETRIEVE_OR_BLOCK:
        assert d.projected_tokens > policy.safe_budget
        assert d.blocked_by
    if d.strategy is None:
        assert d.action == ACTION_CONTINUE


@settings(max_examples=100, deadline=None)
@given(valid_policies, st.lists(st.integers(0, 6_000), max_size=60))
def test_simulation_never_overflows_with_emergency_guard(policy, steps):
    result = simulate(policy, steps)
    # The emergency guard (always on here) means an over-limit call is never a silent continue.
    assert result.overflow_incidents == 0
    assert len(result.context_tokens) == len(steps)
    assert result.compactions == result.actions.count(ACTION_COMPACT)


def test_engine_imports_without_django():
    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys, triggers.engine as e; "
        "assert 'django' not in sys.modules, 'django imported'; "
        "print(e.PolicySpec().safe_budget)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "18000"
