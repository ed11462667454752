"""The hash-chained, per-tenant audit log.

``record()`` must run inside the caller's transaction so the entry commits (or rolls back) with the
change it describes. The chain head row is locked for the append, which orders entries per tenant.
"""

from __future__ import annotations

from typing import Any

from django.db import models, transaction
from django.utils import timezone

from audit.models import TEXT_KEYS, AuditChainHead, AuditEntry
from audit.payloads import split_audit_data, store_payload
from memoryhub.core.actors import Actor
from memoryhub.core.canonical import hash_value
from memoryhub.core.redaction import redact
from memoryhub.models import Tenant, Workflow

GENESIS_HASH = "sha256:" + "0" * 64


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
    """Append one entry to the tenant's chain (redacting ``data``). Call inside transaction.atomic."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError(
            "audit.log.record() must be called inside the transaction of the change it records"
        )
    head, _ = AuditChainHead.objects.select_for_update().get_or_create(
        tenant=tenant, defaults={"seq": 0, "entry_hash": GENESIS_HASH}
    )
    object_type, object_id = _object_ref(obj)
    # JSON round-trip so the hashed body equals what the database returns later.
    chained, text = split_audit_data(_json_roundtrip(redact(data or {})))
    payload = None
    if text:
        chained[TEXT_KEYS] = sorted(text)
        payload = store_payload(tenant.pk, _workflow_id(obj), text)
    entry = AuditEntry(
        tenant=tenant,
        seq=head.seq + 1,
        at=timezone.now(),
        actor=str(actor),
        action=action,
        object_type=object_type,
        object_id=object_id,
        chained_data=chained,
        payload=payload,
        payload_digest=payload.digest if payload else "",
        prev_hash=head.entry_hash,
    )
    entry.entry_hash = compute_entry_hash(entry)
    entry.save(force_insert=True)
    AuditChainHead.objects.filter(pk=head.pk).update(seq=entry.seq, entry_hash=entry.entry_hash)
    return entry


def _workflow_id(obj: Any) -> int | None:
    """The workflow a recorded object belongs to (scopes its payload), when it has one."""

    if isinstance(obj, Workflow):
        return obj.pk
    return getattr(obj, "workflow_id", None) if isinstance(obj, models.Model) else None


def _json_roundtrip(value: Any) -> Any:
    import json

    from django.core.serializers.json import DjangoJSONEncoder

    return json.loads(json.dumps(value, cls=DjangoJSONEncoder))
