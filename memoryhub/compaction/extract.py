"""Deterministic building blocks shared by every compactor.

Which events may be covered, how structured facts merge, which items stay open, and how free
text is squeezed into a narrative line. LLM compactors reuse these so facts never depend on a
model: the model only writes prose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from memoryhub.compaction.base import InvalidCompactionInput, NothingToCompact
from memoryhub.compaction.secret_scan import redact_secrets
from memoryhub.compaction.tokens import count_tokens, decode_prefix, get_encoding
from memoryhub.compaction.types import SUMMARY_SCHEMA, PreviousSummary, SourceEvent
from memoryhub.core.quality import TOKEN_CLASSES, extract

OPEN_STATES = frozenset({"open", "pending"})
OPEN_ITEM_KINDS = frozenset({"issue", "approval"})

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WS = re.compile(r"\s+")


def new_events(previous: PreviousSummary | None, events: Iterable[SourceEvent]) -> list[SourceEvent]:
    """The events after ``previous``'s watermark, checked to be its gapless continuation."""
    after = previous.covers_to_seq if previous else 0
    fresh = sorted((e for e in events if e.seq > after), key=lambda e: e.seq)
    if not fresh:
        return []
    expected = after + 1 if previous else fresh[0].seq
    for event in fresh:
        if event.seq != expected:
            raise InvalidCompactionInput(
                f"events must continue the coverage gaplessly: expected seq {expected}, got {event.seq}"
            )
        expected += 1
    return fresh


def coverable_prefix(events: list[SourceEvent]) -> list[SourceEvent]:
    """The longest prefix of ``events`` that leaves no tool call without its result.

    A ``tool_call`` is paired with the ``tool_result`` carrying the same ``tool_call_id`` (calls
    without an id pair with the next id-less result). Coverage ends just before the earliest
    call whose result is not in ``events``.
    """
    open_calls: dict[str, int] = {}  # tool_call_id -> index of the call
    anonymous: list[int] = []  # indexes of id-less calls, oldest first
    for index, event in enumerate(events):
        if event.kind == "tool_call":
            if event.tool_call_id:
                open_calls.setdefault(event.tool_call_id, index)
            else:
                anonymous.append(index)
        elif event.kind == "tool_result":
            if event.tool_call_id:
                open_calls.pop(event.tool_call_id, None)
            elif anonymous:
                anonymous.pop(0)
    unresolved = list(open_calls.values()) + anonymous
    return events[: min(unresolved)] if unresolved else list(events)


def events_to_cover(previous: PreviousSummary | None, events: list[SourceEvent]) -> list[SourceEvent]:
    """The events a compaction after ``previous`` covers: the new ones up to the first tool call
    still waiting for its result. NothingToCompact when that leaves none."""
    covered = coverable_prefix(new_events(previous, events))
    if not covered:
        raise NothingToCompact(
            "no event can be covered: none after the watermark, or the next one is a tool "
            "call whose result has not arrived"
        )
    return covered


def carried_content(
    previous: PreviousSummary | None, covered: list[SourceEvent]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the previous summary's content, a new summary's content before its narrative): the
    previous facts merged with the covered events' facts, and the open items among them."""
    prev_content: dict[str, Any] = previous.content if previous else {}
    facts = merge_facts(prev_content.get("facts", []), covered)
    content: dict[str, Any] = {
        "schema": SUMMARY_SCHEMA,
        "narrative": "",
        "facts": facts,
        "open_items": open_items(facts),
    }
    return prev_content, content


def merge_facts(
    previous_facts: Iterable[dict[str, Any]], events: Iterable[SourceEvent]
) -> list[dict[str, Any]]:
    """Previous summary facts updated by the events' facts.

    One fact per key, in order of first appearance; the latest event's kind, text and state win
    verbatim, and ``source_seqs`` accumulate every event that stated the key. Purged events
    contribute nothing.
    """
    merged: dict[str, dict[str, Any]] = {}
    for fact in previous_facts:
        if fact.get("key"):
            merged[fact["key"]] = {
                "key": fact["key"],
                "kind": fact.get("kind", ""),
                "text": fact.get("text", ""),
                "state": fact.get("state", "info"),
                "source_seqs": sorted(set(fact.get("source_seqs", []))),
            }
    for event in events:
        if event.purged:
            continue
        for fact in event.facts:
            key = fact.get("key")
            if not key:
                continue
            entry = merged.setdefault(key, {"key": key, "source_seqs": []})
            entry["kind"] = fact.get("kind", entry.get("kind", ""))
            entry["text"] = fact.get("text", entry.get("text", ""))
            entry["state"] = fact.get("state") or "info"
            if event.seq not in entry["source_seqs"]:
                entry["source_seqs"].append(event.seq)
    return list(merged.values())


def open_items(facts: Iterable[dict[str, Any]]) -> list[dict[str, str]]:
    """Unresolved issues and pending approvals, in fact order."""
    return [
        {"key": f["key"], "kind": f["kind"], "state": f["state"]}
        for f in facts
        if f.get("kind") in OPEN_ITEM_KINDS and f.get("state") in OPEN_STATES
    ]


def collect_refs(previous: PreviousSummary | None, events: Iterable[SourceEvent]) -> list[str]:
    """Every source reference, previous ones first, without duplicates."""
    refs: dict[str, None] = {}
    if previous:
        refs.update(dict.fromkeys(previous.source_refs))
    for event in events:
        if not event.purged:
            refs.update(dict.fromkeys(event.refs))
    return list(refs)


def first_sentence(text: str, max_tokens: int, encoding: str) -> str:
    """The first sentence of ``text``, whitespace-collapsed, secrets redacted, token-capped."""
    return first_sentence_tokens(text, max_tokens, encoding)[0]


def first_sentence_tokens(text: str, max_tokens: int, encoding: str) -> tuple[str, int]:
    """``first_sentence`` and its token count, from a single encoding pass."""
    flat = _WS.sub(" ", text).strip()
    if not flat:
        return "", 0
    sentence = redact_secrets(_SENTENCE_END.split(flat, maxsplit=1)[0])
    ids = get_encoding(encoding).encode_ordinary(sentence)
    if len(ids) <= max_tokens:
        return sentence, len(ids)
    return decode_prefix(ids, max_tokens, encoding).rstrip() + "…", max_tokens + 1


def json_string_tokens(text: str, encoding: str) -> int:
    """Tokens ``text`` costs once embedded in a JSON string (escapes included)."""
    return count_tokens(json.dumps(text, ensure_ascii=False)[1:-1], encoding)


def salient_tokens(
    previous: Any, covered: list[SourceEvent], facts: list[dict[str, Any]]
) -> dict[str, list[str]]:
    """Salient tokens per class (previous summary's first, then new ones in order of first
    appearance), leaving out what the facts already state."""
    stated = "\n".join(f"{f.get('key', '')}\n{f.get('text', '')}" for f in facts)
    kept: dict[str, dict[str, None]] = {name: {} for name in TOKEN_CLASSES}
    if isinstance(previous, dict):
        for name in TOKEN_CLASSES:
            for token in previous.get(name, []) or []:
                if isinstance(token, str):
                    kept[name][token] = None
    for event in covered:
        if event.purged:
            continue
        text = "\n".join([event.content, *event.refs])
        found = extract(redact_secrets(text))
        for name in TOKEN_CLASSES:
            for token in sorted(found[name]):
                if token not in stated:
                    kept[name][token] = None
    return {name: list(tokens) for name, tokens in kept.items() if tokens}
