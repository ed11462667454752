"""Review actions from the dashboard (validate, approve, activate, quarantine, reject, waive, release,
rollback) and comments on a summary.

A thin adapter over ``memoryhub.memory.lifecycle``: it reads the form (a reason, except to
validate; the revision the reviewer saw for activate/rollback/approve-and-activate; the checks a
waiver names), asks ``lifecycle.check_allowed`` and calls the lifecycle service, which appends the
LifecycleEvent and the AuditEntry in one transaction. Who may press which button is
``lifecycle.allowed_actions`` (the API asks the same rule); this module only adds labels and
help texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from django.db import transaction
from django.db.models import Count, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from audit.log import record
from audit.models import SummaryComment
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import hash_text
from memoryhub.core.errors import InvalidInput, NotFound
from memoryhub.memory import lifecycle
from memoryhub.models import Summary, Tenant, Workflow
from memoryhub.models import SummaryStatus as S


@dataclass(frozen=True)
class ActionSpec:
    name: str
    label: str
    help: str
    danger: bool = False
    needs_revision: bool = False
    needs_checks: bool = False
    needs_reason: bool = True

    @property
    def role(self) -> str:
        return lifecycle.ACTION_ROLES[self.name]

    @property
    def style(self) -> str:
        return "danger" if self.danger else "primary"


ACTIONS: dict[str, ActionSpec] = {
    spec.name: spec
    for spec in (
        ActionSpec(
            "validate",
            "Validate",
            "Run the validator on this candidate: it becomes VALIDATED, or REJECTED with the failed checks.",
            needs_reason=False,
        ),
        ActionSpec(
            "approve",
            "Approve and activate",
            "Approve this version and make it live at the revision you saw (compare-and-swap). If "
            "another version went live meanwhile, the approval stands and Activate is offered.",
            needs_revision=True,
        ),
        ActionSpec(
            "activate",
            "Activate",
            "Make this validated version the active one (compare-and-swap on the active revision).",
            needs_revision=True,
        ),
        ActionSpec(
            "rollback",
            "Roll back to this version",
            "Make this earlier active version active again (compare-and-swap on the active revision).",
            danger=True,
            needs_revision=True,
        ),
        ActionSpec(
            "waive",
            "Waive checks",
            "Accept named failed validation checks; the version becomes VALIDATED.",
            needs_checks=True,
        ),
        ActionSpec(
            "reject",
            "Reject",
            "Reject the version: it can never become active.",
            danger=True,
        ),
        ActionSpec(
            "quarantine",
            "Quarantine",
            "Take the version out of service; if it is active, the pointer falls back to an older version.",
            danger=True,
        ),
        ActionSpec(
            "release",
            "Release",
            "Release a quarantined version back to the status its latest validation gives it.",
        ),
    )
}


def available_actions(
    summary: Summary, role: str | None, policy: lifecycle.ActionPolicy | None = None
) -> list[ActionSpec]:
    """The review buttons ``role`` gets on ``summary`` now: ``lifecycle.allowed_actions``, labelled."""
    policy = policy if policy is not None else lifecycle.action_policy(summary)
    return [ACTIONS[name] for name in lifecycle.allowed_actions(summary, role, policy)]


def get_summary(tenant: Tenant, summary_id: str) -> Summary:
    summary = Summary.objects.filter(tenant=tenant, summary_id=summary_id).select_related("workflow").first()
    if summary is None:
        raise NotFound(f"summary {summary_id!r} not found", code="summary_not_found")
    return summary


def failed_checks(summary: Summary) -> list[str]:
    """Names of failed, unwaived checks in the latest validation record (what a waiver can name)."""
    return lifecycle.failed_checks(lifecycle.latest_validation(summary))


def _revision(value: Any) -> int:
    """The revision a form posted (text) → ``lifecycle.clean_revision``."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise InvalidInput(
            "expected_revision (the active revision you saw) is required", code="expected_revision_required"
        )
    try:
        number: int | None = int(text)
    except ValueError:
        number = None
    return lifecycle.clean_revision(number)


def run_action(
    action: str,
    summary: Summary,
    actor: Actor,
    role: str | None,
    *,
    reason: Any,
    expected_revision: Any = None,
    checks: list[str] | None = None,
) -> str:
    """Run one review action through the lifecycle service; returns a one-line outcome for the UI.

    The input is checked first (400, nothing written), then ``lifecycle.check_allowed`` (the
    buttons' rule: 403, or a recorded 409), then the service. A stale activate/rollback raises
    its 409; approve-and-activate whose activation was stale returns normally (the approval
    stands) and says so.
    """
    spec = ACTIONS[action]
    reason = lifecycle.clean_reason(reason, required=spec.needs_reason)
    revision = _revision(expected_revision) if spec.needs_revision else None
    names = lifecycle.clean_checks(checks or []) if spec.needs_checks else []
    cas = action in ("activate", "rollback")
    lifecycle.check_allowed(summary, action, actor, role, reason=reason, expected=revision if cas else None)
    if action == "approve":
        result = lifecycle.approve_and_activate(summary, cast(int, revision), actor, reason)
        if result.applied:
            return f"{summary.label} approved and now ACTIVE (revision {result.active_revision})."
        return (
            f"{summary.label} approved, but not activated: {result.detail} "
            f"Activate it at revision {result.active_revision} when ready."
        )
    if cas:
        run = lifecycle.activate if action == "activate" else lifecycle.rollback
        result = run(summary, cast(int, revision), actor, reason=reason)
        error = result.error()
        if error is not None:  # stale: the attempt is recorded, nothing moved
            raise error
        return f"{spec.label}: {summary.label} is now ACTIVE (revision {result.active_revision})."
    if action == "validate":
        lifecycle.validate(summary, actor)
    elif spec.needs_checks:
        lifecycle.waive(summary, names, actor, reason)
    else:
        getattr(lifecycle, action)(summary, actor, reason)
    summary.refresh_from_db(fields=["status"])
    return f"{spec.label}: {summary.label} is now {summary.status}."


# -- comments --------------------------------------------------------------------------------------


def add_comment(summary: Summary, actor: Actor, text: Any) -> SummaryComment:
    """A reviewer's comment on a summary (who, when, text), audited in the same transaction.

    The text is held in the comment row, and the audit entry keeps its digest only, so a purge
    of the summary's workflow can erase it (comments quote source material)."""

    body = lifecycle.clean_reason(text, field="comment")
    with transaction.atomic():
        comment = SummaryComment.objects.create(
            tenant_id=summary.tenant_id, summary=summary, author=str(actor), text=body
        )
        record(
            summary.tenant,
            actor,
            "summary.comment",
            summary,
            {
                "workflow": summary.workflow.external_id,
                "version": summary.version,
                "comment": comment.pk,
                "text_sha256": hash_text(body),
                "chars": len(body),
            },
        )
    return comment


# -- review inbox ----------------------------------------------------------------------------------

INBOX_LIMIT = 200


@dataclass(frozen=True)
class InboxRow:
    summary: Summary
    why: str  # awaiting_approval | candidate | failed_checks | quarantined

    @property
    def why_label(self) -> str:
        return {
            "awaiting_approval": "awaiting approval",
            "candidate": "candidate: not validated yet",
            "failed_checks": "rejected: failed checks",
            "quarantined": "quarantined",
        }[self.why]


# Besides VALIDATED versions awaiting approval, the statuses that put a summary in the inbox.
INBOX_OTHER_STATUSES = (S.CANDIDATE, S.QUARANTINED, S.REJECTED)


def inbox_queryset(tenant_id: int):
    """Summaries that wait for a reviewer: awaiting approval, candidates, rejected by failed
    checks, quarantined. Unpurged only. "Failed checks" is the newest validation record's
    ``passed`` being False, which ``Summary.checks_failed`` keeps (written with each record):
    ``validation.judged`` sets ``passed`` False exactly when ``lifecycle.failed_checks`` is not
    empty."""
    # The four statuses first (the (tenant, status) index), so the correlated part below runs on
    # the few rows that can be in the inbox, never on the tenant's whole history of superseded
    # versions (2.6 s for the overview of a 100k-summary tenant before).
    base = Summary.objects.filter(
        tenant_id=tenant_id, purged_by__isnull=True, status__in=[S.VALIDATED, *INBOX_OTHER_STATUSES]
    )
    awaiting = lifecycle.awaiting_approval(tenant_id).values("pk")
    return base.filter(
        Q(status=S.VALIDATED, pk__in=awaiting)
        | Q(status__in=[S.CANDIDATE, S.QUARANTINED])
        | Q(status=S.REJECTED, checks_failed=True)
    )


def inbox_counts(tenant_id: int) -> dict[str, int]:
    """How many wait, by reason, in one round trip (the nav badge and the overview card): each
    reason counted apart from its own index, "failed checks" from the index of exactly those
    (a tenant's rejected versions pile up: counting them through the four-reason filter read
    every row)."""
    base = Summary.objects.filter(tenant_id=tenant_id, purged_by__isnull=True)
    reasons = {
        "awaiting_approval": base.filter(
            status=S.VALIDATED, pk__in=lifecycle.awaiting_approval(tenant_id).values("pk")
        ),
        "candidates": base.filter(status=S.CANDIDATE),
        "failed_checks": base.filter(status=S.REJECTED, checks_failed=True),
        "quarantined": base.filter(status=S.QUARANTINED),
    }
    counted = Tenant.objects.filter(pk=tenant_id).values(
        **{reason: Coalesce(Subquery(_count(rows)), 0) for reason, rows in reasons.items()}
    )
    counts = cast(dict[str, int], counted.get())
    return {"total": sum(counts.values()), **counts}


def _count(rows: QuerySet[Summary]) -> QuerySet[Any, Any]:
    """``rows`` counted, as a subquery: COUNT(*) grouped by the one tenant they all share."""
    return rows.order_by().values("tenant_id").annotate(n=Count("*")).values("n")  # index-only


def inbox_count(tenant_id: int) -> int:
    return inbox_queryset(tenant_id).count()


def review_inbox(tenant_id: int, limit: int = INBOX_LIMIT) -> list[InboxRow]:
    """The inbox rows, oldest first (by when the summary reached its current status)."""

    rows = list(
        inbox_queryset(tenant_id)
        .select_related("workflow")
        .defer("content")
        .order_by("status_changed_at", "id")[:limit]
    )
    awaiting = set(
        lifecycle.awaiting_approval(tenant_id)
        .filter(pk__in=[r.pk for r in rows])
        .values_list("pk", flat=True)
    )
    why = {S.CANDIDATE: "candidate", S.QUARANTINED: "quarantined", S.REJECTED: "failed_checks"}
    return [InboxRow(s, "awaiting_approval" if s.pk in awaiting else why[s.status]) for s in rows]


def approve_and_activate_summary(summary: Summary, actor: Actor, reason: str):
    """Approve ``summary`` and make it live at the workflow's current revision (scripts, demo)."""

    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=summary.workflow_id)
    return lifecycle.approve_and_activate(summary, revision, actor, reason)
