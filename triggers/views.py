"""Trigger pages: the policy form (tenant default and per-workflow), the decision log and the
what-if simulator with its Plotly chart. Thin: all rules are in triggers.services/engine."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from memoryhub.core.errors import Forbidden, InvalidInput
from memoryhub.memory.observed import threshold_in_force
from memoryhub.models import Role, Workflow, role_at_least
from memoryhub.web.actors import request_actor
from memoryhub.web.views.base import page_tenant, page_workflow
from triggers import policy, services
from triggers import simulator as simulation
from triggers.engine import export_langchain, export_langmem
from triggers.forms import PolicyForm

DECISIONS_PER_PAGE = 50


def _policy_page(request: HttpRequest, *, workflow: Workflow | None) -> HttpResponse:
    tenant, role = page_tenant(request)
    needed = Role.REVIEWER if workflow is not None else Role.ADMIN
    can_edit = role_at_least(role, needed)
    spec, source, row = policy.effective_policy(tenant, workflow)
    form = PolicyForm(initial=PolicyForm.initial_from(spec))
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied(f"Changing this policy needs the {needed} role.")
        actor = request_actor(request)
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
        # A framework that compacts on its own (Claude Code, Anthropic, OTel-reported): the threshold
        # it actually applied, reconstructed from its pre-compaction token counts.
        "observed_threshold": threshold_in_force(workflow) if workflow is not None else None,
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


# Form fields that belong to the simulation request rather than to the candidate policy.
SIM_KEYS = ("workflow", "group", "compaction_ratio")


def _candidate_pairs(data: Any) -> list[tuple[str, str]]:
    """Every submitted (name, value) but the CSRF token and the share marker, in order."""
    return [
        (key, value)
        for key in data
        if key not in ("csrfmiddlewaretoken", "run", "scope")
        for value in data.getlist(key)
    ]


def share_url(data: Any) -> str:
    """A GET URL that reproduces this simulation (workflow, grouping, ratio, every candidate field)."""
    query = urlencode([*_candidate_pairs(data), ("run", "1")])
    return f"{reverse('memoryhub:triggers-simulator')}?{query}"


@login_required
def simulator(request: HttpRequest) -> HttpResponse:
    """Pick a workflow, edit a candidate policy, see both replays side by side; share the run as a
    URL (GET with ``run=1`` and the form's fields) and save the candidate as a policy."""
    tenant, role = page_tenant(request)
    workflows = simulation.recent_workflow_ids(tenant)
    ran = (
        request.POST if request.method == "POST" else (request.GET if request.GET.get("run") == "1" else None)
    )
    asked = ran if ran is not None else request.GET
    wf_id = asked.get("workflow") or (workflows[0] if workflows else "")
    group = asked.get("group") or "auto"
    if not wf_id:
        return render(
            request, "triggers/simulator.html", {"workflows": workflows, "selected": wf_id, "group": "auto"}
        )
    workflow = page_workflow(request, wf_id)
    current, source, _ = policy.effective_policy(tenant, workflow)
    form = PolicyForm(ran) if ran is not None else PolicyForm(initial=PolicyForm.initial_from(current))
    candidate = form.to_policy() if ran is not None and form.is_valid() else None
    run = simulation.run(
        workflow,
        current,
        group=group,
        candidate=candidate,
        ratio=ran.get("compaction_ratio", "") if ran is not None else "",
        refused=bool(form.errors),
    )
    for exc in run.errors:
        form.add_service_error(exc)
    shared = run.result is not None and ran is not None
    context: dict[str, Any] = {
        "workflows": workflows,
        "selected": wf_id,
        "workflow": workflow,
        "form": form,
        "current": current,
        "source": source,
        "group": group,
        "ratio": asked.get("compaction_ratio", ""),
        "result": run.result,
        "figure_json": run.figure_json,
        "count_rows": run.count_rows,
        "share_url": request.build_absolute_uri(share_url(ran)) if shared else "",
        "candidate_pairs": [(k, v) for k, v in _candidate_pairs(ran) if k not in SIM_KEYS]
        if shared and candidate is not None
        else [],
        "diff": run.diff,
        "can_save_workflow": role_at_least(role, Role.REVIEWER),
        "can_save_tenant": role_at_least(role, Role.ADMIN),
    }
    return render(request, "triggers/simulator.html", context)


@login_required
@require_POST
def simulator_save(request: HttpRequest) -> HttpResponse:
    """Save the simulated candidate as the workflow's override (reviewer) or the tenant default
    (admin) — the same roles as the policy pages — through services.save_policy (audited)."""
    tenant, role = page_tenant(request)
    workflow = page_workflow(request, request.POST.get("workflow", ""))
    scope = request.POST.get("scope", "workflow")
    if scope not in ("workflow", "tenant"):
        raise InvalidInput(f"unknown scope {scope!r}")
    needed = Role.ADMIN if scope == "tenant" else Role.REVIEWER
    if not role_at_least(role, needed):
        raise PermissionDenied(f"Saving the {scope} policy needs the {needed} role.")
    back = share_url(request.POST)
    form = PolicyForm(request.POST)
    if not form.is_valid():
        messages.error(request, "The candidate policy is not valid; nothing was saved.")
        return redirect(back)
    target = workflow if scope == "workflow" else None
    try:
        services.save_policy(tenant, form.to_policy(), request_actor(request), workflow=target, role=role)
    except (InvalidInput, Forbidden) as exc:  # Forbidden: a reviewer may not lower require_approval
        messages.error(request, f"Nothing was saved: {exc.detail}")
        return redirect(back)
    where = f"{workflow.external_id}'s policy override" if target else "the tenant default policy"
    messages.success(request, f"Saved the simulated candidate as {where}.")
    if target is not None:
        return redirect("memoryhub:triggers-workflow-policy", wf=workflow.external_id)
    return redirect("memoryhub:triggers-tenant-policy")


urlpatterns = [
    path("triggers/policy/", tenant_policy, name="triggers-tenant-policy"),
    path("triggers/simulator/", simulator, name="triggers-simulator"),
    path("triggers/simulator/save/", simulator_save, name="triggers-simulator-save"),
    path("triggers/workflows/<str:wf>/policy/", workflow_policy, name="triggers-workflow-policy"),
    path("triggers/workflows/<str:wf>/decisions/", decision_log, name="triggers-decisions"),
]
