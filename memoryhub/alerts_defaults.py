"""Default alert rules installed on every new tenant (the seed's "explicit alerts")."""

from __future__ import annotations

from memoryhub.models import AlertRule, Comparator, Tenant

DEFAULT_RULES: list[dict] = [
    {
        "name": "Consumer read a non-validated summary",
        "metric": "unvalidated_consumptions",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": None,
        "critical_threshold": 0,
        "window_minutes": 15,
    },
    {
        "name": "Missing provenance",
        "metric": "missing_provenance",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": None,
        "critical_threshold": 0,
        "window_minutes": 60,
    },
    {
        "name": "Stale activation attempts (15 min)",
        "metric": "stale_activation_attempts",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": 0,
        "critical_threshold": 5,
        "window_minutes": 15,
    },
    {
        "name": "Validation failure rate",
        "metric": "validation_failure_rate",
        "aggregation": "last",
        "comparator": Comparator.GT,
        "warning_threshold": 0.2,
        "critical_threshold": 0.5,
        "window_minutes": 60,
    },
    {
        "name": "Active summary age (events behind head)",
        "metric": "active_summary_age_events",
        "aggregation": "max",
        "comparator": Comparator.GT,
        "warning_threshold": 200,
        "critical_threshold": 1000,
        "window_minutes": 15,
    },
    {
        "name": "Tail tokens over budget fraction",
        "metric": "tail_budget_fraction",
        "aggregation": "max",
        "comparator": Comparator.GT,
        "warning_threshold": 0.8,
        "critical_threshold": 1.0,
        "window_minutes": 15,
    },
    {
        "name": "Overflow incidents",
        "metric": "overflow_incidents",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": None,
        "critical_threshold": 0,
        "window_minutes": 60,
    },
]


def install_default_rules(tenant: Tenant) -> list[AlertRule]:
    """Create the default rules (idempotent by name)."""
    created = []
    for spec in DEFAULT_RULES:
        rule, was_created = AlertRule.objects.get_or_create(
            tenant=tenant, name=spec["name"], defaults={**spec, "is_default": True}
        )
        if was_created:
            created.append(rule)
    return created
