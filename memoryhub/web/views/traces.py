"""Consumer-trace pages: one page per trace, and the trace and artifact lists across workflows.

URL names (namespace ``memoryhub``): trace-list, trace-detail, artifact-list. The artifact page
itself (lineage, investigations) is audit's ``artifact-detail``; the replay download is audit's
``trace-replay``. Both lists filter by agent, flag and time (``window`` or ``since``/``until``);
the queries are memoryhub.observe.reports'.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.views.decorators.http import require_GET

from audit.replay import get_trace
from memoryhub.core.errors import NotFound
from memoryhub.models.traces import TraceFlag
from memoryhub.observe.detail import page_of_seq
from memoryhub.observe.reports import (
    WINDOWS,
    TraceFilters,
    filtered_artifacts,
    filtered_traces,
    trace_agents,
    trace_report,
)
from memoryhub.web.views.base import page_tenant

PER_PAGE = 50
WINDOW_CHOICES = [("", "any time"), *[(w.key, w.label) for w in WINDOWS.values()]]


def _when(raw: str, *, end: bool = False) -> datetime | None:
    """An ISO datetime or date from a query string (a bare date means that whole day); None if unreadable."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        value = parse_datetime(raw)
    except ValueError:
        value = None
    if value is None:
        try:
            day = parse_date(raw)
        except ValueError:
            return None
        if day is None:
            return None
        value = datetime.combine(day, datetime.min.time()) + (timedelta(days=1) if end else timedelta())
    if timezone.is_naive(value):
        value = timezone.make_aware(value, timezone.get_current_timezone())
    return value


def list_filters(request: HttpRequest) -> dict[str, Any]:
    """The filters both lists understand, cleaned (unknown flags and windows are dropped, not errors)."""
    flag = request.GET.get("flag", "")
    window = request.GET.get("window", "")
    return {
        "agent": request.GET.get("agent", "").strip()[:100],
        "flag": flag if flag in TraceFlag.values else "",
        "window": window if window in WINDOWS else "",
        "since": request.GET.get("since", "").strip()[:40],
        "until": request.GET.get("until", "").strip()[:40],
        "workflow": request.GET.get("workflow", "").strip()[:300],
    }


def _trace_filters(filters: dict[str, Any]) -> TraceFilters:
    window = WINDOWS.get(filters["window"])
    return TraceFilters(
        agent=filters["agent"],
        flag=filters["flag"],
        workflow=filters["workflow"],
        window_start=window.since(timezone.now()) if window else None,
        since=_when(filters["since"]),
        until=_when(filters["until"], end=True),
    )


def _list_context(request: HttpRequest, qs: QuerySet, filters: dict[str, Any]) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    return {
        "page": Paginator(qs, PER_PAGE).get_page(request.GET.get("page")),
        "filters": filters,
        "query": urlencode({k: v for k, v in filters.items() if v}),
        "agents": trace_agents(tenant),
        "flag_choices": TraceFlag.choices,
        "window_choices": WINDOW_CHOICES,
        "filtered": any(filters.values()),
    }


@login_required
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    filters = list_filters(request)
    ctx = _list_context(request, filtered_traces(tenant, _trace_filters(filters)), filters)
    return render(request, "memoryhub/trace_list.html", ctx)


@login_required
@require_GET
def artifact_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    filters = list_filters(request)
    ctx = _list_context(request, filtered_artifacts(tenant, _trace_filters(filters)), filters)
    return render(request, "memoryhub/artifact_list.html", ctx)


def event_link(workflow_id: str, seq: int) -> str:
    """The workflow page at the events page holding ``seq``, scrolled to it."""
    return f"/workflows/{workflow_id}/?{urlencode({'seq': seq, 'page': page_of_seq(seq)})}#event-{seq}"


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: int) -> HttpResponse:
    tenant, _ = page_tenant(request)
    try:
        trace = get_trace(tenant, trace_id)
    except NotFound as exc:
        raise Http404(exc.detail)
    report = trace_report(trace)
    workflow, watermark, tail_from = trace.workflow, report.watermark, report.tail_from
    return render(
        request,
        "memoryhub/trace_detail.html",
        {
            "trace": trace,
            "workflow": workflow,
            "summary": trace.summary,
            "watermark": watermark,
            "watermark_url": event_link(workflow.external_id, watermark) if watermark else "",
            "tail_from": tail_from,
            "tail_url": f"/workflows/{workflow.external_id}/events/{tail_from}-{trace.tail_to_seq}/"
            if trace.tail_to_seq >= tail_from
            else "",
            "served": report.served_summary,
            "tail": [(e, event_link(workflow.external_id, e.seq)) for e in report.tail],
            "tail_count": report.tail_count,
            "tail_more": report.tail_count - len(report.tail),
            "call_messages": report.messages,
            "artifacts": report.artifacts,
            "flag_labels": dict(TraceFlag.choices),
            "bundle_json": json.dumps(report.bundle, cls=DjangoJSONEncoder, indent=2, ensure_ascii=False),
            "bundle_unavailable": report.bundle.get("unavailable") or [],
        },
    )


urlpatterns = [
    path("traces/", trace_list, name="trace-list"),
    path("traces/<int:trace_id>/", trace_detail, name="trace-detail"),
    path("artifacts/", artifact_list, name="artifact-list"),
]
