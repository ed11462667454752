"""Builders for summary/lifecycle tests: workflows with fact-bearing events and valid summaries,
all made through the real services (append_events, create_summary, lifecycle)."""

from __future__ import annotations

import json
from typing import Any

from memoryhub.core.actors import Actor
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.models import Summary, Workflow
from tests.helpers import append, event, make_workflow

WORKER = Actor.worker("memoryhub.compaction.run_job", "task-1#1")
REVIEWER = Actor.user("bob")
COMPACTOR = {"name": "c1", "version": "1.0", "model": "extractive-v1", "algorithm_version": "a1"}

# Every 10th event states a scope fact: a mandatory fact a valid summary must keep.
SCOPE_EVERY = 10


def scope_key(i: int) -> str:
    return f"scope-{i}"


def build_workflow(tenant, external_id: str = "wf", n: int = 30) -> Workflow:
    """A workflow with ``n`` message events; every 10th carries a mandatory ``scope`` fact."""
    workflow = make_workflow(tenant, external_id)
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
    return {
        "schema": "memoryhub.summary/v1",
        "narrative": narrative or f"Events {start}-{end}: requirements for POST /payments were discussed.",
        "facts": facts,
        "open_items": [],
    }


def candidate(
    workflow: Workflow,
    start: int = 1,
    end: int | None = None,
    *,
    compactor: dict | None = None,
    **kwargs: Any,
) -> Summary:
    workflow.refresh_from_db()
    end = workflow.head_seq if end is None else end
    content = kwargs.pop("content", None) or content_for(start, end)
    return create_summary(
        workflow,
        content=content,
        covers_from_seq=start,
        covers_to_seq=end,
        compactor=compactor or COMPACTOR,
        actor=kwargs.pop("actor", WORKER),
        **kwargs,
    )


def validated(workflow: Workflow, start: int = 1, end: int | None = None, **kwargs: Any) -> Summary:
    summary = lifecycle.validate(candidate(workflow, start, end, **kwargs), WORKER)
    assert summary.status == "VALIDATED", list(summary.validations.values_list("reasons", flat=True))
    return summary


def activated(workflow: Workflow, start: int = 1, end: int | None = None, **kwargs: Any) -> Summary:
    summary = validated(workflow, start, end, **kwargs)
    workflow.refresh_from_db()
    result = lifecycle.activate(summary, workflow.active_revision, WORKER)
    assert result.applied, result.detail
    workflow.refresh_from_db()
    return result.summary


def post(client, url: str, body: Any = None):
    return client.post(
        url, data=json.dumps(body if body is not None else {}), content_type="application/json"
    )
