"""Partitioned vs plain event table, side by side in one run (PostgreSQL).

The database under test has the partitioned layout (migration 0017). The bench copies every event
into a plain table of the same shape — same indexes, foreign keys and append-only trigger — in a
schema of its own, ``bench_plain``, and starts a second server whose ``search_path`` puts that
schema first: its queries read and write the plain table, everything else is shared. Requests
alternate between the two servers, so machine noise hits both alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import httpx
from django.db import connection

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench import dataset
from memoryhub.bench.dataset import traced_artifact
from memoryhub.bench.server import running_server
from memoryhub.bench.synthetic import synthetic_events
from memoryhub.core.actors import Actor
from memoryhub.core.partitioning import TABLE, is_partitioned
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Workflow
from memoryhub.pipeline.worker import database_url

Log = Callable[[str], None]
SCHEMA = "bench_plain"
ACTOR = Actor.system("bench")


def _p50(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def build_plain_copy(log: Log) -> int:
    """``bench_plain.memoryhub_event``: a plain table with every event, index, FK and trigger."""
    with connection.cursor() as cursor:
        cursor.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        cursor.execute(f"CREATE SCHEMA {SCHEMA}")
        cursor.execute(
            f"CREATE TABLE {SCHEMA}.{TABLE} (LIKE public.{TABLE} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        )
        started = time.perf_counter()
        cursor.execute(f"INSERT INTO {SCHEMA}.{TABLE} SELECT * FROM public.{TABLE}")
        rows = cursor.rowcount
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass "
            "AND contype IN ('p', 'u', 'f') AND conparentid = 0",
            (f"public.{TABLE}",),
        )
        for (definition,) in cursor.fetchall():
            cursor.execute(f"ALTER TABLE {SCHEMA}.{TABLE} ADD {definition}")
        cursor.execute(
            "SELECT pg_get_indexdef(x.indexrelid) FROM pg_index x WHERE x.indrelid = %s::regclass "
            "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid)",
            (f"public.{TABLE}",),
        )
        for (definition,) in cursor.fetchall():
            _, rest = definition.split(" USING ", 1)
            unique = "UNIQUE " if definition.startswith("CREATE UNIQUE") else ""
            cursor.execute(f"CREATE {unique}INDEX ON {SCHEMA}.{TABLE} USING {rest}")
        cursor.execute(
            f"CREATE TRIGGER memoryhub_event_append_only BEFORE UPDATE OR DELETE ON {SCHEMA}.{TABLE} "
            "FOR EACH ROW EXECUTE FUNCTION public.memoryhub_event_append_only()"
        )
        cursor.execute(f"ANALYZE {SCHEMA}.{TABLE}")
        log(f"  plain copy: {rows:,} events with indexes in {time.perf_counter() - started:.1f}s")
    return rows


def _plain_url() -> str:
    return database_url() + "?options=" + quote(f"-c search_path={SCHEMA},public")


def compare(
    key: str, small: Workflow, big: Workflow, artifacts: dict[str, str], *, rounds: int, log: Log
) -> dict[str, Any]:
    """p50 of ingest, context, lineage and investigation on both layouts, interleaved.

    ``artifacts`` maps "1k"/"1M" to an artifact traced on ``small``/``big``.
    """
    with connection.cursor() as cursor:
        if not is_partitioned(cursor):
            raise RuntimeError("the event table is not partitioned (MEMORYHUB_EVENT_PARTITIONS=0?)")
    build_plain_copy(log)
    tenant = big.tenant
    stamp = time.strftime("%H%M%S")
    ingest_wf = {
        layout: create_workflow(tenant, f"ingest-{layout}-{stamp}", actor=ACTOR)[0].external_id
        for layout in ("partitioned", "plain")
    }
    batches = [synthetic_events(1_000, seed=i, prefix=f"b{i}") for i in range(rounds)]
    calls: dict[str, Callable[[httpx.Client, str, int], httpx.Response]] = {
        "ingest_1k_batch": lambda http, layout, i: http.post(
            f"/api/v1/workflows/{ingest_wf[layout]}/events/", json={"events": batches[i]}
        ),
        "context_read_1M": lambda http, layout, i: http.get(f"/api/v1/workflows/{big.external_id}/context/"),
        "lineage_1M": lambda http, layout, i: http.get(f"/api/v1/artifacts/{artifacts['1M']}/lineage/"),
        "investigation_1M": lambda http, layout, i: http.post(
            f"/api/v1/artifacts/{artifacts['1M']}/investigate/", json={"fact": "401 Unauthorized"}
        ),
    }
    results: dict[str, Any] = {}
    headers = {"Authorization": f"Bearer {key}"}
    with (
        running_server(workers=1) as partitioned_base,
        running_server(workers=1, env={"DATABASE_URL": _plain_url()}) as plain_base,
        httpx.Client(base_url=partitioned_base, headers=headers, timeout=120) as partitioned,
        httpx.Client(base_url=plain_base, headers=headers, timeout=120) as plain,
    ):
        clients = {"partitioned": partitioned, "plain": plain}
        for name, call in calls.items():
            samples: dict[str, list[float]] = {"partitioned": [], "plain": []}
            n = rounds if not name.startswith("investigation") else max(10, rounds // 3)
            for i in range(n):
                order = ("partitioned", "plain") if i % 2 == 0 else ("plain", "partitioned")
                for layout in order:
                    started = time.perf_counter()
                    response = call(clients[layout], layout, i)
                    elapsed = time.perf_counter() - started
                    if response.status_code >= 400:
                        raise RuntimeError(f"{name} ({layout}): {response.status_code} {response.text[:300]}")
                    if i >= 2 or name.startswith("ingest"):
                        samples[layout].append(elapsed)
            part_ms, plain_ms = _p50(samples["partitioned"]), _p50(samples["plain"])
            ratio = round(part_ms / plain_ms, 2)
            results[name] = {"p50_ms_partitioned": part_ms, "p50_ms_plain": plain_ms, "ratio": ratio}
            log(
                f"  {name:<18} partitioned {part_ms:>8.2f} ms   plain {plain_ms:>8.2f} ms   ratio {ratio:.2f}"
            )
    # The ingest ran through each layout's own table: check each server really used its own.
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT count(*) FROM public.{TABLE} e JOIN memoryhub_workflow w ON w.id = e.workflow_id "
            f"WHERE w.external_id = %s), (SELECT count(*) FROM {SCHEMA}.{TABLE} e JOIN memoryhub_workflow w "
            "ON w.id = e.workflow_id WHERE w.external_id = %s)",
            (ingest_wf["partitioned"], ingest_wf["plain"]),
        )
        in_partitioned, in_plain = cursor.fetchone()
        cursor.execute(f"DROP SCHEMA {SCHEMA} CASCADE")
    expected = sum(len(b) for b in batches)
    if (in_partitioned, in_plain) != (expected, expected):
        raise RuntimeError(f"ingest landed in the wrong tables: {in_partitioned=} {in_plain=} {expected=}")
    results["ingested_events_each"] = expected
    results["target"] = "every ratio ≤ 1.1 (partitioned no worse than plain)"
    return results


def run(*, big_events: int = 1_000_000, rounds: int = 30, log: Log = print) -> dict[str, Any]:
    """Standalone: a 1k- and a ``big_events``-history workflow, then :func:`compare`."""

    if connection.vendor != "postgresql":
        raise RuntimeError("the partition benchmark runs on PostgreSQL")
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(f"bench-partitions-{stamp}", "Partition benchmark")
    small = dataset.history_workflow(tenant, "hist-1k", 1_000, log=log)
    big = dataset.history_workflow(tenant, "hist-1m", big_events, log=log)
    artifacts = {"1k": traced_artifact(small, "PART-1K"), "1M": traced_artifact(big, "PART-1M")}
    key = issue_api_key(tenant, "bench").secret
    log("partitioned vs plain event table (p50, interleaved):")
    return compare(key, small, big, artifacts, rounds=rounds, log=log)
