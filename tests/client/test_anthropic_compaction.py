"""Anthropic ``compaction`` content blocks (the anthropic package's own types) recorded through the
client helper against a live MemoryHub."""

from __future__ import annotations

import hashlib

import pytest
from anthropic.types.beta import BetaMessage

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.client import MemoryHubClient
from memoryhub.integrations.anthropic import record_anthropic_response
from memoryhub.models import ConsumerTrace, Event, Role, Summary, SummaryStatus

pytestmark = pytest.mark.django_db(transaction=True)
CM = {
    "edits": [
        {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 120_000},
            "instructions": "keep ids",
        }
    ]
}


def _message(msg_id: str, blocks: list[dict], compaction_input: int | None = 131_000) -> BetaMessage:
    iterations = [{"type": "message", "input_tokens": 9000, "output_tokens": 200, "cache_creation_input_tokens": 0,
                   "cache_read_input_tokens": 0, "model": "claude-opus-4-6"}]  # fmt: skip
    if compaction_input is not None:
        iterations.insert(0, {"type": "compaction", "input_tokens": compaction_input, "output_tokens": 1800,
                              "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})  # fmt: skip
    return BetaMessage.model_validate(
        {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": "claude-opus-4-6",
            "content": blocks,
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 9000, "output_tokens": 200, "iterations": iterations},
        }
    )


@pytest.fixture
def hub(live_server, alice):
    with MemoryHubClient(
        live_server.url,
        api_key=issue_api_key(alice.tenant, "integration", role=Role.INGEST).secret,
        timeout=30,
    ) as client:
        client.create_workflow("ticket-991", source="anthropic")
        client.append_events(
            "ticket-991",
            [
                {"kind": "message", "role": "user", "content": f"message {i}: order 4417 refund"}
                for i in range(6)
            ],
        )
        yield client


def test_readable_compaction_block_becomes_an_active_version_and_the_call_a_trace(hub):
    response = _message("msg_01", [
        {"type": "compaction", "content": "Customer wants a refund for order 4417."},
        {"type": "text", "text": "I have issued the refund for order 4417."},
    ])  # fmt: skip
    result = hub.record_anthropic_response("ticket-991", response, context_management=CM)
    (observed,) = result["compactions"]
    assert observed["activation"] == "activated" and observed["covers_to_seq"] == 6 and result["events"] == 1
    assert observed["trigger"] == {"kind": "auto", "pre_tokens": 131_000, "threshold_tokens": 120_000}
    summary = Summary.objects.get(summary_id=observed["summary_id"])
    assert summary.compactor_name == "anthropic" and summary.compactor_version == "compact_20260112"
    assert summary.job.attempts[0]["compactor_settings"]["trigger"] == {
        "type": "input_tokens",
        "value": 120_000,
    }
    assert "instructions" not in summary.job.attempts[0]["compactor_settings"]
    trace = ConsumerTrace.objects.get(model_call_id="anthropic:msg_01")
    assert trace.summary_id == summary.pk and trace.input_tokens == 9000 and trace.model == "claude-opus-4-6"
    assert trace.output_tokens == 200  # usage.output_tokens, as the response reports it
    assert Event.objects.filter(workflow=summary.workflow).count() == 7
    # Re-recording the same response (a retry) changes nothing.
    again = hub.record_anthropic_response("ticket-991", response, context_management=CM, covers_to_seq=6)
    assert again["compactions"][0]["created"] is False and Summary.objects.count() == 1
    assert Event.objects.filter(workflow=summary.workflow).count() == 7


def test_encrypted_only_block_is_opaque_and_a_failed_block_is_skipped(hub):
    sealed = "EqQBCkgIARABGAIiQH…opaque…"
    result = hub.record_anthropic_response(
        "ticket-991",
        _message("msg_02", [{"type": "compaction", "encrypted_content": sealed}]),
        context_management=CM,
    )
    (observed,) = result["compactions"]
    assert observed["validation"] == "unverifiable" and observed["status"] == SummaryStatus.ACTIVE
    content = hub.get_summary(observed["summary_id"])["content"]
    assert content["digest"] == "sha256:" + hashlib.sha256(sealed.encode()).hexdigest()
    assert content["size_bytes"] == len(sealed.encode())
    failed = hub.record_anthropic_response(
        "ticket-991",
        _message("msg_03", [{"type": "compaction", "content": None}], None),
        # The next request round-trips the encrypted block: the call reads it, not the history.
        messages=[
            {"role": "assistant", "content": [{"type": "compaction", "encrypted_content": sealed}]},
            {"role": "user", "content": "and the refund for 4417?"},
        ],
    )
    assert failed["compactions"] == [] and Summary.objects.count() == 1
    # That call read the (opaque) compaction its request carried.
    assert (
        ConsumerTrace.objects.get(model_call_id="anthropic:msg_03").summary.summary_id
        == observed["summary_id"]
    )


# -- the README's call: a new workflow, the request's messages, a repeat ---------------------------


@pytest.fixture
def fresh_hub(live_server, alice):
    with MemoryHubClient(
        live_server.url,
        api_key=issue_api_key(alice.tenant, "integration", role=Role.INGEST).secret,
        timeout=30,
    ) as client:
        yield client


REQUEST = [
    {"role": "user", "content": "Order 4417 arrived broken; I want a refund."},
    {"role": "assistant", "content": [{"type": "text", "text": "Sorry to hear that. Photo please?"}]},
    {"role": "user", "content": [{"type": "text", "text": "Photo attached. Refund to the original card."}]},
    {"role": "user", "content": "ok"},
    {"role": "user", "content": "ok"},
]


def test_new_workflow_records_the_request_and_a_repeat_returns_the_same_result(fresh_hub):
    response = _message("msg_10", [
        {"type": "compaction", "content": "Refund for broken order 4417 to the original card."},
        {"type": "text", "text": "Refund issued for order 4417."},
    ])  # fmt: skip
    first = fresh_hub.record_anthropic_response(
        "ticket-new", response, messages=REQUEST, context_management=CM
    )
    wf = fresh_hub.get_workflow("ticket-new")
    assert wf.source == "anthropic" and wf.head_seq == 6  # 5 request messages ("ok" twice) + the reply
    stored = [(e.role, e.content) for e in fresh_hub.list_events("ticket-new")]
    assert stored[:3] == [
        ("user", "Order 4417 arrived broken; I want a refund."),
        ("assistant", "Sorry to hear that. Photo please?"),
        ("user", "Photo attached. Refund to the original card."),
    ]
    assert stored[3:] == [("user", "ok"), ("user", "ok"), ("assistant", "Refund issued for order 4417.")]
    (observed,) = first["compactions"]
    assert observed["covers_to_seq"] == 5 and observed["activation"] == "activated"
    trace = ConsumerTrace.objects.get(model_call_id="anthropic:msg_10")
    assert (trace.tail_to_seq, trace.head_seq_at_read) == (5, 5) and "tail_loss" not in trace.flags

    again = fresh_hub.record_anthropic_response(
        "ticket-new", response, messages=REQUEST, context_management=CM
    )
    assert again == {**first, "compactions": [{**observed, "created": False}]}
    assert fresh_hub.get_workflow("ticket-new").head_seq == 6 and Summary.objects.count() == 1

    # The next request repeats this one and the reply: only the new message is appended.
    follow_up = [
        *REQUEST,
        {"role": "assistant", "content": response.content},
        {"role": "user", "content": "thanks"},
    ]
    fresh_hub.record_anthropic_response(
        "ticket-new",
        _message("msg_11", [{"type": "text", "text": "You're welcome."}], None),
        messages=follow_up,
    )
    assert [e.content for e in fresh_hub.list_events("ticket-new", after=6)] == ["thanks", "You're welcome."]


def test_a_repeat_without_messages_is_idempotent_too(hub):
    response = _message("msg_20", [
        {"type": "compaction", "content": "Customer wants a refund for order 4417."},
        {"type": "text", "text": "Done."},
    ])  # fmt: skip
    first = hub.record_anthropic_response("ticket-991", response, context_management=CM)
    again = hub.record_anthropic_response("ticket-991", response, context_management=CM)
    assert again["compactions"][0]["summary_id"] == first["compactions"][0]["summary_id"]
    assert again["trace_id"] == first["trace_id"] and hub.get_workflow("ticket-991").head_seq == 7


def test_a_compaction_with_nothing_to_cover_is_a_clear_error(fresh_hub):
    response = _message("msg_30", [{"type": "compaction", "content": "Summary of nothing recorded."}])
    with pytest.raises(ValueError, match="pass the request's messages"):
        fresh_hub.record_anthropic_response("ticket-empty", response)


def test_through_a_resilient_hub_it_never_raises_and_spools_when_memoryhub_is_away(tmp_path, fresh_hub):
    import time

    from memoryhub.client.resilience import ResilientHub

    response = _message("msg_40", [
        {"type": "compaction", "content": "Refund for broken order 4417."},
        {"type": "text", "text": "Refund issued."},
    ])  # fmt: skip
    down = MemoryHubClient("http://127.0.0.1:9", api_key="mh_x", max_retries=0)
    with ResilientHub(client=down, component="anthropic", spool_dir=tmp_path / "down", deadline=0.5) as hub:
        started = time.monotonic()
        result = record_anthropic_response(
            hub, "ticket-hub", response, messages=REQUEST, context_management=CM
        )
        assert time.monotonic() - started < 2 * 0.5 + 0.5
        assert result["spooled"] is True and hub.status()["spooled"] == 2  # both steps, in order
    with ResilientHub(client=fresh_hub, component="anthropic", spool_dir=tmp_path / "up", deadline=30) as hub:
        live = record_anthropic_response(hub, "ticket-hub", response, messages=REQUEST, context_management=CM)
    assert live["compactions"][0]["covers_to_seq"] == 5 and live["trace_id"] is not None
    assert fresh_hub.get_workflow("ticket-hub").head_seq == 6
