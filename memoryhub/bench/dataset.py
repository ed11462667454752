"""A synthetic tenant at deployment scale, written with COPY (minutes, not hours).

10k workflows, ~1M events, 100k summaries (with validation records, the compaction jobs that
produced them and activation events), 500k consumer traces, 100k trigger decisions and 50k
artifacts, plus two measured workflows with 1k and 1M events of history behind the same-sized
tail. Rows are what the services would have written (running totals, cum_tokens, canonical
summary JSON and its hash); only the write path differs.

The activity is spread over the last seven days (the overview's default window), with the rates
a busy deployment shows: 5% of candidates fail validation, 5% of activations lose the race
(stale), 2% of model calls read an unvalidated summary, 1% of decisions project an overflow —
so every dashboard chart has rows to count, not an empty window.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import canonical_bytes, hash_text, sha256_hex
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    Event,
    LifecycleEvent,
    Summary,
    ValidationRecord,
    Workflow,
)
from memoryhub.models.workflows import EVENT_STORED_COLUMNS
from triggers.models import TriggerDecision

BENCH_ACTOR = Actor.system("bench")

Log = Callable[[str], None]
SENTENCES = [
    "POST /payments requires scope payments:write and an Idempotency-Key header.",
    "Generated test TC-{n} covers a duplicate submission returning the original payment.",
    "Security review found that error bodies leaked the ledger host name.",
    "Amounts are integers in minor units; currency follows ISO-4217.",
    "The publisher packaged suite revision {n} for the payments API.",
    "Tool run {n}: 57 passed, 3 failed, 1 skipped.",
]


def copy_rows(model, columns: Sequence[str], rows: Iterable[tuple]) -> int:
    """COPY ``rows`` (tuples in ``columns`` order; JSON already serialised) into the model's table."""
    n = 0
    extra_columns, extra_values = _defaults_for_missing(model, columns)
    sql = f"COPY {model._meta.db_table} ({', '.join([*columns, *extra_columns])}) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(sql) as copy:
        for row in rows:
            copy.write_row((*row, *extra_values))
            n += 1
    return n


def _defaults_for_missing(model, columns: Sequence[str]) -> tuple[list[str], tuple]:
    """Columns the caller did not give that still need a value: model defaults, or now for timestamps."""
    names: list[str] = []
    values: list[Any] = []
    now = timezone.now()
    for field in model._meta.concrete_fields:
        if field.primary_key or field.column in columns:
            continue
        names.append(field.column)
        if getattr(field, "auto_now_add", False) or getattr(field, "auto_now", False):
            values.append(now)
        else:  # the model default, or "" for a text column, or NULL for a nullable one
            value = field.get_default()
            values.append(json.dumps(value) if isinstance(value, list | dict) else value)
    return names, tuple(values)


def _content(i: int) -> str:
    return " ".join(SENTENCES[(i + k) % len(SENTENCES)].format(n=i % 997) for k in range(1 + i % 3))


def event_rows(
    workflow_id: int, count: int, *, start_at, first_seq: int = 1, cum: int = 0, fact_at: int | None = None
):
    """Event rows with gapless seqs, running cum_tokens and content hashes (token count ~ words*1.3)."""
    for seq in range(first_seq, first_seq + count):
        text = _content(seq)
        if fact_at is not None and seq == fact_at:
            text = "Requirement: unauthenticated requests must return 401 Unauthorized."
        tokens = max(1, int(len(text.split()) * 1.3))
        cum += tokens
        yield (
            workflow_id,
            seq,
            f"e{seq}",
            "message",
            "requirements-agent",
            "assistant",
            text,
            hash_text(text),
            tokens,
            cum,
            "",
            "[]",
            "[]",
            "none",
            start_at + timedelta(seconds=seq),
        )


def summary_row(tenant_id: int, workflow_id: int, version: int, covers_to: int, status: str, at) -> tuple:
    content = {
        "schema": "memoryhub.summary/v1",
        "narrative": f"Summary v{version} of events 1-{covers_to}.",
        "facts": [
            {
                "key": "scope:payments:write",
                "kind": "scope",
                "text": "payments:write required",
                "state": "info",
                "source_seqs": [1],
            }
        ],
        "open_items": [],
    }
    data = canonical_bytes(content)
    return (
        f"sum_{workflow_id:08x}{version:08x}",
        tenant_id,
        workflow_id,
        version,
        at,
        "bench",
        1,
        covers_to,
        covers_to,
        "[]",
        "[]",
        "bench",
        "1",
        "none",
        "",
        "bench-1",
        None,
        "",
        "memoryhub.summary/v1",
        data.decode(),
        sha256_hex(data),
        "db",
        40,
        status,
        at,
        status == "REJECTED",  # by its failed validation record (below)
    )


SUMMARY_COLUMNS = [
    "summary_id",
    "tenant_id",
    "workflow_id",
    "version",
    "created_at",
    "created_by",
    "covers_from_seq",
    "covers_to_seq",
    "source_revision",
    "source_refs",
    "excluded_categories",
    "compactor_name",
    "compactor_version",
    "model",
    "prompt_template_version",
    "algorithm_version",
    "token_budget",
    "tool_schema_version",
    "content_schema",
    "content",
    "content_hash",
    "storage_location",
    "token_count",
    "status",
    "status_changed_at",
    "checks_failed",
]


def build(
    tenant,
    *,
    workflows: int = 10_000,
    events_per_workflow: int = 100,
    summaries_per_workflow: int = 10,
    traces_per_workflow: int = 50,
    artifacts_per_workflow: int = 5,
    decisions_per_workflow: int = 10,
    log: Log = print,
) -> dict[str, Any]:
    """Fill ``tenant`` with the bulk dataset; returns row counts and seconds."""
    rng = random.Random(11)
    started = time.perf_counter()
    now = timezone.now()
    # Workflows start one after another over seven days; each lives a few hours after its start.
    span = timedelta(days=7)
    t0 = now - span - timedelta(hours=4)
    gap = span / workflows
    counts: dict[str, float] = {}
    # The tenant has been live as long as its history (the metric rollups start at its creation).
    type(tenant).objects.filter(pk=tenant.pk).update(created_at=t0)
    tenant.created_at = t0

    def wf_rows():
        for i in range(workflows):
            yield (
                tenant.pk,
                f"bulk-{i:05d}",
                f"Bulk workflow {i}",
                "bench@1",
                "",
                "",
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                "[]",
                "[]",
                0,
                t0 + gap * i,
                t0 + gap * i,
            )

    counts["workflows"] = copy_rows(
        Workflow,
        [
            "tenant_id",
            "external_id",
            "name",
            "graph_release",
            "model",
            "encoding",
            "head_seq",
            "total_tokens",
            "tail_events",
            "tail_tokens",
            "summary_tokens",
            "active_revision",
            "purge_epoch",
            "open_tool_calls",
            "pending_side_effects",
            "tokens_at_last_compaction",
            "created_at",
            "updated_at",
        ],
        wf_rows(),
    )
    ids = list(
        Workflow.objects.filter(tenant=tenant, external_id__startswith="bulk-")
        .order_by("id")
        .values_list("id", flat=True)
    )
    log(f"  workflows: {len(ids):,} ({time.perf_counter() - started:.0f}s)")
    started_at = {wid: t0 + gap * n for n, wid in enumerate(ids)}

    def summary_at(wid: int, version: int):
        return started_at[wid] + timedelta(minutes=20 * version)

    def all_events():
        for n, wid in enumerate(ids):
            yield from event_rows(wid, events_per_workflow, start_at=started_at[wid])
            if n % 2000 == 1999:
                log(f"  events: {(n + 1) * events_per_workflow:,} ({time.perf_counter() - started:.0f}s)")

    counts["events"] = copy_rows(Event, EVENT_STORED_COLUMNS, all_events())
    step = events_per_workflow // summaries_per_workflow

    def all_summaries():
        for wid in ids:
            for v in range(1, summaries_per_workflow + 1):
                status = (
                    "ACTIVE"
                    if v == summaries_per_workflow
                    else ("REJECTED" if rng.random() < 0.05 else "SUPERSEDED")
                )
                yield summary_row(tenant.pk, wid, v, v * step, status, summary_at(wid, v))

    counts["summaries"] = copy_rows(Summary, SUMMARY_COLUMNS, all_summaries())
    log(f"  summaries: {counts['summaries']:,} ({time.perf_counter() - started:.0f}s)")
    summary_ids: dict[tuple[int, int], int] = {}
    rejected: set[int] = set()
    for pk, w, v, status in Summary.objects.filter(tenant=tenant).values_list(
        "id", "workflow_id", "version", "status"
    ):
        summary_ids[(w, v)] = pk
        if status == "REJECTED":
            rejected.add(pk)
    counts["jobs"] = copy_rows(
        CompactionJob,
        [
            "tenant_id",
            "workflow_id",
            "source_revision",
            "compactor",
            "idempotency_key",
            "status",
            "outcome",
            "summary_id",
            "tokens_in",
            "tokens_out",
            "latency_ms",
            "created_at",
            "started_at",
            "finished_at",
            "accepted",
        ],
        (
            (
                tenant.pk,
                w,
                v * step,
                "extractive-v1",
                f"bench:{w}:{v * step}:extractive-v1:0",
                "SUCCEEDED",
                "rejected" if pk in rejected else "activated",
                pk,
                1_300 * step,
                40,
                900,
                summary_at(w, v) - timedelta(seconds=2),
                summary_at(w, v) - timedelta(seconds=1),
                summary_at(w, v),
                pk not in rejected,  # memoryhub.memory.acceptance.accepted_q of what is written here
            )
            for (w, v), pk in summary_ids.items()
        ),
    )
    counts["validations"] = copy_rows(
        ValidationRecord,
        [
            "summary_id",
            "validator_version",
            "checks",
            "mandatory_coverage",
            "passed",
            "reasons",
            "waived_checks",
            "waived_by",
            "actor",
            "created_at",
        ],
        (
            (pk, "rules-5", "[]", 1.0, pk not in rejected, "[]", "[]", "", "bench", summary_at(w, v))
            for (w, v), pk in summary_ids.items()
        ),
    )

    def lifecycle_rows():
        for (w, v), pk in summary_ids.items():
            if pk in rejected:
                continue
            at = summary_at(w, v)
            if rng.random() < 0.05:  # a late worker lost the compare-and-swap first
                yield (
                    tenant.pk,
                    w,
                    pk,
                    "activate",
                    "VALIDATED",
                    "",
                    "stale",
                    "worker:bench",
                    "worker",
                    "",
                    "",
                    v - 1,
                    v,  # expected v-1, but a concurrent activation had already moved it
                    at - timedelta(seconds=1),
                )
            yield (
                tenant.pk,
                w,
                pk,
                "activate",
                "VALIDATED",
                "ACTIVE",
                "applied",
                "worker:bench",
                "worker",
                "",
                "",
                v - 1,
                v - 1,
                at,
            )

    counts["lifecycle_events"] = copy_rows(
        LifecycleEvent,
        [
            "tenant_id",
            "workflow_id",
            "summary_id",
            "action",
            "from_status",
            "to_status",
            "result",
            "actor",
            "actor_kind",
            "task_attempt_id",
            "reason",
            "expected_revision",
            "observed_revision",
            "at",
        ],
        lifecycle_rows(),
    )
    # Running totals and the active pointer, as activation would have left them.
    total = sum(max(1, int(len(_content(s).split()) * 1.3)) for s in range(1, events_per_workflow + 1))
    with connection.cursor() as cursor:
        cursor.execute(
            """UPDATE memoryhub_workflow w SET head_seq = %s, total_tokens = %s, summary_tokens = 40,
                   tail_events = 0, tail_tokens = 0, active_revision = %s, active_summary_id = s.id,
                   activated_at = s.created_at, last_compacted_at = s.created_at, last_event_at = %s
               FROM memoryhub_summary s
               WHERE s.workflow_id = w.id AND s.status = 'ACTIVE' AND w.tenant_id = %s""",
            [events_per_workflow, total, summaries_per_workflow, now, tenant.pk],
        )
    log(f"  validation + lifecycle + pointers ({time.perf_counter() - started:.0f}s)")
    active = {w: pk for (w, v), pk in summary_ids.items() if v == summaries_per_workflow}

    def all_traces():
        for wid in ids:
            for k in range(traces_per_workflow):
                yield (
                    tenant.pk,
                    wid,
                    ["requirements-agent", "test-generator", "security-reviewer", "publisher"][k % 4],
                    f"run-{wid}-{k // 4}",
                    f"call-{wid}-{k}",
                    "gpt-4.1-mini",
                    active[wid],
                    "ACTIVE",
                    events_per_workflow,
                    events_per_workflow,
                    events_per_workflow,
                    f"ctx-{wid}-{k}",
                    "sha256:" + "0" * 64,
                    "[]",
                    "bench@1",
                    f"ck-{k}",
                    1000,
                    '["unvalidated_summary"]' if rng.random() < 0.02 else "[]",
                    "bench",
                    started_at[wid] + timedelta(minutes=4 * k),
                )

    counts["traces"] = copy_rows(
        ConsumerTrace,
        [
            "tenant_id",
            "workflow_id",
            "agent",
            "agent_run_id",
            "model_call_id",
            "model",
            "summary_id",
            "summary_status_at_read",
            "summary_watermark",
            "tail_to_seq",
            "head_seq_at_read",
            "context_id",
            "manifest_hash",
            "source_refs",
            "graph_release",
            "checkpoint_id",
            "input_tokens",
            "flags",
            "actor",
            "at",
        ],
        all_traces(),
    )
    log(f"  traces: {counts['traces']:,} ({time.perf_counter() - started:.0f}s)")

    def decision_rows():
        for wid in ids:
            for k in range(decisions_per_workflow):
                overflow = rng.random() < 0.01
                projected = 21_000 if overflow else 12_000
                yield (
                    tenant.pk,
                    wid,
                    "retrieve_or_block" if overflow else "continue",
                    "emergency_guard" if overflow else "",
                    "[]",
                    "{}",
                    projected - 2_000,
                    2_000,
                    projected,
                    18_000,
                    8_000,
                    20_000,
                    "{}",
                    k * step,
                    "agent:bench",
                    started_at[wid] + timedelta(minutes=20 * k + 10),
                )

    counts["decisions"] = copy_rows(
        TriggerDecision,
        [
            "tenant_id",
            "workflow_id",
            "action",
            "strategy",
            "reasons",
            "inputs",
            "current_tokens",
            "expected_next_step_tokens",
            "projected_tokens",
            "safe_budget",
            "target_tokens",
            "hard_limit",
            "details",
            "head_seq",
            "actor",
            "at",
        ],
        decision_rows(),
    )
    log(f"  trigger decisions: {counts['decisions']:,} ({time.perf_counter() - started:.0f}s)")
    counts["artifacts"] = copy_rows(
        Artifact,
        [
            "tenant_id",
            "workflow_id",
            "artifact_id",
            "kind",
            "uri",
            "content_hash",
            "quality_score",
            "actor",
            "at",
        ],
        (
            (tenant.pk, wid, f"A-{wid}-{k}", "test-suite", "", "", 0.9, "bench", now)
            for wid in ids
            for k in range(artifacts_per_workflow)
        ),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO memoryhub_artifact_produced_by (artifact_id, consumertrace_id)
               SELECT a.id, t.id FROM memoryhub_artifact a
               JOIN memoryhub_consumertrace t ON t.workflow_id = a.workflow_id
                AND t.model_call_id = 'call-' || a.workflow_id || '-' || split_part(a.artifact_id, '-', 3)
               WHERE a.tenant_id = %s""",
            [tenant.pk],
        )
        cursor.execute("ANALYZE")
    counts["seconds"] = round(time.perf_counter() - started, 1)
    log(f"  artifacts: {counts['artifacts']:,}; dataset built in {counts['seconds']}s")
    return counts


def history_workflow(tenant, external_id: str, events: int, *, tail: int = 20, log: Log = print) -> Workflow:
    """One workflow with ``events`` of history (COPY) and an active summary over all but ``tail``.

    The 401 requirement sits at seq 7, the summary leaves it out: investigations must find it.
    """

    actor = Actor.system("bench")
    wf, _ = create_workflow(tenant, external_id, actor=actor)
    start_at = timezone.now() - timedelta(days=2)
    cum = 0
    rows = []
    for row in event_rows(wf.pk, events, start_at=start_at, fact_at=7):
        rows.append(row)
        cum = row[9]
        if len(rows) == 50_000:
            copy_rows(Event, EVENT_STORED_COLUMNS, rows)
            rows.clear()
    copy_rows(Event, EVENT_STORED_COLUMNS, rows)
    tail_tokens = cum - Event.objects.get(workflow=wf, seq=events - tail).cum_tokens
    Workflow.objects.filter(pk=wf.pk).update(
        head_seq=events, total_tokens=cum, tail_events=events, tail_tokens=cum
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memoryhub_event")
    content = {
        "narrative": f"History of {events - tail:,} payment-API events.",
        "facts": [
            {
                "key": "scope:payments:write",
                "kind": "scope",
                "text": "payments:write",
                "state": "info",
                "source_seqs": [1],
            }
        ],
        "open_items": [],
    }
    summary = create_summary(
        wf,
        content=content,
        covers_from_seq=1,
        covers_to_seq=events - tail,
        compactor={"name": "bench", "version": "1"},
        actor=actor,
    )
    # The validator over a million events is not what is measured here: record the setup as such.
    ValidationRecord.objects.create(
        summary=summary, validator_version="bench-setup", checks=[], passed=True, actor=str(actor)
    )
    Summary.objects.filter(pk=summary.pk).update(status="VALIDATED")
    summary.refresh_from_db()
    lifecycle.activate(summary, 0, actor)
    wf.refresh_from_db()
    assert wf.tail_tokens == tail_tokens and wf.active_summary_id == summary.pk
    log(f"  {external_id}: {events:,} events, S1 covers 1–{events - tail:,}, tail {tail}")
    return wf


def traced_artifact(wf: Workflow, artifact_id: str) -> str:
    """Trace an agent call that read the active summary and record an artifact it produced."""
    wf.refresh_from_db()
    assert wf.active_summary is not None  # the bench activates a summary before tracing
    record_trace(
        wf,
        {
            "agent": "publisher",
            "agent_run_id": f"{artifact_id}-run",
            "model_call_id": f"{artifact_id}-call",
            "summary_id": wf.active_summary.summary_id,
            "tail_to_seq": wf.head_seq,
            "graph_release": "bench@1",
            "checkpoint_id": "ck-1",
        },
        BENCH_ACTOR,
    )
    record_artifact(
        wf,
        {
            "artifact_id": artifact_id,
            "kind": "test-suite",
            "produced_by": {"model_call_id": f"{artifact_id}-call"},
        },
        BENCH_ACTOR,
    )
    return artifact_id
