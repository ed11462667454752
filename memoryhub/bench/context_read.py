"""Context-read latency: a 1k-event and a 1M-event history in the same database, one run, over HTTP.

Both workflows get the same shape of context — an active summary plus a ``tail``-event tail — so
the only difference is how much history lies behind the watermark. A read must not care: it is the
workflow row (with its active summary) and one range scan of the ``(workflow, seq)`` index. The
floor is a trivial authenticated endpoint (GET the workflow) on the same server.

Setup goes through the real services (``append_events``, ``create_summary``, ``activate``). The
one shortcut: the summary over the synthetic history is marked validated with an explicit
"bench-setup" ValidationRecord instead of running the validator over a million events (the read
path being measured does not depend on how the summary was validated).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from django.db import connection

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.bench.synthetic import synthetic_events
from memoryhub.context.assembly import assemble_context
from memoryhub.core.actors import Actor
from memoryhub.memory import lifecycle
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.validation import ValidationOutcome
from memoryhub.memory.workflows import create_workflow, get_workflow
from memoryhub.models import Tenant, Workflow

ACTOR = Actor.system("bench")
BATCH = 1000
COMPACTOR = {"name": "bench", "version": "1", "model": "none", "algorithm_version": "bench-1"}


def build_history(tenant, external_id: str, events: int, tail: int, log: Callable[[str], None]) -> Workflow:
    """``events`` synthetic events, then an active summary over all but the last ``tail``."""
    workflow, _ = create_workflow(tenant, external_id, actor=ACTOR)
    started = time.perf_counter()
    for chunk, lo in enumerate(range(0, events, BATCH)):
        batch = synthetic_events(min(BATCH, events - lo), seed=chunk, prefix=f"{external_id}-{chunk}")
        parsed, _ = parse_batch({"events": batch})
        append_events(workflow, parsed)
        if chunk % 100 == 99:
            done = lo + BATCH
            log(
                f"  {external_id}: {done:,}/{events:,} events ({done / (time.perf_counter() - started):,.0f}/s)"
            )
    workflow.refresh_from_db()
    watermark = events - tail
    content = {
        "narrative": f"Synthetic history of {watermark:,} events about POST /payments (benchmark).",
        "facts": [
            {
                "key": "spec-v7",
                "kind": "source_version",
                "text": "payments spec v7",
                "state": "info",
                "source_seqs": [1],
            }
        ],
        "open_items": [],
    }
    summary = create_summary(
        workflow,
        content=content,
        covers_from_seq=1,
        covers_to_seq=watermark,
        compactor=COMPACTOR,
        actor=ACTOR,
    )
    setup = ValidationOutcome(
        validator_version="bench-setup",
        checks=[
            {
                "name": "bench_setup",
                "passed": True,
                "detail": "synthetic benchmark history; validator not run",
            }
        ],
        mandatory_coverage=1.0,
        passed=True,
        reasons=[],
    )
    lifecycle.validate(summary, ACTOR, outcome=setup)
    result = lifecycle.activate(summary, workflow.active_revision, ACTOR)
    if not result.applied:
        raise RuntimeError(f"bench summary not activated: {result.detail}")
    workflow.refresh_from_db()
    return workflow


def _existing_histories(small: int, large: int, tail: int) -> tuple[Tenant, Workflow, Workflow] | None:
    for tenant in Tenant.objects.filter(slug__startswith="bench-context-").order_by("-pk"):
        found = {
            w.external_id: w
            for w in Workflow.objects.filter(tenant=tenant).select_related("active_summary")
            if w.active_summary_id
        }
        shapes = {"ctx-small": small, "ctx-large": large}
        watermarks = {name: w.active_summary.covers_to_seq for name, w in found.items() if w.active_summary}
        if all(
            name in found and found[name].head_seq == size and watermarks.get(name) == size - tail
            for name, size in shapes.items()
        ):
            return tenant, found["ctx-small"], found["ctx-large"]
    return None


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(samples), 3),
        "p90_ms": round(_p(samples, 0.9), 3),
        "p99_ms": round(_p(samples, 0.99), 3),
    }


def _measure(
    secret: str, targets: dict[str, str], large: int, tail: int, rounds: int, env: dict[str, str]
) -> dict[str, Any]:
    """p50/p90/p99 of the three targets against a fresh one-worker gunicorn, interleaved."""
    samples: dict[str, list[float]] = {name: [] for name in targets}
    rng = random.Random(7)
    with (
        running_server(workers=1, env=env) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Bearer {secret}"}, timeout=30) as http,
    ):
        large_body = http.get(targets["context_large"]).json()
        if large_body["head_seq"] != large or len(large_body["tail"]) != tail:
            raise RuntimeError("the large context read did not return the expected head and tail")
        for _ in range(30):  # warm up every path and connection
            for path in targets.values():
                http.get(path).raise_for_status()
        order = list(targets.items())
        for _ in range(rounds):
            rng.shuffle(order)  # interleaved, so drift hits all three alike
            for name, path in order:
                started = time.perf_counter()
                response = http.get(path)
                elapsed = (time.perf_counter() - started) * 1000
                response.raise_for_status()
                samples[name].append(elapsed)
    stats = {name: _summary(values) for name, values in samples.items()}
    p50 = {name: s["p50_ms"] for name, s in stats.items()}
    figures: dict[str, Any] = {
        "latency": stats,
        "ratio_large_to_small": round(p50["context_large"] / p50["context_small"], 3),
        "ratio_small_to_trivial": round(p50["context_small"] / p50["trivial"], 3),
        "ratio_large_to_trivial": round(p50["context_large"] / p50["trivial"], 3),
    }
    figures["meets_targets"] = (
        figures["ratio_large_to_small"] <= 1.3
        and figures["ratio_small_to_trivial"] <= 2.0
        and figures["ratio_large_to_trivial"] <= 2.0
    )
    return figures


def run(
    small: int = 1_000,
    large: int = 1_000_000,
    tail: int = 20,
    rounds: int = 400,
    log: Callable[[str], None] = print,
    reuse: bool = False,
) -> dict[str, Any]:
    """Measure; ``reuse`` picks up histories of this shape left by an earlier run (building a
    million events through the real append path takes a while)."""
    histories = _existing_histories(small, large, tail) if reuse else None
    if histories is not None:
        tenant, small_wf, large_wf = histories
        log(f"context read: re-using the histories of tenant {tenant.slug}")
    else:
        stamp = time.strftime("%Y%m%d%H%M%S")
        tenant = create_tenant(f"bench-context-{stamp}", "Context read benchmark")
        log(
            f"context read: building {small:,}- and {large:,}-event histories (summary + {tail}-event tail each)"
        )
        small_wf = build_history(tenant, "ctx-small", small, tail, log)
        large_wf = build_history(tenant, "ctx-large", large, tail, log)
    secret = issue_api_key(tenant, f"bench-{time.monotonic_ns()}").secret
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE memoryhub_event")  # fresh statistics, as autovacuum would keep them

    # In-process service timing: the database part of a read, without HTTP.
    service: dict[str, list[float]] = {"small": [], "large": []}
    for _ in range(min(rounds, 200)):
        for name, external_id in (("small", "ctx-small"), ("large", "ctx-large")):
            started = time.perf_counter()
            assemble_context(get_workflow(tenant, external_id))
            service[name].append((time.perf_counter() - started) * 1000)

    targets = {
        "context_small": f"/api/v1/workflows/{small_wf.external_id}/context/",
        "context_large": f"/api/v1/workflows/{large_wf.external_id}/context/",
        "trivial": f"/api/v1/workflows/{small_wf.external_id}/",
    }
    result: dict[str, Any] = {
        "database": connection.vendor,
        "events_small": small,
        "events_large": large,
        "tail_events": tail,
        "rounds": rounds,
        "service_p50_ms": {name: round(statistics.median(v), 3) for name, v in service.items()},
        "target_ratio_large_to_small": 1.3,
        "target_ratio_to_trivial": 2.0,
    }
    # Once as configured (CONN_MAX_AGE from the environment, 0 by default: a new database
    # connection per request), once with persistent connections.
    met = True
    for label, env in (("http", {}), ("http_persistent_connections", {"CONN_MAX_AGE": "60"})):
        figures = _measure(secret, targets, large, tail, rounds, env)
        met = met and figures["meets_targets"]
        result[label] = figures
        log(f"  {label}: " + ", ".join(f"{k} p50 {v['p50_ms']} ms" for k, v in figures["latency"].items()))
    result["meets_targets"] = met
    return result
