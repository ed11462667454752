"""What the what-if simulator page shows: a workflow's recorded growth replayed under its current
policy and a candidate (triggers.services.simulate_workflow), what saving the candidate would
change, and the counts side by side. The page (triggers/views.py) turns the form into a candidate
and renders a ``SimulatorRun``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from memoryhub.core.errors import InvalidInput
from memoryhub.models import Tenant, Workflow
from triggers.engine import PolicySpec
from triggers.figures import simulation_figure
from triggers.services import parse_policy, policy_diff, simulate_workflow

WORKFLOWS_OFFERED = 200  # the most recently updated workflows the page's picker lists

COUNT_LABELS = (
    ("steps", "steps replayed"),
    ("compactions", "compactions"),
    ("overflow_incidents", "overflow incidents (continued past the hard limit)"),
    ("fallback_retrievals", "retrieve_or_block answers"),
    ("over_budget_steps", "calls over the safe budget"),
    ("baseline_replay_tokens", "tokens replayed without compaction"),
    ("replay_tokens", "tokens replayed"),
    ("compaction_cost_tokens", "compaction cost (tokens)"),
    ("net_tokens_saved", "net tokens saved"),
)


def recent_workflow_ids(tenant: Tenant) -> list[str]:
    """External ids of the tenant's most recently updated workflows (the page's picker)."""
    return list(
        Workflow.objects.filter(tenant=tenant)
        .order_by("-updated_at", "-id")
        .values_list("external_id", flat=True)[:WORKFLOWS_OFFERED]
    )


def count_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each count of the two replays, labelled, with candidate − current."""
    cur, cand = result["current"]["counts"], result["candidate"]["counts"]
    return [
        {
            "key": key,
            "label": label,
            "current": cur[key],
            "candidate": cand[key],
            "delta": cand[key] - cur[key],
        }
        for key, label in COUNT_LABELS
    ]


def parse_ratio(raw: str) -> float | None:
    """The form's compaction ratio (blank: none, the policy's target applies)."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise InvalidInput("compaction ratio must be a number between 0 and 1", code="invalid_parameter")


@dataclass(frozen=True)
class SimulatorRun:
    result: dict[str, Any] | None = None  # services.simulate_workflow's answer; None: not simulated
    diff: list[dict[str, Any]] = field(default_factory=list)  # what saving the candidate would change
    errors: list[InvalidInput] = field(default_factory=list)  # why it was not simulated

    @property
    def figure_json(self) -> str:
        """The chart for Plotly.newPlot, as the page's JSON attribute."""
        return json.dumps(simulation_figure(self.result)) if self.result else ""

    @property
    def count_rows(self) -> list[dict[str, Any]]:
        return count_rows(self.result) if self.result else []


def run(
    workflow: Workflow,
    current: PolicySpec,
    *,
    group: str,
    candidate: dict[str, Any] | None = None,
    ratio: str = "",
    refused: bool = False,
) -> SimulatorRun:
    """Replay ``workflow`` under ``current`` and ``candidate`` (a partial policy merged onto it;
    None: the current one again), grouped by ``group``, compacting to ``ratio`` of the history when
    given. ``refused``: the form already refused the input, so only the ratio is checked."""
    body: dict[str, Any] = {"group": group}
    if candidate is not None:
        body["candidate"] = candidate
    errors: list[InvalidInput] = []
    try:
        if (value := parse_ratio(ratio)) is not None:
            body["compaction_ratio"] = value
    except InvalidInput as exc:
        errors.append(exc)
    if refused or errors:
        return SimulatorRun(errors=errors)
    try:
        result = simulate_workflow(workflow, body)
    except InvalidInput as exc:
        return SimulatorRun(errors=[exc])
    return SimulatorRun(result=result, diff=_diff(current, candidate) if candidate is not None else [])


def _diff(current: PolicySpec, candidate: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        return policy_diff(current, parse_policy(candidate))
    except InvalidInput:  # a candidate valid only merged onto the current policy: no full diff
        return []
