"""Exception mapping, typed results, paging and compaction polling of MemoryHubClient."""

from __future__ import annotations

import pytest

from memoryhub.client import (
    ApiError,
    CompactionTimeout,
    Conflict,
    MemoryHubClient,
    MemoryHubError,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    Unauthorized,
    ValidationFailed,
)

from .conftest import Recorded, Reply


@pytest.fixture
def hub(server, sleeps):
    with MemoryHubClient(server.url, api_key="k", max_retries=2, backoff=0.01, sleep=sleeps) as hub:
        yield hub


@pytest.mark.parametrize(
    ("status", "exc_type"),
    [
        (400, ValidationFailed),
        (401, Unauthorized),
        (403, PermissionDenied),
        (404, NotFound),
        (409, Conflict),
        (413, PayloadTooLarge),
    ],
)
def test_4xx_maps_to_exception_with_code_and_detail(server, hub, status, exc_type):
    server.on(
        "POST", "/api/v1/workflows/wf-1/events/", Reply(status, {"error": f"code_{status}", "detail": "why"})
    )
    with pytest.raises(exc_type) as caught:
        hub.append_events("wf-1", [{"kind": "message", "content": "x"}])
    error = caught.value
    assert isinstance(error, ApiError) and isinstance(error, MemoryHubError)
    assert (error.status, error.code, error.detail) == (status, f"code_{status}", "why")
    assert len(server.requests) == 1  # 4xx is never retried


def test_stale_revision_carries_current_revision(server, hub):
    server.on(
        "POST",
        "/api/v1/summaries/S3/activate/",
        Reply(409, {"error": "stale_revision", "detail": "revision moved", "current_revision": 7}),
    )
    with pytest.raises(Conflict) as caught:
        hub.activate("S3", expected_revision=6)
    assert caught.value.code == "stale_revision"
    assert caught.value.current_revision == 7
    assert server.requests[0].body == {"expected_revision": 6}


def test_read_after_write_guard_is_a_conflict(server, hub):
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/context/",
        Reply(409, {"error": "head_behind_min_seq", "detail": "head 4 < min_seq 5", "head_seq": 4}),
    )
    with pytest.raises(Conflict) as caught:
        hub.get_context("wf-1", min_seq=5)
    assert caught.value.head_seq == 4
    assert server.requests[0].query == {"min_seq": "5"}


def test_a_stale_context_is_retried_as_the_server_asks_then_raised(server, sleeps):
    """A read replica behind ``min_seq`` answers 409 stale_context + retry_after: wait, ask again."""
    from memoryhub.client import MemoryHubClient

    stale = Reply(
        409,
        {"error": "stale_context", "detail": "head 4 < min_seq 5", "head_seq": 4, "retry_after": 1},
        headers={"Retry-After": "1"},
    )
    fresh = Reply(
        200,
        {"summary": None, "tail": [], "head_seq": 5, "tokens": {"summary": 0, "tail": 0, "total": 0}},
    )
    server.on("GET", "/api/v1/workflows/wf-1/context/", stale, stale, fresh)
    hub = MemoryHubClient(server.url, "k", sleep=sleeps, stale_context_retries=3)
    assert hub.get_context("wf-1", min_seq=5).head_seq == 5
    assert sleeps.calls == [1.0, 1.0] and len(server.requests) == 3

    server.on("GET", "/api/v1/workflows/wf-1/context/", stale)  # never catches up: raised after 3 retries
    with pytest.raises(Conflict) as caught:
        hub.get_context("wf-1", min_seq=5)
    assert caught.value.code == "stale_context" and len(server.requests) == 3 + 4


def test_context_is_typed(server, hub):
    server.on(
        "GET",
        "/api/v1/workflows/wf-1/context/",
        Reply(
            200,
            {
                "summary": {
                    "summary_id": "sum_3",
                    "version": 3,
                    "status": "ACTIVE",
                    "covers_to_seq": 220,
                    "content": {"narrative": "n", "facts": []},
                    "content_hash": "sha256:abc",
                    "token_count": 900,
                },
                "tail": [{"seq": 221, "kind": "message", "content": "a", "token_count": 5, "brand_new": 1}],
                "head_seq": 221,
                "tokens": {"summary": 900, "tail": 5, "total": 905},
                "context_id": "ctx_1",
                "manifest_hash": "sha256:def",
                "served_at": "now",
            },
        ),
    )
    context = hub.get_context("wf-1")
    assert context.summary is not None and context.summary.version == 3
    assert context.watermark == 220 and context.tail_to_seq == 221
    assert context.tail[0].seq == 221 and context.tail[0]["brand_new"] == 1  # unknown fields kept
    assert context.tokens.total == 905
    assert context.get("served_at") == "now"
    assert server.requests[0].query == {}


def test_events_listing_follows_next_links_and_has_more(server, hub):
    path = "/api/v1/workflows/wf-1/events/"

    def page(request: Recorded) -> Reply:
        after = int(request.query.get("after", 0))
        until = int(request.query["until"])
        seqs = list(range(after + 1, min(after + 2, until) + 1))
        body = {"events": [{"seq": s, "kind": "note", "content": str(s)} for s in seqs]}
        if seqs and seqs[-1] < until:
            if after < 2:
                body["next"] = f"{server.url}{path}?after={seqs[-1]}&until={until}"
            else:
                body["has_more"] = True
        return Reply(200, body)

    server.on("GET", path, page)
    events = hub.list_events("wf-1", after=0, until=5)
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [r.query.get("after") for r in server.requests] == ["0", "2", "4"]


def test_events_listing_follows_next_after(server, hub):
    path = "/api/v1/workflows/wf-1/events/"

    def page(request: Recorded) -> Reply:
        after = int(request.query.get("after", 0))
        seqs = [s for s in (after + 1, after + 2) if s <= 5]
        return Reply(
            200,
            {
                "events": [{"seq": s, "kind": "note", "content": str(s)} for s in seqs],
                "head_seq": 5,
                "next_after": seqs[-1] if seqs[-1] < 5 else None,
            },
        )

    server.on("GET", path, page)
    assert [e.seq for e in hub.list_events("wf-1")] == [1, 2, 3, 4, 5]
    assert [r.query.get("after") for r in server.requests] == [None, "2", "4"]


def test_plain_list_answers_are_accepted(server, hub):
    server.on("GET", "/api/v1/workflows/", Reply(200, [{"external_id": "a"}, {"external_id": "b"}]))
    assert [w.external_id for w in hub.list_workflows()] == ["a", "b"]


def test_wait_for_compaction_polls_until_the_job_finishes(server, hub):
    server.on("POST", "/api/v1/workflows/wf-1/compactions/", Reply(202, {"id": 41, "status": "queued"}))
    server.on(
        "GET",
        "/api/v1/compactions/41/",
        Reply(200, {"id": 41, "status": "running"}),
        Reply(200, {"id": 41, "status": "succeeded", "summary": {"summary_id": "sum_9"}}),
    )
    job = hub.request_compaction("wf-1", source_revision=240)
    assert job.job_id == "41" and not job.finished
    assert server.requests[0].body == {"source_revision": 240}
    done = hub.wait_for_compaction(job.job_id, timeout=5, poll_interval=0.01)
    assert done.succeeded and done.summary_id == "sum_9"
    assert len(server.hits("GET", "/api/v1/compactions/41/")) == 2


def test_wait_for_compaction_times_out(server, hub):
    server.on("GET", "/api/v1/compactions/41/", Reply(200, {"job_id": "41", "status": "queued"}))
    with pytest.raises(CompactionTimeout) as caught:
        hub.wait_for_compaction("41", timeout=0.05, poll_interval=0.01)
    assert caught.value.last_status == "queued"


def test_failed_job_is_returned_not_raised(server, hub):
    server.on("GET", "/api/v1/compactions/41/", Reply(200, {"job_id": "41", "status": "FAILED"}))
    job = hub.wait_for_compaction("41", timeout=1)
    assert job.failed and job.finished and not job.succeeded


def test_decision_and_trigger_body(server, hub):
    server.on(
        "POST",
        "/api/v1/workflows/wf-1/trigger/",
        Reply(
            200,
            {
                "action": "compact",
                "strategy": "projected_next_step",
                "reasons": ["17000 + 4000 = 21000 > 18000"],
                "current_tokens": 17000,
                "expected_next_step_tokens": 4000,
                "projected_tokens": 21000,
                "safe_budget": 18000,
                "target_tokens": 8000,
                "decision_id": 5,
            },
        ),
    )
    decision = hub.trigger("wf-1", expected_next_step_tokens=4000, checkpoint_safe=True, remaining_steps=5)
    assert decision.should_compact and not decision.must_retrieve_or_block
    assert decision.projected_tokens == 21000 and decision.safe_budget == 18000
    assert server.requests[0].body == {
        "expected_next_step_tokens": 4000,
        "checkpoint_safe": True,
        "remaining_steps": 5,
    }


def test_workflow_ids_are_quoted_as_one_path_segment(server, hub):
    server.on("GET", "/api/v1/workflows/team%2Fthread%201/", Reply(200, {"external_id": "team/thread 1"}))
    assert hub.get_workflow("team/thread 1").external_id == "team/thread 1"


def test_record_artifact_body(server, hub):
    server.on(
        "POST", "/api/v1/workflows/wf-1/artifacts/", Reply(201, {"artifact_id": "T57", "kind": "test_suite"})
    )
    artifact = hub.record_artifact(
        "wf-1", artifact_id="T57", kind="test_suite", produced_by={"model_call_id": "c-1"}, quality_score=0.8
    )
    assert artifact.artifact_id == "T57"
    assert server.requests[0].body == {
        "artifact_id": "T57",
        "kind": "test_suite",
        "produced_by": {"model_call_id": "c-1"},
        "quality_score": 0.8,
    }


def test_prometheus_text_and_delete_without_body(server, hub):
    server.on(
        "GET",
        "/metrics",
        Reply(200, raw=b"memoryhub_tail_events 20\n", headers={"Content-Type": "text/plain"}),
    )
    server.on("DELETE", "/api/v1/channels/3/", Reply(204))
    assert "memoryhub_tail_events 20" in hub.prometheus_metrics()
    assert hub.delete_channel(3) is None
