"""Summary versions, their validation records and their append-only lifecycle history."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memoryhub.core.checks import check_state, failed_names, validation_result

from .purgeable import PurgeablePayloadMixin, split_check
from .tenancy import Tenant
from .workflows import Workflow

SUMMARY_SCHEMA = "memoryhub.summary/v1"


class SummaryStatus(models.TextChoices):
    CANDIDATE = "CANDIDATE"
    VALIDATED = "VALIDATED"
    ACTIVE = "ACTIVE"
    SUPERSEDED = "SUPERSEDED"
    REJECTED = "REJECTED"
    QUARANTINED = "QUARANTINED"


class Summary(models.Model):
    """An immutable compacted view of events covers_from_seq..covers_to_seq (the watermark).

    Content is stored as canonical JSON text; content_hash = "sha256:" + hex of its UTF-8 bytes.
    Only ``status`` (with ``checks_failed``, and the purge marker) may change after insert; database
    triggers enforce it.
    """

    # 1. identity
    summary_id = models.CharField(max_length=40, unique=True)
    # No single-column indexes: (tenant, status, created_at) and (workflow, version) lead with
    # them, and every status change of an activation would write to them too.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="summaries", db_index=False)
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="summaries", db_index=False)
    version = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    job = models.ForeignKey(
        "memoryhub.CompactionJob", null=True, blank=True, on_delete=models.PROTECT, related_name="summaries"
    )
    created_by = models.CharField(max_length=200, blank=True)
    # 2. source lineage
    covers_from_seq = models.PositiveBigIntegerField()
    covers_to_seq = models.PositiveBigIntegerField()
    source_revision = models.PositiveBigIntegerField(
        help_text="Workflow head_seq when the candidate was written."
    )
    source_refs = models.JSONField(default=list, blank=True)
    source_purge_epoch = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Workflow purge_epoch when the source events were read; a purge since then discards it.",
    )
    excluded_categories = models.JSONField(default=list, blank=True)
    # 3. compactor configuration
    compactor_name = models.CharField(max_length=100)
    compactor_version = models.CharField(max_length=50, blank=True)
    model = models.CharField(max_length=100, blank=True)
    prompt_template_version = models.CharField(max_length=50, blank=True)
    algorithm_version = models.CharField(max_length=50, blank=True)
    token_budget = models.PositiveIntegerField(null=True, blank=True)
    tool_schema_version = models.CharField(max_length=50, blank=True)
    # 5. content integrity
    content_schema = models.CharField(max_length=50, default=SUMMARY_SCHEMA)
    content = models.TextField(help_text="Canonical JSON (sorted keys, compact separators).")
    content_hash = models.CharField(max_length=71)
    storage_location = models.CharField(max_length=200, blank=True)
    token_count = models.PositiveIntegerField()
    # 6. lifecycle status (the only mutable columns, besides the purge marker)
    status = models.CharField(max_length=12, choices=SummaryStatus.choices, default=SummaryStatus.CANDIDATE)
    status_changed_at = models.DateTimeField(auto_now_add=True)
    # The newest ValidationRecord's ``passed`` is False: written with each record (lifecycle.validate
    # and .waive), so the review inbox counts its "failed checks" from an index, not by looking up
    # the newest record of every rejected version a tenant ever had.
    checks_failed = models.BooleanField(default=False)
    # Set when a purge removed events this summary covers: it must be re-derived, never served.
    purged_by = models.ForeignKey(
        "audit.Purge", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    class Meta:
        ordering = ["workflow", "-version"]
        verbose_name_plural = "summaries"
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "version"],
                name="%(app_label)s_%(class)s_unique_version",
                violation_error_message="Summary versions are unique per workflow.",
            ),
            models.UniqueConstraint(
                fields=["workflow"],
                condition=Q(status="ACTIVE"),
                name="%(app_label)s_%(class)s_one_active",
                violation_error_message="A workflow has at most one ACTIVE summary.",
            ),
            models.CheckConstraint(
                condition=Q(covers_from_seq__gte=1) & Q(covers_to_seq__gte=models.F("covers_from_seq")),
                name="%(app_label)s_%(class)s_coverage_range",
                violation_error_message="Coverage must be a non-empty range starting at 1 or later.",
            ),
        ]
        indexes = [
            # Summary list per workflow filtered by status (workflow page, rollback target lookup).
            models.Index(fields=["workflow", "status", "-version"], name="memoryhub_summary_wf_status"),
            # Overview metrics: validation failures / new versions per tenant over a window.
            models.Index(fields=["tenant", "status", "created_at"], name="memoryhub_summary_tenant_stat"),
            # The review inbox's "failed checks" (audit.review.inbox_queryset).
            models.Index(
                fields=["tenant", "status_changed_at"],
                condition=Q(status="REJECTED", checks_failed=True, purged_by__isnull=True),
                name="memoryhub_summary_failed",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}:S{self.version}"

    @property
    def label(self) -> str:
        return f"S{self.version}"


class ValidationRecord(PurgeablePayloadMixin, models.Model):
    """One validator run over a summary (append-only). A waiver appends a new record.

    ``checks`` and ``reasons`` read and write like plain lists; the row keeps each check's shape
    (name, passed, waived, numbers) and the text (details, reasons) lives in the purgeable payload.
    """

    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="validations")
    validator_version = models.CharField(max_length=50)
    check_shapes = models.JSONField(default=list, db_column="checks")
    mandatory_coverage = models.FloatField(default=1.0)
    passed = models.BooleanField()
    stored_reasons = models.JSONField(default=list, blank=True, db_column="reasons")
    waived_checks = models.JSONField(default=list, blank=True)
    waived_by = models.CharField(max_length=200, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["summary", "-created_at", "-id"]
        indexes = [
            # Metrics/alerts: validation failures and failure rate in a time window.
            models.Index(fields=["created_at"], name="memoryhub_vr_created"),
            # A summary's latest record (the review inbox reads it per waiting summary) without a sort.
            models.Index(fields=["summary", "-created_at", "-id"], name="memoryhub_vr_latest"),
            # Failed runs nobody waived: the overview's acceptance rate looks for the few of them.
            models.Index(
                fields=["summary"],
                condition=Q(passed=False, waived_by=""),
                name="memoryhub_vr_failed_unwaived",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.summary} {self.validator_version} {self.result}"

    @property
    def result(self) -> str:
        """passed | failed | unverifiable (opaque content: no check failed, the text could not be read)."""
        return validation_result(self.passed, list(self.check_shapes or []))

    @property
    def failed_checks(self) -> list[str]:
        """Checks that failed and are not waived (``memoryhub.core.checks.check_state``)."""
        return failed_names(self.check_shapes or [], self.waived_checks or [])

    def checks_with_state(self) -> list[dict]:
        """``checks``, each with its ``state``: passed | failed | waived | unverifiable."""
        return [
            dict(c, state=check_state(c, self.waived_checks or []))
            for c in self.checks
            if isinstance(c, dict)
        ]

    def payload_scope(self) -> tuple[int, int | None]:
        summary = self.summary
        return summary.tenant_id, summary.workflow_id

    @property
    def checks(self) -> list[dict]:
        texts = self.payload_value("checks", None)
        if texts is None:  # written before payloads: the column holds everything
            return list(self.check_shapes)
        if isinstance(texts, str):  # purged
            return [dict(shape, detail=texts) for shape in self.check_shapes]
        return [dict(shape, **text) for shape, text in zip(self.check_shapes, texts, strict=False)]

    @checks.setter
    def checks(self, value: list[dict]) -> None:
        pairs = [split_check(c) for c in value or []]
        self.check_shapes = [shape for shape, _ in pairs]
        self._stage("checks", [text for _, text in pairs])

    @property
    def reasons(self) -> list[str]:
        value = self.payload_value("reasons", None)
        if value is None:
            return list(self.stored_reasons)
        if isinstance(value, str):  # purged
            return [value]
        return list(value)

    @reasons.setter
    def reasons(self, value: list[str]) -> None:
        self.stored_reasons = []
        self._stage("reasons", list(value or []))


class LifecycleAction(models.TextChoices):
    VALIDATE = "validate"
    REJECT = "reject"
    APPROVE = "approve"
    ACTIVATE = "activate"
    SUPERSEDE = "supersede"
    QUARANTINE = "quarantine"
    RELEASE = "release"
    WAIVE = "waive"
    ROLLBACK = "rollback"


class LifecycleResult(models.TextChoices):
    APPLIED = "applied"
    STALE = "stale"
    REFUSED = "refused"


class LifecycleEvent(PurgeablePayloadMixin, models.Model):
    """Append-only history of every status change and every activation attempt, applied or not.

    ``reason`` reads and writes like a plain string; its text lives in the purgeable payload.
    """

    # No single-column indexes: (tenant, result, at) and (workflow, at) lead with them.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    workflow = models.ForeignKey(
        Workflow, on_delete=models.PROTECT, related_name="lifecycle_events", db_index=False
    )
    summary = models.ForeignKey(Summary, on_delete=models.PROTECT, related_name="lifecycle_events")
    action = models.CharField(max_length=12, choices=LifecycleAction.choices)
    from_status = models.CharField(max_length=12, blank=True)
    to_status = models.CharField(max_length=12, blank=True)
    result = models.CharField(max_length=8, choices=LifecycleResult.choices)
    actor = models.CharField(max_length=200)
    actor_kind = models.CharField(max_length=16, blank=True)  # user | api_key | worker | system
    task_attempt_id = models.CharField(max_length=200, blank=True)
    stored_reason = models.TextField(blank=True, db_column="reason")
    expected_revision = models.PositiveBigIntegerField(null=True, blank=True)
    observed_revision = models.PositiveBigIntegerField(null=True, blank=True)
    prior_active_summary = models.ForeignKey(
        Summary, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    source_revision_at_activation = models.PositiveBigIntegerField(null=True, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # Activation history on the workflow page.
            models.Index(fields=["workflow", "-at"], name="memoryhub_lc_wf_at"),
            # Stale-activation metric and alert: tenant's stale attempts in a window.
            models.Index(fields=["tenant", "result", "at"], name="memoryhub_lc_tenant_result"),
        ]

    def __str__(self) -> str:
        return f"{self.summary} {self.action} {self.result}"

    def payload_scope(self) -> tuple[int, int | None]:
        return self.tenant_id, self.workflow_id

    @property
    def reason(self) -> str:
        return self.payload_value("reason", self.stored_reason)

    @reason.setter
    def reason(self, value: str) -> None:
        self.stored_reason = ""
        if value:  # no reason, no payload row: "" is what a row without one reads
            self._stage("reason", value)
