"""`manage.py bench_activation --clients 8 --seconds 10`: compare-and-swap activation throughput.

N client threads (one PostgreSQL connection each) race on a few workflows for a fixed time. Each
iteration reads the workflow's active_revision and activates (or, for an already superseded
version, rolls back to) a random non-active summary with that revision as the CAS key — exactly
what a compaction worker or a reviewer does. Afterwards it proves there were no lost updates:
per workflow, active_revision grew by exactly the number of applied activations the clients saw,
equals the number of pointer-move lifecycle events, and at most one summary is ACTIVE.

``--processes N`` runs each client in its own OS process instead (threads share one GIL, so
thread clients measure Python's lock as much as PostgreSQL's): phases of 1 process and of N
processes alternate (``--rounds``) in one run, and the table puts their applied activations/s side
by side; the no-lost-update checks cover every phase. ``--profile K`` then runs K uncontended
activations under cProfile and prints where their time goes.

Cost per activation instead of the race: ``--against REV`` measures git revision REV (unpacked
by ``git archive`` into a temporary directory) and this tree side by side in one run — each in
its own child process running the same workload (``memoryhub.bench.activation``), one client,
sequential attempts, the two trees' phases alternating round by round, with a commit-floor phase
(a one-UPDATE durable transaction) between rounds — and prints ms and SQL statements per applied
activation and the ratios. ``--save-baseline PATH`` writes those figures as JSON;
``--baseline PATH`` prints this tree's ratio to a saved file (measured in another run, so noisier
than ``--against``). Run it without DEBUG (``SECRET_KEY=…``): with DEBUG on Django logs every
statement, which costs per statement.

Runs in place on the configured database (a fresh ``bench-activation-<stamp>`` tenant; the
append-only rows it writes stay, like every other history).
"""

from __future__ import annotations

import cProfile
import io
import json
import multiprocessing
import pstats
import random
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, connections

from audit.log import background as background_sequencer
from memoryhub.bench import activation
from memoryhub.bench.activation import attempt, setup, verify
from memoryhub.models import Summary, Workflow


def _client_loop(
    c: int,
    seed: int,
    seconds: float,
    flows: list[Workflow],
    pool: dict[int, list[Summary]],
    wait: Callable[[], object],
) -> dict[str, Any]:
    """One client racing until its deadline; returns outcome counts, applied per workflow,
    latencies and errors (plain data, so a child process can send it back)."""
    rng = random.Random(seed + c)
    worker = activation.worker(f"client-{c}")
    local: Counter = Counter()
    local_applied: Counter = Counter()
    local_lat: list[float] = []
    errors: list[str] = []
    try:
        wait()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            result, wf_pk, elapsed = attempt(flows, pool, rng, worker)
            local_lat.append(elapsed)
            local[result.outcome] += 1
            if result.applied:
                local_applied[wf_pk] += 1
    except Exception as exc:  # reported, and fails the run
        errors.append(f"client {c}: {type(exc).__name__}: {exc}")
    finally:
        connection.close()
    return {"counts": local, "applied": local_applied, "latencies": local_lat, "errors": errors}


def _process_main(c, seed, seconds, flows, pool, barrier, queue) -> None:  # pragma: no cover - child
    result = _client_loop(c, seed, seconds, flows, pool, barrier.wait)
    # Its audit entries sequenced before it leaves: a forked child exits through os._exit, past
    # atexit. (Thread clients share the parent's sequencer, which drains at the parent's exit.)
    background_sequencer.shutdown()
    connection.close()
    queue.put(result)


def _run_processes(
    n: int, seed: int, seconds: float, flows: list[Workflow], pool: dict[int, list[Summary]]
) -> tuple[list[dict[str, Any]], float]:
    """N forked client processes (each opens its own connection), started together by a barrier."""
    connections.close_all()  # never share the parent's socket with a child
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(n + 1)
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_process_main, args=(c, seed, seconds, flows, pool, barrier, queue))
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


def _run_threads(
    n: int, seed: int, seconds: float, flows: list[Workflow], pool: dict[int, list[Summary]]
) -> tuple[list[dict[str, Any]], float]:
    barrier = threading.Barrier(n)
    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        out = _client_loop(c, seed, seconds, flows, pool, barrier.wait)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=client, args=(c,)) for c in range(n)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.perf_counter() - started


def _profile(
    flows: list[Workflow], pool: dict[int, list[Summary]], seed: int, count: int
) -> tuple[str, Counter, Counter]:
    """``count`` uncontended activations under cProfile: the top entries by cumulative and own
    time, and how much of an activation is spent waiting on SQL statements."""
    rng = random.Random(seed - 1)
    worker = activation.worker("profiled")
    outcomes: Counter = Counter()
    applied: Counter = Counter()
    profiler = cProfile.Profile()
    totals = {"activation": 0.0, "sql": 0.0, "statements": 0}

    def timed_statement(execute, sql, params, many, context):
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            totals["sql"] += time.perf_counter() - t0
            totals["statements"] += 1

    @contextmanager
    def around():
        with connection.execute_wrapper(timed_statement):
            profiler.enable()
            try:
                yield
            finally:
                profiler.disable()

    for _ in range(count):
        result, wf_pk, elapsed = attempt(flows, pool, rng, worker, around)
        totals["activation"] += elapsed
        outcomes[result.outcome] += 1
        if result.applied:
            applied[wf_pk] += 1
    out = io.StringIO()
    per = totals["activation"] / count * 1000
    sql = totals["sql"] / count * 1000
    out.write(
        f"cProfile of {count} uncontended activations: {per:.2f} ms each; {sql:.2f} ms ({sql / per:.0%}) "
        f"inside {totals['statements'] / count:.1f} SQL statements, {per - sql:.2f} ms outside them "
        "(commits and their WAL flush, Python: see psycopg's wait and the lifecycle/audit entries)\n"
    )
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(12)
    return out.getvalue(), outcomes, applied


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
        parser.add_argument(
            "--processes",
            type=int,
            default=0,
            help="clients as separate OS processes: alternate phases of 1 and N processes (default: threads)",
        )
        parser.add_argument("--rounds", type=int, default=2, help="with --processes: 1-vs-N phase pairs")
        parser.add_argument(
            "--profile", type=int, default=0, help="then profile this many activations with cProfile"
        )
        cost = parser.add_argument_group(
            "cost per activation (instead of the race): one client, sequential attempts, each tree in "
            "its own process running the same workload, phases alternating"
        )
        cost.add_argument(
            "--cost",
            action="store_true",
            help="measure the cost per activation (this tree alone unless --against)",
        )
        cost.add_argument(
            "--against",
            metavar="REV",
            help="also measure git revision REV (unpacked to a temporary directory) and print the ratio",
        )
        cost.add_argument("--save-baseline", metavar="PATH", help="write the measured costs as JSON")
        cost.add_argument(
            "--baseline", metavar="PATH", help="print the ratio to the costs saved in PATH (an earlier run)"
        )
        cost.add_argument("--cost-rounds", type=int, default=6, help="rounds of phases (default 6)")
        cost.add_argument("--cost-attempts", type=int, default=100, help="attempts per phase (default 100)")

    def handle(
        self,
        *args,
        clients: int,
        seconds: float,
        workflows: int,
        summaries: int,
        events: int,
        seed,
        processes: int,
        rounds: int,
        profile: int,
        **opts,
    ):
        if not settings.IS_POSTGRES:
            raise CommandError("bench_activation races real connections: set DATABASE_URL=postgres://…")
        if opts["cost"] or opts["against"] or opts["save_baseline"] or opts["baseline"]:
            return self.cost(workflows, summaries, events, seed, **opts)
        if clients < 1 or workflows < 1 or summaries < 2 or seconds <= 0:
            raise CommandError("need --clients >= 1, --workflows >= 1, --summaries >= 2, --seconds > 0")
        if processes < 0 or rounds < 1 or profile < 0:
            raise CommandError("need --processes >= 0, --rounds >= 1, --profile >= 0")
        seed = random.randrange(2**31) if seed is None else seed
        self.stdout.write(
            f"setting up {workflows} workflows × {summaries} validated versions ({events} events each)…"
        )
        flows, pool = setup(workflows, summaries, events)
        start_revision = {wf.pk: Workflow.objects.get(pk=wf.pk).active_revision for wf in flows}

        counts: Counter = Counter()
        applied_per_wf: Counter = Counter()
        errors: list[str] = []
        if processes:
            # (label, runner, clients) phases: 1 process, N processes, alternating.
            phases = [("1 process", _run_processes, 1), (f"{processes} processes", _run_processes, processes)]
            phases = phases * rounds
        else:
            phases = [(f"{clients} threads", _run_threads, clients)]
        per_phase: dict[str, list[tuple[float, float, int, list[float]]]] = {}
        for index, (label, runner, n) in enumerate(phases):
            self.stdout.write(f"racing: {label} for {seconds:g}s (seed {seed + 1000 * index})…")
            results, elapsed = runner(n, seed + 1000 * index, seconds, flows, pool)
            phase_counts: Counter = Counter()
            lat: list[float] = []
            for out in results:
                phase_counts.update(out["counts"])
                applied_per_wf.update(out["applied"])
                lat.extend(out["latencies"])
                errors.extend(out["errors"])
            counts.update(phase_counts)
            per_phase.setdefault(label, []).append(
                (elapsed, sum(phase_counts.values()), phase_counts["applied"], lat)
            )

        profile_text = ""
        if profile:
            profile_text, outcomes, applied = _profile(flows, pool, seed, profile)
            counts.update(outcomes)
            applied_per_wf.update(applied)

        report = verify(flows, start_revision, applied_per_wf, counts["stale"])
        rows: list[tuple[str, Any]] = [("workflows", workflows)]
        for label, runs in per_phase.items():
            elapsed = sum(r[0] for r in runs)
            attempts = sum(r[1] for r in runs)
            applied_n = sum(r[2] for r in runs)
            lat_ms = sorted(x * 1000 for r in runs for x in r[3]) or [0.0]
            rows += [
                (f"[{label}] seconds", f"{elapsed:.2f} ({len(runs)} phase{'s' if len(runs) > 1 else ''})"),
                (f"[{label}] attempts/s", f"{attempts / elapsed:.1f}"),
                (f"[{label}] applied activations/s", f"{applied_n / elapsed:.1f}"),
                (
                    f"[{label}] latency p50/p95 ms",
                    f"{statistics.median(lat_ms):.1f} / {lat_ms[int(0.95 * (len(lat_ms) - 1))]:.1f}",
                ),
            ]
        if processes:
            rates = {
                label: sum(r[2] for r in runs) / sum(r[0] for r in runs) for label, runs in per_phase.items()
            }
            one, many = rates["1 process"], rates[f"{processes} processes"]
            rows.append((f"applied/s {processes} vs 1 process", f"{many / one:.2f}×" if one else "n/a"))
        rows += [
            ("applied (all phases)", counts["applied"]),
            ("stale (CAS lost)", counts["stale"]),
            ("refused", counts["refused"]),
            ("lost updates", report["lost_updates"]),
            ("invariant violations", len(report["violations"])),
            ("errors", len(errors)),
        ]
        self.results = {str(key): value for key, value in rows}  # for `manage.py bench activation`
        for key, value in rows:
            self.stdout.write(f"  {key:<36} {value}")
        if profile_text:
            self.stdout.write(profile_text)
        for problem in report["violations"] + errors:
            self.stderr.write(f"  ! {problem}")
        if report["lost_updates"] or report["violations"] or errors:
            raise CommandError("activation benchmark found lost updates, broken invariants or errors")
        self.stdout.write(
            self.style.SUCCESS("0 lost updates: active_revision == applied activations on every workflow")
        )

    def cost(
        self,
        workflows: int,
        summaries: int,
        events: int,
        seed: int | None,
        *,
        against: str | None,
        save_baseline: str | None,
        baseline: str | None,
        cost_rounds: int,
        cost_attempts: int,
        **opts: Any,
    ) -> None:
        """ms and SQL statements per applied activation of this tree (and of ``against``), the
        commit floor measured in between, and the ratios."""
        if cost_rounds < 1 or cost_attempts < 1:
            raise CommandError("need --cost-rounds >= 1, --cost-attempts >= 1")
        if settings.DEBUG:
            self.stderr.write(
                "  note: DEBUG is on, so Django logs every SQL statement (a cost per statement)"
            )
        seed = random.randrange(2**31) if seed is None else seed
        repo = Path(settings.BASE_DIR)
        with tempfile.TemporaryDirectory(prefix="bench-activation-") as tmp:
            sides: list[activation.Side] = []
            try:
                if against:
                    commit = activation.export_tree(repo, against, Path(tmp))
                    sides.append(activation.Side(against, Path(tmp), commit))
                sides.append(activation.Side("this tree", repo, activation.tree_revision(repo)))
                self.stdout.write(
                    f"cost per activation: {' vs '.join(s.label for s in sides)}, {cost_rounds} rounds × "
                    f"{cost_attempts} attempts, {workflows} workflows (seed {seed})…"
                )
                measured = activation.measure_cost(
                    sides,
                    rounds=cost_rounds,
                    attempts=cost_attempts,
                    workflows=workflows,
                    summaries=summaries,
                    events=events,
                    seed=seed,
                    log=self.stdout.write,
                )
            finally:
                for side in sides:
                    side.close()
        measured.update(measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"), debug=settings.DEBUG)
        floor = measured["commit_floor_ms"]
        self.stdout.write(
            f"  {'tree':<14} {'ms/applied':>10} {'− floor':>8} {'client CPU':>10} {'statements':>10}  rounds (ms)"
        )
        for label, side in measured["sides"].items():
            rounds = " ".join(f"{x:.1f}" for x in side["round_ms"])
            self.stdout.write(
                f"  {label:<14} {side['ms_per_applied']:>10.2f} {side['ms_per_applied'] - floor:>8.2f} "
                f"{side['cpu_ms_per_applied']:>10.2f} {side['statements_per_applied']:>10.1f}  {rounds}"
            )
        self.stdout.write(
            f"  commit floor (one-UPDATE durable transaction, median of rounds): {floor:.2f} ms"
        )
        head = measured["sides"]["this tree"]
        self.results = {
            f"{label} ms per applied activation": round(side["ms_per_applied"], 2)
            for label, side in measured["sides"].items()
        }
        self.results |= {
            f"{label} statements per applied activation": round(side["statements_per_applied"], 1)
            for label, side in measured["sides"].items()
        }
        self.results["commit floor ms"] = round(floor, 2)
        if against:
            base = measured["sides"][against]
            self.results[f"{against} / this tree (time)"] = (
                f"{base['ms_per_applied'] / head['ms_per_applied']:.2f}x"
            )
            self.stdout.write(
                f"  {against} ÷ this tree, same run: {base['ms_per_applied'] / head['ms_per_applied']:.2f}× the "
                f"time, {base['cpu_ms_per_applied'] / head['cpu_ms_per_applied']:.2f}× the client CPU, "
                f"{base['statements_per_applied'] / head['statements_per_applied']:.2f}× the statements"
            )
        if baseline:
            saved = json.loads(Path(baseline).read_text())
            for label, side in saved["sides"].items():
                self.stdout.write(
                    f"  saved {label} ({side['tree'][:12]}, {saved['measured_at']}, another run): "
                    f"{side['ms_per_applied']:.2f} ms, {side['statements_per_applied']:.1f} statements → "
                    f"{side['ms_per_applied'] / head['ms_per_applied']:.2f}× this tree's time"
                )
        if save_baseline:
            Path(save_baseline).parent.mkdir(parents=True, exist_ok=True)
            Path(save_baseline).write_text(json.dumps(measured, indent=2) + "\n")
            self.stdout.write(f"  wrote {save_baseline}")
        problems = [
            f"{label}: {p}" for label, side in measured["sides"].items() for p in side["violations"]
        ] + [
            f"{label}: {side['lost_updates']} lost updates"
            for label, side in measured["sides"].items()
            if side["lost_updates"]
        ]
        for problem in problems:
            self.stderr.write(f"  ! {problem}")
        if problems:
            raise CommandError("activation benchmark found lost updates or broken invariants")
        self.stdout.write(self.style.SUCCESS("0 lost updates, invariants hold on every side"))
