"""The write buffer of plain "continue" decision rows (triggers.decision_log), on SQLite and
PostgreSQL: every buffered row is written exactly once, in order, with the numbers it was decided
with — by a full buffer, by the flusher thread, before a read of the log, at a clean process exit
(also a Celery worker process's) — and a killed process loses only what was still buffered.

Transactional database access: a decision made inside a transaction is never buffered.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.db import transaction

from memoryhub.core.actors import Actor
from memoryhub.models import Workflow
from memoryhub.pipeline.worker import database_url
from tests.factories import add_tokens, make_workflow
from tests.helpers import race
from triggers import decision_log, services
from triggers.decision_log import flush_decision_buffer
from triggers.models import TriggerDecision

pytestmark = pytest.mark.django_db(transaction=True)

ACTOR = Actor.system("tests")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def buffered(settings):
    """A buffer of 10 rows; the flusher thread waits long enough never to write in a test."""
    settings.MEMORYHUB_DECISION_BUFFER_ROWS = 10
    settings.MEMORYHUB_DECISION_BUFFER_MS = 600_000
    return settings


def workflow(tenant, external_id: str = "wf-buffer", tokens: int = 1_000) -> Workflow:
    wf = make_workflow(tenant, external_id)
    add_tokens(wf, tokens)
    return wf


def decide(tenant, external_id: str, step: int) -> TriggerDecision:
    wf = services.workflow_for_decision(tenant, external_id)
    return services.decide(wf, {"expected_next_step_tokens": step}, ACTOR)


def written() -> list[TriggerDecision]:
    """The rows in the table, by id, without flushing this process's buffer first."""
    return list(TriggerDecision._base_manager.order_by("id"))


def test_buffered_rows_are_written_once_in_order_with_their_numbers(tenant, buffered):
    wf = workflow(tenant)
    steps = [100 * (i + 1) for i in range(25)]
    returned = [decide(tenant, "wf-buffer", step) for step in steps]
    assert all(r.action == "continue" and not r.durable and r.pk is None for r in returned)
    # The 10th and 20th calls filled the buffer and wrote it; five rows wait.
    assert len(written()) == 20 and len(decision_log.buffer) == 5

    assert flush_decision_buffer() == 5
    assert flush_decision_buffer() == 0
    rows = written()
    assert [r.expected_next_step_tokens for r in rows] == steps
    fields = [f.attname for f in TriggerDecision._meta.concrete_fields if not f.primary_key]
    for stored, answer in zip(rows, returned, strict=True):
        assert {f: getattr(stored, f) for f in fields} == {f: getattr(answer, f) for f in fields}
    first = rows[0]
    assert (first.tenant_id, first.workflow_id, first.actor, first.job_id) == (
        tenant.pk,
        wf.pk,
        str(ACTOR),
        None,
    )
    assert (first.current_tokens, first.projected_tokens, first.safe_budget, first.hard_limit) == (
        1_000,
        1_100,
        18_000,
        25_000,
    )
    assert first.details["policy_source"] == "default" and first.inputs["current_tokens"] == 1_000
    assert [r.at for r in rows] == sorted(r.at for r in rows)  # stamped when decided


def test_reading_the_log_writes_the_buffer_first(tenant, buffered, alice):
    workflow(tenant)
    for step in (100, 200, 300):
        decide(tenant, "wf-buffer", step)
    with transaction.atomic():
        # Inside a transaction the rows would share its fate: nothing is written, the flusher will.
        assert TriggerDecision.objects.count() == 0
    assert services.decisions_for(Workflow.objects.get()).count() == 3
    decide(tenant, "wf-buffer", 400)
    log = alice.api.get("/api/v1/workflows/wf-buffer/decisions/").json()
    assert [d["expected_next_step_tokens"] for d in log["results"]] == [400, 300, 200, 100]
    assert all(d["durable"] and d["decision_id"] for d in log["results"])


def test_the_flusher_thread_writes_rows_once_the_oldest_is_old_enough(tenant, settings):
    settings.MEMORYHUB_DECISION_BUFFER_ROWS = 1_000
    settings.MEMORYHUB_DECISION_BUFFER_MS = 50
    workflow(tenant)
    decide(tenant, "wf-buffer", 100)
    decide(tenant, "wf-buffer", 200)
    deadline = time.monotonic() + 20
    while len(written()) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r.expected_next_step_tokens for r in written()] == [100, 200]
    assert len(decision_log.buffer) == 0


@pytest.mark.impossible_state(
    "no service deletes a workflow (its audit payloads protect it); a bare row, deleted behind the "
    "buffer's back, shows that a flush drops the rows of a workflow that is gone and writes the rest"
)
def test_rows_of_a_workflow_deleted_meanwhile_are_dropped_the_rest_written(tenant, buffered):
    workflow(tenant, "wf-kept")
    gone = Workflow.objects.create(tenant=tenant, external_id="wf-gone")
    decide(tenant, "wf-kept", 100)
    decide(tenant, "wf-gone", 200)
    decide(tenant, "wf-kept", 300)
    gone.delete()
    assert flush_decision_buffer() == 2
    assert [r.expected_next_step_tokens for r in written()] == [100, 300]
    assert len(decision_log.buffer) == 0


SCRIPT = """
import os, signal, sys
import django

django.setup()
from memoryhub.core.actors import Actor
from memoryhub.models import Tenant
from triggers import decision_log, services

how, count = sys.argv[1], int(sys.argv[2])
tenant, actor = Tenant.objects.get(slug="acme"), Actor.system("subprocess")
for _ in range(count):
    wf = services.workflow_for_decision(tenant, "wf-buffer")
    assert not services.decide(wf, {"expected_next_step_tokens": 100}, actor).durable
wf = services.workflow_for_decision(tenant, "wf-buffer")
assert services.decide(wf, {"expected_next_step_tokens": 30_000}, actor).action == "retrieve_or_block"
assert len(decision_log.buffer) == count
if how == "celery":  # a prefork pool process: Celery's signal, then os._exit, past atexit
    from celery.signals import worker_process_shutdown

    worker_process_shutdown.send(sender=None, pid=os.getpid(), exitcode=0)
    os._exit(0)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


def run_process(how: str, count: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MEMORYHUB_VAR_DIR": str(django_settings.VAR_DIR),
        "PYTHONPATH": str(REPO),
        "MEMORYHUB_DECISION_BUFFER_ROWS": "1000",
        "MEMORYHUB_DECISION_BUFFER_MS": "600000",
    }
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, how, str(count)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("how", ["exit", "celery"])
def test_a_clean_process_exit_writes_every_buffered_row(tenant, how):
    workflow(tenant)
    done = run_process(how, 30)
    assert done.returncode == 0, done.stderr
    actions = [r.action for r in written()]
    assert actions == ["retrieve_or_block"] + ["continue"] * 30


def test_a_killed_process_loses_only_its_buffered_continue_rows(tenant):
    workflow(tenant)
    done = run_process("kill", 30)
    assert done.returncode == -9, done.stderr
    # The decision that acted was committed before its call returned; the buffer died with it.
    assert [r.action for r in written()] == ["retrieve_or_block"]


@pytest.mark.postgres
def test_concurrent_threads_lose_no_buffered_row(tenant, settings):
    """Eight threads decide at once while full buffers are written by whichever thread filled
    them and the flusher writes the rest: every row lands once, each thread's in its order."""
    settings.MEMORYHUB_DECISION_BUFFER_ROWS = 16
    settings.MEMORYHUB_DECISION_BUFFER_MS = 20
    workflow(tenant)
    per_thread, threads = 60, 8
    counter = iter(range(threads))

    def work() -> None:
        me = next(counter)
        for i in range(per_thread):
            assert decide(tenant, "wf-buffer", 1 + me * 1_000 + i).action == "continue"

    race(threads, work)
    flush_decision_buffer()
    steps = [r.expected_next_step_tokens for r in written()]
    assert len(steps) == per_thread * threads
    for me in range(threads):
        mine = [s for s in steps if (s - 1) // 1_000 == me]
        assert mine == [1 + me * 1_000 + i for i in range(per_thread)]
