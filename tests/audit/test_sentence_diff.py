"""Diffs people read (issue #31, item 3): the narrative side by side, one row per sentence, each
marked same / changed / moved / removed / added; salient units lost or gained between two versions
shown as the retention table counts them (``−1: 401``); an opaque side is unknown, never lost."""

from __future__ import annotations

import hashlib
import re

from audit.diff import diff_salient, diff_sentences, diff_summaries
from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.models import WorkflowSource
from tests.factories import append, make_workflow

OLD = (
    "The API returns 401 for an expired token. Refunds need an idempotency key. "
    "Partial refunds are allowed up to the captured amount. Tests live in tests/refunds. Keep the 403 path."
)
NEW = (
    "Refunds need an idempotency key. The API returns 401 for an expired or revoked token. "
    "Tests live in tests/refunds. Amounts above captured return 422. Keep the 403 path as it is."
)


def states(d):
    return [(r["state"], r["old_no"], r["new_no"]) for r in d["rows"]]


def test_sentences_side_by_side_mark_moved_changed_removed_added():
    d = diff_sentences(OLD, NEW)
    assert states(d) == [
        ("moved", 1, None),  # moved down and reworded
        ("same", 2, 1),
        ("removed", 3, None),
        ("moved", None, 2),
        ("same", 4, 3),
        ("added", None, 4),
        ("changed", 5, 5),
    ]
    assert d["counts"] == {"same": 2, "changed": 1, "moved": 1, "removed": 1, "added": 1}
    moved_left, moved_right = d["rows"][0], d["rows"][3]
    assert moved_left["to"] == 2 and moved_right["from"] == 1 and moved_right["reworded"]
    assert {"op": "insert", "old": "", "new": "or revoked "} in moved_right["ops"]
    changed = d["rows"][6]
    assert changed["old"] == "Keep the 403 path." and changed["new"] == "Keep the 403 path as it is."


def test_a_sentence_moved_as_it_is_is_moved_not_removed_and_added():
    d = diff_sentences("A cat sat. B dog ran. C bird flew.", "C bird flew. A cat sat. B dog ran.")
    assert states(d) == [("moved", None, 1), ("same", 1, 2), ("same", 2, 3), ("moved", 3, None)]
    assert not d["rows"][0]["reworded"] and d["counts"]["moved"] == 1
    assert diff_sentences("", "")["rows"] == []
    assert states(diff_sentences("", "One.")) == [("added", None, 1)]


def test_salient_units_lost_and_gained_as_the_validator_matches_them():
    rows = diff_salient({"narrative": OLD}, {"narrative": NEW.replace("401", "12,500")})
    by_kind = {r["kind"]: r for r in rows}
    assert by_kind["number"]["lost"] == ["401"]
    assert set(by_kind["number"]["gained"]) == {"12,500", "422"}
    # 12,500 and 12500 are one value: nothing lost, nothing gained.
    assert diff_salient({"narrative": "limit 12,500"}, {"narrative": "limit 12500"}) == []


def test_the_diff_of_the_incident_shows_the_lost_401(incident):
    d = diff_summaries(incident.s1, incident.s2)
    lost = {u for r in d["salient"] for u in r["lost"]}
    assert "401" in lost
    assert d["sentences"]["counts"]["removed"] + d["sentences"]["counts"]["changed"] >= 1
    assert d["opaque"] == []


def test_the_diff_page_reads_side_by_side_with_losses(incident, carol):
    html = carol.web.get(
        f"/summaries/{incident.s2.summary_id}/diff/", {"against": incident.s1.summary_id}
    ).content.decode()
    assert 'id="diff-sentences"' in html and 'id="diff-salient"' in html
    assert re.search(r'<del class="loss">−\d+: [^<]*401', html)
    assert "Before (S1)" in html and "After (S2)" in html
    # The summary page's own "changes since" section carries the same diff.
    page = carol.web.get(f"/summaries/{incident.s2.summary_id}/").content.decode()
    assert 'id="diff-sentences"' in page


def test_an_opaque_side_is_unknown_not_lost(tenant, carol):
    wf = make_workflow(tenant, "oa", source=WorkflowSource.OPENAI_AGENTS)
    append(wf, [{"kind": "message", "content": f"order A-100{i} shipped"} for i in range(1, 5)])
    actor = Actor.system("agents-hook")
    compactor = {"name": "openai-responses-compact", "model": "gpt-4.1"}
    for covers, blob in ((2, b"one"), (4, b"two")):
        record_observed_compaction(
            wf,
            covers_to_seq=covers,
            opaque={"digest": "sha256:" + hashlib.sha256(blob).hexdigest(), "size_bytes": 300},
            compactor=compactor,
            trigger={"kind": "auto"},
            actor=actor,
        )
    s1, s2 = wf.summaries.order_by("version")
    d = diff_summaries(s1, s2)
    assert d["opaque"] == ["S1", "S2"] and d["salient"] is None and d["sentences"] is None
    html = carol.web.get(f"/summaries/{s2.summary_id}/diff/").content.decode()
    assert html.count("data-opaque") == 2 and "unknown" in html
    assert 'class="loss"' not in html and 'id="diff-sentences"' not in html
