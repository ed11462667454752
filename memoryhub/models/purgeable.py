"""Content-bearing text of append-only rows lives in a purgeable ``audit.Payload`` row.

Validation records, lifecycle events and audit entries are append-only (and audit entries are
hash-chained), so a purge cannot scrub text inside them. Their free text (check details, reasons,
audit data) is therefore written to a ``Payload`` row; the append-only row keeps only its
structure, the payload reference and the payload's digest. A purge tombstones the payload (body
emptied, digest kept), so the immutable row — and the audit chain over it — stays verifiable while
the text is gone. Reading code sees the text through plain attributes (``record.reasons``,
``event.reason``, ``entry.data``); a purged payload reads as ``PURGED_TEXT``.

Rows written before this scheme have no payload: their text is read from the old columns.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db import models

from memoryhub.core.canonical import hash_value

PURGED_TEXT = "unavailable: purged"


class WithPayloadQuerySet(models.QuerySet):
    def only(self, *fields: str) -> WithPayloadQuerySet:
        """``only()`` without the payload drops the payload join (a deferred FK cannot be joined)."""
        qs = super().only(*fields)
        joins = qs.query.select_related
        if (
            isinstance(joins, dict)
            and "payload" in joins
            and not any(f.split("__")[0] == "payload" for f in fields)
        ):
            rest = {k: v for k, v in joins.items() if k != "payload"}
            qs.query.select_related = rest or False
        return qs

    def bulk_create(self, objs: Any, *args: Any, **kwargs: Any) -> list:
        """Rows inserted in bulk get their payloads too (``save()`` is not called for them)."""
        objs = list(objs)
        for obj in objs:
            if isinstance(obj, PurgeablePayloadMixin):
                obj.store_staged_payload()
        return super().bulk_create(objs, *args, **kwargs)


class WithPayloadManager(models.Manager.from_queryset(WithPayloadQuerySet)):  # type: ignore[misc]  # a dynamic base class
    """Rows come with their payload (and its purge): reading their text costs no extra query."""

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("payload", "payload__purged_by")


class PurgeablePayloadMixin(models.Model):
    """Adds ``payload`` + ``payload_digest`` and the staging/reading of payload keys."""

    payload = models.ForeignKey(
        "audit.Payload", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    payload_digest = models.CharField(max_length=71, blank=True)

    objects = WithPayloadManager()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.store_staged_payload()
        super().save(*args, **kwargs)

    def store_staged_payload(self) -> None:
        """Write the staged text as this (new) row's payload, before the row itself."""
        staged = self.take_staged_payload()
        if staged is not None:
            tenant_id, workflow_id = self.payload_scope()
            # By name, as the ``payload`` field names it: the audit app imports these models, so
            # they never import it (a contract in pyproject.toml).
            payload_model = apps.get_model("audit", "Payload")
            digest = payload_digest(staged)
            self.payload = payload_model._default_manager.create(
                tenant_id=tenant_id, workflow_id=workflow_id, body=staged, digest=digest
            )
            self.payload_digest = digest

    def take_staged_payload(self) -> dict[str, Any] | None:
        """The staged text a new row still has to write as its payload (taken: written once)."""
        staged = self.__dict__.pop("_payload_staged", None)
        return staged if staged is not None and self._state.adding and self.payload_id is None else None

    # -- subclasses say where the payload belongs
    def payload_scope(self) -> tuple[int, int | None]:
        """(tenant_id, workflow_id) of the payload row."""
        raise NotImplementedError

    # -- staging (before the row is inserted) and reading
    def _stage(self, key: str, value: Any) -> None:
        self.__dict__.setdefault("_payload_staged", {})[key] = value

    def payload_value(self, key: str, legacy: Any) -> Any:
        """The text stored under ``key``: staged, from the payload, the purge marker, or ``legacy``."""
        staged = self.__dict__.get("_payload_staged")
        if staged is not None and key in staged:
            return staged[key]
        if self.payload_id is None:
            return legacy
        payload = self.payload
        if payload is None or payload.purged_at is not None:
            return purged_marker(payload)
        return (payload.body or {}).get(key, legacy)

    def payload_purged(self) -> bool:
        return self.payload_id is not None and self.payload is not None and self.payload.purged_at is not None


def payload_digest(body: Any) -> str:
    """A payload's digest: sha256 of its canonical JSON (kept when a purge empties the body)."""
    return hash_value(body)


def purged_marker(payload: Any) -> str:
    """The sentence shown in place of purged text (names the purge when known)."""
    purge = getattr(payload, "purged_by", None) if payload is not None else None
    if purge is None:
        return PURGED_TEXT
    return f"unavailable: purged by {purge.purge_id} on {purge.at:%Y-%m-%d}"


def split_check(check: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A validator check → (shape kept in the row, text kept in the payload)."""
    shape = {k: v for k, v in check.items() if k == "name" or isinstance(v, bool | int | float) or v is None}
    text = {k: v for k, v in check.items() if k not in shape}
    return shape, text
