"""What an agent platform waits for: the trigger decision, the context read and the activation,
timed at the client through HTTP and gunicorn with the production settings (DEBUG off, the
settings' default persistent connections), beside the same server with ``CONN_MAX_AGE=0`` (a new
PostgreSQL connection per request) and beside the same service calls in process.

The two servers run at once, one gunicorn worker each, and the requests alternate between them
in shuffled order, so the machine's noise falls on both alike.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from django.conf import settings

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.bench import activation
from memoryhub.bench.server import running_server
from memoryhub.context.assembly import assemble_context
from memoryhub.core.actors import Actor
from memoryhub.memory import lifecycle
from memoryhub.models import Workflow
from triggers import services
from triggers.decision_log import flush_decision_buffer

# Production settings, except the review throttle (120 activations a minute per key): the
# benchmark activates faster than that and times the work, not the 429.
UNTHROTTLED = {"MEMORYHUB_THROTTLE_REVIEW": "1000000/min"}
SERVERS = {"persistent": UNTHROTTLED, "conn_max_age_0": {**UNTHROTTLED, "CONN_MAX_AGE": "0"}}
TARGETS_P50_MS = {"trigger": 3.0, "context": 5.0, "activation": 6.0}  # persistent connections


def _p50(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def _in_process(workflow: Workflow, summaries: list[Any], rounds: int) -> dict[str, float]:
    """The service calls behind the three requests, on this process's warm connection."""
    actor = Actor.system("bench-http")
    samples: dict[str, list[float]] = {"trigger": [], "context": [], "activation": []}
    for summary in summaries[:rounds]:
        wf = Workflow.objects.get(pk=workflow.pk)
        started = time.perf_counter()
        services.decide(wf, {"expected_next_step_tokens": 100}, actor)
        samples["trigger"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        assemble_context(Workflow.objects.get(pk=workflow.pk))
        samples["context"].append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        lifecycle.activate(summary, wf.active_revision, actor)
        samples["activation"].append((time.perf_counter() - started) * 1000)
    flush_decision_buffer()
    return {name: _p50(values) for name, values in samples.items()}


def run(rounds: int = 200, events: int = 200, log: Callable[[str], None] = print) -> dict[str, Any]:
    flows, pool = activation.setup(workflows=1, summaries=3 * rounds + 1, events=events)
    workflow = flows[0]
    summaries = pool[workflow.pk]
    secret = issue_api_key(workflow.tenant, f"bench-http-{time.monotonic_ns()}").secret
    lifecycle.activate(summaries.pop(), workflow.active_revision, Actor.system("bench-http"))
    cache = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    log(
        f"http: {rounds} rounds of trigger, context read, activation on a {events}-event workflow "
        f"(shared cache: {cache}; REDIS_CACHE_URL picks Redis)"
    )
    in_process = _in_process(workflow, [summaries.pop() for _ in range(rounds)], rounds)

    wf = workflow.external_id
    samples: dict[str, dict[str, list[float]]] = {s: {name: [] for name in TARGETS_P50_MS} for s in SERVERS}
    revision = Workflow.objects.get(pk=workflow.pk).active_revision
    rng = random.Random(7)
    with (
        running_server(workers=1, env=SERVERS["persistent"]) as persistent,
        running_server(workers=1, env=SERVERS["conn_max_age_0"]) as fresh,
    ):
        auth = {"Authorization": f"Bearer {secret}"}
        clients = {
            "persistent": httpx.Client(base_url=persistent, headers=auth, timeout=30),
            "conn_max_age_0": httpx.Client(base_url=fresh, headers=auth, timeout=30),
        }

        def timed(server: str, name: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
            started = time.perf_counter()
            response = clients[server].request(method, path, json=body)
            elapsed = (time.perf_counter() - started) * 1000
            if response.status_code >= 300:
                raise RuntimeError(
                    f"{method} {path} on {server}: {response.status_code} {response.text[:300]}"
                )
            samples[server][name].append(elapsed)
            return response.json()

        try:
            for _ in range(10):  # warm up both servers (imports, first connection, prepared statements)
                for server in SERVERS:
                    clients[server].post(
                        f"/api/v1/workflows/{wf}/trigger/", json={"expected_next_step_tokens": 1}
                    )
                    clients[server].get(f"/api/v1/workflows/{wf}/context/")
            order = list(SERVERS)
            for _ in range(rounds):
                rng.shuffle(order)
                for server in order:
                    timed(
                        server,
                        "trigger",
                        "POST",
                        f"/api/v1/workflows/{wf}/trigger/",
                        {"expected_next_step_tokens": 100},
                    )
                    timed(server, "context", "GET", f"/api/v1/workflows/{wf}/context/")
                    summary = summaries.pop()
                    done = timed(
                        server,
                        "activation",
                        "POST",
                        f"/api/v1/summaries/{summary.summary_id}/activate/",
                        {"expected_revision": revision},
                    )
                    revision = done["active_revision"]
        finally:
            for client in clients.values():
                client.close()

    http = {server: {name: _p50(v) for name, v in by_name.items()} for server, by_name in samples.items()}
    for server, figures in http.items():
        log(f"  http ({server}): " + ", ".join(f"{k} p50 {v} ms" for k, v in figures.items()))
    log("  in process: " + ", ".join(f"{k} p50 {v} ms" for k, v in in_process.items()))
    return {
        "rounds": rounds,
        "cache": cache,
        "http_p50_ms": http["persistent"],
        "http_conn_max_age_0_p50_ms": http["conn_max_age_0"],
        "in_process_p50_ms": in_process,
        "targets_p50_ms": TARGETS_P50_MS,
        "meets_targets": all(http["persistent"][k] <= v for k, v in TARGETS_P50_MS.items()),
    }
