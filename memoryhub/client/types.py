"""Typed results for the hot API shapes (docs/ARCHITECTURE.md "REST API v1").

Each dataclass is built with ``from_dict`` from the server's JSON: known fields become
attributes, unknown ones are kept untouched in ``raw`` so newer servers never break older clients.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T", bound="_Shape")

# Job statuses after which polling stops (the server says PENDING → QUEUED → RUNNING → SUCCEEDED |
# FAILED; compared case-insensitively).
JOB_SUCCESS_STATUSES = frozenset({"succeeded"})
JOB_FAILURE_STATUSES = frozenset({"failed"})
# Outcomes of a finished job after which the workflow has no newer active summary from it.
JOB_INEFFECTIVE_OUTCOMES = frozenset({"rejected", "refused", "awaiting_approval", "failed"})


@dataclass
class _Shape:
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        names = {f.name for f in dataclasses.fields(cls)} - {"raw"}
        kwargs = {name: data[name] for name in names if name in data}
        return cls(raw=dict(data), **kwargs)

    def __getitem__(self, key: str) -> Any:
        """Dict-style access to any field the server sent, typed or not."""
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)


@dataclass
class Workflow(_Shape):
    """A workflow (one agent-framework thread); ``head_seq`` is its canonical source revision."""

    external_id: str = ""
    name: str = ""
    graph_release: str = ""
    source: str = "api"
    head_seq: int = 0
    total_tokens: int = 0
    active_summary_id: str | None = None
    active_revision: int = 0
    tail_events: int = 0
    tail_tokens: int = 0


@dataclass
class AppendedEvent(_Shape):
    seq: int = 0
    client_event_id: str = ""
    token_count: int = 0
    content_hash: str = ""


@dataclass
class AppendResult(_Shape):
    """Answer of an atomic batch append: the stored seqs and the new head."""

    events: list[AppendedEvent] = field(default_factory=list)
    head_seq: int = 0
    total_tokens: int = 0

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AppendResult:
        result = super().from_dict(data)
        result.events = [AppendedEvent.from_dict(e) for e in data.get("events", [])]
        return result


@dataclass
class Event(_Shape):
    """A stored source event."""

    seq: int = 0
    kind: str = ""
    content: str = ""
    agent: str = ""
    role: str = ""
    client_event_id: str = ""
    content_hash: str = ""
    token_count: int = 0
    tool_call_id: str | None = None
    facts: list[dict[str, Any]] = field(default_factory=list)
    refs: list[str] = field(default_factory=list)
    side_effect: str = "none"
    created_at: str | None = None
    purged_at: str | None = None


@dataclass
class ContextSummary(_Shape):
    """The active summary as served in a context read."""

    summary_id: str = ""
    version: int = 0
    status: str = ""
    covers_from_seq: int | None = None
    covers_to_seq: int = 0
    content: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    token_count: int = 0


@dataclass
class TokenTotals(_Shape):
    summary: int = 0
    tail: int = 0
    total: int = 0


@dataclass
class Context(_Shape):
    """Model-facing context: active summary (or none) + every event after its watermark."""

    summary: ContextSummary | None = None
    tail: list[Event] = field(default_factory=list)
    head_seq: int = 0
    tokens: TokenTotals = field(default_factory=TokenTotals)
    context_id: str = ""
    manifest_hash: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Context:
        result = super().from_dict(data)
        summary = data.get("summary")
        result.summary = ContextSummary.from_dict(summary) if summary else None
        result.tail = [Event.from_dict(e) for e in data.get("tail", [])]
        result.tokens = TokenTotals.from_dict(data.get("tokens") or {})
        return result

    @property
    def watermark(self) -> int:
        """Last seq covered by the summary (0 without one)."""
        return self.summary.covers_to_seq if self.summary else 0

    @property
    def tail_to_seq(self) -> int:
        """Last seq actually received: the tail's end, else the summary watermark."""
        return self.tail[-1].seq if self.tail else self.watermark


@dataclass
class Decision(_Shape):
    """A trigger decision: ``action`` is ``continue`` | ``compact`` | ``retrieve_or_block``."""

    action: str = ""
    strategy: str | None = None
    reasons: list[str] = field(default_factory=list)
    current_tokens: int = 0
    expected_next_step_tokens: int = 0
    projected_tokens: int = 0
    safe_budget: int = 0
    target_tokens: int | None = None
    hard_limit: int | None = None
    decision_id: Any = None
    job_id: str | None = None  # set when the trigger call was asked to enqueue

    @property
    def should_compact(self) -> bool:
        return self.action == "compact"

    @property
    def must_retrieve_or_block(self) -> bool:
        return self.action == "retrieve_or_block"


@dataclass
class Job(_Shape):
    """A compaction job (durable, idempotent on tenant/workflow/source_revision/compactor)."""

    job_id: str = ""
    status: str = ""
    outcome: str = ""  # activated | stale | refused | rejected | awaiting_approval | nothing_to_compact | …
    workflow: str | None = None
    source_revision: int | None = None
    summary_id: str | None = None
    attempts: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Job:
        result = super().from_dict(data)
        if not result.job_id and data.get("id") is not None:
            result.job_id = str(data["id"])
        result.job_id = str(result.job_id)
        summary = data.get("summary")
        if result.summary_id is None and isinstance(summary, dict):
            result.summary_id = summary.get("summary_id")
        elif result.summary_id is None and isinstance(summary, str):
            result.summary_id = summary
        return result

    @property
    def succeeded(self) -> bool:
        return self.status.lower() in JOB_SUCCESS_STATUSES

    @property
    def failed(self) -> bool:
        return self.status.lower() in JOB_FAILURE_STATUSES

    @property
    def finished(self) -> bool:
        return self.succeeded or self.failed

    @property
    def took_effect(self) -> bool:
        """Finished without leaving the workflow un-compacted (activated, or nothing left to do)."""
        return self.succeeded and (self.outcome or "").lower() not in JOB_INEFFECTIVE_OUTCOMES


@dataclass
class Summary(_Shape):
    """A summary version (S1, S2, …) with its lifecycle status and coverage watermark."""

    summary_id: str = ""
    version: int = 0
    status: str = ""
    covers_from_seq: int | None = None
    covers_to_seq: int = 0
    content: dict[str, Any] = field(default_factory=dict)
    content_hash: str = ""
    token_count: int = 0


@dataclass
class Trace(_Shape):
    """A recorded consumer trace; ``flags`` names problems (unvalidated summary, tail loss)."""

    trace_id: Any = None
    flags: list[str] = field(default_factory=list)
    model_call_id: str = ""
    summary_id: str | None = None
    tail_to_seq: int = 0
    head_seq_at_read: int | None = None
    summary_status_at_read: str = ""


@dataclass
class Artifact(_Shape):
    """A published artifact (e.g. T57) linked to the trace(s) that produced it."""

    artifact_id: str = ""
    kind: str = ""
    uri: str | None = None
    content_hash: str | None = None
    quality_score: float | None = None
    produced_by: list[dict[str, Any]] = field(default_factory=list)
