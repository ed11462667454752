"""A timeline: a slice of a session's history as it happened — events, and the model calls
made between them — recorded in one request.

A transcript replayed after the fact (the Claude Code hook syncing a session file) knows the
order of everything but not the seqs the server will assign. Sent as one append per call plus one
trace per call, a 600-turn session is 1,200 round trips; sent as a timeline it is one. Each trace
in the timeline read everything before it: its ``tail_to_seq`` *and* the head at its read are the
seq of the last event before it in the timeline (or the workflow head when it comes first), so a
call is never flagged ``tail_loss`` for events that were written after it in the same request.

All or nothing: every item is parsed before anything is written (a bad item is a 400 naming its
index), then events and traces are written in one transaction. Idempotent like its parts: events
by ``client_event_id``, traces by ``model_call_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from django.conf import settings
from django.db import transaction

from memoryhub.context.traces import ReadPoint, parse_trace, record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput, PayloadTooLarge
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.quality_service import ACTIVE_JOB_STATUSES
from memoryhub.models import CompactionJob, Workflow
from triggers.policy import policy_for

TIMELINE_FIELDS = frozenset({"items"})
ITEM_KINDS = ("event", "trace")


@dataclass(frozen=True)
class TimelineResult:
    events: list[dict[str, Any]]
    traces: list[dict[str, Any]]
    head_seq: int
    written: int


def _bad(message: str, code: str = "invalid_timeline", **extra: Any) -> InvalidInput:
    return InvalidInput(message, code=code, **extra)


def record_timeline(workflow: Workflow, payload: Any, actor: Actor) -> TimelineResult:
    """``{"items": [{"event": {...}} | {"trace": {...}}, ...]}`` → events appended, traces recorded.

    A trace item is the trace body of ``POST …/traces/`` without ``tail_to_seq`` (the timeline
    says it). At most ``MEMORYHUB_MAX_BATCH_EVENTS`` items.
    """
    if not isinstance(payload, dict) or set(payload) - TIMELINE_FIELDS:
        raise _bad("body must be a JSON object {'items': [...]}", "invalid_body")
    items = payload.get("items")
    if not isinstance(items, list) or not items:
        raise _bad("'items' must be a non-empty list", "invalid_body")
    limit = settings.MEMORYHUB_MAX_BATCH_EVENTS
    if len(items) > limit:
        raise PayloadTooLarge(
            f"timeline of {len(items)} items is over the maximum of {limit}", code="batch_too_large"
        )
    raw_events: list[Any] = []
    traces: list[tuple[int, int, Any]] = []  # (item index, events before it, parsed trace)
    for i, item in enumerate(items):
        if not isinstance(item, dict) or len(item) != 1 or next(iter(item)) not in ITEM_KINDS:
            raise _bad(f"items[{i}] must be {{'event': {{...}}}} or {{'trace': {{...}}}}", index=i)
        kind, body = next(iter(item.items()))
        if kind == "event":
            raw_events.append(body)
            continue
        if not isinstance(body, dict) or "tail_to_seq" in body:
            raise _bad(f"items[{i}].trace must be an object without tail_to_seq (its place says it)", index=i)
        try:
            traces.append((i, len(raw_events), parse_trace({**body, "tail_to_seq": 0})))
        except InvalidInput as exc:
            raise _bad(f"items[{i}].trace: {exc}", "invalid_trace", index=i) from exc
    events = parse_batch({"events": raw_events})[0] if raw_events else []

    with transaction.atomic():
        row = (
            Workflow.objects.filter(pk=workflow.pk).values("head_seq", "summary_tokens", "tail_tokens").get()
        )
        start, history = row["head_seq"], row["summary_tokens"] + row["tail_tokens"]
        appended = append_events(workflow, events) if events else None
        stored = appended.events if appended else []
        seqs = [e["seq"] for e in stored]
        # History at each point of the timeline: what was there before, plus the new events so far.
        grown = list(accumulate((e["token_count"] if e["seq"] > start else 0) for e in stored))
        safe_budget = policy_for(workflow).safe_budget
        running = CompactionJob.objects.filter(workflow=workflow, status__in=ACTIVE_JOB_STATUSES).exists()
        recorded = []
        for index, before, trace_in in traces:
            tail = seqs[before - 1] if before else start
            trace_in.tail_to_seq = tail
            read = ReadPoint(tail, history + (grown[before - 1] if before else 0), safe_budget, running)
            trace, created = record_trace(workflow, trace_in, actor, read=read)
            recorded.append(
                {
                    "index": index,
                    "model_call_id": trace.model_call_id,
                    "trace_id": trace.pk,
                    "tail_to_seq": trace.tail_to_seq,
                    "flags": trace.flags,
                    "created": created,
                }
            )
        head = Workflow.objects.filter(pk=workflow.pk).values_list("head_seq", flat=True).get()
    return TimelineResult(
        events=appended.events if appended else [],
        traces=recorded,
        head_seq=head,
        written=(appended.written if appended else 0) + sum(t["created"] for t in recorded),
    )
