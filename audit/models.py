"""Audit: hash-chained log, purge tombstones, retention policies and saved investigations."""

from __future__ import annotations

from django.db import models

from memoryhub.models import Artifact, Summary, Tenant, Workflow
from memoryhub.models.purgeable import WithPayloadManager, purged_marker

TEXT_KEYS = "$text"  # chained_data key listing the data keys kept in the payload
# Audit entries newest first: pending ones (no seq yet: they join the chain next) before the rest.
NEWEST_FIRST: list[str | models.OrderBy] = [models.F("seq").desc(nulls_first=True), "-id"]
# Chain order: sequenced by seq, then the pending ones in the order the sequencer will take them.
CHAIN_ORDER: list[str | models.OrderBy] = [models.F("seq").asc(nulls_last=True), "id"]


class Payload(models.Model):
    """Purgeable text of an append-only row (audit entry data, check details, reasons).

    The owning row keeps ``digest`` (sha256 of the canonical body) and a reference; a purge empties
    ``body`` and sets ``purged_by``/``purged_at`` — the digest stays, so chains over it still verify.
    """

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="+", db_index=False
    )  # (tenant, created_at)
    workflow = models.ForeignKey(Workflow, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    digest = models.CharField(max_length=71)
    body = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    purged_by = models.ForeignKey(
        "audit.Purge", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tenant", "created_at"], name="audit_payload_tenant_at")]

    def __str__(self) -> str:
        return f"payload {self.pk} {self.digest[:15]}"


class AuditEntry(models.Model):
    """One state-changing action. Hash-chained per tenant: entry_hash = H(prev_hash + canonical body).

    Append-only (database triggers). ``data`` is redacted before it is written; its structural keys
    (ids, numbers, statuses) stay in the chained row (``chained_data``), its text goes to a purgeable
    ``Payload`` whose digest is part of the hashed body. ``entry.data`` reads the two merged.

    A writer inserts the entry *pending* (``seq`` NULL, hashes empty) in its own transaction; the
    sequencer (``audit.log.sequence_pending``) later sets seq, prev_hash, entry_hash and
    sequenced_at, once — the only UPDATE the triggers allow.
    """

    # No single-column index: the unique (tenant, seq) leads with it.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="audit_entries", db_index=False)
    seq = models.PositiveBigIntegerField(null=True, blank=True)  # NULL while pending
    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=64)
    object_id = models.CharField(max_length=200)
    chained_data = models.JSONField(default=dict, blank=True, db_column="data")
    payload = models.ForeignKey(Payload, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    payload_digest = models.CharField(max_length=71, blank=True)
    prev_hash = models.CharField(max_length=71, blank=True)  # "" while pending
    entry_hash = models.CharField(max_length=71, blank=True)  # "" while pending
    sequenced_at = models.DateTimeField(null=True, blank=True)  # not hashed: when the chain took it

    objects = WithPayloadManager()  # entries come with their payload: reading ``data`` costs no query

    class Meta:
        ordering = ["tenant", *NEWEST_FIRST]
        verbose_name_plural = "audit entries"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "seq"],
                name="%(app_label)s_%(class)s_unique_seq",
                violation_error_message="Audit sequence numbers are unique per tenant.",
            )
        ]
        indexes = [
            # Audit page filters: a tenant's entries by action / object, newest first.
            models.Index(fields=["tenant", "action", "-seq"], name="audit_entry_action"),
            models.Index(fields=["tenant", "object_type", "object_id"], name="audit_entry_object"),
            # The sequencer's queue: a tenant's pending entries in insert order (tiny: only the unsequenced).
            models.Index(
                fields=["tenant", "id"], condition=models.Q(seq__isnull=True), name="audit_entry_pending"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id}#{self.seq if self.seq is not None else 'pending'} {self.action}"

    @property
    def pending(self) -> bool:
        """Not sequenced yet: committed with its change, but not in the hash chain so far."""
        return self.seq is None

    @property
    def data(self) -> dict:
        """The recorded data: chained keys plus the payload's (or the purge marker in their place)."""
        chained = {k: v for k, v in self.chained_data.items() if k != TEXT_KEYS}
        if self.payload_id is None:
            return chained
        payload = self.payload
        if payload is None or payload.purged_at is not None:
            marker = purged_marker(payload)
            return {**chained, **{k: marker for k in (self.chained_data.get(TEXT_KEYS) or [])}}
        return {**chained, **(payload.body or {})}


class AuditChainHead(models.Model):
    """The last seq/hash of a tenant's chain. Only the sequencer locks and moves it (writers never
    touch it), so its row lock is what keeps one sequencer per chain."""

    tenant = models.OneToOneField(
        Tenant, on_delete=models.CASCADE, related_name="audit_head", primary_key=True
    )
    seq = models.PositiveBigIntegerField(default=0)
    entry_hash = models.CharField(max_length=71, default="sha256:" + "0" * 64)

    def __str__(self) -> str:
        return f"{self.tenant_id}@{self.seq}"


class Purge(models.Model):
    """Tombstone of a purge: what was removed, why, by whom, and which summaries it affected."""

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="purges")
    workflow = models.ForeignKey(
        Workflow, null=True, blank=True, on_delete=models.PROTECT, related_name="purges"
    )
    purge_id = models.CharField(max_length=40, unique=True)
    reason = models.TextField()
    actor = models.CharField(max_length=200)
    selector = models.JSONField(
        default=dict
    )  # {"seq_from", "seq_to"} | {"seqs": [...]} | {"subject": key} | retention
    event_count = models.PositiveIntegerField(default=0)
    seqs = models.JSONField(default=list, blank=True)
    affected_summaries = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=16, default="manual")  # manual | retention
    # The workflow purge_epoch this purge moved to: work computed at an older epoch may hold its content.
    epoch = models.PositiveIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return self.purge_id

    @classmethod
    def first_covering(cls, workflow: Workflow, after_epoch: int | None, up_to_seq: int) -> Purge | None:
        """The first purge after ``after_epoch`` that removed an event at or below ``up_to_seq``.

        Content computed from events read at purge epoch ``after_epoch`` may quote what such a purge
        removed; activation refuses it (storing the candidate already refused it under the same lock,
        this is the re-check).
        """
        if after_epoch is None:
            return None
        for purge in cls.objects.filter(workflow=workflow, epoch__gt=after_epoch).order_by("epoch"):
            if purge.seqs and min(purge.seqs) <= up_to_seq:
                return purge
        return None


class RecordClass(models.TextChoices):
    RAW_EVENTS = "raw_events", "Raw events"
    TOOL_IO = "tool_io", "Tool inputs/outputs"
    SUMMARIES = "summaries", "Summaries"
    TRACE_DETAIL = "trace_detail", "Consumer-trace detail"
    PROVENANCE = "provenance", "Minimal provenance"


class RetentionPolicy(models.Model):
    """How long one class of records is kept for a tenant (null days = forever)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="retention_policies")
    record_class = models.CharField(max_length=16, choices=RecordClass.choices)
    days = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name_plural = "retention policies"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "record_class"],
                name="%(app_label)s_%(class)s_unique_class",
                violation_error_message="One retention policy per tenant and record class.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant_id} {self.record_class}: {self.days or 'forever'}"


class Verdict(models.TextChoices):
    SOURCE_EXTRACTION_FAILURE = "source_extraction_failure"
    COMPACTION_OMISSION = "compaction_omission"
    ASSEMBLY_FAILURE = "assembly_failure"
    DOWNSTREAM_REASONING_FAILURE = "downstream_reasoning_failure"


class Investigation(models.Model):
    """A saved answer to "why did this artifact miss that fact?"."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="investigations")
    artifact = models.ForeignKey(Artifact, on_delete=models.PROTECT, related_name="investigations")
    fact = models.CharField(max_length=500)
    is_regex = models.BooleanField(default=False)
    verdict = models.CharField(max_length=32, choices=Verdict.choices)
    evidence = models.JSONField(default=dict)
    elapsed_ms = models.FloatField()
    actor = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.artifact_id} {self.fact!r}: {self.verdict}"


class SummaryComment(models.Model):
    """A reviewer's note on a summary version (who, when, text), so reviewers can discuss before
    deciding. Written only by ``audit.review.add_comment``, which audits it (digest, not text)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="summary_comments")
    summary = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="comments")
    author = models.CharField(max_length=200)
    text = models.TextField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]
        indexes = [
            # The summary page's comment thread: WHERE summary_id = … ORDER BY at, id.
            models.Index(fields=["summary", "at"], name="audit_comment_summary_at"),
        ]

    def __str__(self) -> str:
        return f"{self.author} on {self.summary_id}: {self.text[:40]}"
