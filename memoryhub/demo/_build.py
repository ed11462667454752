"""Small helpers that assemble demo events in the API input shape (pure data, deterministic)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Event = dict[str, Any]
Fact = dict[str, str]


def fact(key: str, kind: str, text: str, state: str = "info") -> Fact:
    """One structured annotation ``{"key", "kind", "text", "state"}``."""
    return {"key": key, "kind": kind, "text": text, "state": state}


def ev(
    kind: str,
    agent: str,
    content: str,
    *,
    role: str | None = None,
    facts: list[Fact] | None = None,
    refs: list[str] | None = None,
    tool_call_id: str | None = None,
    side_effect: str | None = None,
) -> Event:
    """An event without its ``client_event_id`` (assigned by ``number``); optional keys only when set."""
    event: Event = {
        "kind": kind,
        "content": content,
        "agent": agent,
        "role": role or ("tool" if kind == "tool_result" else "assistant"),
    }
    if tool_call_id:
        event["tool_call_id"] = tool_call_id
    if facts:
        event["facts"] = [dict(f) for f in facts]
    if refs:
        event["refs"] = list(refs)
    if side_effect:
        event["side_effect"] = side_effect
    return event


def tool_pair(
    agent: str,
    call_id: str,
    call_text: str,
    result_text: str,
    *,
    result_facts: list[Fact] | None = None,
    refs: list[str] | None = None,
    side_effect: bool = False,
) -> list[Event]:
    """A tool call and its result sharing ``call_id``; ``side_effect`` marks pending → done."""
    return [
        ev(
            "tool_call",
            agent,
            call_text,
            tool_call_id=call_id,
            refs=refs,
            side_effect="pending" if side_effect else None,
        ),
        ev(
            "tool_result",
            agent,
            result_text,
            tool_call_id=call_id,
            facts=result_facts,
            refs=refs,
            side_effect="done" if side_effect else None,
        ),
    ]


def interleave(
    blocks: list[list[Event]], make_filler: Callable[[int, list[Event]], Event], size: int
) -> list[Event]:
    """Exactly ``size`` events: ``blocks`` in order (each kept contiguous) with as many fillers
    as needed spread evenly between them (never inside a block, so a tool call is never
    separated from its result). ``make_filler(i, events_so_far)`` builds the i-th filler, so it
    can refer to what already happened."""
    needed = size - sum(len(b) for b in blocks)
    if needed < 0:
        raise ValueError(f"phase is {-needed} events over its size {size}")
    out: list[Event] = []
    used = 0
    for i, block in enumerate(blocks):
        out.extend(block)
        take = (i + 1) * needed // len(blocks) - used
        for _ in range(take):
            out.append(make_filler(used, out))
            used += 1
    return out


def number(events: list[Event], prefix: str) -> list[Event]:
    """Give every event a stable ``client_event_id`` (``<prefix>-0001`` …) in seq order."""
    numbered = []
    for seq, event in enumerate(events, start=1):
        # client_event_id goes right after role so every event has the same key order.
        e = {k: event[k] for k in ("kind", "content", "agent", "role")}
        e["client_event_id"] = f"{prefix}-{seq:04d}"
        e.update({k: v for k, v in event.items() if k not in e})
        numbered.append(e)
    return numbered


def aggregate_facts(events: list[Event], from_seq: int, to_seq: int) -> list[dict[str, Any]]:
    """Every fact key in events ``from_seq..to_seq`` (1-based, inclusive), first-seen order, with
    its latest text/state and all seqs that carry it: the structured half of a summary."""
    by_key: dict[str, dict[str, Any]] = {}
    for seq in range(from_seq, to_seq + 1):
        for f in events[seq - 1].get("facts", []):
            entry = by_key.setdefault(f["key"], {"key": f["key"], "source_seqs": []})
            entry.update(kind=f["kind"], text=f["text"], state=f.get("state", "info"))
            entry["source_seqs"].append(seq)
    return [
        {
            "key": e["key"],
            "kind": e["kind"],
            "text": e["text"],
            "state": e["state"],
            "source_seqs": e["source_seqs"],
        }
        for e in by_key.values()
    ]
