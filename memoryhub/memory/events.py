"""Appending and reading source events.

Events are append-only and gapless per workflow. ``append_events`` validates and token-counts the
whole batch *before* taking the workflow lock, then assigns seqs under the lock (SELECT … FOR
UPDATE on PostgreSQL; the IMMEDIATE transaction on SQLite) and updates the running totals.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from memoryhub.core.canonical import hash_text
from memoryhub.core.errors import Conflict, InvalidInput, PayloadTooLarge
from memoryhub.core.facts import FACT_KINDS, FACT_STATES
from memoryhub.core.tokens import count_many
from memoryhub.memory.quality_service import Estimate, parse_estimate, record_event_estimates
from memoryhub.memory.workflows import workflow_encoding
from memoryhub.models import Event, EventKind, SideEffect, Workflow
from memoryhub.models.workflows import EVENT_STORED_COLUMNS
from triggers.policy import policy_for

# The workflow page shows events in pages of this many seqs: page N holds seqs (N-1)*50+1 .. N*50,
# so any page can link to an event as /workflows/<wf>/?page=<n>#event-<seq> (audit pages do).
EVENTS_PER_PAGE = 50

EVENT_FIELDS = {
    "kind",
    "content",
    "agent",
    "role",
    "client_event_id",
    "tool_call_id",
    "facts",
    "refs",
    "side_effect",
    "token_estimate",  # the client's own token count of ``content`` (drift is recorded)
    "token_estimate_model",  # the model that count was made for (default: the policy's)
}
KINDS = frozenset(str(k) for k in EventKind.values)
SIDE_EFFECTS = frozenset(str(s) for s in SideEffect.values)
TOOL_KINDS = frozenset({"tool_call", "tool_result"})


@dataclass
class EventIn:
    kind: str
    content: str
    agent: str = ""
    role: str = ""
    client_event_id: str | None = None
    tool_call_id: str = ""
    facts: list[dict[str, Any]] | None = None
    refs: list[str] | None = None
    side_effect: str = SideEffect.NONE
    content_hash: str = ""
    token_count: int = 0
    estimate: Estimate | None = None


@dataclass
class AppendResult:
    events: list[dict[str, Any]]
    head_seq: int
    total_tokens: int
    written: int


def _fail(index: int, field: str, message: str) -> InvalidInput:
    return InvalidInput(f"events[{index}].{field}: {message}", code="invalid_event", index=index, field=field)


def _opt_str(raw: dict, key: str, index: int, max_len: int = 200) -> str:
    value = raw.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _fail(index, key, "must be a string")
    if len(value) > max_len:
        raise _fail(index, key, f"at most {max_len} characters")
    return value


def _parse_facts(raw: Any, index: int) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise _fail(index, "facts", "must be a list of {key, kind, text, state}")
    facts = []
    for j, fact in enumerate(raw):
        where = f"facts[{j}]"
        if not isinstance(fact, dict):
            raise _fail(index, where, "must be an object")
        unknown = set(fact) - {"key", "kind", "text", "state"}
        if unknown:
            raise _fail(index, where, f"unknown fields {sorted(unknown)}")
        key, kind, text = fact.get("key"), fact.get("kind"), fact.get("text", "")
        state = fact.get("state", "info")
        if not isinstance(key, str) or not key.strip() or len(key) > 200:
            raise _fail(index, f"{where}.key", "a non-empty string of at most 200 characters is required")
        if kind not in FACT_KINDS:
            raise _fail(index, f"{where}.kind", f"must be one of {', '.join(FACT_KINDS)}")
        if not isinstance(text, str):
            raise _fail(index, f"{where}.text", "must be a string")
        if state not in FACT_STATES:
            raise _fail(index, f"{where}.state", f"must be one of {', '.join(FACT_STATES)}")
        facts.append({"key": key, "kind": kind, "text": text, "state": state})
    return facts


def parse_event(raw: Any, index: int, max_chars: int | None = None) -> EventIn:
    """Validate one event of the API shape; raises InvalidInput naming the index and field.

    Hand-written rather than a DRF serializer: this is the ingest hot path (1,000 events a request).
    """
    if type(raw) is not dict:
        raise InvalidInput(f"events[{index}] must be an object", code="invalid_event", index=index)
    unknown = raw.keys() - EVENT_FIELDS
    if unknown:
        raise _fail(index, sorted(unknown)[0], f"unknown field(s) {sorted(unknown)}")
    kind = raw.get("kind")
    if not isinstance(kind, str) or kind not in KINDS:
        raise _fail(index, "kind", f"unknown kind {kind!r}; expected one of {', '.join(sorted(KINDS))}")
    if "content" not in raw:
        # The contract requires it: an event without content would be stored with 0 tokens.
        raise _fail(index, "content", 'is required (a string; "" for an event without text)')
    content = raw["content"]
    if type(content) is not str:
        raise _fail(index, "content", "must be a string")
    max_chars = max_chars or settings.MEMORYHUB_MAX_EVENT_CHARS
    if len(content) > max_chars:
        raise PayloadTooLarge(f"events[{index}].content: over {max_chars} characters", index=index)
    client_event_id = raw.get("client_event_id")
    if client_event_id is not None and (not isinstance(client_event_id, str) or not client_event_id):
        raise _fail(index, "client_event_id", "must be a non-empty string")
    if client_event_id and len(client_event_id) > 200:
        raise _fail(index, "client_event_id", "at most 200 characters")
    refs = raw.get("refs") or []
    if refs and (type(refs) is not list or not all(isinstance(r, str) and 0 < len(r) <= 200 for r in refs)):
        raise _fail(index, "refs", "must be a list of non-empty strings")
    side_effect = raw.get("side_effect") or "none"
    if not isinstance(side_effect, str) or side_effect not in SIDE_EFFECTS:
        raise _fail(index, "side_effect", f"must be one of {', '.join(sorted(SIDE_EFFECTS))}")
    tool_call_id = _opt_str(raw, "tool_call_id", index)
    if not tool_call_id and kind in TOOL_KINDS:
        raise _fail(index, "tool_call_id", f"required for kind {kind}")
    return EventIn(
        kind=kind,
        content=content,
        agent=_opt_str(raw, "agent", index, 100),
        role=_opt_str(raw, "role", index, 32),
        client_event_id=client_event_id,
        tool_call_id=tool_call_id,
        facts=_parse_facts(raw.get("facts"), index) if raw.get("facts") is not None else [],
        refs=list(refs),
        side_effect=side_effect,
        estimate=parse_estimate(
            raw.get("token_estimate"), raw.get("token_estimate_model"), "token_estimate", index=index
        )
        if "token_estimate" in raw or "token_estimate_model" in raw
        else None,
    )


def parse_batch(payload: Any) -> tuple[list[EventIn], int | None]:
    """Validate a whole request body ``{"events": [...], "expected_head"?: n}``."""
    if not isinstance(payload, dict):
        raise InvalidInput("body must be a JSON object with an 'events' list", code="invalid_body")
    unknown = set(payload) - {"events", "expected_head"}
    if unknown:
        raise InvalidInput(f"unknown field(s) {sorted(unknown)}", code="invalid_body")
    raw_events = payload.get("events")
    if not isinstance(raw_events, list):
        raise InvalidInput("'events' must be a list", code="invalid_body")
    if not raw_events:
        raise InvalidInput("'events' must not be empty", code="empty_batch")
    limit = settings.MEMORYHUB_MAX_BATCH_EVENTS
    if len(raw_events) > limit:
        raise PayloadTooLarge(
            f"batch of {len(raw_events)} events is over the maximum of {limit}", code="batch_too_large"
        )
    expected_head = payload.get("expected_head")
    if expected_head is not None and (
        isinstance(expected_head, bool) or not isinstance(expected_head, int) or expected_head < 0
    ):
        raise InvalidInput("'expected_head' must be a non-negative integer", code="invalid_expected_head")
    max_chars = settings.MEMORYHUB_MAX_EVENT_CHARS
    events = [parse_event(raw, i, max_chars) for i, raw in enumerate(raw_events)]
    seen: set[str] = set()
    for i, event in enumerate(events):
        if event.client_event_id:
            if event.client_event_id in seen:
                raise _fail(i, "client_event_id", "repeated inside the batch")
            seen.add(event.client_event_id)
    return events, expected_head


# What a re-send must repeat exactly. A purged event kept only its identity columns (content, facts
# and refs are gone), so those are all a re-send of it can be compared on.
RESEND_FIELDS = ("content_hash", "kind", "agent", "role", "tool_call_id", "side_effect", "facts", "refs")
PURGED_RESEND_FIELDS = ("kind", "agent", "role", "tool_call_id", "side_effect")


def resend_differences(existing: Event, new: EventIn) -> list[str]:
    """The fields in which a re-sent event differs from the stored one (empty: an exact re-send)."""
    fields = PURGED_RESEND_FIELDS if existing.purged_at is not None else RESEND_FIELDS
    differ = []
    for name in fields:
        stored, sent = getattr(existing, name), getattr(new, name)
        if name in ("facts", "refs"):
            stored, sent = stored or [], sent or []
        if stored != sent:
            differ.append("content" if name == "content_hash" else name)
    return differ


def append_events(
    workflow: Workflow, events: list[EventIn], *, expected_head: int | None = None
) -> AppendResult:
    """Append a batch atomically with gapless server-assigned seqs.

    Re-sending events whose client_event_id is already stored returns their original seqs and writes
    nothing; the same id with any other content, facts, refs, kind, agent, role, tool_call_id or
    side_effect is a 409 naming the fields (nothing of a batch is written). ``expected_head`` mismatch is a 409 that
    carries the current head.
    """
    encoding = workflow_encoding(workflow)
    counts = count_many([e.content for e in events], encoding)
    for event, tokens in zip(events, counts, strict=True):
        event.token_count = tokens
        event.content_hash = hash_text(event.content)
    ids = [e.client_event_id for e in events if e.client_event_id]

    with transaction.atomic():
        wf = Workflow.objects.select_for_update().get(pk=workflow.pk)
        existing: dict[str, Event] = {}
        if ids:
            existing = {cast(str, e.client_event_id): e for e in _stored_with_client_ids(wf, ids)}
        for i, event in enumerate(events):
            prior = existing.get(event.client_event_id or "")
            differ = resend_differences(prior, event) if prior is not None else []
            if prior is not None and differ:
                raise Conflict(
                    f"events[{i}]: client_event_id {event.client_event_id!r} was already used for a different "
                    f"event (seq {prior.seq}; differs in {', '.join(differ)}): a re-send must be exact",
                    code="client_event_id_conflict",
                    seq=prior.seq,
                    fields=differ,
                )
        fresh = [e for e in events if not (e.client_event_id and e.client_event_id in existing)]
        if fresh and expected_head is not None and expected_head != wf.head_seq:
            raise Conflict(
                f"expected_head {expected_head} but the workflow head is {wf.head_seq}",
                code="head_mismatch",
                current_head=wf.head_seq,
            )
        now = timezone.now()
        rows: list[tuple] = []
        seq, cum = wf.head_seq, wf.total_tokens
        open_calls = list(wf.open_tool_calls)
        pending = list(wf.pending_side_effects)
        for event in fresh:
            seq += 1
            cum += event.token_count
            rows.append(
                (
                    wf.pk,
                    seq,
                    event.client_event_id,
                    event.kind,
                    event.agent,
                    event.role,
                    event.content,
                    event.content_hash,
                    event.token_count,
                    cum,
                    event.tool_call_id,
                    json.dumps(event.facts or []),
                    json.dumps(event.refs or []),
                    event.side_effect,
                    now,
                )
            )
            _track_open_items(event, seq, open_calls, pending)
        if rows:
            _insert_rows(rows)
            estimated = [
                (row[1], e.estimate, e.token_count) for e, row in zip(fresh, rows, strict=True) if e.estimate
            ]
            if estimated:
                record_event_estimates(wf, estimated, _policy_model(wf))
            added_tokens = cum - wf.total_tokens
            Workflow.objects.filter(pk=wf.pk).update(
                head_seq=seq,
                total_tokens=cum,
                tail_events=wf.tail_events + len(rows),
                tail_tokens=wf.tail_tokens + added_tokens,
                open_tool_calls=open_calls,
                pending_side_effects=pending,
                last_event_at=now,
                updated_at=now,
            )
            wf.head_seq, wf.total_tokens = seq, cum
        new_seq = {id(e): row[1] for e, row in zip(fresh, rows, strict=True)}
        result = []
        for event in events:
            prior = existing.get(event.client_event_id or "")
            result.append(
                {
                    "seq": prior.seq if prior else new_seq[id(event)],
                    "client_event_id": event.client_event_id,
                    "token_count": prior.token_count if prior else event.token_count,
                    "content_hash": prior.content_hash if prior else event.content_hash,
                }
            )
    return AppendResult(events=result, head_seq=wf.head_seq, total_tokens=wf.total_tokens, written=len(rows))


def _policy_model(workflow: Workflow) -> str:

    return policy_for(workflow).model


def _stored_with_client_ids(wf: Workflow, ids: list[str]) -> Iterable[Event]:
    """The workflow's events already stored under any of ``ids`` (a re-send), by index lookups.

    On PostgreSQL one probe of the (workflow, client_event_id) index per id, whatever the
    statistics say: with ``client_event_id IN (…1,000 ids…)`` a planner that has not analyzed a
    growing partition yet estimates a few hundred rows for the workflow and reads *all* of its
    events instead — 0.4 s per batch at 400k events, which made ingest slow down as history grew.
    A LATERAL probe per id (not flattenable: LIMIT 1) cannot turn into a scan of the workflow.
    """
    if connection.vendor != "postgresql":
        return Event.objects.filter(workflow=wf, client_event_id__in=ids)
    table = connection.ops.quote_name(Event._meta.db_table)
    return Event.objects.raw(
        f"SELECT e.* FROM unnest(%s::text[]) AS wanted(client_event_id) "
        f"CROSS JOIN LATERAL (SELECT * FROM {table} WHERE workflow_id = %s "
        # LIMIT 1 (the pair is unique) keeps the subquery from being flattened into a join the
        # planner could hash over the whole workflow.
        f"AND client_event_id = wanted.client_event_id LIMIT 1) AS e",
        [list(dict.fromkeys(ids)), wf.pk],
    )


def _json_list(value: list | None) -> str:
    return json.dumps(value) if value else "[]"


def _insert_rows(rows: list[tuple]) -> None:
    """Write a batch of event rows in the current transaction.

    PostgreSQL gets COPY (the hot ingest path: ~5x fewer CPU cycles than a multi-row INSERT built by the
    ORM); SQLite gets executemany. Rows are plain tuples in EVENT_STORED_COLUMNS order; JSON is pre-serialised.
    """
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.cursor.copy(f"COPY {table} ({', '.join(EVENT_STORED_COLUMNS)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            placeholders = ", ".join(["%s"] * len(EVENT_STORED_COLUMNS))
            cursor.executemany(
                f"INSERT INTO {table} ({', '.join(EVENT_STORED_COLUMNS)}) VALUES ({placeholders})", rows
            )


def _track_open_items(event: EventIn, seq: int, open_calls: list, pending: list) -> None:
    """Maintain unresolved tool calls and pending side effects (trigger guards read these)."""
    if event.kind == EventKind.TOOL_CALL and event.tool_call_id not in open_calls:
        open_calls.append(event.tool_call_id)
    elif event.kind == EventKind.TOOL_RESULT and event.tool_call_id in open_calls:
        open_calls.remove(event.tool_call_id)
    key = event.tool_call_id or event.client_event_id or f"seq-{seq}"
    if event.side_effect == SideEffect.PENDING and key not in pending:
        pending.append(key)
    elif event.side_effect == SideEffect.DONE and key in pending:
        pending.remove(key)


def events_page(workflow: Workflow, *, after: int = 0, until: int | None = None, limit: int = 100):
    """Events with after < seq <= until, in seq order, at most ``limit`` (keyset paging)."""
    qs = Event.objects.filter(workflow=workflow, seq__gt=after)
    if until is not None:
        qs = qs.filter(seq__lte=until)
    return list(qs.order_by("seq")[:limit])


def tokens_through(workflow: Workflow, seq: int) -> int:
    """Tokens of events 1..seq, by one index lookup (cum_tokens)."""
    if seq <= 0:
        return 0
    value = Event.objects.filter(workflow=workflow, seq=seq).values_list("cum_tokens", flat=True).first()
    return int(value or 0)
