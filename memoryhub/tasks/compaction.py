"""Celery tasks for compaction: thin wrappers over :mod:`memoryhub.pipeline.jobs`."""

from __future__ import annotations

from typing import Any

from celery.signals import worker_ready

from memoryhub.celery import app
from memoryhub.pipeline import jobs


@app.task(
    name=jobs.TASK_NAME,
    bind=True,
    acks_late=True,  # a worker killed mid-task leaves the message for redelivery
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=None,  # bounded by run_job (MEMORYHUB_COMPACTION_MAX_RETRIES / MAX_DELIVERIES)
)
def run_compaction(self, job_id: int) -> str:
    retries_left = max(0, jobs.max_retries() - self.request.retries)
    try:
        return jobs.run_job(job_id, self.request.id or "eager", retries_left=retries_left)
    except jobs.RetryLater as exc:
        raise self.retry(countdown=exc.countdown, exc=exc) from exc


@app.task(name="memoryhub.compaction.sweep_outbox", ignore_result=True)
def sweep_outbox(follow_up: bool = False) -> dict[str, int]:
    """Periodic (beat) and at worker start. ``follow_up`` sweeps once more when the earliest
    running lease expires, so a job orphaned just before a restart is not left to the next beat."""
    counts = jobs.sweep_outbox()
    if follow_up:
        delay = jobs.seconds_until_next_lease_expiry()
        if delay is not None:
            sweep_outbox.apply_async(countdown=delay + 0.5)
    return counts


@worker_ready.connect
def sweep_when_a_worker_starts(sender: Any = None, **kwargs: Any) -> None:
    """A (re)started worker re-sends what a dead worker left behind, without waiting for beat.

    Sent as a task rather than run here: the worker's main process keeps no database connection.
    """
    sweep_outbox.apply_async(kwargs={"follow_up": True})
