"""Default alert rules installed on every new tenant (explicit alerts for the failures the metrics exist to catch).

create_tenant() calls install_default_rules(). The rules have no channels: flips are recorded and
shown on /alerts/ until an admin attaches a channel.
"""

from __future__ import annotations

from django.utils import timezone

from memoryhub.models import AlertRule, Comparator, Tenant, WorkflowSource

DEFAULT_RULES: list[dict] = [
    {
        # Seed: "explicit alerts for ... consumers using an unvalidated summary".
        "name": "Consumer read a non-validated summary",
        "metric": "unvalidated_consumptions",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": None,
        "critical_threshold": 0,
        "window_minutes": 15,
    },
    {
        # Seed: "explicit alerts for missing provenance" — a trace or artifact without a
        # summary/tail reference or a context manifest.
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
        # Tail tokens as a fraction of the workflow's safe history budget (18,000 in the seed).
        "name": "Tail tokens over budget fraction",
        "metric": "tail_budget_fraction",
        "aggregation": "max",
        "comparator": Comparator.GT,
        "warning_threshold": 0.8,
        "critical_threshold": 1.0,
        "window_minutes": 15,
    },
    {
        # A model call over the safe budget with no compaction requested or running: the
        # trigger never fired (a framework's own auto-compact that silently stopped, say).
        "name": "Missed compaction",
        "metric": "missed_compaction",
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": None,
        "critical_threshold": 0,
        "window_minutes": 60,
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


# Issue #32: a compaction a framework ran on its own (observed, not MemoryHub's job) lost an
# obligation or a salient unit, or wrote an empty summary. One rule per source that reports such
# compactions, so the alert names the integration whose compactor lost something
# (memoryhub_compactions_needing_repair_by_source is the same count per source). LangGraph graphs
# are compacted by MemoryHub's own jobs, whose summaries the validator gates before activation.
REPAIR_SOURCES = [source for source in WorkflowSource if source != WorkflowSource.LANGGRAPH]
DEFAULT_RULES += [
    {
        "name": f"{source.label} compactions needed repair",
        "metric": "compactions_needing_repair",
        "source_filter": source.value,
        "aggregation": "sum",
        "comparator": Comparator.GT,
        "warning_threshold": 0,
        "critical_threshold": 5,
        "window_minutes": 60,
    }
    for source in REPAIR_SOURCES
]


def install_default_rules(tenant: Tenant) -> list[AlertRule]:
    """Create the default rules (idempotent by name); each is due for evaluation at once."""
    created = []
    now = timezone.now()
    for spec in DEFAULT_RULES:
        rule, was_created = AlertRule.objects.get_or_create(
            tenant=tenant,
            name=spec["name"],
            defaults={**spec, "is_default": True, "interval_seconds": 60, "next_eval_at": now},
        )
        if was_created:
            created.append(rule)
    return created
