"""The workflow browser: a tenant's workflows narrowed by filters (including the overview's
signals, ``has=<key>``) and paged by keyset — the cursor is the last row's sort key and id, so
any page costs two queries and never an OFFSET."""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from memoryhub.memory import lifecycle
from memoryhub.models import Summary, Tenant, Workflow
from memoryhub.observe.reports import SIGNALS, WINDOWS

WORKFLOWS_PER_PAGE = 25


@dataclass(frozen=True)
class Sort:
    field: str
    label: str
    descending: bool = True
    datetime: bool = False


SORTS = {
    "recent": Sort("updated_at", "Recently updated", datetime=True),
    "tail_tokens": Sort("tail_tokens", "Tail tokens"),
    "tail_events": Sort("tail_events", "Events behind head"),
    "head": Sort("head_seq", "Longest history"),
    # Oldest activation first; only workflows that have an active summary.
    "age": Sort("activated_at", "Oldest active summary", descending=False, datetime=True),
}
DEFAULT_SORT = "recent"


def encode_cursor(value: Any, pk: int, page: int, direction: str) -> str:
    raw = json.dumps([value.isoformat() if isinstance(value, datetime) else value, pk, page, direction])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(token: str, sort: Sort) -> tuple[Any, int, int, str] | None:
    """(sort value, id, page number, direction) from a cursor, or None if it is not one of ours."""
    try:
        value, pk, page, direction = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        value = datetime.fromisoformat(value) if sort.datetime else value
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        return None
    if (
        not isinstance(value, datetime if sort.datetime else int)
        or not isinstance(pk, int)
        or not isinstance(page, int)
        or direction not in ("next", "prev")
    ):
        return None
    return value, pk, max(page, 1), direction


def filtered_workflows(tenant: Tenant, filters: dict[str, Any], now: datetime) -> QuerySet[Workflow]:
    """The tenant's workflows narrowed by validated filters (the workflow list form's fields)."""
    qs = Workflow.objects.filter(tenant=tenant)
    if q := (filters.get("q") or "").strip():
        qs = qs.filter(Q(external_id__icontains=q) | Q(name__icontains=q))
    if filters.get("source"):
        qs = qs.filter(source=filters["source"])
    status = filters.get("status")
    if status == "active":
        qs = qs.filter(active_summary__isnull=False)
    elif status == "none":
        qs = qs.filter(active_summary__isnull=True)
    elif status:
        qs = qs.filter(Exists(Summary.objects.filter(workflow=OuterRef("pk"), status=status)))
    if filters.get("min_tail_events") is not None:
        qs = qs.filter(tail_events__gte=filters["min_tail_events"])
    if filters.get("min_tail_tokens") is not None:
        qs = qs.filter(tail_tokens__gte=filters["min_tail_tokens"])
    since, until = filters.get("since"), filters.get("until")
    if filters.get("window") and since is None:
        # The overview's count over this window drills down to these: same start, ending now.
        since, until = WINDOWS[filters["window"]].since(now), until or now
    for key in filters.get("has") or ():
        qs = qs.filter(SIGNALS[key].exists_for_workflow(since, until))
    if filters.get("sort") == "age":
        qs = qs.filter(active_summary__isnull=False, activated_at__isnull=False)
    return qs


def _count_of(qs: QuerySet) -> Coalesce:
    return Coalesce(Subquery(qs.order_by().values("workflow").annotate(c=Count("pk")).values("c")[:1]), 0)


def annotate_rows(qs: QuerySet[Workflow]) -> QuerySet[Workflow]:
    """Per-row numbers for the list, as correlated subqueries (one query for the whole page)."""
    latest = Summary.objects.filter(workflow=OuterRef("pk")).order_by("-version")
    return (
        qs.select_related("active_summary")
        .defer("active_summary__content")
        .annotate(
            stale_attempts=_count_of(SIGNALS["stale"].rows.of_workflow(OuterRef("pk"))),
            unvalidated_reads=_count_of(SIGNALS["unvalidated"].rows.of_workflow(OuterRef("pk"))),
            latest_version=Subquery(latest.values("version")[:1]),
            latest_status=Subquery(latest.values("status")[:1]),
        )
    )


def mark_awaiting_approval(workflows: list[Workflow]) -> None:
    """Set ``awaiting_versions`` (the versions waiting for an approval) on each row, in one query."""
    if not workflows:
        return
    waiting: dict[int, list[int]] = {}
    rows = (
        lifecycle.awaiting_approval(workflows[0].tenant_id)
        .filter(workflow_id__in=[w.pk for w in workflows])
        .order_by("version")
        .values_list("workflow_id", "version")
    )
    for workflow_id, version in rows:
        waiting.setdefault(workflow_id, []).append(version)
    for wf in workflows:
        wf.awaiting_versions = waiting.get(wf.pk, [])  # type: ignore[attr-defined]


@dataclass
class WorkflowPage:
    rows: list[Workflow]
    number: int
    num_pages: int
    total: int
    next_cursor: str | None
    prev_cursor: str | None


def _keyset(
    qs: QuerySet[Workflow], sort: Sort, after: tuple[Any, int] | None, forward: bool
) -> list[Workflow]:
    """Up to one page + 1 rows past ``after`` (sort value, id), in display order."""
    f = sort.field
    downwards = sort.descending == forward  # walking towards smaller sort values
    if after is not None:
        value, pk = after
        op = "lt" if downwards else "gt"
        qs = qs.filter(Q(**{f"{f}__{op}": value}) | Q(**{f: value, f"id__{op}": pk}))
    order = (f"-{f}", "-id") if downwards else (f, "id")
    rows = list(annotate_rows(qs).order_by(*order)[: WORKFLOWS_PER_PAGE + 1])
    mark_awaiting_approval(rows)
    return rows if forward else rows[:WORKFLOWS_PER_PAGE][::-1] + rows[WORKFLOWS_PER_PAGE:]


def workflow_page(qs: QuerySet[Workflow], sort_key: str, cursor: str | None) -> WorkflowPage:
    """One page by keyset on (sort key, id) — never OFFSET; two queries whatever the page."""
    sort = SORTS[sort_key]
    total = qs.count()
    decoded = decode_cursor(cursor, sort) if cursor else None
    if decoded is None:
        page_no, forward = 1, True
        rows = _keyset(qs, sort, None, True)
    else:
        value, pk, page_no, direction = decoded
        forward = direction == "next"
        rows = _keyset(qs, sort, (value, pk), forward)
    more = len(rows) > WORKFLOWS_PER_PAGE  # another page beyond, in the direction walked
    rows = rows[:WORKFLOWS_PER_PAGE]
    num_pages = max(1, math.ceil(total / WORKFLOWS_PER_PAGE))
    has_next = more if forward else bool(rows)
    has_prev = (page_no > 1) if forward else more
    page_no = page_no if forward or more else 1  # walked back to the start
    next_cursor = prev_cursor = None
    if rows and has_next:
        last = rows[-1]
        next_cursor = encode_cursor(getattr(last, sort.field), last.pk, page_no + 1, "next")
    if rows and has_prev:
        first = rows[0]
        prev_cursor = encode_cursor(getattr(first, sort.field), first.pk, page_no - 1, "prev")
    return WorkflowPage(rows, page_no, max(num_pages, page_no), total, next_cursor, prev_cursor)
