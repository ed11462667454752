"""A hung broker is not an outage.

A private redis-server is started on a free port and frozen with SIGSTOP: it still accepts TCP
connections (the kernel does that) but never answers, which is what a wedged broker looks like.
Compaction requests, channel test-sends and rule test-sends still answer 202 within 2 s (each
publish is bounded by MEMORYHUB_BROKER_PUBLISH_TIMEOUT and not retried; the work waits in its
outbox), and once the broker is back the sweepers (beat) hand everything over and a real worker
delivers it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from memoryhub.celery import app, publish
from memoryhub.models import CompactionJob, JobStatus, Notification, OutboxMessage
from memoryhub.pipeline.worker import running_worker
from memoryhub.schedules import BEAT_SCHEDULE
from memoryhub.tasks.compaction import run_compaction
from tests.factories import ADMIN, alert_channel, alert_rule, append, event, make_workflow
from tests.memoryhub.test_worker_compaction import app_broker, finished, free_port, redis_server, wait_for

pytestmark = [
    pytest.mark.worker,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which("redis-server"), reason="needs the redis-server binary"),
]

ANSWER_WITHIN = 2.0  # seconds: the contract of item "a hung broker is not an outage"


def timed_post(party, url: str, body: dict | None = None):
    started = time.monotonic()
    response = party.api.post(url, body or {}, format="json")
    return response, time.monotonic() - started


def test_requests_answer_from_the_outbox_while_the_broker_hangs_and_the_sweeper_delivers_later(
    tenant, alice, receiver, settings, tmp_path, monkeypatch
):
    assert BEAT_SCHEDULE["task-outbox-sweep"]["task"] == "memoryhub.sweep_task_outbox"
    wf = make_workflow(tenant, "hung-broker")
    append(wf, [event(i, content=f"requirement {i}: amounts are integers") for i in range(1, 21)])
    channel = alert_channel(tenant, name="ops", url=receiver.url("/ok"), secret=receiver.secret)
    rule = alert_rule(tenant, channel, name="stale")
    settings.MEMORYHUB_OUTBOX_GRACE_SECONDS = 0

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    with app_broker(url, monkeypatch), redis_server(port) as broker:
        publish(run_compaction, args=[0])  # the broker works (job 0 does not exist: a no-op)
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            compaction, took_compaction = timed_post(
                alice, f"/api/v1/workflows/{wf.external_id}/compactions/"
            )
            channel_test, took_channel = timed_post(alice, f"/api/v1/channels/{channel.pk}/test/")
            rule_test, took_rule = timed_post(alice, f"/api/v1/alert-rules/{rule.pk}/test/")
        finally:
            os.kill(broker.pid, signal.SIGCONT)
        assert (compaction.status_code, channel_test.status_code, rule_test.status_code) == (202, 202, 202), (
            compaction.content,
            channel_test.content,
            rule_test.content,
        )
        assert max(took_compaction, took_channel, took_rule) < ANSWER_WITHIN, (
            took_compaction,
            took_channel,
            took_rule,
        )
        # Everything waits in its outbox: nothing lost, nothing sent.
        job = CompactionJob.objects.get(pk=compaction.json()["job_id"])
        assert job.status == JobStatus.PENDING and job.enqueued_at is None
        waiting = list(OutboxMessage.objects.filter(published_at__isnull=True).order_by("pk"))
        assert [m.task for m in waiting] == ["memoryhub.alerting.send_test"] * 2
        assert [m.kwargs["channel_id"] for m in waiting] == [channel.pk, None]
        assert [m.kwargs["rule_id"] for m in waiting] == [None, rule.pk]
        assert receiver.requests == []

        # The broker answers again: beat's sweepers publish, a real worker delivers, each once.
        env = {"MEMORYHUB_OUTBOX_GRACE_SECONDS": "0", "MEMORYHUB_CHANNEL_ALLOWED_NETWORKS": "127.0.0.1/32"}
        with running_worker(beat=True, broker_url=url, env=env, log_dir=tmp_path, name="sweeper"):
            wait_for(lambda: finished(job.pk), timeout=90, what="the compaction sweeper")
            wait_for(
                lambda: Notification.objects.filter(kind="test").count() == 2,
                timeout=90,
                what="the task outbox sweeper to deliver both test-sends",
            )
    assert app.connection_for_write().port != port  # restored for the next tests
    assert CompactionJob.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert len(receiver.requests) == 2 and all(r["json"]["event"] == "test" for r in receiver.requests)
    assert not OutboxMessage.objects.filter(published_at__isnull=True).exists()
    assert OutboxMessage.objects.filter(consumed_at__isnull=False).count() == 2


def test_a_message_published_twice_runs_once(tenant, alice, receiver, settings):
    """The request's publish may land after all (slow broker) and the sweeper publish it again:
    the task claims its outbox row, so the second delivery does nothing."""
    from memoryhub import outbox
    from memoryhub.observe.alerting.services import request_test_send
    from memoryhub.tasks.alerting import send_test

    channel = alert_channel(tenant, name="ops", url=receiver.url("/ok"))
    app.control.purge()
    try:
        request_test_send(actor=ADMIN, channel=channel)  # the outbox row, published after commit
    finally:
        app.control.purge()  # this test delivers it by hand, twice
    message = OutboxMessage.objects.get()
    assert send_test.run(channel_id=channel.pk, outbox_id=message.pk) == 1
    assert send_test.run(channel_id=channel.pk, outbox_id=message.pk) == 0
    assert len(receiver.requests) == 1
    assert outbox.claim(None) is True  # a direct call without an outbox row always runs
