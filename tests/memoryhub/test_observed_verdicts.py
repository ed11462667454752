"""Observed (framework) compactions get rules-7's verdicts on their pages; opaque ones read
"unknown", never lost or below floor (issue #28 item 6)."""

from __future__ import annotations

import hashlib

from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.memory.quality_service import summary_quality, workflow_quality
from memoryhub.models import WorkflowSource
from tests.factories import append, make_workflow

ACTOR = Actor.system("langchain-observer")
LANGCHAIN = {"name": "langchain", "model": "gpt-4.1-mini"}
TURNS = [
    {"kind": "message", "role": "user", "content": "We work on the payments service, ticket PAY-7710."},
    {
        "kind": "requirement",
        "role": "user",
        "content": "Unauthenticated calls must return 401 within 30 seconds.",
    },
    {"kind": "message", "role": "assistant", "content": "Noted: 401 for unauthenticated calls."},
    {"kind": "message", "role": "user", "content": "Deploy target is eu-west-1."},
    {"kind": "message", "role": "user", "content": "Next: write the tests."},
]


def _session(tenant, external_id="lc-1"):
    wf = make_workflow(tenant, external_id, source=WorkflowSource.LANGCHAIN)
    append(wf, TURNS)
    return wf


def _rows(report):
    return {r["name"]: r for r in report["rows"]}


def _row_html(page, name):
    return page.split(f'data-class="{name}"')[1].split("</tr>")[0]


def test_a_framework_summary_that_loses_the_requirement_is_shown_below_floor(tenant, alice):
    wf = _session(tenant)
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        text="The user works on the payments service in eu-west-1.",
        compactor=LANGCHAIN,
        actor=ACTOR,
    )
    report = summary_quality(result.summary)
    assert report["validator"] == "rules-8" and report["source"] == "record"
    rows = _rows(report)
    assert (
        rows["obligations"]["total"] == 1
        and rows["obligations"]["kept"] == 0
        and not rows["obligations"]["passed"]
    )
    assert rows["obligations"]["missing"][0].startswith("seq 2 (lost): Unauthenticated calls must return 401")
    assert rows["unit_identifier"]["missing"] == ["PAY-7710 (seq 1)"]
    page = alice.web.get(f"/summaries/{result.summary.summary_id}/").content.decode()
    row = _row_html(page, "obligations")
    assert "below floor" in row and "Unauthenticated calls must return 401" in row
    assert "below floor" in _row_html(page, "unit_quantity") and "30 seconds (seq 2)" in _row_html(
        page, "unit_quantity"
    )


def test_a_framework_summary_that_changes_a_value_is_shown_as_fabricated_and_contradicting(tenant, alice):
    wf = _session(tenant)
    text = (
        "Payments service, ticket PAY-7710, deploy target eu-west-1. "
        "Unauthenticated calls must return 403 within 30 seconds. Noted: 401 for unauthenticated calls."
    )
    result = record_observed_compaction(wf, covers_to_seq=4, text=text, compactor=LANGCHAIN, actor=ACTOR)
    report = summary_quality(result.summary)
    assert report["fabricated"] == [{"token": "403", "class": "number"}]
    assert [(c["was"], c["now"]) for c in report["contradictions"]] == [("401", "403")]
    page = alice.web.get(f"/summaries/{result.summary.summary_id}/").content.decode()
    assert "<code>401</code> → <code>403</code>" in _row_html(page, "contradictions")
    assert "<code>403</code>" in _row_html(page, "fabricated")


def test_opaque_content_reads_unknown_never_lost_or_below_floor(tenant, alice):
    wf = _session(tenant)
    digest = "sha256:" + hashlib.sha256(b"sealed").hexdigest()
    result = record_observed_compaction(
        wf,
        covers_to_seq=4,
        opaque={"digest": digest, "size_bytes": 6},
        compactor={"name": "openai"},
        actor=ACTOR,
    )
    report = summary_quality(result.summary)
    assert report["opaque"] and all(r["unknown"] for r in report["rows"])
    page = alice.web.get(f"/summaries/{result.summary.summary_id}/").content.decode()
    section = page.split('id="retention"')[1].split("</section>")[0]
    assert "unknown" in section and "below floor" not in section and "Lost" not in section
    assert "opaque" in section


def test_an_opaque_version_is_a_gap_in_the_decay_not_a_loss(tenant, alice):
    wf = _session(tenant)
    keeps = (
        "Payments service, ticket PAY-7710. Unauthenticated calls must return 401 within 30 seconds. "
        "Noted: 401 for unauthenticated calls."
    )
    record_observed_compaction(wf, covers_to_seq=3, text=keeps, compactor=LANGCHAIN, actor=ACTOR)
    digest = "sha256:" + hashlib.sha256(b"sealed-2").hexdigest()
    record_observed_compaction(
        wf,
        covers_to_seq=4,
        opaque={"digest": digest, "size_bytes": 8},
        compactor={"name": "openai"},
        actor=ACTOR,
    )
    decay = workflow_quality(wf)["decay"]
    assert decay["unknown_versions"] == [2]
    assert all(row["first_lost"] != 2 for row in decay["rows"])
    assert all(shares[-1] is None for shares in decay["curve"].values())
    page = alice.web.get(f"/workflows/{wf.external_id}/").content.decode()
    assert "S2: opaque content, retention <strong>unknown</strong>" in page.split('id="decay-unknown"')[1]


def test_a_live_measurement_is_judged_once_per_input(tenant, monkeypatch):
    """The summary page measures a summary without a verdict record live; a second view reuses
    the measurement, and changed source events (a purge empties them) or other floors judge it
    again."""
    import dataclasses
    import json

    from memoryhub.core import quality as q
    from memoryhub.memory import quality_service

    wf = _session(tenant)
    summary = record_observed_compaction(
        wf, covers_to_seq=4, text="The user works on PAY-7710.", compactor=LANGCHAIN, actor=ACTOR
    ).summary
    judged = []
    real = quality_service._verdict_checks
    monkeypatch.setattr(quality_service, "_verdict_checks", lambda *args: judged.append(1) or real(*args))
    quality = q.merged_quality({})
    content = json.loads(summary.content)
    first = quality_service._live_verdict_checks(summary, content, quality)
    assert quality_service._live_verdict_checks(summary, content, quality) == first and len(judged) == 1
    other = q.merged_quality({"max_fabricated": quality["max_fabricated"] + 3})
    quality_service._live_verdict_checks(summary, content, other)
    assert len(judged) == 2
    events = quality_service._source_events
    purged = lambda *args: [dataclasses.replace(e, content="", purged=True) for e in events(*args)]  # noqa: E731
    monkeypatch.setattr(quality_service, "_source_events", purged)
    after = quality_service._live_verdict_checks(summary, content, quality)
    assert len(judged) == 3 and after != first
