"""The hash-chained, per-tenant audit log.

``record()`` must run inside the caller's transaction so the entry commits (or rolls back) with the
change it describes. The chain head row is locked for the append, which orders entries per tenant.
"""

from __future__ import annotations

from typing import Any

from django.db import models, transaction
from django.utils import timezone

from audit.models import AuditChainHead, AuditEntry
from memoryhub.actors import Actor
from memoryhub.canonical import hash_value
from memoryhub.models import Tenant
from memoryhub.redaction import redact

GENESIS_HASH = "sha256:" + "0" * 64


def entry_body(entry: AuditEntry) -> dict[str, Any]:
    """The fields covered by entry_hash (everything but the hash itself)."""
    return {
        "tenant": entry.tenant_id,
        "seq": entry.seq,
        "at": entry.at.isoformat(),
        "actor": entry.actor,
        "action": entry.action,
        "object_type": entry.object_type,
        "object_id": entry.object_id,
        "data": entry.data,
        "prev_hash": entry.prev_hash,
    }


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
    """Append one entry to the tenant's chain (redacting ``data``). Call inside transaction.atomic."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(
            "audit.log.record() must be called inside the transaction of the change it records"
        )
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(
        tenant=tenant, defaults={"seq": 0, "entry_hash": GENESIS_HASH}
    )
    object_type, object_id = _object_ref(obj)
    entry = AuditEntry(
        tenant=tenant,
        seq=head.seq + 1,
        at=timezone.now(),
        actor=str(actor),
        action=action,
        object_type=object_type,
        object_id=object_id,
        data=redact(data or {}),
        prev_hash=head.entry_hash,
    )
    # JSON round-trip so the hashed body equals what the database returns later.
    entry.data = _json_roundtrip(entry.data)
    entry.entry_hash = compute_entry_hash(entry)
    entry.save(force_insert=True)
    AuditChainHead.objects.filter(pk=head.pk).update(seq=entry.seq, entry_hash=entry.entry_hash)
    return entry


def _json_roundtrip(value: Any) -> Any:
    import json

    from django.core.serializers.json import DjangoJSONEncoder

    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
