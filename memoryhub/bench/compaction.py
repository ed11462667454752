"""Compaction throughput: the compactor function called directly versus the same jobs through a
real Celery worker (broker, claim, candidate, validation, CAS activation), in one run.

Every workflow holds the same events, so each path compacts identical inputs. A third figure, the
job pipeline run in this process without a broker, splits the overhead into database work and
broker/worker hand-off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.celery import app
from memoryhub.compaction.samples import payments_workflow
from memoryhub.core.actors import Actor
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.sources import source_events
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import CompactionJob, JobStatus, Summary, Workflow
from memoryhub.pipeline import jobs
from memoryhub.pipeline.worker import running_worker


def _workflows(tenant, prefix: str, count: int, raw: list[dict[str, Any]], actor: Actor) -> list[Workflow]:
    made = []
    for n in range(count):
        workflow, _ = create_workflow(tenant, f"{prefix}-{n}", actor=actor)
        events, head = parse_batch({"events": raw})
        append_events(workflow, events, expected_head=head)
        made.append(Workflow.objects.get(pk=workflow.pk))
    return made


def run(
    jobs_count: int = 100,
    rounds: int = 20,
    pool: str = "solo",
    concurrency: int = 1,
    timeout: float = 600,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run ``jobs_count`` compactions three ways and return the figures (jobs per second, ratio)."""
    actor = Actor.system("bench")
    stamp = time.strftime("%Y%m%d%H%M%S")
    tenant = create_tenant(f"bench-compaction-{stamp}", "Compaction benchmark")
    raw = payments_workflow(rounds=rounds)
    log(
        f"compaction: {jobs_count} jobs of {len(raw)} events each; broker {settings.CELERY_BROKER_URL.split('://')[0]}"
    )
    inprocess_wfs = _workflows(tenant, "inprocess", jobs_count, raw, actor)
    worker_wfs = _workflows(tenant, "worker", jobs_count, raw, actor)
    sample = worker_wfs[0]
    budget = jobs.summary_token_budget(sample)

    # 1. The compactor function alone, on the same events as the jobs read (loaded once, untimed).
    events = source_events(sample, 1, sample.head_seq)
    compactor = jobs.build_compactor("extractive-v1", sample)
    started = time.perf_counter()
    for _ in range(jobs_count):
        compactor.compact(None, events)
    direct = time.perf_counter() - started

    # 2. The job body in this process (DB reads, candidate, validation, CAS), no broker hand-off.
    local_ids = [jobs.request_compaction(w, actor=actor)[0].pk for w in inprocess_wfs]
    app.control.purge()  # their messages must not reach the worker below
    started = time.perf_counter()
    for job_id in local_ids:
        jobs.run_job(job_id, f"inprocess-{job_id}")
    inprocess = time.perf_counter() - started

    # 3. Through a real worker: request (enqueued on commit) → broker → worker → done.
    with running_worker(pool=pool, concurrency=concurrency, name="bench") as worker:
        log(f"  worker ready (pid {worker.pid}, pool {pool} x{concurrency})")
        started = time.perf_counter()
        ids = [jobs.request_compaction(w, actor=actor)[0].pk for w in worker_wfs]
        deadline = time.monotonic() + timeout
        while CompactionJob.objects.filter(
            pk__in=ids, status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED]
        ).count() < len(ids):
            if time.monotonic() > deadline:
                raise RuntimeError("the worker did not finish the benchmark jobs in time")
            time.sleep(0.02)
        through_worker = time.perf_counter() - started

    outcomes: dict[str, int] = {}
    for outcome in CompactionJob.objects.filter(pk__in=ids).values_list("outcome", flat=True):
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    direct_rate, inprocess_rate, worker_rate = (
        jobs_count / direct,
        jobs_count / inprocess,
        jobs_count / through_worker,
    )
    return {
        "jobs": jobs_count,
        "events_per_job": len(raw),
        "token_budget": budget,
        "database": connection.vendor,
        "broker": settings.CELERY_BROKER_URL.split("://")[0],
        "worker": f"{pool} x{concurrency}",
        "direct_seconds": round(direct, 3),
        "inprocess_pipeline_seconds": round(inprocess, 3),
        "worker_seconds": round(through_worker, 3),
        "direct_jobs_per_second": round(direct_rate, 1),
        "inprocess_pipeline_jobs_per_second": round(inprocess_rate, 1),
        "worker_jobs_per_second": round(worker_rate, 1),
        "overhead_ratio_direct_to_worker": round(direct_rate / worker_rate, 2),
        "worker_outcomes": outcomes,
        "summaries_written": Summary.objects.filter(job_id__in=ids).count(),
    }
