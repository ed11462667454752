"""The hash-chained, per-tenant audit log.

``record()`` must run inside the caller's transaction so the entry commits (or rolls back) with the
change it describes. It inserts the entry *pending* (no seq, no hashes) and takes no lock, so
writers in one tenant never wait for each other on the chain.

``sequence_pending()`` integrates the committed pending entries into the chain, in batches, like a
transparency log integrating queued leaves: it locks the tenant's chain head row (``SKIP LOCKED``:
one sequencer per chain, the others go away), claims the pending entries in insert (id) order,
gives each the next seq, the previous hash and its own hash, and moves the head — all in one short
transaction. It only ever sees committed entries (read committed: an open transaction's insert is
invisible), so an entry whose transaction commits late is simply sequenced by a later run: id order
is not commit order, and the chain's order is the order entries became visible to the sequencer.
It runs right after the writer's commit (``on_commit``, best effort), on this process's sequencer
thread (``background``, see ``audit.sequencer``) so the writer does not wait for it, and from the
beat sweep ``audit.sequence_pending`` (the backstop); verification runs it first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, models, transaction
from django.utils import timezone

from audit.models import TEXT_KEYS, AuditChainHead, AuditEntry, Payload
from audit.payloads import split_audit_data, store_payload
from audit.sequencer import BackgroundSequencer
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import hash_value
from memoryhub.core.redaction import redact
from memoryhub.core.rows import ModelColumns, built_per_vendor, insert_rows_sql, run_together, set_ids
from memoryhub.models import Tenant, Workflow

GENESIS_HASH = "sha256:" + "0" * 64
BATCH = 500  # entries per sequencer transaction
SEQUENCED_FIELDS = ["seq", "prev_hash", "entry_hash", "sequenced_at"]


def entry_body(entry: AuditEntry) -> dict[str, Any]:
    """The fields covered by entry_hash (everything but the hash itself).

    The text of ``data`` is not in the body: only its payload's reference and digest are, so a
    purge that empties the payload leaves the chain verifiable.
    """
    body = {
        "tenant": entry.tenant_id,
        "seq": entry.seq,
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "data": entry.chained_data,
        "prev_hash": entry.prev_hash,
    }
    if entry.payload_id is not None or entry.payload_digest:  # entries before payloads hash as they did
        body["payload"] = {"id": entry.payload_id, "digest": entry.payload_digest}
    return body


def compute_entry_hash(entry: AuditEntry) -> str:
    return hash_value(entry_body(entry))


def _object_ref(obj: Any) -> tuple[str, str]:
    if isinstance(obj, models.Model):
        public_id = getattr(obj, "summary_id", None) or getattr(obj, "artifact_id", None)
        public_id = public_id or getattr(obj, "purge_id", None) or getattr(obj, "external_id", None)
        return obj._meta.model_name or "object", str(public_id or obj.pk)
    if isinstance(obj, tuple):
        return str(obj[0]), str(obj[1])
    return "object", str(obj)


def record(
    tenant: Tenant, actor: Actor | str, action: str, obj: Any, data: dict[str, Any] | None = None
) -> AuditEntry:
    """Insert one pending entry in the tenant's log (redacting ``data``); it is sequenced into the
    chain after the transaction commits. Call inside transaction.atomic."""
    entry, text = pending_entry(tenant, actor, action, obj, data)
    if text:
        attach_payload(entry, store_payload(tenant.pk, _workflow_id(obj), text), text)
    insert_pending([entry])
    return entry


def pending_entry(
    tenant: Tenant, actor: Actor | str, action: str, obj: Any, data: dict[str, Any] | None = None
) -> tuple[AuditEntry, dict[str, Any]]:
    """An unsaved pending entry for ``record`` or ``insert_pending``, and the text of its
    (redacted) data, which belongs in a payload (``attach_payload``): the caller writes that
    payload, or lets the entry share one already holding the same text."""
    object_type, object_id = _object_ref(obj)
    # JSON round-trip so the hashed body equals what the database returns later.
    chained, text = split_audit_data(_json_roundtrip(redact(data or {})))
    entry = AuditEntry(
        tenant=tenant,
        seq=None,
        at=timezone.now(),
        actor=str(actor),
        action=action,
        object_type=object_type,
        object_id=object_id,
        chained_data=chained,
        payload_digest="",
    )
    return entry, text


def attach_payload(entry: AuditEntry, payload: Payload, text: dict[str, Any]) -> None:
    """Point ``entry`` at the payload holding ``text`` (its digest joins the hashed body)."""
    entry.chained_data[TEXT_KEYS] = sorted(text)
    entry.payload, entry.payload_digest = payload, payload.digest


def insert_pending(entries: list[AuditEntry]) -> None:
    """Insert pending entries (their payloads already written) in one statement, inside the
    caller's transaction; they are sequenced after it commits."""
    _require_transaction()
    if entries:
        pending_inserted(entries, run_together([pending_insert_sql(entries)])[0])


def pending_insert_sql(entries: list[AuditEntry]) -> tuple[str, list[Any]]:
    """The INSERT of ``insert_pending`` (``entries`` not empty), for a caller that sends it with
    other statements (``run_together``) and then calls ``pending_inserted`` with its rows."""
    _require_transaction()
    return insert_rows_sql(AuditEntry, entries)


def _require_transaction() -> None:
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(
            "audit.log.record() must be called inside the transaction of the change it records"
        )


def pending_inserted(entries: list[AuditEntry], ids: list[Any]) -> None:
    """The entries are in (``ids``: their INSERT's rows): sequence them once the transaction commits."""
    set_ids(entries, ids)
    connection = transaction.get_connection()
    tenants = sorted({entry.tenant_id for entry in entries})
    if any(getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
        # Inside Django's TestCase transaction (the test suite's ``db`` fixture) nothing ever
        # commits, so no on_commit hook ever runs: sequence in place, as the hook would after commit.
        for tenant_id in tenants:
            sequence_pending(tenant_id)
        for entry in entries:
            entry.refresh_from_db(fields=SEQUENCED_FIELDS)
        return
    for tenant_id in tenants:
        transaction.on_commit(_sequence_after_commit(tenant_id), robust=True)


def _sequence_after_commit(tenant_id: int) -> Callable[[], None]:
    def sequence_after_commit() -> None:  # named: on_commit logs a failing hook by its name
        background.request(tenant_id)

    return sequence_after_commit


def sequence_pending(tenant: Tenant | int, batch: int = BATCH) -> int:
    """Sequence the tenant's committed pending entries; returns how many this call sequenced.

    When another sequencer holds the chain this returns at once: that one checks for pending
    entries again after it lets go, so an entry committed before this call is never left behind
    (whoever holds the chain last re-reads the queue after releasing it).
    """
    tenant_id = tenant if isinstance(tenant, int) else tenant.pk
    done = idle = 0
    while idle < 3:
        claimed = _sequence_batch(tenant_id, batch)
        if claimed is None:
            break  # another sequencer holds the chain: it re-reads the queue after letting go
        done += claimed
        if claimed == batch:
            idle = 0
            continue  # a full batch: more may be waiting
        # The chain is released: re-read the queue (what committed meanwhile is ours to take).
        if not _has_pending(tenant_id):
            break
        # Pending but not claimed: committed after the claim (the next round takes them), or
        # rows someone else keeps locked (left to the beat sweep after a few rounds).
        idle = 0 if claimed else idle + 1
    return done


def sequence_all_pending() -> int:
    """``sequence_pending`` for every tenant with pending entries (the beat sweep)."""
    pending = AuditEntry._base_manager.filter(seq__isnull=True)
    tenants = list(pending.order_by("tenant_id").values_list("tenant_id", flat=True).distinct())
    return sum(sequence_pending(tenant_id) for tenant_id in tenants)


def pending_entries(tenant: Tenant | int) -> models.QuerySet[AuditEntry]:
    """The tenant's committed entries the chain has not taken yet (oldest insert first)."""
    return AuditEntry._base_manager.filter(tenant=tenant, seq__isnull=True).order_by("id")


def pending_summary(tenant: Tenant | int) -> tuple[int, datetime | None]:
    """How many entries wait for the sequencer, and when the oldest of them was written."""
    rows = pending_entries(tenant).aggregate(n=models.Count("id"), oldest=models.Min("at"))
    return rows["n"], rows["oldest"]


class _SequencerSQL:
    """The sequencer's statements, built once per database vendor. SQL on purpose (like the
    lifecycle's lock): a pass follows nearly every audited commit, and compiling the equivalent
    querysets cost the writer's process more CPU than the database spent running them."""

    def __init__(self) -> None:
        qn = connection.ops.quote_name
        entries, head = qn(AuditEntry._meta.db_table), qn(AuditChainHead._meta.db_table)
        # SQLite has no row locks and ignores this: it serialises writers by itself, and the
        # unique seq plus the set-once trigger refuse a second sequencing of an entry.
        skip = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
        self.entry = ModelColumns(AuditEntry, "e")
        self.head = f"SELECT {qn('seq')}, {qn('entry_hash')} FROM {head} WHERE {qn('tenant_id')} = %s{skip}"
        self.claim = (
            f"SELECT {self.entry.sql} FROM {entries} e WHERE e.{qn('tenant_id')} = %s AND e.{qn('seq')} IS NULL "
            f"ORDER BY e.{qn('id')} LIMIT %s{skip}"
        )
        self.head_exists = f"SELECT 1 FROM {head} WHERE {qn('tenant_id')} = %s"
        self.pending = f"SELECT 1 FROM {entries} WHERE {qn('tenant_id')} = %s AND {qn('seq')} IS NULL LIMIT 1"
        self.move_head = (
            f"UPDATE {head} SET {qn('seq')} = %s, {qn('entry_hash')} = %s WHERE {qn('tenant_id')} = %s"
        )
        # One UPDATE for the whole batch: its rows as VALUES (both databases name their columns
        # column1…; the casts type the ids where parameters travel untyped).
        self.store = (
            f"UPDATE {entries} SET {qn('seq')} = v.column2, {qn('prev_hash')} = v.column3, "
            f"{qn('entry_hash')} = v.column4, {qn('sequenced_at')} = %s FROM (VALUES {{rows}}) AS v "
            f"WHERE {entries}.{qn('id')} = v.column1"
        )
        self.store_row = "(CAST(%s AS BIGINT), CAST(%s AS BIGINT), %s, %s)"


_sql = built_per_vendor(_SequencerSQL)


def _has_pending(tenant_id: int) -> bool:
    (rows,) = run_together([(_sql().pending, [tenant_id])])
    return bool(rows)


def _sequence_batch(tenant_id: int, batch: int) -> int | None:
    """One sequencer transaction: up to ``batch`` pending entries appended to the chain, or None
    when another sequencer holds the chain head. Two round trips: the head's lock with the
    claim of the oldest pending entries (``SKIP LOCKED``), then their seq/hashes with the head's move."""
    sql = _sql()
    # The head's existence travels along: a locked head and a missing one both lock nothing.
    lock_and_claim = [
        (sql.head, [tenant_id]),
        (sql.claim, [tenant_id, batch]),
        (sql.head_exists, [tenant_id]),
    ]
    with transaction.atomic():
        heads, rows, exists = run_together(lock_and_claim)
        if not exists:
            # The tenant's first sequencing: its head is created, then locked like any other.
            AuditChainHead.objects.get_or_create(
                tenant_id=tenant_id, defaults={"seq": 0, "entry_hash": GENESIS_HASH}
            )
            heads, rows, exists = run_together(lock_and_claim)
        if not heads:
            return None  # another sequencer holds the head (the rows claimed go back at once)
        if not rows:
            return 0
        seq, prev_hash = heads[0]
        now = timezone.now()
        claimed = [sql.entry.instance(row) for row in rows]
        values: list[Any] = []
        for entry in claimed:
            seq += 1
            entry.seq, entry.prev_hash, entry.sequenced_at = seq, prev_hash, now
            entry.entry_hash = compute_entry_hash(entry)
            values += [entry.pk, seq, prev_hash, entry.entry_hash]
            prev_hash = entry.entry_hash
        store = sql.store.format(rows=", ".join([sql.store_row] * len(claimed)))
        at = connection.ops.adapt_datetimefield_value(now)
        run_together([(store, [at, *values]), (sql.move_head, [seq, prev_hash, tenant_id])])
    return len(claimed)


def _workflow_id(obj: Any) -> int | None:
    """The workflow a recorded object belongs to (scopes its payload), when it has one."""

    if isinstance(obj, Workflow):
        return obj.pk
    return getattr(obj, "workflow_id", None) if isinstance(obj, models.Model) else None


def _json_roundtrip(value: Any) -> Any:
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))


# After a commit that recorded entries: sequence them on this process's sequencer thread.
background = BackgroundSequencer(sequence_pending)
background.install()
