"""What the nav search box and a workflow's event timeline show, read from the database: plain
functions returning plain dataclasses (the pages in memoryhub/web/views/search.py render them).

Search finds, by id, workflows (external id), summaries (``sum_…``, or ``S3`` within a workflow),
artifacts (``T57``), consumer traces and model calls (``call-…``, agent run ids, ``#12``), and, by
free text, the events of every workflow of the tenant (ranked, a page at a time:
memoryhub.memory.search.search_events), or of one workflow when asked for. The timeline lists a
workflow's events filtered by kind, agent and text, from a seq onwards; a text hit marks the phrase
(``<mark>``), not the whole row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.db.models import Q, QuerySet
from django.urls import reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from memoryhub.memory.search import candidate_seqs, query_words, search_events
from memoryhub.models import Artifact, ConsumerTrace, Event, Summary, Tenant, Workflow

HITS_PER_KIND = 20
EVENTS_PER_PAGE = 20  # free-text event hits per search page
MAX_EVENT_PAGE = 50  # deeper than this: refine the query
TIMELINE_ROWS = 100
TIMELINE_AGENTS = 100  # agents offered by the timeline's filter
TIMELINE_LEAD = 10  # rows shown before the target seq when the timeline opens at one
SNIPPET = 160  # characters of context before an event-text hit on the search page (twice that after)
PREFILTER_MAX = 5000  # more trigram candidates than this: let the database scan instead
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
    workflow: str = ""  # an event hit's workflow (external id)


def highlight(text: str, phrase: str) -> SafeString:
    """``text`` escaped, with every case-insensitive occurrence of ``phrase`` wrapped in <mark>."""
    if not phrase:
        return mark_safe(escape(text))
    parts = re.split(f"({re.escape(phrase)})", text, flags=re.IGNORECASE)
    out = [f"<mark>{escape(p)}</mark>" if i % 2 else escape(p) for i, p in enumerate(parts)]
    return mark_safe("".join(out))


def highlight_words(text: str, words: list[str]) -> SafeString:
    """``text`` escaped, every case-insensitive occurrence of any of ``words`` wrapped in <mark>."""
    words = sorted({w for w in words if w}, key=len, reverse=True)
    if not words:
        return mark_safe(escape(text))
    parts = re.split("(" + "|".join(map(re.escape, words)) + ")", text, flags=re.IGNORECASE)
    return mark_safe(
        "".join(f"<mark>{escape(p)}</mark>" if i % 2 else escape(p) for i, p in enumerate(parts))
    )


def words_snippet(text: str, words: list[str]) -> SafeString:
    """The stretch of ``text`` around the first occurrence of any of ``words``, each marked."""
    lowered = text.lower()
    found = [at for at in (lowered.find(w) for w in words) if at >= 0]
    at = min(found) if found else 0
    start, end = max(0, at - SNIPPET), min(len(text), at + 2 * SNIPPET)
    body = highlight_words(text[start:end], words)
    return mark_safe(("…" if start else "") + body + ("…" if end < len(text) else ""))


def timeline_url(workflow: Workflow, **params: Any) -> str:
    base = reverse("memoryhub:workflow-timeline", args=[workflow.external_id])
    clean = {k: v for k, v in params.items() if v not in ("", None, 0)}
    anchor = f"#event-{params['seq']}" if params.get("seq") else ""
    return f"{base}?{urlencode(clean)}{anchor}" if clean else base


# --- search ---------------------------------------------------------------------------------------


def _named_hit(kind: str, ident: str, page: str, detail: str, q: str) -> Hit:
    """A hit labelled by its id, linking to page ``memoryhub:<page>`` of it; exact when the id is ``q``."""
    return Hit(
        kind, ident, reverse(f"memoryhub:{page}", args=[ident]), detail, exact=ident.lower() == q.lower()
    )


def _workflow_hits(tenant: Tenant, q: str) -> list[Hit]:
    found = (
        Workflow.objects.filter(tenant=tenant)
        .filter(Q(external_id__iexact=q) | Q(external_id__icontains=q) | Q(name__icontains=q))
        .order_by("external_id")[:HITS_PER_KIND]
    )
    return [_named_hit("workflow", wf.external_id, "workflow-detail", wf.name, q) for wf in found]


def _summary_hits(tenant: Tenant, q: str, workflow: Workflow | None) -> list[Hit]:
    """``sum_…`` prefixes, or ``S3``: version 3 of every workflow (of ``workflow`` alone, exactly)."""
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
    return [
        Hit(
            "summary",
            f"{s.label} · {s.summary_id}",
            reverse("memoryhub:summary-detail", args=[s.summary_id]),
            f"{s.status} · {s.workflow.external_id}",
            exact=exact or s.summary_id.lower() == q.lower(),
        )
        for s in found
    ]


def _artifact_hits(tenant: Tenant, q: str) -> list[Hit]:
    found = (
        Artifact.objects.filter(tenant=tenant, artifact_id__istartswith=q)
        .select_related("workflow")
        .order_by("artifact_id")[:HITS_PER_KIND]
    )
    return [
        _named_hit("artifact", a.artifact_id, "artifact-detail", f"{a.kind} · {a.workflow.external_id}", q)
        for a in found
    ]


def _trace_hits(tenant: Tenant, q: str) -> list[Hit]:
    """Model call or agent run id prefixes, or a trace number (``12`` or ``#12``)."""
    trace_q = Q(model_call_id__istartswith=q) | Q(agent_run_id__istartswith=q)
    if m := TRACE_NO_RE.match(q):
        trace_q |= Q(pk=int(m.group(1)))
    found = (
        ConsumerTrace.objects.filter(tenant=tenant)
        .filter(trace_q)
        .select_related("workflow")
        .order_by("-at", "-id")[:HITS_PER_KIND]
    )
    return [
        Hit(
            "trace",
            f"{t.agent} · {t.model_call_id}",
            reverse("memoryhub:trace-detail", args=[t.pk]),
            f"run {t.agent_run_id} · {t.workflow.external_id}",
            exact=q.lower() in (t.model_call_id.lower(), f"#{t.pk}"),
        )
        for t in found
    ]


def id_hits(tenant: Tenant, q: str, workflow: Workflow | None) -> list[Hit]:
    """Everything whose id is ``q`` (exact hits first), or starts with it."""
    return [
        *_workflow_hits(tenant, q),
        *_summary_hits(tenant, q, workflow),
        *_artifact_hits(tenant, q),
        *_trace_hits(tenant, q),
    ]


def containing(qs: QuerySet[Event], workflow: Workflow, q: str, from_seq: int = 1) -> QuerySet[Event]:
    """Unpurged events of ``workflow`` whose content contains ``q`` (case-insensitive). On
    PostgreSQL the trigram index (memoryhub.memory.search) narrows a long history to a few candidates."""
    seqs = candidate_seqs(workflow.pk, q, regex=False, from_seq=from_seq, to_seq=None)
    if seqs is not None and len(seqs) <= PREFILTER_MAX:
        qs = qs.filter(seq__in=seqs)
    return qs.filter(content__icontains=q, purged_at__isnull=True)


def event_hits(tenant: Tenant, q: str, workflow: Workflow | None, page: int) -> tuple[list[Hit], bool, str]:
    """Page ``page`` of the free-text event hits (of ``workflow`` alone, when given), best first:
    the hits, whether a next page exists, and the engine that ranked them."""
    found = search_events(
        tenant, q, workflow=workflow, offset=(page - 1) * EVENTS_PER_PAGE, limit=EVENTS_PER_PAGE
    )
    bare = q.replace('"', " ")
    words = [" ".join(bare.lower().split()), *query_words(bare)]  # the phrase first, then each word
    hits = []
    for m in found.matches:
        e = m.event
        # The timeline filters by the phrase: pass it on only where the event holds it verbatim.
        phrase = q if q.lower() in e.content.lower() else ""
        hits.append(
            Hit(
                "event",
                f"seq {e.seq}",
                timeline_url(e.workflow, q=phrase, seq=e.seq),
                f"{e.kind} · {e.agent}" if e.agent else e.kind,
                snippet=words_snippet(e.content, words),
                workflow=m.workflow_external_id,
            )
        )
    return hits, found.has_next, found.engine


SCOPES = ("tenant", "workflow")


@dataclass(frozen=True)
class SearchResults:
    workflow: Workflow | None  # the workflow named by ``?workflow=``, if it is the tenant's
    hits: list[Hit] = field(default_factory=list)
    events: list[Hit] = field(default_factory=list)
    scope: str = "tenant"  # whose events were searched: the tenant's, or one workflow's
    page: int = 1
    has_next: bool = False
    engine: str = ""

    @property
    def only_exact(self) -> Hit | None:
        """The hit to go straight to: the one exact id hit, when there is exactly one."""
        exact = [h for h in self.hits if h.exact]
        return exact[0] if len(exact) == 1 else None


def search(tenant: Tenant, q: str, workflow_id: str = "", *, scope: str = "", page: int = 1) -> SearchResults:
    """Id hits for ``q`` across the tenant, and page ``page`` of its free-text event hits: across
    every workflow of the tenant, or within workflow ``workflow_id`` when one is named and
    ``scope`` is not "tenant" (a named workflow that is not the tenant's finds no event)."""
    workflow = (
        Workflow.objects.filter(tenant=tenant, external_id=workflow_id).first() if workflow_id else None
    )
    scope = "workflow" if workflow_id and scope != "tenant" else "tenant"
    if not q:
        return SearchResults(workflow, scope=scope)
    hits = id_hits(tenant, q, workflow)
    if scope == "workflow" and workflow is None:
        return SearchResults(workflow, hits, scope=scope)
    events, has_next, engine = event_hits(tenant, q, workflow if scope == "workflow" else None, page)
    return SearchResults(workflow, hits, events, scope, page, has_next, engine)


# --- event timeline -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeline:
    """One page of a workflow's filtered events; each row carries ``content_html`` (hits marked)."""

    events: list[Event]
    agents: list[str]  # the workflow's agents, for the filter
    target_seq: int  # the row to highlight (0: none)
    start: int  # the first seq the page reads from
    watermark: int  # the active summary's covers_to_seq (0: no active summary)
    next_url: str
    first_url: str


def timeline(workflow: Workflow, *, kind: str, agent: str, q: str, seq: int, from_seq: int) -> Timeline:
    """Events of ``workflow`` matching kind/agent/text from ``from_seq`` (or a few rows before
    ``seq``, the row to highlight), at most TIMELINE_ROWS of them."""
    seq = min(seq, workflow.head_seq)
    start = from_seq or (max(1, seq - TIMELINE_LEAD) if seq else 1)
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
        # Only a text filter marks anything; otherwise the page renders the content as it renders
        # it everywhere (a tool call as indented JSON).
        e.content_html = highlight(e.content, q) if q else ""  # type: ignore[attr-defined]  # template only
    filters = {"kind": kind, "agent": agent, "q": q}
    return Timeline(
        events=rows,
        agents=workflow_agents(workflow),
        target_seq=seq,
        start=start,
        watermark=workflow.active_watermark,
        next_url=timeline_url(workflow, **filters, **{"from": rows[-1].seq + 1}) if more else "",
        first_url=timeline_url(workflow, **filters) if start > 1 else "",
    )


def workflow_agents(workflow: Workflow) -> list[str]:
    """The distinct agents that wrote ``workflow``'s events, alphabetically (at most TIMELINE_AGENTS)."""
    return list(
        Event.objects.filter(workflow=workflow)
        .exclude(agent="")
        .values_list("agent", flat=True)
        .distinct()
        .order_by("agent")[:TIMELINE_AGENTS]
    )
