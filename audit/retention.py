"""Retention policies per tenant and record class, and the daily sweep that enforces them.

Expired content is tombstoned, never deleted: rows keep seq, kind, hashes and token counts as
minimal provenance. Raw events and tool inputs/outputs go through the same purge path as a manual
purge (one Purge per workflow and sweep, source="retention"), so summaries derived from them are
scrubbed too. Summaries older than their class's period lose their content; consumer-trace detail
(refs, checkpoint ids, context ids) is cleared while the summary/tail provenance stays.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.log import record
from audit.models import Purge, RecordClass, RetentionPolicy
from audit.payloads import summary_payloads, tombstone_payload_ids
from audit.purge import purge_events, tombstone_content
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.models import ConsumerTrace, Event, Summary, SummaryStatus, Tenant, Workflow

TOOL_KINDS = ("tool_call", "tool_result")
MAX_DAYS = 36_500


def policies_for(tenant: Tenant) -> dict[str, int | None]:
    """{record_class: days or None (= kept forever)} for every class."""
    stored = dict(RetentionPolicy.objects.filter(tenant=tenant).values_list("record_class", "days"))
    return {rc.value: stored.get(rc.value) for rc in RecordClass}


def policy_rows(tenant: Tenant) -> list[dict[str, Any]]:
    """Every record class with its label and period (``days``: None = kept forever), for the page."""
    current = policies_for(tenant)
    return [{"value": rc.value, "label": rc.label, "days": current[rc.value]} for rc in RecordClass]


def set_policies(tenant: Tenant, policies: Any, actor: Actor) -> dict[str, int | None]:
    """Replace the given classes' periods (others unchanged). Minimal provenance must outlive the rest."""
    if not isinstance(policies, dict) or not policies:
        raise InvalidInput(
            "'policies' must be an object {record_class: days or null}", code="invalid_policies"
        )
    unknown = set(policies) - set(RecordClass.values)
    if unknown:
        raise InvalidInput(
            f"unknown record class(es) {sorted(unknown)}; expected {', '.join(RecordClass.values)}",
            code="invalid_policies",
        )
    for name, days in policies.items():
        if days is not None and (
            isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS
        ):
            raise InvalidInput(
                f"{name}: days must be null (forever) or an integer 1..{MAX_DAYS}", code="invalid_policies"
            )
    merged = {**policies_for(tenant), **policies}
    provenance = merged[RecordClass.PROVENANCE]
    if provenance is not None:
        longest = [d for k, d in merged.items() if k != RecordClass.PROVENANCE]
        if any(d is None or d > provenance for d in longest):
            raise InvalidInput(
                "minimal provenance must be kept at least as long as every other record class",
                code="invalid_policies",
            )
    with transaction.atomic():
        for name, days in policies.items():
            RetentionPolicy.objects.update_or_create(
                tenant=tenant, record_class=name, defaults={"days": days, "updated_by": str(actor)}
            )
        record(tenant, actor, "retention.update", ("retentionpolicy", tenant.slug), {"policies": policies})
    return policies_for(tenant)


@dataclass
class SweepReport:
    tenant: str
    purges: list[str] = field(default_factory=list)
    events_tombstoned: int = 0
    summaries_scrubbed: int = 0
    traces_trimmed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def sweep_tenant(tenant: Tenant, *, now=None) -> SweepReport:
    """Apply the tenant's retention policies once (idempotent: already-tombstoned rows are skipped)."""

    now = now or timezone.now()
    policies = policies_for(tenant)
    report = SweepReport(tenant=tenant.slug)
    actor = Actor.system("retention-sweep")

    event_filters = []
    if policies[RecordClass.RAW_EVENTS]:
        cutoff = now - timedelta(days=cast(int, policies[RecordClass.RAW_EVENTS]))
        event_filters.append(Q(created_at__lt=cutoff) & ~Q(kind__in=TOOL_KINDS))
    if policies[RecordClass.TOOL_IO]:
        cutoff = now - timedelta(days=cast(int, policies[RecordClass.TOOL_IO]))
        event_filters.append(Q(created_at__lt=cutoff) & Q(kind__in=TOOL_KINDS))
    if event_filters:
        condition = event_filters[0]
        for extra in event_filters[1:]:
            condition |= extra
        expired = Event.objects.filter(condition, workflow__tenant=tenant, purged_at__isnull=True)
        for workflow_id in expired.values_list("workflow_id", flat=True).distinct().order_by("workflow_id"):
            seqs = list(expired.filter(workflow_id=workflow_id).order_by("seq").values_list("seq", flat=True))
            for lo in range(0, len(seqs), 10_000):
                outcome = purge_events(
                    Workflow.objects.get(pk=workflow_id),
                    {"seqs": seqs[lo : lo + 10_000]},
                    actor,
                    "retention period expired",
                    source="retention",
                )
                report.purges.append(outcome.purge.purge_id)
                report.events_tombstoned += len(outcome.seqs)
                report.summaries_scrubbed += len(outcome.scrubbed)

    if policies[RecordClass.SUMMARIES]:
        cutoff = now - timedelta(days=cast(int, policies[RecordClass.SUMMARIES]))
        old = Summary.objects.filter(
            tenant=tenant, created_at__lt=cutoff, purged_by__isnull=True
        ).select_related("workflow")
        for summary in old.order_by("workflow_id", "version"):
            with transaction.atomic():
                purge = Purge.objects.create(
                    tenant=tenant,
                    workflow=summary.workflow,
                    purge_id=_purge_id(),
                    reason="summary retention period expired",
                    actor=str(actor),
                    selector={"summary": summary.summary_id},
                    source="retention",
                    affected_summaries=[summary.summary_id],
                )
                Summary.objects.filter(pk=summary.pk).update(
                    content=tombstone_content(purge, summary), purged_by=purge
                )
                # The text of records about it (check details, reasons, audit data) expires with it.
                tombstone_payload_ids(purge, summary_payloads([summary], before=purge.at))
                if summary.status == SummaryStatus.ACTIVE:
                    lifecycle.quarantine(summary, actor, f"retention: {purge.purge_id}")
                record(
                    tenant,
                    actor,
                    "purge.create",
                    purge,
                    {"summary": summary.summary_id, "source": "retention"},
                )
            report.purges.append(purge.purge_id)
            report.summaries_scrubbed += 1

    if policies[RecordClass.TRACE_DETAIL]:
        cutoff = now - timedelta(days=cast(int, policies[RecordClass.TRACE_DETAIL]))
        detail = ConsumerTrace.objects.filter(tenant=tenant, at__lt=cutoff).exclude(
            source_refs=[], checkpoint_id="", context_id=""
        )
        with transaction.atomic():
            report.traces_trimmed = detail.update(source_refs=[], checkpoint_id="", context_id="")
            if report.traces_trimmed:
                record(
                    tenant,
                    actor,
                    "retention.trim_traces",
                    ("tenant", tenant.slug),
                    {"traces": report.traces_trimmed},
                )

    if report.purges or report.traces_trimmed:
        with transaction.atomic():
            record(tenant, actor, "retention.sweep", ("tenant", tenant.slug), report.as_dict())
    return report


def sweep_all(*, now=None) -> list[SweepReport]:
    tenants = Tenant.objects.filter(retention_policies__days__isnull=False).distinct().order_by("slug")
    return [sweep_tenant(t, now=now) for t in tenants]


def _purge_id() -> str:
    return "prg_" + secrets.token_hex(8)
