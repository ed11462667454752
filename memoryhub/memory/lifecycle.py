"""The summary lifecycle state machine and compare-and-swap activation.

::

    CANDIDATE ─validate ok─▶ VALIDATED ─activate (CAS)─▶ ACTIVE ─another activates─▶ SUPERSEDED
        └─validate fails─▶ REJECTED ─waive (reviewer)─▶ VALIDATED       rollback (CAS) ◀──┘
    any but QUARANTINED ─quarantine (reviewer)─▶ QUARANTINED ─release (admin, reason)─▶ VALIDATED

Rules every function here keeps:

- Every action takes the workflow row lock first (``SELECT … FOR UPDATE``; the IMMEDIATE
  transaction on SQLite), so status changes and the active pointer of one workflow never
  interleave. Lock order is always workflow → summaries → audit chain head.
- Every transition *and* every refused or stale attempt appends a LifecycleEvent plus an
  AuditEntry in the same transaction as the change. Refusals commit their row before the error
  is raised (after the atomic block), so a 409 always leaves its trace.
- The active pointer moves only by ``UPDATE workflow … WHERE id=… AND active_revision=<n>``
  (``== 1`` checked). **Revision-bumping actions** — each bumps ``active_revision`` by exactly
  one: ``activate``; ``rollback``; and ``quarantine`` of the ACTIVE summary (the pointer falls
  back to the newest older VALIDATED/SUPERSEDED version, recorded as an automatic ``rollback``
  event on that version, or to none, recorded on the quarantine event). Each pointer move
  writes exactly one applied LifecycleEvent carrying ``observed_revision`` = the revision it
  replaced (no other applied event carries a revision), so ``active_revision`` equals the number
  of those events and their observed revisions are exactly ``0 .. active_revision − 1``.
- ``release`` returns a summary to VALIDATED when its latest validation record passed; one that
  never passed validation goes back to CANDIDATE (no record) or REJECTED (failed record), so a
  quarantine/release round trip can never skip validation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from audit.log import record
from audit.models import Purge
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, DomainError, Forbidden, InvalidInput
from memoryhub.core.opaque import OPAQUE_SCHEMA, OPAQUE_VALIDATOR_VERSION, opaque_checks
from memoryhub.core.quality import merged_quality
from memoryhub.memory.events import tokens_through
from memoryhub.memory.sources import source_events
from memoryhub.memory.validation import ValidationOutcome, WaiverError, apply_waivers, validate_summary
from memoryhub.memory.workflows import workflow_encoding
from memoryhub.models import (
    LifecycleAction,
    LifecycleEvent,
    LifecycleResult,
    Role,
    Summary,
    SummaryStatus,
    ValidationRecord,
    Workflow,
    role_at_least,
)
from triggers.models import ContextPolicy
from triggers.policy import policy_for

S = SummaryStatus
A = LifecycleAction
T = TypeVar("T")

# action -> statuses it may start from
ALLOWED_FROM: dict[str, frozenset[str]] = {
    A.VALIDATE: frozenset({S.CANDIDATE}),
    A.REJECT: frozenset({S.CANDIDATE, S.VALIDATED}),
    # SUPERSEDED: a version activated before approval was required needs one before a rollback.
    A.APPROVE: frozenset({S.VALIDATED, S.SUPERSEDED}),
    A.ACTIVATE: frozenset({S.VALIDATED}),
    A.QUARANTINE: frozenset({S.CANDIDATE, S.VALIDATED, S.ACTIVE, S.SUPERSEDED, S.REJECTED}),
    A.RELEASE: frozenset({S.QUARANTINED}),
    A.WAIVE: frozenset({S.REJECTED}),
    # Only a version that was ACTIVE before: a never-active one goes through activate (and its rules).
    A.ROLLBACK: frozenset({S.SUPERSEDED}),
}
HUMAN_ACTOR_KINDS = frozenset({"user", "api_key"})
MAX_REASON = 2000


@dataclass
class ActivationResult:
    """Outcome of an activate/rollback attempt. Only ``applied`` moved the pointer.

    ``outcome`` is applied | stale | refused; for the latter two ``code``/``detail`` say why and
    ``error()`` builds the 409 the API raises (the LifecycleEvent is already committed).
    """

    applied: bool
    active_revision: int
    summary: Summary
    outcome: str = LifecycleResult.APPLIED
    code: str = ""
    detail: str = ""
    superseded: Summary | None = None
    event: LifecycleEvent | None = None
    extra: dict[str, Any] | None = None

    def error(self) -> Conflict | None:
        if self.applied:
            return None
        return Conflict(self.detail, code=self.code, **(self.extra or {}))


class _Refused(Exception):
    """Raised inside the atomic block after the refusal row is written; re-raised after commit."""

    def __init__(self, error: DomainError) -> None:
        super().__init__(error.detail)
        self.error = error


# -- policy and approval ---------------------------------------------------------------------------


def approval_required(workflow: Workflow) -> bool:
    """``require_approval`` of the workflow's ContextPolicy, else the tenant default, else False."""

    flags: dict[int | None, bool] = dict(
        ContextPolicy.objects.filter(tenant_id=workflow.tenant_id)
        .filter(Q(workflow_id=workflow.pk) | Q(workflow__isnull=True))
        .values_list("workflow_id", "require_approval")
    )
    return bool(flags.get(workflow.pk, flags.get(None, False)))


def is_approved(summary: Summary, events: Iterable[LifecycleEvent] | None = None) -> bool:
    """A reviewer approved this summary after it was last quarantined (quarantine voids approvals)."""
    rows = (
        list(events)
        if events is not None
        else list(summary.lifecycle_events.filter(result=LifecycleResult.APPLIED))
    )
    last_quarantine = max(
        (e.pk for e in rows if e.action == A.QUARANTINE and e.result == LifecycleResult.APPLIED), default=0
    )
    return any(
        e.action == A.APPROVE and e.result == LifecycleResult.APPLIED and e.pk > last_quarantine for e in rows
    )


# -- internals -------------------------------------------------------------------------------------


def clean_reason(
    reason: Any, *, required: bool = True, field: str = "reason", limit: int = MAX_REASON
) -> str:
    """The one place reasons (and comments) are checked: a string, stripped, non-empty when
    required, at most ``limit`` characters. Raises InvalidInput (400, nothing written)."""
    text = (reason or "").strip() if isinstance(reason, str) or reason is None else None
    if text is None:
        raise InvalidInput(f"'{field}' must be a string", code=f"invalid_{field}")
    if required and not text:
        raise InvalidInput(
            f"a {field} is required for every review action (it is recorded in the audit log)",
            code=f"{field}_required",
        )
    if len(text) > limit:
        raise InvalidInput(f"'{field}' is at most {limit} characters", code=f"invalid_{field}")
    return text


def _revision(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidInput(
            "'expected_revision' must be a non-negative integer", code="invalid_expected_revision"
        )
    return value


def _lock(summary: Summary) -> tuple[Workflow, Summary]:
    """Lock the workflow row, then read everything else fresh (all status changes happen under this lock).

    The lock query joins nothing: on PostgreSQL a ``SELECT … FOR UPDATE`` that waited for another
    transaction re-checks only the locked row, so a joined active summary would be the version of
    *before* the wait (a stale status that then trips ``memoryhub_summary_one_active``). The
    active summary, the tenant and the target are read by later statements, after the lock.
    """
    wf = Workflow.objects.select_for_update().get(pk=summary.workflow_id)
    if wf.active_summary_id:
        wf.active_summary = Summary.objects.get(pk=wf.active_summary_id)
    fresh = Summary.objects.get(pk=summary.pk)
    fresh.workflow = wf
    return wf, fresh


def _run(summary: Summary, body: Callable[[Workflow, Summary], T]) -> T:
    """Run ``body`` under the workflow lock; a refusal commits its row, then raises."""
    refusal: DomainError | None = None
    with transaction.atomic():
        wf, fresh = _lock(summary)
        try:
            result = body(wf, fresh)
        except _Refused as refused:
            refusal = refused.error
    if refusal is not None:
        raise refusal
    return result


def _log(
    wf: Workflow,
    summary: Summary,
    action: str,
    result: str,
    actor: Actor,
    *,
    from_status: str,
    to_status: str = "",
    reason: str = "",
    expected: int | None = None,
    observed: int | None = None,
    prior: Summary | None | bool = True,
    source_revision: int | None = None,
    data: dict[str, Any] | None = None,
) -> LifecycleEvent:
    """Append one LifecycleEvent and its AuditEntry (caller is inside the transaction)."""

    prior_id = wf.active_summary_id if prior is True else (prior.pk if isinstance(prior, Summary) else None)
    event = LifecycleEvent.objects.create(
        tenant_id=wf.tenant_id,
        workflow=wf,
        summary=summary,
        action=action,
        from_status=from_status,
        to_status=to_status,
        result=result,
        actor=str(actor),
        actor_kind=actor.kind,
        task_attempt_id=actor.task_attempt_id,
        reason=reason,
        expected_revision=expected,
        observed_revision=observed,
        prior_active_summary_id=prior_id,
        source_revision_at_activation=source_revision,
    )
    record(
        wf.tenant,
        actor,
        f"summary.{action}",
        summary,
        {
            "workflow": wf.external_id,
            "version": summary.version,
            "result": result,
            "from": from_status,
            "to": to_status,
            "reason": reason,
            "expected_revision": expected,
            "observed_revision": observed,
            "lifecycle_event": event.pk,
            **(data or {}),
        },
    )
    return event


def _refuse(
    wf: Workflow,
    summary: Summary,
    action: str,
    actor: Actor,
    code: str,
    detail: str,
    *,
    reason: str = "",
    expected: int | None = None,
    error_cls: type[DomainError] = Conflict,
    **extra: Any,
) -> _Refused:
    observed = wf.active_revision if expected is not None else None
    _log(
        wf,
        summary,
        action,
        LifecycleResult.REFUSED,
        actor,
        from_status=summary.status,
        to_status=summary.status,
        reason=reason or detail,
        expected=expected,
        observed=observed,
        data={"code": code},
    )
    return _Refused(error_cls(detail, code=code, current_status=summary.status, **extra))


def _check_from(
    wf: Workflow,
    summary: Summary,
    action: str,
    actor: Actor,
    *,
    reason: str = "",
    expected: int | None = None,
) -> None:
    if summary.status not in ALLOWED_FROM[action]:
        allowed = ", ".join(sorted(ALLOWED_FROM[action]))
        raise _refuse(
            wf,
            summary,
            action,
            actor,
            "illegal_transition",
            f"cannot {action} S{summary.version}: it is {summary.status} (allowed from {allowed})",
            reason=reason,
            expected=expected,
        )


def _set_status(summary: Summary, status: str, now) -> None:
    Summary.objects.filter(pk=summary.pk).update(status=status, status_changed_at=now)
    summary.status, summary.status_changed_at = status, now


def _apply(
    wf: Workflow, summary: Summary, action: str, actor: Actor, *, to_status: str | None, now=None, **log: Any
) -> LifecycleEvent:
    """Move ``summary`` to ``to_status`` (None: it stays where it is) and log the applied action."""
    before = summary.status
    if to_status is not None:
        _set_status(summary, to_status, now or timezone.now())
    return _log(
        wf,
        summary,
        action,
        LifecycleResult.APPLIED,
        actor,
        from_status=before,
        to_status=summary.status,
        **log,
    )


def _move_pointer(wf: Workflow, target: Summary | None, observed: int, now, *, compaction: bool) -> bool:
    """The compare-and-swap: move the pointer only if active_revision is still ``observed``.

    Running totals follow the pointer: summary tokens, and the tail after the new watermark
    (computed from head/total in SQL, so they stay right even against a concurrent append).
    """
    watermark = target.covers_to_seq if target else 0
    covered_tokens = tokens_through(wf, watermark)
    fields: dict[str, Any] = {
        "active_summary": target,
        "active_revision": F("active_revision") + 1,
        "summary_tokens": target.token_count if target else 0,
        "tail_events": F("head_seq") - watermark,
        "tail_tokens": F("total_tokens") - covered_tokens,
        "activated_at": now if target else None,
        "updated_at": now,
    }
    if compaction:
        # Trigger hysteresis counts new tokens from here: total − tokens_at_last_compaction = tail.
        fields.update(last_compacted_at=now, tokens_at_last_compaction=covered_tokens)
    moved = Workflow.objects.filter(pk=wf.pk, active_revision=observed).update(**fields) == 1
    if moved:
        wf.active_revision = observed + 1
        wf.active_summary = target
    return moved


def _current_revision(wf: Workflow) -> int:
    return Workflow.objects.filter(pk=wf.pk).values_list("active_revision", flat=True).get()


# -- actions ---------------------------------------------------------------------------------------


def run_validator(summary: Summary, version: str | None = None):
    """Run ``memoryhub.memory.validation.validate_summary`` on the stored bytes (no lock held).

    ``version`` defaults to the workflow policy's ``quality.validator`` (rules-6 unless set),
    whose floors rules-6 applies; rules-5 stays available for the history it validated.
    """

    wf = Workflow.objects.select_related("active_summary").get(pk=summary.workflow_id)
    active = wf.active_summary if wf.active_summary_id and wf.active_summary_id != summary.pk else None
    if summary.content_schema == OPAQUE_SCHEMA:
        # Opaque (observed) content: only integrity and coverage can be checked; the rest is unverifiable.
        checks, reasons = opaque_checks(
            summary.content.encode("utf-8"),
            summary.content_hash,
            summary.covers_from_seq,
            summary.covers_to_seq,
            active.covers_to_seq if active else None,
            wf.head_seq,
        )
        return ValidationOutcome(OPAQUE_VALIDATOR_VERSION, checks, 0.0, not reasons, reasons)
    quality = merged_quality(policy_for(wf).quality)
    version = version or quality["validator"]
    return validate_summary(
        summary.content.encode("utf-8"),
        summary.content_hash,
        summary.covers_from_seq,
        summary.covers_to_seq,
        source_events(wf, summary.covers_from_seq, summary.covers_to_seq),
        active.covers_to_seq if active else None,
        summary.token_budget,
        wf.head_seq,
        encoding=workflow_encoding(wf),
        version=version,
        quality=quality,
        previous_content=_content_or_none(active),
    )


def _content_or_none(summary: Summary | None):
    if summary is None:
        return None
    try:
        return json.loads(summary.content)
    except ValueError:
        return None


def validate(summary: Summary, actor: Actor, *, outcome=None, validator: str | None = None) -> Summary:
    """CANDIDATE → VALIDATED (every check passed) or REJECTED, with a new ValidationRecord.

    ``outcome`` (a ``ValidationOutcome``) may be supplied by a caller that already ran the
    validator; otherwise it runs here, before the lock is taken. ``validator`` names the rule
    set (default: the policy's).
    """
    current = Summary.objects.filter(pk=summary.pk).values_list("status", flat=True).get()
    if outcome is None and current == S.CANDIDATE:
        outcome = run_validator(summary, validator)  # the expensive part, before the lock

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.VALIDATE, actor)
        result = outcome or run_validator(s, validator)  # it became a CANDIDATE meanwhile (a release)
        ValidationRecord.objects.create(
            summary=s,
            validator_version=result.validator_version,
            checks=result.checks,
            mandatory_coverage=result.mandatory_coverage,
            passed=result.passed,
            reasons=result.reasons,
            waived_checks=list(result.waived_checks),
            actor=str(actor),
        )
        _apply(
            wf,
            s,
            A.VALIDATE,
            actor,
            to_status=S.VALIDATED if result.passed else S.REJECTED,
            reason="; ".join(result.reasons),
            data={"validator_version": result.validator_version},
        )
        return s

    return _run(summary, body)


def reject(summary: Summary, actor: Actor, reason: str) -> Summary:
    """A reviewer rejects a CANDIDATE or VALIDATED (not active) summary."""
    reason = clean_reason(reason, required=True)

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.REJECT, actor, reason=reason)
        _apply(wf, s, A.REJECT, actor, to_status=S.REJECTED, reason=reason)
        return s

    return _run(summary, body)


def approve(summary: Summary, actor: Actor, reason: str | None) -> Summary:
    """A reviewer approves a VALIDATED summary (needed before activation under ``require_approval``)."""
    reason = clean_reason(reason, required=True)

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.APPROVE, actor, reason=reason)
        _apply(wf, s, A.APPROVE, actor, to_status=None, reason=reason)
        return s

    return _run(summary, body)


def approve_and_activate(
    summary: Summary, expected_revision: int, actor: Actor, reason: str | None
) -> ActivationResult:
    """Approve and, in the same transaction, activate at ``expected_revision`` (the revision the
    reviewer saw). The approval stands even when the activation is stale or refused (both are
    recorded); the result says which, and the page then offers Activate at the current revision."""
    reason = clean_reason(reason, required=True)
    revision = _revision(expected_revision)

    def body(wf: Workflow, s: Summary) -> ActivationResult:
        _check_from(wf, s, A.APPROVE, actor, reason=reason)
        _apply(wf, s, A.APPROVE, actor, to_status=None, reason=reason)
        action = A.ROLLBACK if s.status == S.SUPERSEDED else A.ACTIVATE
        return _swap_locked(wf, s, revision, actor, action=action, reason=reason)

    return _run(summary, body)


def waive(summary: Summary, checks: Iterable[str], actor: Actor, reason: str | None) -> Summary:
    """A reviewer waives named failed checks of a REJECTED summary: appends a ValidationRecord
    with ``waived_checks``; it becomes VALIDATED when nothing un-waived still fails."""

    reason = clean_reason(reason, required=True)
    if isinstance(checks, str) or not isinstance(checks, Iterable):
        raise InvalidInput("'checks' must be a list of check names", code="invalid_waiver")
    names = list(checks)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidInput("'checks' must name at least one failed check", code="invalid_waiver")

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.WAIVE, actor, reason=reason)
        latest = s.validations.order_by("-created_at", "-id").first()
        if latest is None:
            raise _refuse(
                wf,
                s,
                A.WAIVE,
                actor,
                "nothing_to_waive",
                f"S{s.version} has no validation record to waive checks of",
                reason=reason,
            )
        previous = ValidationOutcome(
            validator_version=latest.validator_version,
            checks=list(latest.checks),
            mandatory_coverage=latest.mandatory_coverage,
            passed=latest.passed,
            reasons=list(latest.reasons),
            waived_checks=list(latest.waived_checks),
        )
        try:
            waived = apply_waivers(previous, names)
        except WaiverError as exc:
            # Bad input, not a state problem: 400 and nothing written.
            raise InvalidInput(str(exc), code="invalid_waiver") from exc
        ValidationRecord.objects.create(
            summary=s,
            validator_version=waived.validator_version,
            checks=waived.checks,
            mandatory_coverage=waived.mandatory_coverage,
            passed=waived.passed,
            reasons=waived.reasons,
            waived_checks=waived.waived_checks,
            waived_by=str(actor),
            actor=str(actor),
        )
        _apply(
            wf,
            s,
            A.WAIVE,
            actor,
            to_status=S.VALIDATED if waived.passed else None,
            reason=reason,
            data={
                "waived_checks": waived.waived_checks,
                "passed": waived.passed,
                "remaining": waived.reasons,
            },
        )
        return s

    return _run(summary, body)


def release(summary: Summary, actor: Actor, reason: str) -> Summary:
    """An admin releases a QUARANTINED summary (see the module docstring for the target status)."""
    reason = clean_reason(reason, required=True)

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.RELEASE, actor, reason=reason)
        latest = s.validations.order_by("-created_at", "-id").first()
        target = S.CANDIDATE if latest is None else (S.VALIDATED if latest.passed else S.REJECTED)
        _apply(wf, s, A.RELEASE, actor, to_status=target, reason=reason)
        return s

    return _run(summary, body)


def _fallback(wf: Workflow, quarantined: Summary) -> Summary | None:
    """Newest older VALIDATED/SUPERSEDED version that may be served (unpurged; approved if required)."""
    candidates = Summary.objects.filter(
        workflow=wf,
        version__lt=quarantined.version,
        status__in=[S.VALIDATED, S.SUPERSEDED],
        purged_by__isnull=True,
    ).order_by("-version")
    needs_approval = approval_required(wf)
    for candidate in candidates.iterator(chunk_size=50):
        if needs_approval and not is_approved(candidate):
            continue
        return candidate
    return None


def quarantine(summary: Summary, actor: Actor, reason: str) -> Summary:
    """A reviewer quarantines a summary. If it is ACTIVE the pointer moves, in the same
    transaction, to the newest older VALIDATED/SUPERSEDED version, or to none."""
    reason = clean_reason(reason, required=True)

    def body(wf: Workflow, s: Summary) -> Summary:
        _check_from(wf, s, A.QUARANTINE, actor, reason=reason)
        now = timezone.now()
        if s.status != S.ACTIVE:
            _apply(wf, s, A.QUARANTINE, actor, to_status=S.QUARANTINED, now=now, reason=reason)
            return s
        observed = wf.active_revision
        target = _fallback(wf, s)
        if not _move_pointer(wf, target, observed, now, compaction=False):  # cannot happen under the lock
            raise RuntimeError("active pointer moved while the workflow was locked")
        marker = None if target else observed  # the pointer-move event carries the revision
        _apply(  # first: at most one ACTIVE row at any instant
            wf,
            s,
            A.QUARANTINE,
            actor,
            to_status=S.QUARANTINED,
            now=now,
            reason=reason,
            expected=marker,
            observed=marker,
            prior=s,
            data={"fallback": target.summary_id if target else None, "active_revision": wf.active_revision},
        )
        if target is not None:
            _apply(
                wf,
                target,
                A.ROLLBACK,
                actor,
                to_status=S.ACTIVE,
                now=now,
                reason=f"automatic fallback: S{s.version} was quarantined ({reason})",
                expected=observed,
                observed=observed,
                prior=s,
                source_revision=wf.head_seq,
                data={"active_revision": wf.active_revision, "automatic": True},
            )
        return s

    return _run(summary, body)


def _stale(
    wf: Workflow,
    s: Summary,
    action: str,
    actor: Actor,
    expected: int,
    observed: int,
    *,
    reason: str,
    detail: str,
) -> ActivationResult:
    """A lost compare-and-swap: nothing changes but the appended LifecycleEvent(result=stale)."""
    event = _log(
        wf,
        s,
        action,
        LifecycleResult.STALE,
        actor,
        from_status=s.status,
        to_status=s.status,
        reason=reason,
        expected=expected,
        observed=observed,
        source_revision=wf.head_seq,
    )
    return ActivationResult(
        applied=False,
        active_revision=observed,
        summary=s,
        outcome=LifecycleResult.STALE,
        code="stale_revision",
        detail=detail,
        event=event,
        extra={"current_revision": observed},
    )


def _swap(
    summary: Summary, expected_revision: int, actor: Actor, *, action: str, reason: str
) -> ActivationResult:
    """Shared CAS path of activate and rollback."""
    return _run(
        summary, lambda wf, s: _swap_locked(wf, s, expected_revision, actor, action=action, reason=reason)
    )


def _swap_locked(
    wf: Workflow, s: Summary, expected_revision: int, actor: Actor, *, action: str, reason: str
) -> ActivationResult:
    """The compare-and-swap under the workflow lock (activate, rollback, approve-and-activate)."""
    is_rollback = action == A.ROLLBACK
    observed = wf.active_revision
    prior = wf.active_summary if wf.active_summary_id else None

    def refused(code: str, detail: str, **extra: Any) -> ActivationResult:
        event = _log(
            wf,
            s,
            action,
            LifecycleResult.REFUSED,
            actor,
            from_status=s.status,
            to_status=s.status,
            reason=reason or detail,
            expected=expected_revision,
            observed=observed,
            source_revision=wf.head_seq,
            data={"code": code},
        )
        return ActivationResult(
            applied=False,
            active_revision=observed,
            summary=s,
            outcome=LifecycleResult.REFUSED,
            code=code,
            detail=detail,
            event=event,
            extra={"current_status": s.status, "current_revision": observed, **extra},
        )

    # 1. The CAS key decides first: a late worker is stale whatever it tried to activate.
    if expected_revision != observed:
        return _stale(
            wf,
            s,
            action,
            actor,
            expected_revision,
            observed,
            reason=reason or f"expected revision {expected_revision}, current is {observed}",
            detail=f"expected active_revision {expected_revision} but it is {observed}: another activation "
            "landed first; nothing was changed",
        )
    # 2. The state machine and the rules that protect readers.
    if s.status not in ALLOWED_FROM[action]:
        allowed = ", ".join(sorted(ALLOWED_FROM[action]))
        return refused(
            "illegal_transition",
            f"cannot {action} S{s.version}: it is {s.status} (allowed from {allowed})",
        )
    if is_rollback and actor.kind not in HUMAN_ACTOR_KINDS:
        return refused(
            "rollback_requires_reviewer", "a rollback is an explicit human action (user or API key)"
        )
    if s.purged_by_id is not None:
        return refused("summary_purged", f"S{s.version} covers purged events and can never be served")
    if (late := Purge.first_covering(wf, s.source_purge_epoch, s.covers_to_seq)) is not None:
        return refused(
            "purged_since_read",
            f"S{s.version} was computed before purge {late.purge_id} removed events it covers",
        )
    if not is_rollback and prior is not None and s.covers_to_seq < prior.covers_to_seq:
        return refused(
            "watermark_regression",
            f"S{s.version} covers up to seq {s.covers_to_seq}, below the active S{prior.version}'s watermark "
            f"{prior.covers_to_seq}; only a reviewer's rollback may move the watermark back",
            active_watermark=prior.covers_to_seq,
        )
    # The same approval rule for activate and rollback (and the quarantine fallback): under
    # require_approval nothing unapproved becomes ACTIVE, whatever path it takes.
    if approval_required(wf) and not is_approved(s):
        return refused(
            "approval_required", f"the workflow policy requires a reviewer to approve S{s.version} first"
        )
    # 3. The compare-and-swap itself, then the status changes, in this one transaction.
    now = timezone.now()
    if not _move_pointer(wf, s, expected_revision, now, compaction=not is_rollback):
        current = _current_revision(wf)  # defensive: the lock makes this unreachable
        return _stale(
            wf,
            s,
            action,
            actor,
            expected_revision,
            current,
            reason=reason,
            detail="the active revision moved",
        )
    if prior is not None:
        _apply(  # first: at most one ACTIVE row at any instant
            wf,
            prior,
            A.SUPERSEDE,
            actor,
            to_status=S.SUPERSEDED,
            now=now,
            reason=f"superseded by S{s.version}",
            prior=prior,
            data={"by": s.summary_id},
        )
    event = _apply(
        wf,
        s,
        action,
        actor,
        to_status=S.ACTIVE,
        now=now,
        reason=reason,
        expected=expected_revision,
        observed=observed,
        prior=prior,
        source_revision=wf.head_seq,
        data={"active_revision": wf.active_revision, "superseded": prior.summary_id if prior else None},
    )
    return ActivationResult(
        applied=True, active_revision=wf.active_revision, summary=s, superseded=prior, event=event
    )


def activate(summary: Summary, expected_revision: int, actor: Actor, *, reason: str = "") -> ActivationResult:
    """Make a VALIDATED summary ACTIVE by compare-and-swap on ``workflow.active_revision``.

    Never raises for stale or refused attempts (workers handle those as outcomes); the API turns
    ``result.error()`` into the 409. The previous active version becomes SUPERSEDED.
    """
    return _swap(
        summary,
        _revision(expected_revision),
        actor,
        action=A.ACTIVATE,
        reason=clean_reason(reason, required=False),
    )


def rollback(summary: Summary, expected_revision: int, actor: Actor, reason: str | None) -> ActivationResult:
    """A reviewer re-activates an older SUPERSEDED (or VALIDATED) version by compare-and-swap;
    its watermark may be below the current one's. Returns like ``activate``."""
    return _swap(
        summary,
        _revision(expected_revision),
        actor,
        action=A.ROLLBACK,
        reason=clean_reason(reason, required=True),
    )


def pointer_moves(workflow: Workflow):
    """Applied LifecycleEvents that moved the active pointer (one per ``active_revision`` bump)."""
    return LifecycleEvent.objects.filter(
        workflow=workflow, result=LifecycleResult.APPLIED, observed_revision__isnull=False
    )


# -- who may press which button: one rule, one place ------------------------------------------------
#
# The API permission check, the summary page's buttons, the review inbox and the template tags
# all ask ``allowed_actions`` (buttons) or ``check_role`` (the role half, which the API enforces
# before the service runs; the state half is enforced by the actions above and recorded as
# refusals).

ACTION_ROLES: dict[str, str] = {
    A.VALIDATE: Role.REVIEWER,
    A.APPROVE: Role.REVIEWER,
    A.ACTIVATE: Role.REVIEWER,
    A.REJECT: Role.REVIEWER,
    A.QUARANTINE: Role.REVIEWER,
    A.WAIVE: Role.REVIEWER,
    A.ROLLBACK: Role.REVIEWER,
    A.RELEASE: Role.ADMIN,
    "comment": Role.REVIEWER,
}


@dataclass(frozen=True)
class ActionPolicy:
    """What besides status and role decides the buttons of one summary (see ``action_policy``)."""

    approval_required: bool = False
    approved: bool = False
    active_summary_id: int | None = None
    active_watermark: int | None = None
    active_revision: int = 0
    failed_checks: tuple[str, ...] = ()

    def awaiting_approval(self, summary: Summary) -> bool:
        return summary.status == S.VALIDATED and self.approval_required and not self.approved


def failed_checks(record: ValidationRecord | None) -> list[str]:
    """Names of the checks that failed and are not waived in ``record`` (the latest one counts:
    a re-validation starts again without waivers). The one definition of "failed" for pages,
    the inbox and waivers."""
    if record is None or not isinstance(record.checks, list):
        return []
    waived = set(record.waived_checks or [])
    return [
        c["name"]
        for c in record.checks
        if isinstance(c, dict)
        and c.get("name")
        and not c.get("passed", True)
        and not c.get("waived")
        and c["name"] not in waived
    ]


def latest_validation(summary: Summary) -> ValidationRecord | None:
    return summary.validations.order_by("-created_at", "-id").first()


_UNSET: Any = object()


def action_policy(
    summary: Summary, workflow: Workflow | None = None, *, latest: ValidationRecord | None = _UNSET
) -> ActionPolicy:
    """The ActionPolicy of ``summary`` as stored now (a few small queries; pass the workflow with
    its active summary loaded, and the latest validation record, when the caller has them)."""
    wf = workflow or Workflow.objects.get(pk=summary.workflow_id)
    if not wf.active_summary_id:
        active = None
    elif Workflow.active_summary.is_cached(wf):
        active = cast(Summary, wf.active_summary).covers_to_seq
    else:
        active = (
            Summary.objects.filter(pk=wf.active_summary_id).values_list("covers_to_seq", flat=True).first()
        )
    record = latest_validation(summary) if latest is _UNSET else latest
    return ActionPolicy(
        approval_required=approval_required(wf),
        approved=is_approved(summary),
        active_summary_id=wf.active_summary_id,
        active_watermark=active,
        active_revision=wf.active_revision,
        failed_checks=tuple(failed_checks(record)),
    )


def check_role(action: str, role: str | None) -> None:
    """Raise Forbidden unless ``role`` may take ``action`` at all (the API's permission check)."""

    needed = ACTION_ROLES[action]
    if not role_at_least(role, needed):
        raise Forbidden(
            f"{action} needs the {needed} role; you are {role or 'not a member'}", code="forbidden"
        )


def allowed_actions(summary: Summary, role: str | None, policy: ActionPolicy) -> list[str]:
    """The actions ``role`` may usefully take on ``summary`` now, in display order.

    The state machine (ALLOWED_FROM) and the activation rules (approval, watermark, purge)
    decide; buttons that the service would certainly refuse are not offered.
    """
    status = summary.status
    purged = summary.purged_by_id is not None
    approved = policy.approved or not policy.approval_required
    below_active = policy.active_watermark is not None and summary.covers_to_seq < policy.active_watermark
    wanted = {
        A.VALIDATE: status == S.CANDIDATE,
        A.APPROVE: status in ALLOWED_FROM[A.APPROVE] and policy.approval_required and not policy.approved,
        A.ACTIVATE: status == S.VALIDATED and approved and not below_active and not purged,
        A.ROLLBACK: status == S.SUPERSEDED and approved and not purged,
        A.WAIVE: status == S.REJECTED and bool(policy.failed_checks),
        A.REJECT: status in ALLOWED_FROM[A.REJECT],
        # A REJECTED version already serves nobody (purges still quarantine those through the service).
        A.QUARANTINE: status in ALLOWED_FROM[A.QUARANTINE] and status != S.REJECTED,
        A.RELEASE: status == S.QUARANTINED,
    }
    return [name for name, ok in wanted.items() if ok and role_at_least(role, ACTION_ROLES[name])]


def status_label(
    summary: Summary, policy: ActionPolicy | None = None, *, awaiting: bool | None = None
) -> str:
    """What a person reads for the status: "VALIDATED · awaiting approval" when it waits for one."""
    waiting = awaiting if awaiting is not None else bool(policy and policy.awaiting_approval(summary))
    return f"{summary.status} · awaiting approval" if waiting else str(summary.status)


def approved_q() -> Q:
    """SQL form of ``is_approved`` on Summary rows: an applied approve after the last applied quarantine."""
    from django.db.models import Exists, Max, OuterRef, Subquery
    from django.db.models.functions import Coalesce

    last_quarantine = (
        LifecycleEvent.objects.filter(
            summary=OuterRef(OuterRef("pk")), action=A.QUARANTINE, result=LifecycleResult.APPLIED
        )
        .values("summary")
        .annotate(m=Max("id"))
        .values("m")
    )
    approvals = LifecycleEvent.objects.filter(
        summary=OuterRef("pk"), action=A.APPROVE, result=LifecycleResult.APPLIED
    ).filter(id__gt=Coalesce(Subquery(last_quarantine), 0))
    return Q(Exists(approvals))


def approval_required_q(tenant_id: int) -> Q:
    """SQL form of ``approval_required`` for Summary rows of one tenant (override, else tenant
    default); no query of its own, so counts built on it stay one statement."""
    from django.db.models import Exists

    policies = ContextPolicy.objects.filter(tenant_id=tenant_id)
    overrides = policies.filter(workflow__isnull=False)
    default_on = policies.filter(workflow__isnull=True, require_approval=True)
    return Q(workflow_id__in=overrides.filter(require_approval=True).values("workflow_id")) | (
        Q(Exists(default_on)) & ~Q(workflow_id__in=overrides.values("workflow_id"))
    )


def awaiting_approval(tenant_id: int):
    """VALIDATED summaries of the tenant whose policy requires an approval they do not have."""
    return Summary.objects.filter(tenant_id=tenant_id, status=S.VALIDATED, purged_by__isnull=True).filter(
        approval_required_q(tenant_id) & ~approved_q()
    )
