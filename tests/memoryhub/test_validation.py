"""The summary validator (rules-5): every check passing and failing with a precise reason."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from memoryhub.compaction import SourceEvent, count_json_tokens, get_compactor
from memoryhub.core.canonical import canonical_bytes, hash_value, sha256_hex
from memoryhub.memory.validation import (
    CHECK_NAMES,
    VALIDATOR_VERSION,
    WaiverError,
    apply_waivers,
    validate_summary,
)


def fact(key: str, kind: str, text: str, state: str = "info") -> dict[str, str]:
    return {"key": key, "kind": kind, "text": text, "state": state}


EVENTS = [
    SourceEvent(
        1,
        "requirement",
        "POST /payments requires scope payments:write.",
        agent="req",
        facts=[fact("scope-w", "scope", "payments:write"), fact("src", "source_version", "spec-v7")],
        refs=["spec-v7"],
    ),
    SourceEvent(2, "tool_call", "run_tests(['T1'])", agent="gen", tool_call_id="c1"),
    SourceEvent(
        3,
        "tool_result",
        "T1 failed with 500.",
        agent="gen",
        tool_call_id="c1",
        facts=[fact("test-T1", "test", "T1 POST /payments", "failed")],
    ),
    SourceEvent(
        4,
        "approval",
        "Publishing needs approval-12.",
        agent="pub",
        facts=[fact("approval-12", "approval", "approval-12", "pending")],
    ),
    SourceEvent(
        5,
        "validation",
        "Retries are not idempotent.",
        agent="sec",
        facts=[fact("bug-7", "issue", "bug-7 retries", "open")],
    ),
    SourceEvent(6, "note", "Nothing else happened.", agent="pub"),
]


def base_content() -> dict[str, Any]:
    return {
        "schema": "memoryhub.summary/v1",
        "narrative": "Requirements captured; T1 failed; publishing awaits approval-12.",
        "facts": [
            {**fact("scope-w", "scope", "payments:write"), "source_seqs": [1]},
            {**fact("src", "source_version", "spec-v7"), "source_seqs": [1]},
            {**fact("test-T1", "test", "T1 POST /payments", "failed"), "source_seqs": [3]},
            {**fact("approval-12", "approval", "approval-12", "pending"), "source_seqs": [4]},
            {**fact("bug-7", "issue", "bug-7 retries", "open"), "source_seqs": [5]},
        ],
        "open_items": [
            {"key": "approval-12", "kind": "approval", "state": "pending"},
            {"key": "bug-7", "kind": "issue", "state": "open"},
        ],
    }


def run(
    content: Any = None,
    *,
    raw: bytes | None = None,
    claimed: str | None = None,
    start: int = 1,
    end: int = 6,
    events: list[SourceEvent] = EVENTS,
    previous: int | None = None,
    budget: int | None = 2000,
    head: int = 6,
):
    data = raw if raw is not None else canonical_bytes(content if content is not None else base_content())
    return validate_summary(data, claimed or sha256_hex(data), start, end, events, previous, budget, head)


def failed(outcome) -> dict[str, str]:
    return {c["name"]: c["detail"] for c in outcome.checks if not c["passed"]}


def test_a_faithful_summary_passes_every_check():
    outcome = run()
    assert outcome.validator_version == VALIDATOR_VERSION == "rules-5"
    assert [c["name"] for c in outcome.checks] == list(CHECK_NAMES)
    assert outcome.passed and outcome.reasons == [] and failed(outcome) == {}
    assert outcome.mandatory_coverage == 1.0
    assert outcome.check("mandatory_facts")["detail"] == "all 5 mandatory facts preserved"
    json.dumps(outcome.to_dict())  # storable as a ValidationRecord as is


# -- integrity ----------------------------------------------------------------------------------


def test_integrity_fails_on_a_hash_mismatch():
    wrong = "sha256:" + "0" * 64
    outcome = run(claimed=wrong)
    actual = hash_value(base_content())
    assert failed(outcome) == {"integrity": f"hash mismatch: claimed {wrong}, bytes hash to {actual}"}
    assert outcome.reasons == [f"integrity: hash mismatch: claimed {wrong}, bytes hash to {actual}"]


def test_integrity_fails_on_non_canonical_bytes_even_with_their_own_hash():
    pretty = json.dumps(base_content(), indent=2).encode()
    outcome = run(raw=pretty)
    assert failed(outcome) == {
        "integrity": "bytes are not canonical JSON (sorted keys, no whitespace, UTF-8)"
    }


def test_unparsable_bytes_fail_integrity_and_schema():
    outcome = run(raw=b"{not json")
    problems = failed(outcome)
    assert problems["integrity"].startswith("content is not UTF-8 JSON")
    assert problems["schema_version"].startswith("content is not UTF-8 JSON")
    assert not outcome.passed


# -- schema ---------------------------------------------------------------------------------------


def test_an_unknown_schema_version_fails():
    content = base_content() | {"schema": "memoryhub.summary/v2"}
    assert failed(run(content)) == {
        "schema_version": "unknown schema 'memoryhub.summary/v2'; this validator understands memoryhub.summary/v1"
    }


def test_an_absent_schema_field_means_v1():
    content = base_content()
    del content["schema"]
    assert run(content).passed


def test_malformed_structure_is_reported_field_by_field():
    content = base_content()
    content["narrative"] = 7
    content["facts"][0]["source_seqs"] = ["1"]
    content["facts"].append(copy.deepcopy(content["facts"][1]))
    detail = failed(run(content))["schema_version"]
    assert "'narrative' must be a string" in detail
    assert "facts[0].source_seqs must be a list of integers" in detail
    assert "fact key 'src' appears twice" in detail


# -- coverage contiguity ---------------------------------------------------------------------------


def test_coverage_may_continue_the_previous_watermark():
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["source_seqs"][0] >= 4]
    outcome = run(content, start=4, end=6, previous=3)
    assert outcome.passed, outcome.reasons


def test_coverage_with_a_gap_after_the_previous_watermark_fails():
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["source_seqs"][0] >= 5]
    content["open_items"] = [{"key": "bug-7", "kind": "issue", "state": "open"}]
    outcome = run(content, start=5, end=6, previous=3)
    assert failed(outcome) == {
        "coverage_contiguity": "covers_from_seq 5 leaves a gap or overlap: must be 1 (full re-summary) "
        "or 4 (previous watermark 3 + 1)"
    }


def test_coverage_not_starting_at_one_without_a_previous_summary_fails():
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["source_seqs"][0] >= 4]
    detail = failed(run(content, start=4))["coverage_contiguity"]
    assert detail == "covers_from_seq 4 must be 1: there is no previous summary"


def test_coverage_beyond_head_and_missing_events_fail():
    outcome = run(end=6, head=5, events=[e for e in EVENTS if e.seq != 2])
    detail = failed(outcome)["coverage_contiguity"]
    assert "covers_to_seq 6 is beyond the head revision 5" in detail
    assert "source events missing from the coverage: seqs 2" in detail


# -- tool call pairs --------------------------------------------------------------------------------


def test_a_covered_tool_call_without_its_result_fails():
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["source_seqs"][0] < 3]
    content["open_items"] = []
    outcome = run(content, end=2, head=6)
    assert failed(outcome) == {"tool_call_pairs": "tool call c1 (seq 2) has no result inside the coverage"}


# -- mandatory facts ---------------------------------------------------------------------------------


def test_a_dropped_mandatory_fact_fails_with_its_key_and_seq():
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["key"] != "scope-w"]
    outcome = run(content)
    assert failed(outcome) == {"mandatory_facts": "missing mandatory facts: scope-w (scope, info, seq 1)"}
    assert outcome.mandatory_coverage == pytest.approx(4 / 5)


def test_a_mandatory_fact_with_an_incompatible_state_fails():
    content = base_content()
    content["facts"][2]["state"] = "passed"  # test-T1 failed at seq 3
    problems = failed(run(content))
    assert (
        problems["mandatory_facts"]
        == "incompatible state: test-T1 is 'passed' in the summary but 'failed' at seq 3"
    )
    assert problems["groundedness"] == "test-T1 is 'passed' but the latest source (seq 3) says 'failed'"


def test_open_and_pending_are_compatible_states():
    content = base_content()
    content["facts"][4]["state"] = "pending"  # bug-7 open at seq 5
    content["open_items"][1]["state"] = "pending"
    assert run(content).passed


def test_a_later_approval_makes_the_pending_one_optional_but_a_stale_state_is_caught():
    approved = SourceEvent(
        7,
        "approval",
        "approval-12 granted.",
        agent="sec",
        facts=[fact("approval-12", "approval", "approval-12", "approved")],
    )
    events = [*EVENTS, approved]
    content = base_content()
    content["facts"] = [f for f in content["facts"] if f["key"] != "approval-12"]
    content["open_items"] = [content["open_items"][1]]
    assert run(content, end=7, head=7, events=events).passed  # dropping a settled approval is allowed

    stale = base_content()  # still says pending although seq 7 approved it
    problems = failed(run(stale, end=7, head=7, events=events))
    assert (
        problems["groundedness"] == "approval-12 is 'pending' but the latest source (seq 7) says 'approved'"
    )
    assert (
        problems["open_issues"]
        == "open_items already settled in the sources: approval-12 (approved at seq 7)"
    )


# -- groundedness -----------------------------------------------------------------------------------


def test_facts_citing_events_outside_the_coverage_fail():
    content = base_content()
    content["facts"][0]["source_seqs"] = [1, 9]
    assert failed(run(content)) == {"groundedness": "scope-w cites seq 9, outside 1..6"}


def test_facts_citing_events_that_do_not_support_them_fail():
    content = base_content()
    content["facts"][0]["source_seqs"] = [1, 6]
    assert failed(run(content)) == {
        "groundedness": "scope-w cites seq 6, which neither states it nor contains its text"
    }


def test_a_fact_without_citations_fails():
    content = base_content()
    content["facts"][1]["source_seqs"] = []
    assert failed(run(content)) == {"groundedness": "src cites no source event"}


def test_a_fact_grounded_in_event_text_passes():
    content = base_content()
    content["facts"].append(
        {**fact("note-idempotency", "decision", "retries are NOT   idempotent"), "source_seqs": [5]}
    )
    assert run(content).passed


def test_a_fact_whose_text_no_cited_event_supports_fails():
    content = base_content()
    content["facts"][0]["text"] = "payments:admin"  # key stated at seq 1, but not this text
    assert failed(run(content)) == {
        "groundedness": "scope-w: no cited event supports its text 'payments:admin'"
    }


def test_a_purged_citation_cannot_be_rechecked_and_is_accepted():
    events = [e if e.seq != 6 else SourceEvent(6, "note", "", purged=True) for e in EVENTS]
    content = base_content()
    content["facts"].append({**fact("gone", "decision", "was in a purged event"), "source_seqs": [6]})
    assert run(content, events=events).passed


# -- open issues -------------------------------------------------------------------------------------


def test_an_open_issue_missing_from_open_items_fails():
    content = base_content()
    content["open_items"] = content["open_items"][:1]
    assert failed(run(content)) == {"open_issues": "missing from open_items: bug-7 (seq 5)"}


def test_an_open_issue_closed_in_facts_fails_and_orphan_items_fail():
    content = base_content()
    content["facts"][4]["state"] = "resolved"
    content["open_items"].append("approval-99")  # plain keys are accepted as items too
    detail = failed(run(content))["open_issues"]
    assert "open in sources but not open in facts: bug-7 (seq 5)" in detail
    assert "open_items without a fact: approval-99" in detail
    assert "open_items whose fact is no longer open: bug-7" in detail


# -- token budget ---------------------------------------------------------------------------------------


def test_token_budget_pass_fail_and_absent():
    tokens = count_json_tokens(base_content())
    assert run(budget=tokens).check("token_budget") == {
        "name": "token_budget",
        "passed": True,
        "detail": f"{tokens} of {tokens} tokens",
    }
    assert failed(run(budget=tokens - 5)) == {
        "token_budget": f"content is {tokens} tokens, over the budget of {tokens - 5} by 5"
    }
    assert run(budget=None).check("token_budget")["detail"] == f"{tokens} tokens; no budget set"


# -- secret scan -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("secret", "pattern"),
    [
        ("sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2", "openai_api_key"),
        ("mh_live01_" + "Q" * 24, "memoryhub_api_key"),
        ("AKIA" + "IOSFODNN7EXAMPLE", "aws_access_key_id"),
        ("Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.payload.sig", "bearer_token"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow", "private_key"),
        ("-----BEGIN PRIVATE KEY-----", "private_key"),
        ("ghp_" + "x" * 36, "github_token"),
    ],
)
def test_secret_scan_finds_credentials_without_repeating_them(secret, pattern):
    content = base_content()
    content["narrative"] += " " + secret
    detail = failed(run(content))["secret_scan"]
    assert detail.startswith(f"credentials found: {pattern} in narrative (")
    assert secret not in detail and secret[8:20] not in detail


def test_secret_scan_looks_inside_facts_too():
    content = base_content()
    content["facts"][0]["text"] = "token sk-" + "Z" * 24
    problems = failed(run(content))
    assert problems["secret_scan"] == "credentials found: openai_api_key in facts[0].text (sk-ZZZ…)"


def test_ordinary_text_is_not_mistaken_for_a_secret():
    content = base_content()
    content["narrative"] += " Ask the risk-team about sk-8 and the bearer of bad news; task-12345 is done."
    assert run(content).check("secret_scan")["passed"]


# -- waivers -------------------------------------------------------------------------------------------------


def test_a_reviewer_can_waive_named_failed_checks():
    content = base_content()
    content["open_items"] = content["open_items"][:1]
    outcome = run(content, budget=50)
    assert set(failed(outcome)) == {"open_issues", "token_budget"}

    partly = apply_waivers(outcome, ["token_budget"])
    assert not partly.passed
    assert partly.reasons == ["open_issues: missing from open_items: bug-7 (seq 5)"]
    assert partly.check("token_budget") | {} == {**outcome.check("token_budget"), "waived": True}

    fully = apply_waivers(partly, ["open_issues"])
    assert fully.passed and fully.reasons == []
    assert fully.waived_checks == ["open_issues", "token_budget"]
    assert not outcome.waived_checks  # the original outcome is untouched


@pytest.mark.parametrize(
    ("names", "message"),
    [
        (["integrity"], "check 'integrity' cannot be waived"),
        (["vibes"], "unknown check 'vibes'"),
        (["secret_scan"], "check 'secret_scan' did not fail; nothing to waive"),
    ],
)
def test_invalid_waivers_are_refused(names, message):
    outcome = run(budget=10, claimed="sha256:" + "1" * 64)
    with pytest.raises(WaiverError, match=message):
        apply_waivers(outcome, names)


def test_validator_accepts_extractive_output_for_the_same_events():
    result = get_compactor("extractive-v1", token_budget=600).compact(None, EVENTS)
    outcome = validate_summary(
        result.content_bytes, result.content_hash, 1, result.covers_to_seq, EVENTS, None, 600, 6
    )
    assert outcome.passed, outcome.reasons
