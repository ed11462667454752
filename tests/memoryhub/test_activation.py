"""Compare-and-swap activation under real concurrency (PostgreSQL: real threads, one connection
each), plus the same invariants checked on a sequential randomized run that also runs on SQLite.

Revision-bumping actions (see memoryhub.memory.lifecycle): activate, rollback, and quarantine of the
ACTIVE summary (its automatic fallback, or the move to none). Each writes exactly one applied
LifecycleEvent with observed_revision = the revision it replaced.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from memoryhub.core.actors import Actor
from memoryhub.core.errors import DomainError
from memoryhub.memory import lifecycle
from memoryhub.memory.events import append_events, parse_batch, tokens_through
from memoryhub.models import LifecycleEvent, Summary, Workflow
from tests.factories import (
    COMPACTOR,
    REVIEWER,
    WORKER,
    activated,
    build_workflow,
    candidate,
    event,
    require_approval,
    validated,
)
from tests.helpers import post

ADMIN = Actor.user("alice")


def in_threads(n: int, target: Callable[[int], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run target(i) in n real threads, each with its own DB connection (closed at thread end)."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = target(i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    return results, errors


def check_invariants(wf: Workflow) -> dict[str, int]:
    """What must hold for a workflow whatever interleaving happened."""
    wf.refresh_from_db()
    active = list(Summary.objects.filter(workflow=wf, status="ACTIVE"))
    assert len(active) <= 1, f"{len(active)} ACTIVE summaries"
    assert (active[0].pk if active else None) == wf.active_summary_id
    moves = list(lifecycle.pointer_moves(wf).values_list("observed_revision", flat=True))
    assert wf.active_revision == len(moves), "active_revision != number of pointer moves (lost update?)"
    assert sorted(moves) == list(range(wf.active_revision)), "two moves replaced the same revision"
    # Running totals follow the pointer.
    watermark = active[0].covers_to_seq if active else 0
    assert wf.summary_tokens == (active[0].token_count if active else 0)
    assert wf.tail_events == wf.head_seq - watermark
    assert wf.tail_tokens == wf.total_tokens - tokens_through(wf, watermark)
    # Each summary's applied history is one unbroken chain ending at its current status.
    for summary in Summary.objects.filter(workflow=wf):
        status = "CANDIDATE"
        for e in LifecycleEvent.objects.filter(summary=summary, result="applied").order_by("id"):
            assert e.from_status == status, (
                f"S{summary.version}: {e.action} from {e.from_status}, was {status}"
            )
            status = e.to_status
        assert status == summary.status, f"S{summary.version} is {summary.status}, history says {status}"
    results = Counter(LifecycleEvent.objects.filter(workflow=wf).values_list("result", flat=True))
    return {"revision": wf.active_revision, **results}


# -- 50 concurrent activations with the same expected revision ----------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_api_activations_apply_exactly_once(alice, tenant):
    wf = build_workflow(tenant)
    summaries = [validated(wf) for _ in range(50)]
    barrier = threading.Barrier(50)

    def activate(i: int):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {alice.key.secret}")
        barrier.wait()
        r = post(client, f"/api/v1/summaries/{summaries[i].summary_id}/activate/", {"expected_revision": 0})
        return r.status_code, r.json()

    results, errors = in_threads(50, activate)
    assert not errors
    codes = Counter(code for code, _ in results)
    assert codes == {200: 1, 409: 49}, codes
    stale = [body for code, body in results if code == 409]
    assert all(b["error"] == "stale_revision" and b["current_revision"] == 1 for b in stale)
    winner = next(body for code, body in results if code == 200)
    wf.refresh_from_db()
    assert wf.active_summary.summary_id == winner["summary_id"] and wf.active_revision == 1
    rows = Counter(
        LifecycleEvent.objects.filter(workflow=wf, action="activate").values_list("result", flat=True)
    )
    assert rows == {"applied": 1, "stale": 49}
    assert Summary.objects.filter(workflow=wf, status="VALIDATED").count() == 49
    check_invariants(wf)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_service_activations_of_one_summary(tenant):
    wf = build_workflow(tenant)
    s1 = validated(wf)
    barrier = threading.Barrier(50)

    def activate(i: int):
        barrier.wait()
        return lifecycle.activate(s1, 0, Actor.worker("memoryhub.compaction.run_job", f"task-{i}#1"))

    results, errors = in_threads(50, activate)
    assert not errors
    assert Counter(r.outcome for r in results) == {"applied": 1, "stale": 49}
    stale = LifecycleEvent.objects.filter(summary=s1, result="stale")
    assert stale.count() == 49 and set(stale.values_list("observed_revision", flat=True)) == {1}
    assert len(set(stale.values_list("task_attempt_id", flat=True))) == 49
    assert check_invariants(wf)["revision"] == 1


# -- a late worker --------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_late_worker_paused_at_a_barrier_is_recorded_stale(api, tenant):
    wf = build_workflow(tenant)
    older = validated(wf, 1, 20)  # what the slow compaction produced
    newer = validated(wf, 1, 30)
    barrier = threading.Barrier(2)
    late = Actor.worker("memoryhub.compaction.run_job", "task-late#2")

    def worker(_: int):
        expected = Workflow.objects.get(pk=wf.pk).active_revision  # read at job start: 0
        barrier.wait()  # paused here ...
        barrier.wait()  # ... while another activation lands
        return lifecycle.activate(older, expected, late)

    thread_results: list = []
    t = threading.Thread(target=lambda: thread_results.append(in_threads(1, worker)))
    t.start()
    barrier.wait()
    assert (
        post(api, f"/api/v1/summaries/{newer.summary_id}/activate/", {"expected_revision": 0}).status_code
        == 200
    )
    barrier.wait()
    t.join(timeout=60)
    (results, errors) = thread_results[0]
    assert not errors
    assert results[0].outcome == "stale" and results[0].active_revision == 1
    wf.refresh_from_db()
    assert wf.active_summary_id == newer.pk
    assert Summary.objects.get(pk=older.pk).status == "VALIDATED"
    row = LifecycleEvent.objects.get(summary=older, result="stale")
    assert (row.expected_revision, row.observed_revision) == (0, 1)
    assert (
        row.actor_kind == "worker"
        and row.task_attempt_id == "task-late#2"
        and row.prior_active_summary_id == newer.pk
    )
    check_invariants(wf)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_late_worker_blocked_inside_the_activation_sees_the_new_revision(tenant):
    """The worker is already inside activate(), waiting on the workflow row lock, when the other
    activation commits: it must still come out stale (the CAS key is re-read under the lock)."""
    wf = build_workflow(tenant)
    older = validated(wf, 1, 20)
    newer = validated(wf, 1, 30)
    holding = threading.Event()
    release = threading.Event()
    waiting_pid: list[int] = []

    def other(_: int):
        from django.db import transaction

        with transaction.atomic():
            Workflow.objects.select_for_update().get(pk=wf.pk)
            holding.set()
            release.wait(timeout=60)
            return lifecycle.activate(newer, 0, REVIEWER)

    def late(_: int):
        holding.wait(timeout=60)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            waiting_pid.append(cursor.fetchone()[0])
        return lifecycle.activate(older, 0, WORKER)

    box: list = []
    t = threading.Thread(target=lambda: box.append(in_threads(2, lambda i: (other if i == 0 else late)(i))))
    t.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until the late worker is blocked on the row lock
        if waiting_pid:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [waiting_pid[0]]
                )
                row = cursor.fetchone()
            if row and row[0] == "Lock":
                break
        time.sleep(0.05)
    else:
        pytest.fail("the late worker never blocked on the workflow lock")
    release.set()
    t.join(timeout=60)
    (results, errors) = box[0]
    assert not errors
    assert results[0].applied and results[1].outcome == "stale"
    wf.refresh_from_db()
    assert wf.active_summary_id == newer.pk and wf.active_revision == 1
    check_invariants(wf)


# -- randomized mixed actions -----------------------------------------------------------------------

ACTIONS = (
    "activate", "activate", "activate", "stale_activate", "rollback", "quarantine", "release", "validate",
    "approve", "reject", "waive", "create", "append",
)  # fmt: skip


PREFERRED = {
    "activate": ("VALIDATED",),
    "stale_activate": ("VALIDATED",),
    "rollback": ("SUPERSEDED",),
    "quarantine": ("ACTIVE",),
    "release": ("QUARANTINED",),
    "validate": ("CANDIDATE",),
    "approve": ("VALIDATED",),
    "waive": ("REJECTED",),
}


def _setup_mix(tenant, n_workflows: int) -> list[Workflow]:
    workflows = []
    for w in range(n_workflows):
        wf = build_workflow(tenant, f"mix-{w}", n=30)
        activated(wf, 1, 10)
        for end in (10, 20, 20, 30, 30):
            validated(wf, 1, end)
        candidate(wf, 1, 30)
        lifecycle.validate(
            candidate(wf, 1, 30, compactor={**COMPACTOR, "token_budget": 5}), WORKER
        )  # REJECTED
        workflows.append(wf)
    # One workflow holds validated summaries for approval.
    require_approval(tenant, workflows[0])
    return workflows


def _one_action(rng: random.Random, workflows: list[Workflow], counts: Counter) -> None:
    wf = rng.choice(workflows)
    kind = rng.choice(ACTIONS)
    pool = list(
        Summary.objects.filter(workflow=wf).only("id", "workflow_id", "summary_id", "version", "status")
    )
    # Mostly aim at a status the action can apply to (more real races), sometimes at anything.
    preferred = [s for s in pool if s.status in PREFERRED.get(kind, ())]
    summary = rng.choice(preferred if preferred and rng.random() < 0.8 else pool)
    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)
    counts["actions"] += 1
    try:
        if kind in ("activate", "stale_activate"):
            expected = revision - 1 if kind == "stale_activate" and revision else revision
            result = lifecycle.activate(summary, expected, WORKER)
            counts[f"activate:{result.outcome}"] += 1
        elif kind == "rollback":
            result = lifecycle.rollback(summary, revision, REVIEWER, "randomized rollback")
            counts[f"rollback:{result.outcome}"] += 1
        elif kind == "quarantine":
            lifecycle.quarantine(summary, REVIEWER, "randomized quarantine")
        elif kind == "release":
            lifecycle.release(summary, ADMIN, "randomized release")
        elif kind == "validate":
            lifecycle.validate(summary, WORKER)
        elif kind == "approve":
            lifecycle.approve(summary, REVIEWER, "randomized approval")
        elif kind == "reject":
            lifecycle.reject(summary, REVIEWER, "randomized rejection")
        elif kind == "waive":
            lifecycle.waive(summary, ["token_budget"], REVIEWER, "randomized waiver")
        elif kind == "create":
            wf.refresh_from_db()
            candidate(wf, 1, rng.choice([10, 20, 30]))
        elif kind == "append":
            events, _ = parse_batch(
                {"events": [event(0, client_event_id=None) for _ in range(rng.randint(1, 3))]}
            )
            append_events(wf, events)
        counts[f"{kind}:ok"] += 1
    except DomainError as exc:  # a 4xx answer: a legal outcome of racing reviewers
        counts[f"{kind}:{exc.status}"] += 1


def _run_mix(workflows: list[Workflow], threads: int, per_thread: int, seed: int) -> Counter:
    counts: Counter = Counter()
    lock = threading.Lock()

    def worker(i: int) -> None:
        rng = random.Random(seed + i)
        local: Counter = Counter()
        for _ in range(per_thread):
            _one_action(rng, workflows, local)
        with lock:
            counts.update(local)

    if threads == 1:
        worker(0)
        return counts
    _, errors = in_threads(threads, worker)
    assert not errors, errors[:3]
    return counts


def _assert_mix(workflows: list[Workflow], counts: Counter, expected_actions: int) -> None:
    print("outcomes:", dict(sorted(counts.items())))
    assert counts["actions"] == expected_actions
    applied_by_callers = counts["activate:applied"] + counts["rollback:applied"]
    explicit = LifecycleEvent.objects.filter(
        workflow__in=workflows, action__in=["activate", "rollback"], result="applied"
    ).exclude(payload__body__reason__startswith="automatic fallback")  # reason text lives in the payload
    assert explicit.count() == applied_by_callers
    stale_rows = LifecycleEvent.objects.filter(workflow__in=workflows, result="stale").count()
    assert stale_rows == counts["activate:stale"] + counts["rollback:stale"]
    for wf in workflows:
        check_invariants(wf)


def _seed() -> int:
    seed = int(os.environ.get("MEMORYHUB_MIX_SEED", random.randrange(2**31)))
    print(f"randomized lifecycle mix seed={seed} (MEMORYHUB_MIX_SEED to replay)")
    return seed


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_randomized_concurrent_mix_keeps_the_invariants(tenant):
    workflows = _setup_mix(tenant, 3)
    baseline = LifecycleEvent.objects.filter(
        workflow__in=workflows, action__in=["activate", "rollback"]
    ).count()
    assert baseline == 3
    threads, per_thread = 8, 70  # 560 concurrent actions
    counts = _run_mix(workflows, threads, per_thread, _seed())
    counts["activate:applied"] += 3  # the setup activations
    _assert_mix(workflows, counts, threads * per_thread)
    # The run really raced: some activations applied, some went stale, some were refused.
    assert counts["activate:applied"] > 3 and counts["activate:stale"] > 0


@pytest.mark.django_db
def test_randomized_sequential_mix_keeps_the_invariants(tenant):
    """The same generator, one thread: runs on SQLite too (the state machine, not the races)."""
    workflows = _setup_mix(tenant, 2)
    counts = _run_mix(workflows, 1, 150, _seed())
    counts["activate:applied"] += 2
    _assert_mix(workflows, counts, 150)
