"""Durable, idempotent compaction jobs: request → (broker) → run → candidate → validate → CAS activate.

* ``request_compaction`` writes the job (UNIQUE idempotency key) and enqueues it on commit. If the
  broker is unreachable the job simply stays PENDING: the job table is the outbox.
* ``run_job`` is what the Celery task calls. It claims the job under a row lock, records every
  delivery as an attempt, and is safe to run any number of times: a finished job is skipped, a job
  running elsewhere is skipped until that attempt's lease expires (worker killed), and the summary
  is written at most once per job. After a crash it resumes from the stored summary.
* ``sweep_outbox`` (beat) re-enqueues PENDING jobs, jobs whose message was lost while QUEUED, and
  RUNNING jobs whose attempt outlived its lease.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import IntegrityError, OperationalError, transaction
from django.db.models import F
from django.utils import timezone

from audit.log import record
from memoryhub.celery import publish, task_named
from memoryhub.compaction.base import (
    CompactionError,
    Compactor,
    CompactorUnavailable,
    NothingToCompact,
    TransientCompactorError,
    available_compactors,
    get_compactor,
)
from memoryhub.compaction.types import PreviousSummary
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, DomainError, InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.memory.sources import source_events
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.workflows import workflow_encoding
from memoryhub.models import CompactionJob, JobStatus, Summary, SummaryStatus, Workflow
from triggers.policy import policy_for

logger = logging.getLogger(__name__)

TASK_NAME = "memoryhub.compaction.run"
# extractive-v3 fills its budget in priority order and declares what it drops; extractive-v1/v2 stay
# registered (byte-identical) so recorded outcomes reproduce.
DEFAULT_COMPACTOR = "extractive-v3"

FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED)

# Attempt outcomes (job.attempts[*].outcome)
RUNNING = "running"
SKIPPED = "skipped"  # a duplicate delivery: job finished, or another attempt holds the lease
LOST = "lost"  # the worker died (lease expired without a result); a later attempt took over
RETRY = "retry"  # transient error, retried with backoff
SUPERSEDED = "superseded"  # finished after its lease was taken over: result discarded
DISCARDED_PURGED = "discarded_purged"  # a purge landed mid-job: its result is never stored/served


def _conf(name: str, default: Any) -> Any:
    """A setting, else an environment variable of the same name, else ``default``."""
    value = getattr(settings, name, None)
    if value is None:
        value = os.environ.get(name)
    return default if value is None else type(default)(value)


def lease_seconds() -> float:
    """How long an attempt may run before another delivery may take the job over."""
    return _conf("MEMORYHUB_COMPACTION_LEASE_SECONDS", 600.0)


def max_deliveries() -> int:
    """Deliveries (attempts that did work) after which a job is FAILED instead of run again."""
    return _conf("MEMORYHUB_COMPACTION_MAX_DELIVERIES", 5)


def max_retries() -> int:
    return _conf("MEMORYHUB_COMPACTION_MAX_RETRIES", 3)


def retry_countdown(retries: int) -> float:
    """Exponential backoff: base, 2·base, 4·base … capped at five minutes."""
    return min(_conf("MEMORYHUB_COMPACTION_RETRY_BACKOFF", 5.0) * (2**retries), 300.0)


class RetryLater(Exception):
    """Raised by ``run_job`` for a transient failure the task should retry after ``countdown``."""

    def __init__(self, message: str, countdown: float) -> None:
        super().__init__(message)
        self.countdown = countdown


# -- configuration -------------------------------------------------------------------------------


def summary_token_budget(workflow: Workflow) -> int:
    """Budget for a summary: the setting, else half the policy's post-compaction target."""
    configured = _conf("MEMORYHUB_SUMMARY_TOKEN_BUDGET", 0)
    if configured:
        return configured

    return max(256, policy_for(workflow).target_tokens // 2)


def build_compactor(name: str, workflow: Workflow) -> Compactor:
    """The compactor ``name`` configured from settings for ``workflow``'s budget and tokenizer."""
    options: dict[str, Any] = {
        "token_budget": summary_token_budget(workflow),
        "encoding": workflow_encoding(workflow),
    }
    if name.startswith("openai-chat-"):
        options |= {
            "base_url": getattr(settings, "MEMORYHUB_LLM_BASE_URL", ""),
            "model": getattr(settings, "MEMORYHUB_LLM_MODEL", ""),
            "api_key": getattr(settings, "MEMORYHUB_LLM_API_KEY", "") or None,
            "timeout": float(getattr(settings, "MEMORYHUB_LLM_TIMEOUT", 60.0)),
        }
    return get_compactor(name, **options)


def estimate_cost(model: str, compactor: str, tokens_in: int, tokens_out: int) -> Decimal:
    """USD from ``MEMORYHUB_MODEL_PRICES`` (per 1M tokens): exact model, longest prefix, compactor name."""
    prices: dict[str, tuple[float, float]] = getattr(settings, "MEMORYHUB_MODEL_PRICES", {})
    price = prices.get(model)
    if price is None:
        prefixes = [p for p in prices if model and model.startswith(p)]
        price = prices[max(prefixes, key=len)] if prefixes else prices.get(compactor, (0.0, 0.0))
    cost = (Decimal(str(price[0])) * tokens_in + Decimal(str(price[1])) * tokens_out) / 1_000_000
    return cost.quantize(Decimal("0.000001"))


def previous_summary(summary: Summary) -> PreviousSummary:
    """A stored summary as the base of the next incremental compaction."""
    return PreviousSummary(
        content=json.loads(summary.content),
        covers_from_seq=summary.covers_from_seq,
        covers_to_seq=summary.covers_to_seq,
        summary_id=summary.summary_id,
        source_refs=list(summary.source_refs or []),
        token_count=summary.token_count,
    )


def idempotency_key(workflow: Workflow, source_revision: int, compactor: str) -> str:
    """tenant/workflow/source_revision/compactor — plus the purge epoch once a purge happened, so a
    job computed before a purge can never be returned (or bring purged content back) after it."""
    key = f"{workflow.tenant_id}/{workflow.pk}/{source_revision}/{compactor}"
    return f"{key}/e{workflow.purge_epoch}" if workflow.purge_epoch else key


# -- request and enqueue ------------------------------------------------------------------------


def request_compaction(
    workflow: Workflow,
    *,
    source_revision: int | None = None,
    compactor: str | None = None,
    actor: Actor,
) -> tuple[CompactionJob, bool]:
    """The job for (workflow, source revision, compactor): existing, or created and enqueued on commit.

    Returns ``(job, created)``. Raises ``InvalidInput`` for an unknown/unavailable compactor or a
    revision outside 1..head.
    """

    name = compactor or _conf("MEMORYHUB_DEFAULT_COMPACTOR", DEFAULT_COMPACTOR)
    if name not in available_compactors():
        raise InvalidInput(
            f"unknown compactor {name!r}; available: {', '.join(available_compactors())}",
            code="unknown_compactor",
        )
    try:
        build_compactor(name, workflow)
    except CompactorUnavailable as exc:
        raise InvalidInput(str(exc), code="compactor_unavailable") from exc

    workflow.refresh_from_db(fields=["head_seq", "purge_epoch"])
    head = workflow.head_seq
    revision = head if source_revision is None else source_revision
    if head == 0:
        raise InvalidInput("the workflow has no events to compact", code="nothing_to_compact")
    if isinstance(revision, bool) or not isinstance(revision, int) or not 1 <= revision <= head:
        raise InvalidInput(
            f"source_revision must be an integer from 1 to the head revision {head}, got {revision!r}",
            code="invalid_source_revision",
        )

    key = idempotency_key(workflow, revision, name)
    existing = CompactionJob.objects.filter(idempotency_key=key).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            job = CompactionJob.objects.create(
                tenant_id=workflow.tenant_id,
                workflow=workflow,
                source_revision=revision,
                compactor=name,
                idempotency_key=key,
                requested_by=str(actor),
            )
            record(
                workflow.tenant,
                actor,
                "compaction.request",
                ("compactionjob", job.pk),
                {"workflow": workflow.external_id, "source_revision": revision, "compactor": name},
            )
            transaction.on_commit(lambda: enqueue(job.pk))
    except IntegrityError:
        # A concurrent request won the race on the unique key: the same job, not a second one.
        return CompactionJob.objects.get(idempotency_key=key), False
    return job, True


def enqueue(job_id: int) -> bool:
    """Hand the job to the broker. On failure the job stays in the outbox (PENDING) for the sweeper."""

    try:
        # Bounded (MEMORYHUB_BROKER_PUBLISH_TIMEOUT per step, no retries): a down or hung broker
        # costs the request that long at most; the sweeper is the retry.
        publish(task_named(TASK_NAME), args=[job_id])
    except Exception as exc:  # any publish failure: the outbox row is the durable record
        logger.warning("compaction job %s not enqueued (broker unreachable?): %s", job_id, exc)
        CompactionJob.objects.filter(pk=job_id).update(enqueue_attempts=F("enqueue_attempts") + 1)
        return False
    CompactionJob.objects.filter(pk=job_id).update(
        enqueued_at=timezone.now(), enqueue_attempts=F("enqueue_attempts") + 1
    )
    CompactionJob.objects.filter(pk=job_id, status=JobStatus.PENDING).update(status=JobStatus.QUEUED)
    return True


def sweep_outbox(*, grace_seconds: float | None = None) -> dict[str, int]:
    """Re-enqueue jobs the broker does not hold: never sent, lost while queued, or orphaned by a
    dead worker. Duplicates are harmless (``run_job`` is idempotent). Returns counts per kind."""
    now = timezone.now()
    grace = timedelta(
        seconds=_conf("MEMORYHUB_OUTBOX_GRACE_SECONDS", 5.0) if grace_seconds is None else grace_seconds
    )
    lease = timedelta(seconds=lease_seconds())
    counts = {"pending": 0, "queued": 0, "running": 0, "failed_to_enqueue": 0}

    candidates: list[tuple[str, int]] = []
    # Uses the partial index memoryhub_job_outbox (status = PENDING).
    for job_id in CompactionJob.objects.filter(
        status=JobStatus.PENDING, created_at__lte=now - grace
    ).values_list("pk", flat=True)[:500]:
        candidates.append(("pending", job_id))
    for job_id in CompactionJob.objects.filter(
        status=JobStatus.QUEUED, enqueued_at__lte=now - lease
    ).values_list("pk", flat=True)[:500]:
        candidates.append(("queued", job_id))
    for job in CompactionJob.objects.filter(status=JobStatus.RUNNING).only("pk", "attempts", "enqueued_at")[
        :500
    ]:
        current = _current_attempt(job.attempts)
        recently_sent = job.enqueued_at is not None and job.enqueued_at > now - lease
        if (current is None or _lease_expired(current, now)) and not recently_sent:
            candidates.append(("running", job.pk))

    for kind, job_id in candidates:
        if enqueue(job_id):
            counts[kind] += 1
        else:
            counts["failed_to_enqueue"] += 1
    if any(counts.values()):
        logger.info("compaction outbox sweep: %s", counts)
    return counts


def seconds_until_next_lease_expiry() -> float | None:
    """When the earliest running attempt's lease runs out (None when nothing is running)."""
    now = timezone.now()
    remaining = []
    for attempts in CompactionJob.objects.filter(status=JobStatus.RUNNING).values_list("attempts", flat=True)[
        :500
    ]:
        current = _current_attempt(attempts)
        if current is not None:
            started = datetime.fromisoformat(current["started_at"])
            remaining.append((started + timedelta(seconds=lease_seconds()) - now).total_seconds())
    return max(0.0, min(remaining)) if remaining else None


# -- running a job --------------------------------------------------------------------------------


@dataclass
class _Claim:
    job: CompactionJob
    attempt_id: str
    note: str = ""  # why the attempt ended as it did (shown as the job's ``error``)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _current_attempt(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    running = [a for a in attempts if a.get("outcome") == RUNNING]
    return running[-1] if running else None


def _lease_expired(attempt: dict[str, Any], now: datetime) -> bool:
    started = datetime.fromisoformat(attempt["started_at"])
    return now - started > timedelta(seconds=lease_seconds())


def _claim(job_id: int, task_id: str) -> _Claim | None:
    """Record this delivery as an attempt and take the job, or record why it is skipped."""
    now = timezone.now()
    with transaction.atomic():
        job = CompactionJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            logger.warning("compaction job %s does not exist; delivery dropped", job_id)
            return None
        attempts = list(job.attempts)
        number = len(attempts) + 1
        attempt_id = f"{task_id}:{number}"
        attempt: dict[str, Any] = {
            "attempt": number,
            "task_id": task_id,
            "attempt_id": attempt_id,
            "worker": f"{socket.gethostname()}:{os.getpid()}",
            "started_at": _iso(now),
            "finished_at": None,
            "outcome": RUNNING,
            "error": "",
        }
        current = _current_attempt(attempts)

        def skip(reason: str) -> None:
            attempt.update(finished_at=_iso(now), outcome=SKIPPED, error=reason)
            job.attempts = [*attempts, attempt]
            job.save(update_fields=["attempts"])

        if job.status in FINISHED:
            skip(f"job already {job.status}")
            return None
        if current is not None:
            if not _lease_expired(current, now):
                skip(f"attempt {current['attempt_id']} holds the job")
                return None
            current.update(outcome=LOST, error="no result before the lease expired (worker lost)")
        worked = sum(1 for a in attempts if a.get("outcome") != SKIPPED)
        if worked >= max_deliveries():
            message = f"gave up after {worked} deliveries without a result"
            attempt.update(finished_at=_iso(now), outcome="failed", error=message)
            job.attempts = [*attempts, attempt]
            job.status, job.outcome, job.error, job.finished_at = JobStatus.FAILED, "failed", message, now
            job.save(update_fields=["attempts", "status", "outcome", "error", "finished_at"])
            return None
        job.attempts = [*attempts, attempt]
        job.status = JobStatus.RUNNING
        job.started_at = job.started_at or now
        if job.expected_revision is None:
            # The CAS key is read once, when the job first starts: a job that finishes after a newer
            # activation is then a stale attempt, never a silent overwrite.
            job.expected_revision = Workflow.objects.values_list("active_revision", flat=True).get(
                pk=job.workflow_id
            )
        job.save(update_fields=["attempts", "status", "started_at", "expected_revision"])
        return _Claim(job, attempt_id)


def _finish(
    job_id: int,
    attempt_id: str,
    *,
    status: str,
    outcome: str,
    error: str = "",
    latency_ms: int | None = None,
) -> bool:
    """Close the attempt; update the job only if this attempt still owns it. Returns ownership."""
    now = timezone.now()
    with transaction.atomic():
        job = CompactionJob.objects.select_for_update().get(pk=job_id)
        attempts = list(job.attempts)
        mine = next((a for a in attempts if a.get("attempt_id") == attempt_id), None)
        owner = mine is not None and mine.get("outcome") == RUNNING and job.status == JobStatus.RUNNING
        if mine is not None:
            mine.update(finished_at=_iso(now), outcome=outcome if owner else SUPERSEDED, error=error)
        fields = ["attempts"]
        if owner:
            job.status, job.outcome, job.error = status, outcome, error
            fields += ["status", "outcome", "error"]
            if status in FINISHED:
                job.finished_at = now
                fields.append("finished_at")
            if latency_ms is not None:
                job.latency_ms = latency_ms
                fields.append("latency_ms")
            if status == JobStatus.QUEUED:
                job.enqueued_at = now  # the retry message is in flight
                fields.append("enqueued_at")
        job.attempts = attempts
        job.save(update_fields=fields)
        return owner


class _AttemptSuperseded(Exception):
    """This attempt lost its lease to a later delivery; its result must not be written."""


def run_job(job_id: int, task_id: str, *, retries_left: int = 0) -> str:
    """Run one delivery of job ``job_id``; returns the attempt's outcome.

    Raises ``RetryLater`` for a transient failure while ``retries_left`` > 0 (the task retries
    with backoff); afterwards the job is FAILED with every attempt recorded.
    """
    claim = _claim(job_id, task_id)
    if claim is None:
        return SKIPPED
    started = time.monotonic()
    actor = Actor.worker(TASK_NAME, claim.attempt_id)
    try:
        outcome = _pipeline(claim, actor)
    except _AttemptSuperseded:
        _finish(job_id, claim.attempt_id, status=JobStatus.RUNNING, outcome=SUPERSEDED)
        return SUPERSEDED
    except (TransientCompactorError, OperationalError) as exc:
        if retries_left > 0:
            countdown = retry_countdown(max_retries() - retries_left)
            _finish(job_id, claim.attempt_id, status=JobStatus.QUEUED, outcome=RETRY, error=str(exc))
            raise RetryLater(str(exc), countdown) from exc
        _finish(
            job_id,
            claim.attempt_id,
            status=JobStatus.FAILED,
            outcome="failed",
            error=f"retries exhausted: {exc}",
        )
        return "failed"
    except (CompactionError, DomainError) as exc:
        _finish(job_id, claim.attempt_id, status=JobStatus.FAILED, outcome="failed", error=str(exc))
        return "failed"
    except Exception as exc:
        # A bug must end visibly as FAILED with its attempt, not loop through redeliveries.
        logger.exception("compaction job %s crashed", job_id)
        _finish(
            job_id,
            claim.attempt_id,
            status=JobStatus.FAILED,
            outcome="error",
            error=f"{type(exc).__name__}: {exc}",
        )
        return "error"
    latency = int((time.monotonic() - started) * 1000)
    _finish(
        job_id,
        claim.attempt_id,
        status=JobStatus.SUCCEEDED,
        outcome=outcome,
        error=claim.note,
        latency_ms=latency,
    )
    return outcome


def _pipeline(claim: _Claim, actor: Actor) -> str:
    """candidate → validate → activate (CAS), resuming from whatever a crashed attempt left."""

    job = claim.job
    summary = job.summary if job.summary_id else None
    if summary is None:
        produced = _compact_and_store(claim, actor)
        if isinstance(produced, str):
            return produced
        summary = produced
    summary.refresh_from_db()
    if summary.purged_by_id is not None:  # a purge scrubbed the candidate after it was stored
        return _discard_purged(claim, actor, f"a purge scrubbed S{summary.version} before it was served")
    if summary.status == SummaryStatus.CANDIDATE:
        # Conflict: validated meanwhile (an earlier attempt or a reviewer): continue from its status.
        with contextlib.suppress(Conflict):
            lifecycle.validate(summary, actor)
        summary.refresh_from_db()
        if summary.purged_by_id is not None:  # scrubbed while it was being validated
            return _discard_purged(claim, actor, f"a purge scrubbed S{summary.version} before it was served")
    if summary.status == SummaryStatus.REJECTED:
        return "rejected"
    if summary.status == SummaryStatus.VALIDATED:
        workflow = Workflow.objects.get(pk=job.workflow_id)
        if lifecycle.approval_required(workflow) and not lifecycle.is_approved(summary):
            return "awaiting_approval"
        try:
            result = lifecycle.activate(summary, job.expected_revision or 0, actor)
        except Conflict as refused:  # recorded; a purge since the read discards the work
            if refused.code in PURGE_REFUSALS:
                return _discard_purged(claim, actor, refused.detail)
            return "refused"
        # Stale: a newer activation landed since the job started (recorded as a stale attempt).
        return "activated" if result.applied else str(result.outcome)
    return "activated" if summary.status == SummaryStatus.ACTIVE else summary.status.lower()


def _compact_and_store(claim: _Claim, actor: Actor) -> Summary | str:
    """Run the compactor outside any transaction, then write the candidate once, under the job lock.

    Returns the summary, or an outcome string when there is nothing to write.
    """

    job = claim.job
    workflow = Workflow.objects.select_related("active_summary", "tenant").get(pk=job.workflow_id)
    read_epoch = workflow.purge_epoch  # before any source is read: a purge after this discards the result
    revision = job.source_revision
    active = workflow.active_summary
    if active is not None and active.covers_to_seq >= revision:
        return "already_covered"
    # Build on the active summary unless a purge invalidated it (then re-summarise from event 1).
    base = previous_summary(active) if active is not None and active.purged_by_id is None else None
    compactor = build_compactor(job.compactor, workflow)
    start = (base.covers_from_seq if compactor.reads_history else base.covers_to_seq + 1) if base else 1
    events = source_events(workflow, start, revision)
    try:
        result = compactor.compact(base, events)
    except NothingToCompact:
        return "nothing_to_compact"

    config = compactor.config() | {"model": result.model}
    cost = estimate_cost(result.model, job.compactor, result.tokens_in, result.tokens_out)
    with transaction.atomic():
        locked = CompactionJob.objects.select_for_update().get(pk=job.pk)
        mine = next((a for a in locked.attempts if a.get("attempt_id") == claim.attempt_id), None)
        if locked.status != JobStatus.RUNNING or mine is None or mine.get("outcome") != RUNNING:
            raise _AttemptSuperseded(claim.attempt_id)
        if locked.summary is not None:  # written by an attempt that died before finishing
            return locked.summary
        try:
            # Re-checks the purge epoch under the workflow lock a purge takes too (same transaction).
            summary = create_summary(
                workflow,
                content=result.content,
                covers_from_seq=result.covers_from_seq,
                covers_to_seq=result.covers_to_seq,
                compactor=config,
                source_refs=result.source_refs,
                excluded_categories=result.excluded_categories,
                job=locked,
                claimed_hash=result.content_hash,
                source_purge_epoch=read_epoch,
                actor=actor,
            )
        except Conflict as exc:
            if exc.code != "purged_since_read":
                raise
            discarded = str(exc)
        else:
            locked.summary = summary
            locked.tokens_in, locked.tokens_out, locked.cost_usd = result.tokens_in, result.tokens_out, cost
            locked.save(update_fields=["summary", "tokens_in", "tokens_out", "cost_usd"])
            job.summary = summary
            return summary
    return _discard_purged(claim, actor, discarded)


PURGE_REFUSALS = frozenset({"summary_purged", "purged_since_read"})


def _discard_purged(claim: _Claim, actor: Actor, detail: str) -> str:
    """A purge won over this job: nothing of its result is served; record why and ask for a fresh
    compaction of what remains (at the new purge epoch, so a new job)."""

    job = claim.job
    workflow = Workflow.objects.select_related("tenant").get(pk=job.workflow_id)
    fresh: CompactionJob | None = None
    with contextlib.suppress(InvalidInput):
        fresh, _ = request_compaction(workflow, compactor=job.compactor, actor=actor)
    claim.note = f"discarded: {detail}" + (f"; fresh compaction job {fresh.pk} requested" if fresh else "")
    with transaction.atomic():
        record(
            workflow.tenant,
            actor,
            "compaction.discard",
            ("compactionjob", job.pk),
            {
                "workflow": workflow.external_id,
                "reason": DISCARDED_PURGED,
                "detail": detail,
                "purge_epoch": workflow.purge_epoch,
                "fresh_job": fresh.pk if fresh else None,
            },
        )
    return DISCARDED_PURGED


# -- presentation ----------------------------------------------------------------------------------


def job_payload(job: CompactionJob) -> dict[str, Any]:
    """API / dashboard shape of a job with every attempt and its cost figures."""
    return {
        "job_id": job.pk,
        "workflow": job.workflow.external_id,
        "source_revision": job.source_revision,
        "compactor": job.compactor,
        "idempotency_key": job.idempotency_key,
        "status": job.status,
        "outcome": job.outcome,
        "error": job.error,
        "summary_id": job.summary.summary_id if job.summary_id and job.summary else None,
        "expected_revision": job.expected_revision,
        "attempts": job.attempts,
        "tokens_in": job.tokens_in,
        "tokens_out": job.tokens_out,
        "estimated_cost_usd": str(job.cost_usd),
        "latency_ms": job.latency_ms,
        "enqueue_attempts": job.enqueue_attempts,
        "requested_by": job.requested_by,
        "created_at": job.created_at,
        "enqueued_at": job.enqueued_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
    }
