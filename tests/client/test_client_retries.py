"""Retry, backoff and idempotency of MemoryHubClient against a real local HTTP server."""

from __future__ import annotations

import socket
import uuid
from datetime import UTC, datetime

import pytest

from memoryhub.client import (
    ApiError,
    Conflict,
    MemoryHubClient,
    MemoryHubError,
    RateLimited,
    ServerError,
    TransportError,
    parse_retry_after,
)

from .conftest import DROP, Recorded, Reply, ScriptedServer, SleepRecorder

EVENTS = "/api/v1/workflows/wf-1/events/"


def _client(url: str, sleeps: SleepRecorder, **kwargs) -> MemoryHubClient:
    options = {"api_key": "mh_test_key", "timeout": 5.0, "max_retries": 3, "backoff": 0.1, "sleep": sleeps}
    options.update(kwargs)
    return MemoryHubClient(url, **options)


def _stored(request: Recorded, first_seq: int = 1) -> Reply:
    """A 201 append answer echoing the client_event_ids the request carried."""
    events = [
        {
            "seq": first_seq + i,
            "client_event_id": e["client_event_id"],
            "token_count": 3,
            "content_hash": "sha256:x",
        }
        for i, e in enumerate(request.body["events"])
    ]
    return Reply(
        201, {"events": events, "head_seq": first_seq + len(events) - 1, "total_tokens": 3 * len(events)}
    )


def test_append_retries_503_twice_then_succeeds_resending_same_client_event_ids(server, sleeps):
    server.on(
        "POST", EVENTS, Reply(503, {"error": "unavailable", "detail": "db restarting"}), Reply(503), _stored
    )
    with _client(server.url, sleeps) as client:
        result = client.append_events(
            "wf-1", [{"kind": "message", "content": "a"}, {"kind": "note", "content": "b"}]
        )

    posts = server.hits("POST", EVENTS)
    assert len(posts) == 3
    ids = [e["client_event_id"] for e in posts[0].body["events"]]
    assert all(uuid.UUID(i).version == 4 for i in ids)
    assert len(set(ids)) == 2
    # every retry carries the very same batch, so the server can deduplicate it
    assert all(p.body == posts[0].body for p in posts)
    assert [e.client_event_id for e in result.events] == ids
    assert result.head_seq == 2 and result.events[1].seq == 2
    # exponential backoff with jitter: retry n waits within [0.5, 1] × backoff × 2**n
    assert len(sleeps.calls) == 2
    assert 0.05 <= sleeps.calls[0] <= 0.1
    assert 0.1 <= sleeps.calls[1] <= 0.2


def test_caller_supplied_client_event_id_is_kept(server, sleeps):
    server.on("POST", EVENTS, _stored)
    with _client(server.url, sleeps) as client:
        client.append_events("wf-1", [{"kind": "message", "content": "a", "client_event_id": "mine-1"}])
    assert server.requests[0].body["events"][0]["client_event_id"] == "mine-1"


def test_dropped_connection_on_append_is_retried_with_the_same_ids(server, sleeps):
    server.on("POST", EVENTS, DROP, _stored)
    with _client(server.url, sleeps) as client:
        result = client.append_events("wf-1", [{"kind": "message", "content": "a"}])
    first, second = server.hits("POST", EVENTS)
    assert first.body == second.body
    assert result.events[0].client_event_id == first.body["events"][0]["client_event_id"]


def test_429_waits_exactly_retry_after(server, sleeps):
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/",
        Reply(429, {"error": "rate_limited", "detail": "slow down"}, {"Retry-After": "2"}),
        Reply(200, {"external_id": "wf-1", "head_seq": 9}),
    )
    with _client(server.url, sleeps) as client:
        workflow = client.get_workflow("wf-1")
    assert workflow.head_seq == 9
    assert sleeps.calls == [2.0]


def test_retry_after_beyond_cap_raises_at_once(server, sleeps):
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/",
        Reply(429, {"error": "rate_limited", "detail": "x"}, {"Retry-After": "3600"}),
    )
    with _client(server.url, sleeps, max_retry_after=60) as client, pytest.raises(RateLimited) as caught:
        client.get_workflow("wf-1")
    assert caught.value.retry_after == 3600
    assert len(server.requests) == 1 and sleeps.calls == []


def test_rate_limited_after_exhausting_retries(server, sleeps):
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/",
        Reply(429, {"error": "rate_limited", "detail": "x"}, {"Retry-After": "1"}),
    )
    with _client(server.url, sleeps, max_retries=2) as client, pytest.raises(RateLimited) as caught:
        client.get_workflow("wf-1")
    assert len(server.requests) == 3
    assert sleeps.calls == [1.0, 1.0]
    assert caught.value.status == 429 and caught.value.retries == 2


def test_parse_retry_after_accepts_seconds_and_http_dates():
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("5", now=now) == 5.0
    assert parse_retry_after("Mon, 30 Nov 2026 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Mon, 30 Nov 2026 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon", now=now) is None
    assert parse_retry_after(None) is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connection_refused_retries_then_raises_transport_error(sleeps):
    with (
        _client(f"http://127.0.0.1:{_free_port()}", sleeps, max_retries=2) as client,
        pytest.raises(TransportError) as caught,
    ):
        client.get_workflow("wf-1")
    assert caught.value.attempts == 3
    assert len(sleeps.calls) == 2


def test_connection_refused_then_server_comes_up(sleeps):
    port = _free_port()
    late = ScriptedServer(port, listen_now=False)
    late.on("POST", EVENTS, _stored)

    def bring_up(_: float) -> None:
        # the server only starts listening while the client sleeps before its first retry
        if not late.started:
            late.start()

    recorder = SleepRecorder(on_sleep=bring_up)
    try:
        with _client(f"http://127.0.0.1:{port}", recorder) as client:
            result = client.append_events("wf-1", [{"kind": "message", "content": "a"}])
    finally:
        late.stop()
    assert len(recorder.calls) == 1
    assert len(late.requests) == 1
    assert result.events[0].client_event_id == late.requests[0].body["events"][0]["client_event_id"]


def test_non_idempotent_post_is_not_retried_when_the_server_may_have_acted(server, sleeps):
    path = "/api/v1/summaries/S3/activate/"
    server.on("POST", path, DROP)
    with _client(server.url, sleeps) as client, pytest.raises(TransportError):
        client.activate("S3", expected_revision=4)
    assert len(server.hits("POST", path)) == 1

    server.on("POST", path, Reply(500, {"error": "server_error", "detail": "boom"}))
    with _client(server.url, sleeps) as client, pytest.raises(ServerError):
        client.activate("S3", expected_revision=4)
    assert len(server.hits("POST", path)) == 2
    assert sleeps.calls == []


def test_non_idempotent_post_is_retried_on_503_which_proves_nothing_happened(server, sleeps):
    path = "/api/v1/summaries/S3/quarantine/"
    server.on("POST", path, Reply(503), Reply(200, {"summary_id": "S3", "status": "QUARANTINED"}))
    with _client(server.url, sleeps) as client:
        answer = client.quarantine("S3", reason="omits payments:write")
    assert answer["status"] == "QUARANTINED"
    assert [r.body for r in server.hits("POST", path)] == [{"reason": "omits payments:write"}] * 2


def test_idempotent_post_is_retried_on_500(server, sleeps):
    path = "/api/v1/workflows/wf-1/traces/"
    body = {"trace_id": 11, "flags": [], "model_call_id": "call-1"}
    server.on("POST", path, Reply(500, raw=b"Internal Server Error"), Reply(201, body))
    with _client(server.url, sleeps) as client:
        trace = client.record_trace(
            "wf-1",
            agent="publisher",
            agent_run_id="run-1",
            model_call_id="call-1",
            summary_id=None,
            tail_to_seq=240,
        )
    assert trace.trace_id == 11
    posts = server.hits("POST", path)
    assert len(posts) == 2 and posts[0].body == posts[1].body
    assert posts[0].body["summary_id"] is None  # explicit null: the consumer read raw history


def test_expected_head_conflict_after_a_lost_answer_recovers_our_own_append(server, sleeps):
    sent: list[Recorded] = []

    def first(request: Recorded):
        sent.append(request)
        return DROP  # the server committed seqs 6..7 but the answer never arrived

    def listing(request: Recorded) -> Reply:
        assert request.query == {"after": "5", "until": "7"}
        events = [
            {
                "seq": 6 + i,
                "client_event_id": e["client_event_id"],
                "kind": "message",
                "content": e["content"],
                "token_count": 2,
                "content_hash": "sha256:y",
            }
            for i, e in enumerate(sent[0].body["events"])
        ]
        return Reply(200, {"events": events, "next": None})

    server.on(
        "POST", EVENTS, first, Reply(409, {"error": "head_moved", "detail": "head is 7", "head_seq": 7})
    )
    server.on("GET", EVENTS, listing)
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/",
        Reply(200, {"external_id": "wf-1", "head_seq": 7, "total_tokens": 40}),
    )
    with _client(server.url, sleeps) as client:
        result = client.append_events(
            "wf-1",
            [{"kind": "message", "content": "x"}, {"kind": "message", "content": "y"}],
            expected_head=5,
        )
    assert [e.seq for e in result.events] == [6, 7]
    assert result.head_seq == 7 and result.raw["recovered"] is True


def test_expected_head_conflict_from_someone_else_is_raised(server, sleeps):
    server.on("POST", EVENTS, DROP, Reply(409, {"error": "head_moved", "detail": "head is 6", "head_seq": 6}))
    server.on(
        "GET",
        EVENTS,
        Reply(
            200, {"events": [{"seq": 6, "client_event_id": "someone-else", "kind": "note", "content": "z"}]}
        ),
    )
    with _client(server.url, sleeps) as client, pytest.raises(Conflict) as caught:
        client.append_events("wf-1", [{"kind": "message", "content": "x"}], expected_head=5)
    assert caught.value.head_seq == 6


def test_first_try_conflict_is_not_second_guessed(server, sleeps):
    server.on("POST", EVENTS, Reply(409, {"error": "head_moved", "detail": "head is 6", "head_seq": 6}))
    with _client(server.url, sleeps) as client, pytest.raises(Conflict):
        client.append_events("wf-1", [{"kind": "message", "content": "x"}], expected_head=5)
    assert server.hits("GET", EVENTS) == []


def test_every_request_is_authenticated(server, sleeps):
    server.on("GET", "/api/v1/workflows/wf-1/", Reply(200, {"external_id": "wf-1"}))
    with _client(server.url, sleeps) as client:
        client.get_workflow("wf-1")
    headers = server.requests[0].headers
    assert headers["authorization"] == "Bearer mh_test_key"
    assert headers["user-agent"].startswith("memoryhub-client/")


def test_transport_error_is_a_memoryhub_error(sleeps):
    with (
        _client(f"http://127.0.0.1:{_free_port()}", sleeps, max_retries=0) as client,
        pytest.raises(MemoryHubError),
    ):
        client.get_context("wf-1")
    assert sleeps.calls == []


def test_server_error_after_retries_keeps_status_and_body(server, sleeps):
    server.on("GET", "/api/v1/audit/verify/", Reply(502, raw=b"<html>bad gateway</html>"))
    with _client(server.url, sleeps, max_retries=1) as client, pytest.raises(ApiError) as caught:
        client.verify_audit()
    assert isinstance(caught.value, ServerError)
    assert caught.value.status == 502 and caught.value.code == "http_502"
    assert "bad gateway" in caught.value.detail
    assert len(server.requests) == 2
