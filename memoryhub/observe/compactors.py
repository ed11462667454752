"""What one compactor did in a tenant: the summary versions it produced, how many were accepted,
and what its summaries lost — for the compactor page. Plain functions over the rows.

Acceptance is the ``acceptance_rate`` and ``validation_failure_rate`` metrics' own rows narrowed
to this compactor (one definition with the overview and the alerts). Losses are read from each
summary's latest stored rules-7/8 verdict, never measured again here: units and obligations lost
without a declaration ("silent"), and those the summary declared dropped. A summary without such
a record, or with opaque content, counts as unknown rather than as lossless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet

from memoryhub.core import quality as q
from memoryhub.models import CompactionJob, Summary, Tenant, ValidationRecord
from memoryhub.observe import metrics

# Summaries whose verdicts are read for the loss totals (the newest first): a page read, not a scan.
LOSS_SCAN_MAX = 500


@dataclass(frozen=True)
class Losses:
    """What a summary's stored verdict says it lost. ``known`` False: no verdict to read."""

    known: bool
    silent: int = 0
    declared: int = 0
    validator: str = ""
    # The mandatory-facts check failed (unwaived): facts that must survive did not, and a summary
    # cannot declare those away. The record keeps the kept share, not a count.
    mandatory_lost: bool = False
    mandatory_coverage: float = 1.0


UNKNOWN = Losses(known=False)


@dataclass
class CompactorVersionRow:
    summary: Summary
    losses: Losses


@dataclass
class CompactorReport:
    name: str
    version: str  # "" for every version of the name
    versions_known: list[str]  # the compactor versions this name produced summaries with
    summaries: QuerySet[Summary]  # every summary it produced, newest first (the page paginates)
    status_counts: dict[str, int]
    jobs_finished: int
    jobs_accepted: int
    acceptance: float | None
    validations: int
    validation_failures: int
    validation_failure_rate: float | None
    loss_rows: dict[int, Losses] = field(default_factory=dict)  # summary pk → losses (newest scanned)
    losses_scanned: int = 0
    silent_losses: int = 0
    declared_drops: int = 0
    mandatory_lost: int = 0  # versions whose verdict found mandatory facts lost
    losses_unknown: int = 0


def compactor_summaries(tenant: Tenant, name: str, version: str = "") -> QuerySet[Summary]:
    qs = Summary.objects.filter(tenant=tenant, compactor_name=name)
    if version:
        qs = qs.filter(compactor_version=version)
    return qs.select_related("workflow").defer("content").order_by("-created_at", "-id")


def compactor_known(tenant: Tenant, name: str) -> bool:
    """Whether the compactor produced a summary or was asked for a compaction in the tenant."""
    return (
        Summary.objects.filter(tenant=tenant, compactor_name=name).exists()
        or CompactionJob.objects.filter(tenant=tenant, compactor=name, summary__isnull=True).exists()
    )


def compactor_names(tenant: Tenant) -> list[tuple[str, int]]:
    """Every compactor that produced a summary in the tenant, with how many (most first)."""
    rows = (
        Summary.objects.filter(tenant=tenant)
        .values("compactor_name")
        .annotate(n=Count("pk"))
        .order_by("-n", "compactor_name")
    )
    return [(r["compactor_name"], r["n"]) for r in rows]


def losses_of(record: ValidationRecord | None) -> Losses:
    """Silent and declared losses from one stored rules-7/8 verdict (UNKNOWN without numbers:
    opaque content drops those checks, a purge empties their text)."""
    if record is None:
        return UNKNOWN
    checks = {c.get("name"): c for c in record.checks if isinstance(c, dict)}
    units = (checks.get("unit_retention") or {}).get("retention")
    if not isinstance(units, dict):
        return UNKNOWN
    silent = sum(int(r.get("lost", 0)) for r in units.values() if isinstance(r, dict))
    declared = sum(int(r.get("declared", 0)) for r in units.values() if isinstance(r, dict))
    totals = (checks.get("obligations") or {}).get("totals") or {}
    if totals:
        total, kept, owned = (int(totals.get(k, 0)) for k in ("total", "kept", "declared"))
        silent += max(total - kept - owned, 0)
        declared += owned
    return Losses(
        known=True,
        silent=silent,
        declared=declared,
        validator=record.validator_version,
        mandatory_lost="mandatory_facts" in record.failed_checks,
        mandatory_coverage=record.mandatory_coverage,
    )


def summary_losses(summaries: list[Summary]) -> dict[int, Losses]:
    """Each summary's losses from its latest verdict record (one query for the records)."""
    records = ValidationRecord.objects.filter(
        summary__in=[s.pk for s in summaries], validator_version__in=q.VERDICT_VALIDATORS
    ).order_by("summary_id", "-created_at", "-id")
    latest: dict[int, ValidationRecord] = {}
    for record in records:
        latest.setdefault(record.summary_id, record)
    return {s.pk: losses_of(latest.get(s.pk)) for s in summaries}


def compactor_report(tenant: Tenant, name: str, version: str = "") -> CompactorReport:
    summaries = compactor_summaries(tenant, name, version)
    status_counts = dict(
        summaries.order_by().values("status").annotate(n=Count("pk")).values_list("status", "n")
    )
    versions_known = sorted(
        Summary.objects.filter(tenant=tenant, compactor_name=name)
        .order_by()
        .values_list("compactor_version", flat=True)
        .distinct()
    )

    # The metrics' own rows, narrowed to this compactor: the page and the overview count alike.
    acceptance = metrics.share("acceptance_rate")
    # A job's own compactor field is the name it was requested under (an imported job's may add
    # the version): its summary says who wrote it; a job that wrote none goes by its request.
    jobs = acceptance.rows.of_tenant(tenant).filter(
        Q(summary__compactor_name=name) | Q(summary__isnull=True, compactor=name)
    )
    if version:  # a job that wrote no summary names no version: left out here
        jobs = jobs.filter(summary__compactor_version=version)
    job_tally = jobs.aggregate(**acceptance.tallies())
    failure_rate = metrics.share("validation_failure_rate")
    validations = failure_rate.rows.of_tenant(tenant).filter(summary__compactor_name=name)
    if version:
        validations = validations.filter(summary__compactor_version=version)
    validation_tally = validations.aggregate(**failure_rate.tallies())

    scanned = list(summaries[:LOSS_SCAN_MAX])
    loss_rows = summary_losses(scanned)
    known = [losses for losses in loss_rows.values() if losses.known]
    return CompactorReport(
        name=name,
        version=version,
        versions_known=versions_known,
        summaries=summaries,
        status_counts=status_counts,
        jobs_finished=job_tally["total"],
        jobs_accepted=job_tally["part"],
        acceptance=metrics.ratio(job_tally["part"], job_tally["total"]),
        validations=validation_tally["total"],
        validation_failures=validation_tally["part"],
        validation_failure_rate=metrics.ratio(validation_tally["part"], validation_tally["total"]),
        loss_rows=loss_rows,
        losses_scanned=len(scanned),
        silent_losses=sum(losses.silent for losses in known),
        declared_drops=sum(losses.declared for losses in known),
        mandatory_lost=sum(losses.mandatory_lost for losses in known),
        losses_unknown=len(scanned) - len(known),
    )


def rows_of_page(report: CompactorReport, page: Any) -> list[CompactorVersionRow]:
    """The summaries of one page of the report, each with its losses (read for the page when it
    lies beyond the totals' scan)."""
    missing = [s for s in page if s.pk not in report.loss_rows]
    extra = summary_losses(missing) if missing else {}
    return [CompactorVersionRow(s, report.loss_rows.get(s.pk) or extra[s.pk]) for s in page]
