"""`manage.py bench audit`: audited writes in one tenant, and how long an entry waits to be sequenced.

Writer processes (one connection each, started together by a barrier) commit audited changes in
one tenant for a fixed time. Two ways, in alternating phases of 1 and N writers in one run:

* ``after_commit`` (what ``audit.log.record`` does): the entry is inserted pending; after the
  commit the writer process's sequencer thread sequences it, with whatever else was committed
  meanwhile (or finds another sequencer already holding the chain, which takes it).
* ``in_transaction`` (the scheme before, for comparison): the writer locks the tenant's chain
  head, appends and sequences its entry inside its own transaction and holds the lock to commit,
  so the tenant's writers run one at a time.

Reported per phase kind: committed writes/s and write latency (commit and the after-commit hook
included), and for ``after_commit`` the sequencing lag — from the writer's commit (an on_commit
hook registered before ``record``'s own) to the ``sequenced_at`` its sequencer stamped — p50/p99.
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connection, connections, transaction
from django.utils import timezone

from audit.log import _sequence_batch, background, pending_entries, record
from audit.models import AuditChainHead, AuditEntry
from audit.verify import verify_chain
from memoryhub.accounts.tenancy import create_tenant
from memoryhub.core.actors import Actor
from memoryhub.models import Tenant

ACTOR = Actor.system("bench_audit")
MODES = ("after_commit", "in_transaction")


def _write(tenant: Any, mode: str, n: int) -> tuple[int, datetime]:
    """One audited change; returns the entry id and when its transaction committed."""
    committed: dict[str, datetime] = {}
    with transaction.atomic():
        transaction.on_commit(lambda: committed.setdefault("at", timezone.now()))  # runs first
        if mode == "in_transaction":
            AuditChainHead.objects.select_for_update().get(tenant=tenant)  # waits, as writers did
        entry = record(tenant, ACTOR, "bench.write", ("bench", n), {"n": n})
        if mode == "in_transaction":
            _sequence_batch(tenant.pk, 1)  # the sequencer's own step, inside the writer's transaction
    return entry.pk, committed["at"]


def _writer(tenant_id: int, mode: str, seconds: float, seed: int, wait: Callable[[], Any]) -> dict[str, Any]:
    tenant = Tenant.objects.get(pk=tenant_id)
    rng = random.Random(seed)
    writes: list[tuple[int, datetime]] = []
    latencies: list[float] = []
    try:
        wait()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            writes.append(_write(tenant, mode, rng.randrange(10**9)))
            latencies.append(time.perf_counter() - t0)
    finally:
        background.shutdown()  # its last passes: a forked writer leaves through os._exit, past atexit
        connection.close()
    return {"writes": writes, "latencies": latencies}


def _process_main(tenant_id, mode, seconds, seed, barrier, queue) -> None:  # pragma: no cover - child
    queue.put(_writer(tenant_id, mode, seconds, seed, barrier.wait))


def _phase(
    tenant_id: int, mode: str, n: int, seconds: float, seed: int
) -> tuple[list[dict[str, Any]], float]:
    connections.close_all()  # never share the parent's socket with a child
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(n + 1), ctx.Queue()
    procs = [
        ctx.Process(target=_process_main, args=(tenant_id, mode, seconds, seed + c, barrier, queue))
        for c in range(n)
    ]
    for p in procs:
        p.start()
    barrier.wait()
    started = time.perf_counter()
    results = [queue.get(timeout=seconds + 120) for _ in procs]
    elapsed = time.perf_counter() - started
    for p in procs:
        p.join()
    return results, elapsed


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def run(
    writers: int = 4, seconds: float = 3.0, rounds: int = 2, log: Callable[[str], None] = print
) -> dict[str, Any]:
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(f"bench-audit-{stamp}-{random.randrange(16**4):04x}", "Audit benchmark")
    phases = [(mode, n) for mode in MODES for n in (1, writers)] * rounds
    totals: dict[tuple[str, int], dict[str, Any]] = {}
    for index, (mode, n) in enumerate(phases):
        log(f"audit: {mode}, {n} writer process(es), {seconds:g}s")
        results, elapsed = _phase(tenant.pk, mode, n, seconds, 1000 * index)
        slot = totals.setdefault((mode, n), {"elapsed": 0.0, "writes": [], "latencies": []})
        slot["elapsed"] += elapsed
        for out in results:
            slot["writes"] += out["writes"]
            slot["latencies"] += out["latencies"]

    ids = [pk for slot in totals.values() for pk, _ in slot["writes"]]
    sequenced_at = dict(AuditEntry._base_manager.filter(pk__in=ids).values_list("pk", "sequenced_at"))
    rows: dict[str, Any] = {}
    for (mode, n), slot in totals.items():
        label = f"{mode} x{n}"
        lat_ms = [x * 1000 for x in slot["latencies"]]
        rows[f"{label} writes/s"] = round(len(slot["writes"]) / slot["elapsed"], 1)
        rows[f"{label} write p50/p99 ms"] = f"{statistics.median(lat_ms):.1f} / {_pct(lat_ms, 0.99):.1f}"
        if mode == "after_commit":
            lag_ms = [
                max(0.0, (sequenced_at[pk] - at).total_seconds() * 1000)
                for pk, at in slot["writes"]
                if sequenced_at.get(pk) is not None
            ]
            rows[f"{label} sequencing lag p50/p99/max ms"] = (
                f"{statistics.median(lag_ms):.1f} / {_pct(lag_ms, 0.99):.1f} / {max(lag_ms):.1f}"
            )
    for mode in MODES:
        one, many = rows[f"{mode} x1 writes/s"], rows[f"{mode} x{writers} writes/s"]
        rows[f"{mode} writes/s {writers} vs 1 writer"] = f"{many / one:.2f}x" if one else "n/a"
    old, new = rows[f"in_transaction x{writers} writes/s"], rows[f"after_commit x{writers} writes/s"]
    rows[f"after_commit vs in_transaction, {writers} writers"] = f"{new / old:.2f}x" if old else "n/a"
    rows["left pending after the run"] = pending_entries(tenant).count()
    result = verify_chain(tenant)
    rows["chain"] = (
        f"ok={result['ok']} entries={result['entries']} sequenced_by_verify={result['sequenced_now']}"
    )
    return rows
