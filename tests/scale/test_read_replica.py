"""A streaming read replica behind the read-after-write guard, end to end on PostgreSQL's own
machinery: the test builds a primary and a ``pg_basebackup -R`` replica, serves MemoryHub with
``DATABASE_REPLICA_URL`` set, pauses replay with ``pg_wal_replay_pause()`` and reads through the
API while the replica lags."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from memoryhub.client import MemoryHubClient
from memoryhub.client.errors import Conflict

from .pg_cluster import Cluster, Server, free_port, missing_reason, new_cluster

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or ""),
]

DATABASE = "memoryhub"


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, Server, Server]]:
    pg = new_cluster()
    try:
        primary = pg.primary()
        replica = pg.replica_of(primary)
        pg.sql(primary, f"CREATE DATABASE {DATABASE}")
        yield pg, primary, replica
    finally:
        pg.stop()


@pytest.fixture(scope="module")
def served(cluster, tmp_path_factory) -> Iterator[tuple[str, str]]:
    """MemoryHub under gunicorn on the primary + replica; yields (url, api key)."""
    _, primary, replica = cluster
    var = tmp_path_factory.mktemp("replica-var")
    env = {
        **os.environ,
        "DATABASE_URL": primary.url(DATABASE),
        "DATABASE_REPLICA_URL": replica.url(DATABASE),
        "CELERY_BROKER_URL": "memory://",
        "MEMORYHUB_VAR_DIR": str(var),
        "SECRET_KEY": "replica-test-" + "k" * 50,
        "DEBUG": "false",
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    manage(env, "migrate", "--no-input", "-v", "0")
    key = (
        manage(env, "create_tenant", "acme", "--name", "Acme", "--api-key", "agents").strip().splitlines()[-1]
    )
    port = free_port()
    log = open(Path(var) / "gunicorn.log", "wb")  # noqa: SIM115 - open for the server's lifetime
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "memoryhub.wsgi:application",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            "1",
        ],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/accounts/login/", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (
                Path(var) / "gunicorn.log"
            ).read_text()
            time.sleep(0.2)
        yield url, key
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def events(start: int, n: int) -> list[dict]:
    return [
        {
            "kind": "message",
            "agent": "planner",
            "content": f"step {i}: checked POST /payments",
            "client_event_id": f"e{i}",
        }
        for i in range(start, start + n)
    ]


def test_lagging_replica_serves_lag_tolerant_reads_and_the_guard_refuses_a_stale_tail(cluster, served):
    pg, primary, replica = cluster
    url, key = served
    hub = MemoryHubClient(url, key, stale_context_retries=0)
    hub.create_workflow("wf-replica")
    first = hub.append_events("wf-replica", events(1, 3))
    pg.wait_caught_up(primary, replica)
    assert hub.get_context("wf-replica", min_seq=first.head_seq).head_seq == 3

    pg.sql(replica, "SELECT pg_wal_replay_pause()")
    try:
        deadline = time.monotonic() + 10
        while pg.sql(replica, "SELECT pg_get_wal_replay_pause_state()") != "paused":
            assert time.monotonic() < deadline
            time.sleep(0.05)

        # Writes, and the reads inside them, go to the primary.
        second = hub.append_events("wf-replica", events(4, 2))
        assert second.head_seq == 5
        decision = hub.trigger("wf-replica", expected_next_step_tokens=100)
        assert decision.current_tokens == second.total_tokens

        # Lag-tolerant reads (context without a guard, lists, pages) come from the lagging replica.
        assert hub.get_context("wf-replica").head_seq == 3
        assert {w.external_id: w.head_seq for w in hub.list_workflows()}["wf-replica"] == 3
        assert hub.get_workflow("wf-replica").head_seq == 3

        # The read-after-write guard: never a stale tail, a 409 with Retry-After instead.
        with pytest.raises(Conflict) as stale:
            hub.get_context("wf-replica", min_seq=second.head_seq)
        assert stale.value.code == "stale_context" and stale.value.payload["head_seq"] == 3
        raw = httpx.get(
            f"{url}/api/v1/workflows/wf-replica/context/",
            params={"min_seq": 5},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert raw.status_code == 409 and raw.headers["Retry-After"] == "1"

        # A client that retries as documented gets the fresh context once replay resumes.
        sleeps: list[float] = []

        def resume_then_wait(seconds: float) -> None:
            if not sleeps:
                pg.sql(replica, "SELECT pg_wal_replay_resume()")
            sleeps.append(seconds)
            time.sleep(0.2)

        patient = MemoryHubClient(url, key, stale_context_retries=50, sleep=resume_then_wait)
        context = patient.get_context("wf-replica", min_seq=second.head_seq)
    finally:
        pg.sql(replica, "SELECT pg_wal_replay_resume()")
    assert sleeps, "the first read should have met the lagging replica"
    assert context.head_seq == 5 and [e.seq for e in context.tail] == [1, 2, 3, 4, 5]

    pg.wait_caught_up(primary, replica)
    assert hub.get_context("wf-replica", min_seq=5).head_seq == 5
    assert hub.get_workflow("wf-replica").head_seq == 5


def test_authentication_never_reads_a_lagging_replica(cluster, served):
    """A key revoked on the primary stops working at once, even while the replica lags."""
    pg, primary, replica = cluster
    url, key = served
    pg.sql(replica, "SELECT pg_wal_replay_pause()")
    try:
        pg.sql(primary, "UPDATE memoryhub_apikey SET revoked_at = now()", database=DATABASE)
        response = httpx.get(f"{url}/api/v1/workflows/", headers={"Authorization": f"Bearer {key}"})
        assert response.status_code == 401
    finally:
        pg.sql(replica, "SELECT pg_wal_replay_resume()")
        pg.sql(primary, "UPDATE memoryhub_apikey SET revoked_at = NULL", database=DATABASE)
