"""Scale: a deployment-sized tenant (COPY), then hot paths at 1k- vs 1M-event histories and pages
on the big dataset vs an empty one — all in one run. (CAS activations: ``bench activation``.)"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from memoryhub.accounts.tenancy import add_member, create_tenant, issue_api_key
from memoryhub.bench import dataset, partitions
from memoryhub.bench.dataset import traced_artifact
from memoryhub.bench.server import running_server
from memoryhub.core.actors import Actor
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Role, Workflow

Log = Callable[[str], None]
ACTOR = Actor.system("bench")


def _p50(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def hot_paths(base: str, key: str, small: Workflow, big: Workflow, rounds: int, log: Log) -> dict[str, Any]:
    """p50 of each hot call at both history sizes, interleaved request by request (noise hits both)."""
    calls = {
        "trivial_get": lambda http, wf, art: http.get(f"/api/v1/workflows/{wf}/"),
        "context_read": lambda http, wf, art: http.get(f"/api/v1/workflows/{wf}/context/"),
        "trigger_decision": lambda http, wf, art: http.post(
            f"/api/v1/workflows/{wf}/trigger/",
            json={"expected_next_step_tokens": 2000, "checkpoint_safe": True},
        ),
        "lineage": lambda http, wf, art: http.get(f"/api/v1/artifacts/{art}/lineage/"),
        "investigation": lambda http, wf, art: http.post(
            f"/api/v1/artifacts/{art}/investigate/", json={"fact": "401 Unauthorized"}
        ),
        # Catastrophic for a backtracking engine: RE2 plus the search budget answer it (a verdict,
        # or 400 regex_too_expensive) within MEMORYHUB_REGEX_SEARCH_SECONDS.
        "investigation_regex_pathological": lambda http, wf, art: http.post(
            f"/api/v1/artifacts/{art}/investigate/", json={"fact": "(a+)+$", "regex": True}
        ),
    }
    # Calls for which a 400 is an answer (the pattern was refused as too expensive in time).
    may_refuse = {"investigation_regex_pathological"}
    targets = {"1k": (small.external_id, "BENCH-1K"), "1M": (big.external_id, "BENCH-1M")}
    results: dict[str, Any] = {}
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
        for name, call in calls.items():
            samples: dict[str, list[float]] = {"1k": [], "1M": []}
            n = rounds if not name.startswith("investigation") else max(10, rounds // 5)
            for i in range(n + 3):
                for size, (wf, art) in targets.items():
                    started = time.perf_counter()
                    r = call(http, wf, art)
                    elapsed = time.perf_counter() - started
                    if r.status_code >= 400 and not (name in may_refuse and r.status_code == 400):
                        raise RuntimeError(f"{name} {size}: {r.status_code} {r.text[:300]}")
                    if i >= 3:  # warm-up excluded
                        samples[size].append(elapsed)
            small_ms, big_ms = _p50(samples["1k"]), _p50(samples["1M"])
            results[name] = {"p50_ms_1k": small_ms, "p50_ms_1M": big_ms, "ratio": round(big_ms / small_ms, 2)}
            log(f"  {name:<18} 1k {small_ms:>8.2f} ms   1M {big_ms:>8.2f} ms   ratio {big_ms / small_ms:.2f}")
    results["context_vs_trivial"] = round(
        results["context_read"]["p50_ms_1M"] / results["trivial_get"]["p50_ms_1M"], 2
    )
    return results


def pages(
    big_tenant, empty_tenant, big_wf: Workflow, empty_wf: Workflow, rounds: int, log: Log, small_wf: Workflow
) -> dict[str, Any]:
    """Render time (p50, in-process) and query counts of the main pages, big dataset vs empty tenant.

    Query counts must not grow with the data: the lists compare big with empty; the workflow page
    compares the 1M-event workflow with the 1k-event one (an empty workflow skips its history
    chart's two queries, there being nothing to draw).
    """
    add_member(big_tenant, "bench-viewer", Role.VIEWER, password="bench-pass-123")
    membership = add_member(empty_tenant, "bench-viewer", Role.VIEWER)
    client = Client()
    client.force_login(membership.user)
    session = client.session
    results: dict[str, Any] = {}
    for name, big_url, empty_url in (
        ("overview", "/overview/", "/overview/"),
        ("workflow_list", "/workflows/", "/workflows/"),
        ("workflow_detail", f"/workflows/{big_wf.external_id}/", f"/workflows/{empty_wf.external_id}/"),
    ):
        variants = [("big", big_tenant, big_url), ("empty", empty_tenant, empty_url)]
        if name == "workflow_detail":
            variants.append(("small", big_tenant, f"/workflows/{small_wf.external_id}/"))
        # Interleaved, round by round: a busy second on this machine slows both sides alike
        # instead of the one being measured then.
        times: dict[str, list[float]] = {label: [] for label, _t, _u in variants}
        queries: dict[str, int] = {}
        for i in range(rounds + 2):
            for label, tenant, url in variants:
                session["memoryhub_tenant_id"] = tenant.pk
                session.save()
                with CaptureQueriesContext(connection) as ctx:
                    started = time.perf_counter()
                    r = client.get(url)
                    elapsed = time.perf_counter() - started
                if r.status_code != 200:
                    raise RuntimeError(f"{name} {label}: {r.status_code}")
                if i >= 2:
                    times[label].append(elapsed)
                queries[label] = len(ctx.captured_queries)
        measured = {label: {"p50_ms": _p50(times[label]), "queries": queries[label]} for label in times}
        ratio = round(measured["big"]["p50_ms"] / measured["empty"]["p50_ms"], 2)
        baseline = measured.get("small", measured["empty"])
        results[name] = {
            **{f"{k}_{lab}": v for lab, m in measured.items() for k, v in m.items()},
            "ratio": ratio,
            "queries_constant": measured["big"]["queries"] == baseline["queries"],
        }
        small = measured.get("small")
        log(
            f"  {name:<16} big {measured['big']['p50_ms']:>8.2f} ms ({measured['big']['queries']} q)   "
            f"empty {measured['empty']['p50_ms']:>8.2f} ms ({measured['empty']['queries']} q)   ratio {ratio}"
            f" (target ≤ {PAGE_RATIO_MAX[name]})"
            + (f"   1k-event workflow {small['p50_ms']:.2f} ms ({small['queries']} q)" if small else "")
        )
    return results


# Each page's target, big tenant ÷ empty one: the overview is what a team opens first (issue
# #31 asks 1.5×); the lists and the workflow page have more to show for more data.
PAGE_RATIO_MAX = {"overview": 1.5, "workflow_list": 3.0, "workflow_detail": 3.0}


def as_autovacuum_leaves_it(log: Log) -> None:
    """VACUUM (ANALYZE) the application's tables, as autovacuum does to a week's rows in a
    running deployment: planner statistics and the visibility map, without which an index-only
    count reads the table after all (the overview's not-accepted jobs: 10 ms instead of 1). The
    dataset arrives by COPY within minutes, and this server runs with autovacuum off."""
    tables = sorted({model._meta.db_table for model in apps.get_models() if model._meta.managed})
    existing = set(connection.introspection.table_names())
    started = time.perf_counter()
    # VACUUM cannot run in a transaction (a test's): statistics alone there.
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM (ANALYZE)"
    with connection.cursor() as cursor:
        names = ", ".join(connection.ops.quote_name(t) for t in tables if t in existing)
        cursor.execute(f"{command} {names}")
    seconds = time.perf_counter() - started
    log(f"  {command} of the application's tables, as autovacuum would: {seconds:.1f}s")


def pages_again(rounds: int = 60, log: Log = print) -> dict[str, Any]:
    """The pages part alone, on the dataset the newest ``bench scale`` run left in this database
    (building it takes minutes; a change to a page is measured again in seconds)."""
    from memoryhub.models import Tenant

    tenant = Tenant.objects.filter(slug__startswith="bench-scale-").order_by("-slug").first()
    if tenant is None:
        raise RuntimeError("no scale dataset here: run `manage.py bench scale` first")
    stamp = tenant.slug.removeprefix("bench-scale-")
    empty = Tenant.objects.get(slug=f"bench-empty-{stamp}")
    log(f"pages (in-process render) on the scale dataset of {stamp}:")
    as_autovacuum_leaves_it(log)
    results = pages(
        tenant,
        empty,
        Workflow.objects.get(tenant=tenant, external_id="hist-1m"),
        Workflow.objects.get(tenant=empty, external_id="empty"),
        max(10, rounds // 4),
        log,
        small_wf=Workflow.objects.get(tenant=tenant, external_id="hist-1k"),
    )
    return {"dataset": stamp, "pages": results, "page_ratio_max": PAGE_RATIO_MAX}


def run(
    *, workflows: int = 10_000, big_events: int = 1_000_000, rounds: int = 60, log: Log = print
) -> dict[str, Any]:
    if connection.vendor != "postgresql":
        raise RuntimeError("the scale benchmark runs on PostgreSQL")
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(f"bench-scale-{stamp}", "Scale benchmark")
    empty = create_tenant(f"bench-empty-{stamp}", "Empty tenant")
    log(f"building the dataset: {workflows:,} workflows …")
    counts = dataset.build(tenant, workflows=workflows, log=log)
    small = dataset.history_workflow(tenant, "hist-1k", 1_000, log=log)
    big = dataset.history_workflow(tenant, "hist-1m", big_events, log=log)
    traced_artifact(small, "BENCH-1K")
    traced_artifact(big, "BENCH-1M")
    empty_wf, _ = create_workflow(empty, "empty", actor=ACTOR)
    # Beat writes the 5-minute metric rollups as the data arrives; the COPY'd history arrived at
    # once, so backfill them as beat would have (the overview reads them).
    log("metric rollups for the dataset's 7 days (what beat would have written):")
    started = time.perf_counter()
    call_command("rollup_metrics", hours=24 * 8, tenant=[tenant.slug, empty.slug], stdout=io.StringIO())
    counts["rollup_backfill_seconds"] = round(time.perf_counter() - started, 1)
    log(f"  backfilled in {counts['rollup_backfill_seconds']}s")
    key = issue_api_key(tenant, "bench").secret
    log("hot paths over HTTP (p50):")
    with running_server(workers=1) as base:
        hot = hot_paths(base, key, small, big, rounds, log)
    log("partitioned vs plain event table, same data (p50, interleaved):")
    layouts = partitions.compare(
        key, small, big, {"1k": "BENCH-1K", "1M": "BENCH-1M"}, rounds=max(10, rounds // 2), log=log
    )
    log("pages (in-process render):")
    as_autovacuum_leaves_it(log)
    page_results = pages(tenant, empty, big, empty_wf, max(10, rounds // 4), log, small_wf=small)
    targets = {
        "hot_path_ratio_max": 1.3,
        "page_ratio_max": PAGE_RATIO_MAX,
        "context_vs_trivial_max": 2.0,
    }
    # The pathological pattern's promise is a time bound (the search budget), not flatness.
    bounded = {"investigation_regex_pathological"}
    budget_ms = 1000 * settings.MEMORYHUB_REGEX_SEARCH_SECONDS
    misses = [
        k
        for k, v in hot.items()
        if isinstance(v, dict) and k not in bounded and v["ratio"] > targets["hot_path_ratio_max"]
    ]
    misses += [k for k in bounded if hot[k]["p50_ms_1M"] > 2 * budget_ms]  # budget + the request around it
    misses += [k for k, v in page_results.items() if v["ratio"] > PAGE_RATIO_MAX[k]]
    misses += [f"{k} queries" for k, v in page_results.items() if not v["queries_constant"]]
    return {
        "dataset": counts,
        "hot_paths": hot,
        "partitioned_vs_plain": layouts,
        "pages": page_results,
        "targets": targets,
        "misses": misses,
    }
