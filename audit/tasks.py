"""Celery tasks of the audit app (thin wrappers; schedules live in memoryhub/schedules.py)."""

from audit.log import sequence_all_pending
from audit.retention import sweep_all
from memoryhub.celery import app


@app.task(name="audit.retention_sweep", ignore_result=True, acks_late=True, queue="default", expires=6 * 3600)
def retention_sweep() -> int:
    return sum(r.events_tombstoned + r.summaries_scrubbed for r in sweep_all())


@app.task(name="audit.sequence_pending", ignore_result=True, queue="default", expires=60)
def sequence_pending() -> int:
    """Backstop of the after-commit sequencer: every tenant's pending audit entries."""
    return sequence_all_pending()
