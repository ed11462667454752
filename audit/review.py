"""Review actions from the dashboard (approve, quarantine, reject, waive, release, rollback).

A thin adapter over ``memoryhub.lifecycle``: it checks the form (a reason is always required,
rollback needs the revision the reviewer saw, a waiver names checks) and calls the lifecycle
service, which appends the LifecycleEvent and the AuditEntry in one transaction. Roles are the
view's job: ``ActionSpec.role`` is the least role allowed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryhub.actors import Actor
from memoryhub.errors import InvalidInput, NotFound
from memoryhub.models import Role, Summary, Tenant, role_at_least

MAX_REASON = 2000
# Allowed by the state machine but pointless as a button: a REJECTED version already serves nobody
# (purges still quarantine such versions through the service).
HIDDEN = frozenset({("quarantine", "REJECTED")})


@dataclass(frozen=True)
class ActionSpec:
    name: str
    label: str
    role: str
    help: str
    danger: bool = False
    needs_revision: bool = False
    needs_checks: bool = False


ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "approve",
            "Approve",
            Role.REVIEWER,
            "Approve a validated version that awaits human approval.",
        ),
        ActionSpec(
            "quarantine",
            "Quarantine",
            Role.REVIEWER,
            "Take the version out of service; if it is active, the pointer falls back to an older version.",
            danger=True,
        ),
        ActionSpec(
            "reject",
            "Reject",
            Role.REVIEWER,
            "Reject the version: it can never become active.",
            danger=True,
        ),
        ActionSpec(
            "waive",
            "Waive checks",
            Role.REVIEWER,
            "Accept named failed validation checks; the version becomes VALIDATED.",
            needs_checks=True,
        ),
        ActionSpec(
            "release",
            "Release",
            Role.ADMIN,
            "Release a quarantined version back to the status its latest validation gives it.",
        ),
        ActionSpec(
            "rollback",
            "Roll back to this version",
            Role.REVIEWER,
            "Make this older version active again (compare-and-swap on the active revision).",
            danger=True,
            needs_revision=True,
        ),
    )
}


def available_actions(summary: Summary, role: str | None, names: list[str] | None = None) -> list[ActionSpec]:
    """The review actions ``role`` may take on ``summary`` in its current status (for buttons)."""
    from memoryhub.lifecycle import ALLOWED_FROM  # the lifecycle service owns the state machine

    return [
        spec
        for spec in ACTIONS.values()
        if (names is None or spec.name in names)
        and role_at_least(role, spec.role)
        and summary.status in ALLOWED_FROM[spec.name]
        and (spec.name, summary.status) not in HIDDEN
    ]


def get_summary(tenant: Tenant, summary_id: str) -> Summary:
    summary = Summary.objects.filter(tenant=tenant, summary_id=summary_id).select_related("workflow").first()
    if summary is None:
        raise NotFound(f"summary {summary_id!r} not found", code="summary_not_found")
    return summary


def failed_checks(summary: Summary) -> list[str]:
    """Names of failed checks in the latest validation record (what a waiver can name)."""
    record = summary.validations.order_by("-created_at", "-id").first()
    if record is None or not isinstance(record.checks, list):
        return []
    waived = set(record.waived_checks or [])
    return [
        c["name"]
        for c in record.checks
        if isinstance(c, dict) and not c.get("passed", True) and c.get("name") not in waived
    ]


def clean_reason(reason: Any) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("a reason is required for every review action", code="reason_required")
    if len(reason) > MAX_REASON:
        raise InvalidInput(f"the reason must be at most {MAX_REASON} characters", code="invalid_reason")
    return reason.strip()


def run_action(
    action: str,
    summary: Summary,
    actor: Actor,
    *,
    reason: Any,
    expected_revision: Any = None,
    checks: list[str] | None = None,
) -> str:
    """Run one review action through the lifecycle service; returns a one-line outcome for the UI."""
    from memoryhub import lifecycle

    spec = ACTIONS[action]
    reason = clean_reason(reason)
    if spec.needs_revision:
        try:
            revision = int(expected_revision)
        except (TypeError, ValueError):
            raise InvalidInput(
                "expected_revision (the active revision you saw) is required", code="invalid_revision"
            )
        if revision < 0:
            raise InvalidInput("expected_revision must be a non-negative integer", code="invalid_revision")
        result = lifecycle.rollback(summary, revision, actor, reason)
        error = result.error()
        if error is not None:  # stale or refused: the attempt is recorded, nothing moved
            raise error
    elif spec.needs_checks:
        names = [c for c in (checks or []) if c]
        if not names:
            raise InvalidInput("name at least one failed check to waive", code="invalid_checks")
        lifecycle.waive(summary, names, actor, reason)
    else:
        getattr(lifecycle, action)(summary, actor, reason)
    summary.refresh_from_db(fields=["status"])
    return f"{spec.label}: {summary.label} is now {summary.status}."
