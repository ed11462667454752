"""Durable, idempotent compaction jobs."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .tenancy import Tenant
from .workflows import Workflow


class JobStatus(models.TextChoices):
    PENDING = "PENDING"  # written, not yet handed to the broker (outbox)
    QUEUED = "QUEUED"  # handed to the broker
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"


class CompactionJob(models.Model):
    """One compaction of a workflow at a source revision by one compactor.

    idempotency_key = tenant/workflow/source_revision/compactor is UNIQUE: asking twice returns the
    same job, and redeliveries can never produce two summaries.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="compaction_jobs")
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="compaction_jobs")
    source_revision = models.PositiveBigIntegerField()
    compactor = models.CharField(max_length=100)
    idempotency_key = models.CharField(max_length=400, unique=True)
    status = models.CharField(max_length=10, choices=JobStatus.choices, default=JobStatus.PENDING)
    outcome = models.CharField(
        max_length=32, blank=True
    )  # activated | stale | rejected | awaiting_approval | …
    summary = models.ForeignKey(
        "memoryhub.Summary", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    expected_revision = models.PositiveBigIntegerField(null=True, blank=True)
    attempts = models.JSONField(default=list, blank=True)
    requested_by = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    tokens_in = models.PositiveBigIntegerField(default=0)
    tokens_out = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    enqueue_attempts = models.PositiveIntegerField(default=0)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # memoryhub.memory.acceptance.accepted_q, kept as the summary's status and records change.
    accepted = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            # Outbox sweeper: jobs never handed to the broker.
            models.Index(fields=["created_at"], condition=Q(status="PENDING"), name="memoryhub_job_outbox"),
            # Workflow page / metrics: a workflow's jobs by recency.
            models.Index(fields=["workflow", "-created_at"], name="memoryhub_job_wf_recent"),
            # Metrics: tenant's finished jobs in a window (compactions, cost, latency).
            models.Index(fields=["tenant", "finished_at"], name="memoryhub_job_tenant_finished"),
            # The overview's acceptance rate counts the window's failed jobs apart (few of them).
            models.Index(
                fields=["tenant", "finished_at"], condition=Q(status="FAILED"), name="memoryhub_job_failed"
            ),
            # ... and its finished jobs that are not accepted (few of them, whatever the window holds).
            models.Index(
                fields=["tenant", "finished_at"],
                condition=Q(status__in=["SUCCEEDED", "FAILED"], accepted=False),
                name="memoryhub_job_unaccepted",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} {self.workflow_id}@{self.source_revision} {self.status}"
