"""`manage.py bench_activation --clients 8 --seconds 10`: compare-and-swap activation throughput.

N client threads (one PostgreSQL connection each) race on a few workflows for a fixed time. Each
iteration reads the workflow's active_revision and activates (or, for an already superseded
version, rolls back to) a random non-active summary with that revision as the CAS key — exactly
what a compaction worker or a reviewer does. Afterwards it proves there were no lost updates:
per workflow, active_revision grew by exactly the number of applied activations the clients saw,
equals the number of pointer-move lifecycle events, and at most one summary is ACTIVE.

Runs in place on the configured database (a fresh ``bench-activation-<stamp>`` tenant; the
append-only rows it writes stay, like every other history).
"""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections import Counter
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from memoryhub import lifecycle
from memoryhub.actors import Actor
from memoryhub.events import append_events, parse_batch
from memoryhub.models import LifecycleEvent, Summary, SummaryStatus, Workflow
from memoryhub.summaries import create_summary
from memoryhub.tenancy import create_tenant
from memoryhub.workflows import create_workflow

SETUP_ACTOR = Actor.system("bench_activation")


def _setup(workflows: int, summaries: int, events: int) -> tuple[list[Workflow], dict[int, list[Summary]]]:
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(f"bench-activation-{stamp}-{random.randrange(16**4):04x}", "Activation benchmark")
    flows: list[Workflow] = []
    pool: dict[int, list[Summary]] = {}
    for w in range(workflows):
        wf, _ = create_workflow(tenant, f"bench-{w}", actor=SETUP_ACTOR)
        batch, _ = parse_batch(
            {
                "events": [
                    {"kind": "message", "content": f"event {i} of workflow {w}"} for i in range(1, events + 1)
                ]
            }
        )
        append_events(wf, batch)
        wf.refresh_from_db()
        pool[wf.pk] = []
        for k in range(summaries):
            # Same coverage for all: every version is a legal target, so the race is purely the CAS.
            content = {"narrative": f"summary {k} of events 1-{events}", "facts": [], "open_items": []}
            summary = create_summary(
                wf,
                content=content,
                covers_from_seq=1,
                covers_to_seq=events,
                compactor={"name": f"bench-{k}", "version": "1"},
                actor=SETUP_ACTOR,
            )
            pool[wf.pk].append(lifecycle.validate(summary, SETUP_ACTOR))
        flows.append(wf)
    return flows, pool


class Command(BaseCommand):
    help = "Benchmark compare-and-swap activation with concurrent clients (PostgreSQL) and check for lost updates."

    def add_arguments(self, parser):
        parser.add_argument("--clients", type=int, default=8, help="concurrent client threads (default 8)")
        parser.add_argument("--seconds", type=float, default=10.0, help="run time (default 10)")
        parser.add_argument("--workflows", type=int, default=3, help="workflows raced on (default 3)")
        parser.add_argument(
            "--summaries", type=int, default=6, help="validated versions per workflow (default 6)"
        )
        parser.add_argument("--events", type=int, default=50, help="events per workflow (default 50)")
        parser.add_argument("--seed", type=int, default=None)

    def handle(
        self, *args, clients: int, seconds: float, workflows: int, summaries: int, events: int, seed, **opts
    ):
        if not settings.IS_POSTGRES:
            raise CommandError("bench_activation races real connections: set DATABASE_URL=postgres://…")
        if clients < 1 or workflows < 1 or summaries < 2 or seconds <= 0:
            raise CommandError("need --clients >= 1, --workflows >= 1, --summaries >= 2, --seconds > 0")
        seed = random.randrange(2**31) if seed is None else seed
        self.stdout.write(
            f"setting up {workflows} workflows × {summaries} validated versions ({events} events each)…"
        )
        flows, pool = _setup(workflows, summaries, events)
        start_revision = {wf.pk: Workflow.objects.get(pk=wf.pk).active_revision for wf in flows}

        counts: Counter = Counter()
        applied_per_wf: Counter = Counter()
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(clients)
        reviewer = Actor.user("bench-reviewer")

        def client(c: int) -> None:
            rng = random.Random(seed + c)
            worker = Actor.worker("bench_activation", f"client-{c}")
            local: Counter = Counter()
            local_applied: Counter = Counter()
            local_lat: list[float] = []
            try:
                barrier.wait()
                deadline = time.monotonic() + seconds
                while time.monotonic() < deadline:
                    wf = rng.choice(flows)
                    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)
                    target = rng.choice(pool[wf.pk])
                    status = Summary.objects.values_list("status", flat=True).get(pk=target.pk)
                    t0 = time.perf_counter()
                    if status == SummaryStatus.SUPERSEDED:
                        result = lifecycle.rollback(target, revision, reviewer, "bench: roll back")
                    else:
                        result = lifecycle.activate(target, revision, worker)
                    local_lat.append(time.perf_counter() - t0)
                    local[result.outcome] += 1
                    if result.applied:
                        local_applied[wf.pk] += 1
            except Exception as exc:  # reported, and fails the run
                with lock:
                    errors.append(f"client {c}: {type(exc).__name__}: {exc}")
            finally:
                connection.close()
                with lock:
                    counts.update(local)
                    applied_per_wf.update(local_applied)
                    latencies.extend(local_lat)

        self.stdout.write(f"racing: {clients} clients for {seconds:g}s (seed {seed})…")
        threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - started

        report = self._verify(flows, start_revision, applied_per_wf, counts)
        attempts = sum(counts.values())
        lat_ms = sorted(x * 1000 for x in latencies) or [0.0]
        rows: list[tuple[str, Any]] = [
            ("clients", clients),
            ("workflows", workflows),
            ("seconds", f"{elapsed:.2f}"),
            ("attempts", attempts),
            ("attempts/s", f"{attempts / elapsed:.1f}"),
            ("applied", counts["applied"]),
            ("applied activations/s", f"{counts['applied'] / elapsed:.1f}"),
            ("stale (CAS lost)", counts["stale"]),
            ("refused", counts["refused"]),
            ("latency p50 ms", f"{statistics.median(lat_ms):.1f}"),
            ("latency p95 ms", f"{lat_ms[int(0.95 * (len(lat_ms) - 1))]:.1f}"),
            ("latency max ms", f"{lat_ms[-1]:.1f}"),
            ("lost updates", report["lost_updates"]),
            ("invariant violations", len(report["violations"])),
            ("errors", len(errors)),
        ]
        for key, value in rows:
            self.stdout.write(f"  {key:<24} {value}")
        for problem in report["violations"] + errors:
            self.stderr.write(f"  ! {problem}")
        if report["lost_updates"] or report["violations"] or errors:
            raise CommandError("activation benchmark found lost updates, broken invariants or errors")
        self.stdout.write(
            self.style.SUCCESS("0 lost updates: active_revision == applied activations on every workflow")
        )

    def _verify(
        self, flows: list[Workflow], start: dict[int, int], applied: Counter, counts: Counter
    ) -> dict[str, Any]:
        lost = 0
        violations: list[str] = []
        stale_rows = 0
        for wf in flows:
            wf.refresh_from_db()
            delta = wf.active_revision - start[wf.pk]
            # A lost update is an applied activation the revision does not account for (or vice versa).
            lost += abs(delta - applied[wf.pk])
            moves = list(lifecycle.pointer_moves(wf).values_list("observed_revision", flat=True))
            if sorted(moves) != list(range(wf.active_revision)):
                violations.append(
                    f"{wf.external_id}: pointer-move events do not match revisions 0..{wf.active_revision}"
                )
            active = list(
                Summary.objects.filter(workflow=wf, status=SummaryStatus.ACTIVE).values_list("pk", flat=True)
            )
            if len(active) > 1 or (active[0] if active else None) != wf.active_summary_id:
                violations.append(f"{wf.external_id}: ACTIVE rows {active} vs pointer {wf.active_summary_id}")
            stale_rows += LifecycleEvent.objects.filter(workflow=wf, result="stale").count()
        if stale_rows != counts["stale"]:
            violations.append(
                f"{stale_rows} stale lifecycle rows but clients saw {counts['stale']} stale answers"
            )
        return {"lost_updates": lost, "violations": violations}
