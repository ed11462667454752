"""Which context policy governs a workflow: its override, else the tenant default, else the defaults.

The lookup sits low (beside the audit-log append) so that the memory domain — ingest, lifecycle,
compaction jobs, quality — can ask "what does the policy say?" without importing the trigger
services that sit above it.
"""

from __future__ import annotations

from django.db.models import F, Q, Value
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Coalesce

from memoryhub.models import Tenant, Workflow
from triggers.engine import PolicySpec
from triggers.models import ContextPolicy

SOURCE_WORKFLOW, SOURCE_TENANT, SOURCE_DEFAULT = "workflow", "tenant", "default"

# PolicySpec fields stored as ContextPolicy columns (strategies is a JSON column).
POLICY_FIELDS = (
    "model",
    "encoding",
    "context_window",
    "reserve_system",
    "reserve_retrieval",
    "reserve_output",
    "safety_margin",
    "target_tokens",
    "min_new_tokens",
    "min_interval_seconds",
    "hard_limit_tokens",
    "require_approval",
    "strategies",
    "quality",
    "repair",
)


def spec_from_row(row: ContextPolicy) -> PolicySpec:
    """The engine's view of a stored policy (missing strategies take their defaults)."""
    data = {name: getattr(row, name) for name in POLICY_FIELDS}
    return PolicySpec.from_dict(data)


def policy_row_for(
    tenant: Tenant | int, workflow: Workflow | None = None
) -> tuple[ContextPolicy | None, str]:
    """The stored policy that applies and where it comes from, in one query (tenant: row or id)."""
    if workflow is None:
        row = ContextPolicy.objects.filter(tenant=tenant, workflow__isnull=True).first()
        return row, (SOURCE_TENANT if row else SOURCE_DEFAULT)
    # By id, so a workflow fetched without its tenant costs no extra query.
    rows = list(
        ContextPolicy.objects.filter(
            Q(workflow_id=workflow.pk) | Q(workflow__isnull=True), tenant_id=workflow.tenant_id
        ).order_by(F("workflow").asc(nulls_last=True))[:2]
    )
    for row in rows:
        if row.workflow_id == workflow.pk:
            return row, SOURCE_WORKFLOW
    if rows:
        return rows[0], SOURCE_TENANT
    return None, SOURCE_DEFAULT


def effective_policy(
    tenant: Tenant | int, workflow: Workflow | None = None
) -> tuple[PolicySpec, str, ContextPolicy | None]:
    """(spec, source, row): the workflow override, else the tenant default, else the seed defaults."""
    row, source = policy_row_for(tenant, workflow)
    return (spec_from_row(row) if row else PolicySpec()), source, row


def policy_for(workflow: Workflow) -> PolicySpec:
    """The policy that governs ``workflow`` (service contract used by other areas)."""
    return effective_policy(workflow.tenant_id, workflow)[0]


# --- the safe budget and "over budget" --------------------------------------------------------


def tenant_safe_budget(tenant: Tenant | int) -> int:
    """The safe budget of the tenant default policy (else the seed defaults'): one query."""
    return effective_policy(tenant)[0].safe_budget


def _stored_safe_budget(prefix: str) -> CombinedExpression:
    """ContextPolicy.safe_budget (= PolicySpec.safe_budget) in SQL, for columns under ``prefix``."""
    return (
        F(f"{prefix}context_window")
        - F(f"{prefix}reserve_system")
        - F(f"{prefix}reserve_retrieval")
        - F(f"{prefix}reserve_output")
        - F(f"{prefix}safety_margin")
    )


def effective_safe_budget_sql(tenant_budget: int) -> Coalesce:
    """Per Workflow row, ``policy_for(workflow).safe_budget`` in SQL: its override's budget (one
    LEFT JOIN), else ``tenant_budget`` (``tenant_safe_budget``, read once by the caller)."""
    return Coalesce(_stored_safe_budget("context_policy__"), Value(tenant_budget))


def is_over_budget(history_tokens: int, safe_budget: int) -> bool:
    """The one definition of a workflow over budget: what the model would read now (active summary
    + uncompacted tail, ``Workflow.history_tokens``) exceeds the safe budget of the policy that
    governs the workflow (its override, else the tenant default) — the budget the trigger engine
    decides against. ``over_budget_q`` is the same rule in SQL."""
    return history_tokens > safe_budget


def over_budget_q(tenant_budget: int) -> Q:
    """``is_over_budget`` over Workflow rows (``tenant_budget``: see effective_safe_budget_sql)."""
    return Q(tail_tokens__gt=effective_safe_budget_sql(tenant_budget) - F("summary_tokens"))
