"""Dashboard pages: tenant overview, workflow browser, workflow page, summary page.

Each view parses the request (window, filters, page), reads a report from memoryhub.observe
(``reports`` for the overview, ``browse`` for the workflow list, ``detail`` for the workflow and
summary pages) and renders it; charts are composed by memoryhub.web.views.charts. Every page has
fragment endpoints that static/memoryhub/app.js polls (slower when the tab is hidden) so numbers
refresh without a reload.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path
from django.utils import timezone

from memoryhub.memory import lifecycle, repair
from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.models import SummaryStatus, WorkflowSource
from memoryhub.models.workflows import EventKind
from memoryhub.observe import browse, detail, figures, framework
from memoryhub.observe.alerting.firing import firing
from memoryhub.observe.reports import (
    SIGNALS,
    WINDOWS,
    overview_charts,
    overview_numbers,
    overview_series,
    window_for,
    workflow_state,
)
from memoryhub.web.api.fields import SafeDateTimeField
from memoryhub.web.views.base import page_tenant, page_workflow
from memoryhub.web.views.charts import history_figure, overview_figures
from triggers.policy import effective_policy, tenant_safe_budget

# --------------------------------------------------------------------------------------------
# Overview
# --------------------------------------------------------------------------------------------


def _overview_context(request: HttpRequest) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    return {
        "tenant": tenant,
        "window": window_for(request.GET.get("window")),
        "windows": list(WINDOWS.values()),
        "now": timezone.now(),
    }


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    tenant, window, now = ctx["tenant"], ctx["window"], ctx["now"]
    budget = tenant_safe_budget(tenant)
    series, workflows = overview_series(tenant, window, now), workflow_state(tenant, budget, now)
    ctx.update(vars(overview_numbers(tenant, window, now, budget, series, workflows)))
    ctx["inbox_total"] = ctx["review"]["total"]  # the nav's badge: counted once per page
    ctx["charts"] = overview_figures(
        overview_charts(tenant, window, now, series, workflows), window, now, budget
    )
    ctx["firing"] = firing(tenant, now)
    ctx["needs_plotly"] = True
    return render(request, "memoryhub/overview.html", ctx)


@login_required
def overview_numbers_fragment(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    tenant, window, now = ctx["tenant"], ctx["window"], ctx["now"]
    ctx.update(vars(overview_numbers(tenant, window, now, tenant_safe_budget(tenant))))
    return render(request, "memoryhub/partials/overview_numbers.html", ctx)


@login_required
def overview_charts_fragment(request: HttpRequest) -> HttpResponse:
    ctx = _overview_context(request)
    tenant, window, now = ctx["tenant"], ctx["window"], ctx["now"]
    budget = tenant_safe_budget(tenant)
    ctx["charts"] = overview_figures(overview_charts(tenant, window, now), window, now, budget)
    return render(request, "memoryhub/partials/overview_charts.html", ctx)


# --------------------------------------------------------------------------------------------
# Workflow browser
# --------------------------------------------------------------------------------------------

STATUS_CHOICES = [
    ("", "Any"),
    ("active", "Has an active summary"),
    ("none", "No active summary"),
    *[(s.value, f"Has a {s.value} summary") for s in SummaryStatus if s != SummaryStatus.ACTIVE],
]


class WorkflowFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200, label="Search")
    status = forms.ChoiceField(required=False, choices=STATUS_CHOICES, label="Summary status")
    source = forms.ChoiceField(required=False, choices=[("", "Any"), *WorkflowSource.choices], label="Source")
    min_tail_events = forms.IntegerField(required=False, min_value=0, label="Tail ≥ events")
    min_tail_tokens = forms.IntegerField(required=False, min_value=0, label="Tail ≥ tokens")
    has = forms.MultipleChoiceField(
        required=False, choices=[(s.key, s.title) for s in SIGNALS.values()], label="With"
    )
    window = forms.ChoiceField(
        required=False, choices=[("", "any time")] + [(w.key, w.label) for w in WINDOWS.values()], label="In"
    )
    since = SafeDateTimeField(required=False)
    until = SafeDateTimeField(required=False)
    sort = forms.ChoiceField(required=False, choices=[(k, v.label) for k, v in browse.SORTS.items()])


def _query_without(request: HttpRequest, *drop: str, **extra: str) -> str:
    params = request.GET.copy()
    for key in (*drop, *extra):
        params.pop(key, None)
    for key, value in extra.items():
        params[key] = value
    return params.urlencode()


def _workflow_list_context(request: HttpRequest) -> dict[str, Any]:
    tenant, _ = page_tenant(request)
    form = WorkflowFilterForm(request.GET or None)
    data: dict[str, Any] = {}
    if form.is_bound:
        form.is_valid()  # invalid fields drop out of cleaned_data; the page shows their errors
        data = form.cleaned_data
    sort = data.get("sort") or browse.DEFAULT_SORT
    workflows = browse.filtered_workflows(tenant, data, timezone.now())
    page = browse.workflow_page(workflows, sort, request.GET.get("cursor"))
    return {
        "form": form,
        "page": page,
        "sort": sort,
        "sorts": [(k, v.label) for k, v in browse.SORTS.items()],
        "filtered": any(data.get(k) not in (None, "", []) for k in data if k not in ("sort",)),
        "q": data.get("q", ""),
        "next_query": _query_without(request, "fragment", cursor=page.next_cursor)
        if page.next_cursor
        else "",
        "prev_query": _query_without(request, "fragment", cursor=page.prev_cursor)
        if page.prev_cursor
        else "",
        "fragment_query": _query_without(request, fragment="table"),
        "drill": {
            "since": data.get("since"),
            "until": data.get("until"),
            "has": data.get("has") or [],
            "titles": [SIGNALS[k].title.lower() for k in data.get("has") or []],
        },
    }


@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    ctx = _workflow_list_context(request)
    if request.GET.get("fragment") == "table":
        return render(request, "memoryhub/partials/workflow_table.html", ctx)
    return render(request, "memoryhub/workflow_list.html", ctx)


# --------------------------------------------------------------------------------------------
# Workflow page
# --------------------------------------------------------------------------------------------


def _int(raw: str | None, default: int) -> int:
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        return default


@login_required
def workflow_detail(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    spec, policy_source, _ = effective_policy(workflow.tenant_id, workflow)
    numbers = asdict(detail.workflow_numbers(workflow, spec, timezone.now()))
    compacted_by = framework.framework_compaction(workflow)  # None: MemoryHub's policy compacts it
    if request.GET.get("fragment") == "stats":
        return render(
            request,
            "memoryhub/partials/workflow_stats.html",
            {"workflow": workflow, "spec": spec, "framework": compacted_by, **numbers},
        )
    page_no = _int(request.GET.get("page"), 1)
    if seq := _int(request.GET.get("seq"), 0):
        page_no = detail.page_of_seq(seq)
    report = detail.workflow_report(workflow)
    curve = history_figure(report.history, spec, compacted_by)
    repairs = repair.workflow_handbacks(workflow)
    verdicts = {r["summary"].pk: (r["repair"] or {}).get("verdict") for r in repairs}
    for s in report.summaries:
        s.repair_verdict = verdicts.get(s.pk)  # type: ignore[attr-defined]  # shown beside its status
    return render(
        request,
        "memoryhub/workflow_detail.html",
        {
            "workflow": workflow,
            "spec": spec,
            "policy_source": policy_source,
            "framework": compacted_by,
            **numbers,
            "needs_plotly": True,
            "curve_json": figures.to_json(curve),
            "curve_points": figures.point_count(curve),
            "summaries": report.summaries,
            "awaiting": report.awaiting,
            "lifecycle": report.lifecycle,
            "results": report.results,
            "stale_attempts": report.stale_attempts,
            "traces": report.traces,
            "artifacts": report.artifacts,
            "jobs": report.jobs,
            "page": detail.event_page(workflow, page_no),
            "event_kinds": EventKind.values,
            "watermark": report.watermark,
            "repairs": repairs,
        },
    )


# --------------------------------------------------------------------------------------------
# Summary page
# --------------------------------------------------------------------------------------------

DIFF_TEMPLATE = "audit/partials/diff.html"


@login_required
def summary_detail(request: HttpRequest, summary_id: str) -> HttpResponse:
    tenant, role = page_tenant(request)
    summary = detail.find_summary(tenant, summary_id)
    if summary is None:
        raise Http404("No such summary in this tenant.")
    workflow = summary.workflow
    if request.GET.get("fragment") == "status":
        return render(
            request,
            "memoryhub/partials/summary_status.html",
            {
                "summary": summary,
                "workflow": workflow,
                "awaiting_approval": detail.awaiting_approval(summary),
            },
        )
    report = detail.summary_report(summary, role)
    return render(
        request,
        "memoryhub/summary_detail.html",
        {
            "summary": summary,
            "workflow": workflow,
            **vars(report),
            "text_limits": lifecycle.TEXT_LIMITS,
            "diff_template": DIFF_TEMPLATE if report.diff is not None else None,
            "role": role,
            "events_per_page": EVENTS_PER_PAGE,
            "handback": repair.recorded_handback(summary),
        },
    )


urlpatterns = [
    path("overview/", overview, name="overview"),
    path("overview/numbers/", overview_numbers_fragment, name="overview-numbers"),
    path("overview/charts/", overview_charts_fragment, name="overview-charts"),
    path("workflows/", workflow_list, name="workflow-list"),
    path("workflows/<str:wf>/", workflow_detail, name="workflow-detail"),
    path("summaries/<str:summary_id>/", summary_detail, name="summary-detail"),
]
