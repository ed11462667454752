"""Close the loop (issue #32) with LangChain: what the summarizer dropped comes back before the
model reads the summary. A real ``create_agent`` graph, a live MemoryHub, fake models only."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from memoryhub.client.resilience import HubConfig, ResilientHub
from memoryhub.core.actors import Actor
from memoryhub.examples.repair_scenario import (
    CONSTRAINT,
    LOSSY_SUMMARY,
    MUST_RETURN,
    ORDER_ID,
    REQUIREMENT,
    TRACKING_ID,
    TURNS,
)
from memoryhub.integrations.langchain import SUMMARY_KEY, MemoryHubSummarizationMiddleware
from memoryhub.memory.repair import HEADER
from memoryhub.models import CompactionJob, Workflow
from triggers.services import save_policy

pytestmark = pytest.mark.django_db(transaction=True)

USER_TURNS = [text for role, text in TURNS if role == "user"] + [
    "Next, please draft the summary email.",
    "Also list the open questions.",
]
ARGS = {"trigger": ("messages", 11), "keep": ("messages", 2)}


class Agent(BaseChatModel):
    """The agent's model: answers briefly and records every input it was handed."""

    calls: list[list[tuple[str, str]]] = Field(default_factory=list)
    model_name: str = "scripted-agent"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.calls.append([(m.type, str(m.content)) for m in messages])
        reply = AIMessage(content=f"Reply {len(self.calls)}.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class LossySummarizer(BaseChatModel):
    """Keeps the topic, drops the requirement, the constraint and both identifiers."""

    text: str = LOSSY_SUMMARY
    prompts: list[str] = Field(default_factory=list)
    model_name: str = "lossy-summarizer"

    @property
    def _llm_type(self) -> str:
        return "lossy"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.prompts.append(str(messages[-1].content))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.text))])


def run(
    middleware: Any, agent_model: Agent, *, use_async: bool = False, thread: str = "rep-lc", between=None
):
    agent = create_agent(agent_model, [], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}}

    async def arun() -> dict[str, Any]:
        state: dict[str, Any] = {}
        for text in USER_TURNS:
            state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
        return state

    if use_async:
        return asyncio.run(arun())
    state: dict[str, Any] = {}
    for text in USER_TURNS:
        state = agent.invoke({"messages": [HumanMessage(text)]}, config)
        if between is not None:
            between()
    return state


def hub_for(url: str, key: str, tmp_path) -> ResilientHub:
    return ResilientHub(
        HubConfig(url=url, api_key=key, spool_dir=tmp_path / "spool", deadline=5.0), component="langchain"
    )


def first_call_after_compaction(calls: list[list[tuple[str, str]]]) -> list[tuple[str, str]]:
    return next(c for c in calls if c and c[0][1].startswith("Here is a summary"))


_MADE: list[MemoryHubSummarizationMiddleware] = []


@pytest.fixture(autouse=True)
def _drained():
    """Every middleware a test made has delivered its queued records before the test's database is
    flushed: a background write still running then deadlocks PostgreSQL's TRUNCATE."""
    yield
    while _MADE:
        _MADE.pop().flush(timeout=30)


def ours(hub, summarizer=None, **kw):
    summarizer = summarizer or LossySummarizer()
    middleware = MemoryHubSummarizationMiddleware(summarizer, hub=hub, **{**ARGS, **kw})
    _MADE.append(middleware)
    return middleware, summarizer


def test_natively_the_next_model_call_has_lost_all_four():
    model, summarizer = Agent(), LossySummarizer()
    run(SummarizationMiddleware(summarizer, **ARGS), model)
    seen = "\n".join(text for _, text in first_call_after_compaction(model.calls))
    assert LOSSY_SUMMARY in seen
    assert not any(value in seen for value in MUST_RETURN)


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_the_next_model_call_sees_the_requirement_constraint_and_both_identifiers(
    live_server, alice, tmp_path, use_async
):
    hub = hub_for(live_server.url, alice.key.secret, tmp_path)
    middleware, summarizer = ours(hub)
    model = Agent()
    state = run(middleware, model, use_async=use_async)
    assert summarizer.prompts, "the summarizer ran"
    call = first_call_after_compaction(model.calls)
    summary_message = call[0][1]
    assert LOSSY_SUMMARY in summary_message and HEADER in summary_message
    for value in MUST_RETURN:  # all four, in the very context the model was handed
        assert value in summary_message, value
    # Each handed-back line names its source seq; the obligations come before the identifiers.
    block = summary_message.split(HEADER, 1)[1]
    assert block.index(REQUIREMENT) < block.index(ORDER_ID)
    assert block.index(CONSTRAINT) < block.index(TRACKING_ID)
    assert "[seq 1]" not in block and "[seq 3]" in block  # seq 1 is the greeting, 3 the requirement
    # The state keeps the repaired summary (later calls read it too) and says what was done.
    note = next(m for m in state["messages"] if SUMMARY_KEY in m.additional_kwargs)
    meta = note.additional_kwargs[SUMMARY_KEY]
    assert meta["repair"]["verdict"] == "repaired" and meta["repair"]["handed_back"] >= 3
    assert middleware.last_repair["verdict"] == "repaired"
    assert middleware.flush(timeout=30)
    # The server recorded the framework's own summary, the verdict and what was handed back.
    job = CompactionJob.objects.get(workflow__external_id="rep-lc", idempotency_key__startswith="observed/")
    stored = job.attempts[0]["repair"]
    assert stored["verdict"] == "repaired" and stored["needed"]
    assert {h["kind"] for h in stored["handed_back"]} == {"obligation", "unit"}
    assert job.summary.content.count(LOSSY_SUMMARY) == 1 and ORDER_ID not in job.summary.content


def test_with_repair_the_calls_differ_from_langchain_only_by_the_handed_back_block(
    live_server, alice, tmp_path
):
    native_model = Agent()
    run(SummarizationMiddleware(LossySummarizer(), **ARGS), native_model)
    model = Agent()
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path))
    run(middleware, model)

    def strip(calls):
        return [[(t, c.split("\n\n" + HEADER)[0]) for t, c in call] for call in calls]

    assert strip(model.calls) == native_model.calls
    assert model.calls != native_model.calls


def test_an_empty_summary_is_repaired_with_the_tail_it_replaced(live_server, alice, tmp_path):
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path), LossySummarizer(text=""))
    model = Agent()
    run(middleware, model, thread="rep-empty")
    summary_message = first_call_after_compaction(model.calls)[0][1]
    for value in MUST_RETURN:
        assert value in summary_message
    assert middleware.last_repair["empty_summary"] is True
    assert "empty or unreadable" in middleware.last_repair["note"]


def test_gate_block_keeps_the_messages_langchain_would_have_dropped(live_server, alice, tmp_path):
    save_policy(alice.tenant, {"repair": {"gate": "block"}}, Actor.system("test"), partial=True)
    middleware, summarizer = ours(hub_for(live_server.url, alice.key.secret, tmp_path))
    model = Agent()
    state = run(middleware, model, thread="rep-block")
    assert summarizer.prompts  # it did summarize ...
    assert not any(c[0][1].startswith("Here is a summary") for c in model.calls)  # ... and was refused
    last = "\n".join(text for _, text in model.calls[-1])
    for text in (REQUIREMENT, CONSTRAINT, ORDER_ID, TRACKING_ID):
        assert text in last  # the original messages, verbatim
    assert [m.content for m in state["messages"] if m.type == "human"] == USER_TURNS
    assert middleware.last_repair["verdict"] == "blocked"
    assert middleware.flush(timeout=30)
    jobs = CompactionJob.objects.filter(workflow__external_id="rep-block")
    assert jobs.exists() and {j.outcome for j in jobs} == {"blocked"}  # each refusal recorded
    assert Workflow.objects.get(external_id="rep-block").active_summary_id is None


def test_gate_observe_records_the_loss_and_changes_nothing(live_server, alice, tmp_path):
    save_policy(alice.tenant, {"repair": {"gate": "observe"}}, Actor.system("test"), partial=True)
    native_model = Agent()
    run(SummarizationMiddleware(LossySummarizer(), **ARGS), native_model)
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path))
    model = Agent()
    run(middleware, model, thread="rep-observe")
    assert model.calls == native_model.calls
    assert middleware.last_repair["verdict"] == "observed" and middleware.last_repair["lost"]["units"] >= 2


def test_repair_false_is_langchain_exactly_and_never_waits(live_server, alice, tmp_path):
    native_model = Agent()
    run(SummarizationMiddleware(LossySummarizer(), **ARGS), native_model)
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path), repair=False)
    model = Agent()
    run(middleware, model, thread="rep-off")
    assert model.calls == native_model.calls and middleware.last_step is None


def test_memoryhub_down_is_langchain_native_with_one_warning(tmp_path, caplog):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()
    native_model = Agent()
    run(SummarizationMiddleware(LossySummarizer(), **ARGS), native_model)
    middleware, _ = ours(hub_for(url, "mh_x", tmp_path))
    _MADE.remove(middleware)  # nothing to drain into: its records stay spooled
    model = Agent()
    run(middleware, model, thread="rep-down")
    assert model.calls == native_model.calls
    warnings = [  # this hub's (an earlier test's background sender may still be logging)
        r
        for r in caplog.records
        if r.name == "memoryhub.client.resilience" and r.levelname == "WARNING" and url in r.getMessage()
    ]
    assert len(warnings) == 1


class LearningSummarizer(LossySummarizer):
    """Lossy at first; told what it lost, it keeps everything (a summarizer that listens)."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        prompt = str(messages[-1].content)
        self.prompts.append(prompt)
        if "left out the following" in prompt:
            text = LOSSY_SUMMARY + " " + " ".join(USER_TURNS)
        else:
            text = LOSSY_SUMMARY
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_resummarize_policy_keeps_the_second_summary_when_it_lost_less(
    live_server, alice, tmp_path, use_async
):
    save_policy(alice.tenant, {"repair": {"resummarize": True}}, Actor.system("test"), partial=True)
    summarizer = LearningSummarizer()
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path), summarizer)
    model = Agent()
    run(middleware, model, use_async=use_async, thread="rep-resum")
    assert len(summarizer.prompts) == 2 and ORDER_ID in summarizer.prompts[1]  # told what it lost
    summary_message = first_call_after_compaction(model.calls)[0][1]
    assert all(value in summary_message for value in MUST_RETURN)
    assert HEADER not in summary_message  # the second summary kept everything: nothing to hand back
    assert middleware.last_repair["verdict"] == "kept"
    assert middleware.flush(timeout=30)
    (job,) = CompactionJob.objects.filter(workflow__external_id="rep-resum")  # only the one used
    assert "kept the second" in job.attempts[0]["compactor_settings"]["repair_resummarized"]
    assert ORDER_ID in job.summary.content


def test_resummarize_keeps_the_first_when_the_second_is_no_better(live_server, alice, tmp_path):
    save_policy(alice.tenant, {"repair": {"resummarize": True}}, Actor.system("test"), partial=True)
    summarizer = LossySummarizer()
    middleware, _ = ours(hub_for(live_server.url, alice.key.secret, tmp_path), summarizer)
    model = Agent()
    run(middleware, model, thread="rep-resum-2")
    assert len(summarizer.prompts) == 2
    summary_message = first_call_after_compaction(model.calls)[0][1]
    assert HEADER in summary_message and all(value in summary_message for value in MUST_RETURN)
    assert middleware.flush(timeout=30)
    (job,) = CompactionJob.objects.filter(workflow__external_id="rep-resum-2")
    assert "kept the first" in job.attempts[0]["compactor_settings"]["repair_resummarized"]


POLICY_MODE = {  # the workflow policy decides (trigger=None): compact once the tail holds 10 messages
    "context_window": 2700,
    "reserve_system": 400,
    "reserve_retrieval": 0,
    "reserve_output": 500,
    "safety_margin": 400,
    "target_tokens": 60,
    "min_new_tokens": 0,
    "min_interval_seconds": 0,
    "strategies": {
        "cost_benefit": {"compaction_cost_tokens": 0},
        "message_count": {"enabled": True, "messages": 10},
    },
}


def test_policy_mode_repairs_from_the_answer_of_the_step_that_records_it(live_server, alice, tmp_path):
    save_policy(alice.tenant, POLICY_MODE, Actor.system("test"))
    hub = hub_for(live_server.url, alice.key.secret, tmp_path)
    middleware = MemoryHubSummarizationMiddleware(
        LossySummarizer(), hub=hub, trigger=None, keep=("messages", 2), repair_deadline=5.0
    )
    model = Agent()
    # A scripted agent answers at once: each turn's queued messages reach MemoryHub before the
    # next turn's live decision (a live call never overtakes queued ones).
    run(middleware, model, thread="rep-policy", between=lambda: middleware.flush(timeout=30))
    summary_message = first_call_after_compaction(model.calls)[0][1]
    assert HEADER in summary_message and all(value in summary_message for value in MUST_RETURN)
    assert middleware.last_repair["verdict"] == "repaired"
