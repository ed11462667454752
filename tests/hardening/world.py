"""The shared world of the hardening tests: two tenants with realistic data, built once.

acme is the seed scenario (``memoryhub.demo.loader.load``: api-tests-42 with 240 events, S1–S3, a
stale activation, traces, artifacts T49/T57, jobs, an investigation; refunds-api-9) plus one
summary in every lifecycle status a review action starts from, a channel, a trigger decision, a
workflow policy, a retention policy and a purge. globex (the other tenant) gets one row of every
kind too, so a list that leaked across tenants would show it.

Everything goes through the real services. ``build()`` returns a ``World`` of ids the tests use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.investigate import investigate
from audit.purge import parse_selector, purge_events
from audit.retention import set_policies
from memoryhub.core.actors import Actor
from memoryhub.demo import scenario
from memoryhub.demo.loader import load
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.validation import ValidationOutcome
from memoryhub.models import (
    AlertEvent,
    AlertRule,
    ApiKey,
    Artifact,
    Channel,
    CompactionJob,
    ConsumerTrace,
    Role,
    Summary,
    SummaryStatus,
    Tenant,
    Workflow,
)
from memoryhub.observe.alerting import services as alerting
from memoryhub.pipeline.jobs import request_compaction
from tests.conftest import Party
from tests.factories import append, event, make_workflow, sealed_as_a_compactor_would, units_left_out
from triggers import services as triggers

BUILDER = Actor.system("tests.hardening")
COMPACTOR = {"name": "h9-compactor", "version": "1.0", "model": "extractive-v1"}
REVIEW_WF = "h9-review"  # acme workflow whose summaries the review-action endpoints act on
OTHER_WF = "h9-globex"  # globex workflow with a summary, trace, artifact, job, purge
# Per-tenant settings a leak would show: retention days for trace detail, default target tokens.
ACME_DAYS, GLOBEX_DAYS = 400, 700
ACME_TARGET, GLOBEX_TARGET = 8111, 7222


@dataclass
class TenantObjects:
    """Ids of one tenant's objects, as the API and the pages name them."""

    slug: str
    workflows: list[str] = field(default_factory=list)
    summary_ids: list[str] = field(default_factory=list)
    job_ids: list[int] = field(default_factory=list)
    trace_ids: list[int] = field(default_factory=list)
    artifact_ids: list[str] = field(default_factory=list)
    rule_ids: list[int] = field(default_factory=list)
    channel_ids: list[int] = field(default_factory=list)
    purge_ids: list[str] = field(default_factory=list)
    investigation_ids: list[int] = field(default_factory=list)
    audit_hashes: list[str] = field(default_factory=list)
    flip_ids: list[int] = field(default_factory=list)
    key_prefixes: list[str] = field(default_factory=list)


@dataclass
class World:
    acme: Tenant
    globex: Tenant
    parties: dict[str, Party]  # alice admin, bob reviewer, carol viewer (acme); mallory admin (globex)
    revoked_key: str  # an acme admin key that has been revoked
    demo_key: str  # the demo loader's acme admin key
    summaries: dict[str, str]  # lifecycle fixture name -> summary_id (acme)
    mine: TenantObjects = None  # type: ignore[assignment]  # acme
    theirs: TenantObjects = None  # type: ignore[assignment]  # globex

    def refresh(self) -> None:
        self.mine = collect(self.acme)
        self.theirs = collect(self.globex)


def collect(tenant: Tenant) -> TenantObjects:
    """Every id of a tenant's objects (read from the database, so it follows purges and deletes)."""
    from audit.models import AuditEntry, Investigation, Purge

    return TenantObjects(
        slug=tenant.slug,
        workflows=list(
            Workflow.objects.filter(tenant=tenant).order_by("pk").values_list("external_id", flat=True)
        ),
        summary_ids=list(
            Summary.objects.filter(workflow__tenant=tenant)
            .order_by("pk")
            .values_list("summary_id", flat=True)
        ),
        job_ids=list(CompactionJob.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)),
        trace_ids=list(
            ConsumerTrace.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)
        ),
        artifact_ids=list(
            Artifact.objects.filter(tenant=tenant).order_by("pk").values_list("artifact_id", flat=True)
        ),
        rule_ids=list(AlertRule.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)),
        channel_ids=list(Channel.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)),
        purge_ids=list(Purge.objects.filter(tenant=tenant).order_by("pk").values_list("purge_id", flat=True)),
        investigation_ids=list(
            Investigation.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)
        ),
        audit_hashes=list(
            AuditEntry.objects.filter(tenant=tenant).order_by("seq").values_list("entry_hash", flat=True)
        ),
        flip_ids=list(AlertEvent.objects.filter(tenant=tenant).order_by("pk").values_list("pk", flat=True)),
        key_prefixes=list(
            ApiKey.objects.filter(tenant=tenant).order_by("pk").values_list("prefix", flat=True)
        ),
    )


# --- builders -------------------------------------------------------------------------------------


def _events(workflow: Workflow, n: int, prefix: str) -> None:
    append(workflow, [event(i, client_event_id=f"{prefix}-{i}") for i in range(1, n + 1)])


def _content(start: int, end: int, label: str) -> dict[str, Any]:
    return {
        "schema": "memoryhub.summary/v1",
        "narrative": f"{label}: events {start}-{end} discussed requirements for POST /payments.",
        "facts": [],
        "open_items": [],
        "dropped": units_left_out(start, end),
    }


def _summary(workflow: Workflow, end: int, label: str) -> Summary:
    return create_summary(
        workflow,
        content=sealed_as_a_compactor_would(workflow, 1, end, _content(1, end, label)),
        covers_from_seq=1,
        covers_to_seq=end,
        compactor=COMPACTOR,
        actor=BUILDER,
    )


def _failed(summary: Summary) -> ValidationOutcome:
    """A validator verdict with one failed check (so the summary is REJECTED and can be waived)."""
    return ValidationOutcome(
        validator_version="rules-5",
        checks=[
            {"name": "schema_version", "passed": True, "detail": "ok"},
            {"name": "mandatory_facts", "passed": False, "detail": "scope fact missing"},
        ],
        mandatory_coverage=0.5,
        passed=False,
        reasons=["mandatory_facts: scope fact missing"],
    )


def _review_targets(tenant: Tenant) -> dict[str, str]:
    """One acme summary in each status a review action starts from (on their own workflow)."""
    workflow = make_workflow(tenant, REVIEW_WF)
    _events(workflow, 40, "rv")
    candidate = _summary(workflow, 10, "candidate")
    validated = lifecycle.validate(_summary(workflow, 20, "validated"), BUILDER)
    rejected = _summary(workflow, 25, "rejected")
    lifecycle.validate(rejected, BUILDER, outcome=_failed(rejected))
    quarantined = lifecycle.quarantine(_summary(workflow, 15, "quarantined"), BUILDER, "h9 fixture")
    assert validated.status == SummaryStatus.VALIDATED, validated.status
    rejected.refresh_from_db()
    assert rejected.status == SummaryStatus.REJECTED, rejected.status
    assert quarantined.status == SummaryStatus.QUARANTINED, quarantined.status
    # Approve is offered (and accepted) only where the policy asks for it.
    gated = make_workflow(tenant, f"{REVIEW_WF}-approval")
    _events(gated, 10, "ap")
    triggers.save_policy(tenant, {"require_approval": True}, BUILDER, workflow=gated, partial=True)
    awaiting = lifecycle.validate(_summary(gated, 10, "awaiting"), BUILDER)
    assert awaiting.status == SummaryStatus.VALIDATED, awaiting.status
    seed = Workflow.objects.get(tenant=tenant, external_id=scenario.WORKFLOW_ID)
    superseded = Summary.objects.filter(workflow=seed, status=SummaryStatus.SUPERSEDED).order_by("-version")
    return {
        "candidate": candidate.summary_id,
        "validated": validated.summary_id,
        "awaiting": awaiting.summary_id,  # VALIDATED under require_approval
        "rejected": rejected.summary_id,
        "quarantined": quarantined.summary_id,
        "superseded": superseded.first().summary_id,  # S2 of the seed workflow (rollback target)
        "active": seed.active_summary.summary_id,
    }


def _extras(tenant: Tenant, workflow: Workflow, tag: str, *, days: int, target: int) -> None:
    """The rows the demo does not make: a channel wired to a new rule that has flipped, a trigger
    decision, a workflow policy override, a tenant default policy, a retention policy and a
    purge. ``days`` and ``target`` differ per tenant so a leaked value is recognisable."""
    from memoryhub.observe.alerting.evaluate import evaluate_rule

    channel = alerting.create_channel(
        tenant, {"kind": "webhook", "name": f"{tag}-hook", "url": f"https://hooks.example.com/{tag}"}, BUILDER
    )
    rule = alerting.create_rule(
        tenant,
        {
            "name": f"{tag} tail growing",
            "metric": "tail_events",
            "comparator": "gte",
            "critical_threshold": 0,
            "channels": [channel.pk],
        },
        BUILDER,
    )
    flip = evaluate_rule(rule).flip
    assert flip is not None, "the new rule should flip to critical"
    triggers.decide(workflow, {"expected_next_step_tokens": 500}, BUILDER)
    triggers.save_policy(tenant, {"target_tokens": 9000}, BUILDER, workflow=workflow, partial=True)
    triggers.save_policy(tenant, {"target_tokens": target}, BUILDER, partial=True)
    set_policies(tenant, {"trace_detail": days}, BUILDER)
    purge_events(workflow, parse_selector({"seqs": [2]}), BUILDER, f"{tag}: subject asked for erasure")


def _globex_objects(globex: Tenant) -> None:
    """globex gets a summary, a trace, an artifact, a job and an investigation of its own."""
    workflow = make_workflow(globex, OTHER_WF)
    _events(workflow, 12, "gx")
    summary = lifecycle.validate(_summary(workflow, 8, "globex"), BUILDER)
    workflow.refresh_from_db()
    lifecycle.activate(summary, workflow.active_revision, BUILDER)
    from memoryhub.context.traces import record_artifact, record_trace

    record_trace(
        workflow,
        {
            "agent": "gx-agent",
            "agent_run_id": "gx-run-1",
            "model_call_id": "gx-call-1",
            "summary_id": summary.summary_id,
            "tail_to_seq": 12,
        },
        BUILDER,
    )
    artifact, _ = record_artifact(
        workflow,
        {"artifact_id": "globex-report-gx1", "kind": "report", "produced_by": {"model_call_id": "gx-call-1"}},
        BUILDER,
    )
    request_compaction(workflow, actor=BUILDER)
    investigate(artifact, "POST /payments", BUILDER)
    _extras(
        globex,
        Workflow.objects.get(tenant=globex, external_id="onboarding-7"),
        "globex",
        days=GLOBEX_DAYS,
        target=GLOBEX_TARGET,
    )


def build(var_dir) -> World:
    """Load the demo and add the rest; call inside an open transaction (the caller rolls it back)."""
    from django.conf import settings

    previous = settings.VAR_DIR
    settings.VAR_DIR = var_dir  # the loader writes its API key file there
    try:
        report = load(lambda line: None)
    finally:
        settings.VAR_DIR = previous
    acme = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    globex = Tenant.objects.exclude(pk=acme.pk).get()
    parties = {
        "alice": Party(acme, "alice", Role.ADMIN),
        "bob": Party(acme, "bob", Role.REVIEWER),
        "carol": Party(acme, "carol", Role.VIEWER),
        "mallory": Party(globex, "mallory", Role.ADMIN),
    }
    from memoryhub.accounts.tenancy import issue_api_key, revoke_api_key

    revoked = issue_api_key(acme, "h9-revoked", role=Role.ADMIN)
    revoke_api_key(revoked.key, BUILDER)
    summaries = _review_targets(acme)
    request_compaction(Workflow.objects.get(tenant=acme, external_id=REVIEW_WF), actor=BUILDER)
    # Extras go on workflows without summaries, so the purge scrubs nothing the tests act on.
    _extras(
        acme,
        Workflow.objects.get(tenant=acme, external_id="refunds-api-9"),
        "acme",
        days=ACME_DAYS,
        target=ACME_TARGET,
    )
    _globex_objects(globex)
    world = World(
        acme=acme,
        globex=globex,
        parties=parties,
        revoked_key=revoked.secret,
        demo_key=report.api_key,
        summaries=summaries,
    )
    world.refresh()
    return world
