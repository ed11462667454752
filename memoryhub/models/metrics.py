"""Pre-aggregated metric rollups written by beat so charts never scan raw history."""

from __future__ import annotations

from django.db import models

from .tenancy import Tenant


class MetricSample(models.Model):
    """Value of one metric for a tenant (and optionally one workflow) in one time bucket."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="metric_samples")
    workflow = models.ForeignKey(
        "memoryhub.Workflow", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    metric = models.CharField(max_length=64)
    bucket_start = models.DateTimeField()
    value = models.FloatField()

    class Meta:
        ordering = ["bucket_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "workflow", "metric", "bucket_start"],
                condition=models.Q(workflow__isnull=False),
                name="%(app_label)s_%(class)s_unique_wf_bucket",
                violation_error_message="One sample per workflow, metric and bucket.",
            ),
            models.UniqueConstraint(
                fields=["tenant", "metric", "bucket_start"],
                condition=models.Q(workflow__isnull=True),
                name="%(app_label)s_%(class)s_unique_tenant_bucket",
                violation_error_message="One tenant-wide sample per metric and bucket.",
            ),
        ]
        indexes = [
            # Overview charts: a tenant's series for one metric over a window.
            models.Index(fields=["tenant", "metric", "bucket_start"], name="memoryhub_sample_series"),
        ]

    def __str__(self) -> str:
        return f"{self.metric}@{self.bucket_start:%Y-%m-%d %H:%M}={self.value}"


class MetricHour(models.Model):
    """The tenant-wide 5-minute samples of one metric in one hour, added up: written by the rollup
    beside the samples (memoryhub.observe.metrics.rollup), read by the overview for whole hours
    and days. A busy week is then 168 rows a metric instead of 2,016 samples to add up (18 ms of
    a 10k-workflow tenant's overview)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+", db_index=False)
    metric = models.CharField(max_length=64)
    hour_start = models.DateTimeField()
    total = models.FloatField()  # the sum of the hour's sample values
    samples = models.PositiveSmallIntegerField()  # how many 5-minute samples the hour has (≤ 12)

    class Meta:
        ordering = ["hour_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "metric", "hour_start"],
                name="%(app_label)s_%(class)s_unique_hour",
                violation_error_message="One row per metric and hour.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.metric}@{self.hour_start:%Y-%m-%d %H:00}={self.total} ({self.samples})"
