"""End to end through the real services: a stale activation and a consumer reading a candidate
summary trip the tenant's default rules; the flips reach a real webhook receiver, signed; the
metrics reflect the same rows. Then the same through a real Celery worker process."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone

from memoryhub.context.traces import record_trace
from memoryhub.memory import lifecycle
from memoryhub.models import AlertEvaluation, AlertRule, Channel, Notification
from memoryhub.observe.alerting.deliver import deliver_pending
from memoryhub.observe.alerting.evaluate import evaluate_due_rules
from memoryhub.observe.alerting.services import update_rule
from memoryhub.observe.metrics import compute
from tests.factories import ADMIN, WORKER, activated, alert_channel, build_workflow, candidate, validated


def webhook(tenant, receiver) -> Channel:
    channel = alert_channel(tenant, name="ops", url=receiver.url("/hook"), secret=receiver.secret)
    for rule in AlertRule.objects.filter(tenant=tenant, is_default=True):
        update_rule(rule, {"channels": [channel.pk]}, ADMIN)
    return channel


def incident(tenant):
    """S1 active; a late worker's activation of S2 with the old revision is stale; a publisher
    reads the still-unvalidated S3 candidate."""
    wf = build_workflow(tenant, "api-tests-42", n=30)
    activated(wf, 1, 20)
    s2 = validated(wf, 1, 25)
    wf.refresh_from_db()
    assert wf.active_revision == 1
    stale = lifecycle.activate(s2, 0, WORKER)  # a late worker still holding revision 0
    assert not stale.applied
    s3 = candidate(wf, 1, 30)
    trace, _ = record_trace(
        wf,
        {
            "agent": "publisher",
            "agent_run_id": "run-1",
            "model_call_id": "call-1",
            "summary_id": s3.summary_id,
            "tail_to_seq": 30,
        },
        WORKER,
    )
    assert "unvalidated_summary" in trace.flags
    return wf


@pytest.mark.django_db
def test_default_rules_alert_on_a_stale_activation_and_an_unvalidated_read(tenant, receiver):
    channel = webhook(tenant, receiver)
    incident(tenant)
    since = timezone.now() - timedelta(minutes=15)
    assert compute(tenant, "stale_activation_attempts", since=since) == 1
    assert compute(tenant, "unvalidated_consumptions", since=since) == 1

    evaluate_due_rules()
    states = dict(AlertRule.objects.filter(tenant=tenant, is_default=True).values_list("metric", "state"))
    assert states["stale_activation_attempts"] == "warning"  # > 0 warns, > 5 is critical
    assert states["unvalidated_consumptions"] == "critical"
    assert states["overflow_incidents"] == "ok"

    notifications = deliver_pending()
    assert len(notifications) >= 2 and all(n.ok for n in notifications)
    bodies = {r["json"]["rule"]["metric"]: r for r in receiver.requests}
    assert bodies["unvalidated_consumptions"]["json"]["to_state"] == "critical"
    assert bodies["stale_activation_attempts"]["json"]["to_state"] == "warning"
    assert all(r["verified"] for r in receiver.requests)
    assert Notification.objects.filter(channel=channel, ok=True).count() == len(receiver.requests)


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_evaluates_delivers_and_sends_test_notifications(tenant, alice, receiver, tmp_path):
    from memoryhub.celery import app
    from memoryhub.pipeline.worker import running_worker
    from memoryhub.tasks import alerting as tasks

    channel = webhook(tenant, receiver)
    incident(tenant)
    app.control.purge()
    try:
        # The worker process reads the allow-list from its environment, like a deployment would.
        env = {"MEMORYHUB_CHANNEL_ALLOWED_NETWORKS": "127.0.0.1/32"}
        with running_worker(log_dir=tmp_path, name="alerts", env=env):
            # The API only queues the test-send (after commit); the worker sends it.
            response = alice.api.post(f"/api/v1/channels/{channel.pk}/test/")
            assert response.status_code == 202
            wait_for(lambda: Notification.objects.filter(kind="test").exists(), what="the test-send")
            assert receiver.requests[0]["json"]["event"] == "test" and receiver.requests[0]["verified"]

            tasks.evaluate_due_rules.delay()
            rules = AlertRule.objects.filter(tenant=tenant, is_default=True)
            wait_for(
                lambda: AlertEvaluation.objects.filter(rule__in=rules).count() == rules.count(),
                what="the default rules' evaluations",
            )
            tasks.deliver_pending.delay()
            wait_for(lambda: Notification.objects.filter(kind="alert").count() >= 2, what="alert deliveries")
    finally:
        app.control.purge()
    alerts = [r for r in receiver.requests if r["json"]["event"] == "alert"]
    assert {r["json"]["rule"]["metric"] for r in alerts} >= {
        "stale_activation_attempts",
        "unvalidated_consumptions",
    }
    assert all(r["verified"] for r in alerts)
