"""Ingest through the HTTP API (validation, tiktoken counting, hashing, gapless seqs) versus raw
COPY of the very same rows with psycopg, in one run on PostgreSQL.

The API rate is also reported per slice of the run (100k events per slice from 200k events up,
else a tenth), so ``--events 1000000`` shows whether appends slow down as the event table and
its indexes grow: ``decay`` is the first slice's rate over the last one's."""

from __future__ import annotations

import io
import json
import statistics
import threading
import time
from typing import Any

import httpx
from django.db import connection

from memoryhub.accounts.tenancy import create_tenant, issue_api_key
from memoryhub.bench.server import running_server
from memoryhub.bench.synthetic import synthetic_events
from memoryhub.core.actors import Actor
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.search import candidate_seqs
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Tenant, Workflow
from memoryhub.models.workflows import EVENT_STORED_COLUMNS


def _copy_text(value: Any) -> str:
    if value is None:
        return "\\N"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _slice_rates(marks: list[tuple[int, float]], slice_size: int) -> list[int]:
    """Events/s within each consecutive ``slice_size`` events (both clients together)."""
    rates: list[int] = []
    boundary, previous = slice_size, 0.0
    for done, at in marks:
        if done >= boundary:
            rates.append(round(slice_size / max(at - previous, 1e-9)))
            boundary, previous = boundary + slice_size, at
    return rates


def search_flatness(
    tenant: Tenant, big: Workflow, *, rounds: int = 40, fact: str = "401 Unauthorized", log=print
) -> dict[str, Any]:
    """Investigation search (the trigram candidate query) on ``big`` vs a fresh 1k-event workflow,
    interleaved, right after ingest — with whatever GIN pending list the appends left behind."""

    small = create_workflow(tenant, "search-1k", actor=Actor.system("bench"))[0]
    for lo in range(0, 1_000, 500):
        batch, _ = parse_batch({"events": synthetic_events(500, seed=lo + 7, prefix=f"s{lo}")})
        append_events(small, batch)
    with connection.cursor() as cursor:
        # The statistics autovacuum keeps (the planner picks the trigram index only once it
        # knows the workflow has many events); a server running without autovacuum needs this.
        cursor.execute("ANALYZE memoryhub_event")
    samples: dict[str, list[float]] = {"1k": [], "big": []}
    targets = {"1k": small.pk, "big": big.pk}
    for i in range(rounds + 3):
        for size in ("1k", "big") if i % 2 else ("big", "1k"):
            started = time.perf_counter()
            candidate_seqs(targets[size], fact, regex=False, from_seq=1, to_seq=None)
            if i >= 3:  # warm-up excluded
                samples[size].append(time.perf_counter() - started)
    small_ms = round(statistics.median(samples["1k"]) * 1000, 2)
    big_ms = round(statistics.median(samples["big"]) * 1000, 2)
    log(f"  investigation search: 1k {small_ms} ms, {big.head_seq:,}-event workflow {big_ms} ms")
    return {
        "p50_ms_1k": small_ms,
        "p50_ms_big": big_ms,
        "big_events": big.head_seq,
        "ratio": round(big_ms / small_ms, 2),
    }


def run(events: int = 100_000, batch: int = 1_000, clients: int = 2, log=print) -> dict[str, Any]:
    if connection.vendor != "postgresql":
        raise RuntimeError(
            "the ingest benchmark compares with PostgreSQL COPY: set DATABASE_URL to PostgreSQL"
        )
    stamp = time.strftime("%Y%m%d%H%M%S")
    actor = Actor.system("bench")
    tenant = create_tenant(f"bench-ingest-{stamp}", "Ingest benchmark")
    secret = issue_api_key(tenant, "bench").secret
    per_client = events // clients
    api_workflows = [create_workflow(tenant, f"api-{c}", actor=actor)[0] for c in range(clients)]
    copy_workflow = create_workflow(tenant, "copy", actor=actor)[0]
    payloads = [synthetic_events(per_client, seed=c, prefix=f"c{c}") for c in range(clients)]
    log(f"ingest: {per_client * clients:,} events, batches of {batch:,}, {clients} concurrent HTTP clients")

    slice_size = 100_000 if per_client * clients >= 200_000 else max(batch, per_client * clients // 10)
    progress = {"done": 0}
    marks: list[tuple[int, float]] = []  # (events stored so far, seconds since start)
    progress_lock = threading.Lock()

    with running_server(workers=clients) as base:
        errors: list[str] = []

        def send(c: int) -> None:
            headers = {"Authorization": f"Bearer {secret}"}
            with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
                wf = api_workflows[c].external_id
                for lo in range(0, per_client, batch):
                    r = http.post(
                        f"/api/v1/workflows/{wf}/events/", json={"events": payloads[c][lo : lo + batch]}
                    )
                    if r.status_code != 201:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                        return
                    with progress_lock:
                        progress["done"] += len(payloads[c][lo : lo + batch])
                        marks.append((progress["done"], time.perf_counter() - started))
                    if (lo // batch) % 20 == 0:
                        log(f"  client {c}: {lo + batch:,}/{per_client:,}")

        started = time.perf_counter()
        threads = [threading.Thread(target=send, args=(c,)) for c in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        api_seconds = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"API ingest failed: {errors[0]}")
    api_workflows[0].refresh_from_db()
    search = search_flatness(tenant, api_workflows[0], log=log)

    # The same rows the API stored, re-keyed to another workflow, written by COPY.
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT {', '.join(EVENT_STORED_COLUMNS[1:])} FROM memoryhub_event WHERE workflow_id = ANY(%s) ORDER BY workflow_id, seq",
            [[w.pk for w in api_workflows]],
        )
        rows = cur.fetchall()
    buf = io.StringIO()
    cum = 0
    for i, row in enumerate(rows, start=1):
        values = list(row)
        values[0] = i  # seq
        values[1] = f"copy-{i}"  # client_event_id
        cum += values[7]
        values[8] = cum  # cum_tokens
        values[10] = json.dumps(values[10])
        values[11] = json.dumps(values[11])
        buf.write("\t".join([str(copy_workflow.pk)] + [_copy_text(v) for v in values]) + "\n")
    data = buf.getvalue()
    started = time.perf_counter()
    with connection.cursor() as cur:
        with cur.cursor.copy(f"COPY memoryhub_event ({', '.join(EVENT_STORED_COLUMNS)}) FROM STDIN") as copy:
            copy.write(data)
        Workflow.objects.filter(pk=copy_workflow.pk).update(head_seq=len(rows), total_tokens=cum)
    copy_seconds = time.perf_counter() - started

    total = len(rows)
    api_rate, copy_rate = total / api_seconds, total / copy_seconds
    slices = _slice_rates(marks, slice_size)
    ratio = round(api_rate / copy_rate, 3)
    result: dict[str, Any] = {
        "events": total,
        "batch": batch,
        "clients": clients,
        "api_seconds": round(api_seconds, 3),
        "copy_seconds": round(copy_seconds, 3),
        "api_events_per_second": round(api_rate),
        "copy_events_per_second": round(copy_rate),
        "ratio_api_to_copy": ratio,
        "target_ratio": 0.3,
        "slice_events": slice_size,
        "api_events_per_second_per_slice": slices,
        # First slice's rate over the last one's: 1.0 = no slowdown as the table grows.
        "decay": round(slices[0] / slices[-1], 2) if len(slices) > 1 and slices[-1] else None,
        "investigation_search": search,
    }
    result["meets_target"] = ratio >= 0.3
    return result
