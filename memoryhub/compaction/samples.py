"""A realistic, deterministic multi-agent event stream (the seed's API-test-generation workflow).

Used by the demo, the benchmark and the compaction tests: a requirements agent, a test
generator, a security reviewer and a publisher working on POST /payments, with scopes,
constraints, tool calls, failing tests, an open bug and a pending approval.
"""

from __future__ import annotations

from typing import Any

from memoryhub.compaction.types import SourceEvent

AGENTS = ("requirements-agent", "test-generator", "security-reviewer", "publisher")


def _fact(key: str, kind: str, text: str, state: str = "info") -> dict[str, str]:
    return {"key": key, "kind": kind, "text": text, "state": state}


def payments_workflow(rounds: int = 10) -> list[dict[str, Any]]:
    """Event dicts in the shape of ``POST …/events/`` (no seqs): 8 opening events + 7 per round."""
    events: list[dict[str, Any]] = [
        {
            "kind": "requirement",
            "agent": "requirements-agent",
            "role": "assistant",
            "content": "POST /payments creates a payment and requires the OAuth scope payments:write. "
            "Requests without a token must get 401 Unauthorized.",
            "facts": [
                _fact("req-payments-create", "requirement", "POST /payments creates a payment"),
                _fact("scope-payments-write", "scope", "payments:write"),
                _fact("req-401", "requirement", "Requests without a token get 401 Unauthorized"),
            ],
            "refs": ["spec-v7"],
        },
        {
            "kind": "requirement",
            "agent": "requirements-agent",
            "role": "assistant",
            "content": "Amounts are integers in minor units. A currency code is mandatory.",
            "facts": [
                _fact("constraint-minor-units", "constraint", "amounts are integers in minor units"),
                _fact("source-spec", "source_version", "spec-v7"),
            ],
            "refs": ["spec-v7"],
        },
        {
            "kind": "decision",
            "agent": "test-generator",
            "role": "assistant",
            "content": "Generate one test per status code, grouped by scope.",
            "facts": [_fact("dec-per-status", "decision", "one test per status code")],
        },
        {
            "kind": "approval",
            "agent": "publisher",
            "role": "assistant",
            "content": "Publishing the suite needs approval-12 from the security team.",
            "facts": [_fact("approval-12", "approval", "approval-12: publish test suite", "pending")],
        },
        {
            "kind": "tool_call",
            "agent": "requirements-agent",
            "role": "assistant",
            "tool_call_id": "call-spec-0",
            "content": "fetch_spec(name='payments', version='v7')",
        },
        {
            "kind": "tool_result",
            "agent": "requirements-agent",
            "role": "tool",
            "tool_call_id": "call-spec-0",
            "content": "The spec lists 14 operations. POST /payments returns 201, 400, 401, 403 and 409.",
            "refs": ["spec-v7"],
        },
        {
            "kind": "validation",
            "agent": "security-reviewer",
            "role": "assistant",
            "content": "Idempotency keys are missing from the retry path. Filed bug-3.",
            "facts": [_fact("bug-3", "issue", "bug-3: retries are not idempotent", "open")],
            "refs": ["review-19"],
        },
        {
            "kind": "note",
            "agent": "publisher",
            "role": "assistant",
            "content": "Waiting for the first batch of tests before drafting release notes.",
        },
    ]
    for r in range(1, rounds + 1):
        test_id = f"T{r}"
        failed = r % 4 == 0
        events += [
            {
                "kind": "message",
                "agent": "test-generator",
                "role": "assistant",
                "content": f"Drafting test {test_id} for POST /payments with status "
                f"{(200, 400, 401, 403, 409)[r % 5]}. It checks the response body and headers. "
                "The fixture creates a merchant and a card token first.",
            },
            {
                "kind": "tool_call",
                "agent": "test-generator",
                "role": "assistant",
                "tool_call_id": f"call-run-{r}",
                "content": f"run_tests(ids=['{test_id}'])",
            },
            {
                "kind": "tool_result",
                "agent": "test-generator",
                "role": "tool",
                "tool_call_id": f"call-run-{r}",
                "content": f"{test_id} {'failed: expected 401 got 500' if failed else 'passed'} in 0.8s.",
                "facts": [
                    _fact(
                        f"test-{test_id}",
                        "test",
                        f"{test_id} POST /payments",
                        "failed" if failed else "passed",
                    )
                ],
            },
            {
                "kind": "message",
                "agent": "security-reviewer",
                "role": "assistant",
                "content": f"Reviewed {test_id}. Token handling looks right; scopes are checked server-side.",
            },
            {
                "kind": "decision",
                "agent": "requirements-agent",
                "role": "assistant",
                "content": f"Round {r}: keep the error schema from spec-v7 section 4.{r}.",
                "facts": [_fact(f"dec-error-schema-{r}", "decision", f"error schema per spec-v7 4.{r}")],
                "refs": ["spec-v7"],
            },
            {
                "kind": "note",
                "agent": "publisher",
                "role": "assistant",
                "content": f"Release notes updated after round {r}. Nothing to publish yet.",
            },
            {
                "kind": "message",
                "agent": "test-generator",
                "role": "assistant",
                "content": "Coverage report regenerated. Line coverage is stable.",
            },
        ]
        if r == 3:
            events.append(
                {
                    "kind": "validation",
                    "agent": "security-reviewer",
                    "role": "assistant",
                    "content": "bug-3 is fixed: retries now send an Idempotency-Key header.",
                    "facts": [_fact("bug-3", "issue", "bug-3: retries are not idempotent", "resolved")],
                    "refs": ["review-19"],
                }
            )
        if r == 5:
            events.append(
                {
                    "kind": "validation",
                    "agent": "security-reviewer",
                    "role": "assistant",
                    "content": "Refunds may bypass the scope check. Filed bug-7.",
                    "facts": [_fact("bug-7", "issue", "bug-7: refunds skip the scope check", "open")],
                    "refs": ["review-19"],
                }
            )
    return events


def as_source_events(events: list[dict[str, Any]], first_seq: int = 1) -> list[SourceEvent]:
    """Number event dicts from ``first_seq`` as the ingest path would."""
    return [
        SourceEvent(
            seq=first_seq + i,
            kind=e["kind"],
            content=e.get("content", ""),
            agent=e.get("agent", ""),
            role=e.get("role", ""),
            tool_call_id=e.get("tool_call_id", ""),
            facts=list(e.get("facts", [])),
            refs=list(e.get("refs", [])),
            side_effect=e.get("side_effect", "none"),
        )
        for i, e in enumerate(events)
    ]
