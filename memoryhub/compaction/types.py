"""Plain data passed into and out of compactors (no Django: the ORM layer converts to these)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memoryhub.core.canonical import canonical_bytes, sha256_hex

SUMMARY_SCHEMA = "memoryhub.summary/v1"


@dataclass(frozen=True)
class SourceEvent:
    """One committed source event as a compactor or the validator sees it.

    ``facts`` are the event's structured annotations ``{"key", "kind", "text", "state"}``;
    ``purged`` events keep their seq (coverage stays gapless) but their content and facts
    are gone and must not be used.
    """

    seq: int
    kind: str
    content: str = ""
    agent: str = ""
    role: str = ""
    tool_call_id: str = ""
    facts: list[dict[str, Any]] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    side_effect: str = "none"
    token_count: int = 0
    purged: bool = False


@dataclass(frozen=True)
class PreviousSummary:
    """The summary a compaction builds on (normally the workflow's active one)."""

    content: dict[str, Any]
    covers_from_seq: int
    covers_to_seq: int
    summary_id: str | None = None
    source_refs: list[str] = field(default_factory=list)
    token_count: int = 0


@dataclass(frozen=True)
class CompactionResult:
    """A candidate summary produced by a compactor, not yet stored or validated.

    ``content`` has the ``memoryhub.summary/v1`` shape; ``model`` is the model that actually
    produced it (for LLM compactors: the id the endpoint returned); ``tokens_in``/``tokens_out``
    feed the generation-cost metric; ``token_count`` is the size of ``content`` itself.
    """

    content: dict[str, Any]
    covers_from_seq: int
    covers_to_seq: int
    source_refs: list[str]
    model: str
    tokens_in: int
    tokens_out: int
    token_count: int
    excluded_categories: list[str] = field(default_factory=list)

    @property
    def content_bytes(self) -> bytes:
        """Canonical JSON bytes of ``content`` (what gets stored and hashed)."""
        return canonical_bytes(self.content)

    @property
    def content_hash(self) -> str:
        return sha256_hex(self.content_bytes)


# -- the ``dropped`` manifest (extractive-v3) ------------------------------------------------------
# content["dropped"]: what a compactor left out for budget, so a drop is declared, never silent.
# Each entry is {"seq": int, "kind": one of DROPPED_KINDS, "text": str, "units": [str, ...]}.
# An entry whose text starts with "seqs A-B" stands for every seq in A..B (aggregated so the
# manifest itself fits the budget); otherwise it names the single event ``seq``.
DROPPED_FIELD = "dropped"
DROPPED_KINDS: tuple[str, ...] = ("obligation", "decision", "open_item", "unit", "narrative")
_RANGE_PREFIX = "seqs "


def range_text(first: int, last: int, rest: str = "") -> str:
    """The text of an aggregated manifest entry covering seqs ``first..last``."""
    head = f"{_RANGE_PREFIX}{first}-{last}"
    return f"{head}: {rest}" if rest else head


def dropped_seqs(entry: dict[str, Any]) -> range:
    """The event seqs a manifest entry declares dropped (one seq, or an aggregated range)."""
    seq = int(entry["seq"])
    text = entry.get("text", "")
    if isinstance(text, str) and text.startswith(_RANGE_PREFIX):
        span = text[len(_RANGE_PREFIX) :].split(":", 1)[0].strip()
        first, _, last = span.partition("-")
        if first.isdigit() and last.isdigit():
            return range(int(first), int(last) + 1)
    return range(seq, seq + 1)


def manifest_problems(value: Any) -> list[tuple[str, str]]:
    """(field, message) for every way ``value`` is not a valid ``dropped`` manifest."""
    if not isinstance(value, list):
        return [("content.dropped", "must be a list of {seq, kind, text, units}")]
    problems = []
    for i, entry in enumerate(value):
        where = f"content.dropped[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"seq", "kind", "text", "units"}:
            problems.append((where, "must be an object with exactly seq, kind, text, units"))
            continue
        seq = entry["seq"]
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            problems.append((f"{where}.seq", "must be a positive integer (an event seq)"))
        if entry["kind"] not in DROPPED_KINDS:
            problems.append((f"{where}.kind", f"must be one of {', '.join(DROPPED_KINDS)}"))
        if not isinstance(entry["text"], str):
            problems.append((f"{where}.text", "must be a string"))
        units = entry["units"]
        if not isinstance(units, list) or not all(isinstance(u, str) for u in units):
            problems.append((f"{where}.units", "must be a list of strings"))
    return problems
