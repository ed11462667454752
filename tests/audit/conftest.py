"""A small copy of the seed's incident: S1 keeps the free-text 401 requirement of event 7, S2 and
S3 (compactor c2) drop it, and the publisher's trace reads S3 + the tail before publishing T57."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.audit import factories as f
from tests.helpers import make_workflow

REQUIREMENT = (
    "Note on spec-v7 §4.2: unauthenticated requests must return 401  Unauthorized with a "
    "WWW-Authenticate challenge, before the scope check."
)


@pytest.fixture
def incident(tenant):
    wf = make_workflow(tenant, "api-tests-42", graph_release="api-testgen@2026.11.2")
    f.history(
        wf,
        40,
        {
            7: REQUIREMENT,
            25: "Idempotency replay returns the original 201 response.",
            12: "Filed bug-88: key reuse returns 500.",
            36: "Draft suite T49 published to staging.",
        },
    )
    scope = f.fact("payments:write", "scope", "OAuth scope payments:write is required", seqs=[3])
    bug = f.fact("bug-88", "issue", "bug-88: key reuse returns 500", "open", seqs=[12])
    s1 = f.make_summary(
        wf,
        10,
        f.content(
            "Requirements R1-R6. Unauthenticated requests must return 401 Unauthorized (free text only).",
            [scope],
        ),
        compactor=f.C1,
        job=f.make_job(wf, 10, "llm-compactor-c1"),
    )
    f.make_validation(s1, version="rules-4")
    f.activate(s1)
    s2 = f.make_summary(
        wf,
        20,
        f.content("Requirements R1-R6 and scope payments:write. Bug-88 is open.", [scope, bug]),
        job=f.make_job(wf, 20),
    )
    f.make_validation(s2, version="rules-4")
    f.activate(s2)
    bug_fixed = {**bug, "state": "resolved", "text": "bug-88: fixed in 3.14.2"}
    s3 = f.make_summary(
        wf,
        30,
        f.content(
            "Requirements R1-R6 and scope payments:write. Bug-88 is fixed.",
            [scope, bug_fixed, f.fact("T49", "artifact", "draft suite T49")],
        ),
        job=f.make_job(wf, 30),
    )
    f.make_validation(s3, passed=False, failed=("token_budget",))
    f.make_validation(s3, passed=True, waived=("token_budget",), waived_by="user:bob")
    f.activate(s3)
    trace = f.make_trace(wf, s3, 40, call="call-pub-0007-03")
    t57 = f.make_artifact(wf, "T57", [trace])
    wf.refresh_from_db()
    return SimpleNamespace(workflow=wf, s1=s1, s2=s2, s3=s3, trace=trace, artifact=t57)
