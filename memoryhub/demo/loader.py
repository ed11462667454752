"""Load the seed scenario through the real service functions (what ``manage.py load_demo`` runs).

Nothing here writes domain rows the services own: events go through ``append_events`` (after the
API's own ``parse_batch`` validation), summaries through ``create_summary`` and the lifecycle's
``validate``/``activate`` (including one stale activation by a late worker), traces and artifacts
through ``record_trace``/``record_artifact``, the investigation through ``audit.investigate``.
The one exception is the historical CompactionJob rows for S1–S3: they were produced by an
external LLM compactor (c1/c2) that this installation does not run, so the loader records those
jobs and their task attempts as imported history.

By default the story is back-dated so that it ends three days ago (the seed's "three days later,
someone asks…"), using ``time_machine`` when it is installed; the investigation runs now.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from audit.investigate import investigate
from audit.review import add_comment, approve_and_activate_summary, inbox_count
from memoryhub.accounts.tenancy import add_member, create_tenant, issue_api_key
from memoryhub.context.assembly import assemble_context
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict
from memoryhub.demo import observed_sources, scenario
from memoryhub.demo.integrations import load_integration_workflows
from memoryhub.memory import acceptance, lifecycle
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.workflows import create_workflow, get_workflow
from memoryhub.models import Artifact, CompactionJob, Event, Role, Summary, Tenant, Workflow
from memoryhub.models.compaction import JobStatus
from memoryhub.observe import metrics
from memoryhub.observe.alerting.evaluate import evaluate_rule
from memoryhub.observe.alerting.services import create_rule
from memoryhub.pipeline.jobs import idempotency_key, request_compaction, run_job
from triggers.services import save_policy

Out = Callable[[str], None]
API_KEY_NAME = "demo-agents"
API_KEY_FILE = "demo-api-key.txt"
APPEND_CHUNK = 100
BURST = 6  # events an agent appends in one call when the story is back-dated
# The story ends three days before the load; what follows it is spaced so it ends before the load too.
STORY_ENDS_BEFORE_LOAD_S = 3 * 86400
OTHER_WORKFLOWS_EVERY_S = 12 * 3600
INTEGRATIONS_AFTER_S = 2 * 86400
ROLLUP_DAYS = 8  # the back-dated story spans the overview's default 7-day window (and a bit)

# The validator in force when the seed incident happened (kept as it was; see memoryhub.memory.validation).
INCIDENT_VALIDATOR = "rules-5"
APPROX_COUNTER = "count_tokens_approximately"


class DemoStateError(Exception):
    """Loading when the demo is already there, or live steps before it is loaded."""


@dataclass
class LoadReport:
    """What ``load`` did, for the command's closing lines and for tests."""

    api_key: str = ""
    summaries: dict[int, str] = field(default_factory=dict)  # version -> summary_id
    traces: list[str] = field(default_factory=list)  # model_call_ids
    artifacts: list[str] = field(default_factory=list)
    stale_attempt: str = ""  # how the late activation ended
    investigation: dict[str, Any] | None = None
    backdated: bool = False
    review: dict[str, Any] = field(default_factory=dict)  # awaiting summary, comments, firing alert


def is_loaded() -> bool:
    return Tenant.objects.filter(slug=scenario.TENANT_SLUG).exists()


# --- clock ---------------------------------------------------------------------------------------


class _Clock:
    """Moves "now" to scenario times (offsets in seconds) when back-dating is possible."""

    def __init__(self, base: datetime | None, sample_gauges: bool = False) -> None:
        self.base = base
        self.sample_gauges = sample_gauges
        self._sampled: datetime | None = None
        if base is not None:
            try:
                import time_machine
            except ImportError:  # a production install without dev extras: load at the present
                self.base = None
            else:
                self._travel = time_machine.travel

    @property
    def active(self) -> bool:
        return self.base is not None

    @contextlib.contextmanager
    def at(self, offset_s: float) -> Iterator[None]:
        if self.base is None:
            yield
            return
        with self._travel(self.base + timedelta(seconds=offset_s), tick=True):
            yield
            if self.sample_gauges:
                self._sample()

    def _sample(self) -> None:
        """Gauges (active-summary age, tail length…) can only be measured at the moment they hold:
        measure them after each step of the back-dated story, once per rollup bucket, so the
        overview's gauge series have the story's shape instead of one point at the end."""

        bucket = metrics.bucket_floor(timezone.now(), metrics.ROLLUP_BUCKET)
        if bucket == self._sampled:
            return
        self._sampled = bucket
        for tenant in Tenant.objects.all():
            metrics.rollup(tenant, backfill=timedelta(0))


# --- loading ---------------------------------------------------------------------------------------


def load(out: Out = print, *, backdate: bool = True, rollups: bool = False) -> LoadReport:
    """Create the demo tenants, users, API key and workflows and replay the scenario timeline.

    All in one transaction: a failure leaves nothing behind. Raises ``DemoStateError`` when the
    acme tenant exists. ``rollups`` also backfills the metric rollups of the story (what
    ``manage.py load_demo`` does; the tests' shared demo leaves it off: one test reads them).
    """
    if is_loaded():
        raise DemoStateError(f"tenant {scenario.TENANT_SLUG!r} already exists")
    steps = scenario.timeline()
    span = steps[-1]["at_offset_s"]
    # The publisher's last call (the end of the timeline) happened three days ago.
    base = timezone.now() - timedelta(seconds=STORY_ENDS_BEFORE_LOAD_S + span) if backdate else None
    clock = _Clock(base, sample_gauges=rollups)
    report = LoadReport(backdated=clock.active)
    when = "back-dated to end three days ago" if clock.active else "at the current time"
    out(f"Loading the MemoryHub demo ({when}).")
    with transaction.atomic():
        with clock.at(-3600):
            key_secret, agents = _setup_tenants(out)
        report.api_key = key_secret
        _replay_acme(out, clock, steps, agents, report)
        _load_other_workflows(out, clock, span, agents)
        # LangChain and OpenAI Agents runs, through the REST API in process (memoryhub.demo.integrations),
        # a day before the investigation: every demo timestamp stays in the past.
        load_integration_workflows(
            key_secret, out, lambda offset: clock.at(span + INTEGRATIONS_AFTER_S + offset)
        )
        _load_observed_sources(out, agents)
    _write_api_key(out, key_secret)
    report.investigation = _investigate(out)
    report.review = _review_story(out)
    if rollups:
        _backfill_rollups(out, clock)
    analyze_tables()
    return report


def analyze_tables() -> None:
    """Give PostgreSQL's planner statistics for the tables the demo just filled: a table this
    small stays under autovacuum's threshold, so it never gets them by itself, and the planner,
    taking the workflow table for one row, made the search page recompute every event's text
    vector once per workflow (300 ms instead of 80). The application's tables by name: a bare
    ANALYZE also takes the cluster's shared catalogs, and waits on any transaction in another
    database that holds one of them."""
    if connection.vendor != "postgresql":
        return
    tables = sorted({model._meta.db_table for model in apps.get_models() if model._meta.managed})
    existing = set(connection.introspection.table_names())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in tables if t in existing))


def _backfill_rollups(out: Out, clock: _Clock) -> None:
    """Write the metric rollups for the back-dated story, as beat would have written them while it
    happened, so every overview time series has its shape on first load (beat only catches up an
    hour by itself)."""
    days = ROLLUP_DAYS if clock.active else 1
    sink = io.StringIO()
    call_command("rollup_metrics", hours=24 * days, stdout=sink)
    out(f"  metric rollups backfilled for the last {days} days")


def _setup_tenants(out: Out) -> tuple[str, Actor]:
    setup = Actor.system("load_demo")
    tenants = {t["slug"]: create_tenant(t["slug"], t["name"], actor=setup) for t in scenario.tenants()}
    out(f"  tenants: {', '.join(f'{t.slug} ({t.name})' for t in tenants.values())}")
    for user in scenario.demo_users():
        for i, (slug, role) in enumerate(user["memberships"].items()):
            # Hash the password once per user (the first membership creates the account).
            password = user["password"] if i == 0 else None
            add_member(tenants[slug], user["username"], role, password=password, actor=setup)
        roles = ", ".join(f"{role} in {slug}" for slug, role in user["memberships"].items())
        out(f"  user {user['username']}: {roles}")
    issued = issue_api_key(tenants[scenario.TENANT_SLUG], API_KEY_NAME, role=Role.ADMIN, actor=setup)
    out(f"  API key {API_KEY_NAME!r} for {scenario.TENANT_SLUG} (admin), prefix {issued.key.prefix}")
    return issued.secret, Actor.api_key(issued.key.name, issued.key.prefix)


def _append(workflow: Workflow, events: list[dict[str, Any]], expected_head: int) -> int:
    """Append through the API's own batch validation; returns the new head."""

    head = expected_head
    for i in range(0, len(events), APPEND_CHUNK):
        parsed, _ = parse_batch({"events": events[i : i + APPEND_CHUNK]})
        result = append_events(workflow, parsed, expected_head=head)
        head = result.head_seq
    return head


def _worker(task_id: str, worker: str = "") -> Actor:
    name = "memoryhub.compaction.run_job" + (f"@{worker.split(':', 1)[-1]}" if worker else "")
    return Actor.worker(name, task_id)


def _replay_acme(
    out: Out, clock: _Clock, steps: list[dict[str, Any]], agents: Actor, report: LoadReport
) -> None:
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    info = scenario.acme_workflow()
    events = scenario.acme_workflow_events()
    offsets = scenario.event_offsets()
    specs = {s["version"]: s for s in scenario.summary_specs()}
    traces = {t["model_call_id"]: t for t in scenario.trace_specs()}
    artifacts = {a["artifact_id"]: a for a in scenario.artifact_specs()}
    summaries: dict[int, Summary] = {}
    jobs: dict[int, CompactionJob] = {}

    with clock.at(0):
        workflow, _ = create_workflow(
            tenant,
            info["external_id"],
            name=info["name"],
            graph_release=info["graph_release"],
            source=info.get("source", "langgraph"),  # the LangGraph example graph feeds it
            actor=agents,
        )
    out(f"  workflow {tenant.slug}/{workflow.external_id}: {info['name']}")
    head = 0
    for step in steps:
        with clock.at(step["at_offset_s"]):
            kind = step["step"]
            if kind == "append":
                if clock.active:  # in small bursts at their commit times, as the agents appended them
                    for lo in range(step["from_seq"], step["to_seq"] + 1, BURST):
                        hi = min(lo + BURST - 1, step["to_seq"])
                        with clock.at(offsets[hi - 1]):
                            head = _append(workflow, events[lo - 1 : hi], head)
                else:
                    head = _append(workflow, events[step["from_seq"] - 1 : step["to_seq"]], head)
                out(f"    events {step['from_seq']}–{step['to_seq']} appended (head {head})")
            elif kind == "summary":
                spec = specs[step["version"]]
                jobs[spec["version"]] = job = _historical_job(tenant, workflow, spec)
                summary = create_summary(
                    workflow,
                    content=spec["content"],
                    covers_from_seq=spec["covers_from_seq"],
                    covers_to_seq=spec["covers_to_seq"],
                    compactor=spec["compactor"],
                    source_refs=spec["source_refs"],
                    excluded_categories=spec["excluded_categories"],
                    job=job,
                    actor=_worker(spec["job"]["attempts"][0]["task_id"]),
                )
                # The incident happened under rules-5 (structured facts only): S3 passes it although
                # the 401 requirement is gone. rules-6, the default for new jobs, would reject S3
                # (the summary page's retention table shows why).
                lifecycle.validate(
                    summary, _worker(spec["job"]["attempts"][0]["task_id"]), validator=INCIDENT_VALIDATOR
                )
                summary.refresh_from_db()
                if summary.status != "VALIDATED":
                    raise RuntimeError(f"S{spec['version']} did not validate: status {summary.status}")
                summaries[spec["version"]] = summary
                report.summaries[spec["version"]] = summary.summary_id
                out(
                    f"    S{spec['version']} {summary.summary_id}: events {spec['covers_from_seq']}–"
                    f"{spec['covers_to_seq']}, compactor {spec['compactor']['version']}, VALIDATED"
                )
            elif kind == "activate":
                version = step["summary_version"]
                spec = specs[version]
                task_id = spec["job"]["attempts"][0]["task_id"]
                result = lifecycle.activate(summaries[version], step["expected_revision"], _worker(task_id))
                if not result.applied:
                    raise RuntimeError(f"activating S{version} was not applied")
                _finish_job(jobs[version], summaries[version], "activated")
                out(
                    f"    S{version} activated (revision {step['expected_revision']} → {result.active_revision})"
                )
            elif kind == "stale_activation":
                report.stale_attempt = _stale_attempt(step, summaries, jobs, out)
            elif kind == "trace":
                spec = traces[step["model_call_id"]]
                # What the agent's context call returned at that moment (the workflow as loaded now).
                context = assemble_context(get_workflow(tenant, workflow.external_id))
                read = summaries.get(spec["summary_version"]) if spec["summary_version"] else None
                got = (context.get("summary") or {}).get("summary_id")
                if got != (read.summary_id if read else None):
                    raise RuntimeError(
                        f"context served {got}, the scenario expects S{spec['summary_version']}"
                    )
                record_trace(
                    workflow,
                    {
                        "agent": spec["agent"],
                        "agent_run_id": spec["agent_run_id"],
                        "model_call_id": spec["model_call_id"],
                        "model": spec["model"],
                        "summary_id": read.summary_id if read else None,
                        "tail_to_seq": spec["tail_to_seq"],
                        "context_id": context["context_id"],
                        "manifest_hash": context["manifest_hash"],
                        "graph_release": spec["graph_release"],
                        "checkpoint_id": spec["checkpoint_id"],
                        "source_refs": spec["source_refs"],
                        "input_tokens": spec["input_tokens"],
                        "input_messages": spec["input_messages"],
                        "output": spec["output"],
                        "output_tokens": spec["output_tokens"],
                        "latency_ms": spec["latency_ms"],
                        "cost_usd": spec["cost_usd"],
                    },
                    agents,
                )
                report.traces.append(spec["model_call_id"])
                label = f"S{spec['summary_version']}" if read else "no summary"
                out(
                    f"    trace {spec['agent']} {spec['model_call_id']}: read {label} + tail to "
                    f"{spec['tail_to_seq']}"
                )
            elif kind == "artifact":
                spec = artifacts[step["artifact_id"]]
                record_artifact(
                    workflow,
                    {
                        k: spec[k]
                        for k in (
                            "artifact_id",
                            "kind",
                            "uri",
                            "content",
                            "content_hash",
                            "quality_score",
                            "produced_by",
                        )
                    },
                    agents,
                )
                report.artifacts.append(spec["artifact_id"])
                out(
                    f"    artifact {spec['artifact_id']} ({spec['kind']}) from {spec['produced_by']['model_call_id']}"
                )
            else:  # pragma: no cover - the scenario only has the kinds above
                raise RuntimeError(f"unknown timeline step {kind!r}")


def _historical_job(tenant: Tenant, workflow: Workflow, spec: dict[str, Any]) -> CompactionJob:
    """Imported record of the external c1/c2 compaction that produced a summary (see module doc)."""

    now = timezone.now()
    attempt = spec["job"]["attempts"][0]
    compactor = f"{spec['compactor']['name']}-{spec['compactor']['version']}"
    return CompactionJob.objects.create(
        tenant=tenant,
        workflow=workflow,
        source_revision=spec["job"]["source_revision"],
        compactor=compactor,
        idempotency_key=idempotency_key(workflow, spec["job"]["source_revision"], compactor),
        status=JobStatus.RUNNING,
        expected_revision=spec["version"] - 1,
        attempts=[
            {
                "attempt": 1,
                "task_id": attempt["task_id"],
                "attempt_id": f"{attempt['task_id']}:1",
                "worker": "external-compactor",
                "started_at": now.isoformat(),
                "finished_at": None,
                "outcome": "running",
                "error": "",
            }
        ],
        requested_by=str(Actor.system("load_demo")),
        started_at=now,
        enqueued_at=now,
        enqueue_attempts=1,
    )


def _finish_job(job: CompactionJob, summary: Summary, outcome: str) -> None:
    now = timezone.now()
    attempts = [dict(a, finished_at=now.isoformat(), outcome="succeeded") for a in job.attempts]
    latency = int((now - job.started_at).total_seconds() * 1000) if job.started_at else None
    CompactionJob.objects.filter(pk=job.pk).update(
        status=JobStatus.SUCCEEDED,
        outcome=outcome,
        summary=summary,
        attempts=attempts,
        finished_at=now,
        latency_ms=latency,
    )
    acceptance.refresh_summary_jobs(summary.pk)
    job.refresh_from_db()


def _stale_attempt(
    step: dict[str, Any], summaries: dict[int, Summary], jobs: dict[int, CompactionJob], out: Out
) -> str:
    """The late worker: a redelivered attempt of S2's job tries to activate S2 with the revision it
    read before S3 existed. The service must record it as stale and change nothing."""

    version = step["summary_version"]
    actor = _worker(step["task_id"], step["actor"])
    try:
        result = lifecycle.activate(summaries[version], step["expected_revision"], actor)
        outcome = "applied" if result.applied else f"{result.outcome} ({result.code}: {result.detail})"
    except Conflict as exc:  # a service that refuses by raising still records the attempt
        outcome = f"{exc.code}: {exc.detail}"
    if outcome == "applied":
        raise RuntimeError("the late worker's activation was applied; it must be stale")
    job = jobs[version]
    now = timezone.now().isoformat()
    attempts = [
        *job.attempts,
        {
            "attempt": len(job.attempts) + 1,
            "task_id": step["task_id"],
            "attempt_id": f"{step['task_id']}:{len(job.attempts) + 1}",
            "worker": "late-worker",
            "started_at": now,
            "finished_at": now,
            "outcome": "stale",
            "error": step["reason"],
        },
    ]
    CompactionJob.objects.filter(pk=job.pk).update(attempts=attempts)
    out(
        f"    late worker re-activating S{version} with expected revision {step['expected_revision']}: {outcome}"
    )
    return outcome


def _load_other_workflows(out: Out, clock: _Clock, span: float, agents: Actor) -> None:
    for i, spec in enumerate(scenario.other_workflows()):
        tenant = Tenant.objects.get(slug=spec["tenant"])
        # Later than the incident workflow, half a day apart each, in small batches (all before
        # the integrations' runs, so nothing is dated after the load).
        start = span + OTHER_WORKFLOWS_EVERY_S * (i + 1)
        with clock.at(start):
            workflow, _ = create_workflow(
                tenant,
                spec["external_id"],
                name=spec["name"],
                graph_release=spec["graph_release"],
                actor=agents,
            )
        head = 0
        # These agents count tokens client-side like LangChain's count_tokens_approximately
        # (characters / 4): the workflow page shows that counter's drift from the exact count.
        events = [
            dict(e, token_estimate=-(-len(e["content"]) // 4), token_estimate_model=APPROX_COUNTER)
            for e in spec["events"]
        ]
        for j in range(0, len(events), 30):
            with clock.at(start + 60 + j * 40):
                head = _append(workflow, events[j : j + 30], head)
        note = (
            " (no summary yet: `load_demo --live-steps` compacts it through the worker)"
            if spec["compact_live"]
            else ""
        )
        out(f"  workflow {tenant.slug}/{workflow.external_id}: {head} events{note}")


def _load_observed_sources(out: Out, agents: Actor) -> None:
    """Claude Code, OpenTelemetry and Anthropic workflows, fed by the real integration code."""

    observed_sources.load(Tenant.objects.get(slug=scenario.TENANT_SLUG), agents, out)


def _write_api_key(out: Out, secret: str) -> None:
    path = settings.VAR_DIR / API_KEY_FILE
    path.write_text(
        f"# MemoryHub demo API key for tenant {scenario.TENANT_SLUG} (admin); created by load_demo\n{secret}\n"
    )
    path.chmod(0o600)
    out(f"  API key written to {path}")


def _investigate(out: Out) -> dict[str, Any] | None:
    """Three days later: why does T57 have no 401 test?"""
    artifact = Artifact.objects.get(
        workflow__tenant__slug=scenario.TENANT_SLUG, artifact_id=scenario.INCIDENT_ARTIFACT_ID
    )
    with transaction.atomic():
        inv = investigate(artifact, scenario.INCIDENT_FACT, Actor.user(scenario.REVIEWER_USERNAME))
    result = {"verdict": inv.verdict, "evidence": inv.evidence}
    seqs = (inv.evidence or {}).get("source_seqs")
    out(
        f"  investigation of {scenario.INCIDENT_FACT!r} on {artifact.artifact_id}: {inv.verdict} "
        f"(source seqs {seqs})"
    )
    return result


REVIEW_WORKFLOW = {"external_id": "api-tests-43", "name": "API test generation (next release)"}
REVIEW_COMMENTS = [
    (
        scenario.WORKFLOW_ID,
        3,
        "S3 is what T57 was generated from, and it has no 401 Unauthorized rule. See the T57 investigation.",
    ),
    (
        REVIEW_WORKFLOW["external_id"],
        2,
        "Before approving: does S2 keep the 401 Unauthorized requirement that api-tests-42 lost?",
    ),
]
DEMO_ALERT = {
    "name": "Active summary older than a day",
    "metric": "active_summary_age_seconds",
    "aggregation": "max",
    "comparator": "gt",
    "warning_threshold": 6 * 3600,
    "critical_threshold": 24 * 3600,
    "window_minutes": 60,
    "interval_seconds": 300,
}


# The review story runs the default compactor (extractive-v3) under the default validator (rules-8).
REVIEW_COMPACTOR = None


def _compact_now(workflow: Workflow, actor: Actor, task_id: str) -> tuple[CompactionJob, Summary]:
    """Request a compaction and run it with the worker's own function, in this process: the
    finished job and the summary it produced."""
    with transaction.atomic():
        job, _ = request_compaction(workflow, actor=actor, compactor=REVIEW_COMPACTOR)
    run_job(job.pk, task_id)
    job.refresh_from_db()
    if job.summary is None:
        raise RuntimeError(
            f"compaction of {workflow.external_id} produced no summary: {job.status} {job.outcome}"
        )
    return job, job.summary


def _review_story(out: Out) -> dict[str, Any]:
    """The next release's workflow runs under ``require_approval``: its first compaction was
    approved and went live, its second is VALIDATED and awaiting approval (in the review inbox);
    the reviewer discusses it in comments; an alert on the active summary's age fires. All
    through the services, at the present."""

    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    source = Workflow.objects.get(tenant=tenant, external_id=scenario.WORKFLOW_ID)
    admin, reviewer = Actor.user(scenario.DEMO_USERNAME), Actor.user(scenario.REVIEWER_USERNAME)
    with transaction.atomic():
        workflow, _ = create_workflow(
            tenant, REVIEW_WORKFLOW["external_id"], name=REVIEW_WORKFLOW["name"], actor=admin
        )
    save_policy(tenant, {"require_approval": True}, admin, workflow=workflow, partial=True, role=Role.ADMIN)
    rows = [
        {
            "kind": e.kind,
            "content": e.content,
            "agent": e.agent,
            "role": e.role,
            "facts": e.facts,
            "refs": e.refs,
            "tool_call_id": e.tool_call_id,
            "side_effect": e.side_effect,
        }
        for e in Event.objects.filter(workflow=source, seq__lte=80).order_by("seq")
    ]
    head = _append(workflow, rows[:40], 0)
    _, first = _compact_now(workflow, admin, "load_demo-review-1")
    approve_and_activate_summary(first, reviewer, "Read against events 1-40: requirements intact.")
    _append(workflow, rows[40:], head)
    second_job, second = _compact_now(workflow, admin, "load_demo-review-2")
    out(
        f"  workflow acme/{workflow.external_id} (require_approval): S1 approved and live, "
        f"S2 {second.status.lower()} ({second_job.outcome})"
    )
    for external_id, version, text in REVIEW_COMMENTS:
        summary = Summary.objects.filter(
            workflow__tenant=tenant, workflow__external_id=external_id, version=version
        )
        if summary.exists():
            add_comment(summary.get(), reviewer, text)
    rule = create_rule(tenant, dict(DEMO_ALERT), admin)
    state = evaluate_rule(rule).evaluation.state
    waiting = inbox_count(tenant.pk)
    out(f"  review inbox: {waiting} waiting; alert {rule.name!r}: {state}")
    return {"awaiting": second.summary_id, "inbox": waiting, "alert_state": str(state)}


# --- live steps (after the worker is up) ------------------------------------------------------------


def live_steps(out: Out = print, *, wait_s: float = 60.0, poll_s: float = 0.5) -> CompactionJob:
    """Ask the running worker to compact acme/refunds-api-9 (idempotent: asking again returns the
    same job) and wait up to ``wait_s`` for it to finish, printing its attempts."""

    if not is_loaded():
        raise DemoStateError("the demo is not loaded; run `manage.py load_demo` first")
    live = next(w for w in scenario.other_workflows() if w["compact_live"])
    tenant = Tenant.objects.get(slug=live["tenant"])
    workflow = get_workflow(tenant, live["external_id"])
    with transaction.atomic():
        job, created = request_compaction(workflow, actor=Actor.user(scenario.DEMO_USERNAME))
    verb = "requested" if created else "already requested"
    out(f"Compaction of {tenant.slug}/{workflow.external_id} {verb}: job {job.pk} ({job.status}).")
    deadline = time.monotonic() + wait_s
    while job.status not in (JobStatus.SUCCEEDED, JobStatus.FAILED) and time.monotonic() < deadline:
        time.sleep(poll_s)
        job.refresh_from_db()
    if job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED):
        made = f", summary {job.summary.summary_id}" if job.summary is not None else ""
        out(
            f"  job {job.pk}: {job.status} ({job.outcome or 'no outcome'}){made}, {len(job.attempts)} attempt(s)"
        )
    else:
        out(f"  job {job.pk} is still {job.status} after {wait_s:.0f}s; the worker will finish it.")
    return job
