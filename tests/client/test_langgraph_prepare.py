"""prepare_context's synchronous guard and the LangGraph id plumbing, against a scripted HTTP server.

The live-server run of the example graph is in tests/client/test_live_*.py; here the server side is
a small stateful script so that each guard branch (compaction late, failed, retrieve_or_block,
oversized) can be forced deterministically.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from memoryhub.client import ContextBudgetExceeded, MemoryHubClient
from memoryhub.examples.example_graph import (
    extract_requirements,
    generate_tests,
    publish_suite,
    review_security,
)
from memoryhub.integrations.langgraph import (
    RetrievalRequest,
    RetrievalResult,
    context_to_messages,
    message_to_events,
    prepare_context,
)

from .conftest import Recorded, Reply, ScriptedServer

WF = "/api/v1/workflows/wf-1"


class Backend:
    """Just enough server state to drive prepare_context: events, a trigger answer, jobs, context."""

    def __init__(self, server: ScriptedServer, *, action: str = "continue", safe_budget: int = 18000) -> None:
        self.events: list[dict[str, Any]] = []
        self.action = action
        self.safe_budget = safe_budget
        self.job_statuses = ["QUEUED", "RUNNING", "SUCCEEDED"]
        self.job_outcome = "activated"
        self.summary: dict[str, Any] | None = None
        server.on("POST", f"{WF}/events/", self.append)
        server.on(
            "GET", f"{WF}/", lambda r: Reply(200, {"external_id": "wf-1", "head_seq": len(self.events)})
        )
        server.on("POST", f"{WF}/trigger/", self.trigger)
        server.on(
            "POST",
            f"{WF}/compactions/",
            lambda r: Reply(202, {"job_id": "j-1", "status": "QUEUED", **r.body}),
        )
        server.on("GET", "/api/v1/compactions/j-1/", self.job)
        server.on("GET", f"{WF}/context/", self.context)
        server.on("POST", f"{WF}/traces/", lambda r: Reply(201, {"trace_id": 1, "flags": [], **r.body}))

    def append(self, request: Recorded) -> Reply:
        stored = []
        for event in request.body["events"]:
            known = [e for e in self.events if e["client_event_id"] == event["client_event_id"]]
            if not known:
                event = {**event, "seq": len(self.events) + 1, "token_count": len(event["content"]) // 4 + 1}
                self.events.append(event)
            stored.append(known[0] if known else event)
        return Reply(201, {"events": stored, "head_seq": len(self.events), "total_tokens": self.tokens})

    @property
    def tokens(self) -> int:
        return sum(e["token_count"] for e in self.events)

    def trigger(self, request: Recorded) -> Reply:
        expected = request.body["expected_next_step_tokens"]
        return Reply(
            200,
            {
                "action": self.action,
                "strategy": "projected_next_step",
                "reasons": [f"scripted {self.action}"],
                "current_tokens": self.tokens,
                "projected_tokens": self.tokens + expected,
                "safe_budget": self.safe_budget,
            },
        )

    def job(self, request: Recorded) -> Reply:
        status = self.job_statuses.pop(0) if len(self.job_statuses) > 1 else self.job_statuses[0]
        if status == "SUCCEEDED" and self.job_outcome == "activated":
            self.summary = {
                "summary_id": "sum_1",
                "version": 1,
                "status": "ACTIVE",
                "covers_to_seq": len(self.events),
                "content": {
                    "narrative": "Requirements for POST /payments were extracted.",
                    "facts": [
                        {
                            "key": "req-401",
                            "kind": "requirement",
                            "text": "401 when token missing",
                            "state": "open",
                            "source_seqs": [1],
                        }
                    ],
                    "open_items": ["approval-12 pending"],
                },
                "content_hash": "sha256:s1",
                "token_count": 30,
            }
        outcome = self.job_outcome if status == "SUCCEEDED" else ("failed" if status == "FAILED" else "")
        return Reply(200, {"job_id": "j-1", "status": status, "outcome": outcome})

    def context(self, request: Recorded) -> Reply:
        min_seq = int(request.query.get("min_seq", 0))
        if min_seq > len(self.events):
            return Reply(
                409, {"error": "stale_read", "detail": "head behind min_seq", "head_seq": len(self.events)}
            )
        watermark = self.summary["covers_to_seq"] if self.summary else 0
        tail = [e for e in self.events if e["seq"] > watermark]
        summary_tokens = self.summary["token_count"] if self.summary else 0
        tail_tokens = sum(e["token_count"] for e in tail)
        return Reply(
            200,
            {
                "summary": self.summary,
                "tail": tail,
                "head_seq": len(self.events),
                "tokens": {
                    "summary": summary_tokens,
                    "tail": tail_tokens,
                    "total": summary_tokens + tail_tokens,
                },
                "context_id": f"ctx-{len(self.events)}",
                "manifest_hash": f"sha256:m{len(self.events)}",
            },
        )


@pytest.fixture
def hub(server, sleeps):
    with MemoryHubClient(server.url, api_key="k", sleep=sleeps) as client:
        yield client


def _paths(server: ScriptedServer) -> list[str]:
    return [f"{r.method} {r.path}" for r in server.requests]


def test_continue_path_appends_reads_after_its_own_write_and_records_the_trace(server, hub):
    backend = Backend(server)
    prepared = prepare_context(
        hub,
        "wf-1",
        [
            ("user", "Write tests for POST /payments"),
            {"role": "assistant", "content": "On it", "name": "planner"},
        ],
        expected_next_step_tokens=500,
        agent="test_generator",
        graph_release="rel-1",
        thread_id="thread-9",
        checkpoint_id="cp-3",
    )
    assert _paths(server) == [f"POST {WF}/events/", f"POST {WF}/trigger/", f"GET {WF}/context/"]
    assert server.requests[2].query == {"min_seq": "2"}
    assert prepared.head_seq == 2 and prepared.fallback_reason is None
    assert [m["content"] for m in prepared.messages] == ["Write tests for POST /payments", "On it"]
    assert prepared.messages[1]["name"] == "planner"

    trace = prepared.trace.record(model_call_id="call-1")
    body = server.requests[-1].body
    assert trace.trace_id == 1
    assert body == {
        "agent": "test_generator",
        "agent_run_id": prepared.trace.agent_run_id,
        "model_call_id": "call-1",
        "summary_id": None,
        "tail_to_seq": 2,
        "context_id": "ctx-2",
        "manifest_hash": "sha256:m2",
        "graph_release": "rel-1",
        "checkpoint_id": "cp-3",
        "thread_id": "thread-9",
        "input_tokens": backend.tokens,
    }


def test_compact_path_requests_the_job_for_the_head_it_wrote_and_waits(server, hub):
    backend = Backend(server, action="compact")
    prepared = prepare_context(
        hub, "wf-1", [("user", "x" * 400)], expected_next_step_tokens=100, agent="a", poll_interval=0.01
    )
    assert server.hits("POST", f"{WF}/compactions/")[0].body == {"source_revision": 1}
    assert len(server.hits("GET", "/api/v1/compactions/j-1/")) == 3
    assert prepared.job is not None and prepared.job.succeeded
    # the fresh summary is what the model gets, with its structured facts beside the narrative
    assert prepared.messages[0]["role"] == "system"
    assert "[requirement] req-401: 401 when token missing (open)" in prepared.messages[0]["content"]
    assert "approval-12 pending" in prepared.messages[0]["content"]
    assert prepared.trace.summary_id == "sum_1" and prepared.trace.tail_to_seq == 1
    assert backend.summary is not None


def test_compaction_not_finished_in_time_stops_with_an_explicit_error(server, hub):
    backend = Backend(server, action="compact")
    backend.job_statuses = ["RUNNING"]
    with pytest.raises(ContextBudgetExceeded) as caught:
        prepare_context(
            hub,
            "wf-1",
            [("user", "hello")],
            expected_next_step_tokens=100,
            agent="a",
            compaction_timeout=0.05,
            poll_interval=0.01,
        )
    assert "not finished within" in str(caught.value)
    assert caught.value.decision.action == "compact"
    assert server.hits("POST", f"{WF}/traces/") == []


def test_failed_compaction_is_blocking_too(server, hub):
    backend = Backend(server, action="compact")
    backend.job_statuses = ["FAILED"]
    with pytest.raises(ContextBudgetExceeded, match="ended FAILED"):
        prepare_context(hub, "wf-1", [("user", "hello")], expected_next_step_tokens=100, agent="a")


def test_a_compaction_whose_summary_was_not_activated_is_blocking(server, hub):
    backend = Backend(server, action="compact")
    backend.job_statuses = ["SUCCEEDED"]
    backend.job_outcome = "rejected"  # the validator refused the candidate: nothing new to read
    with pytest.raises(ContextBudgetExceeded, match=r"ended SUCCEEDED \(rejected\)"):
        prepare_context(hub, "wf-1", [("user", "hello")], expected_next_step_tokens=100, agent="a")
    assert backend.summary is None


def test_late_compaction_can_be_tolerated_when_the_old_context_still_fits(server, hub):
    backend = Backend(server, action="compact")
    backend.job_statuses = ["RUNNING"]
    prepared = prepare_context(
        hub,
        "wf-1",
        [("user", "hello")],
        expected_next_step_tokens=100,
        agent="a",
        compaction_timeout=0.05,
        poll_interval=0.01,
        require_compaction=False,
    )
    assert prepared.fallback_reason is None
    assert any("not finished within" in note for note in prepared.notes)


def test_retrieve_or_block_uses_targeted_retrieval_and_the_trace_says_so(server, hub):
    Backend(server, action="retrieve_or_block", safe_budget=1000)
    seen: list[RetrievalRequest] = []

    def retrieve(request: RetrievalRequest) -> RetrievalResult:
        seen.append(request)
        last = request.context.tail[-1]
        return RetrievalResult(
            messages=[{"role": "user", "content": last.content}],
            input_tokens=last.token_count,
            tail_to_seq=0,  # honest: the contiguous tail was not consumed
            source_refs=[f"event:{last.seq}"],
        )

    prepared = prepare_context(
        hub,
        "wf-1",
        [("user", "a"), ("user", "b")],
        expected_next_step_tokens=300,
        agent="a",
        retrieve=retrieve,
    )
    assert seen[0].budget_tokens == 700
    assert "retrieve_or_block" in seen[0].reason
    assert prepared.messages == [{"role": "user", "content": "b"}]
    prepared.trace.record(model_call_id="call-2")
    body = server.hits("POST", f"{WF}/traces/")[0].body
    assert body["tail_to_seq"] == 0 and body["source_refs"] == ["event:2"]
    assert body["fallback_retrieval"] is True and "retrieve_or_block" in body["fallback_reason"]


def test_retrieve_or_block_without_a_fallback_raises(server, hub):
    Backend(server, action="retrieve_or_block")
    with pytest.raises(ContextBudgetExceeded, match="retrieve_or_block"):
        prepare_context(hub, "wf-1", [("user", "a")], expected_next_step_tokens=300, agent="a")


def test_an_oversized_context_is_never_sent_even_when_the_trigger_said_continue(server, hub):
    Backend(server, action="continue", safe_budget=50)
    with pytest.raises(ContextBudgetExceeded) as caught:
        prepare_context(hub, "wf-1", [("user", "y" * 200)], expected_next_step_tokens=20, agent="a")
    assert caught.value.safe_budget == 50
    assert caught.value.projected_tokens == 51 + 20


def test_a_fallback_that_does_not_fit_raises(server, hub):
    Backend(server, action="retrieve_or_block", safe_budget=100)

    def greedy(request: RetrievalRequest) -> RetrievalResult:
        return RetrievalResult(messages=[], input_tokens=request.budget_tokens + 1, tail_to_seq=0)

    with pytest.raises(ContextBudgetExceeded, match="only 80 fit"):
        prepare_context(
            hub, "wf-1", [("user", "a")], expected_next_step_tokens=20, agent="a", retrieve=greedy
        )


def test_messages_with_ids_give_stable_client_event_ids_so_reruns_do_not_duplicate(server, hub):
    backend = Backend(server)
    message = {"role": "user", "content": "spec", "id": "m-1"}
    first = prepare_context(hub, "wf-1", [message], expected_next_step_tokens=10, agent="a")
    again = prepare_context(hub, "wf-1", [message], expected_next_step_tokens=10, agent="a")
    assert len(backend.events) == 1
    assert first.head_seq == again.head_seq == 1


def test_message_to_events_covers_tool_calls_results_and_structured_facts():
    from langchain_core.messages import AIMessage, ToolMessage

    call = AIMessage(
        content="checking the spec",
        id="ai-1",
        name="requirements_agent",
        tool_calls=[{"id": "call-7", "name": "fetch_spec", "args": {"version": "v7"}}],
        additional_kwargs={
            "facts": [{"key": "spec-v7", "kind": "source_version", "text": "spec", "state": "info"}]
        },
    )
    events = message_to_events(call, workflow_id="wf-1", agent="fallback")
    assert [(e["kind"], e["role"], e["agent"]) for e in events] == [
        ("message", "assistant", "requirements_agent"),
        ("tool_call", "assistant", "requirements_agent"),
    ]
    assert events[0]["facts"][0]["key"] == "spec-v7"
    assert events[1]["tool_call_id"] == "call-7" and '"fetch_spec"' in events[1]["content"]
    assert events == message_to_events(call, workflow_id="wf-1", agent="fallback")  # deterministic
    assert (
        events[0]["client_event_id"]
        != message_to_events(call, workflow_id="wf-2", agent="x")[0]["client_event_id"]
    )

    result = message_to_events(
        ToolMessage(content="{...}", tool_call_id="call-7", id="t-1"), workflow_id="wf-1", agent="a"
    )
    assert result[0]["kind"] == "tool_result" and result[0]["tool_call_id"] == "call-7"

    passthrough = {"kind": "approval", "content": "approval-12 pending", "side_effect": "pending"}
    assert message_to_events(passthrough, workflow_id="wf-1", agent="a") == [{**passthrough, "agent": "a"}]
    assert "client_event_id" not in message_to_events(("user", "no id"), workflow_id="wf-1", agent="a")[0]


def test_context_to_messages_keeps_every_tail_event_in_order():
    from memoryhub.client import Context

    context = Context.from_dict(
        {
            "summary": None,
            "tail": [
                {"seq": 1, "kind": "message", "role": "user", "content": "spec", "agent": ""},
                {
                    "seq": 2,
                    "kind": "tool_call",
                    "role": "assistant",
                    "content": "{}",
                    "tool_call_id": "c1",
                    "agent": "a",
                },
                {
                    "seq": 3,
                    "kind": "tool_result",
                    "role": "tool",
                    "content": "ok",
                    "tool_call_id": "c1",
                    "agent": "a",
                },
                {
                    "seq": 4,
                    "kind": "message",
                    "role": "assistant",
                    "content": "done",
                    "agent": "b",
                    "facts": [{"key": "T51", "kind": "test", "text": "req-401", "state": "passed"}],
                },
            ],
            "head_seq": 4,
            "tokens": {"summary": 0, "tail": 10, "total": 10},
        }
    )
    messages = context_to_messages(context)
    assert [m["seq"] for m in messages] == [1, 2, 3, 4]
    assert messages[1]["content"].startswith("[tool call c1]") and messages[2]["content"].startswith(
        "[tool result c1]"
    )
    assert messages[3]["content"] == "done"  # facts are annotations: only counted content is sent
    assert context.tail_to_seq == 4


class _State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def test_inside_a_langgraph_node_thread_and_checkpoint_ids_are_recorded(server, hub):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    Backend(server)

    def agent(state: _State) -> dict[str, Any]:
        prepared = prepare_context(
            hub, "wf-1", [("user", "go")], expected_next_step_tokens=10, agent="agent", graph_release="rel-2"
        )
        prepared.trace.record()
        return {"log": [prepared.trace.model_call_id]}

    builder = StateGraph(_State)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "thread-42"}}
    graph.invoke({"log": []}, config)

    body = server.hits("POST", f"{WF}/traces/")[0].body
    history = list(graph.get_state_history(config))
    before_agent = [s.config["configurable"]["checkpoint_id"] for s in history if s.next == ("agent",)]
    assert body["thread_id"] == "thread-42"
    assert body["checkpoint_id"] == before_agent[0]  # restoring this checkpoint re-runs the node
    assert body["graph_release"] == "rel-2"
    assert graph.get_state(config).values["log"] == [body["model_call_id"]]


def test_example_agents_only_know_what_their_context_shows():
    reqs = extract_requirements(
        "REQ req-401: a missing token returns 401 Unauthorized\nSCOPE payments:write: needed to create payments"
    )
    keys = {(f["kind"], f["key"]) for f in reqs["facts"]}
    assert keys == {("requirement", "req-401"), ("scope", "payments:write")}

    with_401 = "- [requirement] req-create: returns 201 (open)\n- [requirement] req-401: returns 401 Unauthorized (open)"
    without_401 = "- [requirement] req-create: returns 201 (open)"
    assert [f["key"] for f in generate_tests(with_401)["facts"]] == ["T50", "T51"]
    tests_without = generate_tests(without_401)["facts"]
    assert all("req-401" not in f["text"] for f in tests_without)

    review = review_security(with_401 + "\n- [test] T50: req-create: returns 201 (passed)")
    assert {f["key"] for f in review["facts"]} == {"missing-test-req-401", "review-19"}

    published = publish_suite(
        with_401 + "\n- [test] T50: req-create: returns 201 (passed)", artifact_id="T57"
    )
    assert published["artifact"]["quality_score"] == 0.5
    assert [t["id"] for t in published["artifact"]["suite"]["tests"]] == ["T50"]
