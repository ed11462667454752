"""Audit pages: artifact lineage + investigations, event ranges, summary diff, replay download, the
audit log with chain status, and the review-action forms the summary page posts to.

URL names (namespace ``memoryhub``): artifact-detail, artifact-investigate, event-range, summary-diff,
trace-replay, audit-log, summary-action.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from audit import review
from audit.content import event_range_page
from audit.diff import diff_summaries, resolve_pair, versions_of
from audit.investigate import investigate, investigations_of
from audit.lineage import artifact_lineage, get_artifact
from audit.log_report import AUDIT_FILTERS, audit_log_page
from audit.replay import get_trace, replay_bundle
from memoryhub.core.errors import DomainError, NotFound
from memoryhub.memory import lifecycle
from memoryhub.models import Role, role_at_least
from memoryhub.web.actors import request_actor
from memoryhub.web.views.base import page_tenant, page_workflow

INVESTIGATIONS_SHOWN = 20


def _not_found(exc: NotFound):
    return Http404(exc.detail)


def _require_role(role: str | None, minimum: str) -> None:
    if not role_at_least(role, minimum):
        raise PermissionDenied(f"This needs the {minimum} role; you are {role or 'not a member'}.")


# --- artifact lineage + investigations -------------------------------------------------------------


def _artifact_context(request: HttpRequest, artifact_id: str) -> dict[str, Any]:
    tenant, role = page_tenant(request)
    try:
        artifact = get_artifact(tenant, artifact_id)
    except NotFound as exc:
        raise _not_found(exc)
    return {
        "artifact": artifact,
        "lineage": artifact_lineage(artifact),
        "investigations": list(investigations_of(artifact)[:INVESTIGATIONS_SHOWN]),
        "can_investigate": role_at_least(role, Role.REVIEWER),
        "role": role,
    }


@login_required
@require_GET
def artifact_detail(request: HttpRequest, artifact_id: str) -> HttpResponse:
    return render(request, "audit/artifact_detail.html", _artifact_context(request, artifact_id))


@login_required
@require_POST
def artifact_investigate(request: HttpRequest, artifact_id: str) -> HttpResponse:
    context = _artifact_context(request, artifact_id)
    _require_role(context["role"], Role.REVIEWER)
    fact = request.POST.get("fact", "")
    regex = request.POST.get("regex") in ("on", "true", "1")
    try:
        result = investigate(context["artifact"], fact, request_actor(request), regex=regex)
    except DomainError as exc:
        context.update(form_error=exc.detail, form_fact=fact, form_regex=regex)
        return render(request, "audit/artifact_detail.html", context, status=exc.status)
    messages.success(
        request, f"Verdict: {result.get_verdict_display()} ({result.elapsed_ms:.1f} ms to reconstruct)."
    )
    url = reverse("memoryhub:artifact-detail", args=[artifact_id])
    return redirect(f"{url}#investigation-{result.pk}")


@login_required
@require_GET
def trace_replay(request: HttpRequest, trace_id: int) -> HttpResponse:
    """The replay bundle as a JSON download (same document as GET /api/v1/traces/{id}/replay/)."""
    tenant, _ = page_tenant(request)
    try:
        trace = get_trace(tenant, trace_id)
    except NotFound as exc:
        raise _not_found(exc)
    body = json.dumps(replay_bundle(trace), cls=DjangoJSONEncoder, indent=2, ensure_ascii=False)
    response = HttpResponse(body, content_type="application/json; charset=utf-8")
    filename = f"replay-{trace.workflow.external_id}-{trace.model_call_id}.json".replace('"', "")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


# --- source events ---------------------------------------------------------------------------------


@login_required
@require_GET
def event_range(request: HttpRequest, wf: str, from_seq: int, to_seq: int) -> HttpResponse:
    """Events from_seq..to_seq of a workflow (what a lineage hop links to); purged ones say by whom."""
    workflow = page_workflow(request, wf)
    if from_seq < 1 or to_seq < from_seq:
        raise Http404("Not a valid event range.")
    q = request.GET.get("q", "").strip()
    found = event_range_page(workflow, from_seq, to_seq, request.GET.get("page"), q)
    return render(
        request,
        "audit/event_range.html",
        {
            "workflow": workflow,
            "from_seq": from_seq,
            "to_seq": found.to_seq,
            "page": found.page,
            "rows": found.rows,
            "q": q,
            "beyond_head": found.beyond_head,
        },
    )


# --- summary diff ----------------------------------------------------------------------------------


@login_required
@require_GET
def summary_diff(request: HttpRequest, summary_id: str) -> HttpResponse:
    tenant, _ = page_tenant(request)
    against = request.GET.get("against") or None
    try:
        base, summary = resolve_pair(tenant, summary_id, against)
    except NotFound as exc:
        raise _not_found(exc)
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("memoryhub:summary-diff", summary_id=summary_id)
    return render(
        request,
        "audit/summary_diff.html",
        {
            "summary": summary,
            "base": base,
            "diff": diff_summaries(base, summary),
            "versions": versions_of(summary.workflow),
            "workflow": summary.workflow,
        },
    )


# --- audit log ---------------------------------------------------------------------------------------


@login_required
@require_GET
def audit_log(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    filters = {f: request.GET.get(f, "").strip() for f in AUDIT_FILTERS}
    found = audit_log_page(tenant, filters, request.GET.get("page"), verify=request.GET.get("verify") == "1")
    return render(
        request,
        "audit/audit_log.html",
        {
            "page": found.page,
            "rows": found.rows,
            "filters": filters,
            "query": urlencode({k: v for k, v in filters.items() if v}),
            "chain": found.chain,
            "actions": found.actions,
        },
    )


# --- review actions ------------------------------------------------------------------------------------


def _safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, {request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


@login_required
@require_http_methods(["GET", "POST"])
def summary_action(request: HttpRequest, summary_id: str, action: str) -> HttpResponse:
    """GET: a confirmation form; POST: run the review action through memoryhub.memory.lifecycle."""
    if action not in review.ACTIONS:
        raise Http404(f"Unknown review action {action!r}.")
    tenant, role = page_tenant(request)
    try:
        summary = review.get_summary(tenant, summary_id)
    except NotFound as exc:
        raise _not_found(exc)
    spec = review.ACTIONS[action]
    _require_role(role, spec.role)
    fallback = f"/summaries/{summary.summary_id}/"
    next_url = _safe_next(request, fallback)
    context: dict[str, Any] = {
        "summary": summary,
        "action": action,
        "spec": spec,
        "next": next_url,
        "failed_checks": review.failed_checks(summary),
        "workflow": summary.workflow,
        "text_limits": lifecycle.TEXT_LIMITS,
    }
    if request.method == "GET":
        refused = lifecycle.refusal(summary, action, lifecycle.action_policy(summary))
        context["not_now"] = refused.detail if refused else ""
        return render(request, "audit/summary_action.html", context)
    form: dict[str, Any] = {
        "reason": request.POST.get("reason", ""),
        "expected_revision": request.POST.get("expected_revision", ""),
        "checks": request.POST.getlist("checks"),
    }
    try:
        result = review.run_action(
            action,
            summary,
            request_actor(request),
            role,
            reason=form["reason"],
            expected_revision=form["expected_revision"],
            checks=form["checks"],
        )
    except DomainError as exc:
        context.update(form=form, form_error=exc.detail)
        return render(request, "audit/summary_action.html", context, status=exc.status)
    messages.success(request, result)
    return redirect(next_url)


@login_required
@require_POST
def summary_comment(request: HttpRequest, summary_id: str) -> HttpResponse:
    """Add a comment to a summary's discussion (reviewer or above; audited)."""
    tenant, role = page_tenant(request)
    try:
        summary = review.get_summary(tenant, summary_id)
    except NotFound as exc:
        raise _not_found(exc)
    _require_role(role, lifecycle.ACTION_ROLES["comment"])
    url = reverse("memoryhub:summary-detail", args=[summary.summary_id])
    try:
        comment = review.add_comment(summary, request_actor(request), request.POST.get("text"))
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect(f"{url}#comments")
    messages.success(request, f"Comment added to {summary.label}.")
    return redirect(f"{url}#comment-{comment.pk}")


@login_required
@require_GET
def review_inbox(request: HttpRequest) -> HttpResponse:
    """What waits for a reviewer, oldest first: approvals, candidates, failed checks, quarantines."""
    tenant, role = page_tenant(request)
    rows = review.review_inbox(tenant.pk)
    return render(
        request,
        "audit/review_inbox.html",
        {"rows": rows, "total": review.inbox_count(tenant.pk), "role": role, "limit": review.INBOX_LIMIT},
    )


urlpatterns = [
    path("review/", review_inbox, name="review-inbox"),
    path("summaries/<str:summary_id>/comments/", summary_comment, name="summary-comment"),
    path("artifacts/<str:artifact_id>/", artifact_detail, name="artifact-detail"),
    path("artifacts/<str:artifact_id>/investigate/", artifact_investigate, name="artifact-investigate"),
    path("traces/<int:trace_id>/replay/", trace_replay, name="trace-replay"),
    path("workflows/<str:wf>/events/<int:from_seq>-<int:to_seq>/", event_range, name="event-range"),
    path("summaries/<str:summary_id>/diff/", summary_diff, name="summary-diff"),
    path("summaries/<str:summary_id>/action/<str:action>/", summary_action, name="summary-action"),
    path("audit/", audit_log, name="audit-log"),
]
