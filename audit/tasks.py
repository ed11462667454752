"""Celery tasks of the audit app (thin wrappers; schedules live in memoryhub/schedules.py)."""

from audit.retention import sweep_all
from memoryhub.celery import app


@app.task(name="audit.retention_sweep", ignore_result=True, acks_late=True, queue="default", expires=6 * 3600)
def retention_sweep() -> int:
    return sum(r.events_tombstoned + r.summaries_scrubbed for r in sweep_all())
