"""Fault injection on PostgreSQL + Redis: killed database connections during appends, the broker down
during compaction requests, a worker SIGKILLed mid-compaction — and the audit chain still verifies.

Nothing of ours is mocked: a real gunicorn serves the API, real Celery workers run the jobs, the
client is our own Python client; the LLM endpoint (not ours) is a local HTTP server.
"""

from __future__ import annotations

import signal
import threading
import time

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import connection

from audit.verify import verify_chain
from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.client import MemoryHubClient
from memoryhub.core.actors import Actor
from memoryhub.models import CompactionJob, Event, JobStatus, Summary
from memoryhub.pipeline import jobs
from memoryhub.pipeline.worker import database_url, running_worker
from tests.factories import append, event, make_workflow
from tests.memoryhub.llm_endpoint import fake_llm
from tests.memoryhub.test_worker_compaction import app_broker, finished, free_port, redis_server, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.worker, pytest.mark.django_db(transaction=True)]
WEB_APP_NAME = "mh-fault-web"
MAX_KILLS = 12


@pytest.fixture(autouse=True)
def _needs_redis():
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip(
            "fault injection runs on PostgreSQL + Redis (set CELERY_BROKER_URL=redis://…); CI's second run does"
        )


class CountingTransport(httpx.HTTPTransport):
    """Counts the server errors the client saw (and retried)."""

    def __init__(self) -> None:
        super().__init__()
        self.server_errors = 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if response.status_code >= 500:  # 503 database_unavailable, retried
            self.server_errors += 1
        return response


def test_killed_connections_during_appends_leave_no_duplicate_and_no_gap(tenant):
    wf = make_workflow(tenant, "chaos")
    secret = issue_api_key(tenant, "chaos").secret
    admin_dsn = database_url().replace("postgres://", "postgresql://")
    stop, kills = threading.Event(), []

    def killer() -> None:
        # Bounded chaos: at most MAX_KILLS, so retries always get through in the end. Only sessions
        # inside a request's transaction or statement: an idle pooled connection that dies is
        # replaced by the health check before the next request and fails nothing (with kills on a
        # timer, a fast run could kill only idle sessions and exercise no retry at all).
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            while not stop.is_set() and sum(kills) < MAX_KILLS:
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s "
                    "AND state IN ('active', 'idle in transaction')",
                    [WEB_APP_NAME],
                ).fetchone()
                kills.append(row[0])
                time.sleep(0.3 if row[0] else 0.005)

    env = {"DATABASE_URL": database_url() + f"?application_name={WEB_APP_NAME}", "CONN_MAX_AGE": "60"}
    transport = CountingTransport()
    with running_server(workers=2, env=env) as base:
        client = MemoryHubClient(
            base, secret, max_retries=30, backoff=0.02, max_backoff=0.3, transport=transport
        )
        chaos = threading.Thread(target=killer, daemon=True)
        chaos.start()
        try:
            for b in range(40):
                client.append_events(
                    "chaos", [event(b * 25 + i, content=f"chaos {b}/{i}") for i in range(1, 26)]
                )
        finally:
            stop.set()
            chaos.join(timeout=10)
    assert sum(kills) > 0, "the chaos thread never killed a connection"
    assert transport.server_errors > 0, "no request failed: the test did not exercise a retry"
    rows = list(Event.objects.filter(workflow=wf).order_by("seq").values_list("seq", "client_event_id"))
    assert [seq for seq, _ in rows] == list(range(1, 1001))
    assert len({cid for _, cid in rows}) == 1000
    wf.refresh_from_db()
    assert wf.head_seq == 1000
    assert wf.total_tokens == sum(Event.objects.filter(workflow=wf).values_list("token_count", flat=True))


def test_broker_down_then_worker_killed_mid_compaction_then_the_chain_verifies(
    tenant, settings, tmp_path, monkeypatch
):
    wf = make_workflow(tenant, "faulty")
    append(
        wf, [event(i, content=f"requirement {i}: amounts are integers in minor units") for i in range(1, 41)]
    )
    actor = Actor.system("chaos")

    # 1. Broker unreachable when the compaction is requested: the job waits in the outbox.
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    settings.MEMORYHUB_OUTBOX_GRACE_SECONDS = 0
    with app_broker(url, monkeypatch):
        job, created = jobs.request_compaction(wf, actor=actor)
        assert created
        time.sleep(0.5)
        assert CompactionJob.objects.get(pk=job.pk).status == JobStatus.PENDING
        with redis_server(port):
            env = {"MEMORYHUB_OUTBOX_GRACE_SECONDS": "0"}
            with running_worker(beat=True, broker_url=url, env=env, log_dir=tmp_path, name="sweeper"):
                wait_for(lambda: finished(job.pk), timeout=90, what="the outbox sweeper to deliver the job")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED and Summary.objects.filter(job=job).count() == 1

    # 2. A worker SIGKILLed in the middle of an LLM compaction: redelivered, completes once.
    append(wf, [event(i, content=f"follow-up {i}") for i in range(41, 61)])
    settings.MEMORYHUB_COMPACTION_LEASE_SECONDS = 3
    with fake_llm() as llm:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        env = {
            "MEMORYHUB_LLM_BASE_URL": llm.url,
            "MEMORYHUB_LLM_MODEL": "gpt-test",
            "MEMORYHUB_COMPACTION_LEASE_SECONDS": "3",
        }
        llm.gate = threading.Event()
        with running_worker(env=env, log_dir=tmp_path, name="doomed") as doomed:
            second, _ = jobs.request_compaction(wf, compactor="openai-chat-v1", actor=actor)
            assert llm.received.wait(60)
            doomed.kill(signal.SIGKILL)
        gate, llm.gate = llm.gate, None
        gate.set()
        with running_worker(env=env, log_dir=tmp_path, name="rescuer"):
            wait_for(lambda: finished(second.pk), timeout=120, what="the redelivered job")
    second.refresh_from_db()
    assert second.status == JobStatus.SUCCEEDED, (second.status, second.attempts)
    assert Summary.objects.filter(job=second).count() == 1
    assert len(second.attempts) >= 2  # the killed delivery and the one that finished

    # 3. After all of it the tenant's hash chain is intact.
    result = verify_chain(tenant)
    assert result["ok"], result
    assert connection.vendor == "postgresql"
