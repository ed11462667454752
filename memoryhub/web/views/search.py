"""The nav search box and a workflow's filterable event timeline.

Search finds, by id, workflows (external id), summaries (``sum_…``, or ``S3`` within a workflow),
artifacts (``T57``), consumer traces and model calls (``call-…``, agent run ids, ``#12``), and, by
text, the events of one workflow. An exact single hit redirects to its page.

The timeline (``/workflows/<wf>/timeline/``) lists a workflow's events filtered by kind, agent and
text, from a seq onwards; a text hit marks the phrase (``<mark>``), not the whole row, and
``?seq=137`` opens the timeline at row 137 and highlights it.

URL names (namespace ``memoryhub``): search, workflow-timeline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path, reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from memoryhub.memory.search import candidate_seqs
from memoryhub.models import Artifact, ConsumerTrace, Event, Summary, Tenant, Workflow
from memoryhub.models.workflows import EventKind
from memoryhub.web.views.base import page_tenant, page_workflow

HITS_PER_KIND = 20
EVENT_HITS = 50
TIMELINE_ROWS = 100
SNIPPET = 160  # characters of context either side of an event-text hit on the search page
VERSION_RE = re.compile(r"^[Ss](\d{1,6})$")
TRACE_NO_RE = re.compile(r"^#?(\d{1,12})$")


@dataclass
class Hit:
    kind: str  # workflow | summary | artifact | trace | event
    label: str
    url: str
    detail: str = ""
    exact: bool = False
    snippet: SafeString | str = ""


def highlight(text: str, phrase: str) -> SafeString:
    """``text`` escaped, with every case-insensitive occurrence of ``phrase`` wrapped in <mark>."""
    if not phrase:
        return mark_safe(escape(text))
    parts = re.split(f"({re.escape(phrase)})", text, flags=re.IGNORECASE)
    out = [f"<mark>{escape(p)}</mark>" if i % 2 else escape(p) for i, p in enumerate(parts)]
    return mark_safe("".join(out))


def snippet(text: str, phrase: str) -> SafeString:
    """The stretch of ``text`` around the first hit, phrase marked (long texts are cut with …)."""
    at = text.lower().find(phrase.lower())
    if at < 0:
        return highlight(text[: 2 * SNIPPET], "")
    start, end = max(0, at - SNIPPET), min(len(text), at + len(phrase) + SNIPPET)
    body = highlight(text[start:end], phrase)
    return mark_safe(("…" if start else "") + body + ("…" if end < len(text) else ""))


def timeline_url(workflow: Workflow, **params: Any) -> str:
    base = reverse("memoryhub:workflow-timeline", args=[workflow.external_id])
    clean = {k: v for k, v in params.items() if v not in ("", None, 0)}
    anchor = f"#event-{params['seq']}" if params.get("seq") else ""
    return f"{base}?{urlencode(clean)}{anchor}" if clean else base


def id_hits(tenant: Tenant, q: str, workflow: Workflow | None) -> list[Hit]:
    """Everything whose id is ``q`` (exact hits first), or starts with it."""
    hits: list[Hit] = []
    for wf in (
        Workflow.objects.filter(tenant=tenant)
        .filter(Q(external_id__iexact=q) | Q(external_id__icontains=q) | Q(name__icontains=q))
        .order_by("external_id")[:HITS_PER_KIND]
    ):
        hits.append(
            Hit(
                "workflow",
                wf.external_id,
                reverse("memoryhub:workflow-detail", args=[wf.external_id]),
                wf.name,
                exact=wf.external_id.lower() == q.lower(),
            )
        )
    summaries = Summary.objects.filter(workflow__tenant=tenant).select_related("workflow").defer("content")
    if m := VERSION_RE.match(q):
        version_q = Q(version=int(m.group(1)))
        if workflow is not None:
            version_q &= Q(workflow=workflow)
        found = summaries.filter(version_q).order_by("workflow__external_id")[:HITS_PER_KIND]
        exact = workflow is not None
    else:
        found = summaries.filter(summary_id__istartswith=q).order_by("summary_id")[:HITS_PER_KIND]
        exact = False
    for s in found:
        hits.append(
            Hit(
                "summary",
                f"{s.label} · {s.summary_id}",
                reverse("memoryhub:summary-detail", args=[s.summary_id]),
                f"{s.status} · {s.workflow.external_id}",
                exact=exact or s.summary_id.lower() == q.lower(),
            )
        )
    for a in (
        Artifact.objects.filter(tenant=tenant, artifact_id__istartswith=q)
        .select_related("workflow")
        .order_by("artifact_id")[:HITS_PER_KIND]
    ):
        hits.append(
            Hit(
                "artifact",
                a.artifact_id,
                reverse("memoryhub:artifact-detail", args=[a.artifact_id]),
                f"{a.kind} · {a.workflow.external_id}",
                exact=a.artifact_id.lower() == q.lower(),
            )
        )
    trace_q = Q(model_call_id__istartswith=q) | Q(agent_run_id__istartswith=q)
    if m := TRACE_NO_RE.match(q):
        trace_q |= Q(pk=int(m.group(1)))
    for t in (
        ConsumerTrace.objects.filter(tenant=tenant)
        .filter(trace_q)
        .select_related("workflow")
        .order_by("-at", "-id")[:HITS_PER_KIND]
    ):
        exact = q.lower() in (t.model_call_id.lower(), f"#{t.pk}")
        hits.append(
            Hit(
                "trace",
                f"{t.agent} · {t.model_call_id}",
                reverse("memoryhub:trace-detail", args=[t.pk]),
                f"run {t.agent_run_id} · {t.workflow.external_id}",
                exact=exact,
            )
        )
    return hits


PREFILTER_MAX = 5000  # more trigram candidates than this: let the database scan instead


def containing(qs: QuerySet[Event], workflow: Workflow, q: str, from_seq: int = 1) -> QuerySet[Event]:
    """Unpurged events of ``workflow`` whose content contains ``q`` (case-insensitive). On
    PostgreSQL the trigram index (memoryhub.memory.search) narrows a long history to a few candidates."""
    seqs = candidate_seqs(workflow.pk, q, regex=False, from_seq=from_seq, to_seq=None)
    if seqs is not None and len(seqs) <= PREFILTER_MAX:
        qs = qs.filter(seq__in=seqs)
    return qs.filter(content__icontains=q, purged_at__isnull=True)


def event_hits(workflow: Workflow, q: str) -> list[Hit]:
    events = (
        containing(Event.objects.filter(workflow=workflow), workflow, q)
        .only("seq", "kind", "agent", "content")
        .order_by("seq")[:EVENT_HITS]
    )
    return [
        Hit(
            "event",
            f"seq {e.seq}",
            timeline_url(workflow, q=q, seq=e.seq),
            f"{e.kind} · {e.agent}",
            snippet=snippet(e.content, q),
        )
        for e in events
    ]


@login_required
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    tenant, _ = page_tenant(request)
    q = request.GET.get("q", "").strip()[:300]
    wf_id = request.GET.get("workflow", "").strip()
    workflow = Workflow.objects.filter(tenant=tenant, external_id=wf_id).first() if wf_id else None
    hits: list[Hit] = []
    events: list[Hit] = []
    if q:
        hits = id_hits(tenant, q, workflow)
        exact = [h for h in hits if h.exact]
        if len(exact) == 1 and request.GET.get("all") != "1":
            return redirect(exact[0].url)
        if workflow is not None:
            events = event_hits(workflow, q)
    return render(
        request,
        "memoryhub/search.html",
        {
            "search_query": q,
            "q": q,
            "hits": hits,
            "events": events,
            "search_workflow": workflow,
            "workflow_id": wf_id,
        },
    )


# --- event timeline ------------------------------------------------------------------------------


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
    kind = kind if kind in EventKind.values else ""
    agent = request.GET.get("agent", "").strip()[:100]
    q = request.GET.get("q", "").strip()[:300]
    seq = min(_seq(request.GET.get("seq")), workflow.head_seq)
    start = _seq(request.GET.get("from")) or (max(1, seq - 10) if seq else 1)
    qs = Event.objects.filter(workflow=workflow, seq__gte=start).select_related("purge")
    if kind:
        qs = qs.filter(kind=kind)
    if agent:
        qs = qs.filter(agent=agent)
    if q:
        qs = containing(qs, workflow, q, from_seq=start)
    rows = list(qs.order_by("seq")[: TIMELINE_ROWS + 1])
    more = len(rows) > TIMELINE_ROWS
    rows = rows[:TIMELINE_ROWS]
    for e in rows:
        e.content_html = highlight(e.content, q)  # type: ignore[attr-defined]  # for the template only
    watermark = (
        workflow.active_summary.covers_to_seq if workflow.active_summary_id and workflow.active_summary else 0
    )
    filters = {"kind": kind, "agent": agent, "q": q}
    agents = list(
        Event.objects.filter(workflow=workflow)
        .exclude(agent="")
        .values_list("agent", flat=True)
        .distinct()
        .order_by("agent")[:100]
    )
    return render(
        request,
        "memoryhub/workflow_timeline.html",
        {
            "workflow": workflow,
            "events": rows,
            "filters": filters,
            "filtered": bool(kind or agent or q),
            "kinds": EventKind.values,
            "agents": agents,
            "target_seq": seq,
            "start": start,
            "watermark": watermark,
            "next_url": timeline_url(workflow, **filters, **{"from": rows[-1].seq + 1}) if more else "",
            "first_url": timeline_url(workflow, **filters) if start > 1 else "",
        },
    )


urlpatterns = [
    path("search/", search, name="search"),
    path("workflows/<str:wf>/timeline/", workflow_timeline, name="workflow-timeline"),
]
