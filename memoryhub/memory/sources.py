"""Stored events as the compactors and the validator read them (``SourceEvent``)."""

from __future__ import annotations

from memoryhub.compaction.types import SourceEvent
from memoryhub.models import Event, Workflow


def source_events(workflow: Workflow, start: int, end: int) -> list[SourceEvent]:
    """Covered events as the validator's SourceEvent (purged ones flagged, content gone)."""
    rows = Event.objects.filter(workflow=workflow, seq__gte=start, seq__lte=end).order_by("seq")
    return [
        SourceEvent(
            seq=e.seq,
            kind=e.kind,
            content=e.content,
            agent=e.agent,
            role=e.role,
            tool_call_id=e.tool_call_id,
            facts=list(e.facts or []),
            refs=list(e.refs or []),
            side_effect=e.side_effect,
            token_count=e.token_count,
            purged=e.purged_at is not None,
        )
        for e in rows.iterator(chunk_size=1000)
    ]
