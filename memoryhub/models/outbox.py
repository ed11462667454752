from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from .tenancy import Tenant


class OutboxMessage(models.Model):
    """A task message written in the request's transaction (memoryhub.outbox).

    Published after commit with a bounded wait; if the broker is down or hung the row stays
    unpublished and the sweeper publishes it later. The task claims the row (``consumed_at``,
    compare-and-set) so a message published twice runs once.
    """

    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    task = models.CharField(max_length=200)
    kwargs = models.JSONField(default=dict)
    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    publish_attempts = models.PositiveIntegerField(default=0)
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["created_at"], condition=Q(published_at__isnull=True), name="memoryhub_outbox_unsent"
            )
        ]

    def __str__(self) -> str:
        return f"{self.task} #{self.pk}"
