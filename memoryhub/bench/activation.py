"""The activation workload of ``manage.py bench_activation``, and its per-activation cost meter.

One *attempt* reads a workflow's active_revision and activates (or, for an already superseded
version, rolls back to) a random version with that revision as the CAS key — what a compaction
worker or a reviewer does. ``verify`` then proves there were no lost updates.

The cost meter runs this file as a child process (``python -c 'runpy…' activation.py`` with the
tree to measure first on ``sys.path``), so one bench invocation can drive two trees — an older
commit unpacked by ``git archive`` and the working tree — through the *same* workload, phases
alternating, and compare them side by side. That is why memoryhub's modules are looked up in
both package layouts (``_module``: flat, and the sub-packages since), and why only APIs that
older trees have are used.
The child reads one JSON command per line on stdin and answers one line on stdout, prefixed by
``REPLY`` (anything else a tree prints is ignored).
"""

from __future__ import annotations

import functools
import importlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import django
from django.db import connection, transaction
from django.db.models import F

# memoryhub itself is imported inside the functions that use it, never up here: the child process
# runs this file (from whichever tree is on its sys.path) before ``serve`` calls django.setup(),
# and memoryhub's models load only after it. Each such import points back to this note.

REPLY = "@@bench_activation "


@functools.cache  # resolved once per process: the lookup's file checks ran inside the timed call
def _module(package: str, name: str) -> Any:
    """memoryhub's module ``name``: ``memoryhub.<package>.<name>`` in this tree, or the flat
    ``memoryhub.<name>`` of trees from before the sub-packages. Decided by the files, not by trying
    imports: an editable install may resolve a module this tree lacks from another checkout."""
    import memoryhub  # after django.setup(): see the note at the top

    root = Path(memoryhub.__file__).parent
    for parts in ((package, name), (name,)):
        path = root.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return importlib.import_module(".".join(("memoryhub", *parts)))
    raise ModuleNotFoundError(f"memoryhub has no module {name!r} in {root}")


def lifecycle() -> Any:
    return _module("memory", "lifecycle")


def _actors() -> Any:
    return _module("core", "actors")


@dataclass(frozen=True)
class Refused:
    """A refusal seen as an outcome (trees since the refusal-style change raise Conflict)."""

    outcome: str = "refused"
    applied: bool = False


def reviewer() -> Any:
    return _actors().Actor.user("bench-reviewer")


def worker(name: str) -> Any:
    return _actors().Actor.worker("bench_activation", name)


def _word(k: int) -> str:
    """``k`` spelled in lowercase letters (0 → "a", 26 → "ba")."""
    letters = ""
    while True:
        k, r = divmod(k, 26)
        letters = "abcdefghijklmnopqrstuvwxyz"[r] + letters
        if not k:
            return letters


def _units_declared(workflow: Any, events: int) -> dict[str, Any]:
    """The ``dropped`` manifest a compactor writes for events whose numbers its summary leaves out,
    sealed with its census (rules-8 rejects a summary that drops units silently). Empty on trees
    from before sealed manifests, whose validators did not ask for one."""
    try:
        budgeted = _module("compaction", "budgeted")
        verdicts = _module("core", "verdicts")
        sources = _module("memory", "sources")
    except ModuleNotFoundError:
        return {}
    if not hasattr(budgeted, "sealed"):
        return {}
    entry = {"seq": 1, "kind": "unit", "text": f"seqs 1-{events}: units not listed", "units": []}
    evidence = verdicts.build_evidence(sources.source_events(workflow, 1, events))
    return {"dropped": budgeted.sealed({"dropped": [entry]}, evidence)["dropped"]}


def setup(workflows: int, summaries: int, events: int) -> tuple[list[Any], dict[int, list[Any]]]:
    """A fresh tenant with ``workflows`` workflows of ``events`` events and ``summaries`` validated
    versions each, all covering every event (so every version is a legal target: the race is
    purely the CAS)."""
    from memoryhub.models import Workflow  # after django.setup(): see the note at the top

    events_mod = _module("memory", "events")
    summaries_mod = _module("memory", "summaries")
    tenancy = _module("accounts", "tenancy")
    workflows_mod = _module("memory", "workflows")
    actor = _actors().Actor.system("bench_activation")
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = tenancy.create_tenant(
        f"bench-activation-{stamp}-{random.randrange(16**6):06x}", "Activation benchmark"
    )
    flows: list[Any] = []
    pool: dict[int, list[Any]] = {}
    for w in range(workflows):
        wf, _ = workflows_mod.create_workflow(tenant, f"bench-{w}", actor=actor)
        batch, _ = events_mod.parse_batch(
            {
                "events": [
                    {"kind": "message", "content": f"event {i} of workflow {w}"} for i in range(1, events + 1)
                ]
            }
        )
        events_mod.append_events(wf, batch)
        wf = Workflow.objects.get(pk=wf.pk)
        pool[wf.pk] = []
        manifest = _units_declared(wf, events)
        for k in range(summaries):
            # Each version's text differs by a word, not a number: a number no event holds would be
            # a fabricated unit to today's validators.
            content = {"narrative": f"summary {_word(k)} of events 1-{events}", "facts": [], "open_items": []}
            content.update(manifest)
            summary = summaries_mod.create_summary(
                wf,
                content=content,
                covers_from_seq=1,
                covers_to_seq=events,
                compactor={"name": f"bench-{k}", "version": "1"},
                actor=actor,
            )
            pool[wf.pk].append(lifecycle().validate(summary, actor))
        flows.append(wf)
    return flows, pool


def attempt(
    flows: list[Any],
    pool: dict[int, list[Any]],
    rng: random.Random,
    actor: Any,
    around: Callable[[], AbstractContextManager[object]] = nullcontext,
) -> tuple[Any, int, float]:
    """One client iteration (see the module docstring); ``around`` wraps the timed call alone.
    Returns (result, workflow pk, seconds inside the lifecycle call)."""
    # after django.setup(): see the note at the top
    from memoryhub.models import Summary, SummaryStatus, Workflow

    wf = rng.choice(flows)
    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=wf.pk)
    target = rng.choice(pool[wf.pk])
    status = Summary.objects.values_list("status", flat=True).get(pk=target.pk)
    with around():
        t0 = time.perf_counter()
        try:
            if status == SummaryStatus.SUPERSEDED:
                result = lifecycle().rollback(target, revision, reviewer(), "bench: roll back")
            else:
                result = lifecycle().activate(target, revision, actor)
        except _module("core", "errors").Conflict:  # a refusal (recorded) raises
            result = Refused()
        elapsed = time.perf_counter() - t0
    return result, wf.pk, elapsed


def verify(flows: list[Any], start: dict[int, int], applied: Counter, stale: int) -> dict[str, Any]:
    """Lost updates (applied activations the revision does not account for, or vice versa) and
    broken invariants: pointer-move events ≠ revisions 0..n−1, more than one ACTIVE row or one
    the pointer does not name, stale rows ≠ the stale answers the clients saw."""
    # after django.setup(): see the note at the top
    from memoryhub.models import LifecycleEvent, Summary, SummaryStatus, Workflow

    lost = 0
    violations: list[str] = []
    stale_rows = 0
    for wf in flows:
        wf = Workflow.objects.get(pk=wf.pk)
        lost += abs(wf.active_revision - start[wf.pk] - applied[wf.pk])
        moves = list(lifecycle().pointer_moves(wf).values_list("observed_revision", flat=True))
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
    if stale_rows != stale:
        violations.append(f"{stale_rows} stale lifecycle rows but clients saw {stale} stale answers")
    return {"lost_updates": lost, "violations": violations}


# -- the cost meter's child process ------------------------------------------------------------------


class _Meter:
    """One tree's side of the cost comparison: its own tenant, sequential attempts, counted."""

    def __init__(self) -> None:
        self.flows: list[Any] = []
        self.pool: dict[int, list[Any]] = {}
        self.start: dict[int, int] = {}
        self.applied: Counter = Counter()
        self.stale = 0
        self.actor = worker("meter")

    def setup(self, workflows: int, summaries: int, events: int) -> dict[str, Any]:
        self.flows, self.pool = setup(workflows, summaries, events)
        self.start = {wf.pk: wf.active_revision for wf in self.flows}
        return {"workflows": len(self.flows)}

    def run(self, attempts: int, seed: int) -> dict[str, Any]:
        """``attempts`` sequential attempts: per outcome, the time, this process's CPU time (the
        client's share: Python, ORM, driver) and the SQL statements inside the lifecycle calls."""
        rng = random.Random(seed)
        probe = {"statements": 0, "cpu": 0.0}

        def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            probe["statements"] += 1
            return execute(sql, params, many, context)

        @contextmanager
        def around() -> Iterator[None]:
            probe["statements"], cpu = 0, time.process_time()
            with connection.execute_wrapper(count):
                yield
            probe["cpu"] = time.process_time() - cpu

        out: dict[str, Any] = {}
        for _ in range(attempts):
            result, wf_pk, elapsed = attempt(self.flows, self.pool, rng, self.actor, around)
            row = out.setdefault(str(result.outcome), {"n": 0, "seconds": 0.0, "cpu": 0.0, "statements": 0})
            row["n"] += 1
            row["seconds"] += elapsed
            row["cpu"] += probe["cpu"]
            row["statements"] += probe["statements"]
            if result.applied:
                self.applied[wf_pk] += 1
            self.stale += str(result.outcome) == "stale"
        return out

    def floor(self, n: int) -> dict[str, Any]:
        """The commit floor: ``n`` transactions of one UPDATE of a workflow row, the smallest
        durable write (one WAL flush each, like every activation's commit)."""
        from memoryhub.models import Workflow  # after django.setup(): see the note at the top

        pk = self.flows[0].pk
        t0 = time.perf_counter()
        for _ in range(n):
            with transaction.atomic():
                Workflow.objects.filter(pk=pk).update(updated_at=F("updated_at"))
        return {"n": n, "seconds": time.perf_counter() - t0}

    def verify(self) -> dict[str, Any]:
        return verify(self.flows, self.start, self.applied, self.stale)


class Side:
    """A child process serving ``_Meter`` commands with ``tree``'s code (see the module docstring)."""

    RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"

    def __init__(self, label: str, tree: Path, revision: str) -> None:
        self.label, self.tree, self.tree_revision = label, tree, revision
        env = {**os.environ, "PYTHONPATH": str(tree), "DJANGO_SETTINGS_MODULE": "memoryhub.settings"}
        self.process = subprocess.Popen(
            [sys.executable, "-c", self.RUNNER, __file__],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, command: str, **args: Any) -> Any:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps({"command": command, **args}) + "\n")
        stdin.flush()
        for line in stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY) :])
        raise RuntimeError(f"{self.label}: the bench process exited (code {self.process.wait()})")

    def close(self) -> None:
        stdin = self.process.stdin
        if self.process.poll() is None and stdin is not None:
            stdin.write(json.dumps({"command": "quit"}) + "\n")
            stdin.close()
        self.process.wait(timeout=60)


def export_tree(repo: Path, revision: str, into: Path) -> str:
    """Unpack ``revision`` of the git repository ``repo`` into ``into`` (``git archive``: no
    worktree or other repository state is created); returns the full commit id."""
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    archive = subprocess.run(["git", "-C", str(repo), "archive", commit], check=True, capture_output=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return commit


def tree_revision(repo: Path) -> str:
    """``repo``'s HEAD commit, marked ``+changes`` when the work tree differs from it."""

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True).stdout.strip()

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def measure_cost(
    sides: list[Side],
    *,
    rounds: int,
    attempts: int,
    workflows: int,
    summaries: int,
    events: int,
    seed: int,
    log: Any = print,
) -> dict[str, Any]:
    """Each side runs the same ``attempts`` sequential attempts (same seeds) per round, the sides'
    order alternating round by round, with a commit-floor phase between rounds; then every side's
    invariants are checked. Per side: ms and SQL statements per applied activation."""
    for side in sides:
        side.call("setup", workflows=workflows, summaries=summaries, events=events)
    totals: dict[str, dict[str, Any]] = {
        s.label: {
            "outcomes": Counter(),
            "seconds": Counter(),
            "cpu": Counter(),
            "statements": Counter(),
            "round_ms": [],
        }
        for s in sides
    }
    floors: list[float] = []
    for r in range(rounds):
        order = sides if r % 2 == 0 else sides[::-1]
        for side in order:
            out = side.call("run", attempts=attempts, seed=seed + r)
            mine = totals[side.label]
            for outcome, row in out.items():
                mine["outcomes"][outcome] += row["n"]
                mine["seconds"][outcome] += row["seconds"]
                mine["cpu"][outcome] += row["cpu"]
                mine["statements"][outcome] += row["statements"]
            applied = out.get("applied", {"n": 0, "seconds": 0.0})
            mine["round_ms"].append(1000 * applied["seconds"] / max(1, applied["n"]))
            log(
                f"  round {r + 1}/{rounds} {side.label:<12} {mine['round_ms'][-1]:7.2f} ms/applied activation"
            )
        floor = sides[-1].call("floor", n=max(10, attempts // 2))
        floors.append(1000 * floor["seconds"] / floor["n"])
    results: dict[str, Any] = {"commit_floor_ms": statistics.median(floors), "sides": {}}
    for side in sides:
        mine = totals[side.label]
        applied = mine["outcomes"]["applied"]
        results["sides"][side.label] = {
            "tree": side.tree_revision,
            "applied": applied,
            "outcomes": dict(mine["outcomes"]),
            "ms_per_applied": 1000 * mine["seconds"]["applied"] / max(1, applied),
            "cpu_ms_per_applied": 1000 * mine["cpu"]["applied"] / max(1, applied),
            "statements_per_applied": mine["statements"]["applied"] / max(1, applied),
            "round_ms": mine["round_ms"],
            **side.call("verify"),
        }
    return results


def serve() -> None:  # pragma: no cover - runs as the cost meter's child process
    django.setup()
    meter = _Meter()
    for line in sys.stdin:
        command = json.loads(line)
        name = command.pop("command")
        if name == "quit":
            break
        reply = getattr(meter, name)(**command)
        sys.stdout.write(REPLY + json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
