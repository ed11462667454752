"""Retention and purge pages (admins change things; everyone in the tenant can read)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path

from audit.models import RecordClass
from audit.purge import parse_selector, purge_events, purges_of
from audit.retention import policy_rows, set_policies
from memoryhub.core.errors import DomainError
from memoryhub.models import Role, role_at_least
from memoryhub.web.actors import request_actor
from memoryhub.web.views.base import page_tenant, page_workflow

PURGES_SHOWN = 100


def _require_admin(role: str | None) -> None:
    if not role_at_least(role, Role.ADMIN):
        raise PermissionDenied("Only tenant admins can change retention or purge data.")


@login_required
def retention(request: HttpRequest) -> HttpResponse:
    tenant, role = page_tenant(request)
    if request.method == "POST":
        _require_admin(role)
        policies = {}
        for rc in RecordClass:
            raw = request.POST.get(rc.value, "").strip()
            policies[rc.value] = int(raw) if raw.isdigit() else None
        try:
            set_policies(tenant, policies, request_actor(request))
            messages.success(request, "Retention policies saved.")
            return redirect("memoryhub:retention")
        except DomainError as exc:
            messages.error(request, exc.detail)
    return render(
        request,
        "audit/retention.html",
        {
            "rows": policy_rows(tenant),
            "purges": purges_of(tenant)[:PURGES_SHOWN],
            "is_admin": role == Role.ADMIN,
        },
    )


@login_required
def purge_form(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    _, role = page_tenant(request)
    _require_admin(role)
    form = {"mode": "range", "seq_from": "", "seq_to": "", "seqs": "", "subject": "", "reason": ""}
    if request.method == "POST":
        form.update({k: request.POST.get(k, "").strip() for k in form})
        try:
            if form["mode"] == "range":
                data: dict[str, Any] = {"seq_from": _int(form["seq_from"]), "seq_to": _int(form["seq_to"])}
            elif form["mode"] == "seqs":
                data = {"seqs": [_int(s) for s in form["seqs"].replace(",", " ").split()]}
            else:
                data = {"subject": form["subject"]}
            outcome = purge_events(workflow, parse_selector(data), request_actor(request), form["reason"])
            messages.success(
                request,
                f"Purge {outcome.purge.purge_id}: {len(outcome.seqs)} events tombstoned, "
                f"{len(outcome.scrubbed)} summaries scrubbed, {len(outcome.quarantined)} quarantined.",
            )
            return redirect("memoryhub:workflow-detail", wf=workflow.external_id)
        except DomainError as exc:
            messages.error(request, exc.detail)
    return render(request, "audit/purge_form.html", {"workflow": workflow, "form": form})


def _int(raw: str) -> int | None:
    return int(raw) if raw.isdigit() else None


urlpatterns = [
    path("retention/", retention, name="retention"),
    path("workflows/<str:wf>/purge/", purge_form, name="workflow-purge"),
]
