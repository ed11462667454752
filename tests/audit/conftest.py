"""A small copy of the seed's incident, built through the real services: S1 keeps the free-text
401 requirement of event 7, S2 and S3 (compactor c2) drop it, S3 fails its token budget and is
waived by a reviewer, and the publisher's trace reads S3 + the tail before publishing T57."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memoryhub.context.traces import record_artifact
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from tests import factories as f
from tests.factories import AGENTS, REVIEWER, WORKER, activate, append, event, make_workflow, read_and_trace

REQUIREMENT = (
    "Note on spec-v7 §4.2: unauthenticated requests must return 401  Unauthorized with a "
    "WWW-Authenticate challenge, before the scope check."
)
SCOPE = {"key": "payments:write", "kind": "scope", "text": "OAuth scope payments:write is required"}
BUG_OPEN = {"key": "bug-88", "kind": "issue", "text": "bug-88: key reuse returns 500", "state": "open"}
BUG_FIXED = {"key": "bug-88", "kind": "issue", "text": "bug-88: fixed in 3.14.2", "state": "resolved"}
T49 = {"key": "T49", "kind": "artifact", "text": "draft suite T49"}


def incident_events() -> list[dict]:
    special = {
        3: {"content": "Requirement R2: OAuth scope payments:write is required.", "facts": [SCOPE]},
        7: {"content": REQUIREMENT},
        12: {"content": "Filed bug-88: key reuse returns 500.", "facts": [BUG_OPEN]},
        22: {"content": "bug-88: fixed in 3.14.2, TC-14 passes.", "facts": [BUG_FIXED]},
        26: {"content": "Draft suite T49 built from S2.", "facts": [T49]},
        36: {"content": "Draft suite T49 published to staging."},
    }
    return [
        event(i, **{"content": f"routine message {i} about POST /payments", **special.get(i, {})})
        for i in range(1, 41)
    ]


def summarize(wf, to_seq: int, narrative: str, facts: list[dict], compactor: dict, seqs: dict[str, int]):
    """create_summary + validate through the services (a CANDIDATE → VALIDATED or REJECTED)."""
    body = f.summary_content(
        narrative,
        [{**fact, "state": fact.get("state", "info"), "source_seqs": [seqs[fact["key"]]]} for fact in facts],
    )
    summary = create_summary(
        wf,
        content=body,
        covers_from_seq=1,
        covers_to_seq=to_seq,
        compactor=compactor,
        source_refs=["spec-v7"],
        job=f.imported_job(wf, to_seq, f"llm-compactor-{compactor['version']}"),
        actor=WORKER,
    )
    return lifecycle.validate(summary, WORKER, validator="rules-5")  # the incident's validator


@pytest.fixture
def incident(tenant):
    wf = make_workflow(tenant, "api-tests-42", graph_release="api-testgen@2026.11.2")
    append(wf, incident_events()[:10])
    c1 = {
        "name": "llm-compactor",
        "version": "c1",
        "model": "gpt-4.1-mini",
        "prompt_template_version": "compact-v3",
        "token_budget": 6000,
    }
    c2 = {**c1, "version": "c2", "prompt_template_version": "compact-v4"}
    s1 = summarize(
        wf,
        10,
        "Requirements R1-R6. Unauthenticated requests must return 401 Unauthorized (free text only).",
        [SCOPE],
        c1,
        {"payments:write": 3},
    )
    activate(s1)
    append(wf, incident_events()[10:20])
    s2 = summarize(
        wf,
        20,
        "Requirements R1-R6 and scope payments:write. Bug-88 is open.",
        [SCOPE, BUG_OPEN],
        c2,
        {"payments:write": 3, "bug-88": 12},
    )
    activate(s2)
    append(wf, incident_events()[20:30])
    # S3 overshoots a (deliberately tiny) token budget: rejected, then a reviewer waives that check.
    s3 = summarize(
        wf,
        30,
        "Requirements R1-R6 and scope payments:write. Bug-88 is fixed.",
        [SCOPE, BUG_FIXED, T49],
        {**c2, "token_budget": 20},
        {"payments:write": 3, "bug-88": 22, "T49": 26},
    )
    assert s3.status == "REJECTED"
    lifecycle.waive(s3, ["token_budget"], REVIEWER, "budget was set too low for this workflow")
    activate(s3)
    append(wf, incident_events()[30:40])
    trace = read_and_trace(wf, "call-pub-0007-03")
    t57, _ = record_artifact(
        wf,
        {
            "artifact_id": "T57",
            "kind": "test-suite",
            "uri": "s3://bucket/T57.json",
            "produced_by": {"model_call_id": "call-pub-0007-03"},
        },
        AGENTS,
    )
    for s in (s1, s2, s3):
        s.refresh_from_db()
    wf.refresh_from_db()
    return SimpleNamespace(workflow=wf, s1=s1, s2=s2, s3=s3, trace=trace, artifact=t57)
