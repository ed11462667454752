"""Spans received on the OTLP/HTTP endpoint (``POST /v1/traces``), one row per span."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .summaries import Summary
from .tenancy import Tenant
from .workflows import Workflow


class SpanMapping(models.TextChoices):
    TRACE = "trace", "consumer trace"
    EVENT = "event", "event(s)"
    COMPACTION = "compaction", "observed compaction"
    DEFERRED = "deferred", "compaction waiting for its events"
    KEPT = "kept", "kept (no GenAI mapping)"
    UNASSIGNED = "unassigned", "no conversation id (own or an ancestor's)"
    REJECTED = "rejected", "rejected with its conversation (see the OTLP partialSuccess)"


class OtelSpan(models.Model):
    """One received span: the ingest's idempotency key (trace id + span id) and everything it carried.

    Every attribute is kept (known or not) so a later mapping can be re-derived; a span without
    conversation id (its own or an ancestor's) is stored with no workflow and counted, never dropped.
    ``conversation_id`` is the conversation the span was mapped to (its own attribute or inherited).
    """

    # No single-column index: the unique (tenant, trace id, span id) index leads with it, and a
    # second one tempted the planner into reading all of a tenant's spans (ingest._spans_q).
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    trace_id = models.CharField(max_length=32)
    span_id = models.CharField(max_length=16)
    parent_span_id = models.CharField(max_length=16, blank=True)
    workflow = models.ForeignKey(
        Workflow, null=True, blank=True, on_delete=models.PROTECT, related_name="otel_spans"
    )
    conversation_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=200, blank=True)
    operation = models.CharField(max_length=64, blank=True)
    mapped_to = models.CharField(max_length=12, choices=SpanMapping.choices)
    start_time_unix_nano = models.PositiveBigIntegerField(default=0)
    end_time_unix_nano = models.PositiveBigIntegerField(default=0)
    attributes = models.JSONField(default=dict, blank=True)
    resource = models.JSONField(default=dict, blank=True)
    span_events = models.JSONField(default=list, blank=True)
    # Last event seq this span produced (events) or the watermark it recorded (compaction).
    seq = models.PositiveBigIntegerField(null=True, blank=True)
    summary = models.ForeignKey(Summary, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "trace_id", "span_id"],
                name="%(app_label)s_%(class)s_unique_span",
                violation_error_message="A span is ingested once per tenant (trace id + span id).",
            )
        ]
        indexes = [
            # Watermark of a compaction span: the workflow's spans that produced events, by start time.
            models.Index(fields=["workflow", "start_time_unix_nano"], name="memoryhub_otel_wf_start"),
            # Ingest status: spans with no conversation id / compactions still waiting, per tenant.
            models.Index(
                fields=["tenant", "mapped_to"],
                condition=Q(mapped_to__in=["unassigned", "deferred"]),
                name="memoryhub_otel_attention",
            ),
        ]

    def __str__(self) -> str:
        return f"span {self.trace_id}/{self.span_id} → {self.mapped_to}"
