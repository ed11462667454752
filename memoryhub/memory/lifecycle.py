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
from dataclasses import dataclass, replace
from typing import Any, TypeVar, cast

from django.db import connection, transaction
from django.db.models import Exists, Field, Max, Model, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from audit.log import attach_payload, insert_pending, pending_entry, pending_insert_sql, pending_inserted
from audit.models import AuditEntry, Payload, Purge
from memoryhub.core.actors import Actor
from memoryhub.core.checks import waivable
from memoryhub.core.errors import Conflict, DomainError, Forbidden, InvalidInput
from memoryhub.core.opaque import OPAQUE_SCHEMA, OPAQUE_VALIDATOR_VERSION, opaque_checks
from memoryhub.core.quality import merged_quality
from memoryhub.core.rows import (
    ModelColumns,
    PreparedStatement,
    ReservedIds,
    built_per_vendor,
    has_rows,
    insert_rows,
    insert_rows_sql,
    reserve_ids_sql,
    run_together,
    set_ids,
)
from memoryhub.memory import acceptance
from memoryhub.memory.events import tokens_through
from memoryhub.memory.sources import source_events
from memoryhub.memory.validation import (
    ValidationOutcome,
    WaiverError,
    apply_waivers,
    judged,
    validate_summary,
)
from memoryhub.memory.workflows import workflow_encoding
from memoryhub.models import (
    Event,
    LifecycleAction,
    LifecycleEvent,
    LifecycleResult,
    Role,
    Summary,
    SummaryStatus,
    Tenant,
    ValidationRecord,
    Workflow,
    role_at_least,
)
from memoryhub.models.purgeable import payload_digest
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
# The length limits of what people write into the record (``clean_reason``; forms and the API
# schema show the same numbers).
MAX_REASON = 2000
MAX_COMMENT = 4000
TEXT_LIMITS = {"reason": MAX_REASON, "comment": MAX_COMMENT}


@dataclass
class ActivationResult:
    """Outcome of an activate/rollback attempt. Only ``applied`` moved the pointer.

    ``outcome`` is applied | stale: a lost compare-and-swap is an answer, not a refusal (the
    request was valid, another landed first), so it is returned; ``code``/``detail`` say why and
    ``error()`` builds the 409 the API answers (the LifecycleEvent is already committed). A
    refused attempt is raised like every refusal (``refused_raises``).
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
    reason: Any, *, required: bool = True, field: str = "reason", limit: int | None = None
) -> str:
    """The one place reasons (and comments) are checked: a string, stripped, non-empty when
    required, at most ``limit`` (default ``TEXT_LIMITS[field]``) characters. Raises InvalidInput
    (400, nothing written)."""
    limit = limit if limit is not None else TEXT_LIMITS[field]
    text = (reason or "").strip() if isinstance(reason, str) or reason is None else None
    if text is None:
        raise InvalidInput(f"'{field}' must be a string", code=f"invalid_{field}", field=field)
    if required and not text:
        raise InvalidInput(
            f"a {field} is required (it is recorded in the audit log)", code=f"{field}_required", field=field
        )
    if len(text) > limit:
        raise InvalidInput(f"'{field}' is at most {limit} characters", code=f"invalid_{field}", field=field)
    return text


def clean_checks(checks: Any) -> list[str]:
    """The check names a waiver gives: a non-empty list of non-empty strings (the validator
    decides later whether each may be waived)."""
    if isinstance(checks, str) or not isinstance(checks, Iterable):
        raise InvalidInput("'checks' must be a list of check names", code="invalid_waiver")
    names = list(checks)
    if not names or not all(isinstance(n, str) and n for n in names):
        raise InvalidInput("'checks' must name at least one failed check", code="invalid_waiver")
    return names


def clean_revision(value: Any) -> int:
    """``expected_revision`` as the compare-and-swap needs it: a non-negative integer that fits
    the column (JSON must send an integer; a form's text is converted by the caller first)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise InvalidInput(
            "'expected_revision' must be a non-negative integer", code="invalid_expected_revision"
        )
    return value


class _LockSQL:
    """The statements every lifecycle action runs, built once per database vendor from the models.

    SQL on purpose (like ``triggers.services._DecisionRead``): compiling the equivalent querysets
    (a join, correlated subqueries, F-expression updates) took the ORM longer than the database
    took to run them, on every activation.
    """

    def __init__(self) -> None:
        qn = connection.ops.quote_name

        def col(model: type[Model], name: str, alias: str = "") -> str:
            column = qn(cast(Field, model._meta.get_field(name)).column)
            return f"{alias}.{column}" if alias else column

        def table(model: type[Model]) -> str:
            return qn(model._meta.db_table)

        wf, sm, le, pol = Workflow, Summary, LifecycleEvent, ContextPolicy
        self.workflow, self.tenant, self.summary = (
            ModelColumns(wf, "w"),
            ModelColumns(Tenant, "t"),
            ModelColumns(sm, "s"),
        )
        # Only the workflow row is locked; its tenant is read along (nothing here changes it).
        lock = " FOR UPDATE OF w" if connection.features.has_select_for_update_of else ""
        lock_sql = (
            f"SELECT {self.workflow.sql}, {self.tenant.sql} FROM {table(wf)} w INNER JOIN {table(Tenant)} t "
            f"ON {col(Tenant, 'id', 't')} = {col(wf, 'tenant', 'w')} WHERE {col(wf, 'id', 'w')} = %s{lock}"
        )
        # Each summary row with: the tokens of events through its watermark (``tokens_through``);
        # whether it is approved (``is_approved``: an applied approve after the last applied
        # quarantine); and require_approval of the policy that applies (``approval_required``:
        # the workflow's override, else the tenant default). Parameters: the workflow id (a
        # constant, so the planner reads one partition of the event table, not all of them),
        # approve, applied, quarantine, applied, the target summary's id, the workflow id (its
        # active summary: read after the lock, in the same round trip).
        s_id, s_wf, p_wf = col(sm, "id", "s"), col(sm, "workflow", "s"), col(pol, "workflow", "p")

        def applied(alias: str) -> str:
            return (
                f"FROM {table(le)} {alias} WHERE {col(le, 'summary', alias)} = {s_id} "
                f"AND {col(le, 'action', alias)} = %s AND {col(le, 'result', alias)} = %s"
            )

        read_sql = (
            f"SELECT {self.summary.sql}, "
            f"(SELECT {col(Event, 'cum_tokens', 'e')} FROM {table(Event)} e WHERE {col(Event, 'workflow', 'e')} "
            f"= %s AND {col(Event, 'seq', 'e')} = {col(sm, 'covers_to_seq', 's')}), "
            f"EXISTS (SELECT 1 {applied('a')} AND {col(le, 'id', 'a')} > "
            f"COALESCE((SELECT MAX({col(le, 'id', 'q')}) {applied('q')}), 0)), "
            f"(SELECT {col(pol, 'require_approval', 'p')} FROM {table(pol)} p "
            f"WHERE {col(pol, 'tenant', 'p')} = {col(sm, 'tenant', 's')} AND ({p_wf} = {s_wf} OR {p_wf} IS NULL) "
            f"ORDER BY ({p_wf} IS NULL) LIMIT 1) "
            f"FROM {table(sm)} s WHERE {s_id} IN (%s, (SELECT {col(wf, 'active_summary')} FROM {table(wf)} "
            f"WHERE {col(wf, 'id')} = %s))"
        )
        revision = col(wf, "active_revision")
        pointer = (
            f"UPDATE {table(wf)} SET {col(wf, 'active_summary')} = %s, {revision} = {revision} + 1, "
            f"{col(wf, 'summary_tokens')} = %s, {col(wf, 'tail_events')} = {col(wf, 'head_seq')} - %s, "
            f"{col(wf, 'tail_tokens')} = {col(wf, 'total_tokens')} - %s, "
            f"{col(wf, 'activated_at')} = %s, {col(wf, 'updated_at')} = %s"
        )
        compacted = f", {col(wf, 'last_compacted_at')} = %s, {col(wf, 'tokens_at_last_compaction')} = %s"
        where = f" WHERE {col(wf, 'id')} = %s AND {revision} = %s"
        self.move = {
            False: PreparedStatement("memoryhub_lifecycle_move", pointer + where),
            True: PreparedStatement("memoryhub_lifecycle_move_compaction", pointer + compacted + where),
        }
        self.status = PreparedStatement(
            "memoryhub_lifecycle_status",
            f"UPDATE {table(sm)} SET {col(sm, 'status')} = %s, {col(sm, 'status_changed_at')} = %s "
            f"WHERE {col(sm, 'id')} = %s",
        )
        self.lock, self.read = (
            PreparedStatement("memoryhub_lifecycle_lock", lock_sql),
            PreparedStatement("memoryhub_lifecycle_read", read_sql),
        )


_sql = built_per_vendor(_LockSQL)


def _execute(sql: str, params: list[Any]) -> Any:
    """Rows of a SELECT, or the row count of an UPDATE."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if has_rows(cursor.cursor) else cursor.rowcount


@dataclass
class _Locked:
    """What an action decides on, read under the workflow lock (``_lock``)."""

    wf: Workflow  # its tenant and active summary loaded
    target: Summary  # the summary acted on, fresh
    covered_tokens: int  # tokens of events 1..target.covers_to_seq
    needs_approval: bool  # approval_required(wf)
    approved: bool  # is_approved(target)

    @property
    def prior(self) -> Summary | None:
        """The active summary before this action."""
        return cast(Summary, self.wf.active_summary) if self.wf.active_summary_id else None


# What a compare-and-swap appends at most: the supersede's and the activation's events, and a
# payload for each one's reason and for its audit entry's text (which usually shares the reason's);
# approve-and-activate adds the approve's.
SWAP_IDS = {LifecycleEvent: 2, Payload: 4}
APPROVE_AND_SWAP_IDS = {LifecycleEvent: 3, Payload: 6}

# The ids drawn with the lock of the action running on a workflow instance (by id(wf)), for the
# rows it appends (``_append``); set for the duration of that action only (``_run_locked``).
_reserved: dict[int, ReservedIds] = {}


def _lock(
    summary: Summary, reserve: dict[type[Any], int] | None = None
) -> tuple[_Locked, ReservedIds | None]:
    """Lock the workflow row, then read everything else fresh (all status changes happen under this lock).

    Two statements, sent together (``run_together``), plus, on PostgreSQL, the ``reserve``d ids
    drawn after the lock: with them ``_append`` sends its rows, which reference each other, in one
    round trip. The lock joins only the tenant: on
    PostgreSQL a ``SELECT … FOR UPDATE`` that waited for another transaction re-checks only the
    locked row, so a joined summary would be
    the version of *before* the wait (a stale status that then trips
    ``memoryhub_summary_one_active``). The target and the active summary, with what the
    activation rules ask of them, are read by the second statement, after the lock.
    """
    sql = _sql()
    wf_id = summary.workflow_id
    read = [
        wf_id,
        A.APPROVE,
        LifecycleResult.APPLIED,
        A.QUARANTINE,
        LifecycleResult.APPLIED,
        summary.pk,
        wf_id,
    ]
    drawn = [
        (model, statement)
        for model, n in (reserve or {}).items()
        if (statement := reserve_ids_sql(model, n)) is not None  # None where ids cannot be drawn
    ]
    rows, summaries, *ids = run_together(
        [sql.lock.statement([wf_id]), sql.read.statement(read), *(statement for _, statement in drawn)]
    )
    if not rows:
        raise Workflow.DoesNotExist("Workflow matching query does not exist.")
    wf = sql.workflow.instance(rows[0])
    wf.tenant = sql.tenant.instance(rows[0], sql.workflow.width)
    found = {row[sql.summary.pk_index]: row for row in summaries}
    if summary.pk not in found:
        raise Summary.DoesNotExist("Summary matching query does not exist.")
    if wf.active_summary_id:
        wf.active_summary = sql.summary.instance(found[wf.active_summary_id])
    target = sql.summary.instance(found[summary.pk])
    target.workflow = wf
    covered, approved, needs_approval = found[summary.pk][sql.summary.width :]
    reserved = (
        ReservedIds({model: rows for (model, _), rows in zip(drawn, ids, strict=True)}) if drawn else None
    )
    return _Locked(wf, target, int(covered or 0), bool(needs_approval), bool(approved)), reserved


def _run(summary: Summary, body: Callable[[Workflow, Summary], T]) -> T:
    """Run ``body(workflow, summary)`` under the workflow lock (see ``_run_locked``)."""
    return _run_locked(summary, lambda locked: body(locked.wf, locked.target))


def _run_locked(
    summary: Summary, body: Callable[[_Locked], T], reserve: dict[type[Any], int] | None = None
) -> T:
    """Run ``body`` under the workflow lock (``reserve``: see ``_lock``); a refusal commits its
    row, then raises."""
    refusal: DomainError | None = None
    with transaction.atomic():
        locked, reserved = _lock(summary, reserve)
        if reserved is not None:
            _reserved[id(locked.wf)] = reserved
        try:
            result = body(locked)
        except _Refused as refused:
            refusal = refused.error
        finally:
            _reserved.pop(id(locked.wf), None)
    if refusal is not None:
        raise refusal
    return result


@dataclass
class _Entry:
    """One LifecycleEvent, not yet written, and what its AuditEntry adds (see ``_append``)."""

    event: LifecycleEvent
    reason: str
    data: dict[str, Any]


def _entry(
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
) -> _Entry:
    prior_id = wf.active_summary_id if prior is True else (prior.pk if isinstance(prior, Summary) else None)
    event = LifecycleEvent(
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
        expected_revision=expected,
        observed_revision=observed,
        prior_active_summary_id=prior_id,
        source_revision_at_activation=source_revision,
    )
    event.reason = reason  # staged for the event's payload
    return _Entry(event, reason, data or {})


def _append(
    wf: Workflow, actor: Actor, *entries: _Entry, changes: Iterable[_Statement] = ()
) -> list[LifecycleEvent]:
    """Write the LifecycleEvents and an AuditEntry for each (caller is inside the transaction):
    the text payloads, the events, the entries; in one round trip when the ids drawn with the
    lock (``_reserved``) cover the payloads and events, else in three. An entry whose text is
    its event's (the reason) shares the event's payload row: one copy of the words, one digest.

    ``changes`` are the statements of the change being recorded (a pointer move, status changes),
    sent ahead of the payloads in their round trip; each must change exactly one row, or the
    whole transaction is undone."""
    tenant = cast(Tenant, wf.tenant)
    events = [entry.event for entry in entries]
    payloads: list[Payload] = []
    for event in events:
        body = event.take_staged_payload()
        if body is not None:
            tenant_id, workflow_id = event.payload_scope()
            event.payload = Payload(
                tenant_id=tenant_id, workflow_id=workflow_id, body=body, digest=payload_digest(body)
            )
            payloads.append(event.payload)
    audit: list[AuditEntry] = []
    for event, entry in zip(events, entries, strict=True):
        summary = cast(Summary, event.summary)
        audit_entry, text = pending_entry(
            tenant,
            actor,
            f"summary.{event.action}",
            summary,
            {
                "workflow": wf.external_id,
                "version": summary.version,
                "result": event.result,
                "from": event.from_status,
                "to": event.to_status,
                "reason": entry.reason,
                "expected_revision": event.expected_revision,
                "observed_revision": event.observed_revision,
                **entry.data,
            },
        )
        if text:
            payload = event.payload if event.payload is not None and event.payload.body == text else None
            if payload is None:
                payload = Payload(
                    tenant_id=wf.tenant_id, workflow_id=wf.pk, body=text, digest=payload_digest(text)
                )
                payloads.append(payload)
            attach_payload(audit_entry, payload, text)
        audit.append(audit_entry)
    changes = list(changes)
    # With reserved ids every row's references are known now: the events and the audit entries
    # travel in the same round trip as the change and the payloads.
    ids = _reserved.get(id(wf))
    together = ids is not None and ids.give(payloads, events)
    statements = [*changes, insert_rows_sql(Payload, payloads)] if payloads else list(changes)
    if together:
        _link_payloads(events)
        _link_entries(audit, events)
        statements += [insert_rows_sql(LifecycleEvent, events), pending_insert_sql(audit)]
    results = run_together(statements) if statements else []
    for (sql, _), changed in zip(changes, results, strict=False):
        if changed != 1:  # the workflow lock makes this unreachable; never record what did not happen
            raise RuntimeError(f"expected one row changed, got {changed}: {sql[:80]}")
    if payloads:  # first: the events and entries reference them
        set_ids(payloads, results[len(changes)])
    if together:
        set_ids(events, results[-2])
        pending_inserted(audit, results[-1])
    else:
        _link_payloads(events)
        insert_rows(LifecycleEvent, events)
        _link_entries(audit, events)
        insert_pending(audit)
    return events


def _link_payloads(events: list[LifecycleEvent]) -> None:
    """Point the events at their payloads (whose ids are known: inserted or reserved)."""
    for event in events:
        if event.payload is not None:
            event.payload, event.payload_digest = event.payload, event.payload.digest  # sets payload_id


def _link_entries(audit: list[AuditEntry], events: list[LifecycleEvent]) -> None:
    """Point each audit entry at its payload and its event (ids known: inserted or reserved)."""
    for audit_entry, event in zip(audit, events, strict=True):
        audit_entry.payload = audit_entry.payload  # sets payload_id, now that the payload has one
        audit_entry.chained_data["lifecycle_event"] = event.pk  # an id: always chained


def _log(
    wf: Workflow, summary: Summary, action: str, result: str, actor: Actor, **fields: Any
) -> LifecycleEvent:
    """Append one LifecycleEvent and its AuditEntry (``_entry`` names the fields)."""
    return _append(wf, actor, _entry(wf, summary, action, result, actor, **fields))[0]


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


_Statement = tuple[str, list[Any]]


def _status_change(summary: Summary, status: str, now) -> _Statement:
    """The UPDATE that moves ``summary`` to ``status`` (applied to the instance already)."""
    summary.status, summary.status_changed_at = status, now
    return _sql().status.statement([status, connection.ops.adapt_datetimefield_value(now), summary.pk])


def _set_status(summary: Summary, status: str, now) -> None:
    _execute(*_status_change(summary, status, now))


def _apply(
    wf: Workflow, summary: Summary, action: str, actor: Actor, *, to_status: str | None, now=None, **log: Any
) -> LifecycleEvent:
    """Move ``summary`` to ``to_status`` (None: it stays where it is) and log the applied action."""
    before = summary.status
    if to_status is not None:
        _set_status(summary, to_status, now or timezone.now())
    if action in (A.VALIDATE, A.WAIVE) or acceptance.changes_acceptance(before, summary.status):
        acceptance.refresh_summary_jobs(summary.pk)  # a new record, or into/out of the accepted statuses
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


def _move_pointer(
    wf: Workflow, target: Summary | None, observed: int, now, covered_tokens: int, *, compaction: bool
) -> bool:
    """The compare-and-swap: move the pointer only if active_revision is still ``observed``."""
    moved = _execute(*_pointer_move(wf, target, observed, now, covered_tokens, compaction=compaction)) == 1
    if moved:
        wf.active_revision = observed + 1
        wf.active_summary = target
    return moved


def _pointer_move(
    wf: Workflow, target: Summary | None, observed: int, now, covered_tokens: int, *, compaction: bool
) -> _Statement:
    """The compare-and-swap UPDATE: it moves the pointer only if active_revision is still ``observed``.

    Running totals follow the pointer: summary tokens, and the tail after the new watermark
    (``covered_tokens`` = tokens through it; computed from head/total in SQL, so they stay right
    even against a concurrent append).
    """
    at = connection.ops.adapt_datetimefield_value(now)
    params: list[Any] = [
        target.pk if target else None,
        target.token_count if target else 0,
        target.covers_to_seq if target else 0,
        covered_tokens,
        at if target else None,
        at,
    ]
    if compaction:
        # Trigger hysteresis counts new tokens from here: total − tokens_at_last_compaction = tail.
        params += [at, covered_tokens]
    return _sql().move[compaction].statement([*params, wf.pk, observed])


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
        checks = opaque_checks(
            summary.content.encode("utf-8"),
            summary.content_hash,
            summary.covers_from_seq,
            summary.covers_to_seq,
            active.covers_to_seq if active else None,
            wf.head_seq,
        )
        return judged(OPAQUE_VALIDATOR_VERSION, checks, 0.0)
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


def checks_failed_stale(summaries: QuerySet[Summary]) -> QuerySet[Summary]:
    """The summaries among ``summaries`` whose ``checks_failed`` disagrees with their newest
    validation record (tests/conftest.py asks it after every test of the suite)."""
    newest_passed = Subquery(
        ValidationRecord.objects.filter(summary=OuterRef("pk"))
        .order_by("-created_at", "-id")
        .values("passed")[:1]
    )
    return summaries.annotate(newest_passed=newest_passed).filter(
        Q(checks_failed=True) & (Q(newest_passed=True) | Q(newest_passed__isnull=True))
        | Q(checks_failed=False, newest_passed=False)
    )


def _record_validation(summary: Summary, **record: Any) -> ValidationRecord:
    """Append a validation record; the summary's ``checks_failed`` follows the newest one."""
    created = ValidationRecord.objects.create(summary=summary, **record)
    if summary.checks_failed != (not created.passed):
        summary.checks_failed = not created.passed
        Summary.objects.filter(pk=summary.pk).update(checks_failed=summary.checks_failed)
    return created


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
        _record_validation(
            s,
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
    reviewer saw). The approval stands even when the activation is stale (returned: the page then
    offers Activate at the current revision) or refused (raised, saying it is approved)."""
    reason = clean_reason(reason, required=True)
    revision = clean_revision(expected_revision)

    def body(locked: _Locked) -> ActivationResult:
        wf, s = locked.wf, locked.target
        _check_from(wf, s, A.APPROVE, actor, reason=reason)
        _apply(wf, s, A.APPROVE, actor, to_status=None, reason=reason)
        action = A.ROLLBACK if s.status == S.SUPERSEDED else A.ACTIVATE
        # The approve just written is the newest applied event of s (the lock is held): approved.
        return _swap_locked(replace(locked, approved=True), revision, actor, action=action, reason=reason)

    result = _run_locked(summary, body, reserve=APPROVE_AND_SWAP_IDS)
    if result.outcome == LifecycleResult.REFUSED:
        result = replace(
            result,
            detail=f"{summary.label} is approved, but was not activated: {result.detail}",
            extra={**(result.extra or {}), "approved": True},
        )
    return refused_raises(result)


def waive(summary: Summary, checks: Iterable[str], actor: Actor, reason: str | None) -> Summary:
    """A reviewer waives named failed checks of a REJECTED summary: appends a ValidationRecord
    with ``waived_checks``; it becomes VALIDATED when nothing un-waived still fails."""

    reason = clean_reason(reason, required=True)
    names = clean_checks(checks)

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
        _record_validation(
            s,
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
        covered = tokens_through(wf, target.covers_to_seq if target else 0)
        if not _move_pointer(
            wf, target, observed, now, covered, compaction=False
        ):  # cannot happen under the lock
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
    locked: _Locked, action: str, actor: Actor, expected: int, observed: int, *, reason: str, detail: str
) -> ActivationResult:
    """A lost compare-and-swap: nothing changes but the appended LifecycleEvent(result=stale)."""
    wf, s = locked.wf, locked.target
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


def _swap_refusal(locked: _Locked, action: str, actor: Actor) -> tuple[str, str, dict[str, Any]] | None:
    """(code, detail, extra) when the state machine or a rule that protects readers refuses the
    activation of ``locked.target``; None when it may go ahead."""
    wf, s, prior = locked.wf, locked.target, locked.prior
    if s.status not in ALLOWED_FROM[action]:
        allowed = ", ".join(sorted(ALLOWED_FROM[action]))
        return (
            "illegal_transition",
            f"cannot {action} S{s.version}: it is {s.status} (allowed from {allowed})",
            {},
        )
    if action == A.ROLLBACK and actor.kind not in HUMAN_ACTOR_KINDS:
        return "rollback_requires_reviewer", "a rollback is an explicit human action (user or API key)", {}
    if s.purged_by_id is not None:
        return "summary_purged", f"S{s.version} covers purged events and can never be served", {}
    # A purge bumps the workflow's purge_epoch in its own transaction: only a summary read at an
    # older epoch can have one since (the common case costs no query).
    late = (
        Purge.first_covering(wf, s.source_purge_epoch, s.covers_to_seq)
        if s.source_purge_epoch is not None and s.source_purge_epoch < wf.purge_epoch
        else None
    )
    if late is not None:
        return (
            "purged_since_read",
            f"S{s.version} was computed before purge {late.purge_id} removed events it covers",
            {},
        )
    if action != A.ROLLBACK and prior is not None and s.covers_to_seq < prior.covers_to_seq:
        detail = (
            f"S{s.version} covers up to seq {s.covers_to_seq}, below the active S{prior.version}'s watermark "
            f"{prior.covers_to_seq}; only a reviewer's rollback may move the watermark back"
        )
        return "watermark_regression", detail, {"active_watermark": prior.covers_to_seq}
    # The same approval rule for activate and rollback (and the quarantine fallback): under
    # require_approval nothing unapproved becomes ACTIVE, whatever path it takes.
    if locked.needs_approval and not locked.approved:
        return (
            "approval_required",
            f"the workflow policy requires a reviewer to approve S{s.version} first",
            {},
        )
    return None


def _swap_refused(
    locked: _Locked,
    action: str,
    actor: Actor,
    expected: int,
    reason: str,
    refusal: tuple[str, str, dict[str, Any]],
) -> ActivationResult:
    """A refused activation: nothing changes but the appended LifecycleEvent(result=refused)."""
    wf, s = locked.wf, locked.target
    code, detail, extra = refusal
    observed = wf.active_revision
    event = _log(
        wf,
        s,
        action,
        LifecycleResult.REFUSED,
        actor,
        from_status=s.status,
        to_status=s.status,
        reason=reason or detail,
        expected=expected,
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


def _swap_record(
    locked: _Locked,
    action: str,
    actor: Actor,
    observed: int,
    reason: str,
    *,
    prior: Summary | None,
    was: tuple[str, str],
    changes: list[_Statement],
) -> LifecycleEvent:
    """The applied swap's history: the supersede of ``prior`` (when there was one), then the
    activation, each a LifecycleEvent with its AuditEntry; ``was`` = (prior's, target's) status
    before, ``changes`` the swap's own statements (written with it). Returns the activation's event."""
    wf, s = locked.wf, locked.target
    entries = []
    if prior is not None:
        entries.append(
            _entry(
                wf,
                prior,
                A.SUPERSEDE,
                LifecycleResult.APPLIED,
                actor,
                from_status=was[0],
                to_status=prior.status,
                reason=f"superseded by S{s.version}",
                prior=prior,
                data={"by": s.summary_id},
            )
        )
    entries.append(
        _entry(
            wf,
            s,
            action,
            LifecycleResult.APPLIED,
            actor,
            from_status=was[1],
            to_status=s.status,
            reason=reason,
            expected=observed,
            observed=observed,
            prior=prior,
            source_revision=wf.head_seq,
            data={"active_revision": wf.active_revision, "superseded": prior.summary_id if prior else None},
        )
    )
    return _append(wf, actor, *entries, changes=changes)[-1]


def _swap(
    summary: Summary, expected_revision: int, actor: Actor, *, action: str, reason: str
) -> ActivationResult:
    """Shared CAS path of activate and rollback."""
    return _run_locked(
        summary,
        lambda locked: _swap_locked(locked, expected_revision, actor, action=action, reason=reason),
        reserve=SWAP_IDS,
    )


def _swap_locked(
    locked: _Locked, expected_revision: int, actor: Actor, *, action: str, reason: str
) -> ActivationResult:
    """The compare-and-swap under the workflow lock (activate, rollback, approve-and-activate),
    read top-down: the CAS key, the rules, the pointer, the statuses, the record."""
    wf, s, prior = locked.wf, locked.target, locked.prior
    observed = wf.active_revision
    # 1. The CAS key decides first: a late worker is stale whatever it tried to activate.
    if expected_revision != observed:
        return _stale(
            locked,
            action,
            actor,
            expected_revision,
            observed,
            reason=reason or f"expected revision {expected_revision}, current is {observed}",
            detail=f"expected active_revision {expected_revision} but it is {observed}: another activation "
            "landed first; nothing was changed",
        )
    # 2. The state machine and the rules that protect readers.
    refusal = _swap_refusal(locked, action, actor)
    if refusal is not None:
        return _swap_refused(locked, action, actor, expected_revision, reason, refusal)
    # 3. The pointer (the compare-and-swap itself), then the statuses, then the record
    #    (LifecycleEvents and AuditEntries of the supersede and the activation), in this one
    #    transaction. The key was checked under the workflow lock, so the UPDATE changes its row
    #    (``_append`` undoes everything if not); the statements travel with the record's first
    #    round trip.
    was = (prior.status if prior else "", s.status)
    now = timezone.now()
    changes = [
        _pointer_move(wf, s, expected_revision, now, locked.covered_tokens, compaction=action != A.ROLLBACK)
    ]
    wf.active_revision, wf.active_summary = expected_revision + 1, s
    if prior is not None:
        changes.append(
            _status_change(prior, S.SUPERSEDED, now)
        )  # first: at most one ACTIVE row at any instant
    changes.append(_status_change(s, S.ACTIVE, now))
    event = _swap_record(locked, action, actor, observed, reason, prior=prior, was=was, changes=changes)
    return ActivationResult(
        applied=True, active_revision=wf.active_revision, summary=s, superseded=prior, event=event
    )


def refused_raises(result: ActivationResult) -> ActivationResult:
    """Refusals raise, like every action's (the refused LifecycleEvent is already committed); a
    lost compare-and-swap (stale) is an outcome and is returned."""
    error = result.error()
    if result.outcome == LifecycleResult.REFUSED and error is not None:
        raise error
    return result


def activate(summary: Summary, expected_revision: int, actor: Actor, *, reason: str = "") -> ActivationResult:
    """Make a VALIDATED summary ACTIVE by compare-and-swap on ``workflow.active_revision``.

    A stale attempt is returned (workers handle it as an outcome; the API answers
    ``result.error()``, a 409); a refused one raises Conflict. Both are recorded. The previous
    active version becomes SUPERSEDED.
    """
    return refused_raises(
        _swap(
            summary,
            clean_revision(expected_revision),
            actor,
            action=A.ACTIVATE,
            reason=clean_reason(reason, required=False),
        )
    )


def rollback(summary: Summary, expected_revision: int, actor: Actor, reason: str | None) -> ActivationResult:
    """A reviewer re-activates an older SUPERSEDED version by compare-and-swap;
    its watermark may be below the current one's. Returns and raises like ``activate``."""
    return refused_raises(
        _swap(
            summary,
            clean_revision(expected_revision),
            actor,
            action=A.ROLLBACK,
            reason=clean_reason(reason, required=True),
        )
    )


def pointer_moves(workflow: Workflow):
    """Applied LifecycleEvents that moved the active pointer (one per ``active_revision`` bump)."""
    return LifecycleEvent.objects.filter(
        workflow=workflow, result=LifecycleResult.APPLIED, observed_revision__isnull=False
    )


# -- who may press which button: one rule, one place ------------------------------------------------
#
# ``allowed_actions`` is the rule: the summary page's buttons and the template tag show exactly
# its answer, and the API and the review form accept exactly its answer (``check_allowed``). The
# service functions above keep the state machine for every caller (workers and purges too).

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
# Display order of the buttons, and the statuses a person may start each action from: the state
# machine's, except that a REJECTED version already serves nobody, so it is not quarantined by
# hand (purges still quarantine those through the service).
OFFERED_FROM: dict[str, frozenset[str]] = {
    A.VALIDATE: ALLOWED_FROM[A.VALIDATE],
    A.APPROVE: ALLOWED_FROM[A.APPROVE],
    A.ACTIVATE: ALLOWED_FROM[A.ACTIVATE],
    A.ROLLBACK: ALLOWED_FROM[A.ROLLBACK],
    A.WAIVE: ALLOWED_FROM[A.WAIVE],
    A.REJECT: ALLOWED_FROM[A.REJECT],
    A.QUARANTINE: ALLOWED_FROM[A.QUARANTINE] - {S.REJECTED},
    A.RELEASE: ALLOWED_FROM[A.RELEASE],
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
    purged_since: bool = False  # a purge since its source was read removed events it covers

    def awaiting_approval(self, summary: Summary) -> bool:
        return summary.status == S.VALIDATED and self.approval_required and not self.approved


@dataclass(frozen=True)
class Refusal:
    """Why a person may not take an action now: the 409's code, detail and extra fields."""

    code: str
    detail: str
    extra: dict[str, Any]


def failed_checks(record: ValidationRecord | None) -> list[str]:
    """Names of the checks that failed and are not waived in ``record`` (the latest one counts:
    a re-validation starts again without waivers); ``memoryhub.core.checks.check_state`` decides."""
    return [] if record is None else record.failed_checks


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
    # Only a version that may still be served can have been read before a purge that matters.
    servable = summary.status in (S.VALIDATED, S.SUPERSEDED) and summary.purged_by_id is None
    purged_since = (
        servable and Purge.first_covering(wf, summary.source_purge_epoch, summary.covers_to_seq) is not None
    )
    return ActionPolicy(
        approval_required=approval_required(wf),
        approved=is_approved(summary),
        active_summary_id=wf.active_summary_id,
        active_watermark=active,
        active_revision=wf.active_revision,
        failed_checks=tuple(failed_checks(record)),
        purged_since=purged_since,
    )


def check_role(action: str, role: str | None) -> None:
    """Raise Forbidden unless ``role`` may take ``action`` at all (the role half of the rule)."""

    needed = ACTION_ROLES[action]
    if not role_at_least(role, needed):
        raise Forbidden(
            f"{action} needs the {needed} role; you are {role or 'not a member'}", code="forbidden"
        )


def refusal(summary: Summary, action: str, policy: ActionPolicy) -> Refusal | None:
    """Why nobody may take ``action`` on ``summary`` now (the state half of the rule), or None.

    The state machine (OFFERED_FROM) and the rules that protect readers (purges, approval, the
    watermark, waivable checks) decide, with the codes the service functions use.
    """
    label, status = summary.label, summary.status
    if status not in OFFERED_FROM[action]:
        allowed = ", ".join(sorted(OFFERED_FROM[action]))
        return Refusal(
            "illegal_transition", f"cannot {action} {label}: it is {status} (allowed from {allowed})", {}
        )
    serves = action in (A.APPROVE, A.ACTIVATE, A.ROLLBACK)  # would put it (back) in front of readers
    if serves and summary.purged_by_id is not None:
        return Refusal("summary_purged", f"{label} covers purged events and can never be served", {})
    if serves and policy.purged_since:
        return Refusal(
            "purged_since_read", f"{label} was computed before a purge removed events it covers", {}
        )
    if action == A.APPROVE and not policy.approval_required:
        return Refusal(
            "approval_not_required", f"the workflow policy does not require approval: activate {label}", {}
        )
    if action == A.APPROVE and policy.approved:
        return Refusal("already_approved", f"{label} is approved already", {})
    if action in (A.ACTIVATE, A.ROLLBACK) and policy.approval_required and not policy.approved:
        return Refusal(
            "approval_required", f"the workflow policy requires a reviewer to approve {label} first", {}
        )
    watermark = policy.active_watermark
    # Activate (and approve-and-activate of a VALIDATED version) never moves the watermark back.
    below = watermark is not None and summary.covers_to_seq < watermark
    if action in (A.APPROVE, A.ACTIVATE) and status == S.VALIDATED and below:
        return Refusal(
            "watermark_regression",
            f"{label} covers up to seq {summary.covers_to_seq}, below the active version's watermark "
            f"{watermark}; only a reviewer's rollback may move the watermark back",
            {"active_watermark": watermark},
        )
    if action == A.WAIVE and not waivable(policy.failed_checks):
        failed = ", ".join(policy.failed_checks) or "none"
        return Refusal(
            "nothing_to_waive", f"{label} has no failed check a waiver could accept (failed: {failed})", {}
        )
    return None


def allowed_actions(summary: Summary, role: str | None, policy: ActionPolicy) -> list[str]:
    """The actions ``role`` may take on ``summary`` now, in display order: the role may take the
    action (ACTION_ROLES) and nothing refuses it (``refusal``)."""
    return [
        action
        for action in OFFERED_FROM
        if role_at_least(role, ACTION_ROLES[action]) and refusal(summary, action, policy) is None
    ]


def check_allowed(
    summary: Summary,
    action: str,
    actor: Actor,
    role: str | None,
    *,
    reason: str = "",
    expected: int | None = None,
) -> None:
    """The API's and the review form's permission check: ``action`` must be in ``allowed_actions``.

    The role half raises Forbidden (403, nothing written, like any endpoint's role check). The
    state half is read under the workflow lock; a refusal is recorded (LifecycleEvent and
    AuditEntry) and then raised as the Conflict (409), like the service's own. A stale
    ``expected`` revision passes: the compare-and-swap answers it (stale decides first). The
    service re-checks its own rules when it runs.
    """
    check_role(action, role)

    def body(wf: Workflow, s: Summary) -> None:
        if expected is not None and expected != wf.active_revision:
            return
        why = refusal(s, action, action_policy(s, wf))
        if why is not None:
            extra = (
                dict(why.extra, current_revision=wf.active_revision) if expected is not None else why.extra
            )
            raise _refuse(
                wf, s, action, actor, why.code, why.detail, reason=reason, expected=expected, **extra
            )

    _run(summary, body)


def status_label(
    summary: Summary, policy: ActionPolicy | None = None, *, awaiting: bool | None = None
) -> str:
    """What a person reads for the status: "VALIDATED · awaiting approval" when it waits for one."""
    waiting = awaiting if awaiting is not None else bool(policy and policy.awaiting_approval(summary))
    return f"{summary.status} · awaiting approval" if waiting else str(summary.status)


def approved_q() -> Q:
    """SQL form of ``is_approved`` on Summary rows: an applied approve after the last applied quarantine."""
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
