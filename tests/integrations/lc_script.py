"""A scripted LangChain agent run with fake models (no network), shared by the parity tests and the bench.

``run_script`` drives ``create_agent`` for a number of turns with one summarization middleware
and returns what the agent's model was handed at every call, so two middlewares can be compared
call by call.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field


@tool
def lookup(order: str) -> str:
    """Look an order up."""
    return f"order {order}: shipped on day {len(order)}, carrier ACME, 3 parcels, signed by R. Diaz. " * 2


class ScriptedModel(BaseChatModel):
    """Answers by a script: every third call asks for the lookup tool first. Records its inputs."""

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
        n = len(self.calls)
        last = messages[-1]
        if n % 3 == 0 and last.type == "human":
            reply = AIMessage(
                content="", tool_calls=[{"name": "lookup", "args": {"order": f"A{n}"}, "id": f"call-{n}"}]
            )
        else:
            reply = AIMessage(content=f"Answer {n}: noted, the order history is consistent so far. " * 3)
        return ChatResult(generations=[ChatGeneration(message=reply)])


class FakeSummarizer(BaseChatModel):
    """A deterministic summarizer: names how many messages and which turns it saw."""

    model_name: str = "fake-summarizer"
    seen: list[int] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-summarizer"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = str(messages[-1].content)
        turns = sorted({w for w in prompt.split() if w.startswith("T") and w[1:].rstrip(":").isdigit()})
        self.seen.append(len(prompt))
        text = f"Summary of {len(prompt)} chars; turns {', '.join(turns)}."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def user_turn(i: int) -> str:
    return f"T{i}: please check order A{i} and tell me whether the refund of {i * 7} EUR is due. " * 3


@dataclass
class ScriptRun:
    calls: list[list[tuple[str, str]]]
    compactions: int
    final: list[BaseMessage]


def run_script(
    middleware: Any,
    model: ScriptedModel,
    summarizer: FakeSummarizer,
    turns: int = 12,
    *,
    thread: str = "t-1",
    use_async: bool = False,
) -> ScriptRun:
    agent = create_agent(model, [lookup], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}}
    state: dict[str, Any] = {}

    async def arun() -> dict[str, Any]:
        result: dict[str, Any] = {}
        for i in range(1, turns + 1):
            result = await agent.ainvoke({"messages": [HumanMessage(user_turn(i))]}, config)
        return result

    if use_async:
        state = asyncio.run(arun())
    else:
        for i in range(1, turns + 1):
            state = agent.invoke({"messages": [HumanMessage(user_turn(i))]}, config)
    return ScriptRun(calls=model.calls, compactions=len(summarizer.seen), final=list(state["messages"]))
