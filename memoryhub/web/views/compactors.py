"""Compactor pages: the compactors that produced a tenant's summaries, and one compactor's
versions, acceptance and losses (memoryhub.observe.compactors computes them).

URL names (namespace ``memoryhub``): compactor-list, compactor-detail (``?version=`` narrows the
page to one compactor version).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.views.decorators.http import require_GET

from memoryhub.models import SummaryStatus
from memoryhub.observe.compactors import compactor_known, compactor_names, compactor_report, rows_of_page
from memoryhub.web.views.base import page_tenant

PER_PAGE = 50


@login_required
@require_GET
def compactor_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    return render(request, "memoryhub/compactor_list.html", {"compactors": compactor_names(tenant)})


@login_required
@require_GET
def compactor_detail(request: HttpRequest, compactor: str) -> HttpResponse:
    tenant, _ = page_tenant(request)
    if not compactor_known(tenant, compactor):
        raise Http404("No compactor of this name produced a summary or ran a compaction here.")
    version = request.GET.get("version", "").strip()[:50]
    report = compactor_report(tenant, compactor, version)
    page = Paginator(report.summaries, PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "memoryhub/compactor_detail.html",
        {
            "report": report,
            "page": page,
            "rows": rows_of_page(report, page),
            "query": urlencode({"version": version}) if version else "",
            "statuses": [(s, report.status_counts.get(s, 0)) for s in SummaryStatus.values],
        },
    )


urlpatterns = [
    path("compactors/", compactor_list, name="compactor-list"),
    # path: a framework's compactor name is whatever it reports, "/" included.
    path("compactors/<path:compactor>/", compactor_detail, name="compactor-detail"),
]
