"""Every state a test needs, reached through the real services.

Tenants, members and keys (the tests/conftest.py fixtures) go through ``memoryhub.accounts.tenancy``;
workflows and events through ``create_workflow``/``append_events``; summaries through
``create_summary`` and the lifecycle (validate, waive, approve, activate, rollback, quarantine);
traces and artifacts through ``record_trace``/``record_artifact``; purges through ``audit.purge``;
policies, channels and alert rules through their services. So a test only ever sees states the
application can produce, with the audit entries and lifecycle rows that come with them.

The few builders that cannot go through a service say so in their name (``…_bypassing_services``
or ``imported_…``) and their docstring says why; tests that tamper with rows on purpose carry
``@pytest.mark.impossible_state("why")``.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from audit.models import Purge
from audit.purge import purge_events
from memoryhub.compaction.budgeted import sealed
from memoryhub.compaction.samples import payments_workflow
from memoryhub.context.assembly import assemble_context
from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core import verdicts
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict
from memoryhub.memory import acceptance, lifecycle
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.sources import source_events
from memoryhub.memory.summaries import create_summary
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import (
    AlertRule,
    Artifact,
    Channel,
    CompactionJob,
    ConsumerTrace,
    LifecycleEvent,
    Summary,
    Tenant,
    Workflow,
    WorkflowSource,
)
from memoryhub.observe.alerting.services import create_channel, create_rule, update_rule
from memoryhub.pipeline.jobs import idempotency_key, request_compaction, run_job
from triggers.models import TriggerDecision
from triggers.services import save_policy

TEST_ACTOR = Actor.system("tests")
WORKER = Actor.worker("memoryhub.compaction.run_job", "task-1#1")
REVIEWER = Actor.user("bob")
ADMIN = Actor.user("alice")
AGENTS = Actor.api_key("agents", "abcd1234")

# --- workflows and events ---------------------------------------------------------------------


def make_workflow(tenant, external_id: str = "wf-1", **kwargs: Any) -> Workflow:
    workflow, _ = create_workflow(tenant, external_id, actor=TEST_ACTOR, **kwargs)
    return workflow


def event(i: int, **overrides: Any) -> dict[str, Any]:
    body = {
        "kind": "message",
        "content": f"message number {i} about POST /payments",
        "agent": "requirements-agent",
        "role": "assistant",
        "client_event_id": f"ev-{i}",
    }
    body.update(overrides)
    return body


def append(workflow: Workflow, raw_events: list[dict[str, Any]], expected_head: int | None = None):
    payload: dict[str, Any] = {"events": raw_events}
    if expected_head is not None:
        payload["expected_head"] = expected_head
    events, head = parse_batch(payload)
    result = append_events(workflow, events, expected_head=head)
    workflow.refresh_from_db()
    return result


def append_n(workflow: Workflow, n: int, start: int = 1, batch: int = 500) -> None:
    for lo in range(start, start + n, batch):
        append(workflow, [event(i) for i in range(lo, min(lo + batch, start + n))])


def history(workflow: Workflow, n: int, special: dict[int, str] | None = None) -> None:
    """Append events 1..n; ``special`` maps seq -> content for the events a test looks for."""
    special = special or {}
    append(
        workflow,
        [
            event(i, content=special.get(i, f"routine message {i} about POST /payments"))
            for i in range(1, n + 1)
        ],
    )


def payments(tenant, external_id: str = "api-tests-42", *, rounds: int = 4) -> Workflow:
    """A workflow holding ``rounds`` rounds of the sample payments conversation (compaction input)."""
    workflow = make_workflow(tenant, external_id)
    append(workflow, payments_workflow(rounds=rounds))
    return workflow


def text_of_tokens(n: int) -> str:
    """Content that counts exactly ``n`` tokens (cl100k: " a" is one token)."""
    return " a" * n


def add_tokens(workflow: Workflow, tokens: int, *, events: int = 1) -> None:
    """Append ``events`` events carrying ``tokens`` tokens in all (the last takes the remainder)."""
    start = workflow.head_seq + 1
    each, rest = divmod(tokens, events)
    append(
        workflow,
        [
            event(i, content=text_of_tokens(each + (rest if i == start + events - 1 else 0)))
            for i in range(start, start + events)
        ],
    )


# Every 10th event of build_workflow states a scope fact: a mandatory fact a valid summary keeps.
SCOPE_EVERY = 10


def scope_key(i: int) -> str:
    return f"scope-{i}"


def build_workflow(tenant, external_id: str = "wf", n: int = 30, **kwargs: Any) -> Workflow:
    """A workflow with ``n`` message events; every 10th carries a mandatory ``scope`` fact."""
    workflow = make_workflow(tenant, external_id, **kwargs)
    add_events(workflow, 1, n)
    return workflow


def add_events(workflow: Workflow, start: int, end: int) -> None:
    batch = []
    for i in range(start, end + 1):
        extra: dict[str, Any] = {}
        if i % SCOPE_EVERY == 0:
            extra["facts"] = [
                {"key": scope_key(i), "kind": "scope", "text": f"payments:write-{i}", "state": "info"}
            ]
        batch.append(event(i, **extra))
    append(workflow, batch)


def totals_bypassing_services(workflow: Workflow, **totals: Any) -> Workflow:
    """Write running totals no events stand behind (``append_events`` and the lifecycle keep them
    in step with the rows). Only for a guard that can be reached no other way; the test says why."""
    Workflow.objects.filter(pk=workflow.pk).update(**totals)
    workflow.refresh_from_db()
    return workflow


# --- summary content --------------------------------------------------------------------------

COMPACTOR = {"name": "c1", "version": "1.0", "model": "extractive-v1", "algorithm_version": "a1"}


def content_for(start: int, end: int, *, narrative: str = "", drop: tuple[int, ...] = ()) -> dict[str, Any]:
    """Valid ``memoryhub.summary/v1`` content for events start..end built by ``build_workflow``."""
    facts = [
        {
            "key": scope_key(i),
            "kind": "scope",
            "text": f"payments:write-{i}",
            "state": "info",
            "source_seqs": [i],
        }
        for i in range(start, end + 1)
        if i % SCOPE_EVERY == 0 and i not in drop
    ]
    content = {
        "schema": "memoryhub.summary/v1",
        "narrative": narrative
        or f"{events_named(start, end)}: requirements for POST /payments were discussed.",
        "facts": facts,
        "open_items": [],
    }
    content["dropped"] = units_left_out(start, end)
    return content


def events_named(start: int, end: int) -> str:
    # "Events 1-1" would state an identifier "1-1" that no event holds (rules-7: fabricated).
    return f"Event {start}" if start == end else f"Events {start}-{end}"


def units_left_out(start: int, end: int) -> list[dict[str, Any]]:
    """A ``dropped`` manifest saying, as a compactor would, that the per-event numbers of events
    start..end were left out: the validator owes every salient unit of the covered events, kept or
    declared (``candidate`` seals its census, as extractive-v3 does)."""
    return [{"seq": start, "kind": "unit", "text": f"seqs {start}-{end}: units not listed", "units": []}]


def summary_content(narrative: str, facts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``memoryhub.summary/v1`` content with these facts; open ones are listed as open items."""
    facts = facts or []
    return {
        "schema": "memoryhub.summary/v1",
        "narrative": narrative,
        "facts": facts,
        "open_items": [
            {"key": f["key"], "kind": f["kind"], "state": f["state"]}
            for f in facts
            if f.get("state") in ("open", "pending")
        ],
    }


def fact(
    key: str, kind: str, text: str, state: str = "info", seqs: list[int] | None = None
) -> dict[str, Any]:
    return {"key": key, "kind": kind, "text": text, "state": state, "source_seqs": seqs or [1]}


# --- summaries and their lifecycle ------------------------------------------------------------


def candidate(
    workflow: Workflow,
    start: int = 1,
    end: int | None = None,
    *,
    compactor: dict | None = None,
    **kwargs: Any,
) -> Summary:
    """A CANDIDATE through ``create_summary`` (default content: ``content_for(start, end)``)."""
    workflow.refresh_from_db()
    end = workflow.head_seq if end is None else end
    content = sealed_as_a_compactor_would(
        workflow, start, end, kwargs.pop("content", None) or content_for(start, end)
    )
    return create_summary(
        workflow,
        content=content,
        covers_from_seq=start,
        covers_to_seq=end,
        compactor=compactor or COMPACTOR,
        actor=kwargs.pop("actor", WORKER),
        **kwargs,
    )


def sealed_as_a_compactor_would(workflow: Workflow, start: int, end: int, content: Any) -> Any:
    """``content`` whose aggregated ``dropped`` entries state their census over the covered events,
    as extractive-v3 writes them (rules-8 takes a range as declaring only what its census counts)."""
    if not isinstance(content, dict) or not content.get("dropped"):
        return content
    return sealed(content, verdicts.build_evidence(source_events(workflow, start, end)))


def validated(
    workflow: Workflow,
    start: int = 1,
    end: int | None = None,
    *,
    validator: str | None = None,
    declare_drops: bool = True,
    **kwargs: Any,
) -> Summary:
    """A VALIDATED summary (setup for tests about what comes after validation). Content given
    without a ``dropped`` manifest gets one declaring the covered events' units left out, as a
    compactor would: rules-7 owes every unit kept or declared (``declare_drops=False``: as given)."""
    content = kwargs.get("content")
    if declare_drops and content is not None and "dropped" not in content:
        covered_to = workflow.head_seq if end is None else end
        kwargs["content"] = {**content, "dropped": units_left_out(start, covered_to)}
    summary = lifecycle.validate(candidate(workflow, start, end, **kwargs), WORKER, validator=validator)
    assert summary.status == "VALIDATED", [v.reasons for v in summary.validations.all()]
    return summary


def rejected(
    workflow: Workflow, start: int = 1, end: int | None = None, *, validator: str | None = None, **kwargs: Any
) -> Summary:
    """A candidate the validator rejects: by default it drops the mandatory facts it covers."""
    end = workflow.head_seq if end is None else end
    kwargs.setdefault("content", content_for(start, end, drop=tuple(range(start, end + 1))))
    summary = lifecycle.validate(candidate(workflow, start, end, **kwargs), WORKER, validator=validator)
    assert summary.status == "REJECTED", summary.status
    return summary


def activate(summary: Summary, actor: Actor = WORKER, **kwargs: Any) -> Summary:
    """``lifecycle.activate`` at the workflow's current revision; it must apply."""
    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=summary.workflow_id)
    result = lifecycle.activate(summary, revision, actor, **kwargs)
    assert result.applied, result.detail
    summary.refresh_from_db()
    summary.workflow.refresh_from_db()
    return result.summary


def activated(workflow: Workflow, start: int = 1, end: int | None = None, **kwargs: Any) -> Summary:
    summary = activate(validated(workflow, start, end, **kwargs))
    workflow.refresh_from_db()
    return summary


def stale_activation(summary: Summary, actor: Actor = WORKER) -> LifecycleEvent:
    """A late worker's activation of ``summary``: it read the revision before the latest activation
    (so the workflow must have had one)."""
    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=summary.workflow_id)
    assert revision > 0, "a stale attempt loses to an earlier activation: activate a summary first"
    result = lifecycle.activate(summary, revision - 1, actor)
    assert result.outcome == "stale" and result.event is not None, result
    return result.event


def refused_activation(summary: Summary, actor: Actor = WORKER) -> LifecycleEvent:
    """An activation at the current revision of a summary the lifecycle does not allow to activate."""
    revision = Workflow.objects.values_list("active_revision", flat=True).get(pk=summary.workflow_id)
    with pytest.raises(Conflict):  # a refusal raises; its LifecycleEvent is already committed
        lifecycle.activate(summary, revision, actor)
    refused = LifecycleEvent.objects.filter(summary=summary, result="refused").order_by("-pk").first()
    assert refused is not None, "the refusal was not recorded"
    return refused


def require_approval(tenant, workflow: Workflow | None = None, required: bool = True):
    """The tenant default (or a workflow's) ``require_approval``, saved by the policy service."""
    return policy(tenant, workflow, require_approval=required)


def policy(tenant, workflow: Workflow | None = None, **fields: Any):
    """Save these policy fields over the policy in effect (``triggers.services.save_policy``)."""
    row, _spec = save_policy(tenant, fields, ADMIN, workflow=workflow, partial=True)
    return row


def imported_job(
    workflow: Workflow,
    source_revision: int,
    compactor: str = "llm-compactor-c2",
    *,
    status: str = "SUCCEEDED",
    summary: Summary | None = None,
    tokens_in: int = 0,
    tokens_out: int = 0,
    cost: str = "0",
    latency_ms: int | None = None,
    finished_at: datetime | None = None,
) -> CompactionJob:
    """The job record of an external compactor's run, imported as history (as
    ``memoryhub.demo.loader`` imports the seed's c1/c2 jobs).

    Bypasses the job service on purpose: a run here would use this installation's compactor, which
    can neither write the content a test chooses nor report the token counts, cost and latency it
    needs. The row is what a worker writes when it finishes (one attempt, the outcome, the numbers).
    """
    now = timezone.now()
    finished = status in ("SUCCEEDED", "FAILED")
    end = finished_at if finished_at is not None else (now if finished else None)
    job = CompactionJob.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        source_revision=source_revision,
        compactor=compactor,
        idempotency_key=idempotency_key(workflow, source_revision, compactor),
        status=status,
        outcome={"SUCCEEDED": "activated", "FAILED": "failed"}.get(status, ""),
        summary=summary,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=Decimal(cost),
        latency_ms=latency_ms,
        started_at=now,
        finished_at=end,
        attempts=[
            {
                "attempt": 1,
                "task_id": (task := str(uuid.uuid4())),
                "attempt_id": f"{task}:1",
                "worker": "external-compactor",
                "started_at": now.isoformat(),
                "finished_at": end.isoformat() if end else None,
                "outcome": {"SUCCEEDED": "succeeded", "FAILED": "failed"}.get(status, "running"),
                "error": "",
            }
        ],
    )
    acceptance.refresh(CompactionJob.objects.filter(pk=job.pk))  # as the job services do
    job.refresh_from_db(fields=["accepted"])
    return job


def failed_job(workflow: Workflow) -> CompactionJob:
    """A compaction job the worker ran and FAILED (``request_compaction`` then ``run_job``): an LLM
    compactor configured when the job was requested and unconfigured by the time it runs."""
    with override_settings(MEMORYHUB_LLM_BASE_URL="http://127.0.0.1:9/v1"):
        job, _ = request_compaction(workflow, compactor="openai-chat-v1", actor=TEST_ACTOR)
    with override_settings(MEMORYHUB_LLM_BASE_URL=""):
        assert run_job(job.pk, f"task-{uuid.uuid4().hex[:8]}") == "failed"
    job.refresh_from_db()
    return job


def decision_row_bypassing_services(
    workflow: Workflow, action: str, *, projected: int, hard_limit: int = 25_000
) -> Any:
    """A logged trigger decision with chosen numbers, as stored history holds them.

    ``triggers.services.decide`` cannot write these: decisions logged before the hard limit was
    recorded carry ``hard_limit=0`` (the column's default), and the engine never logs a
    ``continue`` over the hard limit while its emergency guard is on. Metrics must read both.
    """
    return TriggerDecision.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        action=action,
        current_tokens=projected - 1000,
        expected_next_step_tokens=1000,
        projected_tokens=projected,
        safe_budget=18_000,
        target_tokens=8_000,
        hard_limit=hard_limit,
    )


# --- traces, artifacts, purges ----------------------------------------------------------------


def trace(
    workflow: Workflow,
    summary: Summary | None,
    tail_to_seq: int,
    *,
    call: str | None = None,
    agent: str = "publisher",
    **fields: Any,
) -> ConsumerTrace:
    """``record_trace`` of one model call that read ``summary`` + the tail up to ``tail_to_seq``.

    The default context id is a consumer's own (not one this server signed), so what was served
    at read time is taken from the lifecycle history; pass ``context_id=""`` or
    ``manifest_hash=""`` for a call without provenance.
    """
    data = {
        "agent": agent,
        "agent_run_id": f"run-{agent}-1",
        "model_call_id": call or f"call-{uuid.uuid4().hex[:8]}",
        "summary_id": summary.summary_id if summary else None,
        "tail_to_seq": tail_to_seq,
        "context_id": f"consumer-ctx-{uuid.uuid4().hex[:12]}",
        "manifest_hash": "sha256:" + "ab" * 32,
        "graph_release": "api-testgen@2026.11.2",
        "checkpoint_id": f"ckpt-{tail_to_seq}",
        "model": "gpt-4.1-mini",
        "input_tokens": 4000,
        **fields,
    }
    recorded, _ = record_trace(workflow, data, AGENTS)
    return recorded


def read_and_trace(
    workflow: Workflow, call: str, *, agent: str = "publisher", tail_to_seq: int | None = None, **fields: Any
) -> ConsumerTrace:
    """Read the context like an agent, then record the model call that consumed it."""
    workflow.refresh_from_db()
    ctx = assemble_context(workflow)
    summary = Summary.objects.get(summary_id=ctx["summary"]["summary_id"]) if ctx["summary"] else None
    served = {
        "agent_run_id": f"run-{call}",
        "context_id": ctx["context_id"],
        "manifest_hash": ctx["manifest_hash"],
        "checkpoint_id": f"ckpt-{ctx['head_seq']}",
    }
    tail = tail_to_seq if tail_to_seq is not None else ctx["head_seq"]
    return trace(workflow, summary, tail, call=call, agent=agent, **{**served, **fields})


def artifact(
    workflow: Workflow, artifact_id: str, traces: list[ConsumerTrace], *, score: float | None = None
) -> Artifact:
    """``record_artifact`` of an artifact the traced model calls produced."""
    recorded, _ = record_artifact(
        workflow,
        {
            "artifact_id": artifact_id,
            "kind": "test-suite",
            "uri": f"s3://bucket/{artifact_id}.json",
            "content_hash": "sha256:" + "cd" * 32,
            "quality_score": score,
            "produced_by": {"model_call_ids": [t.model_call_id for t in traces]},
        },
        AGENTS,
    )
    return recorded


def orphan_artifact_bypassing_services(
    workflow: Workflow, artifact_id: str, *, score: float | None = None
) -> Artifact:
    """An artifact no consumer trace produced. ``record_artifact`` refuses one (``produced_by`` is
    required), but the readers must still handle it: rows imported from elsewhere or recorded
    before that rule carry no producer, and investigations and metrics name that gap."""
    return Artifact.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        artifact_id=artifact_id,
        kind="test-suite",
        uri=f"s3://bucket/{artifact_id}.json",
        quality_score=score,
        actor=str(AGENTS),
    )


def purge(workflow: Workflow, seqs: list[int], *, reason: str = "subject erasure request") -> Purge:
    """``audit.purge.purge_events`` of these seqs by an admin (summaries derived from them follow)."""
    outcome = purge_events(workflow, {"seqs": seqs}, ADMIN, reason)
    workflow.refresh_from_db()
    return outcome.purge


# --- alerting ---------------------------------------------------------------------------------


def alert_channel(tenant, **fields: Any) -> Channel:
    """``create_channel`` (a webhook to example.com unless told otherwise)."""
    data = {"kind": "webhook", "name": "ops hook", **fields}
    if data["kind"] != "email":
        data.setdefault("url", "https://hooks.example.com/mh")
    return create_channel(tenant, data, ADMIN)


def alert_rule(tenant, *channels: Channel, **fields: Any) -> AlertRule:
    """``create_rule`` (due at once). Default: critical on any stale activation in 15 minutes."""
    data = {
        "name": "Stale activations",
        "metric": "stale_activation_attempts",
        "comparator": "gt",
        "critical_threshold": 0,
        "window_minutes": 15,
        "channels": [c.pk for c in channels],
        **fields,
    }
    return create_rule(tenant, data, ADMIN)


def only_rule(tenant, *channels: Channel, **fields: Any) -> AlertRule:
    """``alert_rule`` after disabling every other rule of the tenant (the defaults included), so
    evaluations see this one alone."""
    for other in AlertRule.objects.filter(tenant=tenant, enabled=True):
        update_rule(other, {"enabled": False}, ADMIN)
    return alert_rule(tenant, *channels, **fields)


def judged_by(workflow: Workflow, validator: str) -> None:
    """Give ``workflow`` a policy override that validates with ``validator`` (for tests of job
    delivery whose fake LLM writes prose that only an older validator accepts as it is)."""
    from triggers.services import save_policy

    save_policy(
        workflow.tenant, {"quality": {"validator": validator}}, WORKER, workflow=workflow, partial=True
    )


def observed_kept_and_lost(tenant: Tenant, external_id: str):
    """A framework session (Claude Code) with two observed compactions: one keeps what it covers
    (passes its validator run), one does not (fails it, unwaived, and is active only by the
    observer's waiver, as the framework reads it). Returns both observations."""
    from memoryhub.memory.observed import record_observed_compaction

    wf = make_workflow(tenant, external_id, source=WorkflowSource.CLAUDE_CODE)
    append(
        wf,
        [{"kind": "message", "role": "user", "content": "the API returns 401 Unauthorized"}]
        + [{"kind": "message", "role": "user", "content": f"turn {i} about payments"} for i in range(2, 7)],
    )
    texts = {
        "keeps": (3, "The API returns 401 Unauthorized; turns 2 and 3 were about payments."),
        "loses": (6, "We talked."),
    }
    return tuple(
        record_observed_compaction(
            wf,
            covers_to_seq=upto,
            text=text,
            compactor={"name": "claude-code"},
            observation_id=oid,
            actor=WORKER,
        )
        for oid, (upto, text) in texts.items()
    )
