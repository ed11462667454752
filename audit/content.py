"""Small shared helpers for the audit views of summaries and events: content access, purge notes,
seq ranges and links to the pages that show them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse

from memoryhub.core.errors import DomainError
from memoryhub.core.opaque import OPAQUE_SCHEMA
from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.memory.summaries import summary_content as service_content
from memoryhub.models import Event, Summary, Workflow


def purge_note(purge_id: str, at: Any) -> str:
    """The one wording used everywhere a purge made something unavailable."""
    day = at.date().isoformat() if hasattr(at, "date") else str(at)[:10]
    return f"purged by {purge_id} on {day}"


def summary_content(summary: Summary) -> dict[str, Any] | None:
    """The summary's parsed content, or None when a purge removed it (or it cannot be parsed)."""
    if summary.purged_by_id:
        return None

    try:
        content = service_content(summary)
    except (ValueError, TypeError, DomainError):  # purged (Conflict) or unparseable bytes
        return None
    if content_is_opaque(summary):  # digest and size only: nothing to search (memoryhub.core.opaque)
        return None
    return content if isinstance(content, dict) else None


def content_is_opaque(summary: Summary) -> bool:
    return summary.content_schema == OPAQUE_SCHEMA


def summary_unavailable(summary: Summary) -> str | None:
    purge = summary.purged_by if summary.purged_by_id else None
    if purge is not None:
        return f"summary {summary.label} content unavailable: {purge_note(purge.purge_id, purge.at)}"
    return None


def iter_strings(
    value: Any, *, skip_keys: frozenset[str] = frozenset({"schema"})
) -> Iterator[tuple[str, str]]:
    """(path, text) for every string inside ``value`` — what an investigation searches in a summary."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            yield path or "content", item
        elif isinstance(item, dict):
            for key in sorted(item, reverse=True):
                if key not in skip_keys:
                    stack.append((f"{path}.{key}" if path else key, item[key]))
        elif isinstance(item, list):
            for i in range(len(item) - 1, -1, -1):
                stack.append((f"{path}[{i}]", item[i]))


def event_url(workflow: Workflow, seq: int) -> str:
    """The workflow page's timeline row for ``seq`` (right page of the paginated table + anchor)."""
    page = (seq - 1) // EVENTS_PER_PAGE + 1
    return f"{reverse('memoryhub:workflow-detail', args=[workflow.external_id])}?page={page}#event-{seq}"


def range_url(workflow: Workflow, from_seq: int, to_seq: int, highlight: str = "") -> str:
    url = reverse("memoryhub:event-range", args=[workflow.external_id, from_seq, to_seq])
    if highlight:
        url += "?" + urlencode({"q": highlight})
    return url


def runs(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Collapse sorted seqs into inclusive (from, to) runs: [1,2,3,7] -> [(1,3),(7,7)]."""
    out: list[tuple[int, int]] = []
    for s in seqs:
        if out and s == out[-1][1] + 1:
            out[-1] = (out[-1][0], s)
        else:
            out.append((s, s))
    return out


def range_label(a: int, b: int) -> str:
    return f"event {a}" if a == b else f"events {a}-{b}"


def purged_runs(workflow: Workflow, from_seq: int, to_seq: int) -> list[dict[str, Any]]:
    """Purged events inside [from_seq, to_seq], grouped into runs per purge, each with its note."""
    if to_seq < from_seq:
        return []
    rows = (
        Event.objects.filter(workflow=workflow, seq__gte=from_seq, seq__lte=to_seq, purged_at__isnull=False)
        .order_by("seq")
        .values_list("seq", "purge__purge_id", "purged_at")
    )
    out: list[dict[str, Any]] = []
    for seq, purge_id, purged_at in rows:
        last = out[-1] if out else None
        if last and last["purge_id"] == purge_id and seq == last["to_seq"] + 1:
            last["to_seq"] = seq
        else:
            out.append(
                {"from_seq": seq, "to_seq": seq, "purge_id": purge_id or "unknown purge", "at": purged_at}
            )
    for run in out:
        run["note"] = purge_note(run["purge_id"], run["at"])
        run["text"] = f"unavailable: {run['note']}"
        run["label"] = range_label(run["from_seq"], run["to_seq"])
        run["at"] = run["at"].isoformat() if run["at"] else None
    return out


def seq_range(workflow: Workflow, from_seq: int, to_seq: int, highlight: str = "") -> dict[str, Any] | None:
    """A range of source events as the lineage shows it: bounds, count, link, purged parts."""
    if to_seq < from_seq:
        return None
    return {
        "from_seq": from_seq,
        "to_seq": to_seq,
        "count": to_seq - from_seq + 1,
        "label": range_label(from_seq, to_seq),
        "url": range_url(workflow, from_seq, to_seq, highlight),
        "unavailable": purged_runs(workflow, from_seq, to_seq),
    }
