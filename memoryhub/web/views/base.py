"""Base pages: home redirect, tenant switcher, and the tenant/workflow lookups every page uses.

The workflow list and workflow page live in memoryhub/web/views/dashboard.py (same URL names,
``memoryhub:workflow-list`` and ``memoryhub:workflow-detail``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import path
from django.views.decorators.http import require_POST

from memoryhub.models import Membership, Workflow
from memoryhub.web.tenancy_context import SESSION_KEY, resolve_tenant

if TYPE_CHECKING:
    from django.contrib.auth.models import User


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
        .defer("active_summary__content")
        .first()
    )
    if workflow is None:
        raise Http404("No such workflow in this tenant.")
    return workflow


@login_required
@require_POST
def switch_tenant(request: HttpRequest) -> HttpResponse:
    membership = Membership.objects.filter(
        user=cast("User", request.user), tenant__slug=request.POST.get("tenant", "")
    ).first()
    if membership is None:
        messages.error(request, "You are not a member of that tenant.")
    else:
        request.session[SESSION_KEY] = membership.tenant_id
        messages.success(request, f"Now working in {membership.tenant.name}.")
    return redirect("memoryhub:workflow-list")


def home(request: HttpRequest) -> HttpResponse:
    return redirect("memoryhub:overview" if request.user.is_authenticated else "login")


urlpatterns = [
    path("", home, name="home"),
    path("tenant/switch/", switch_tenant, name="switch-tenant"),
]
