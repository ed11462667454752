"""The policy form: the policy fields of the API contract plus one switch and its thresholds per strategy.

The form only converts HTML inputs to the policy dict; every rule (reserves < window, target <
trigger, …) is checked by ``triggers.services.parse_policy`` so the page and the API refuse the
same things with the same words.
"""

from __future__ import annotations

from typing import Any

from django import forms

from memoryhub.core.errors import InvalidInput
from memoryhub.core.repair_policy import DEFAULT_GATE, DEFAULT_MAX_TOKENS
from triggers.engine import STRATEGY_LABELS, STRATEGY_NAMES, STRATEGY_SCHEMA, PolicySpec

SCALARS = (
    ("model", "Model"),
    ("encoding", "Token encoding"),
    ("context_window", "Context window"),
    ("reserve_system", "Reserve: system + tools"),
    ("reserve_retrieval", "Reserve: retrieval / tool results"),
    ("reserve_output", "Reserve: output"),
    ("safety_margin", "Safety margin"),
    ("target_tokens", "Post-compaction target"),
    ("min_new_tokens", "Min new tokens before re-compacting"),
    ("min_interval_seconds", "Min seconds between compactions"),
    ("hard_limit_tokens", "Hard limit (blank = window − system − output)"),
)

THRESHOLD_HELP = {
    "tokens": "history tokens",
    "fraction": "share of usable window (0–1)",
    "messages": "messages in the tail",
    "min_score": "quality score below this fires (0–1)",
    "min_net_savings": "tokens",
    "compaction_cost_tokens": "tokens per compaction",
    "min_history_tokens": "blank = halfway target → trigger",
    "defer_to_boundary": "wait for a boundary until the hard limit",
}


def field_name(strategy: str, key: str) -> str:
    return f"s__{strategy}__{key}"


class PolicyForm(forms.Form):
    """A ContextPolicy as HTML inputs (one enabled checkbox and thresholds per strategy)."""

    require_approval = forms.BooleanField(required=False, label="Require human approval before activation")
    # What a framework's lossy compaction gets (memoryhub.core.repair_policy); blank = the defaults.
    repair_gate = forms.ChoiceField(
        required=False,
        label="When a framework's summary lost something",
        choices=[
            ("repair", "repair: hand back what it lost"),
            ("block", "block: keep the previous context (where the framework can)"),
            ("observe", "observe: record the verdict only"),
        ],
    )
    repair_resummarize = forms.BooleanField(
        required=False,
        label="LangChain: one more summarization naming what was lost (the better one is used)",
    )
    repair_max_tokens = forms.IntegerField(required=False, label="Hand-back budget (tokens)")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, label in SCALARS:
            if name in ("model", "encoding"):
                self.fields[name] = forms.CharField(label=label, max_length=100)
            else:
                self.fields[name] = forms.IntegerField(label=label, required=name != "hard_limit_tokens")
        for strategy in STRATEGY_NAMES:
            self.fields[field_name(strategy, "enabled")] = forms.BooleanField(
                required=False, label=STRATEGY_LABELS[strategy]
            )
            for key, (kind, _low, _high, _default) in STRATEGY_SCHEMA[strategy].items():
                label = f"{key.replace('_', ' ')} ({THRESHOLD_HELP.get(key, '')})"
                if kind == "bool":
                    field: forms.Field = forms.BooleanField(required=False, label=label)
                elif kind.startswith("float"):
                    field = forms.FloatField(required=False, label=label)
                else:
                    field = forms.IntegerField(required=False, label=label)
                self.fields[field_name(strategy, key)] = field

    @classmethod
    def initial_from(cls, spec: PolicySpec) -> dict[str, Any]:
        data = spec.to_dict()
        initial = {name: data[name] for name, _ in SCALARS}
        initial["require_approval"] = spec.require_approval
        repair = data["repair"]
        initial.update(
            repair_gate=repair["gate"],
            repair_resummarize=repair["resummarize"],
            repair_max_tokens=repair["max_tokens"],
        )
        for strategy in STRATEGY_NAMES:
            for key, value in spec.strategy(strategy).items():
                initial[field_name(strategy, key)] = value
        return initial

    def strategy_rows(self) -> list[dict[str, Any]]:
        """Bound fields grouped per strategy, for the template."""
        rows = []
        for strategy in STRATEGY_NAMES:
            rows.append(
                {
                    "name": strategy,
                    "label": STRATEGY_LABELS[strategy],
                    "enabled": self[field_name(strategy, "enabled")],
                    "thresholds": [self[field_name(strategy, key)] for key in STRATEGY_SCHEMA[strategy]],
                }
            )
        return rows

    def scalar_fields(self) -> list[forms.BoundField]:
        return [self[name] for name, _ in SCALARS]

    def to_policy(self) -> dict[str, Any]:
        """The policy dict for services.parse_policy (call after is_valid())."""
        data = self.cleaned_data
        policy: dict[str, Any] = {name: data.get(name) for name, _ in SCALARS}
        policy["require_approval"] = bool(data.get("require_approval"))
        strategies: dict[str, dict[str, Any]] = {}
        for strategy in STRATEGY_NAMES:
            cfg: dict[str, Any] = {"enabled": bool(data.get(field_name(strategy, "enabled")))}
            for key, (kind, _low, _high, default) in STRATEGY_SCHEMA[strategy].items():
                value = data.get(field_name(strategy, key))
                if kind == "bool":
                    value = bool(value)
                elif value is None and not kind.endswith("?"):
                    value = default  # a blank threshold keeps its default
                cfg[key] = value
            strategies[strategy] = cfg
        policy["strategies"] = strategies
        policy["repair"] = {
            "gate": data.get("repair_gate") or DEFAULT_GATE,
            "resummarize": bool(data.get("repair_resummarize")),
            "max_tokens": data.get("repair_max_tokens") or DEFAULT_MAX_TOKENS,
        }
        return policy

    def repair_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in ("repair_gate", "repair_resummarize", "repair_max_tokens")]

    def add_service_error(self, exc: InvalidInput) -> None:
        """A refusal from the services: per-field errors beside their inputs, else one form error."""
        if exc.extra.get("errors"):
            self.add_policy_errors(exc)
        else:
            self.add_error(None, exc.detail)

    def add_policy_errors(self, exc: InvalidInput) -> None:
        """Show the service's (field, message) errors next to the right inputs."""
        for item in exc.extra.get("errors") or [{"field": "", "message": exc.detail}]:
            name = str(item["field"])
            if name.startswith("repair."):
                name = "repair_" + name.split(".", 1)[1]
            if name.startswith("strategies."):
                parts = name.split(".")
                name = field_name(parts[1], parts[2]) if len(parts) >= 3 else field_name(parts[1], "enabled")
            target = name if name in self.fields else None
            self.add_error(target, item["message"] if target else f"{item['field']}: {item['message']}")
