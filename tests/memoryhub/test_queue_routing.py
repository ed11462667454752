"""Queues routed apart: compaction, alerting and sweeps each have their own queue, so a backlog
of slow compactions never delays an alert. Proven with two real workers on separate queues."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from memoryhub.celery import app
from memoryhub.models import AlertEvent, CompactionJob, JobStatus, Notification
from memoryhub.pipeline import jobs
from memoryhub.schedules import BEAT_SCHEDULE
from tests.factories import ADMIN, alert_channel, alert_rule, build_workflow

from .llm_endpoint import fake_llm


def queue_of(task_name: str) -> str:
    return app.amqp.router.route({}, task_name)["queue"].name


def test_every_task_has_its_queue():
    app.loader.import_default_modules()
    ours = sorted(name for name in app.tasks if name.split(".")[0] in {"memoryhub", "audit", "triggers"})
    assert ours, "no project tasks registered"
    routed = {name: queue_of(name) for name in ours}
    assert routed["memoryhub.compaction.run"] == "compaction"
    assert routed["memoryhub.alerting.evaluate_due_rules"] == "alerts"
    assert routed["memoryhub.alerting.deliver_pending"] == "alerts"
    assert routed["memoryhub.alerting.send_test"] == "alerts"
    assert routed["memoryhub.compaction.sweep_outbox"] == "default"
    assert routed["memoryhub.alerting.rollup_metrics"] == "default"
    assert routed["audit.retention_sweep"] == "default"
    # Every task lands on a queue a worker started without -Q consumes (what `make demo` runs).
    consumed = set(app.amqp.queues)
    assert set(routed.values()) <= consumed == {"default", "compaction", "alerts"}
    # Beat's periodic tasks are all routed (none falls through to an unconsumed queue).
    assert {queue_of(entry["task"]) for entry in BEAT_SCHEDULE.values()} <= consumed


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    """Wait until ``predicate()``; return the seconds it took."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)
    return time.monotonic() - started


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_an_alert_fires_and_delivers_while_compactions_back_up(tenant, settings, tmp_path, receiver):
    from memoryhub.pipeline.worker import running_worker
    from memoryhub.tasks import alerting as tasks

    with fake_llm() as llm:
        llm.gate = threading.Event()  # every compaction hangs at the model until the test ends
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        env = {
            "MEMORYHUB_LLM_BASE_URL": llm.url,
            "MEMORYHUB_LLM_MODEL": "gpt-test",
            "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS": "127.0.0.1/32",
        }
        workflows = [build_workflow(tenant, f"backlog-{i}", n=30) for i in range(4)]
        channel = alert_channel(tenant, name="ops", url=receiver.url("/hook"), secret=receiver.secret)
        rule = alert_rule(
            tenant,
            channel,
            name="tail too long",
            metric="tail_events",
            warning_threshold=10,
            critical_threshold=1000,
            interval_seconds=60,
        )
        app.control.purge()
        try:
            with (
                running_worker(queues=["compaction"], name="compactor", env=env, log_dir=tmp_path),
                running_worker(queues=["alerts", "default"], name="alerter", env=env, log_dir=tmp_path),
            ):
                for wf in workflows:
                    jobs.request_compaction(wf, compactor="openai-chat-v1", actor=ADMIN)
                wait_for(llm.received.is_set, 60, "the compaction worker to reach the model")

                started = time.monotonic()
                tasks.evaluate_due_rules.delay()  # what beat sends every minute
                wait_for(lambda: AlertEvent.objects.filter(rule=rule).exists(), 60, "the alert to fire")
                tasks.deliver_pending.delay()
                wait_for(
                    lambda: Notification.objects.filter(alert_event__rule=rule, ok=True).exists(),
                    60,
                    "the delivery",
                )
                elapsed = time.monotonic() - started

                # The compactions are still backed up behind the one stuck at the model.
                backlog = CompactionJob.objects.filter(
                    workflow__in=workflows, status__in=[JobStatus.QUEUED, JobStatus.RUNNING]
                ).count()
                assert backlog == len(workflows)
                assert len(llm.requests) == 1
                llm.gate.set()
        finally:
            llm.gate.set()
            app.control.purge()

    assert elapsed < rule.interval_seconds, f"alert delivered after {elapsed:.1f}s"
    flip = AlertEvent.objects.get(rule=rule)
    assert flip.to_state == "warning"
    assert [r["json"]["rule"]["metric"] for r in receiver.requests if r["json"]["event"] == "alert"] == [
        "tail_events"
    ]
