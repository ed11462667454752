"""Compaction through a real Celery worker process (embedded filesystem broker locally, Redis in CI).

The worker shares the test database (DATABASE_URL of this process) and the broker; nothing of ours
is mocked. The LLM endpoint, the network edge we do not own, is a local HTTP server.
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from kombu import pools as kombu_pools

from memoryhub.celery import app
from memoryhub.core.actors import Actor
from memoryhub.models import CompactionJob, JobStatus, Summary, SummaryStatus
from memoryhub.pipeline import jobs
from memoryhub.pipeline.worker import running_worker
from memoryhub.schedules import BEAT_SCHEDULE
from memoryhub.tasks.compaction import run_compaction
from tests.factories import judged_by, payments
from tests.memoryhub.llm_endpoint import FakeLLM, fake_llm

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ACTOR = Actor.system("tests")


def wait_for(predicate: Callable[[], bool], timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def job_state(job_id: int) -> CompactionJob:
    return CompactionJob.objects.get(pk=job_id)


def finished(job_id: int) -> bool:
    return job_state(job_id).status in (JobStatus.SUCCEEDED, JobStatus.FAILED)


def attempts(job_id: int) -> list[dict]:
    return job_state(job_id).attempts


def deliveries(job_id: int) -> list[dict]:
    """The attempts that ran (a skipped one found the job held or finished and did nothing)."""
    return [a for a in attempts(job_id) if a.get("outcome") != "skipped"]


@pytest.fixture
def wf(tenant):
    return payments(tenant)


@pytest.fixture
def llm(settings) -> Iterator[FakeLLM]:
    with fake_llm() as server:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = server.url, "gpt-test"
        yield server


def llm_env(llm: FakeLLM, **extra: str) -> dict[str, str]:
    return {"MEMORYHUB_LLM_BASE_URL": llm.url, "MEMORYHUB_LLM_MODEL": "gpt-test", **extra}


def test_the_same_job_delivered_three_times_serially_makes_one_summary(empty_broker, wf, tmp_path):
    with running_worker(log_dir=tmp_path):
        job, _ = jobs.request_compaction(wf, actor=ACTOR)  # on_commit enqueue: delivery 1
        wait_for(lambda: finished(job.pk), what="the first delivery")
        for n in (2, 3):
            run_compaction.apply_async(args=[job.pk])
            wait_for(lambda n=n: len(attempts(job.pk)) == n, what=f"delivery {n}")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.outcome == "activated"
    assert [a["outcome"] for a in job.attempts] == ["activated", "skipped", "skipped"]
    assert len({a["task_id"] for a in job.attempts}) == 3  # three distinct deliveries
    assert Summary.objects.filter(workflow=wf).count() == 1
    assert Summary.objects.get(job=job).status == SummaryStatus.ACTIVE


def test_the_same_job_delivered_three_times_concurrently_makes_one_summary(empty_broker, wf, tmp_path):
    job, _ = jobs.request_compaction(wf, actor=ACTOR)
    run_compaction.apply_async(args=[job.pk])
    run_compaction.apply_async(args=[job.pk])
    # Three messages wait in the broker; three worker processes take them at once.
    with running_worker(pool="prefork", concurrency=3, log_dir=tmp_path):
        wait_for(lambda: len(attempts(job.pk)) == 3 and finished(job.pk), what="three deliveries")
    job.refresh_from_db()
    outcomes = sorted(a["outcome"] for a in job.attempts)
    assert outcomes == ["activated", "skipped", "skipped"], job.attempts
    assert len({a["worker"] for a in job.attempts}) >= 2  # really different processes
    assert Summary.objects.filter(workflow=wf).count() == 1


def test_a_worker_killed_mid_task_is_redelivered_and_completes_once(empty_broker, wf, llm, tmp_path):
    judged_by(wf, "rules-6")  # the fake LLM's prose declares no drops (rules-7 rejects it): a delivery test
    env = llm_env(llm, MEMORYHUB_COMPACTION_LEASE_SECONDS="3")
    llm.gate = threading.Event()  # hold the first answer: the worker is mid-task
    with running_worker(env=env, log_dir=tmp_path, name="doomed") as doomed:
        job, _ = jobs.request_compaction(wf, compactor="openai-chat-v2", actor=ACTOR)
        assert llm.received.wait(60)
        assert job_state(job.pk).status == JobStatus.RUNNING
        doomed.kill(signal.SIGKILL)
    gate, llm.gate = llm.gate, None  # later requests answer at once
    gate.set()
    # No manual step: a starting worker sweeps for jobs whose worker died (now, or when the lease
    # expires) and the redelivered attempt takes the job over.
    with running_worker(env=env, log_dir=tmp_path, name="survivor"):
        wait_for(lambda: finished(job.pk), what="the redelivered job")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.outcome == "activated"
    assert [a["outcome"] for a in job.attempts] == ["lost", "activated"]
    assert job.attempts[0]["worker"] != job.attempts[1]["worker"]
    assert Summary.objects.filter(workflow=wf).count() == 1
    assert len(llm.requests) == 2


def test_a_job_whose_worker_always_dies_ends_failed_instead_of_looping(empty_broker, wf, llm, tmp_path):
    env = llm_env(llm, MEMORYHUB_COMPACTION_LEASE_SECONDS="2", MEMORYHUB_COMPACTION_MAX_DELIVERIES="2")
    llm.gate = threading.Event()  # never answers: every worker dies mid-task
    job, _ = jobs.request_compaction(wf, compactor="openai-chat-v2", actor=ACTOR)
    for delivery in (1, 2):
        # Delivery 1 is the request's message; each later one is re-sent by the starting worker.
        with running_worker(env=env, log_dir=tmp_path, name=f"crash{delivery}") as worker:
            # A delivery that ran: a worker can also receive the dead worker's unacknowledged
            # message while that lease holds, and skip it (recorded, not a delivery).
            wait_for(lambda d=delivery: len(deliveries(job.pk)) == d, what=f"delivery {delivery}")
            worker.kill(signal.SIGKILL)
    with running_worker(env=env, log_dir=tmp_path, name="last"):
        wait_for(lambda: finished(job.pk), what="the job to give up")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == "gave up after 2 deliveries without a result"
    outcomes = [a["outcome"] for a in job.attempts]
    assert [o for o in outcomes if o != "skipped"] == ["lost", "lost", "failed"], outcomes
    # A redelivery that arrives after the job ended is recorded and skipped: it never runs again.
    assert all(o == "skipped" for o in outcomes[outcomes.index("failed") + 1 :]), outcomes
    assert len(outcomes) <= 6, outcomes
    assert not Summary.objects.filter(workflow=wf).exists()


def test_transient_llm_errors_are_retried_with_backoff_by_the_worker(empty_broker, wf, llm, tmp_path):
    judged_by(wf, "rules-6")  # the fake LLM's prose declares no drops (rules-7 rejects it): a delivery test
    llm.statuses = [500, 503]
    env = llm_env(llm, MEMORYHUB_COMPACTION_RETRY_BACKOFF="0.2")
    with running_worker(env=env, log_dir=tmp_path):
        job, _ = jobs.request_compaction(wf, compactor="openai-chat-v2", actor=ACTOR)
        wait_for(lambda: finished(job.pk), what="the retried job")
    job.refresh_from_db()
    assert [a["outcome"] for a in job.attempts] == ["retry", "retry", "activated"]
    assert "HTTP 500" in job.attempts[0]["error"] and "HTTP 503" in job.attempts[1]["error"]
    assert job.tokens_in == 321 and Summary.objects.get(job=job).model == "gpt-test-2026-01-15"


# -- outbox: the broker is down when the job is requested -----------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_server(port: int) -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(
        [
            shutil.which("redis-server") or "redis-server",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: _accepts(port), timeout=20, what="redis-server")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


@contextmanager
def app_broker(url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Point this process's Celery app at ``url`` (pools are rebuilt), then restore it.

    Celery lets the CELERY_BROKER_URL environment variable win over configuration, so set both."""
    saved = app.conf.broker_url, app.conf.broker_transport_options
    monkeypatch.setenv("CELERY_BROKER_URL", url)

    def reset() -> None:
        # Close and forget every cached connection/producer pool (kombu caches them per URL).
        kombu_pools.reset()
        app._pool = None
        app.amqp._producer_pool = None

    app.conf.broker_url, app.conf.broker_transport_options = url, {}
    reset()
    try:
        yield
    finally:
        monkeypatch.undo()
        app.conf.broker_url, app.conf.broker_transport_options = saved
        reset()


@pytest.mark.skipif(
    not shutil.which("redis-server"), reason="needs the redis-server binary to stop and restart a broker"
)
def test_broker_down_at_enqueue_keeps_the_job_pending_until_the_sweeper_sends_it(
    api, wf, settings, tmp_path, monkeypatch
):
    assert BEAT_SCHEDULE["compaction-outbox-sweep"]["task"] == "memoryhub.compaction.sweep_outbox"
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    settings.MEMORYHUB_OUTBOX_GRACE_SECONDS = 0
    assert app.connection_for_write().port != port
    with app_broker(url, monkeypatch):
        assert app.connection_for_write().port == port
        # No broker listening: the request still succeeds and the job waits in the outbox.
        r = api.post("/api/v1/workflows/api-tests-42/compactions/", {}, format="json")
        assert r.status_code == 202, r.content
        job = job_state(r.json()["job_id"])
        assert job.status == JobStatus.PENDING and job.enqueue_attempts == 1 and job.enqueued_at is None
        time.sleep(1)
        assert job_state(job.pk).status == JobStatus.PENDING  # nothing lost, nothing run

        with redis_server(port):
            # The broker is back: the sweeper (at worker start, then every 30 s from the embedded
            # beat) hands the job over.
            env = {"MEMORYHUB_OUTBOX_GRACE_SECONDS": "0"}
            with running_worker(beat=True, broker_url=url, env=env, log_dir=tmp_path, name="beat"):
                wait_for(lambda: finished(job.pk), timeout=90, what="the sweeper to enqueue the job")
    assert app.connection_for_write().port != port  # restored for the next tests
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and job.outcome == "activated"
    assert job.enqueue_attempts == 2 and len(job.attempts) == 1
    assert Summary.objects.filter(workflow=wf).count() == 1
