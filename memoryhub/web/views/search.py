"""The nav search box and a workflow's filterable event timeline (reports: memoryhub.observe.search).

An exact single search hit redirects to its page. Free text searches the events of every workflow
of the tenant (``?scope=tenant``, the default) or of one (``?workflow=<id>``; ``scope=workflow``),
a page at a time (``?page=2``). ``/workflows/<wf>/timeline/?seq=137`` opens the
timeline at row 137 and highlights it.

URL names (namespace ``memoryhub``): search, workflow-timeline.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.template import loader
from django.urls import path
from django.views.decorators.http import require_GET

from memoryhub.models.workflows import EventKind
from memoryhub.observe import search as report
from memoryhub.web.views.base import page_tenant, page_workflow

QUERY_CHARS = 300
AGENT_CHARS = 100
WORKFLOW_CHARS = 200  # Workflow.external_id's max_length


@login_required
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    q = request.GET.get("q", "").strip()[:QUERY_CHARS]
    wf_id = request.GET.get("workflow", "").strip()[:WORKFLOW_CHARS]
    scope = request.GET.get("scope", "")
    page = _page(request.GET.get("page"))
    if scope not in ("", *report.SCOPES) or page is None:
        detail = f"page is a number from 1 to {report.MAX_EVENT_PAGE}; scope is tenant or workflow"
        return HttpResponseBadRequest(loader.render_to_string("400.html", {"detail": detail}, request))
    found = report.search(tenant, q, wf_id, scope=scope, page=page)
    if found.only_exact is not None and request.GET.get("all") != "1" and page == 1:
        return redirect(found.only_exact.url)
    base = {"q": q, "all": "1", "scope": found.scope, **({"workflow": wf_id} if wf_id else {})}
    return render(
        request,
        "memoryhub/search.html",
        {
            "search_query": q,
            "q": q,
            "hits": found.hits if page == 1 else [],
            "events": found.events,
            "search_workflow": found.workflow,
            "workflow_id": wf_id,
            "scope": found.scope,
            "page": found.page,
            "engine": found.engine,
            "prev_url": "?" + urlencode({**base, "page": page - 1}) if page > 1 else "",
            "next_url": "?" + urlencode({**base, "page": page + 1})
            if found.has_next and page < report.MAX_EVENT_PAGE
            else "",
        },
    )


def _page(raw: str | None) -> int | None:
    """``?page=``: 1 when absent, None (a 400) when not a number from 1 to MAX_EVENT_PAGE."""
    if not raw:
        return 1
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 4 or not 1 <= int(raw) <= report.MAX_EVENT_PAGE:
        return None
    return int(raw)


def _seq(raw: str | None) -> int:
    try:
        return max(0, int(raw or 0))
    except ValueError:
        return 0


@login_required
@require_GET
def workflow_timeline(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    kind = request.GET.get("kind", "")
    filters = {
        "kind": kind if kind in EventKind.values else "",
        "agent": request.GET.get("agent", "").strip()[:AGENT_CHARS],
        "q": request.GET.get("q", "").strip()[:QUERY_CHARS],
    }
    page = report.timeline(
        workflow, **filters, seq=_seq(request.GET.get("seq")), from_seq=_seq(request.GET.get("from"))
    )
    return render(
        request,
        "memoryhub/workflow_timeline.html",
        {
            "workflow": workflow,
            "events": page.events,
            "filters": filters,
            "filtered": any(filters.values()),
            "kinds": EventKind.values,
            "agents": page.agents,
            "target_seq": page.target_seq,
            "start": page.start,
            "watermark": page.watermark,
            "next_url": page.next_url,
            "first_url": page.first_url,
        },
    )


urlpatterns = [
    path("search/", search, name="search"),
    path("workflows/<str:wf>/timeline/", workflow_timeline, name="workflow-timeline"),
]
