"""Consumer-trace pages: one page per trace, and the trace and artifact lists across workflows.

URL names (namespace ``memoryhub``): trace-list, trace-detail, artifact-list. The artifact page
itself (lineage, investigations) is audit's ``artifact-detail``; the replay download is audit's
``trace-replay``. Both lists filter by agent, flag and time (``window`` or ``since``/``until``).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection
from django.db.models import Prefetch, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from django.views.decorators.http import require_GET

from audit.replay import get_trace, replay_bundle
from memoryhub.core.errors import NotFound
from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.models import Artifact, ConsumerTrace, Tenant
from memoryhub.models.traces import TraceFlag
from memoryhub.web.views.base import page_tenant

PER_PAGE = 50
WINDOWS = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
WINDOW_CHOICES = [
    ("", "any time"),
    ("1h", "last hour"),
    ("24h", "last 24 hours"),
    ("7d", "last 7 days"),
    ("30d", "last 30 days"),
]


def has_flag(flag: str, prefix: str = "") -> Q:
    """JSON-list membership: jsonb containment on PostgreSQL, a quoted substring elsewhere."""
    if connection.vendor == "postgresql":
        return Q(**{f"{prefix}flags__contains": [flag]})
    return Q(**{f"{prefix}flags__icontains": f'"{flag}"'})


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


def _time_range(filters: dict[str, Any], field: str) -> Q:
    q = Q()
    if filters["window"]:
        q &= Q(**{f"{field}__gte": timezone.now() - WINDOWS[filters["window"]]})
    if since := _when(filters["since"]):
        q &= Q(**{f"{field}__gte": since})
    if until := _when(filters["until"], end=True):
        q &= Q(**{f"{field}__lt": until})
    return q


def filtered_traces(tenant: Tenant, filters: dict[str, Any]) -> QuerySet[ConsumerTrace]:
    qs = ConsumerTrace.objects.filter(tenant=tenant).filter(_time_range(filters, "at"))
    if filters["agent"]:
        qs = qs.filter(agent=filters["agent"])
    if filters["flag"]:
        qs = qs.filter(has_flag(filters["flag"]))
    if filters["workflow"]:
        qs = qs.filter(workflow__external_id=filters["workflow"])
    return qs.select_related("workflow", "summary").defer("summary__content").order_by("-at", "-id")


def filtered_artifacts(tenant: Tenant, filters: dict[str, Any]) -> QuerySet[Artifact]:
    """Artifacts by when they were published; agent and flag match any of the traces that produced them."""
    qs = Artifact.objects.filter(tenant=tenant).filter(_time_range(filters, "at"))
    producers = Q()
    if filters["agent"]:
        producers &= Q(produced_by__agent=filters["agent"])
    if filters["flag"]:
        producers &= has_flag(filters["flag"], "produced_by__")
    if producers:
        qs = qs.filter(pk__in=Artifact.objects.filter(tenant=tenant).filter(producers).values("pk"))
    if filters["workflow"]:
        qs = qs.filter(workflow__external_id=filters["workflow"])
    traces = ConsumerTrace.objects.only("id", "agent", "model_call_id", "flags").order_by("at", "id")
    return (
        qs.select_related("workflow")
        .prefetch_related(Prefetch("produced_by", queryset=traces))
        .order_by("-at", "-id")
    )


def _agents(tenant: Tenant) -> list[str]:
    return list(
        ConsumerTrace.objects.filter(tenant=tenant)
        .values_list("agent", flat=True)
        .distinct()
        .order_by("agent")[:200]
    )


def _list_context(request: HttpRequest, qs: QuerySet, filters: dict[str, Any]) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    page = Paginator(qs, PER_PAGE).get_page(request.GET.get("page"))
    query = urlencode({k: v for k, v in filters.items() if v})
    return {
        "page": page,
        "filters": filters,
        "query": query,
        "agents": _agents(tenant),
        "flag_choices": TraceFlag.choices,
        "window_choices": WINDOW_CHOICES,
        "filtered": any(filters.values()),
    }


@login_required
@require_GET
def trace_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    filters = list_filters(request)
    ctx = _list_context(request, filtered_traces(tenant, filters), filters)
    return render(request, "memoryhub/trace_list.html", ctx)


@login_required
@require_GET
def artifact_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    filters = list_filters(request)
    ctx = _list_context(request, filtered_artifacts(tenant, filters), filters)
    return render(request, "memoryhub/artifact_list.html", ctx)


def event_link(workflow_id: str, seq: int) -> str:
    """The workflow page at the events page holding ``seq``, scrolled to it."""
    page = (seq - 1) // EVENTS_PER_PAGE + 1
    return f"/workflows/{workflow_id}/?{urlencode({'seq': seq, 'page': page})}#event-{seq}"


def trace_context(trace: ConsumerTrace) -> dict[str, Any]:
    workflow = trace.workflow
    summary = trace.summary
    watermark = summary.covers_to_seq if summary is not None else trace.summary_watermark
    bundle = replay_bundle(trace)
    tail_from = watermark + 1
    return {
        "trace": trace,
        "workflow": workflow,
        "summary": summary,
        "watermark": watermark,
        "watermark_url": event_link(workflow.external_id, watermark) if watermark else "",
        "tail_from": tail_from,
        "tail_url": (f"/workflows/{workflow.external_id}/events/{tail_from}-{trace.tail_to_seq}/")
        if trace.tail_to_seq >= tail_from
        else "",
        "artifacts": list(trace.artifacts.order_by("at", "id")),
        "flag_labels": dict(TraceFlag.choices),
        "bundle_json": json.dumps(bundle, cls=DjangoJSONEncoder, indent=2, ensure_ascii=False),
        "bundle_unavailable": bundle.get("unavailable") or [],
    }


@login_required
@require_GET
def trace_detail(request: HttpRequest, trace_id: int) -> HttpResponse:
    tenant, _ = page_tenant(request)
    try:
        trace = get_trace(tenant, trace_id)
    except NotFound as exc:
        raise Http404(exc.detail)
    return render(request, "memoryhub/trace_detail.html", trace_context(trace))


urlpatterns = [
    path("traces/", trace_list, name="trace-list"),
    path("traces/<int:trace_id>/", trace_detail, name="trace-detail"),
    path("artifacts/", artifact_list, name="artifact-list"),
]
