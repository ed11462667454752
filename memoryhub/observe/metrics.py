"""Health metrics of a tenant's compacted memory (docs/ARCHITECTURE.md "Metrics and alerts"), computed in the database.

Every metric is one aggregate query over an indexed, tenant-scoped table: counts of lifecycle
events, validation records, traces, jobs, decisions and investigations in a time window, or
aggregates of the workflows' running totals. Nothing loops over history in Python.

Kinds (they decide what a window means and how a metric aggregates):

* ``counter`` — things that happened in ``[since, until)``; sums over buckets; ``since=None``
  counts from the beginning (Prometheus counters).
* ``ratio`` — a share (0..1) over the rows in the window; ``None`` when there are none.
* ``mean`` — an average over the rows in the window; ``None`` when there are none.
* ``gauge`` — the current state from running totals (the window is ignored); history comes only
  from the MetricSample rollups written by ``rollup_all`` (beat, every 5 minutes).

Every metric is computed by one ``MetricFunction``. Counters of rows and ratios of rows are
declared as ``Rows`` and ``Share`` values, so the overview (memoryhub.observe.reports) counts the
same rows per bucket, per workflow and as workflow filters without restating a query.

``series()`` reads the rollups for past buckets and computes the current bucket live.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol, cast

from django.conf import settings
from django.db import connection, transaction
from django.db.models import (
    Avg,
    Count,
    Exists,
    F,
    FloatField,
    Max,
    Min,
    Model,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
)
from django.db.models.functions import Abs, Cast, Coalesce, NullIf, Trunc
from django.utils import timezone

from audit.models import Investigation
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    JobStatus,
    LifecycleAction,
    LifecycleEvent,
    LifecycleResult,
    MetricHour,
    MetricSample,
    Summary,
    Tenant,
    TokenEstimate,
    TraceFlag,
    ValidationRecord,
    Workflow,
    WorkflowSource,
)
from triggers.models import TriggerDecision
from triggers.policy import effective_safe_budget_sql, tenant_safe_budget

COUNTER, GAUGE, RATIO, MEAN = "counter", "gauge", "ratio", "mean"

# Which rule aggregations make sense per kind. A counter's "sum"/"count" over the window is its
# count in the window; ratios and means are already "over the window" ("last"); gauges are sampled
# at every evaluation, so max/min/avg reduce those samples (see memoryhub.observe.alerting.evaluate).
AGGREGATIONS_BY_KIND: dict[str, tuple[str, ...]] = {
    COUNTER: ("sum", "count"),
    RATIO: ("last", "avg"),
    MEAN: ("last", "avg"),
    GAUGE: ("last", "max", "min", "avg"),
}

ROLLUP_BUCKET = timedelta(minutes=5)
# How far back a rollup run fills buckets it missed (worker down), for window metrics.
ROLLUP_BACKFILL_BUCKETS = 12
DEFAULT_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class MetricDef:
    """One metric: what it measures, its unit and its kind (counter | gauge | ratio | mean)."""

    name: str
    description: str
    unit: str
    kind: str

    @property
    def aggregations(self) -> tuple[str, ...]:
        return AGGREGATIONS_BY_KIND[self.kind]

    @property
    def default_aggregation(self) -> str:
        return self.aggregations[0]


def _m(name: str, kind: str, unit: str, description: str) -> tuple[str, MetricDef]:
    return name, MetricDef(name, description, unit, kind)


METRICS: dict[str, MetricDef] = dict(
    [
        _m("summary_versions", COUNTER, "versions", "Summary versions written."),
        _m(
            "active_summary_age_seconds",
            GAUGE,
            "seconds",
            "Age of the oldest active summary (time since it became active).",
        ),
        _m(
            "active_summary_age_events",
            GAUGE,
            "events",
            "Most source events committed after an active summary's watermark.",
        ),
        _m("tail_events", GAUGE, "events", "Largest uncompacted tail (events after the watermark)."),
        _m("tail_tokens", GAUGE, "tokens", "Largest uncompacted tail in tokens."),
        _m(
            "tail_budget_fraction",
            GAUGE,
            "ratio",
            "Largest tail tokens as a fraction of the workflow's safe history budget.",
        ),
        _m(
            "stale_activation_attempts",
            COUNTER,
            "attempts",
            "Activation or rollback attempts refused as stale (compare-and-swap lost or older watermark).",
        ),
        _m("validation_failures", COUNTER, "records", "Validation runs that failed (waivers are not runs)."),
        _m(
            "validation_failure_rate",
            RATIO,
            "ratio",
            "Share of validation runs that failed (waivers are not runs).",
        ),
        _m(
            "unexplained_source_gaps",
            COUNTER,
            "traces",
            "Consumer reads whose summary watermark + tail did not reach head (tail loss).",
        ),
        _m(
            "audit_trace_completeness",
            RATIO,
            "ratio",
            "Share of artifacts with a full chain: producing trace(s) naming a summary or tail and a "
            "context manifest.",
        ),
        _m(
            "missing_provenance",
            COUNTER,
            "records",
            "Traces or artifacts without a summary/tail reference or a context manifest.",
        ),
        _m("time_to_reconstruct_ms", MEAN, "milliseconds", "Mean time an investigation took."),
        _m("compactions", COUNTER, "jobs", "Compaction jobs that finished successfully."),
        _m("tokens_before", COUNTER, "tokens", "Tokens fed into successful compactions."),
        _m("tokens_after", COUNTER, "tokens", "Tokens of the summaries successful compactions wrote."),
        _m(
            "acceptance_rate",
            RATIO,
            "ratio",
            "Share of finished compactions whose summary was accepted (validated, active or superseded; "
            "a framework's summary that failed validation is not, though the framework reads it).",
        ),
        _m("generation_cost", COUNTER, "usd", "Compaction generation cost in USD."),
        _m("compaction_latency_ms", MEAN, "milliseconds", "Mean latency a successful compaction added."),
        _m(
            "overflow_incidents",
            COUNTER,
            "decisions",
            "Trigger decisions whose projected context exceeded the hard limit.",
        ),
        _m(
            "fallback_retrievals",
            COUNTER,
            "decisions",
            "Trigger decisions that answered retrieve_or_block plus consumer calls traced as fallback "
            "retrievals (targeted retrieval instead of summary + tail).",
        ),
        _m(
            "quality_regressions",
            COUNTER,
            "artifacts",
            "Artifacts scored below the workflow's previous artifact or below the quality floor.",
        ),
        _m(
            "unvalidated_consumptions",
            COUNTER,
            "traces",
            "Consumer reads of a summary that was not validated.",
        ),
        _m(
            "missed_compaction",
            COUNTER,
            "traces",
            "Model calls made while the history was over the safe budget with no compaction "
            "requested or running (a trigger that should have fired).",
        ),
        _m(
            "compactions_needing_repair",
            COUNTER,
            "compactions",
            "Framework (observed) compactions whose summary lost an obligation or a salient unit, or "
            "was empty: handed back, blocked or only observed, by the workflow's repair gate "
            "(per source: memoryhub_compactions_needing_repair_by_source).",
        ),
        _m(
            "token_estimate_drift",
            MEAN,
            "ratio",
            "Mean |client estimate − exact count| / exact count of the token estimates clients sent "
            "with events and trigger calls (0.22 = a counter 22% off).",
        ),
    ]
)


def metric_def(name: str) -> MetricDef:
    return METRICS[name]


# --- how a metric is computed -----------------------------------------------------------------


class Scope(NamedTuple):
    """The workflows a metric reads: those whose external_id starts with ``prefix`` and whose
    ``source`` (the integration feeding them) is ``source``; ``""`` leaves either open."""

    prefix: str = ""
    source: str = ""


ALL = Scope()


class MetricFunction(Protocol):
    """What the registry calls for a metric: the tenant's value over ``[since, until)`` (gauges:
    now), narrowed to the workflows in ``scope`` (``ALL``: every workflow). ``None``
    means "no data" (a ratio or mean over no rows, a gauge with no workflow), never zero."""

    def __call__(
        self, tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
    ) -> float | None: ...


def _window(qs: QuerySet, field: str, since: datetime | None, until: datetime | None) -> QuerySet:
    if since is not None:
        qs = qs.filter(**{f"{field}__gte": since})
    if until is not None:
        qs = qs.filter(**{f"{field}__lt": until})
    return qs


def _scoped(qs: QuerySet, scope: Scope, path: str = "workflow") -> QuerySet:
    """``qs`` narrowed to the rows of workflows in ``scope`` (``path``: the rows' way to their workflow)."""
    base = f"{path}__" if path else ""
    lookups = {}
    if scope.prefix:
        lookups[f"{base}external_id__startswith"] = scope.prefix
    if scope.source:
        lookups[f"{base}source"] = scope.source
    return qs.filter(**lookups) if lookups else qs


def has_flag(flag: str, path: str = "") -> Q:
    """JSON-list membership: jsonb containment on PostgreSQL, a quoted-substring match on SQLite."""
    field = f"{path}flags"
    if connection.vendor == "postgresql":
        return Q(**{f"{field}__contains": [flag]})
    return Q(**{f"{field}__icontains": f'"{flag}"'})


def _flagged(flag: str) -> Callable[[], Q]:
    # Non-empty flags first: that matches the partial index memoryhub_trace_flagged (tenant, at)
    # WHERE flags <> '[]'. A callable: the lookup depends on the database vendor.
    return lambda: ~Q(flags=[]) & has_flag(flag)


def incomplete_trace_q(path: str = "") -> Q:
    """A trace whose provenance is incomplete: flagged, no context manifest, or no summary/tail
    reference although there was history to read."""
    p = path
    return (
        has_flag(TraceFlag.MISSING_PROVENANCE, p)
        | Q(**{f"{p}manifest_hash": "", f"{p}context_id": ""})
        | Q(**{f"{p}summary__isnull": True, f"{p}tail_to_seq": 0, f"{p}head_seq_at_read__gt": 0})
    )


def ratio(part: float | None, whole: float | None) -> float | None:
    """``part / whole``, or None when there is nothing to divide by."""
    if not whole:
        return None
    return float(part or 0) / float(whole)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _everything() -> Q:
    return Q()


@dataclass(frozen=True)
class Rows:
    """A counter of rows: the tenant's ``model`` rows matching ``condition``, placed in time by
    ``time_field``. Reports count the same rows per bucket, per workflow or as a workflow filter
    through this one definition."""

    model: type[Model]
    time_field: str
    condition: Callable[[], Q] = _everything
    tenant_path: str = "tenant"
    workflow_path: str = "workflow"

    def where(self, condition: Callable[[], Q]) -> Rows:
        """These rows narrowed by ``condition`` as well."""
        outer = self.condition
        return replace(self, condition=lambda: outer() & condition())

    def of_tenant(self, tenant: Tenant) -> QuerySet:
        return self.model._default_manager.filter(**{self.tenant_path: tenant}).filter(self.condition())

    def of_workflow(
        self, workflow: Workflow | OuterRef, since: datetime | None = None, until: datetime | None = None
    ) -> QuerySet:
        qs = self.model._default_manager.filter(**{self.workflow_path: workflow}).filter(self.condition())
        return _window(qs, self.time_field, since, until)

    def between(
        self, tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope = ALL
    ) -> QuerySet:
        qs = _window(self.of_tenant(tenant), self.time_field, since, until)
        return _scoped(qs, scope, self.workflow_path)

    def __call__(self, tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> float:
        return float(self.between(tenant, since, until, scope).count())


@dataclass(frozen=True)
class Share:
    """A ratio of rows: the share of ``rows`` that also match ``part`` (None over no rows)."""

    rows: Rows
    part: Callable[[], Q]

    def tallies(self) -> dict[str, Count]:
        """Aggregates ``total`` and ``part``: per window here, per bucket in the reports."""
        return {"total": Count("pk"), "part": Count("pk", filter=self.part())}

    def __call__(
        self, tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
    ) -> float | None:
        agg = self.rows.between(tenant, since, until, scope).aggregate(**self.tallies())
        return ratio(agg["part"], agg["total"])


# --- gauges (running totals; the window is ignored) -------------------------------------------


def _workflows(tenant: Tenant, scope: Scope) -> QuerySet:
    return _scoped(Workflow.objects.filter(tenant=tenant), scope, path="")


# Gauges that are one aggregate over the tenant's workflows, as (aggregate, its value from the
# aggregate's result and the moment): computed one at a time through _COMPUTERS, or all at once by
# workflow_gauges() (the overview's current bucket: one query instead of four).
def _age_seconds(oldest: Any, now: datetime) -> float | None:
    return None if oldest is None else max(0.0, (now - oldest).total_seconds())


WORKFLOW_GAUGES: dict[str, tuple[Any, Callable[[Any, datetime], float | None]]] = {
    # activated_at is set with the pointer (lifecycle._move_pointer), so no join to the summary.
    "active_summary_age_seconds": (Min("activated_at", filter=Q(active_summary__isnull=False)), _age_seconds),
    # With an active summary, tail_events = head_seq − its watermark (maintained at activation/append).
    "active_summary_age_events": (
        Max("tail_events", filter=Q(active_summary__isnull=False)),
        lambda v, _now: _float(v),
    ),
    "tail_events": (Max("tail_events"), lambda v, _now: _float(v)),
    "tail_tokens": (Max("tail_tokens"), lambda v, _now: _float(v)),
}


def workflow_gauges(
    tenant: Tenant, names: Iterable[str], now: datetime | None = None, scope: Scope = ALL
) -> dict[str, float | None]:
    """These WORKFLOW_GAUGES now, in one aggregate query."""
    now = now or timezone.now()
    wanted = {name: WORKFLOW_GAUGES[name] for name in names}
    found = _workflows(tenant, scope).aggregate(**{name: agg for name, (agg, _v) in wanted.items()})
    return {name: value(found[name], now) for name, (_agg, value) in wanted.items()}


def _workflow_gauge(name: str) -> MetricFunction:
    def gauge(tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> float | None:
        return workflow_gauges(tenant, [name], until, scope)[name]

    return gauge


def _tail_budget_fraction(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float | None:
    # Per-workflow override (one LEFT JOIN) else the tenant default: the budget the engine uses.
    budget = effective_safe_budget_sql(tenant_safe_budget(tenant))
    fraction = Cast("tail_tokens", FloatField()) / Cast(NullIf(budget, Value(0)), FloatField())
    return _float(_workflows(tenant, scope).aggregate(v=Max(fraction))["v"])


# --- counters, ratios and means over the window ---------------------------------------------

SUMMARY_VERSIONS = Rows(Summary, "created_at")
STALE_ATTEMPTS = Rows(
    LifecycleEvent,
    "at",
    lambda: Q(
        result__in=[LifecycleResult.STALE, LifecycleResult.REFUSED],
        action__in=[LifecycleAction.ACTIVATE, LifecycleAction.ROLLBACK],
    ),
)
# Validator runs only: a waiver appends a record too (passed, when it waives what failed), and
# counting it would dilute the failure rate below what the validator found (an observed
# compaction's failed run and its waiver read as "1 of 2 failed").
VALIDATIONS = Rows(
    ValidationRecord,
    "created_at",
    lambda: Q(waived_by=""),
    tenant_path="summary__tenant",
    workflow_path="summary__workflow",
)
VALIDATION_FAILURE_RATE = Share(VALIDATIONS, lambda: Q(passed=False))
VALIDATION_FAILURES = VALIDATIONS.where(VALIDATION_FAILURE_RATE.part)
TRACES = Rows(ConsumerTrace, "at")
UNEXPLAINED_GAPS = TRACES.where(_flagged(TraceFlag.TAIL_LOSS))
UNVALIDATED_READS = TRACES.where(_flagged(TraceFlag.UNVALIDATED_SUMMARY))
MISSED_COMPACTIONS = TRACES.where(_flagged(TraceFlag.MISSED_COMPACTION))
FALLBACK_TRACES = TRACES.where(_flagged(TraceFlag.FALLBACK_RETRIEVAL))
FINISHED_JOBS = Rows(CompactionJob, "finished_at", lambda: Q(finished_at__isnull=False))


def needed_repair_q() -> Q:
    """An observed compaction whose recorded verdict says it needed repair
    (``memoryhub.memory.repair``: ``attempts[0].repair.needed``). jsonb containment on
    PostgreSQL; on SQLite a match on the stored JSON text (written by json.dumps)."""
    observed = Q(idempotency_key__startswith="observed/")
    if connection.vendor == "postgresql":
        return observed & Q(attempts__contains=[{"repair": {"needed": True}}])
    return observed & Q(attempts__icontains='"needed": true')


NEEDING_REPAIR = FINISHED_JOBS.where(needed_repair_q)
COMPACTIONS = FINISHED_JOBS.where(lambda: Q(status=JobStatus.SUCCEEDED))


# The numerator is the job's ``accepted`` column: memoryhub.memory.acceptance keeps it equal to
# acceptance.accepted_q (what "accepted" means) as summaries change, and tests/conftest.py holds
# it equal after every test of the suite.
ACCEPTANCE = Share(
    FINISHED_JOBS.where(lambda: Q(status__in=[JobStatus.SUCCEEDED, JobStatus.FAILED])),
    lambda: Q(accepted=True),
)


def acceptance_given_succeeded(
    tenant: Tenant, since: datetime, until: datetime, succeeded: int
) -> float | None:
    """``acceptance_rate`` over [since, until) when the window's succeeded compactions are already
    counted (the overview has them from the rollups): it then counts only the failed jobs and the
    jobs that are not accepted, each a partial index, never the window's accepted ones (a busy
    week: 100k jobs, 120 ms to count; tests/memoryhub/test_acceptance_complement.py holds it
    equal to the metric case by case)."""
    jobs = ACCEPTANCE.rows.between(tenant, since, until).order_by()
    # Two counts, each of one partial index alone (index-only): as one aggregate over both (an
    # OR) the database read every row of the second to tell them apart.
    failed, unaccepted = jobs.filter(status=JobStatus.FAILED), jobs.filter(accepted=False)
    counted = (
        Tenant.objects.filter(pk=tenant.pk).values(failed=_count(failed), unaccepted=_count(unaccepted)).get()
    )
    total = succeeded + counted["failed"]
    return ratio(total - counted["unaccepted"], total)


def _count(rows: QuerySet) -> Coalesce:
    """COUNT(*) of ``rows`` (all of one tenant) as a scalar subquery."""
    return Coalesce(Subquery(rows.values("tenant").annotate(n=Count("*")).values("n")), 0)  # index-only


# action__in lets the (tenant, action, at) index serve every decision query.
DECISIONS = Rows(TriggerDecision, "at", lambda: Q(action__in=["continue", "compact", "retrieve_or_block"]))
# triggers.engine.is_overflow_incident in SQL (tests/triggers/test_overflow_rule.py: they agree).
OVERFLOW_INCIDENTS = DECISIONS.where(lambda: Q(hard_limit__gt=0, projected_tokens__gt=F("hard_limit")))
FALLBACK_DECISIONS = DECISIONS.where(lambda: Q(action="retrieve_or_block"))


def _artifacts(tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> QuerySet:
    return _scoped(_window(Artifact.objects.filter(tenant=tenant), "at", since, until), scope)


def _artifact_chain_annotations(qs: QuerySet) -> QuerySet:
    through = Artifact.produced_by.through
    links = through.objects.filter(artifact_id=OuterRef("pk"))
    return qs.annotate(
        has_trace=Exists(links),
        has_broken_trace=Exists(links.filter(incomplete_trace_q("consumertrace__"))),
    )


def _artifact_chain_counts(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> dict[str, int]:
    qs = _artifact_chain_annotations(_artifacts(tenant, since, until, scope))
    return qs.aggregate(
        total=Count("id"),
        complete=Count("id", filter=Q(has_trace=True, has_broken_trace=False)),
    )


def _audit_trace_completeness(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float | None:
    agg = _artifact_chain_counts(tenant, since, until, scope)
    return ratio(agg["complete"], agg["total"])


def _missing_provenance(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float:
    traces = TRACES.between(tenant, since, until, scope).filter(incomplete_trace_q()).count()
    agg = _artifact_chain_counts(tenant, since, until, scope)
    return float(traces + (agg["total"] or 0) - (agg["complete"] or 0))


def _time_to_reconstruct_ms(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float | None:
    qs = _window(Investigation.objects.filter(tenant=tenant), "at", since, until)
    qs = _scoped(qs, scope, "artifact__workflow")
    return _float(qs.aggregate(v=Avg("elapsed_ms"))["v"])


def _tokens_before(tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> float:
    return float(COMPACTIONS.between(tenant, since, until, scope).aggregate(v=Sum("tokens_in"))["v"] or 0)


def _tokens_after(tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> float:
    return float(COMPACTIONS.between(tenant, since, until, scope).aggregate(v=Sum("tokens_out"))["v"] or 0)


def _generation_cost(tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope) -> float:
    # Failed attempts cost money too: every finished job counts.
    return float(FINISHED_JOBS.between(tenant, since, until, scope).aggregate(v=Sum("cost_usd"))["v"] or 0)


def _compaction_latency_ms(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float | None:
    qs = COMPACTIONS.between(tenant, since, until, scope)
    return _float(qs.aggregate(v=Avg("latency_ms"))["v"])


def _fallback_retrievals(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float:
    return FALLBACK_DECISIONS(tenant, since, until, scope) + FALLBACK_TRACES(tenant, since, until, scope)


def quality_floor() -> float:
    return float(getattr(settings, "MEMORYHUB_QUALITY_FLOOR", 0.5))


def _token_estimate_drift(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float | None:
    qs = _scoped(_window(TokenEstimate.objects.filter(tenant=tenant), "at", since, until), scope)
    return _float(qs.aggregate(v=Avg(Abs("drift")))["v"])


def _quality_regressions(
    tenant: Tenant, since: datetime | None, until: datetime | None, scope: Scope
) -> float:
    previous = (
        Artifact.objects.filter(workflow=OuterRef("workflow"), quality_score__isnull=False)
        .filter(Q(at__lt=OuterRef("at")) | Q(at=OuterRef("at"), pk__lt=OuterRef("pk")))
        .order_by("-at", "-pk")
        .values("quality_score")[:1]
    )
    qs = (
        _artifacts(tenant, since, until, scope)
        .filter(quality_score__isnull=False)
        .annotate(previous_score=Subquery(previous))
    )
    return float(
        qs.filter(Q(quality_score__lt=quality_floor()) | Q(quality_score__lt=F("previous_score"))).count()
    )


_COMPUTERS: dict[str, MetricFunction] = {
    "summary_versions": SUMMARY_VERSIONS,
    "active_summary_age_seconds": _workflow_gauge("active_summary_age_seconds"),
    "active_summary_age_events": _workflow_gauge("active_summary_age_events"),
    "tail_events": _workflow_gauge("tail_events"),
    "tail_tokens": _workflow_gauge("tail_tokens"),
    "tail_budget_fraction": _tail_budget_fraction,
    "stale_activation_attempts": STALE_ATTEMPTS,
    "validation_failures": VALIDATION_FAILURES,
    "validation_failure_rate": VALIDATION_FAILURE_RATE,
    "unexplained_source_gaps": UNEXPLAINED_GAPS,
    "audit_trace_completeness": _audit_trace_completeness,
    "missing_provenance": _missing_provenance,
    "time_to_reconstruct_ms": _time_to_reconstruct_ms,
    "compactions": COMPACTIONS,
    "tokens_before": _tokens_before,
    "tokens_after": _tokens_after,
    "acceptance_rate": ACCEPTANCE,
    "generation_cost": _generation_cost,
    "compaction_latency_ms": _compaction_latency_ms,
    "overflow_incidents": OVERFLOW_INCIDENTS,
    "fallback_retrievals": _fallback_retrievals,
    "quality_regressions": _quality_regressions,
    "unvalidated_consumptions": UNVALIDATED_READS,
    "missed_compaction": MISSED_COMPACTIONS,
    "token_estimate_drift": _token_estimate_drift,
    "compactions_needing_repair": NEEDING_REPAIR,
}
assert set(_COMPUTERS) == set(METRICS), "every metric needs exactly one computer"

# The rows each windowed metric that is neither a count nor a share of rows reads in its window.
# Over a bucket where none of them has a row it is what it is over no rows, so a backfill of days
# computes it only for the buckets where one has (rollup). A new windowed metric must say here
# what it reads (tests/memoryhub/test_overview_rollups.py checks every sample against compute).
WINDOW_READS: dict[str, tuple[Rows, ...]] = {
    "audit_trace_completeness": (Rows(Artifact, "at"),),
    "missing_provenance": (TRACES, Rows(Artifact, "at")),
    "time_to_reconstruct_ms": (Rows(Investigation, "at", workflow_path="artifact__workflow"),),
    "tokens_before": (COMPACTIONS,),
    "tokens_after": (COMPACTIONS,),
    "generation_cost": (FINISHED_JOBS,),
    "compaction_latency_ms": (COMPACTIONS,),
    "fallback_retrievals": (FALLBACK_DECISIONS, FALLBACK_TRACES),
    "quality_regressions": (Rows(Artifact, "at"),),
    "token_estimate_drift": (Rows(TokenEstimate, "at"),),
}
assert {
    name
    for name, definition in METRICS.items()
    if definition.kind != GAUGE and not isinstance(_COMPUTERS[name], Rows | Share)
} == set(WINDOW_READS), "a windowed metric must be a count or share of rows, or say what it reads"


def needing_repair_by_source(
    tenant: Tenant, since: datetime | None = None, until: datetime | None = None
) -> dict[str, int]:
    """``compactions_needing_repair`` per workflow source (sources without any are left out)."""
    return dict(
        NEEDING_REPAIR.between(tenant, since, until)
        .values("workflow__source")
        .annotate(n=Count("pk"))
        .order_by()
        .values_list("workflow__source", "n")
    )


# The overview's "Compactions per source" card counts the window's compactions per workflow
# source, and how many of them were observed and needed repair. Counting a busy week's jobs on
# every page view grew with the data, so the rollup writes them per 5-minute bucket as well: one
# sample per source and part that is not zero, named by source_metric(), plus a SOURCE_MARK
# sample for every bucket it rolled up (value: the bucket's compactions), which says which
# buckets the per-source samples cover (a covered bucket without a source's sample counts 0).
SOURCE_MARK = "compactions_by_source"
SOURCE_PARTS = ("compactions", "observed", "needed_repair")


def source_metric(source: str, part: str) -> str:
    return f"{SOURCE_MARK}:{source}:{part}"


def source_metric_names() -> list[str]:
    return [SOURCE_MARK] + [source_metric(s, p) for s in WorkflowSource.values for p in SOURCE_PARTS]


def _source_tallies() -> dict[str, Count]:
    """SOURCE_PARTS as aggregates of compaction jobs."""
    return {
        "compactions": Count("pk"),
        "observed": Count("pk", filter=Q(idempotency_key__startswith="observed/")),
        "needed_repair": Count("pk", filter=needed_repair_q()),
    }


def compactions_per_source(compactions: QuerySet) -> dict[str, dict[str, int]]:
    """``{source: {part: n}}`` for these compaction jobs, in one grouped query."""
    rows = compactions.values("workflow__source").annotate(**_source_tallies()).order_by()
    return {row["workflow__source"]: {part: row[part] for part in SOURCE_PARTS} for row in rows}


def _source_samples(tenant: Tenant, starts: list[datetime]) -> list[MetricSample]:
    """The per-source samples of these 5-minute buckets, and each bucket's SOURCE_MARK."""
    counted = _bucketed(
        COMPACTIONS.of_tenant(tenant), COMPACTIONS.time_field, starts, _source_tallies(), "workflow__source"
    )
    samples, totals = [], dict.fromkeys(starts, 0)
    for (start, source), parts in counted.items():
        if start not in totals:
            continue
        totals[start] += parts["compactions"]
        samples += [
            MetricSample(tenant=tenant, metric=source_metric(source, part), bucket_start=start, value=n)
            for part, n in parts.items()
            if n
        ]
    return samples + [
        MetricSample(tenant=tenant, metric=SOURCE_MARK, bucket_start=start, value=n)
        for start, n in totals.items()
    ]


def counted_rows(metric: str) -> Rows:
    """The rows a counter counts, for reports that count them per bucket or per workflow."""
    computer = _COMPUTERS[metric]
    if not isinstance(computer, Rows):
        raise TypeError(f"metric {metric!r} does not count rows")
    return computer


def share(metric: str) -> Share:
    """The rows and the part of them a ratio metric divides."""
    computer = _COMPUTERS[metric]
    if not isinstance(computer, Share):
        raise TypeError(f"metric {metric!r} is not a share of rows")
    return computer


# --- public API -----------------------------------------------------------------------------


def compute(
    tenant: Tenant,
    metric: str,
    *,
    since: datetime | None,
    until: datetime | None = None,
    workflow_prefix: str = "",
    source: str = "",
) -> float | None:
    """Value of ``metric`` for ``tenant`` over ``[since, until)`` (gauges: now).

    ``workflow_prefix`` narrows it to workflows whose external_id starts with it, ``source`` to
    the workflows one integration feeds. ``None`` means "no data" (a ratio or mean over no rows,
    a gauge with no workflow), never zero.
    """
    if metric not in _COMPUTERS:
        raise KeyError(f"unknown metric {metric!r}")
    return _COMPUTERS[metric](tenant, since, until, Scope(workflow_prefix or "", source or ""))


def snapshot(
    tenant: Tenant,
    *,
    window: timedelta = DEFAULT_WINDOW,
    totals: bool = False,
    workflow_prefix: str = "",
    now: datetime | None = None,
) -> dict[str, float | None]:
    """Every metric now: counters over the last ``window`` (or since the beginning with
    ``totals=True``, as Prometheus counters), ratios/means over the window, gauges current.

    One aggregate query per metric; the count does not grow with the tenant's history.
    """
    now = now or timezone.now()
    since = now - window
    values: dict[str, float | None] = {}
    for name, definition in METRICS.items():
        start = None if totals and definition.kind == COUNTER else since
        values[name] = compute(tenant, name, since=start, until=None, workflow_prefix=workflow_prefix)
    return values


def bucket_floor(moment: datetime, bucket: timedelta) -> datetime:
    """Start of the epoch-aligned bucket containing ``moment``."""
    seconds = int(bucket.total_seconds())
    ts = int(moment.timestamp())
    return datetime.fromtimestamp(ts - ts % seconds, tz=UTC)


def _combine(kind: str, values: list[float]) -> float:
    if kind == COUNTER:
        return float(sum(values))
    if kind == GAUGE:
        return float(max(values))
    # Ratios and means: the mean of the 5-minute values (an approximation for wide buckets).
    return float(sum(values) / len(values))


LIVE = object()  # series(current=LIVE): compute the current bucket's value


def series(
    tenant: Tenant,
    metric: str,
    since: datetime,
    bucket: timedelta = ROLLUP_BUCKET,
    *,
    now: datetime | None = None,
    current: float | None | object = LIVE,
) -> list[tuple[datetime, float | None]]:
    """``[(bucket_start, value)]`` from ``since`` to now: past buckets from the MetricSample
    rollups (buckets the rollup never wrote are left out), the current bucket computed live.

    ``bucket`` must be a whole multiple of the 5-minute rollup bucket. ``current``: the current
    bucket's value when the caller has it already (workflow_gauges reads several in one query).
    """
    definition = METRICS[metric]
    if bucket < ROLLUP_BUCKET or bucket.total_seconds() % ROLLUP_BUCKET.total_seconds():
        raise ValueError("bucket must be a whole multiple of 5 minutes")
    now = now or timezone.now()
    first = bucket_floor(since, bucket)
    current_start = bucket_floor(now, bucket)
    grouped: dict[datetime, list[float]] = {}
    samples = MetricSample.objects.filter(
        tenant=tenant,
        workflow__isnull=True,
        metric=metric,
        bucket_start__gte=first,
        bucket_start__lt=current_start,
    ).values_list("bucket_start", "value")
    for start, value in samples:
        grouped.setdefault(bucket_floor(start, bucket), []).append(value)
    points: list[tuple[datetime, float | None]] = [
        (start, _combine(definition.kind, values)) for start, values in sorted(grouped.items())
    ]
    live = compute(tenant, metric, since=current_start, until=None) if current is LIVE else current
    points.append((current_start, cast(float | None, live)))
    return points


UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


def rolled_up(
    tenant: Tenant, metrics: Iterable[str], since: datetime, until: datetime, unit: str
) -> dict[str, dict[datetime, tuple[float, int, float]]]:
    """The tenant-wide 5-minute samples of ``metrics`` in [since, until), added up per ``unit``
    (a database truncation unit: minute, hour or day) in one query: ``{metric: {unit_start:
    (sum, samples, mean)}}``. A counter's unit is fully rolled up when it has
    ``unit_samples(unit)`` samples (the rollup writes a counter for every bucket it covers).
    Whole hours and days are read from the hours the rollup added up (MetricHour)."""
    found: dict[str, dict[datetime, tuple[float, int, float]]] = {name: {} for name in metrics}
    if unit in ("hour", "day") and since == bucket_floor(since, HOUR) and until == bucket_floor(until, HOUR):
        hours = MetricHour.objects.filter(
            tenant=tenant, metric__in=list(found), hour_start__gte=since, hour_start__lt=until
        ).order_by()
        if unit == "hour":
            rows = hours.values_list("metric", "hour_start", "total", "samples")
        else:
            rows = (
                hours.annotate(unit_start=Trunc("hour_start", unit, tzinfo=UTC))
                .values("metric", "unit_start")
                .annotate(sum_total=Sum("total"), sum_samples=Sum("samples"))
                .values_list("metric", "unit_start", "sum_total", "sum_samples")
            )
        for name, start, total, samples in rows:
            found[name][start] = (total, samples, total / samples)
        return found
    per_unit = (
        MetricSample.objects.filter(
            tenant=tenant,
            workflow__isnull=True,
            metric__in=list(found),
            bucket_start__gte=since,
            bucket_start__lt=until,
        )
        .annotate(unit_start=Trunc("bucket_start", unit, tzinfo=UTC))
        .values("metric", "unit_start")
        .annotate(total=Sum("value"), samples=Count("pk"), mean=Avg("value"))
        .order_by()
        .values_list("metric", "unit_start", "total", "samples", "mean")
    )
    for name, start, total, count, mean in per_unit:
        found[name][start] = (total, count, mean)
    return found


HOUR = timedelta(hours=1)


def add_up_hours(tenant: Tenant, starts: Iterable[datetime]) -> int:
    """Add up again the tenant-wide samples of the hours that hold these 5-minute buckets
    (MetricHour); how many hour rows were written. Samples are only ever added, never changed,
    so an hour row added up after its last sample landed is the sum of them all."""
    hours = {bucket_floor(start, HOUR) for start in starts}
    if not hours:
        return 0
    added = (
        MetricSample.objects.filter(
            tenant=tenant,
            workflow__isnull=True,
            bucket_start__gte=min(hours),
            bucket_start__lt=max(hours) + HOUR,
        )
        .annotate(hour=Trunc("bucket_start", "hour", tzinfo=UTC))
        .values("metric", "hour")
        .annotate(total=Sum("value"), samples=Count("pk"))
        .order_by()
        .values_list("metric", "hour", "total", "samples")
    )
    rows = [
        MetricHour(tenant=tenant, metric=name, hour_start=hour, total=total, samples=samples)
        for name, hour, total, samples in added
        if hour in hours
    ]
    MetricHour.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["tenant", "metric", "hour_start"],
        update_fields=["total", "samples"],
    )
    return len(rows)


def unit_samples(unit: str) -> int:
    """How many 5-minute buckets a truncation unit holds (a minute holds the one that starts in it)."""
    return max(1, UNIT_SECONDS[unit] // int(ROLLUP_BUCKET.total_seconds()))


def rollup(
    tenant: Tenant, *, now: datetime | None = None, backfill: timedelta | None = None, gauges: bool = True
) -> int:
    """Write tenant-wide samples for completed 5-minute buckets; returns how many were written.

    Window metrics are computed exactly for the last completed bucket and for up to
    ROLLUP_BACKFILL_BUCKETS earlier ones that are missing (a worker was down), or as far back as
    ``backfill`` (``manage.py rollup_metrics`` after a long outage or an import). Gauges can only
    be measured now, so they fill the last completed bucket only (``gauges=False`` skips them
    when ``now`` is in the past). Idempotent: existing samples are
    kept (the unique constraint + ignore_conflicts make concurrent runs safe).
    """
    now = now or timezone.now()
    last = bucket_floor(now, ROLLUP_BUCKET) - ROLLUP_BUCKET
    reach = backfill if backfill is not None else ROLLUP_BUCKET * (ROLLUP_BACKFILL_BUCKETS - 1)
    earliest = max(bucket_floor(last - reach, ROLLUP_BUCKET), bucket_floor(tenant.created_at, ROLLUP_BUCKET))
    existing = set(
        MetricSample.objects.filter(
            tenant=tenant, workflow__isnull=True, bucket_start__gte=earliest, bucket_start__lte=last
        ).values_list("metric", "bucket_start")
    )
    rows: list[MetricSample] = []
    busy = _BusyBuckets(tenant)
    for name, definition in METRICS.items():
        if definition.kind == GAUGE and not gauges:
            continue
        starts = [last] if definition.kind == GAUGE else _bucket_range(earliest, last)
        missing = [start for start in starts if (name, start) not in existing]
        if missing:
            rows += [
                MetricSample(tenant=tenant, metric=name, bucket_start=start, value=value)
                for start, value in _bucket_values(tenant, name, missing, busy).items()
                if value is not None
            ]
    missing = [start for start in _bucket_range(earliest, last) if (SOURCE_MARK, start) not in existing]
    if missing:
        rows += _source_samples(tenant, missing)
    with transaction.atomic():
        # One rollup of a tenant at a time from here (a row lock that lets rows referencing the
        # tenant be written meanwhile): the hours are added up after every sample of a concurrent
        # run has landed, never from half of them.
        Tenant.objects.select_for_update(no_key=True).filter(pk=tenant.pk).exists()
        MetricSample.objects.bulk_create(rows, ignore_conflicts=True)
        add_up_hours(tenant, [row.bucket_start for row in rows])
    return len(rows)


class _BusyBuckets:
    """Which 5-minute buckets hold rows of a Rows definition (one query per definition)."""

    def __init__(self, tenant: Tenant) -> None:
        self.tenant = tenant
        self.found: dict[tuple[int, datetime, datetime], set[datetime]] = {}

    def of(self, rows: Rows, starts: list[datetime]) -> set[datetime]:
        key = (id(rows), starts[0], starts[-1])
        if key not in self.found:
            counted = _bucketed(rows.of_tenant(self.tenant), rows.time_field, starts, {"n": Count("pk")})
            self.found[key] = {start for (start,), n in counted.items() if n["n"]}
        return self.found[key]


def _bucket_values(
    tenant: Tenant, metric: str, starts: list[datetime], busy: _BusyBuckets
) -> dict[datetime, float | None]:
    """The metric over each of these 5-minute buckets. A count of rows or a share of them is one
    query for all the buckets (a backfill of days would otherwise be a query per bucket); another
    windowed metric is computed for the buckets where what it reads has rows, and is its value
    over no rows (an empty window) elsewhere."""
    computer = _COMPUTERS[metric]
    if isinstance(computer, Rows):
        counted = _bucketed(computer.of_tenant(tenant), computer.time_field, starts, {"n": Count("pk")})
        return {start: float(counted.get((start,), {"n": 0})["n"]) for start in starts}
    if isinstance(computer, Share):
        rows = computer.rows
        tallied = _bucketed(rows.of_tenant(tenant), rows.time_field, starts, computer.tallies())
        return {
            start: ratio(t["part"], t["total"]) if (t := tallied.get((start,))) else None for start in starts
        }
    if metric in WINDOW_READS:
        active = set().union(*(busy.of(rows, starts) for rows in WINDOW_READS[metric]))
        nothing = compute(tenant, metric, since=starts[0], until=starts[0])
        return {
            start: compute(tenant, metric, since=start, until=start + ROLLUP_BUCKET)
            if start in active
            else nothing
            for start in starts
        }
    return {start: compute(tenant, metric, since=start, until=start + ROLLUP_BUCKET) for start in starts}


def _bucketed(
    qs: QuerySet, time_field: str, starts: list[datetime], aggregates: dict[str, Any], *by: str
) -> dict[tuple[Any, ...], dict[str, int]]:
    """``aggregates`` of these rows per 5-minute bucket from the first of ``starts`` to the end of
    the last (and per ``by`` field): ``{(bucket_start, *by values): {name: value}}``, in one query
    grouped by minute (a 5-minute bucket is whole minutes, epoch-aligned)."""
    minutes = (
        _window(qs, time_field, starts[0], starts[-1] + ROLLUP_BUCKET)
        .annotate(minute=Trunc(time_field, "minute", tzinfo=UTC))
        .values("minute", *by)
        .annotate(**aggregates)
        .order_by()
    )
    found: dict[tuple[Any, ...], dict[str, int]] = {}
    for row in minutes:
        key = (bucket_floor(row["minute"], ROLLUP_BUCKET), *(row[field] for field in by))
        totals = found.setdefault(key, dict.fromkeys(aggregates, 0))
        for name in aggregates:
            totals[name] += row[name]
    return found


def _bucket_range(first: datetime, last: datetime) -> list[datetime]:
    starts = []
    start = first
    while start <= last:
        starts.append(start)
        start += ROLLUP_BUCKET
    return starts


def rollup_all(*, now: datetime | None = None) -> int:
    """Roll up every tenant (beat task memoryhub.alerting.rollup_metrics)."""
    now = now or timezone.now()
    return sum(rollup(tenant, now=now) for tenant in Tenant.objects.all().iterator())
