"""MemoryHub domain models (one module per aggregate)."""

from .alerts import (
    Aggregation,
    AlertEvaluation,
    AlertEvent,
    AlertRule,
    AlertState,
    Channel,
    ChannelKind,
    Comparator,
    Notification,
)
from .compaction import CompactionJob, JobStatus
from .metrics import MetricHour, MetricSample
from .otel import OtelSpan, SpanMapping
from .outbox import OutboxMessage
from .quality import EstimateSource, TokenEstimate
from .summaries import (
    SUMMARY_SCHEMA,
    LifecycleAction,
    LifecycleEvent,
    LifecycleResult,
    Summary,
    SummaryStatus,
    ValidationRecord,
)
from .tenancy import ApiKey, Membership, Role, Tenant, narrower_role, role_at_least
from .traces import Artifact, ConsumerTrace, TraceFlag
from .workflows import Event, EventKind, SideEffect, Workflow, WorkflowSource

__all__ = [
    "SUMMARY_SCHEMA",
    "Aggregation",
    "AlertEvaluation",
    "AlertEvent",
    "AlertRule",
    "AlertState",
    "ApiKey",
    "Artifact",
    "Channel",
    "ChannelKind",
    "CompactionJob",
    "Comparator",
    "ConsumerTrace",
    "EstimateSource",
    "Event",
    "EventKind",
    "JobStatus",
    "LifecycleAction",
    "LifecycleEvent",
    "LifecycleResult",
    "Membership",
    "MetricHour",
    "MetricSample",
    "Notification",
    "OtelSpan",
    "OutboxMessage",
    "Role",
    "SideEffect",
    "SpanMapping",
    "Summary",
    "SummaryStatus",
    "Tenant",
    "TokenEstimate",
    "TraceFlag",
    "ValidationRecord",
    "Workflow",
    "WorkflowSource",
    "narrower_role",
    "role_at_least",
]
