"""Client token estimates compared with MemoryHub's exact counts (the "trust the counter" signal)."""

from __future__ import annotations

from django.db import models

from .tenancy import Tenant
from .workflows import Workflow


class EstimateSource(models.TextChoices):
    EVENT = "event"  # an appended event carried the client's count of its content
    TRIGGER = "trigger"  # a trigger call carried the client's count of the whole history


class TokenEstimate(models.Model):
    """One client-side token estimate and the exact count MemoryHub made of the same text.

    ``drift = (estimated − exact) / exact``: −0.22 is a counter 22% under the real count, so a
    trigger relying on it fires late (the context overshoots).
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    workflow = models.ForeignKey(Workflow, on_delete=models.CASCADE, related_name="token_estimates")
    source = models.CharField(max_length=10, choices=EstimateSource.choices)
    model = models.CharField(max_length=100, blank=True)
    seq = models.PositiveBigIntegerField(help_text="Event seq (event) or head seq (trigger).")
    estimated = models.PositiveBigIntegerField()
    exact = models.PositiveBigIntegerField()
    drift = models.FloatField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # Metric token_estimate_drift: a tenant's estimates in a window.
            models.Index(fields=["tenant", "at"], name="memoryhub_estimate_tenant_at"),
            # Workflow page: drift per model.
            models.Index(fields=["workflow", "model"], name="memoryhub_estimate_wf_model"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(exact__gt=0),
                name="%(app_label)s_%(class)s_exact_positive",
                violation_error_message="Drift is relative to a positive exact count.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.workflow_id} {self.source} {self.estimated} vs {self.exact}"
