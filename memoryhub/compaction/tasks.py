"""Celery tasks for compaction: thin wrappers over :mod:`memoryhub.compaction.jobs`."""

from __future__ import annotations

from memoryhub.celery import app
from memoryhub.compaction import jobs


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
def sweep_outbox() -> dict[str, int]:
    return jobs.sweep_outbox()
