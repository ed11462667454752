"""Base pages: login/logout, tenant switcher, workflow list and workflow detail with its timeline."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_POST

from memoryhub.models import Membership, Workflow
from memoryhub.tenancy_context import SESSION_KEY, resolve_tenant

EVENTS_PER_PAGE = 50
WORKFLOWS_PER_PAGE = 25


def page_tenant(request: HttpRequest):
    """The tenant a logged-in page acts in; 404 for users with no membership."""
    tenant, role = resolve_tenant(request)
    if tenant is None:
        raise Http404("You are not a member of any tenant.")
    return tenant, role


def page_workflow(request: HttpRequest, external_id: str) -> Workflow:
    tenant, _ = page_tenant(request)
    workflow = (
        Workflow.objects.filter(tenant=tenant, external_id=external_id)
        .select_related("active_summary")
        .first()
    )
    if workflow is None:
        raise Http404("No such workflow in this tenant.")
    return workflow


@login_required
@require_POST
def switch_tenant(request: HttpRequest) -> HttpResponse:
    membership = Membership.objects.filter(
        user=request.user, tenant__slug=request.POST.get("tenant", "")
    ).first()
    if membership is None:
        messages.error(request, "You are not a member of that tenant.")
    else:
        request.session[SESSION_KEY] = membership.tenant_id
        messages.success(request, f"Now working in {membership.tenant.name}.")
    return redirect("memoryhub:workflow-list")


@login_required
def workflow_list(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    q = request.GET.get("q", "").strip()
    workflows = (
        Workflow.objects.filter(tenant=tenant).select_related("active_summary").order_by("-updated_at", "-id")
    )
    if q:
        workflows = workflows.filter(Q(external_id__icontains=q) | Q(name__icontains=q))
    page = Paginator(workflows, WORKFLOWS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "memoryhub/workflow_list.html", {"page": page, "q": q})


@login_required
def workflow_detail(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    events = workflow.events.select_related("purge").order_by("seq")
    page = Paginator(events, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
    summaries = workflow.summaries.order_by("-version")[:50]
    lifecycle = workflow.lifecycle_events.select_related("summary", "prior_active_summary").order_by(
        "-at", "-id"
    )[:50]
    return render(
        request,
        "memoryhub/workflow_detail.html",
        {"workflow": workflow, "page": page, "summaries": summaries, "lifecycle": lifecycle},
    )


def home(request: HttpRequest) -> HttpResponse:
    return redirect("memoryhub:workflow-list" if request.user.is_authenticated else "login")


urlpatterns = [
    path("", home, name="home"),
    path("tenant/switch/", switch_tenant, name="switch-tenant"),
    path("workflows/", workflow_list, name="workflow-list"),
    path("workflows/<str:wf>/", workflow_detail, name="workflow-detail"),
]
