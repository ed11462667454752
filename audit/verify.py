"""Verification of a tenant's hash-chained audit log.

The chain is walked in seq order and every entry is recomputed: its ``entry_hash`` must equal the
hash of its body, its ``prev_hash`` must equal the previous entry's hash, and seqs must be gapless
from 1. The walk stops at the first bad entry and says what kind of tampering it looks like:

- ``edited``     an entry's body (or its unpurged payload's text) no longer matches its hash (or its hash was recomputed, which
                 the next entry's ``prev_hash`` — or the chain head — still contradicts);
- ``deleted``    a seq is missing from the middle of the chain;
- ``reordered``  an entry links to a predecessor that sits elsewhere in the chain;
- ``truncated``  entries are missing from the end: the chain head row or an exported checkpoint
                 names a seq the log no longer reaches.

Beyond the chain, every other digest is checked against what it digests (``verify_digests``):
every row of every model that keeps its text in a purgeable payload (found by walking the models
for a foreign key to ``audit.Payload`` with its ``<name>_digest`` beside it — validation records,
lifecycle events, anything added later), every payload's own digest, summary and event content
hashes, and comments against the digest their audit entry kept. An unpurged copy that no longer
matches is reported as ``edited`` with the object that owns it. ``DIGEST_COLUMNS`` says which
check covers each digest column; a test fails on a digest column of any model that none covers.

A checkpoint (``export_checkpoint``) is what makes truncation provable when the head row was
rewritten too: keep it outside the database and pass it back to ``verify_chain``.

Entries are written pending and sequenced after their commit (``audit.log``). Verification first
sequences what is pending, then walks the chain up to the head it read before the walk (the
sequencer moves entries and head in one transaction, so a concurrent append cannot look like
truncation), and reports what is still pending — normally nothing, or entries seconds old.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from django.apps import apps
from django.db import models
from django.db.models import Subquery
from django.utils import timezone

from audit.log import GENESIS_HASH, compute_entry_hash, pending_summary, sequence_pending
from audit.models import AuditChainHead, AuditEntry, Payload, Purge, SummaryComment
from memoryhub.core.canonical import hash_text, sha256_hex
from memoryhub.core.errors import InvalidInput
from memoryhub.models import Event, Summary, Tenant
from memoryhub.models.purgeable import payload_digest

CHUNK = 2000


def _result(
    ok: bool, entries: int, first_bad_seq: int | None, problem: str | None, detail: str, **extra: Any
):
    return {
        "ok": ok,
        "entries": entries,
        "first_bad_seq": first_bad_seq,
        "problem": problem,
        "detail": detail,
        **extra,
    }


def _links_elsewhere(tenant: Tenant, prev_hash: str, exclude_seq: int) -> int | None:
    """The seq of another entry whose hash this entry's prev_hash names (only looked up on a break)."""
    other = (
        AuditEntry.objects.filter(tenant=tenant, entry_hash=prev_hash)
        .exclude(seq=exclude_seq)
        .values_list("seq", flat=True)
        .first()
    )
    return other


def _payload_intact(entry: AuditEntry) -> bool:
    """The entry's payload still hashes to the digest the chain recorded (a purged one is exempt:
    its text is gone on purpose, its digest stays in the chain)."""
    payload = entry.payload
    if payload is None or payload.purged_at is not None:
        # Gone only by a named purge: an emptied payload that names none was not purged, it was wiped.
        return entry.payload_id is None or (payload is not None and payload.purged_by_id is not None)
    return payload.digest == entry.payload_digest and payload_digest(payload.body) == entry.payload_digest


def parse_checkpoint(tenant: Tenant, checkpoint: dict[str, Any] | None) -> dict[str, Any] | None:
    """Validate a checkpoint ``{tenant, seq, entry_hash}`` for ``tenant`` (400 on a malformed one)."""
    if checkpoint is None:
        return None
    if not isinstance(checkpoint, dict):
        raise InvalidInput(
            "checkpoint must be an object {tenant, seq, entry_hash}", code="invalid_checkpoint"
        )
    seq, entry_hash = checkpoint.get("seq"), checkpoint.get("entry_hash")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidInput("checkpoint.seq must be a non-negative integer", code="invalid_checkpoint")
    if not isinstance(entry_hash, str) or not entry_hash.startswith("sha256:") or len(entry_hash) != 71:
        raise InvalidInput(
            "checkpoint.entry_hash must be 'sha256:' + 64 hex digits", code="invalid_checkpoint"
        )
    named = checkpoint.get("tenant")
    if named not in (None, "", tenant.slug):
        raise InvalidInput(
            f"checkpoint is for tenant {named!r}, not {tenant.slug!r}", code="invalid_checkpoint"
        )
    return {"tenant": tenant.slug, "seq": seq, "entry_hash": entry_hash}


def export_checkpoint(tenant: Tenant) -> dict[str, Any]:
    """The tenant's current chain head as a checkpoint to keep outside the database."""
    last = (
        AuditEntry.objects.filter(tenant=tenant, seq__isnull=False)
        .order_by("-seq")
        .values("seq", "entry_hash", "at")
        .first()
    )
    if last is None:
        return {"tenant": tenant.slug, "seq": 0, "entry_hash": GENESIS_HASH, "at": None}
    return {
        "tenant": tenant.slug,
        "seq": last["seq"],
        "entry_hash": last["entry_hash"],
        "at": last["at"].isoformat(),
    }


# -- every other digest ------------------------------------------------------------------------------

MAX_PROBLEMS = 50  # reported per tenant; the count says how many more
# The note a purge leaves in place of scrubbed text (audit.purge.unavailable_note).
PURGE_NOTE = re.compile(r"unavailable: purged by (prg_[0-9a-f]{1,32}) on \d{4}-\d{2}-\d{2}\Z")


def payload_owners() -> Iterator[tuple[type[models.Model], models.ForeignKey, str]]:
    """(model, payload foreign key, digest column) of every model keeping text in a payload."""
    for model in apps.get_models():
        names = {f.name for f in model._meta.concrete_fields}
        for field in model._meta.concrete_fields:
            if (
                isinstance(field, models.ForeignKey)
                and field.related_model is Payload
                and f"{field.name}_digest" in names
            ):
                yield model, field, f"{field.name}_digest"


def _owner(obj: models.Model) -> str:
    return f"{obj._meta.verbose_name} {obj.pk} ({obj})"


def _problem(obj: models.Model, column: str, detail: str, payload: int | None = None) -> dict[str, Any]:
    return {
        "object_type": obj._meta.label,
        "object_id": obj.pk,
        "owner": _owner(obj),
        "field": column,
        "payload": payload if payload is not None else (obj.pk if isinstance(obj, Payload) else None),
        "detail": f"{_owner(obj)}: {detail}",
    }


def _payload_rows(tenant: Tenant) -> Iterator[dict[str, Any]]:
    for model, fk, digest in payload_owners():
        if model is AuditEntry:
            continue  # the chain walk checks each entry's payload in seq order
        rows = (
            model._base_manager.filter(**{f"{fk.name}__tenant": tenant})
            .select_related(fk.name)
            .only("pk", digest, *[f"{fk.name}__{f}" for f in ("body", "digest", "purged_at", "purged_by")])
        )
        for row in rows.iterator(chunk_size=CHUNK):
            payload = getattr(row, fk.name)
            recorded = getattr(row, digest)
            if payload.purged_at is not None:
                if payload.purged_by_id is None:
                    detail = f"its payload {payload.pk} was emptied without a purge"
                    yield _problem(row, digest, detail, payload.pk)
            elif payload_digest(payload.body) != recorded or payload.digest != recorded:
                detail = f"its payload {payload.pk} no longer matches the digest it recorded"
                yield _problem(row, digest, detail, payload.pk)


def _payloads(tenant: Tenant) -> Iterator[dict[str, Any]]:
    for payload in Payload.objects.filter(tenant=tenant, purged_at__isnull=True).iterator(chunk_size=CHUNK):
        if payload_digest(payload.body) != payload.digest:
            yield _problem(payload, "digest", "its body no longer matches its digest")


def _summaries(tenant: Tenant) -> Iterator[dict[str, Any]]:
    rows = Summary.objects.filter(tenant=tenant, purged_by__isnull=True).only("pk", "content", "content_hash")
    for summary in rows.iterator(chunk_size=CHUNK):
        if sha256_hex(summary.content.encode("utf-8")) != summary.content_hash:
            yield _problem(summary, "content_hash", "its content no longer matches its content hash")


def _events(tenant: Tenant) -> Iterator[dict[str, Any]]:
    rows = Event.objects.filter(workflow__tenant=tenant, purged_at__isnull=True).only(
        "pk", "workflow_id", "seq", "content", "content_hash"
    )
    for event in rows.iterator(chunk_size=CHUNK):
        if hash_text(event.content) != event.content_hash:
            yield _problem(event, "content_hash", "its content no longer matches its content hash")


def _comments(tenant: Tenant) -> Iterator[dict[str, Any]]:
    """A comment's text against the digest its ``summary.comment`` audit entry kept."""
    digests: dict[Any, str] = {}
    entries = AuditEntry.objects.filter(tenant=tenant, action="summary.comment").select_related("payload")
    for entry in entries.iterator(chunk_size=CHUNK):
        data = entry.data if isinstance(entry.data, dict) else {}
        unpurged = entry.payload is not None and entry.payload.purged_at is None
        if unpurged and "text_sha256" in data:
            digests[data.get("comment")] = data["text_sha256"]
    purges = set(Purge.objects.filter(tenant=tenant).values_list("purge_id", flat=True))
    for comment in SummaryComment.objects.filter(tenant=tenant).iterator(chunk_size=CHUNK):
        recorded = digests.get(comment.pk)
        if recorded is None or hash_text(comment.text) == recorded:
            continue
        scrubbed = PURGE_NOTE.match(comment.text)
        if scrubbed is None or scrubbed.group(1) not in purges:  # a purge's note names a real purge
            yield _problem(comment, "text", "its text no longer matches the digest its audit entry kept")


# Which check covers each digest column ("model.column" -> check); the payload pairs are found by
# payload_owners(). A test walks every model's *_hash / *digest / *sha256 columns against this.
DIGEST_CHECKS: dict[str, Callable[[Tenant], Iterator[dict[str, Any]]]] = {
    "audit.Payload.digest": _payloads,
    "memoryhub.Summary.content_hash": _summaries,
    "memoryhub.Event.content_hash": _events,
}
CHAIN_COLUMNS = frozenset(
    {"audit.AuditEntry.entry_hash", "audit.AuditEntry.prev_hash", "audit.AuditChainHead.entry_hash"}
)
UNVERIFIABLE: dict[str, str] = {
    "memoryhub.ApiKey.secret_hash": "the secret is never stored: there is nothing to recompute it from",
    "memoryhub.Artifact.content_hash": "the artifact lives outside MemoryHub; its producer's claim",
    "memoryhub.ConsumerTrace.manifest_hash": "the context manifest a consumer read is not stored",
}


def verify_digests(tenant: Tenant) -> dict[str, Any]:
    """Every digest of ``tenant`` outside the chain, recomputed: ``{checked, problems, more}``."""
    checks: list[Callable[[Tenant], Iterator[dict[str, Any]]]] = [
        _payload_rows,
        *DIGEST_CHECKS.values(),
        _comments,
    ]
    problems: list[dict[str, Any]] = []
    found = 0
    owned: set[int] = set()  # payloads already reported through the record that owns them
    for check in checks:
        for problem in check(tenant):
            if problem["object_type"] == Payload._meta.label and problem["payload"] in owned:
                continue
            if problem["payload"] is not None:
                owned.add(problem["payload"])
            found += 1
            if len(problems) < MAX_PROBLEMS:
                problems.append(problem)
    return {
        "problems": problems,
        "more": found - len(problems),
        "checks": [c.__name__.strip("_") for c in checks],
    }


def verify_chain(tenant: Tenant, checkpoint: dict[str, Any] | None = None) -> dict[str, Any]:
    """Sequence ``tenant``'s pending entries, then recompute its chain; returns ``{ok, entries,
    first_bad_seq, problem, detail, head_seq, head_hash, checkpoint, pending, pending_oldest_age_s,
    sequenced_now, digests}``; ``digests`` lists every other digest that no longer matches, with
    its owning object (``verify_digests``), and makes ``ok`` false. ``entries`` counts the entries read before the walk stopped; ``pending`` the
    entries still waiting for the sequencer (the oldest written ``pending_oldest_age_s`` seconds ago);
    ``sequenced_now`` the ones this call had to sequence itself (the sequencer was behind)."""
    checkpoint = parse_checkpoint(tenant, checkpoint)
    sequenced_now = sequence_pending(tenant)
    result = _walk(tenant, checkpoint)
    digests = verify_digests(tenant)
    if digests["problems"]:
        first = digests["problems"][0]
        result = {**result, "edited_object": first}
        if result["ok"]:  # a broken chain is reported first; the owner is named either way
            more = len(digests["problems"]) + digests["more"] - 1
            detail = first["detail"] + (f" (and {more} more)" if more else "")
            result = {**result, "ok": False, "problem": "edited", "detail": detail}
    result["digests"] = digests
    pending, oldest = pending_summary(tenant)
    age = round((timezone.now() - oldest).total_seconds(), 3) if oldest is not None else None
    return {**result, "pending": pending, "pending_oldest_age_s": age, "sequenced_now": sequenced_now}


def _walk(tenant: Tenant, checkpoint: dict[str, Any] | None) -> dict[str, Any]:
    """The chain walk of ``verify_chain`` over the sequenced entries up to the chain head."""
    head = AuditChainHead.objects.filter(tenant=tenant).values("seq", "entry_hash").first()
    prev_hash, prev_seq, prev_at = GENESIS_HASH, 0, None
    count = 0
    checkpoint_seen = checkpoint is None or checkpoint["seq"] == 0
    if checkpoint is not None and checkpoint["seq"] == 0 and checkpoint["entry_hash"] != GENESIS_HASH:
        return _result(
            False,
            0,
            0,
            "edited",
            "checkpoint at seq 0 must name the genesis hash",
            head_seq=0,
            head_hash=GENESIS_HASH,
            checkpoint=checkpoint,
        )
    entries = AuditEntry.objects.filter(tenant=tenant, seq__isnull=False)
    if head is not None:
        entries = entries.filter(seq__lte=head["seq"])
    entries = entries.select_related("payload").order_by("seq")
    for entry in entries.iterator(chunk_size=CHUNK):
        count += 1
        expected_seq = prev_seq + 1
        extra = {"head_seq": prev_seq, "head_hash": prev_hash, "checkpoint": checkpoint}
        if entry.seq != expected_seq:
            return _result(
                False,
                count,
                expected_seq,
                "deleted",
                f"seq {expected_seq}–{entry.seq - 1} missing: the chain jumps from {prev_seq} to {entry.seq}",
                **extra,
            )
        body_ok = compute_entry_hash(entry) == entry.entry_hash and _payload_intact(entry)
        link_ok = entry.prev_hash == prev_hash
        if not link_ok:
            elsewhere = _links_elsewhere(tenant, entry.prev_hash, entry.seq)
            if elsewhere is not None or (prev_at is not None and entry.at < prev_at):
                where = f"entry {elsewhere}" if elsewhere is not None else "an entry out of order"
                return _result(
                    False,
                    count,
                    entry.seq,
                    "reordered",
                    f"entry {entry.seq} follows {where}, not entry {prev_seq}",
                    **extra,
                )
            if body_ok:
                # The entry is self-consistent, so the predecessor's hash changed after this entry
                # was written: the predecessor was edited and its hash recomputed.
                return _result(
                    False,
                    count,
                    prev_seq,
                    "edited",
                    f"entry {prev_seq} no longer has the hash entry {entry.seq} recorded as its predecessor",
                    **extra,
                )
        if not body_ok:
            return _result(
                False,
                count,
                entry.seq,
                "edited",
                f"entry {entry.seq}'s contents do not match its entry_hash",
                **extra,
            )
        if not link_ok:
            return _result(
                False,
                count,
                entry.seq,
                "edited",
                f"entry {entry.seq}'s prev_hash does not match entry {prev_seq}",
                **extra,
            )
        if checkpoint is not None and entry.seq == checkpoint["seq"]:
            checkpoint_seen = True
            if entry.entry_hash != checkpoint["entry_hash"]:
                return _result(
                    False,
                    count,
                    entry.seq,
                    "edited",
                    f"entry {entry.seq} does not have the hash recorded in the checkpoint",
                    **extra,
                )
        prev_hash, prev_seq, prev_at = entry.entry_hash, entry.seq, entry.at
    extra = {"head_seq": prev_seq, "head_hash": prev_hash, "checkpoint": checkpoint}
    if head is not None and _beyond_head(tenant):
        return _result(
            False,
            count,
            head["seq"] + 1,
            "head_mismatch",
            f"entries after the chain head ({head['seq']}) exist",
            **extra,
        )
    if checkpoint is not None and not checkpoint_seen:
        return _result(
            False,
            count,
            prev_seq + 1,
            "truncated",
            f"the checkpoint names seq {checkpoint['seq']} but the log ends at {prev_seq}",
            **extra,
        )
    if head is not None:
        if head["seq"] > prev_seq:
            return _result(
                False,
                count,
                prev_seq + 1,
                "truncated",
                f"the chain head says seq {head['seq']} but the log ends at {prev_seq}",
                **extra,
            )
        if head["entry_hash"] != prev_hash:
            return _result(
                False,
                count,
                prev_seq,
                "edited",
                f"entry {prev_seq} does not have the hash the chain head recorded",
                **extra,
            )
    return _result(True, count, None, None, f"{count} entries verified", **extra)


def _beyond_head(tenant: Tenant) -> bool:
    """Sequenced entries past the chain head exist (one statement, one snapshot: the sequencer
    moves entries and head together, so only a rewound head shows this)."""
    head_seq = AuditChainHead.objects.filter(tenant=tenant).values("seq")
    return AuditEntry.objects.filter(tenant=tenant, seq__gt=Subquery(head_seq)).exists()
