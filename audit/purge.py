"""Purging source events without losing provenance, and without leaving derived copies behind.

A purge tombstones events (content, facts and refs emptied; seq, kind, content hash and token
count kept as minimal provenance: the one UPDATE the append-only triggers allow), records a
``Purge``, scrubs the content of every summary derived from those events (``purged_by`` set, hash
kept; summaries that cite or contain the purged content are also QUARANTINED — the active one
through the lifecycle service, which moves the pointer to an older clean version or to none in the
same transaction), bumps the workflow's ``purge_epoch`` so a compaction job started before the
purge can never activate the old content again, and appends an AuditEntry. Saved investigations
that quoted purged text lose those quotes.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, cast

from django.apps import apps
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from audit.log import record
from audit.models import Investigation, Purge
from audit.payloads import PurgedText, summary_payloads, tombstone_payloads
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import sha256_hex
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.models import Event, OtelSpan, SpanMapping, Summary, SummaryStatus, Tenant, Workflow
from memoryhub.models.purgeable import EVENT_TEXT, EventText, Reach
from memoryhub.pipeline.jobs import request_compaction

TOMBSTONE_SCHEMA = "memoryhub.purged/v1"
MIN_QUOTE_CHARS = 24  # shorter fragments are too generic to call "containing" purged content
MAX_SEQS = 100_000
# A purge reason is quoted in the quarantines it causes ("purge <id>: <reason>"), so it is this much
# shorter than a review reason (lifecycle.MAX_REASON).
PURGE_REASON_ROOM = 64


@dataclass
class PurgeOutcome:
    purge: Purge
    seqs: list[int]
    quarantined: list[str] = field(default_factory=list)
    scrubbed: list[str] = field(default_factory=list)
    active_before: str | None = None
    active_after: str | None = None
    payloads: list[int] = field(default_factory=list)
    settled: list[str] = field(default_factory=list)
    legacy_unreachable: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "purge_id": self.purge.purge_id,
            "event_count": len(self.seqs),
            "seqs": self.seqs,
            "affected_summaries": self.scrubbed,
            "quarantined_summaries": self.quarantined,
            "active_summary_before": self.active_before,
            "active_summary_after": self.active_after,
            "payloads_purged": len(self.payloads),
            "deferred_settled": len(self.settled),
            "purge_epoch": cast(Workflow, self.purge.workflow).purge_epoch
            if self.purge.workflow_id
            else None,
            "at": self.purge.at.isoformat(),
        }


def parse_selector(data: dict[str, Any]) -> dict[str, Any]:
    """Exactly one of: {"seq_from", "seq_to"}, {"seqs": [...]}, {"subject": "key"}."""
    keys = {k for k in ("seq_from", "seq_to", "seqs", "subject") if data.get(k) is not None}
    if not keys:
        raise InvalidInput(
            "give a seq range (seq_from, seq_to), a list of seqs, or a subject key", code="invalid_selector"
        )
    if keys == {"seq_from", "seq_to"}:
        lo, hi = data["seq_from"], data["seq_to"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (lo, hi)) or hi < lo:
            raise InvalidInput(
                "seq_from and seq_to must be integers with 1 <= seq_from <= seq_to", code="invalid_selector"
            )
        if hi - lo + 1 > MAX_SEQS:
            raise InvalidInput(f"a purge covers at most {MAX_SEQS} events", code="invalid_selector")
        return {"seq_from": lo, "seq_to": hi}
    if keys == {"seqs"}:
        seqs = data["seqs"]
        if (
            not isinstance(seqs, list)
            or not seqs
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in seqs)
        ):
            raise InvalidInput("seqs must be a non-empty list of positive integers", code="invalid_selector")
        return {"seqs": sorted(set(seqs))[:MAX_SEQS]}
    if keys == {"subject"}:
        subject = data["subject"]
        if not isinstance(subject, str) or not subject.strip():
            raise InvalidInput(
                "subject must be a non-empty key found in event facts or refs", code="invalid_selector"
            )
        return {"subject": subject.strip()}
    raise InvalidInput("use exactly one selector: seq_from+seq_to, seqs, or subject", code="invalid_selector")


def _select_events(workflow: Workflow, selector: dict[str, Any]) -> list[Event]:
    qs = Event.objects.filter(workflow=workflow, purged_at__isnull=True)
    if "seq_from" in selector:
        qs = qs.filter(seq__gte=selector["seq_from"], seq__lte=min(selector["seq_to"], workflow.head_seq))
    elif "seqs" in selector:
        qs = qs.filter(seq__in=selector["seqs"])
    else:
        subject = selector["subject"]
        # Coarse filter in SQL (JSON as text on both databases), exact match on keys/refs in Python.
        qs = qs.filter(
            Q(facts__icontains=subject) | Q(refs__icontains=subject) | Q(content__icontains=subject)
        )
        return [
            e
            for e in qs.order_by("seq")
            if subject in e.refs or any(f.get("key") == subject for f in e.facts) or subject in e.content
        ]
    return list(qs.order_by("seq"))


def _quotes(events: list[Event], selector: dict[str, Any]) -> list[str]:
    """Distinctive fragments of the purged content, to find copies of it in derived records."""
    quotes: set[str] = set()
    if "subject" in selector:
        quotes.add(selector["subject"])
    for e in events:
        for piece in re.split(r"(?<=[.!?])\s+|\n+", e.content):
            piece = piece.strip()
            if len(piece) >= MIN_QUOTE_CHARS:
                quotes.add(piece)
        for fact in e.facts:
            if len(fact.get("text", "")) >= MIN_QUOTE_CHARS:
                quotes.add(fact["text"])
            quotes.add(fact.get("key", ""))
    quotes.discard("")
    return sorted(quotes, key=len, reverse=True)


def _derived_from(summary: Summary, seqs: set[int], quotes: list[str]) -> bool:
    """Does the summary cite a purged seq or contain purged text?"""
    try:
        content = json.loads(summary.content)
    except ValueError:
        return True
    for fact in content.get("facts", []):
        if seqs.intersection(fact.get("source_seqs") or []):
            return True
    text = summary.content.lower()
    return any(q.lower() in text for q in quotes)


def tombstone_content(purge: Purge, summary: Summary) -> str:
    return json.dumps(
        {
            "schema": TOMBSTONE_SCHEMA,
            "purged_by": purge.purge_id,
            "at": purge.at.isoformat(),
            "content_hash": summary.content_hash,
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def purge_events(
    workflow: Workflow, selector: dict[str, Any], actor: Actor, reason: Any, *, source: str = "manual"
) -> PurgeOutcome:
    """Purge the selected events of ``workflow``. Admin-only at the edges; reason required."""

    reason = lifecycle.clean_reason(reason, limit=lifecycle.MAX_REASON - PURGE_REASON_ROOM)
    with transaction.atomic():
        wf = Workflow.objects.select_for_update().select_related("tenant").get(pk=workflow.pk)
        events = _select_events(wf, selector)
        if not events:
            raise Conflict("no unpurged events match the selector", code="nothing_to_purge")
        seqs = [e.seq for e in events]
        seq_set = set(seqs)
        quotes = _quotes(events, selector)
        now = timezone.now()
        purge = Purge.objects.create(
            tenant=wf.tenant,
            workflow=wf,
            purge_id="prg_" + secrets.token_hex(8),
            reason=reason,
            actor=str(actor),
            selector=_stored_selector(selector),
            event_count=len(seqs),
            seqs=seqs,
            source=source,
            epoch=wf.purge_epoch + 1,
        )
        Event.objects.filter(pk__in=[e.pk for e in events]).update(
            content="", facts=[], refs=[], purged_at=now, purge=purge
        )
        outcome = PurgeOutcome(
            purge=purge,
            seqs=seqs,
            active_before=cast(Summary, wf.active_summary).summary_id if wf.active_summary_id else None,
        )
        covering = Summary.objects.filter(
            workflow=wf, purged_by__isnull=True, covers_from_seq__lte=max(seqs), covers_to_seq__gte=min(seqs)
        ).order_by("version")
        to_quarantine: list[Summary] = []
        derived: list[Summary] = []
        for summary in covering:
            if not any(summary.covers_from_seq <= s <= summary.covers_to_seq for s in seqs):
                continue
            derived.append(summary)
            if (
                _derived_from(summary, seq_set, quotes)
                and summary.status in lifecycle.ALLOWED_FROM["quarantine"]
            ):
                to_quarantine.append(summary)
            # Every covering summary loses its content: it was derived from what is gone.
            Summary.objects.filter(pk=summary.pk).update(
                content=tombstone_content(purge, summary), purged_by=purge
            )
            outcome.scrubbed.append(summary.summary_id)
        # Non-active first, so the active one's fallback only ever lands on a clean version.
        to_quarantine.sort(key=lambda s: s.status == SummaryStatus.ACTIVE)
        for summary in to_quarantine:
            lifecycle.quarantine(summary, actor, f"purge {purge.purge_id}: {reason}")
            outcome.quarantined.append(summary.summary_id)
        wf.refresh_from_db()
        if wf.active_summary_id and cast(Summary, wf.active_summary).purged_by_id:
            # A covering summary that did not cite the purged text is still derived from it: stop serving it.
            lifecycle.quarantine(
                cast(Summary, wf.active_summary), actor, f"purge {purge.purge_id}: derived from purged events"
            )
            outcome.quarantined.append(cast(Summary, wf.active_summary).summary_id)
            wf.refresh_from_db()
        Workflow.objects.filter(pk=wf.pk).update(purge_epoch=F("purge_epoch") + 1, updated_at=now)
        # Events in the tail still count: their tokens are kept as provenance, content is gone.
        wf.refresh_from_db()
        outcome.active_after = cast(Summary, wf.active_summary).summary_id if wf.active_summary_id else None
        _scrub_investigations(wf, quotes, [e.content for e in events])
        # Text kept apart from append-only rows (check details, reasons, audit data) that quotes it.
        detector = PurgedText(
            quotes, [e.content for e in events] + [f.get("text", "") for e in events for f in e.facts]
        )
        outcome.payloads = tombstone_payloads(
            purge,
            detector,
            since=min(e.created_at for e in events),
            derived=summary_payloads(derived, before=purge.at),
        )
        _forget_identifiers(wf, events, detector)
        # Every other registered copy (memoryhub.models.purgeable.EVENT_TEXT): spans, job errors,
        # comments, the admin site's history...; held work is settled so it is never built.
        since = min(e.created_at for e in events)
        _scrub_registered(wf, purge, detector, since)
        outcome.settled = _settle_deferred(wf, purge)
        outcome.legacy_unreachable = _count_legacy_quotes(wf, detector)
        if outcome.scrubbed:
            _request_rederivation(wf, actor)
        Purge.objects.filter(pk=purge.pk).update(affected_summaries=outcome.scrubbed)
        purge.affected_summaries = outcome.scrubbed
        purge.workflow = wf
        record(
            wf.tenant,
            actor,
            "purge.create",
            purge,
            {
                "workflow": wf.external_id,
                "selector": {k: v for k, v in selector.items() if k != "subject"},
                "subject_purged": "subject" in selector,
                "event_count": len(seqs),
                "seq_min": min(seqs),
                "seq_max": max(seqs),
                "affected_summaries": outcome.scrubbed,
                "quarantined": outcome.quarantined,
                "payloads_purged": len(outcome.payloads),
                "deferred_settled": len(outcome.settled),
                "legacy_unreachable": outcome.legacy_unreachable,
                "reason": reason,
                "source": source,
            },
        )
    return outcome


def _forget_identifiers(workflow: Workflow, events: list[Event], detector: PurgedText) -> None:
    """Open tool calls and pending side effects name events by id; an id of a purged event that
    quotes the purged content is replaced by a neutral ``purged-seq-N`` (the count, which trigger
    guards read, is kept). The event row keeps its ids: they are what recognises a re-send."""
    renamed: dict[str, str] = {}
    for e in events:
        for ident in (e.tool_call_id, e.client_event_id):
            if ident and detector.matches(ident):
                renamed[ident] = f"purged-seq-{e.seq}"
    if not renamed:
        return
    Workflow.objects.filter(pk=workflow.pk).update(
        open_tool_calls=[renamed.get(i, i) for i in workflow.open_tool_calls],
        pending_side_effects=[renamed.get(i, i) for i in workflow.pending_side_effects],
    )


def _request_rederivation(workflow: Workflow, actor: Actor) -> None:
    """Derived summaries were scrubbed: ask for a fresh compaction of what remains (new purge epoch)."""

    workflow.refresh_from_db()
    if workflow.head_seq:
        # No compactor available here: the policy's next trigger decision will ask again.
        with contextlib.suppress(InvalidInput):
            request_compaction(workflow, actor=actor)


def _stored_selector(selector: dict[str, Any]) -> dict[str, Any]:
    """The selector as the Purge row keeps it: a subject key may be the erased datum, so only its
    digest is stored (the audit entry already leaves it out)."""
    if "subject" not in selector:
        return selector
    return {"subject_sha256": sha256_hex(selector["subject"].encode())}


# Which function of this module reaches each kind of registered copy (a test checks all are here).
REACHERS: dict[str, str] = {
    Reach.TOMBSTONE: "purge_events",
    Reach.SUMMARY: "tombstone_content",
    Reach.PAYLOAD: "tombstone_payloads",
    Reach.SCRUB: "_scrub_registered",
    Reach.IDENTIFIERS: "_forget_identifiers",
    Reach.INVESTIGATIONS: "_scrub_investigations",
    Reach.SETTLE_DEFERRED: "_settle_deferred",
    Reach.LEGACY_EMPTY: "_count_legacy_quotes",
}


def _registered(reach: str) -> dict[str, list[str]]:
    """model label -> its columns registered with ``reach``."""
    by_model: dict[str, list[str]] = {}
    for label, entry in EVENT_TEXT.items():
        if entry.reach == reach:
            model_label, name = label.rsplit(".", 1)
            by_model.setdefault(model_label, []).append(name)
    return by_model


def _rows_in_reach(model: Any, entry: EventText, workflow: Workflow, since: Any) -> QuerySet:
    """The rows of ``model`` a purge of ``workflow`` reaches (as its registry entry scopes them)."""
    rows = model._base_manager.all()
    if entry.workflow == "self":
        return rows.filter(pk=workflow.pk)
    if entry.workflow:
        return rows.filter(**{entry.workflow: workflow})
    if entry.tenant:
        rows = rows.filter(**{entry.tenant: workflow.tenant_id})
    return rows.filter(**{f"{entry.since}__gte": since})


def scrub_value(value: Any, detector: PurgedText, note: str) -> Any:
    """``value`` with every string that quotes purged text replaced by ``note`` (JSON walked)."""
    if isinstance(value, str):
        return note if detector.matches(value) else value
    if isinstance(value, dict):
        return {k: scrub_value(v, detector, note) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_value(v, detector, note) for v in value]
    return value


def _scrub_registered(workflow: Workflow, purge: Purge, detector: PurgedText, since: Any) -> int:
    """Every column registered as Reach.SCRUB: a value quoting the purged text becomes the purge
    note; the row (who, when, ids) stays. Returns the number of rows changed."""
    note = unavailable_note(purge)
    changed = 0
    for model_label, names in _registered(Reach.SCRUB).items():
        model = apps.get_model(model_label)
        entry = EVENT_TEXT[f"{model_label}.{names[0]}"]
        for row in _rows_in_reach(model, entry, workflow, since).only("pk", *names).iterator(chunk_size=500):
            updates = {}
            for name in names:
                value = getattr(row, name)
                scrubbed = scrub_value(value, detector, note)
                if scrubbed != value:
                    updates[name] = scrubbed
            if updates:
                model._base_manager.filter(pk=row.pk).update(**updates)
                changed += 1
    return changed


def _settle_deferred(workflow: Workflow, purge: Purge) -> list[str]:
    """Compactions held as deferred were reported before this purge and are built later from their
    stored spans: what they summarise may be what was erased, so they are never built (kept, with
    the purge named). Ingest that read one before this purge re-checks the epoch when it writes."""
    settled = []
    for span in OtelSpan.objects.filter(workflow=workflow, mapped_to=SpanMapping.DEFERRED).only(
        "pk", "span_id", "attributes"
    ):
        attributes = {**span.attributes, "memoryhub.settled_by_purge": purge.purge_id}
        OtelSpan.objects.filter(pk=span.pk).update(mapped_to=SpanMapping.KEPT, attributes=attributes)
        settled.append(span.span_id)
    return settled


def _count_legacy_quotes(workflow: Workflow, detector: PurgedText) -> int:
    """Legacy text columns of append-only rows (written before payloads existed) cannot be updated:
    count those quoting the purged text so the purge reports them instead of missing them."""
    found = 0
    for model_label, names in _registered(Reach.LEGACY_EMPTY).items():
        model = apps.get_model(model_label)
        entry = EVENT_TEXT[f"{model_label}.{names[0]}"]
        for values in _rows_in_reach(model, entry, workflow, None).values_list(*names):
            found += any(v and detector.matches(v) for v in values)
    return found


def _scrub_investigations(workflow: Workflow, quotes: list[str], contents: list[str]) -> None:
    """Saved investigations keep their verdict and seqs but lose any quoted purged text."""
    lowered = [q.lower() for q in quotes]
    purged_text = [c.lower() for c in contents if c]
    for inv in Investigation.objects.filter(artifact__workflow=workflow):
        changed = False
        fact = inv.fact
        # The investigated phrase itself may be the erased data (a name, an id): any length counts.
        if _is_purged_text(fact, lowered, purged_text) or any(fact.lower() in c for c in purged_text):
            fact, changed = "[purged]", True
            lowered.append(inv.fact.lower())
        evidence = _scrub(inv.evidence, lowered, purged_text)
        if evidence != inv.evidence:
            changed = True
        if changed:
            Investigation.objects.filter(pk=inv.pk).update(fact=fact, evidence=evidence)


def _is_purged_text(text: str, quotes: list[str], contents: list[str]) -> bool:
    """Contains a purged quote, or is itself an excerpt (at least MIN_QUOTE_CHARS) of purged content."""
    low = text.lower()
    if any(q in low for q in quotes):
        return True
    excerpt = low.strip(" .…")
    return len(excerpt) >= MIN_QUOTE_CHARS and any(excerpt in c for c in contents)


def _scrub(value: Any, quotes: list[str], contents: list[str]) -> Any:
    if isinstance(value, str):
        return "[purged]" if _is_purged_text(value, quotes, contents) else value
    if isinstance(value, dict):
        return {k: _scrub(v, quotes, contents) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub(v, quotes, contents) for v in value]
    return value


def unavailable_note(purge: Purge) -> str:
    """The sentence every page, export and bundle shows for purged material."""
    return f"unavailable: purged by {purge.purge_id} on {purge.at:%Y-%m-%d}"


def purges_of(tenant: Tenant) -> QuerySet[Purge]:
    """The tenant's purges, newest first, with their workflow."""
    return Purge.objects.filter(tenant=tenant).select_related("workflow").order_by("-at", "-id")
