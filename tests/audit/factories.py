"""Building blocks for audit tests: summaries, validations, jobs, lifecycle events, traces,
artifacts and purges written straight through the ORM (events go through the real append service).

The audit app reads these rows; it never writes them, so tests build exactly the history a case
needs (e.g. a trace that lost part of its tail) without depending on the writers' policies.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.models import Purge
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    Event,
    LifecycleEvent,
    Summary,
    SummaryStatus,
    ValidationRecord,
    Workflow,
)
from tests.helpers import append, event

C1 = {
    "compactor_name": "llm-compactor",
    "compactor_version": "c1",
    "model": "gpt-4.1-mini",
    "prompt_template_version": "compact-v3",
    "algorithm_version": "c1",
    "token_budget": 6000,
}
C2 = {**C1, "compactor_version": "c2", "prompt_template_version": "compact-v4", "algorithm_version": "c2"}


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


def content(narrative: str, facts: list[dict[str, Any]] | None = None) -> dict[str, Any]:
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


def make_job(
    workflow: Workflow,
    source_revision: int,
    compactor: str = "llm-compactor-c2",
    attempts: list[dict[str, Any]] | None = None,
) -> CompactionJob:
    return CompactionJob.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        source_revision=source_revision,
        compactor=compactor,
        idempotency_key=f"{workflow.tenant.slug}/{workflow.external_id}/{source_revision}/{compactor}",
        status="SUCCEEDED",
        outcome="activated",
        attempts=attempts
        if attempts is not None
        else [
            {
                "task_id": str(uuid.uuid4()),
                "started_at": timezone.now().isoformat(),
                "finished_at": timezone.now().isoformat(),
                "outcome": "succeeded",
                "error": "",
            }
        ],
    )


def make_summary(
    workflow: Workflow,
    covers_to: int,
    body: dict[str, Any],
    *,
    covers_from: int = 1,
    compactor: dict[str, Any] | None = None,
    job: CompactionJob | None = None,
    status: str = SummaryStatus.VALIDATED,
) -> Summary:
    data = canonical_bytes(body)
    last = workflow.summaries.order_by("-version").values_list("version", flat=True).first() or 0
    return Summary.objects.create(
        summary_id=f"sum_{uuid.uuid4().hex[:16]}",
        tenant=workflow.tenant,
        workflow=workflow,
        version=last + 1,
        job=job,
        created_by="tests",
        covers_from_seq=covers_from,
        covers_to_seq=covers_to,
        source_revision=workflow.head_seq,
        source_refs=["spec-v7"],
        excluded_categories=["sandbox_credentials"],
        content=data.decode(),
        content_hash=sha256_hex(data),
        token_count=len(data) // 4,
        status=status,
        **(compactor or C2),
    )


def make_validation(
    summary: Summary,
    *,
    passed: bool = True,
    failed: tuple[str, ...] = (),
    waived: tuple[str, ...] = (),
    waived_by: str = "",
    version: str = "rules-5",
) -> ValidationRecord:
    checks = [
        {"name": n, "passed": n not in failed, "detail": "" if n not in failed else f"{n} failed"}
        for n in ("integrity", "coverage_contiguity", "mandatory_facts", "groundedness", "token_budget")
    ]
    return ValidationRecord.objects.create(
        summary=summary,
        validator_version=version,
        checks=checks,
        mandatory_coverage=1.0,
        passed=passed,
        reasons=[f"{n} failed" for n in failed],
        waived_checks=list(waived),
        waived_by=waived_by,
        actor="tests",
    )


def lifecycle(
    summary: Summary,
    action: str,
    from_status: str,
    to_status: str,
    *,
    result: str = "applied",
    expected: int | None = None,
    observed: int | None = None,
    actor: str = "worker:celery#t1",
    reason: str = "",
    prior: Summary | None = None,
) -> LifecycleEvent:
    return LifecycleEvent.objects.create(
        tenant=summary.tenant,
        workflow=summary.workflow,
        summary=summary,
        action=action,
        from_status=from_status,
        to_status=to_status,
        result=result,
        actor=actor,
        reason=reason,
        expected_revision=expected,
        observed_revision=observed,
        prior_active_summary=prior,
        source_revision_at_activation=summary.workflow.head_seq,
    )


def activate(summary: Summary) -> None:
    """Make ``summary`` the active version (pointer, statuses and lifecycle rows, like the service)."""
    with transaction.atomic():
        wf = Workflow.objects.select_for_update().get(pk=summary.workflow_id)
        prior = wf.active_summary
        if prior is not None:
            Summary.objects.filter(pk=prior.pk).update(status=SummaryStatus.SUPERSEDED)
            lifecycle(prior, "supersede", "ACTIVE", "SUPERSEDED")
        Summary.objects.filter(pk=summary.pk).update(status=SummaryStatus.ACTIVE)
        lifecycle(
            summary,
            "activate",
            "VALIDATED",
            "ACTIVE",
            expected=wf.active_revision,
            observed=wf.active_revision,
            prior=prior,
        )
        Workflow.objects.filter(pk=wf.pk).update(
            active_summary=summary, active_revision=wf.active_revision + 1
        )
    summary.refresh_from_db()
    summary.workflow.refresh_from_db()


def make_trace(
    workflow: Workflow,
    summary: Summary | None,
    tail_to_seq: int,
    *,
    head: int | None = None,
    call: str | None = None,
    agent: str = "publisher",
    **extra: Any,
) -> ConsumerTrace:
    defaults = {
        "context_id": f"ctx_{uuid.uuid4().hex[:12]}",
        "manifest_hash": "sha256:" + "ab" * 32,
        "graph_release": "api-testgen@2026.11.2",
        "checkpoint_id": f"ckpt-{tail_to_seq}",
        "model": "gpt-4.1-mini",
        "input_tokens": 4000,
    }
    defaults.update(extra)
    return ConsumerTrace.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        agent=agent,
        agent_run_id=f"run-{agent}-1",
        model_call_id=call or f"call-{uuid.uuid4().hex[:8]}",
        summary=summary,
        summary_status_at_read=summary.status if summary else "",
        summary_watermark=summary.covers_to_seq if summary else 0,
        tail_to_seq=tail_to_seq,
        head_seq_at_read=head if head is not None else tail_to_seq,
        **defaults,
    )


def make_artifact(workflow: Workflow, artifact_id: str, traces: list[ConsumerTrace]) -> Artifact:
    artifact = Artifact.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        artifact_id=artifact_id,
        kind="test-suite",
        uri=f"s3://bucket/{artifact_id}.json",
        content_hash="sha256:" + "cd" * 32,
        quality_score=0.8,
        actor="tests",
    )
    artifact.produced_by.set(traces)
    return artifact


def purge_events(workflow: Workflow, seqs: list[int], purge_id: str = "prg_test1") -> Purge:
    """A purge tombstone: content emptied, purged_at/purge set (the only update events allow)."""
    with transaction.atomic():
        purge = Purge.objects.create(
            tenant=workflow.tenant,
            workflow=workflow,
            purge_id=purge_id,
            reason="subject erasure request",
            actor="user:alice",
            selector={"seqs": seqs},
            event_count=len(seqs),
            seqs=seqs,
        )
        Event.objects.filter(workflow=workflow, seq__in=seqs).update(
            content="", facts=[], refs=[], purged_at=timezone.now(), purge=purge
        )
    return purge
