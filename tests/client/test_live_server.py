"""The Python client against the real MemoryHub API over HTTP (pytest-django's live server).

Nothing of ours is mocked: the live server runs the real views and services on the test database.
The one stand-in is a forwarding proxy at the network edge that loses an answer on the way back,
to prove a retried append is not duplicated by the server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from memoryhub.client import (
    Conflict,
    MemoryHubClient,
    NotFound,
    PermissionDenied,
    TransportError,
    Unauthorized,
    ValidationFailed,
)
from memoryhub.models import Artifact, ConsumerTrace, Event

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hub(live_server, alice) -> Iterator[MemoryHubClient]:
    with MemoryHubClient(live_server.url, api_key=alice.key.secret, timeout=30, backoff=0.05) as client:
        yield client


def test_workflow_events_context_trace_and_artifact_round_trip(hub, live_server, carol):
    created = hub.create_workflow("live-1", name="live", graph_release="rel-1")
    assert created.head_seq == 0 and hub.create_workflow("live-1").external_id == "live-1"

    batch = [
        {"kind": "message", "role": "user", "content": f"event {i}", "agent": "tester"} for i in range(5)
    ]
    first = hub.append_events("live-1", batch)
    assert [e.seq for e in first.events] == [1, 2, 3, 4, 5]
    # Re-sending the very same ids (what a retry does) returns the original seqs, writes nothing.
    again = hub.append_events(
        "live-1",
        [{**e, "client_event_id": a.client_event_id} for e, a in zip(batch, first.events, strict=True)],
    )
    assert [e.seq for e in again.events] == [1, 2, 3, 4, 5] and again.head_seq == 5

    events = hub.list_events("live-1", limit=2)  # three pages through next_after
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert hub.list_events("live-1", after=2, until=4, limit=1)[-1].seq == 4

    context = hub.get_context("live-1", min_seq=first.head_seq)
    assert context.summary is None and [e.seq for e in context.tail] == [1, 2, 3, 4, 5]
    assert context.tokens.total == first.total_tokens and context.tail_to_seq == 5
    with pytest.raises(Conflict) as stale:
        hub.get_context("live-1", min_seq=6, stale_retries=0)
    assert stale.value.code == "stale_context" and stale.value.head_seq == 5

    decision = hub.trigger("live-1", expected_next_step_tokens=100, checkpoint_safe=True)
    assert decision.action == "continue" and decision.safe_budget == 18_000

    trace = hub.record_trace(
        "live-1",
        agent="tester",
        agent_run_id="run-1",
        model_call_id="call-1",
        summary_id=None,
        tail_to_seq=context.tail_to_seq,
        context_id=context.context_id,
        manifest_hash=context.manifest_hash,
        graph_release="rel-1",
        thread_id="thread-1",
        checkpoint_id="ckpt-1",
        input_tokens=context.tokens.total,
    )
    assert trace.flags == [] and trace.head_seq_at_read == 5
    same = hub.record_trace(
        "live-1",
        agent="tester",
        agent_run_id="run-1",
        model_call_id="call-1",
        summary_id=None,
        tail_to_seq=context.tail_to_seq,
        context_id=context.context_id,
        manifest_hash=context.manifest_hash,
    )
    assert same.trace_id == trace.trace_id

    artifact = hub.record_artifact(
        "live-1",
        artifact_id="T-live-1",
        kind="test_suite",
        produced_by={"model_call_id": "call-1"},
        quality_score=0.9,
    )
    assert artifact.produced_by[0]["model_call_id"] == "call-1" and artifact.quality_score == 0.9

    with pytest.raises(NotFound):
        hub.get_context("no-such-workflow")
    with pytest.raises(ValidationFailed) as bad:
        hub.append_events("live-1", [{"kind": "gossip", "content": "x"}])
    assert bad.value.code == "invalid_event"
    with MemoryHubClient(live_server.url, api_key="mh_bogus_key") as stranger, pytest.raises(Unauthorized):
        stranger.get_workflow("live-1")
    with MemoryHubClient(live_server.url, api_key=carol.key.secret) as viewer:
        assert viewer.get_context("live-1").head_seq == 5
        with pytest.raises(PermissionDenied):
            viewer.append_events("live-1", [{"kind": "note", "content": "viewers only read"}])


class LossyProxy:
    """Forwards to the live server; for the first ``drop`` POSTs to a path ending in ``suffix``,
    loses the answer after the server has committed (the client sees a dropped connection)."""

    def __init__(self, upstream: str, suffix: str, drop: int = 1) -> None:
        self.upstream = upstream
        self.drop = drop
        self.forwarded = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
                }
                answer = httpx.request(
                    self.command, proxy.upstream + self.path, headers=headers, content=body, timeout=30
                )
                proxy.forwarded += 1
                if self.command == "POST" and self.path.endswith(suffix) and proxy.drop > 0:
                    proxy.drop -= 1
                    self.close_connection = True
                    return  # committed upstream, answer lost
                self.send_response(answer.status_code)
                for key in ("Content-Type", "Retry-After"):
                    if key in answer.headers:
                        self.send_header(key, answer.headers[key])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = _forward

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_retried_append_whose_answer_was_lost_is_not_duplicated(live_server, alice, tenant):
    proxy = LossyProxy(live_server.url, "/events/", drop=2)
    try:
        with MemoryHubClient(proxy.url, api_key=alice.key.secret, backoff=0.01, timeout=30) as hub:
            hub.create_workflow("lossy")
            result = hub.append_events("lossy", [{"kind": "message", "content": f"m{i}"} for i in range(3)])
    finally:
        proxy.close()
    assert proxy.forwarded == 4  # create + three deliveries of the same batch
    assert [e.seq for e in result.events] == [1, 2, 3]
    assert Event.objects.filter(workflow__external_id="lossy").count() == 3


def test_example_graph_runs_offline_against_the_live_server(hub):
    from memoryhub.examples.example_graph import AGENTS, GRAPH_RELEASE, run_example

    run = run_example(hub, "api-tests-live", artifact_id="T57")

    artifact = run.artifact
    assert artifact["artifact_id"] == "T57" and artifact["kind"] == "test_suite"
    covered = {t["covers"] for t in artifact["suite"]["tests"]}
    assert {"req-401", "req-403", "req-create", "req-idem"} <= covered
    assert artifact["quality_score"] == 1.0
    assert artifact["suite"]["pending_approvals"] == ["approval-12"]
    publisher_call = run.state["model_calls"]["publisher"]
    assert [p["model_call_id"] for p in artifact["produced_by"]] == [publisher_call]

    traces = {t.agent: t for t in ConsumerTrace.objects.filter(workflow__external_id="api-tests-live")}
    assert sorted(traces) == sorted(AGENTS)
    history = list(run.graph.get_state_history({"configurable": {"thread_id": run.thread_id}}))
    checkpoint_before = {s.next[0]: s.config["configurable"]["checkpoint_id"] for s in history if s.next}
    for agent, trace in traces.items():
        assert trace.flags == [], (agent, trace.flags)
        assert trace.graph_release == GRAPH_RELEASE and trace.thread_id == "api-tests-live"
        assert trace.checkpoint_id == checkpoint_before[agent]
        assert trace.context_id and trace.manifest_hash
    # each agent read everything before it: spec + the replies of the agents before it
    assert [traces[a].tail_to_seq for a in AGENTS] == [1, 2, 3, 4]
    stored = hub.list_events("api-tests-live")
    assert [e.agent for e in stored] == ["requirements_agent", *AGENTS]
    assert stored[-1].kind == "artifact"
    assert {f["key"] for f in stored[1].facts} >= {"req-401", "payments:write", "approval-12"}


def test_a_publisher_that_crashed_after_publishing_resumes_without_duplicates(live_server, alice, tenant):
    from memoryhub.examples.example_graph import build_graph, initial_state

    proxy = LossyProxy(live_server.url, "/artifacts/", drop=1)
    config = {"configurable": {"thread_id": "crashy"}}
    try:
        # No retries: the lost answer surfaces as an error inside the publisher node.
        with MemoryHubClient(proxy.url, api_key=alice.key.secret, max_retries=0, timeout=30) as hub:
            hub.create_workflow("crashy")
            graph = build_graph(hub, "crashy", artifact_id="T58")
            with pytest.raises(TransportError):
                graph.invoke(initial_state("crashy"), config)
            assert graph.get_state(config).next == ("publisher",)
            counts = (Event.objects.count(), ConsumerTrace.objects.count(), Artifact.objects.count())
            assert counts == (4, 4, 1)  # trace and artifact committed; only the answer was lost

            final = graph.invoke(None, config)  # resume: the publisher re-runs from its checkpoint
    finally:
        proxy.close()
    assert final["artifact"]["artifact_id"] == "T58"
    assert (Event.objects.count(), ConsumerTrace.objects.count(), Artifact.objects.count()) == (5, 4, 1)
    publisher = ConsumerTrace.objects.get(agent="publisher")
    assert final["model_calls"]["publisher"] == publisher.model_call_id
    assert list(Artifact.objects.get(artifact_id="T58").produced_by.all()) == [publisher]
