"""Context assembly: the model-facing view of a workflow (active summary + the whole tail).

A read returns the active summary (or none) plus **every** event after its watermark up to the head
seen in the same snapshot — never trimmed to fit a budget (that is the trigger's job). Each read
carries two identifiers:

* ``manifest_hash`` — ``sha256`` of a canonical manifest naming exactly what was returned (summary
  id/version/hash/watermark and each tail event's seq, content hash and token count). Summaries
  are immutable and events append-only (a purge keeps hashes), so the manifest of any past read
  can be recomputed from its coordinates.
* ``context_id`` — ``ctx_`` + a value signed with the server's key that encodes those coordinates
  (workflow, summary, its status at read, watermark, head). When a consumer trace quotes it, the
  server learns what it actually served and when, without logging every read. It is deterministic:
  two reads of the same state get the same id.

``include_dropped`` adds the events the served summary's ``dropped`` manifest declares it left out
(extractive-v3): a reader that needs a dropped detail fetches it by the seq the summary names,
in pages (``dropped_from_seq`` / ``next_from_seq``), never silently cut.

Reads cost two queries (the workflow row with its active summary, then the tail by the
``(workflow, seq)`` unique index), independent of how long the history is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.db.models import Q
from rest_framework.fields import DateTimeField

from audit.models import Purge
from memoryhub.compaction.types import DROPPED_FIELD, dropped_seqs
from memoryhub.core.canonical import hash_value
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory.summaries import summary_dict
from memoryhub.models import Event, Summary, Workflow
from memoryhub.models.workflows import EVENT_API_FIELDS, EVENT_CLIENT_FIELDS, masked_identifier

MANIFEST_SCHEMA = "memoryhub.context-manifest/v1"
CONTEXT_ID_PREFIX = "ctx_"
_SIGNER = signing.Signer(salt="memoryhub.context-id")
_DATETIME = DateTimeField()  # same rendering as the events API
# The manifest of a read the server describes or attests hashes every tail event: computed only
# while the tail is at most this long (what a model can read at once), so the cost stays flat.
MANIFEST_MAX_TAIL_EVENTS = 2000


@dataclass(frozen=True)
class ReadCoordinates:
    """What one context read served: enough to recompute its manifest later."""

    workflow_pk: int
    summary_pk: int | None
    summary_status: str  # "" when no summary was served
    watermark: int
    head_seq: int

    @classmethod
    def served(cls, workflow: Workflow, summary: Summary | None, head_seq: int) -> ReadCoordinates:
        """The read of ``summary`` (None: raw history) plus the tail up to ``head_seq``."""
        return cls(
            workflow_pk=workflow.pk,
            summary_pk=summary.pk if summary else None,
            summary_status=summary.status if summary else "",
            watermark=summary.covers_to_seq if summary else 0,
            head_seq=head_seq,
        )


def issue_context_id(coords: ReadCoordinates) -> str:
    """A signed, self-describing id of what a read served (two reads of one state share it, so a
    re-run that read the same context can be recognised as the same model call)."""
    value = ".".join(
        [
            str(coords.workflow_pk),
            str(coords.summary_pk or 0),
            coords.summary_status or "-",
            str(coords.watermark),
            str(coords.head_seq),
        ]
    )
    return CONTEXT_ID_PREFIX + _SIGNER.sign(value)


def parse_context_id(context_id: str) -> ReadCoordinates | None:
    """Coordinates of a context id this server issued; None for a foreign id (no ``ctx_`` prefix).

    A ``ctx_`` id whose signature does not verify is a 400: it was altered or forged.
    """
    if not context_id.startswith(CONTEXT_ID_PREFIX):
        return None
    try:
        value = _SIGNER.unsign(context_id[len(CONTEXT_ID_PREFIX) :])
        workflow_pk, summary_pk, status, watermark, head = value.split(".")
        return ReadCoordinates(
            workflow_pk=int(workflow_pk),
            summary_pk=int(summary_pk) or None,
            summary_status="" if status == "-" else status,
            watermark=int(watermark),
            head_seq=int(head),
        )
    except (signing.BadSignature, ValueError):
        raise InvalidInput(
            "context_id was not issued by this server (bad signature)", code="invalid_context_id"
        ) from None


def build_manifest(
    workflow: Workflow, summary: Summary | None, tail: list[tuple[int, str, int]], head_seq: int
) -> dict[str, Any]:
    """The canonical description of a read; ``tail`` is ``[(seq, content_hash, token_count)]``."""
    return {
        "schema": MANIFEST_SCHEMA,
        "workflow": workflow.external_id,
        "head_seq": head_seq,
        "summary": None
        if summary is None
        else {
            "summary_id": summary.summary_id,
            "version": summary.version,
            "covers_to_seq": summary.covers_to_seq,
            "content_hash": summary.content_hash,
        },
        "tail": [[seq, content_hash, tokens] for seq, content_hash, tokens in tail],
    }


def manifest_hash(
    workflow: Workflow, summary: Summary | None, tail: list[tuple[int, str, int]], head_seq: int
) -> str:
    """``sha256:`` of the canonical manifest of a read."""
    return hash_value(build_manifest(workflow, summary, tail, head_seq))


def recompute_manifest_hash(workflow: Workflow, coords: ReadCoordinates) -> str:
    """Manifest hash of a past read, from its coordinates (events keep their hashes after a purge)."""
    summary = Summary.objects.filter(pk=coords.summary_pk).first() if coords.summary_pk else None
    rows = Event.objects.filter(workflow=workflow, seq__gt=coords.watermark, seq__lte=coords.head_seq)
    tail = list(rows.order_by("seq").values_list("seq", "content_hash", "token_count"))
    return manifest_hash(workflow, summary, tail, coords.head_seq)


def served_summary(workflow: Workflow) -> Summary | None:
    """The summary a reader gets: the active one, unless a purge withdrew it (then raw history)."""
    summary = workflow.active_summary if workflow.active_summary_id else None
    if summary is not None and summary.purged_by_id is not None:
        return None
    return summary


# The summary a context read serves: parsed content, the compactor by name.
CONTEXT_SUMMARY_FIELDS = (
    "summary_id",
    "version",
    "status",
    "covers_from_seq",
    "covers_to_seq",
    "content",
    "content_hash",
    "token_count",
    "compactor",
    "source_refs",
)


def _summary_out(summary: Summary) -> dict[str, Any]:
    return summary_dict(
        summary,
        CONTEXT_SUMMARY_FIELDS,
        content=json.loads(summary.content),
        compactor=summary.compactor_name,
    )


def _event_out(row: dict[str, Any], purge_ids: dict[int, str]) -> dict[str, Any]:
    out = {key: row[key] for key in EVENT_CLIENT_FIELDS}
    out["created_at"] = _DATETIME.to_representation(row["created_at"])
    out["purged_at"] = _DATETIME.to_representation(row["purged_at"]) if row["purged_at"] else None
    out["purge_id"] = purge_ids.get(row["purge_id"]) if row["purge_id"] else None
    if row["purged_at"]:  # ids may quote the purged content: digests only (as Event.visible_*)
        out["client_event_id"] = masked_identifier(row["client_event_id"])
        out["tool_call_id"] = masked_identifier(row["tool_call_id"]) or ""
    return out


DROPPED_PAGE = 200  # events per page of a dropped-events read (at most DROPPED_PAGE_MAX)
DROPPED_PAGE_MAX = 1000


def _declared_spans(summary: Summary) -> list[tuple[int, int]]:
    """The seq spans the summary's manifest declares dropped, merged, inside its coverage."""
    try:
        manifest = json.loads(summary.content).get(DROPPED_FIELD) or []
    except (ValueError, AttributeError):
        return []
    spans: list[tuple[int, int]] = []
    for entry in manifest:
        seqs = dropped_seqs(entry)
        first, last = max(seqs.start, summary.covers_from_seq), min(seqs.stop - 1, summary.covers_to_seq)
        if first <= last:
            spans.append((first, last))
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def dropped_events(
    workflow: Workflow, summary: Summary | None, *, from_seq: int = 0, limit: int = DROPPED_PAGE
) -> dict[str, Any]:
    """One page of the events ``summary`` declares dropped (seq > ``from_seq``, in seq order)."""
    spans = _declared_spans(summary) if summary is not None else []
    page: dict[str, Any] = {
        "summary_id": summary.summary_id if summary is not None else None,
        "declared_seqs": sum(last - first + 1 for first, last in spans),
        "events": [],
        "next_from_seq": None,
    }
    wanted = [(max(first, from_seq + 1), last) for first, last in spans if last > from_seq]
    if not wanted:
        return page
    where = Q()
    for first, last in wanted:
        where |= Q(seq__gte=first, seq__lte=last)
    rows = list(
        Event.objects.filter(where, workflow=workflow).order_by("seq").values(*EVENT_API_FIELDS)[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit]
    purge_ids: dict[int, str] = {}
    if any(row["purge_id"] for row in rows):
        wanted_purges = {row["purge_id"] for row in rows if row["purge_id"]}
        purge_ids = dict(Purge.objects.filter(pk__in=wanted_purges).values_list("pk", "purge_id"))
    page["events"] = [_event_out(row, purge_ids) for row in rows]
    page["next_from_seq"] = rows[-1]["seq"] if more else None
    return page


def assemble_context(
    workflow: Workflow,
    *,
    min_seq: int | None = None,
    include_dropped: bool = False,
    dropped_from_seq: int = 0,
    dropped_limit: int = DROPPED_PAGE,
) -> dict[str, Any]:
    """The context for ``workflow`` as loaded (with ``active_summary`` selected): one snapshot.

    ``min_seq`` is the read-after-write guard: a head below it is a 409, never a stale answer.
    The tail is bounded by the head of the same snapshot, so a concurrent append can neither leave
    a gap nor slip in an event the reported head does not cover.
    """
    head = workflow.head_seq
    if min_seq is not None and head < min_seq:
        raise Conflict(
            f"workflow head is {head}, below min_seq {min_seq}: refusing to serve stale context",
            code="stale_context",
            head_seq=head,
            min_seq=min_seq,
            # A read replica behind the primary catches up within moments: ask the client to retry.
            retry_after=1,
        )
    summary = served_summary(workflow)
    watermark = summary.covers_to_seq if summary else 0
    rows = list(
        Event.objects.filter(workflow=workflow, seq__gt=watermark, seq__lte=head)
        .order_by("seq")
        .values(*EVENT_API_FIELDS)
    )
    purge_ids: dict[int, str] = {}
    if any(row["purge_id"] for row in rows):
        wanted = {row["purge_id"] for row in rows if row["purge_id"]}
        purge_ids = dict(Purge.objects.filter(pk__in=wanted).values_list("pk", "purge_id"))
    tail = [_event_out(row, purge_ids) for row in rows]
    summary_tokens = summary.token_count if summary else 0
    tail_tokens = sum(row["token_count"] for row in rows)
    coords = ReadCoordinates.served(workflow, summary, head)
    refs = [(row["seq"], row["content_hash"], row["token_count"]) for row in rows]
    extra: dict[str, Any] = {}
    if include_dropped:
        extra["dropped"] = dropped_events(workflow, summary, from_seq=dropped_from_seq, limit=dropped_limit)
    return {
        "workflow": workflow.external_id,
        "summary": _summary_out(summary) if summary else None,
        "tail": tail,
        "head_seq": head,
        "tail_from_seq": watermark + 1,
        "tail_to_seq": head,
        "active_revision": workflow.active_revision,
        "tokens": {"summary": summary_tokens, "tail": tail_tokens, "total": summary_tokens + tail_tokens},
        "context_id": issue_context_id(coords),
        "manifest_hash": manifest_hash(workflow, summary, refs, head),
        **extra,
    }
