"""Purgeable payloads: the text of append-only records, stored apart so a purge can reach it.

``store_payload`` writes a payload (digest = sha256 of its canonical JSON); ``split_audit_data``
decides which audit data keys stay in the hash chain (structure) and which go to the payload
(text); ``tombstone_payloads`` is the purge's part: every payload written since the purged events
arrived that quotes them is emptied (digest kept) and points at the purge.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.utils import timezone

from audit.models import AuditEntry, Payload, Purge
from memoryhub.models import LifecycleEvent, Summary, ValidationRecord
from memoryhub.models.purgeable import payload_digest

# Audit data keys that stay in the chained row when their values are ids, numbers, statuses or
# lists/objects of those. Any other key with text — reasons, details, facts, notes, selectors, and
# every key nobody listed here yet — goes to the purgeable payload.
CHAINED_KEYS = frozenset(
    {
        "workflow",
        "workflows",
        "version",
        "covers",
        "content_hash",
        "compactor",
        "job",
        "fresh_job",
        "source_revision",
        "validator_version",
        "active_revision",
        "expected_revision",
        "observed_revision",
        "superseded",
        "by",
        "fallback",
        "automatic",
        "event_count",
        "seq_min",
        "seq_max",
        "affected_summaries",
        "quarantined",
        "source",
        "code",
        "purge_epoch",
        "summary",
        "summary_id",
        "status",
        "from_status",
        "to_status",
        "result",
        "role",
        "record_class",
        "days",
        "verdict",
        "artifact",
        "subject_purged",
        "from",  # a lifecycle entry's statuses
        "to",
    }
)
SHINGLE = 20  # a derived text sharing this many consecutive characters with purged content quotes it


def _structural(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float):
        return True
    if isinstance(value, str):
        return len(value) <= 200 and not any(ch.isspace() for ch in value)
    if isinstance(value, list):
        return all(_structural(v) for v in value)
    if isinstance(value, dict):
        return all(_structural(v) for v in value.values())
    return False


def split_audit_data(data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(chained, text): numbers/bools/None and listed structural keys stay chained; the rest is text."""
    chained: dict[str, Any] = {}
    text: dict[str, Any] = {}
    for key, value in data.items():
        if (
            value is None
            or value == ""  # holds no text
            or isinstance(value, bool | int | float)
            or key in CHAINED_KEYS
            and _structural(value)
        ):
            chained[key] = value
        else:
            text[key] = value
    return chained, text


def store_payload(tenant_id: int, workflow_id: int | None, body: dict[str, Any]) -> Payload:
    return Payload.objects.create(
        tenant_id=tenant_id, workflow_id=workflow_id, body=body, digest=payload_digest(body)
    )


# -- the purge's part --------------------------------------------------------------------------------


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _strings(v)


class PurgedText:
    """Recognises text derived from purged content: a purged quote or key anywhere in it, or any
    run of SHINGLE characters copied from the purged content (an excerpt cut mid-sentence too)."""

    def __init__(self, quotes: Iterable[str], contents: Iterable[str]) -> None:
        self.quotes = [q.lower() for q in quotes if q]
        self.shingles: set[str] = set()
        for content in contents:
            low = " ".join(content.lower().split())
            self.shingles.update(low[i : i + SHINGLE] for i in range(max(0, len(low) - SHINGLE + 1)))

    def matches(self, value: Any) -> bool:
        for text in _strings(value):
            low = text.lower()
            if any(q in low for q in self.quotes):
                return True
            norm = " ".join(low.replace("…", " ").split())
            if self.shingles and any(
                norm[i : i + SHINGLE] in self.shingles for i in range(len(norm) - SHINGLE + 1)
            ):
                return True
        return False


def summary_payloads(summaries: list[Summary], before: datetime) -> set[int]:
    """Payloads of the records about ``summaries`` (validation records, lifecycle events, audit
    entries) written before ``before``: text about a summary derived from purged events is derived
    from them too, paraphrase or not, so it goes with them."""

    pks = [s.pk for s in summaries]
    ids = set(ValidationRecord.objects.filter(summary__in=pks).values_list("payload_id", flat=True))
    ids |= set(LifecycleEvent.objects.filter(summary__in=pks).values_list("payload_id", flat=True))
    ids |= set(
        AuditEntry.objects.filter(
            object_type="summary", object_id__in=[s.summary_id for s in summaries]
        ).values_list("payload_id", flat=True)
    )
    ids.discard(None)
    return set(Payload.objects.filter(pk__in=ids, created_at__lt=before).values_list("pk", flat=True))


def tombstone_payloads(
    purge: Purge, detector: PurgedText, since: datetime, derived: set[int] | None = None
) -> list[int]:
    """Empty every payload of the purge's tenant written since ``since`` that holds purged text,
    and the ``derived`` ones (records about summaries of the purged events)."""
    hit: set[int] = set(derived or ())
    rows = Payload.objects.filter(tenant_id=purge.tenant_id, purged_at__isnull=True, created_at__gte=since)
    for payload in rows.exclude(pk__in=hit).only("pk", "body").iterator(chunk_size=500):
        if detector.matches(payload.body):
            hit.add(payload.pk)
    return tombstone_payload_ids(purge, hit)


def tombstone_payload_ids(purge: Purge, ids: Iterable[int]) -> list[int]:
    """Empty the payloads ``ids`` (digest kept) and point them at ``purge``."""
    hit = sorted(set(ids))
    if hit:
        Payload.objects.filter(pk__in=hit, purged_at__isnull=True).update(
            body={}, purged_by=purge, purged_at=timezone.now()
        )
    return hit
