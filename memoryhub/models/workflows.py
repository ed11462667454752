"""Workflows and their append-only source events."""

from __future__ import annotations

import hashlib

from django.db import models
from django.db.models import Q

from .tenancy import Tenant


class WorkflowSource(models.TextChoices):
    """Where a workflow's events and compactions come from (shown and filtered in the dashboard)."""

    API = "api", "REST API"
    LANGGRAPH = "langgraph", "LangGraph"
    LANGCHAIN = "langchain", "LangChain"
    OTEL = "otel", "OpenTelemetry"
    OPENAI_AGENTS = "openai-agents", "OpenAI Agents SDK"
    CLAUDE_CODE = "claude-code", "Claude Code"
    ANTHROPIC = "anthropic", "Anthropic API"


class Workflow(models.Model):
    """One agent-framework thread. Keeps running totals so hot reads never aggregate history.

    head_seq is the canonical source revision; active_revision counts activations and is the
    compare-and-swap key of the active-summary pointer.
    """

    # No single-column index: (tenant, external_id) leads with it, and each pointer move would
    # write to it too.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="workflows", db_index=False)
    external_id = models.CharField(max_length=200, help_text="The agent framework's thread id.")
    name = models.CharField(max_length=200, blank=True)
    graph_release = models.CharField(max_length=100, blank=True)
    source = models.CharField(
        max_length=20,
        choices=WorkflowSource.choices,
        default=WorkflowSource.API,
        help_text="The integration that feeds this workflow.",
    )
    model = models.CharField(
        max_length=100, blank=True, help_text="Model whose tokenizer counts this workflow."
    )
    encoding = models.CharField(max_length=64, blank=True, help_text="tiktoken encoding; blank = default.")
    head_seq = models.PositiveBigIntegerField(default=0)
    total_tokens = models.PositiveBigIntegerField(default=0)
    # Events/tokens after the active summary's watermark (the whole history when none is active).
    tail_events = models.PositiveBigIntegerField(default=0)
    tail_tokens = models.PositiveBigIntegerField(default=0)
    summary_tokens = models.PositiveBigIntegerField(default=0)
    active_summary = models.ForeignKey(
        "memoryhub.Summary", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    active_revision = models.PositiveBigIntegerField(default=0)
    # Bumped by every purge: a compaction job keyed on an older epoch cannot bring purged content back.
    purge_epoch = models.PositiveIntegerField(default=0)
    # Open tool-call ids and pending side-effect ids, maintained at append (trigger guards, O(1)).
    open_tool_calls = models.JSONField(default=list, blank=True)
    pending_side_effects = models.JSONField(default=list, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    last_compacted_at = models.DateTimeField(null=True, blank=True)
    tokens_at_last_compaction = models.PositiveBigIntegerField(default=0)
    activated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "external_id"],
                name="%(app_label)s_%(class)s_unique_external_id",
                violation_error_message="A workflow with this external_id already exists in the tenant.",
            )
        ]
        indexes = [
            # Workflow list / browser: tenant's workflows by recency (keyset pagination on updated_at, id).
            models.Index(fields=["tenant", "-updated_at", "-id"], name="memoryhub_wf_tenant_recent"),
            # Overview: the oldest active summaries (activated_at changes only with the pointer).
            models.Index(
                fields=["tenant", "activated_at", "id"],
                condition=Q(active_summary__isnull=False, activated_at__isnull=False),
                name="memoryhub_wf_oldest_active",
            ),
            # Overview: the largest tails. An append writes this index too, once per batch (its
            # workflow row update already writes memoryhub_wf_tenant_recent).
            models.Index(
                fields=["tenant", "-tail_tokens", "-id"],
                condition=Q(tail_events__gt=0),
                name="memoryhub_wf_largest_tails",
            ),
        ]

    def __str__(self) -> str:
        return self.external_id

    @property
    def history_tokens(self) -> int:
        """What the model would read now: active summary + uncompacted tail (running totals)."""
        return self.summary_tokens + self.tail_tokens

    @property
    def active_watermark(self) -> int:
        return self.active_summary.covers_to_seq if self.active_summary_id and self.active_summary else 0


class EventKind(models.TextChoices):
    MESSAGE = "message"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    DECISION = "decision"
    REQUIREMENT = "requirement"
    APPROVAL = "approval"
    VALIDATION = "validation"
    ARTIFACT = "artifact"
    NOTE = "note"


class SideEffect(models.TextChoices):
    NONE = "none"
    PENDING = "pending"
    DONE = "done"


def masked_identifier(value: str | None) -> str | None:
    """A purged event's identifier as outputs show it: a digest, never its text. A client that
    built the id from content can still tell which of its events it was by hashing its own id."""
    if not value:
        return value
    return "purged:" + hashlib.sha256(value.encode("utf-8")).hexdigest()[:16]


# The columns append_events writes, in its COPY / INSERT order (the bench datasets load the same).
EVENT_STORED_COLUMNS = (
    "workflow_id",
    "seq",
    "client_event_id",
    "kind",
    "agent",
    "role",
    "content",
    "content_hash",
    "token_count",
    "cum_tokens",
    "tool_call_id",
    "facts",
    "refs",
    "side_effect",
    "created_at",
)
# The stored columns a client sent or can check, as every reader serves them (the events API, the
# context read, a replay bundle); a purged event's ids are shown as digests (``masked_identifier``).
EVENT_CLIENT_FIELDS = (
    "seq",
    *(c for c in EVENT_STORED_COLUMNS if c not in ("workflow_id", "seq", "cum_tokens", "created_at")),
)
# An event as the events API and the context read serve it: those, when it was stored, the purge marks.
EVENT_API_FIELDS = (*EVENT_CLIENT_FIELDS, "created_at", "purged_at", "purge_id")


class Event(models.Model):
    """One committed source event. Append-only: database triggers refuse UPDATE and DELETE except
    the purge tombstone (content emptied, purged_at/purge set; seq, hashes and token counts kept)."""

    # No single-column index: the unique (workflow, seq) index serves every per-workflow query, and a
    # second one let the planner pick a full scan of a big workflow for seq-range reads.
    workflow = models.ForeignKey(Workflow, on_delete=models.PROTECT, related_name="events", db_index=False)
    seq = models.PositiveBigIntegerField()
    client_event_id = models.CharField(max_length=200, null=True, blank=True)
    kind = models.CharField(max_length=16, choices=EventKind.choices)
    agent = models.CharField(max_length=100, blank=True)
    role = models.CharField(max_length=32, blank=True)
    content = models.TextField(blank=True)
    content_hash = models.CharField(max_length=71)
    token_count = models.PositiveIntegerField()
    # Tokens of events 1..seq: tokens through any watermark are one index lookup.
    cum_tokens = models.PositiveBigIntegerField()
    tool_call_id = models.CharField(max_length=200, blank=True)
    facts = models.JSONField(default=list, blank=True)
    refs = models.JSONField(default=list, blank=True)
    side_effect = models.CharField(max_length=8, choices=SideEffect.choices, default=SideEffect.NONE)
    created_at = models.DateTimeField(auto_now_add=True)
    purged_at = models.DateTimeField(null=True, blank=True)
    purge = models.ForeignKey(
        "audit.Purge", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )

    class Meta:
        ordering = ["workflow", "seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["workflow", "seq"],
                name="%(app_label)s_%(class)s_unique_seq",
                violation_error_message="Sequence numbers are unique per workflow.",
            ),
            models.UniqueConstraint(
                fields=["workflow", "client_event_id"],
                condition=Q(client_event_id__isnull=False),
                name="%(app_label)s_%(class)s_unique_client_event_id",
                violation_error_message="client_event_id is unique per workflow.",
            ),
            models.CheckConstraint(
                condition=Q(seq__gte=1),
                name="%(app_label)s_%(class)s_seq_positive",
                violation_error_message="seq starts at 1.",
            ),
        ]
        # (workflow, seq) unique index serves tail reads (seq > watermark) and range pages.
        indexes = [
            # Lineage / replay / pages: the purged events of one workflow in a seq range (a handful of
            # rows even in a million-event history, instead of a scan of the range).
            models.Index(
                fields=["workflow", "seq"],
                condition=Q(purged_at__isnull=False),
                name="memoryhub_event_purged",
            ),
            # Retention sweep: unpurged events older than a cutoff.
            models.Index(
                fields=["created_at"], condition=Q(purged_at__isnull=True), name="memoryhub_event_unpurged"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id}#{self.seq}"

    @property
    def is_purged(self) -> bool:
        return self.purged_at is not None

    # What every output shows of the identifiers: a purged event's ids may have been built from its
    # content, so they are shown as digests. The row keeps them (the tombstone changes nothing but
    # the content), which is how a re-send of a purged event is still recognised.
    @property
    def visible_client_event_id(self) -> str | None:
        return masked_identifier(self.client_event_id) if self.purged_at else self.client_event_id

    @property
    def visible_tool_call_id(self) -> str:
        return (masked_identifier(self.tool_call_id) or "") if self.purged_at else self.tool_call_id
