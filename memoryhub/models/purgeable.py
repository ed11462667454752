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

from dataclasses import dataclass
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


# -- Where event-derived text can be stored, and how a purge reaches each copy ----------------------
#
# Every text, JSON or binary column of every model (and every CharField longer than a short code) is
# named either in EVENT_TEXT (it can hold text derived from events: the purge reaches it) or in
# CONTENT_FREE (with the reason it cannot). tests/trust/test_purge_registry.py walks
# django.apps.get_models() and fails on a column in neither, so a new surface cannot store event text
# the purge does not know about. audit.purge runs one reacher per Reach (a test checks each has one).


class Reach(models.TextChoices):
    TOMBSTONE = "tombstone", "the purged event itself: emptied (hash and counts kept)"
    SUMMARY = "summary", "a summary covering the purged events: content tombstoned"
    PAYLOAD = "payload", "a purgeable payload quoting the purged text: emptied, digest kept"
    SCRUB = "scrub", "every value quoting the purged text is replaced by the purge note, row kept"
    IDENTIFIERS = "identifiers", "ids of purged events that quote the text are renamed purged-seq-N"
    INVESTIGATIONS = "investigations", "saved investigations lose quoted text, keep verdict and seqs"
    SETTLE_DEFERRED = "settle_deferred", "held work reported before the purge is never built"
    LEGACY_EMPTY = "legacy_empty", "append-only legacy column; new rows leave it empty (text in the payload)"


@dataclass(frozen=True)
class EventText:
    """A column that can hold event-derived text. ``workflow`` is the lookup from the model to the
    workflow whose purge reaches it ("self" for the workflow row; "" when no workflow is known, then
    ``since`` names the time column that bounds the tenant-wide, or global, scan)."""

    reach: str
    workflow: str
    why: str
    tenant: str = ""
    since: str = ""


EVENT_TEXT: dict[str, EventText] = {
    "memoryhub.Event.content": EventText(Reach.TOMBSTONE, "workflow", "the event's text"),
    "memoryhub.Event.facts": EventText(Reach.TOMBSTONE, "workflow", "facts extracted from the event"),
    "memoryhub.Event.refs": EventText(Reach.TOMBSTONE, "workflow", "subjects the event names"),
    "memoryhub.Summary.content": EventText(Reach.SUMMARY, "workflow", "a compaction of the events"),
    "memoryhub.Workflow.open_tool_calls": EventText(Reach.IDENTIFIERS, "self", "ids of open tool calls"),
    "memoryhub.Workflow.pending_side_effects": EventText(
        Reach.IDENTIFIERS, "self", "ids of unconfirmed side effects"
    ),
    "audit.Payload.body": EventText(
        Reach.PAYLOAD, "", "check details, reasons, audit data", tenant="tenant", since="created_at"
    ),
    "audit.Investigation.fact": EventText(Reach.INVESTIGATIONS, "artifact__workflow", "the phrase searched"),
    "audit.Investigation.evidence": EventText(
        Reach.INVESTIGATIONS, "artifact__workflow", "excerpts of summaries and events"
    ),
    "audit.SummaryComment.text": EventText(
        Reach.SCRUB, "summary__workflow", "a reviewer may quote the summary"
    ),
    # OTLP spans keep every attribute they carried: prompts, completions, compaction summaries.
    "memoryhub.OtelSpan.attributes": EventText(
        Reach.SCRUB, "workflow", "gen_ai prompts, completions, summaries"
    ),
    "memoryhub.OtelSpan.span_events": EventText(Reach.SCRUB, "workflow", "span events with message text"),
    "memoryhub.OtelSpan.resource": EventText(
        Reach.SCRUB, "workflow", "resource attributes a sender may fill"
    ),
    "memoryhub.OtelSpan.name": EventText(Reach.SCRUB, "workflow", "span names are free text"),
    # A deferred compaction is the raw body of held work: settled, so it is never built after a purge.
    "memoryhub.OtelSpan.mapped_to": EventText(
        Reach.SETTLE_DEFERRED, "workflow", "a deferred span is built later from its stored attributes"
    ),
    "memoryhub.CompactionJob.error": EventText(
        Reach.SCRUB, "workflow", "a compactor's error may quote its input"
    ),
    "memoryhub.CompactionJob.attempts": EventText(Reach.SCRUB, "workflow", "per-attempt errors and notes"),
    "memoryhub.ConsumerTrace.fallback_reason": EventText(
        Reach.SCRUB, "workflow", "free text from the consumer"
    ),
    # The model call's prompt quotes the summary and tail it was served; its answer may quote them.
    "memoryhub.ConsumerTrace.input_messages": EventText(
        Reach.SCRUB, "workflow", "the messages the model call was sent"
    ),
    "memoryhub.ConsumerTrace.output": EventText(Reach.SCRUB, "workflow", "the model call's answer"),
    "memoryhub.ValidationRecord.stored_reasons": EventText(
        Reach.LEGACY_EMPTY, "summary__workflow", "pre-payload rows only; append-only"
    ),
    "memoryhub.LifecycleEvent.stored_reason": EventText(
        Reach.LEGACY_EMPTY, "summary__workflow", "pre-payload rows only; append-only"
    ),
    # The admin site's history names an edited object by str(obj); a comment's str quotes its text.
    "admin.LogEntry.object_repr": EventText(
        Reach.SCRUB, "", "str() of an object edited in the admin site", since="action_time"
    ),
}

_ID = "an identifier or reference chosen by a client or generated, never event text"
_ACTOR = "who did it (user, key, worker or system name)"
_DIGEST = "a sha256 digest"
_CONFIG = "configuration an admin typed, not derived from events"
_ACCOUNT = "account data of a person, not derived from events"

CONTENT_FREE: dict[str, str] = {
    "admin.LogEntry.object_id": "primary key of the edited row",
    "admin.LogEntry.change_message": "JSON list of the changed field names, never their values",
    "auth.Permission.name": "Django permission names",
    "auth.Permission.codename": "Django permission codes",
    "auth.Group.name": _CONFIG,
    "auth.User.password": "a password hash",
    "auth.User.username": _ACCOUNT,
    "auth.User.first_name": _ACCOUNT,
    "auth.User.last_name": _ACCOUNT,
    "auth.User.email": _ACCOUNT,
    "contenttypes.ContentType.app_label": "model registry",
    "contenttypes.ContentType.model": "model registry",
    "sessions.Session.session_key": "a random session id",
    "sessions.Session.session_data": "login state and flash messages, which name objects and never quote text",
    "memoryhub.Tenant.name": _CONFIG,
    "memoryhub.ApiKey.name": _CONFIG,
    "memoryhub.ApiKey.created_by_actor": _ACTOR,
    "memoryhub.Channel.name": _CONFIG,
    "memoryhub.Channel.url": _CONFIG,
    "memoryhub.Channel.secret": "a webhook signing secret an admin set",
    "memoryhub.Channel.email": _CONFIG,
    "memoryhub.Channel.disabled_reason": "why delivery stopped (HTTP status, address refused); alerts carry metrics",
    "memoryhub.Channel.last_error": "a delivery error of an alert, which carries metrics, not event text",
    "memoryhub.AlertRule.name": _CONFIG,
    "memoryhub.AlertRule.workflow_filter": _CONFIG,
    "memoryhub.AlertRule.source_filter": _CONFIG,
    "memoryhub.Notification.error": "a delivery error of an alert, which carries metrics, not event text",
    "memoryhub.Workflow.external_id": _ID,
    "memoryhub.Workflow.name": "the workflow's name, given when it was created",
    "memoryhub.Workflow.graph_release": _ID,
    "memoryhub.Workflow.model": "a model name",
    "memoryhub.Event.client_event_id": _ID + "; kept (immutable) to recognise a re-send, copies renamed",
    "memoryhub.Event.tool_call_id": _ID + "; kept (immutable) to recognise a re-send, copies renamed",
    "memoryhub.Event.agent": "the agent's name",
    "memoryhub.Event.content_hash": _DIGEST + " (kept as provenance)",
    "memoryhub.CompactionJob.compactor": "a compactor name",
    "memoryhub.CompactionJob.idempotency_key": "tenant/workflow/revision/compactor ids",
    "memoryhub.CompactionJob.requested_by": _ACTOR,
    "memoryhub.Summary.summary_id": _ID,
    "memoryhub.Summary.created_by": _ACTOR,
    "memoryhub.Summary.source_refs": "references to source records (event ids, otel:trace/span)",
    "memoryhub.Summary.excluded_categories": "category codes",
    "memoryhub.Summary.compactor_name": "a compactor name",
    "memoryhub.Summary.model": "a model name",
    "memoryhub.Summary.content_hash": _DIGEST + " (kept as provenance)",
    "memoryhub.Summary.storage_location": _ID,
    "memoryhub.ValidationRecord.payload_digest": _DIGEST,
    "memoryhub.ValidationRecord.check_shapes": "check names, booleans and numbers (split_check moves text to the payload)",
    "memoryhub.ValidationRecord.waived_checks": "check names",
    "memoryhub.ValidationRecord.waived_by": _ACTOR,
    "memoryhub.ValidationRecord.actor": _ACTOR,
    "memoryhub.LifecycleEvent.payload_digest": _DIGEST,
    "memoryhub.LifecycleEvent.actor": _ACTOR,
    "memoryhub.LifecycleEvent.task_attempt_id": _ID,
    "memoryhub.OtelSpan.conversation_id": _ID + " (the workflow's external id)",
    "memoryhub.OutboxMessage.task": "a task name",
    "memoryhub.OutboxMessage.kwargs": "task arguments: ids of channels and rules (test-sends)",
    "memoryhub.TokenEstimate.model": "a model name",
    "memoryhub.ConsumerTrace.agent": "the agent's name",
    "memoryhub.ConsumerTrace.agent_run_id": _ID,
    "memoryhub.ConsumerTrace.model_call_id": _ID,
    "memoryhub.ConsumerTrace.model": "a model name",
    "memoryhub.ConsumerTrace.context_id": _ID,
    "memoryhub.ConsumerTrace.manifest_hash": _DIGEST,
    "memoryhub.ConsumerTrace.source_refs": "references to source records",
    "memoryhub.ConsumerTrace.graph_release": _ID,
    "memoryhub.ConsumerTrace.thread_id": _ID,
    "memoryhub.ConsumerTrace.checkpoint_id": _ID,
    "memoryhub.ConsumerTrace.flags": "flag codes",
    "memoryhub.ConsumerTrace.actor": _ACTOR,
    "memoryhub.Artifact.artifact_id": _ID,
    "memoryhub.Artifact.kind": "an artifact kind",
    "memoryhub.Artifact.uri": _ID,
    "memoryhub.Artifact.content_hash": _DIGEST,
    "memoryhub.Artifact.actor": _ACTOR,
    "audit.Payload.digest": _DIGEST + " (kept when the body is purged)",
    "audit.AuditEntry.actor": _ACTOR,
    "audit.AuditEntry.object_id": _ID,
    "audit.AuditEntry.chained_data": "structure only: audit.payloads.split_audit_data moves every text to the payload",
    "audit.AuditEntry.payload_digest": _DIGEST,
    "audit.AuditEntry.prev_hash": _DIGEST,
    "audit.AuditEntry.entry_hash": _DIGEST,
    "audit.AuditChainHead.entry_hash": _DIGEST,
    "audit.Purge.reason": "the purging admin's reason (the form asks not to quote the content)",
    "audit.Purge.actor": _ACTOR,
    "audit.Purge.selector": "seq range or list; a subject key is stored as its digest (audit.purge)",
    "audit.Purge.seqs": "event seqs",
    "audit.Purge.affected_summaries": "summary ids",
    "audit.RetentionPolicy.updated_by": _ACTOR,
    "audit.Investigation.actor": _ACTOR,
    "audit.SummaryComment.author": _ACTOR,
    "triggers.ContextPolicy.model": "a model name",
    "triggers.ContextPolicy.strategies": _CONFIG,
    "triggers.ContextPolicy.quality": _CONFIG,
    "triggers.ContextPolicy.repair": _CONFIG,
    "triggers.ContextPolicy.updated_by": _ACTOR,
    "triggers.TriggerDecision.reasons": "the trigger engine's reasons: token counts, thresholds, strategy names",
    "triggers.TriggerDecision.inputs": "token counts and limits the engine read",
    "triggers.TriggerDecision.details": "the engine's numbers and policy names",
    "triggers.TriggerDecision.actor": _ACTOR,
}

# CharFields up to this length, and any with choices, hold codes, names and ids.
SHORT_CODE_CHARS = 64


def text_columns(model: type[models.Model]) -> list[models.Field]:
    """The columns of ``model`` that could hold text: text, JSON, binary, and long free CharFields."""
    return [field for field in model._meta.concrete_fields if _may_hold_text(field)]


def _may_hold_text(field: models.Field) -> bool:
    if isinstance(field, models.TextField | models.JSONField | models.BinaryField):
        return True
    return isinstance(field, models.CharField) and not field.choices and not _short(field)


def _short(field: models.CharField) -> bool:
    return field.max_length is not None and field.max_length <= SHORT_CODE_CHARS


def column_label(field: models.Field) -> str:
    return f"{field.model._meta.label}.{field.name}"
