"""Trigger services: context policies, stateful decisions with their log, what-if and simulation.

The arithmetic lives in :mod:`triggers.engine` (pure Python). This module adds what needs the
database: which policy applies to a workflow (its override, else the tenant default, else the
seed defaults), the workflow's running totals as decision inputs (O(1): no event is read or
counted), the TriggerDecision log, the optional compaction request, and the recorded token growth
the simulator replays.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import Any, cast

from django.db import connection, transaction
from django.db.models import Field, QuerySet
from django.db.models.expressions import Col
from django.db.models.options import Options
from django.utils import timezone

from audit.log import record
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Forbidden, InvalidInput, NotFound
from memoryhub.core.rows import ModelColumns, PreparedStatement, built_per_vendor
from memoryhub.core.tokens import known_encoding
from memoryhub.memory.quality_service import parse_estimate, record_trigger_estimate
from memoryhub.memory.workflows import get_workflow
from memoryhub.models import (
    ConsumerTrace,
    Event,
    Role,
    Summary,
    SummaryStatus,
    Tenant,
    Workflow,
    role_at_least,
)
from memoryhub.pipeline.jobs import request_compaction
from triggers import decision_log
from triggers.engine import (
    ACTION_COMPACT,
    ACTION_RETRIEVE_OR_BLOCK,
    Decision,
    DecisionInputs,
    PolicySpec,
    compare,
    evaluate,
    is_overflow_incident,
)
from triggers.models import ContextPolicy, TriggerDecision
from triggers.policy import (
    POLICY_FIELDS,
    SOURCE_DEFAULT,
    SOURCE_TENANT,
    SOURCE_WORKFLOW,
    effective_policy,
)

# Inputs the stateful call takes from the caller; the rest come from the workflow's totals.
STATEFUL_FIELDS = {
    "expected_next_step_tokens",
    "checkpoint_safe",
    "remaining_steps",
    "quality_score",
    "evidence_safeguarded",
    "last_validation_failed",
    "unresolved_tool_calls",
    "pending_side_effects",
    "compaction_cost_tokens",
    "expected_savings_per_step",
    "message_count",
}
SERVER_FIELDS = {"current_tokens", "tokens_since_last_compaction", "seconds_since_last_compaction"}


# Recorded-growth replays are capped so a simulator request stays bounded.
MAX_SIMULATION_EVENTS = 100_000
MAX_SIMULATION_STEPS = 20_000


def _errors_to_invalid(errors: list[tuple[str, str]], *, code: str, prefix: str = "") -> InvalidInput:
    """One 400 naming every problem (first one in ``detail``, all of them in ``errors``)."""
    listed = [{"field": prefix + name, "message": message} for name, message in errors]
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in listed)
    return InvalidInput(detail, code=code, errors=listed)


# --------------------------------------------------------------------------------------------
# Policies
# --------------------------------------------------------------------------------------------


def policy_payload(spec: PolicySpec, source: str, row: ContextPolicy | None = None) -> dict[str, Any]:
    """API/page shape: the contract's policy fields, derived budgets, where it comes from."""
    data = spec.to_dict()
    data["source"] = source
    data["updated_at"] = row.updated_at.isoformat() if row else None
    data["updated_by"] = row.updated_by if row else ""
    return data


def parse_policy(data: Any, *, base: PolicySpec | None = None) -> PolicySpec:
    """Strictly parse a policy body (400 listing every error). ``base`` makes it a merge (PATCH)."""
    if base is not None and isinstance(data, dict):
        merged = base.to_dict()
        for key, value in data.items():
            if key == "strategies" and isinstance(value, dict) and isinstance(merged.get("strategies"), dict):
                strategies = {name: dict(cfg) for name, cfg in merged["strategies"].items()}
                for name, cfg in value.items():
                    if name in strategies and isinstance(cfg, dict):
                        strategies[name].update(cfg)
                    else:
                        strategies[name] = cfg
                merged["strategies"] = strategies
            else:
                merged[key] = value
        data = merged
    spec, errors = PolicySpec.parse(data)
    if spec is not None:
        errors = _storage_errors(spec)
    if errors or spec is None:
        raise _errors_to_invalid(errors, code="invalid_policy")
    return spec


def _storage_errors(spec: PolicySpec) -> list[tuple[str, str]]:
    """What the engine accepts but the columns or this server cannot hold."""
    errors: list[tuple[str, str]] = []
    if not float(spec.min_interval_seconds).is_integer():
        errors.append(("min_interval_seconds", "must be a whole number of seconds"))
    if not known_encoding(spec.encoding):
        errors.append(("encoding", f"unknown token encoding {spec.encoding!r}"))
    if len(spec.model) > 100:
        errors.append(("model", "at most 100 characters"))
    limit = 2**31 - 1
    for name in (
        "context_window",
        "target_tokens",
        "min_new_tokens",
        "min_interval_seconds",
        "hard_limit_tokens",
    ):
        value = getattr(spec, name)
        if value is not None and value > limit:
            errors.append((name, f"must be at most {limit}"))
    return errors


def check_not_weaker(
    current: PolicySpec, proposed: PolicySpec, role: str | None, *, workflow: Workflow | None
) -> None:
    """Only an admin may lower a safeguard: the tenant default is admin-only, and a reviewer's
    workflow override may make ``require_approval`` stricter, never switch it off."""
    if role_at_least(role, Role.ADMIN):
        return
    if workflow is None:
        raise Forbidden("changing the tenant default policy needs the admin role", code="forbidden")
    if current.require_approval and not proposed.require_approval:
        raise Forbidden(
            "require_approval is on for this workflow; only an admin may switch it off",
            code="approval_policy_admin_only",
        )


def save_policy(
    tenant: Tenant,
    data: Any,
    actor: Actor,
    *,
    workflow: Workflow | None = None,
    partial: bool = False,
    role: str | None = Role.ADMIN,
) -> tuple[ContextPolicy, PolicySpec]:
    """Create or replace the tenant default (workflow None) or a workflow's override.

    ``partial`` merges ``data`` onto the policy currently in effect (PATCH); otherwise missing
    fields take the defaults (PUT). Nothing is written when any field is invalid, or when a
    non-admin ``role`` would lower a safeguard (see ``check_not_weaker``).
    """

    current = effective_policy(tenant, workflow)[0]
    base = current if partial else None
    spec = parse_policy(data, base=base)
    check_not_weaker(current, spec, role, workflow=workflow)
    values = {name: getattr(spec, name) for name in POLICY_FIELDS}
    values["min_interval_seconds"] = int(values["min_interval_seconds"])
    values["strategies"] = spec.to_dict()["strategies"]
    values["quality"] = spec.to_dict()["quality"]
    values["repair"] = spec.to_dict()["repair"]
    values["updated_by"] = str(actor)
    with transaction.atomic():
        row, created = ContextPolicy.objects.update_or_create(
            tenant=tenant, workflow=workflow, defaults=values
        )
        record(
            tenant,
            actor,
            "policy.update",
            workflow if workflow is not None else ("context_policy", f"tenant:{tenant.slug}"),
            {
                "scope": SOURCE_WORKFLOW if workflow else SOURCE_TENANT,
                "created": created,
                "policy": spec.to_dict(),
            },
        )
    return row, spec


def delete_policy(
    tenant: Tenant, actor: Actor, *, workflow: Workflow | None = None, role: str | None = Role.ADMIN
) -> bool:
    """Remove an override (or the tenant default); the next level up applies again (a non-admin
    may not remove an override whose removal lowers a safeguard)."""

    if workflow is not None:
        after = effective_policy(tenant)[0]
        check_not_weaker(effective_policy(tenant, workflow)[0], after, role, workflow=workflow)

    with transaction.atomic():
        deleted, _ = ContextPolicy.objects.filter(tenant=tenant, workflow=workflow).delete()
        if deleted:
            record(
                tenant,
                actor,
                "policy.delete",
                workflow if workflow is not None else ("context_policy", f"tenant:{tenant.slug}"),
                {"scope": SOURCE_WORKFLOW if workflow else SOURCE_TENANT},
            )
    return bool(deleted)


# --------------------------------------------------------------------------------------------
# Stateful decisions
# --------------------------------------------------------------------------------------------


def _last_candidate_failed(workflow: Workflow) -> bool:
    """Did the newest summary version fail validation? One indexed row, never a scan."""
    prefetched = getattr(workflow, "_decision_prefetch", None)
    if prefetched is not None:
        return prefetched["last_summary_status"] == SummaryStatus.REJECTED
    status = (
        Summary.objects.filter(workflow=workflow)
        .order_by("-version")
        .values_list("status", flat=True)
        .first()
    )
    return status == SummaryStatus.REJECTED


def _since_last_compaction(workflow: Workflow, now: datetime) -> tuple[int | None, float | None]:
    """New tokens and seconds since the last compaction (None when there was none)."""
    if workflow.last_compacted_at is not None:
        tokens = max(0, workflow.total_tokens - workflow.tokens_at_last_compaction)
        return tokens, max(0.0, (now - workflow.last_compacted_at).total_seconds())
    if workflow.active_summary_id and workflow.activated_at is not None:
        return workflow.tail_tokens, max(0.0, (now - workflow.activated_at).total_seconds())
    return None, None


# Distinct policy rows whose PolicySpec a process keeps (``_DecisionRead._spec``).
POLICY_SPECS_KEPT = 1024


class _DecisionRead:
    """The one statement a stateful decision reads, with the ORM's own value converters.

    It returns the workflow row, the status of its newest summary version (an index-backed
    subquery), and the policy that applies: the override, else the tenant default (one LEFT JOIN
    over both, override first). Written as SQL on purpose: the equivalent ORM query spent ~2-3 ms
    compiling (joins and a subquery over ~100 columns) against ~0.35 ms for the statement itself,
    and this call runs before every model call of every agent. Table and column names come from
    the models, and every value goes through the converters the ORM would apply.
    """

    def __init__(self) -> None:
        qn = connection.ops.quote_name
        wf, policy, summary = Workflow._meta, ContextPolicy._meta, Summary._meta
        self.workflow = ModelColumns(Workflow, "w")
        self.policy_fields = [cast(Field, policy.get_field(name)) for name in POLICY_FIELDS]
        columns = [self.workflow.sql] + [f"p.{qn(f.column)}" for f in self.policy_fields]

        def column(meta: Options[Any], name: str) -> str:
            return qn(cast(Field, meta.get_field(name)).column)

        policy_workflow = column(policy, "workflow")
        summary_workflow = column(summary, "workflow")
        wf_tenant = column(wf, "tenant")
        self.sql = (
            f"SELECT {', '.join(columns)}, p.{qn('id')}, p.{policy_workflow}, "
            f"(SELECT s.{qn('status')} FROM {qn(summary.db_table)} s "
            f"WHERE s.{summary_workflow} = w.{qn('id')} ORDER BY s.{qn('version')} DESC LIMIT 1) "
            f"FROM {qn(wf.db_table)} w LEFT JOIN {qn(policy.db_table)} p "
            f"ON p.{column(policy, 'tenant')} = w.{wf_tenant} "
            f"AND (p.{policy_workflow} = w.{qn('id')} OR p.{policy_workflow} IS NULL) "
            f"WHERE w.{wf_tenant} = %s AND w.{qn('external_id')} = %s "
            f"ORDER BY (p.{policy_workflow} IS NULL) LIMIT 1"
        )
        self.prepared = PreparedStatement("memoryhub_decision_read", self.sql)
        self._specs: dict[tuple[Any, ...], PolicySpec] = {}  # PolicySpec is frozen: shared safely
        self.policy_converters = [self._converters(f, policy.db_table) for f in self.policy_fields]

    @staticmethod
    def _converters(field: Field, table: str) -> tuple[Col, list[Any]]:
        col = field.get_col(table)
        return col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)

    def fetch(self, tenant_id: int, external_id: str) -> tuple[Workflow, PolicySpec, str, str | None] | None:
        with connection.cursor() as cursor:
            cursor.execute(*self.prepared.statement([tenant_id, external_id]))
            raw = cursor.fetchone()
        if raw is None:
            return None
        workflow = self.workflow.instance(raw)
        end = self.workflow.width + len(self.policy_fields)
        policy_id, policy_workflow_id, newest_status = raw[end:]
        if policy_id is None:
            return workflow, PolicySpec(), SOURCE_DEFAULT, newest_status
        spec = self._spec(tuple(raw[self.workflow.width : end]))
        return workflow, spec, (SOURCE_WORKFLOW if policy_workflow_id else SOURCE_TENANT), newest_status

    def _spec(self, raw_policy: tuple[Any, ...]) -> PolicySpec:
        """The policy of these column values as read (JSON still text), built once per distinct
        row: a policy changes rarely and is read before every step of every agent, and building
        it (JSON parsing, strategy defaults) cost a quarter of a logged decision's CPU."""
        spec = self._specs.get(raw_policy)
        if spec is None:
            values = list(raw_policy)
            for index, (col, converters) in enumerate(self.policy_converters):
                for convert in converters:
                    values[index] = convert(values[index], col, connection)
            spec = PolicySpec.from_dict(dict(zip(POLICY_FIELDS, values, strict=True)))
            if len(self._specs) >= POLICY_SPECS_KEPT:
                self._specs.clear()  # rows of policies since changed: start over
            self._specs[raw_policy] = spec
        return spec


_decision_read = built_per_vendor(_DecisionRead)


def workflow_for_decision(tenant: Tenant, external_id: str) -> Workflow:
    """The workflow with everything a decision reads, in one statement (see ``_DecisionRead``):
    running totals, the applicable policy and the newest summary's status. 404 for other tenants."""
    found = _decision_read().fetch(tenant.pk, external_id)
    if found is None:
        raise NotFound(f"workflow {external_id!r} not found", code="workflow_not_found")
    workflow, spec, source, newest_status = found
    workflow._decision_prefetch = {  # type: ignore[attr-defined]  # read back by decision_policy and _last_candidate_failed
        "policy": (spec, source),
        "last_summary_status": newest_status,
    }
    return workflow


def decision_policy(workflow: Workflow) -> tuple[PolicySpec, str]:
    """(spec, source) for a decision: read along with the workflow when it came from
    ``workflow_for_decision``, else looked up."""
    prefetched = getattr(workflow, "_decision_prefetch", None)
    if prefetched is not None:
        return prefetched["policy"]
    spec, source, _row = effective_policy(workflow.tenant_id, workflow)
    return spec, source


def stateful_inputs(
    workflow: Workflow, body: dict[str, Any], *, now: datetime | None = None
) -> DecisionInputs:
    """Decision inputs for ``workflow``: running totals from the row, the rest from ``body``.

    The server's own counts of unresolved tool calls and pending side effects are used; a caller
    may report more (e.g. a call not appended yet) but never fewer. The same holds for a failed
    validation of the last candidate.
    """
    refused = sorted(set(body) & SERVER_FIELDS)
    if refused:
        raise InvalidInput(
            f"{', '.join(refused)}: read from the workflow's running totals; use POST /api/v1/triggers/evaluate/ "
            "for what-if numbers",
            code="invalid_trigger_input",
        )
    unknown = sorted(set(body) - STATEFUL_FIELDS)
    if unknown:
        raise _errors_to_invalid([(key, "unknown field") for key in unknown], code="invalid_trigger_input")
    now = now or timezone.now()
    since_tokens, since_seconds = _since_last_compaction(workflow, now)
    raw: dict[str, Any] = {
        "current_tokens": workflow.history_tokens,
        "message_count": workflow.tail_events,
        "tokens_since_last_compaction": since_tokens,
        "seconds_since_last_compaction": since_seconds,
    }
    raw.update(body)
    inputs, errors = DecisionInputs.parse(raw)
    if errors or inputs is None:
        raise _errors_to_invalid(errors, code="invalid_trigger_input")
    return replace(
        inputs,
        unresolved_tool_calls=max(inputs.unresolved_tool_calls, len(workflow.open_tool_calls)),
        pending_side_effects=max(inputs.pending_side_effects, len(workflow.pending_side_effects)),
        last_validation_failed=inputs.last_validation_failed or _last_candidate_failed(workflow),
    )


def evaluate_for(workflow: Workflow, inputs: dict[str, Any]) -> tuple[Decision, DecisionInputs, str]:
    """The decision for ``workflow`` now, unlogged: (decision, the inputs it used, policy source)."""
    spec, source = decision_policy(workflow)
    decision_inputs = stateful_inputs(workflow, dict(inputs))
    return evaluate(spec, decision_inputs), decision_inputs, source


def decide(
    workflow: Workflow, inputs: dict[str, Any], actor: Actor, *, enqueue: bool = False
) -> TriggerDecision:
    """Evaluate the workflow's policy on its running totals, log the decision, maybe compact.

    With ``enqueue`` and action ``compact``, the compaction job for the current head is requested
    (idempotent: asking again at the same head returns the same job) and linked to the decision.
    """
    inputs = dict(inputs)
    estimate = None
    if "token_estimate" in inputs or "token_estimate_model" in inputs:
        # The client's own count of the history now: its drift from ours is recorded.
        estimate = parse_estimate(
            inputs.pop("token_estimate", None), inputs.pop("token_estimate_model", None), "token_estimate"
        )
    decision, decision_inputs, source = evaluate_for(workflow, inputs)
    report = decision.to_dict()
    details = {
        key: report[key]
        for key in (
            "over_by",
            "headroom",
            "fired",
            "blocked_by",
            "suppressed_by",
            "cost_benefit",
            "require_approval",
        )
    }
    details["policy_source"] = source
    details["enqueue_requested"] = bool(enqueue)
    # Decisions that act (compact, retrieve_or_block), ask for a job, carry an estimate, project
    # past the hard limit (an overflow incident) or run inside a caller's transaction are committed
    # synchronously and returned with their decision_id. A plain "continue" is the hot path an
    # agent calls before every step: its row is buffered and written in a batch
    # (triggers.decision_log), so it is answered without an id.
    row = TriggerDecision(
        tenant_id=workflow.tenant_id,
        workflow=workflow,
        action=decision.action,
        strategy=decision.strategy or "",
        reasons=decision.reasons,
        # Its fields are scalars: a shallow copy (asdict's deep one cost ~10 % of the call).
        inputs=dict(vars(decision_inputs)),
        current_tokens=decision.current_tokens,
        expected_next_step_tokens=decision.expected_next_step_tokens,
        projected_tokens=decision.projected_tokens,
        safe_budget=decision.safe_budget,
        target_tokens=decision.target_tokens,
        hard_limit=decision.hard_limit,
        details=details,
        head_seq=workflow.head_seq,
        actor=str(actor),
    )
    if (
        not enqueue
        and estimate is None  # an estimate writes its drift row with the decision
        and decision.action not in DURABLE_ACTIONS
        and not is_overflow_incident(decision.projected_tokens, decision.hard_limit)
        and connection.get_autocommit()
        and not connection.in_atomic_block
    ):
        decision_log.buffer.append(row)
        row.durable = False
        return row
    # One INSERT is atomic on its own; the transaction is only needed to tie a job or an estimate
    # to its decision.
    with transaction.atomic() if enqueue or estimate else nullcontext():
        if enqueue and decision.action == ACTION_COMPACT:
            row.job, _ = request_compaction(workflow, source_revision=workflow.head_seq, actor=actor)
        if estimate is not None:
            recorded = record_trigger_estimate(workflow, estimate, decision_policy(workflow)[0].model)
            if recorded is not None:
                details["token_estimate"] = {
                    "estimated": recorded.estimated,
                    "exact": recorded.exact,
                    "drift": round(recorded.drift, 4),
                    "model": recorded.model,
                }
        row.save(force_insert=True)
    return row


# Decisions whose log row is always committed synchronously (never lost in a crash).
DURABLE_ACTIONS = frozenset({ACTION_COMPACT, ACTION_RETRIEVE_OR_BLOCK})


def decision_payload(row: TriggerDecision) -> dict[str, Any]:
    """The contract's decision shape for a logged decision (plus the log's extras)."""
    details = row.details or {}
    return {
        "action": row.action,
        "strategy": row.strategy or None,
        "reasons": list(row.reasons),
        "current_tokens": row.current_tokens,
        "expected_next_step_tokens": row.expected_next_step_tokens,
        "projected_tokens": row.projected_tokens,
        "safe_budget": row.safe_budget,
        "target_tokens": row.target_tokens,
        "hard_limit": row.hard_limit,
        # A buffered row has no id yet (see triggers.decision_log).
        "decision_id": row.pk if row.durable else None,
        "durable": row.durable,
        "over_by": details.get("over_by", max(0, row.projected_tokens - row.safe_budget)),
        "headroom": details.get("headroom", max(0, row.safe_budget - row.projected_tokens)),
        "fired": details.get("fired", []),
        "blocked_by": details.get("blocked_by", []),
        "suppressed_by": details.get("suppressed_by"),
        "cost_benefit": details.get("cost_benefit"),
        "require_approval": details.get("require_approval", False),
        "policy_source": details.get("policy_source"),
        "head_seq": row.head_seq,
        "job_id": str(row.job_id) if row.job_id else None,
        "inputs": row.inputs,
        "actor": row.actor,
        "at": row.at.isoformat(),
    }


def decisions_for(workflow: Workflow) -> QuerySet[TriggerDecision]:
    """A workflow's decision log, newest first (index triggers_decision_wf_at)."""
    return TriggerDecision.objects.filter(workflow=workflow).order_by("-at", "-id")


# --------------------------------------------------------------------------------------------
# Stateless what-if
# --------------------------------------------------------------------------------------------


def evaluate_what_if(tenant: Tenant, body: Any) -> dict[str, Any]:
    """POST /triggers/evaluate/: an inline policy or a workflow's, explicit inputs; nothing logged."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    body = dict(body)
    policy_data = body.pop("policy", None)
    workflow_id = body.pop("workflow", None)
    if policy_data is not None and workflow_id is not None:
        raise InvalidInput("give either 'policy' or 'workflow', not both", code="invalid_body")
    if workflow_id is not None:
        if not isinstance(workflow_id, str):
            raise InvalidInput("'workflow' must be a workflow external_id", code="invalid_body")
        spec, source, _ = effective_policy(tenant, get_workflow(tenant, workflow_id))
    elif policy_data is not None:
        spec, source = parse_policy(policy_data), "inline"
    else:
        spec, source, _ = effective_policy(tenant)
    inputs, errors = DecisionInputs.parse(body)
    if errors or inputs is None:
        raise _errors_to_invalid(errors, code="invalid_trigger_input")
    result = evaluate(spec, inputs).to_dict()
    result["decision_id"] = None
    result["policy_source"] = source
    return result


# --------------------------------------------------------------------------------------------
# Simulator
# --------------------------------------------------------------------------------------------

GROUPINGS = ("event", "trace", "agent")


def recorded_growth(
    workflow: Workflow, *, group: str = "auto", limit: int = MAX_SIMULATION_EVENTS
) -> dict[str, Any]:
    """The workflow's token growth as simulator steps.

    ``group``: ``event`` (each event is a step), ``agent`` (consecutive events of one agent are
    one step), ``trace`` (events between two recorded model calls are one step) or ``auto``
    (trace when the workflow has consumer traces, else agent). A step that starts with a
    different agent than the previous one is a handoff: a workflow boundary.
    """
    if group not in (*GROUPINGS, "auto"):
        raise InvalidInput(f"group must be one of auto, {', '.join(GROUPINGS)}", code="invalid_parameter")
    rows = list(
        Event.objects.filter(workflow=workflow, seq__lte=limit)
        .order_by("seq")
        .values_list("seq", "token_count", "agent")
    )
    cuts: list[int] = []
    if group in ("auto", "trace"):
        cuts = sorted(
            set(
                ConsumerTrace.objects.filter(workflow=workflow, tail_to_seq__gt=0).values_list(
                    "tail_to_seq", flat=True
                )
            )
        )
        if group == "auto":
            group = "trace" if cuts else "agent"
    steps: list[int] = []
    agents: list[str] = []
    last_seqs: list[int] = []
    cut_iter = iter(cuts)
    next_cut = next(cut_iter, None)
    start_new = True
    for seq, tokens, agent in rows:
        if start_new or group == "event" or (group == "agent" and agent != agents[-1]):
            steps.append(tokens)
            agents.append(agent)
            last_seqs.append(seq)
        else:
            steps[-1] += tokens
            last_seqs[-1] = seq
        start_new = False
        # trace: a recorded model call read through this seq, so the next event starts a new step.
        while group == "trace" and next_cut is not None and seq >= next_cut:
            next_cut = next(cut_iter, None)
            start_new = True
    if len(steps) > MAX_SIMULATION_STEPS:
        raise InvalidInput(
            f"{len(steps)} steps is over the simulator's limit of {MAX_SIMULATION_STEPS}; use a coarser group",
            code="too_many_steps",
        )
    boundaries = [i + 1 for i in range(1, len(agents)) if agents[i] != agents[i - 1]]
    return {
        "group": group,
        "steps": steps,
        "boundaries": boundaries,
        "agents": agents,
        "last_seqs": last_seqs,
        "events": len(rows),
        "truncated": workflow.head_seq > limit,
    }


def _simulation_options(body: dict[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    ratio = body.get("compaction_ratio")
    if ratio is not None:
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise InvalidInput("compaction_ratio must be a number between 0 and 1", code="invalid_parameter")
        options["compaction_ratio"] = float(ratio)
    seconds = body.get("seconds_per_step")
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise InvalidInput("seconds_per_step must be a non-negative number", code="invalid_parameter")
        options["seconds_per_step"] = float(seconds)
    know = body.get("know_remaining_steps")
    if know is not None:
        if not isinstance(know, bool):
            raise InvalidInput("know_remaining_steps must be true or false", code="invalid_parameter")
        options["know_remaining_steps"] = know
    return options


def simulate_workflow(workflow: Workflow, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replay the workflow's recorded growth under its current policy and a candidate.

    ``body``: {"candidate": partial policy merged onto the current one, "group", "compaction_ratio",
    "seconds_per_step", "know_remaining_steps"}.
    """
    body = dict(body or {})
    unknown = sorted(
        set(body) - {"candidate", "group", "compaction_ratio", "seconds_per_step", "know_remaining_steps"}
    )
    if unknown:
        raise InvalidInput(f"unknown field(s) {unknown}", code="invalid_body")
    current, source, _ = effective_policy(workflow.tenant_id, workflow)
    candidate_data = body.get("candidate") or {}
    if not isinstance(candidate_data, dict):
        raise InvalidInput("'candidate' must be a policy object", code="invalid_policy")
    try:
        candidate = parse_policy(candidate_data, base=current)
    except InvalidInput as exc:
        exc.detail = "candidate: " + exc.detail
        raise
    growth = recorded_growth(workflow, group=body.get("group") or "auto")
    options = _simulation_options(body)
    result = compare(current, candidate, growth["steps"], boundaries=growth["boundaries"], **options)
    result["workflow"] = workflow.external_id
    result["policy_source"] = source
    result["growth"] = {k: growth[k] for k in ("group", "events", "truncated", "boundaries")}
    result["current_policy"] = current.to_dict()
    result["candidate_policy"] = candidate.to_dict()
    result["candidate_notes"] = [{"field": f, "note": n} for f, n in candidate.inert_thresholds()]
    return result


def simulate_steps(tenant: Tenant, body: Any) -> dict[str, Any]:
    """Stateless simulation of explicit steps: {"steps", "boundaries"?, "initial_tokens"?,
    "policy"? (else the tenant default), "candidate"? (merged onto it), …options}."""
    if not isinstance(body, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    allowed = {
        "steps",
        "boundaries",
        "initial_tokens",
        "policy",
        "candidate",
        "compaction_ratio",
        "seconds_per_step",
        "know_remaining_steps",
    }
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"unknown field(s) {unknown}", code="invalid_body")
    steps = body.get("steps")
    if (
        not isinstance(steps, list)
        or not steps
        or len(steps) > MAX_SIMULATION_STEPS
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
    ):
        raise InvalidInput(
            f"'steps' must be a list of 1-{MAX_SIMULATION_STEPS} non-negative integers (tokens added per step)",
            code="invalid_parameter",
        )
    boundaries = body.get("boundaries") or []
    if not isinstance(boundaries, list) or not all(
        isinstance(b, int) and not isinstance(b, bool) for b in boundaries
    ):
        raise InvalidInput("'boundaries' must be a list of 1-based step numbers", code="invalid_parameter")
    initial = body.get("initial_tokens", 0)
    if isinstance(initial, bool) or not isinstance(initial, int) or initial < 0:
        raise InvalidInput("'initial_tokens' must be a non-negative integer", code="invalid_parameter")
    if body.get("policy") is not None:
        current, source = parse_policy(body["policy"]), "inline"
    else:
        current, source, _ = effective_policy(tenant)
    candidate_data = body.get("candidate") or {}
    if not isinstance(candidate_data, dict):
        raise InvalidInput("'candidate' must be a policy object", code="invalid_policy")
    candidate = parse_policy(candidate_data, base=current)
    options = _simulation_options(body)
    result = compare(current, candidate, steps, boundaries=boundaries, initial_tokens=initial, **options)
    result["policy_source"] = source
    result["current_policy"] = current.to_dict()
    result["candidate_policy"] = candidate.to_dict()
    return result


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def policy_diff(current: PolicySpec, candidate: PolicySpec) -> list[dict[str, Any]]:
    """What saving ``candidate`` would change: ``[{"field", "current", "candidate"}]`` for every
    stored field (strategy settings as ``strategies.<name>.<key>``) whose value differs."""
    before, after = _flatten(current.to_dict()), _flatten(candidate.to_dict())
    stored = set(POLICY_FIELDS) | {"strategies"}
    return [
        {"field": name, "current": before.get(name), "candidate": after.get(name)}
        for name in sorted(before.keys() | after.keys())
        if name.split(".", 1)[0] in stored and before.get(name) != after.get(name)
    ]
