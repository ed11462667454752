"""Trigger pages: the policy form (tenant default and per-workflow), the decision log and the
what-if simulator with its Plotly chart. Thin: all rules are in triggers.services/engine."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path

from memoryhub.actors import Actor
from memoryhub.errors import Forbidden, InvalidInput
from memoryhub.models import Role, Workflow, role_at_least
from memoryhub.views.base import page_tenant, page_workflow
from triggers import services
from triggers.engine import export_langchain, export_langmem
from triggers.figures import simulation_figure
from triggers.forms import PolicyForm

DECISIONS_PER_PAGE = 50


def _policy_page(request: HttpRequest, *, workflow: Workflow | None) -> HttpResponse:
    tenant, role = page_tenant(request)
    needed = Role.REVIEWER if workflow is not None else Role.ADMIN
    can_edit = role_at_least(role, needed)
    spec, source, row = services.effective_policy(tenant, workflow)
    form = PolicyForm(initial=PolicyForm.initial_from(spec))
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied(f"Changing this policy needs the {needed} role.")
        actor = Actor.from_request(request)
        if request.POST.get("action") == "reset":
            try:
                services.delete_policy(tenant, actor, workflow=workflow, role=role)
            except Forbidden as exc:
                raise PermissionDenied(exc.detail)
            messages.success(request, "Override removed; the next level's policy applies again.")
            return redirect(request.path)
        form = PolicyForm(request.POST)
        if form.is_valid():
            try:
                services.save_policy(tenant, form.to_policy(), actor, workflow=workflow, role=role)
            except InvalidInput as exc:
                form.add_policy_errors(exc)
            except Forbidden as exc:
                form.add_error("require_approval", exc.detail)
            else:
                messages.success(request, "Policy saved.")
                return redirect(request.path)
    decisions = services.decisions_for(workflow)[:10] if workflow is not None else []
    context: dict[str, Any] = {
        "workflow": workflow,
        "form": form,
        "spec": spec,
        "source": source,
        "row": row,
        "can_edit": can_edit,
        "readonly": not can_edit,
        "needed_role": needed,
        "langmem": export_langmem(spec),
        "langchain": export_langchain(spec),
        "decisions": [services.decision_payload(d) for d in decisions],
    }
    return render(request, "triggers/policy.html", context)


@login_required
def tenant_policy(request: HttpRequest) -> HttpResponse:
    return _policy_page(request, workflow=None)


@login_required
def workflow_policy(request: HttpRequest, wf: str) -> HttpResponse:
    return _policy_page(request, workflow=page_workflow(request, wf))


@login_required
def decision_log(request: HttpRequest, wf: str) -> HttpResponse:
    workflow = page_workflow(request, wf)
    qs = services.decisions_for(workflow)
    action = request.GET.get("action", "")
    if action:
        qs = qs.filter(action=action)
    page = Paginator(qs, DECISIONS_PER_PAGE).get_page(request.GET.get("page"))
    rows = [services.decision_payload(d) for d in page]
    return render(
        request,
        "triggers/decisions.html",
        {"workflow": workflow, "page": page, "rows": rows, "action": action},
    )


@login_required
def simulator(request: HttpRequest) -> HttpResponse:
    """Pick a workflow, edit a candidate policy, see both replays side by side."""
    tenant, _ = page_tenant(request)
    workflows = list(
        Workflow.objects.filter(tenant=tenant)
        .order_by("-updated_at", "-id")
        .values_list("external_id", flat=True)[:200]
    )
    wf_id = request.POST.get("workflow") or request.GET.get("workflow") or (workflows[0] if workflows else "")
    context: dict[str, Any] = {"workflows": workflows, "selected": wf_id, "group": "auto"}
    if not wf_id:
        return render(request, "triggers/simulator.html", context)
    workflow = page_workflow(request, wf_id)
    current, source, _ = services.effective_policy(tenant, workflow)
    group = request.POST.get("group") or request.GET.get("group") or "auto"
    body: dict[str, Any] = {"group": group}
    form = PolicyForm(initial=PolicyForm.initial_from(current))
    if request.method == "POST":
        form = PolicyForm(request.POST)
        if form.is_valid():
            body["candidate"] = form.to_policy()
        ratio = request.POST.get("compaction_ratio", "").strip()
        if ratio:
            try:
                body["compaction_ratio"] = float(ratio)
            except ValueError:
                form.add_error(None, "compaction ratio must be a number between 0 and 1")
    result = None
    if not form.errors:
        try:
            result = services.simulate_workflow(workflow, body)
        except InvalidInput as exc:
            if exc.extra.get("errors"):
                form.add_policy_errors(exc)
            else:
                form.add_error(None, exc.detail)
    context.update(
        {
            "workflow": workflow,
            "form": form,
            "current": current,
            "source": source,
            "group": group,
            "ratio": request.POST.get("compaction_ratio", ""),
            "result": result,
            "figure_json": json.dumps(simulation_figure(result)) if result else "",
            "count_rows": _count_rows(result) if result else [],
        }
    )
    return render(request, "triggers/simulator.html", context)


COUNT_LABELS = (
    ("steps", "steps replayed"),
    ("compactions", "compactions"),
    ("overflow_incidents", "overflow incidents (continued past the hard limit)"),
    ("fallback_retrievals", "retrieve_or_block answers"),
    ("over_budget_steps", "calls over the safe budget"),
    ("baseline_replay_tokens", "tokens replayed without compaction"),
    ("replay_tokens", "tokens replayed"),
    ("compaction_cost_tokens", "compaction cost (tokens)"),
    ("net_tokens_saved", "net tokens saved"),
)


def _count_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    cur, cand = result["current"]["counts"], result["candidate"]["counts"]
    return [
        {
            "key": key,
            "label": label,
            "current": cur[key],
            "candidate": cand[key],
            "delta": cand[key] - cur[key],
        }
        for key, label in COUNT_LABELS
    ]


urlpatterns = [
    path("triggers/policy/", tenant_policy, name="triggers-tenant-policy"),
    path("triggers/simulator/", simulator, name="triggers-simulator"),
    path("triggers/workflows/<str:wf>/policy/", workflow_policy, name="triggers-workflow-policy"),
    path("triggers/workflows/<str:wf>/decisions/", decision_log, name="triggers-decisions"),
]
