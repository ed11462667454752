"""Plain helpers for building workflows and events in tests (through the real services)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.db import connection

from memoryhub.core.actors import Actor
from memoryhub.memory.events import append_events, parse_batch
from memoryhub.memory.workflows import create_workflow
from memoryhub.models import Workflow

TEST_ACTOR = Actor.system("tests")


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


def race(n: int, work: Callable[[], Any]) -> list:
    """Run ``work`` in ``n`` threads released together by a barrier (PostgreSQL concurrency tests);
    each thread closes its own connection. Returns the results; any exception fails the test."""
    results: list = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run() -> None:
        try:
            barrier.wait()
            results.append(work())
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results
