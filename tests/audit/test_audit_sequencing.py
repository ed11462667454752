"""Audited writes do not serialise a tenant: ``record`` inserts the entry pending in the writer's
transaction (no lock on the chain), and a sequencer gives committed entries their seq and hashes
after commit — in batches, one sequencer per chain, the beat sweep as the backstop.

On SQLite and PostgreSQL: the set-once sequencing UPDATE the append-only trigger allows, pending
entries in the API list, verification and the sweep sequencing what is pending, the after-commit
path with a rollback and with a failing sequencer. On PostgreSQL only (real concurrency): writer
threads make one gapless chain, a sequencer process killed mid-batch loses and duplicates
nothing, an open audited write does not block another writer, and verify reports pending entries.
"""

from __future__ import annotations

import io
import itertools
import multiprocessing
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit import log
from audit.log import pending_entries, record, sequence_pending
from audit.models import AuditChainHead, AuditEntry
from audit.verify import verify_chain
from memoryhub.core.actors import Actor
from memoryhub.schedules import BEAT_SCHEDULE
from tests.audit.test_append_only_guards import refused
from tests.helpers import race

ACTOR = Actor.user("alice")
# A pending entry exists only between a writer's commit and its sequencer; these tests hold one still.
pending = pytest.mark.impossible_state(
    "an audit entry left pending, as record leaves it before its sequencer"
)


class Rollback(Exception):
    """Raised inside a writer's transaction to roll its change (and audit entry) back."""


def pending_entry_bypassing_services(tenant, name: str) -> AuditEntry:
    """An entry as ``record`` leaves it at its commit, before a sequencer takes it. ``record``
    itself cannot leave one here: under the ``db`` fixture's transaction nothing commits, so it
    sequences in place. The row is the one ``record`` inserts, minus the sequencing."""
    return AuditEntry.objects.create(
        tenant=tenant,
        at=timezone.now(),
        actor=str(ACTOR),
        action="policy.update",
        object_type="policy",
        object_id=name,
        chained_data={"name": name},
    )


def chain_seqs(tenant) -> list[int]:
    return list(
        AuditEntry.objects.filter(tenant=tenant, seq__isnull=False)
        .order_by("seq")
        .values_list("seq", flat=True)
    )


def audited_write(tenant, name: str, *, rollback: bool = False) -> None:
    with transaction.atomic():
        record(tenant, ACTOR, "policy.update", ("policy", name), {"name": name, "note": f"change {name}"})
        if rollback:
            raise Rollback


# --- both databases ------------------------------------------------------------------------------


@pytest.mark.django_db
@pending
def test_sequencing_is_the_one_update_a_pending_entry_gets(tenant):
    entry = pending_entry_bypassing_services(tenant, "p1")
    assert entry.pending and entry.seq is None and entry.entry_hash == ""
    sequenced = "seq = 99, prev_hash = 'sha256:1', entry_hash = 'sha256:2', sequenced_at = CURRENT_TIMESTAMP"
    # Sequencing that changes anything else, half a sequencing, a DELETE: refused.
    assert "refused" in refused(
        f"UPDATE audit_auditentry SET {sequenced}, actor = 'eve' WHERE id = %s", [entry.pk]
    )
    assert "refused" in refused(
        f"UPDATE audit_auditentry SET {sequenced}, data = '{{}}' WHERE id = %s", [entry.pk]
    )
    assert "refused" in refused("UPDATE audit_auditentry SET seq = 99 WHERE id = %s", [entry.pk])
    assert "refused" in refused("DELETE FROM audit_auditentry WHERE id = %s", [entry.pk])
    assert sequence_pending(tenant) == 1
    entry.refresh_from_db()
    assert entry.seq == chain_seqs(tenant)[-1] and entry.entry_hash.startswith("sha256:")
    assert entry.sequenced_at is not None and not entry.pending
    # Once only: a second sequencing, or any other change of a sequenced entry, is refused.
    assert "refused" in refused(f"UPDATE audit_auditentry SET {sequenced} WHERE id = %s", [entry.pk])
    assert "refused" in refused(
        "UPDATE audit_auditentry SET sequenced_at = CURRENT_TIMESTAMP WHERE id = %s", [entry.pk]
    )
    assert "refused" in refused(
        "UPDATE audit_auditentry SET entry_hash = 'sha256:3' WHERE id = %s", [entry.pk]
    )
    assert verify_chain(tenant)["ok"] is True


@pytest.mark.django_db
@pending
def test_pending_entries_are_listed_first_and_marked(tenant, api):
    audited_write(tenant, "done")
    pending_entry_bypassing_services(tenant, "waiting-1")
    pending_entry_bypassing_services(tenant, "waiting-2")
    rows = api.get("/api/v1/audit/").json()["results"]
    assert [(r["object_id"], r["pending"], r["seq"]) for r in rows[:2]] == [
        ("waiting-2", True, None),
        ("waiting-1", True, None),
    ]
    assert rows[2]["object_id"] == "done" and rows[2]["pending"] is False and rows[2]["seq"]
    assert [r["seq"] for r in rows[2:]] == sorted((r["seq"] for r in rows[2:]), reverse=True)
    # Chain order: the sequenced entries by seq, then the pending ones in the order they will join.
    ascending = api.get("/api/v1/audit/", {"ordering": "seq"}).json()["results"]
    assert [r["object_id"] for r in ascending[-2:]] == ["waiting-1", "waiting-2"]
    assert [r["seq"] for r in ascending[:-2]] == chain_seqs(tenant)


@pytest.mark.django_db
@pending
def test_verify_sequences_what_is_pending(tenant, carol):
    pending_entry_bypassing_services(tenant, "waiting-1")
    pending_entry_bypassing_services(tenant, "waiting-2")
    body = carol.api.get("/api/v1/audit/verify/").json()
    assert (body["ok"], body["sequenced_now"], body["pending"], body["pending_oldest_age_s"]) == (
        True,
        2,
        0,
        None,
    )
    assert body["entries"] == body["head_seq"] == len(chain_seqs(tenant))
    assert not pending_entries(tenant).exists()
    head = AuditChainHead.objects.get(tenant=tenant)
    assert (head.seq, head.entry_hash) == (body["head_seq"], body["head_hash"])


@pytest.mark.django_db
@pending
def test_the_beat_sweep_sequences_every_tenant(tenant, other_tenant):
    from audit import tasks

    assert BEAT_SCHEDULE["audit-sequence-sweep"]["task"] == "audit.sequence_pending"
    for name in ("a", "b"):
        pending_entry_bypassing_services(tenant, name)
    pending_entry_bypassing_services(other_tenant, "c")
    assert tasks.sequence_pending() == 3
    assert tasks.sequence_pending() == 0
    for t in (tenant, other_tenant):
        assert not pending_entries(t).exists() and verify_chain(t)["ok"] is True


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``check`` until it holds (the background sequencer runs on its own thread)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture(params=["inline", "background"])
def sequencer_mode(request, settings) -> str:
    """Both ways an entry reaches the chain after its commit (audit.sequencer)."""
    settings.MEMORYHUB_AUDIT_SEQUENCER = request.param
    return request.param


@pytest.mark.django_db(transaction=True)
def test_an_entry_is_sequenced_after_its_commit_and_not_at_all_after_a_rollback(tenant, sequencer_mode):
    with transaction.atomic():
        record(tenant, ACTOR, "policy.update", ("policy", "kept"), {"name": "kept"})
        assert AuditEntry.objects.get(object_id="kept").pending  # in the writer's transaction
    # The after-commit sequencer takes it: on the writer's thread, or soon on the sequencer's.
    assert eventually(lambda: not AuditEntry.objects.get(object_id="kept").pending)
    with pytest.raises(Rollback):
        audited_write(tenant, "rolled-back", rollback=True)
    assert not AuditEntry.objects.filter(object_id="rolled-back").exists()
    log.background.drain()
    assert chain_seqs(tenant) == list(range(1, AuditEntry.objects.filter(tenant=tenant).count() + 1))
    assert verify_chain(tenant)["ok"] is True


@pytest.mark.django_db(transaction=True)
def test_a_failing_sequencer_does_not_fail_the_write(tenant, monkeypatch, sequencer_mode):
    tried = threading.Event()

    def broken(tenant_id: int, batch: int) -> int:
        tried.set()
        raise RuntimeError("sequencer down")

    log.background.drain()  # the fixtures' own entries sequenced first
    monkeypatch.setattr(log, "_sequence_batch", broken)
    audited_write(tenant, "written")  # the change commits; the hook's error is logged, not raised
    assert tried.wait(timeout=10)  # the pass ran (inline: in the commit; background: on its thread)
    assert AuditEntry.objects.get(object_id="written").pending
    monkeypatch.undo()
    assert sequence_pending(tenant) == 1  # what the beat sweep does
    assert verify_chain(tenant)["ok"] is True


@pytest.mark.django_db(transaction=True)
def test_a_write_does_not_wait_for_the_background_sequencer(tenant, settings, monkeypatch):
    """The writer's call returns once its own transaction commits: a sequencer pass that is stuck
    (held at a gate here) delays the chain, never the write; released, it sequences the entries."""
    settings.MEMORYHUB_AUDIT_SEQUENCER = "background"
    gate, entered = threading.Event(), threading.Event()
    real = log._sequence_batch

    def held(tenant_id: int, batch: int) -> int | None:
        entered.set()
        assert gate.wait(timeout=30)
        return real(tenant_id, batch)

    monkeypatch.setattr(log, "_sequence_batch", held)
    audited_write(tenant, "first")
    assert entered.wait(timeout=10)  # the sequencer thread is inside its pass, held
    started = time.monotonic()
    for name in ("second", "third"):
        audited_write(tenant, name)
    written_in = time.monotonic() - started
    assert (
        AuditEntry.objects.filter(object_id__in=["first", "second", "third"], seq__isnull=True).count() == 3
    )
    assert written_in < 5, f"two writes took {written_in:.1f}s behind a held sequencer"
    gate.set()
    assert eventually(lambda: not pending_entries(tenant).exists())
    assert verify_chain(tenant)["ok"] is True


@pytest.mark.django_db(transaction=True)
@pending
def test_shutdown_sequences_what_is_queued_and_closes_the_thread(tenant, settings):
    settings.MEMORYHUB_AUDIT_SEQUENCER = "background"
    sequencer = log.BackgroundSequencer(log.sequence_pending)
    pending_entry_bypassing_services(tenant, "queued")
    sequencer.request(tenant.pk)
    sequencer.shutdown()  # at exit (atexit, Celery worker shutdown) and after every test
    assert not pending_entries(tenant).exists()
    assert sequencer._thread is None
    assert verify_chain(tenant)["ok"] is True


# --- PostgreSQL: real concurrency ------------------------------------------------------------------


def other_session(autocommit: bool = True) -> psycopg.Connection:
    """A second session on the test database, outside Django."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.connect(**params, autocommit=autocommit)


@contextmanager
def hold_chain(tenant) -> Iterator[None]:
    """Another session holds the tenant's chain head row, as a sequencer mid-batch does."""
    log.background.drain()  # the tenant's first entries sequenced: its chain head exists
    with other_session(autocommit=False) as other:
        got = other.execute(
            "SELECT seq FROM audit_auditchainhead WHERE tenant_id = %s FOR UPDATE", [tenant.pk]
        ).fetchone()
        assert got is not None
        try:
            yield
        finally:
            other.rollback()


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_make_one_gapless_chain(tenant):
    writers, rounds = 6, 12
    numbers = itertools.count()

    def writer() -> tuple[list[str], list[str]]:
        w, committed, rolled_back = next(numbers), [], []
        for i in range(rounds):
            names = [f"w{w}-{i}"] + ([f"w{w}-{i}-b"] if i % 3 == 2 else [])  # some write two entries
            try:
                with transaction.atomic():
                    for name in names:
                        record(tenant, ACTOR, "policy.update", ("conc", name), {"i": i})
                    if i % 4 == 3:
                        raise Rollback
            except Rollback:
                rolled_back += names
            else:
                committed += names
        return committed, rolled_back

    results = race(writers, writer)
    committed = [n for c, _ in results for n in c]
    rolled_back = [n for _, r in results for n in r]
    assert rolled_back and len(committed) > len(rolled_back)
    # The after-commit sequencer alone takes every committed entry (no extra run needed).
    assert eventually(lambda: not pending_entries(tenant).exists())
    rows = list(
        AuditEntry.objects.filter(tenant=tenant)
        .order_by("seq")
        .values_list("seq", "object_type", "object_id")
    )
    assert [seq for seq, _, _ in rows] == list(range(1, len(rows) + 1))  # gapless, each seq once
    written = Counter(oid for _, kind, oid in rows if kind == "conc")
    assert written == Counter(committed)  # every committed entry exactly once, no rolled-back one
    result = verify_chain(tenant)
    assert (result["ok"], result["entries"], result["sequenced_now"], result["pending"]) == (
        True,
        len(rows),
        0,
        0,
    )


GATE = 7_210_021  # the advisory lock the test holds to stop the sequencer process mid-batch


def _sequencer_process(tenant_id: int, gate_at: int, queue) -> None:  # pragma: no cover - child
    """A sequencer in its own OS process that blocks on the gate at its ``gate_at``-th entry hash,
    i.e. inside a batch transaction that holds the chain head and its claimed entries."""
    hash_entry, calls = log.compute_entry_hash, 0

    def gated(entry: AuditEntry) -> str:
        nonlocal calls
        calls += 1
        if calls == gate_at:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_lock(%s)", [GATE])
        return hash_entry(entry)

    log.compute_entry_hash = gated  # type: ignore[assignment]
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        queue.put(cursor.fetchone()[0])
    queue.put(sequence_pending(tenant_id, batch=3))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_sequencer_killed_mid_batch_loses_and_duplicates_nothing(tenant, settings):
    # The writers sequence inline, so no background pass takes the backlog once the chain is free:
    # the sequencer process below is the one that takes it.
    settings.MEMORYHUB_AUDIT_SEQUENCER = "inline"
    with hold_chain(tenant):  # a backlog: the writers' own sequencers find the chain busy
        for i in range(10):
            audited_write(tenant, f"backlog-{i}")
    assert pending_entries(tenant).count() == 10
    before = len(chain_seqs(tenant))
    with other_session() as gate:
        gate.execute("SELECT pg_advisory_lock(%s)", [GATE])
        connections.close_all()  # the child opens its own connection
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_sequencer_process, args=(tenant.pk, 5, queue))  # batch 2, entry 2
        child.start()
        try:
            backend = queue.get(timeout=30)
            wait_until(
                lambda: (
                    gate.execute(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = %s AND NOT granted",
                        [GATE],
                    ).fetchone()[0]
                    == 1
                ),
                "the sequencer process to stop mid-batch",
            )
            # Mid-batch: its first batch is committed, the second is claimed and the chain is held.
            assert len(chain_seqs(tenant)) == before + 3
            kept = dict(
                AuditEntry.objects.filter(tenant=tenant, seq__isnull=False).values_list("id", "entry_hash")
            )
            with connection.cursor() as cursor:
                cursor.execute("SET lock_timeout = '10s'")  # a wait for the chain would be an error
            assert sequence_pending(tenant) == 0  # another sequencer skips the held chain at once
            os.kill(child.pid, signal.SIGKILL)
            child.join(30)
            assert child.exitcode == -signal.SIGKILL
        finally:
            if child.is_alive():
                child.kill()
            gate.execute("SELECT pg_advisory_unlock(%s)", [GATE])
        # Its session ends (the transaction of batch 2 rolls back) once it can no longer answer.
        wait_until(
            lambda: (
                gate.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [backend]).fetchone()[0]
                == 0
            ),
            "the killed sequencer's session to end",
        )
    assert pending_entries(tenant).count() == 7
    assert sequence_pending(tenant) == 7  # a fresh run takes what the killed batch held
    assert chain_seqs(tenant) == list(range(1, before + 11))
    after = dict(AuditEntry.objects.filter(tenant=tenant, id__in=kept).values_list("id", "entry_hash"))
    assert after == kept  # the committed batch is untouched
    names = list(
        AuditEntry.objects.filter(tenant=tenant, object_id__startswith="backlog-").values_list(
            "object_id", flat=True
        )
    )
    assert sorted(names) == sorted(f"backlog-{i}" for i in range(10))
    assert verify_chain(tenant)["ok"] is True
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_open_audited_write_does_not_block_another_writer(tenant):
    inserted, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def open_writer() -> None:
        try:
            with transaction.atomic():
                record(tenant, ACTOR, "policy.update", ("policy", "slow"), {"name": "slow"})
                inserted.set()
                assert release.wait(60)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    def second_writer() -> int | None:
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '5s'")  # waiting for a lock would raise, not hang
        audited_write(tenant, "fast")
        log.background.drain()  # its entry sequenced (the background thread's pass, waited for)
        return AuditEntry.objects.get(object_id="fast").seq

    slow = threading.Thread(target=open_writer)
    slow.start()
    try:
        assert inserted.wait(30)
        (fast_seq,) = race(1, second_writer)  # its whole audited commit, sequencing included
    finally:
        release.set()
        slow.join(60)
    assert not slow.is_alive() and not errors, errors
    log.background.drain()  # the slow writer's entry sequenced after its commit
    slow_entry, fast_entry = (
        AuditEntry.objects.get(object_id="slow"),
        AuditEntry.objects.get(object_id="fast"),
    )
    # Commit order, not insert order: the entry inserted first committed last and follows.
    assert slow_entry.id < fast_entry.id and fast_seq is not None and slow_entry.seq == fast_seq + 1
    assert verify_chain(tenant)["ok"] is True


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_verify_reports_pending_entries_and_the_oldest_age(tenant, carol):
    with hold_chain(tenant):
        for i in range(3):
            audited_write(tenant, f"waiting-{i}")
        oldest = AuditEntry.objects.get(object_id="waiting-0").at
        started = timezone.now()
        result = verify_chain(tenant)
        finished = timezone.now()
        body = carol.api.get("/api/v1/audit/verify/").json()
        page = carol.web.get("/audit/", {"verify": "1"}).content.decode()
        out = io.StringIO()
        call_command("audit_verify", "--tenant", tenant.slug, stdout=out)
    assert (result["ok"], result["pending"], result["sequenced_now"]) == (True, 3, 0)
    assert (started - oldest).total_seconds() - 0.001 <= result["pending_oldest_age_s"]
    assert result["pending_oldest_age_s"] <= (finished - oldest).total_seconds() + 0.001
    assert (body["ok"], body["pending"]) == (True, 3) and body["pending_oldest_age_s"] >= result[
        "pending_oldest_age_s"
    ]
    assert page.count('class="pending"') == 3 and 'id="chain-pending"' in page
    assert "; 3 pending, the oldest written" in out.getvalue()
    released = verify_chain(tenant)  # the chain is free again: verify sequences the three
    assert (released["ok"], released["pending"], released["pending_oldest_age_s"]) == (True, 0, None)
    assert released["sequenced_now"] == 3 and released["entries"] == len(chain_seqs(tenant))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_pass_that_finds_the_chain_held_returns_in_one_round_trip(tenant):
    """Every process's sequencer runs a pass after its writers' commits, and all but one find the
    chain head held: that pass must cost one round trip, not a second query asking whether the
    head exists (the held head and a missing one both lock nothing, so the answer travels along)."""
    with hold_chain(tenant):
        audited_write(tenant, "held")
        log.background.drain()
        with CaptureQueriesContext(connection) as ctx:
            assert log._sequence_batch(tenant.pk, 10) is None
        sent = [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]
        assert len(sent) == 1, sent  # the head's lock, the claim and the head's existence, together
        assert AuditEntry.objects.get(object_id="held").seq is None
    sequence_pending(tenant)
    assert AuditEntry.objects.get(object_id="held").seq is not None  # sequenced once released


def _forked_writer(tenant_id: int, queue) -> None:  # pragma: no cover - child
    """A forked process (a Celery prefork child, a gunicorn --preload worker) writing audited
    changes: its sequencer starts empty, with a lock and a thread of its own."""
    from memoryhub.models import Tenant

    try:
        tenant = Tenant.objects.get(pk=tenant_id)
        audited_write(tenant, "from-the-child")
        log.background.shutdown()  # what worker_process_shutdown does (the child skips atexit)
        queue.put(AuditEntry.objects.get(object_id="from-the-child").seq)
    except BaseException as exc:
        queue.put(repr(exc))
    finally:
        connection.close()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_forked_child_sequences_with_its_own_thread_even_if_the_parent_held_the_lock(tenant, settings):
    settings.MEMORYHUB_AUDIT_SEQUENCER = "background"
    audited_write(tenant, "from-the-parent")  # the parent's sequencer thread is running
    connections.close_all()  # the child opens its own connection
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with log.background._lock:  # held at the fork, as another thread of the parent might
        child = ctx.Process(target=_forked_writer, args=(tenant.pk, queue))
        child.start()
    seq = queue.get(timeout=60)
    child.join(30)
    assert isinstance(seq, int), seq  # sequenced by the child's own sequencer, no deadlock
    log.background.drain()
    assert not pending_entries(tenant).exists()
    assert verify_chain(tenant)["ok"] is True
