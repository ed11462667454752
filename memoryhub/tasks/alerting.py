"""Thin Celery wrappers over alerting (memoryhub/observe/alerting/; schedules: memoryhub/schedules.py)."""

from __future__ import annotations

from memoryhub import outbox
from memoryhub.celery import app
from memoryhub.core.actors import Actor
from memoryhub.observe.alerting import deliver, evaluate
from memoryhub.observe.metrics import rollup_all


@app.task(
    name="memoryhub.alerting.evaluate_due_rules", bind=True, acks_late=True, ignore_result=True, expires=55
)
def evaluate_due_rules(self) -> int:
    """Beat, every minute: evaluate the rules this worker claims (compare-and-set)."""
    return len(evaluate.evaluate_due_rules())


@app.task(
    name="memoryhub.alerting.deliver_pending", bind=True, acks_late=True, ignore_result=True, expires=25
)
def deliver_pending(self) -> int:
    """Beat, every 30 s: deliver unprocessed flips (each claimed by compare-and-set)."""
    return len(deliver.deliver_pending(actor=Actor.worker(self.name, self.request.id or "")))


@app.task(
    name="memoryhub.alerting.rollup_metrics", bind=True, acks_late=True, ignore_result=True, expires=290
)
def rollup_metrics(self) -> int:
    """Beat, every 5 minutes: MetricSample rollups for the charts (idempotent)."""

    return rollup_all()


@app.task(name="memoryhub.alerting.send_test", bind=True, ignore_result=True, expires=3600)
def send_test(
    self,
    channel_id: int | None = None,
    rule_id: int | None = None,
    requested_by: str = "",
    outbox_id: int | None = None,
) -> int:
    """A test-send asked for from the API or a page; delivered here, never in the request.

    Not acks_late: a redelivered test would notify twice, and a lost one is simply re-asked.
    ``outbox_id`` is claimed first: a message published twice (request, then sweeper) sends once.
    """
    if not outbox.claim(outbox_id):
        return 0

    actor = Actor.worker(self.name, self.request.id or "")
    return len(deliver.send_test(channel_id=channel_id, rule_id=rule_id, actor=actor))
