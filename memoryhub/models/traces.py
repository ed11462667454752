"""Consumer traces (which agent call read which summary + tail) and the artifacts they produced."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .tenancy import Tenant
from .workflows import Workflow


class TraceFlag(models.TextChoices):
    UNVALIDATED_SUMMARY = "unvalidated_summary"  # consumed a summary that was not VALIDATED/ACTIVE/SUPERSEDED
    TAIL_LOSS = "tail_loss"  # summary watermark + tail did not reach head at read time
    MISSING_PROVENANCE = "missing_provenance"  # no context id / manifest hash recorded
    CONTEXT_MISMATCH = "context_mismatch"  # the signed context_id / manifest says something else was served
    FALLBACK_RETRIEVAL = (
        "fallback_retrieval"  # the consumer sent a targeted retrieval instead of summary + tail
    )
    # history was over the policy's safe budget at this call and no compaction was requested/running
    MISSED_COMPACTION = "missed_compaction"


# A consumer trace's fields in groups, so each reader (the traces API, the summary page, lineage,
# replay) names the groups it shows in its own order and no list is copied:
# the model call,
TRACE_CALL_FIELDS = ("agent", "agent_run_id", "model_call_id", "model")
# what it read and how that compared with the history at the time,
TRACE_READ_FIELDS = (
    "summary_status_at_read",
    "summary_watermark",
    "tail_to_seq",
    "head_seq_at_read",
    "context_id",
    "manifest_hash",
)
# and where it ran and at what cost.
TRACE_RUN_FIELDS = ("graph_release", "thread_id", "checkpoint_id", "fallback_reason", "input_tokens")
# What the call sent and answered, where the integration recorded it (null: not recorded).
TRACE_RESULT_FIELDS = ("input_messages", "output", "output_tokens", "latency_ms", "cost_usd")
# A consumer trace as the traces API serves it.
TRACE_API_FIELDS = (
    "trace_id",
    "workflow",
    *TRACE_CALL_FIELDS,
    "summary_id",
    "summary_version",
    *TRACE_READ_FIELDS,
    "source_refs",
    *TRACE_RUN_FIELDS,
    *TRACE_RESULT_FIELDS,
    "flags",
    "actor",
    "at",
)
# What the server works out itself when it records a trace (what the summary was at read time, the
# head then, the flags) or takes from the request (workflow, actor, time).
TRACE_DERIVED_FIELDS = frozenset(
    {
        "trace_id",
        "workflow",
        "summary_version",
        "summary_status_at_read",
        "summary_watermark",
        "head_seq_at_read",
        "flags",
        "actor",
        "at",
    }
)
# What a consumer may send: the rest of what is served, whether the call fell back to retrieval, and
# whether the server should attest the read (memoryhub.context.traces.attested_read).
TRACE_INPUT_FIELDS = frozenset(TRACE_API_FIELDS) - TRACE_DERIVED_FIELDS | {
    "fallback_retrieval",
    "attest_read",
}


class ConsumerTrace(models.Model):
    """One agent model call and exactly which memory it consumed."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="traces")
    agent = models.CharField(max_length=100)
    agent_run_id = models.CharField(max_length=200)
    model_call_id = models.CharField(max_length=200)
    model = models.CharField(max_length=100, blank=True)
    summary = models.ForeignKey(
        "memoryhub.Summary", null=True, blank=True, on_delete=models.PROTECT, related_name="traces"
    )
    summary_status_at_read = models.CharField(max_length=12, blank=True)
    summary_watermark = models.PositiveBigIntegerField(default=0)
    tail_to_seq = models.PositiveBigIntegerField(default=0)
    head_seq_at_read = models.PositiveBigIntegerField(default=0)
    context_id = models.CharField(max_length=100, blank=True)
    manifest_hash = models.CharField(max_length=71, blank=True)
    source_refs = models.JSONField(default=list, blank=True)
    graph_release = models.CharField(max_length=100, blank=True)
    thread_id = models.CharField(max_length=200, blank=True, help_text="Agent framework thread id.")
    checkpoint_id = models.CharField(max_length=200, blank=True)
    # Why the consumer fell back to targeted retrieval (blank: it consumed summary + tail as served).
    fallback_reason = models.CharField(max_length=500, blank=True)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    # The call's messages and answer as the integration recorded them. Null, not empty, when it
    # recorded none: the trace page says "not recorded" rather than showing an empty call.
    input_messages = models.JSONField(null=True, blank=True)
    output = models.TextField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    # Same unit and precision as CompactionJob.cost_usd.
    cost_usd = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    flags = models.JSONField(default=list, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "model_call_id"],
                name="%(app_label)s_%(class)s_unique_model_call",
                violation_error_message="A model call is traced once per workflow.",
            )
        ]
        indexes = [
            # Workflow page: its traces by recency.
            models.Index(fields=["workflow", "-at"], name="memoryhub_trace_wf_at"),
            # Artifact produced_by lookup by agent run.
            models.Index(fields=["workflow", "agent_run_id"], name="memoryhub_trace_run"),
            # Alerts/metrics: flagged traces (unvalidated consumption, tail loss) per tenant in a window.
            models.Index(fields=["tenant", "at"], condition=~Q(flags=[]), name="memoryhub_trace_flagged"),
        ]

    def __str__(self) -> str:
        return f"{self.agent}/{self.model_call_id}"


class Artifact(models.Model):
    """Something an agent published (e.g. test suite T57), linked to the calls that produced it."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="artifacts")
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="artifacts")
    artifact_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=100)
    uri = models.CharField(max_length=500, blank=True)
    content_hash = models.CharField(max_length=71, blank=True)
    quality_score = models.FloatField(null=True, blank=True)
    produced_by = models.ManyToManyField(ConsumerTrace, related_name="artifacts", blank=True)
    actor = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "artifact_id"],
                name="%(app_label)s_%(class)s_unique_artifact_id",
                violation_error_message="artifact_id is unique per tenant.",
            )
        ]
        indexes = [
            # Workflow page: its artifacts by recency.
            models.Index(fields=["workflow", "-at"], name="memoryhub_artifact_wf_at"),
        ]

    def __str__(self) -> str:
        return self.artifact_id
