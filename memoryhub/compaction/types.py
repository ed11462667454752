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
