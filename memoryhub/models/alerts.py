"""Alert rules over the health metrics, delivery channels, state flips and notifications."""

from __future__ import annotations

from typing import Any, TypedDict
from urllib.parse import urlsplit

from django.db import models
from django.db.models import Q

from .tenancy import Tenant
from .workflows import WorkflowSource


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook"
    EMAIL = "email"
    SLACK = "slack"


class Channel(models.Model):
    """Where notifications go. A permanent delivery error disables it (shown in the UI)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="channels")
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    name = models.CharField(max_length=100)
    url = models.URLField(max_length=500, blank=True)
    secret = models.CharField(max_length=200, blank=True, help_text="HMAC-SHA256 key for webhook signatures.")
    email = models.EmailField(blank=True)
    timeout_seconds = models.FloatField(default=5.0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.TextField(blank=True)
    last_error = models.TextField(blank=True)
    last_delivery_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def url_host(self) -> str:
        """Scheme and host of the URL only (what non-admins are shown: paths can hold tokens)."""
        parts = urlsplit(self.url) if self.url else None
        return f"{parts.scheme}://{parts.hostname}/…" if parts and parts.hostname else ""


class AlertState(models.TextChoices):
    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"


class Comparator(models.TextChoices):
    GT = "gt", ">"
    GTE = "gte", "≥"
    LT = "lt", "<"
    LTE = "lte", "≤"


class Aggregation(models.TextChoices):
    LAST = "last"
    MAX = "max"
    MIN = "min"
    AVG = "avg"
    SUM = "sum"
    COUNT = "count"


class AlertRule(models.Model):
    """A threshold rule on one metric, evaluated every interval by beat (claimed by compare-and-set)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="alert_rules")
    name = models.CharField(max_length=200)
    metric = models.CharField(max_length=64)
    aggregation = models.CharField(max_length=8, choices=Aggregation.choices, default=Aggregation.MAX)
    comparator = models.CharField(max_length=4, choices=Comparator.choices, default=Comparator.GT)
    warning_threshold = models.FloatField(null=True, blank=True)
    critical_threshold = models.FloatField(null=True, blank=True)
    window_minutes = models.PositiveIntegerField(default=15)
    interval_seconds = models.PositiveIntegerField(default=60)
    workflow_filter = models.CharField(
        max_length=200, blank=True, help_text="external_id prefix; blank = all."
    )
    source_filter = models.CharField(
        max_length=20,
        blank=True,
        choices=WorkflowSource.choices,
        help_text="Only workflows this integration feeds; blank = every source.",
    )
    channels = models.ManyToManyField(Channel, related_name="rules", blank=True)
    enabled = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False)
    muted_until = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=AlertState.choices, default=AlertState.OK)
    last_value = models.FloatField(null=True, blank=True)
    last_evaluated_at = models.DateTimeField(null=True, blank=True)
    next_eval_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        indexes = [
            # Beat: rules due for evaluation.
            models.Index(fields=["next_eval_at"], condition=Q(enabled=True), name="memoryhub_rule_due"),
        ]

    def __str__(self) -> str:
        return self.name

    def definition(self) -> dict:
        """What the rule measures and when it fires (RULE_DEFINITION_FIELDS), as stored."""
        return {name: getattr(self, name) for name in RULE_DEFINITION_FIELDS}


# A rule's definition: the fields the API, the rule form, the audit record and the webhook payload
# show (and clean_rule validates), besides its channels and its enabled/muted switches.
RULE_DEFINITION_FIELDS = (
    "name",
    "metric",
    "aggregation",
    "comparator",
    "warning_threshold",
    "critical_threshold",
    "window_minutes",
    "interval_seconds",
    "workflow_filter",
    "source_filter",
)
# The inclusive bounds of a rule's numbers (a week-long window at most, an evaluation every minute to
# once a day). clean_rule enforces them and the rule form and the API schema state them, all from
# here (rule_range), as the text lengths from the model fields (rule_max_length).
RULE_RANGES = {
    "window_minutes": (1, 7 * 24 * 60),
    "interval_seconds": (60, 86_400),
}


class ValueRange(TypedDict):
    """Keyword arguments of a form or serializer integer field."""

    min_value: int
    max_value: int


def rule_range(name: str) -> ValueRange:
    low, high = RULE_RANGES[name]
    return ValueRange(min_value=low, max_value=high)


def _rule_field(name: str) -> models.Field:
    field = AlertRule._meta.get_field(name)
    assert isinstance(field, models.Field), name
    return field


def rule_max_length(name: str) -> int:
    """The longest text rule field ``name`` holds (its model field's max_length)."""
    max_length = _rule_field(name).max_length
    assert max_length is not None, name
    return max_length


def rule_default(name: str) -> Any:
    """The value a new rule takes for ``name`` when none is given (the model field's default)."""
    return _rule_field(name).get_default()


class AlertEvaluation(models.Model):
    """One evaluation of a rule: the value against the thresholds (history chart)."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="evaluations")
    at = models.DateTimeField()
    value = models.FloatField(null=True, blank=True)
    # The metric's raw reading at this evaluation, before the rule's window aggregation: max/min/avg
    # over the window reduce these (reducing ``value`` would carry a peak forward forever).
    sample = models.FloatField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=AlertState.choices)
    warning_threshold = models.FloatField(null=True, blank=True)
    critical_threshold = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]
        # Rule history chart: one rule's evaluations over time.
        indexes = [models.Index(fields=["rule", "-at"], name="memoryhub_eval_rule_at")]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.at:%Y-%m-%d %H:%M} {self.state}"


class AlertEvent(models.Model):
    """A state flip of a rule (ok ↔ warning ↔ critical), written only when the state changes."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="events")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    from_state = models.CharField(max_length=8, choices=AlertState.choices)
    to_state = models.CharField(max_length=8, choices=AlertState.choices)
    value = models.FloatField(null=True, blank=True)
    at = models.DateTimeField()
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            # Delivery: flips not yet processed.
            models.Index(
                fields=["at"], condition=Q(processed_at__isnull=True), name="memoryhub_flip_unprocessed"
            ),
            # Alerts list per tenant.
            models.Index(fields=["tenant", "-at"], name="memoryhub_flip_tenant_at"),
        ]

    def __str__(self) -> str:
        return f"{self.rule_id} {self.from_state}→{self.to_state}"


class Notification(models.Model):
    """One delivery attempt of a flip (or a test-send) to one channel."""

    alert_event = models.ForeignKey(
        AlertEvent, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=10, default="alert")  # alert | resolve | test
    at = models.DateTimeField(auto_now_add=True)
    ok = models.BooleanField(default=False)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} → {self.channel_id} {'ok' if self.ok else 'failed'}"
