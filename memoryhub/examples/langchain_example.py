"""A real LangChain ``create_agent`` run under MemoryHub's middleware, with local fake models.

Used by the tests and the demo (no network): a scripted agent model reads one test log per turn
through a tool, the history outgrows a small budget, the middleware compacts (LangChain's own
summarizer, here a deterministic fake chat model) and records every summary in MemoryHub; the
final answer is recorded as an artifact whose lineage reaches back to the tool results.

    python -m memoryhub.examples.langchain_example lc-demo   # MEMORYHUB_URL / MEMORYHUB_API_KEY
"""

from __future__ import annotations

import re
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from memoryhub.client import MemoryHubClient
from memoryhub.client.resilience import ResilientHub
from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware

__all__ = ["EXAMPLE_POLICY", "ExampleRun", "ScriptedAgentModel", "ExtractiveSummarizer", "run_example"]

# A tight budget so a dozen tool results force several compactions: safe budget 1,400 tokens.
EXAMPLE_POLICY: dict[str, Any] = {
    "context_window": 2700,
    "reserve_system": 400,
    "reserve_retrieval": 0,
    "reserve_output": 500,
    "safety_margin": 400,
    "target_tokens": 900,
    "min_new_tokens": 0,
    "min_interval_seconds": 0,
    "strategies": {"cost_benefit": {"compaction_cost_tokens": 0}},
}
FAILING = {3: "401 Unauthorized", 7: "409 Conflict", 11: "500 Internal Server Error"}
# The prompt wraps each message in <message> tags: a status line ends before the next tag.
_RESULT = re.compile(r"^(T\d+)(?: \((req-\d+)\))?: (POST /payments returned [^<\n]+)", re.M)
_REQUEST = re.compile(r"log of (T\d+) \(request (req-\d+)\)")


def ci_log(n: int) -> str:
    """A deterministic, long-ish CI log for test T<n> (its status line is what matters)."""
    status = FAILING.get(n, "201 Created")
    noise = "\n".join(
        f"[{n:02d}.{i:02d}] step {i}: request prepared, headers signed, retry budget {3 - i % 3} left"
        for i in range(12)
    )
    return f"log of T{n} (request req-{n:04d})\n{noise}\nT{n}: POST /payments returned {status}"


@tool
def fetch_test_log(test_id: str) -> str:
    """Fetch the CI log of one API test (e.g. T3)."""
    return ci_log(int(test_id.lstrip("T")))


class ScriptedAgentModel(GenericFakeChatModel):
    """LangChain's fake chat model, able to be bound to tools (the script already names them)."""

    model_name: str = "scripted-agent-1"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


class ExtractiveSummarizer(BaseChatModel):
    """A deterministic stand-in for an LLM summarizer: keeps every test status line it is shown."""

    model_name: str = "extractive-summarizer-1"

    @property
    def _llm_type(self) -> str:
        return "extractive-summarizer"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        found = _RESULT.findall(prompt)  # from the logs, and from an earlier summary's lines
        lines = sorted({(t, s) for t, _, s in found}, key=lambda r: int(r[0][1:]))
        requests = dict(_REQUEST.findall(prompt)) | {t: r for t, r, _ in found if r}
        if not lines:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="## SUMMARY\nNone"))])
        # Like a careful summarizer, it keeps the identifiers a later step may need (tool, ids).
        text = "## SUMMARY\nLogs read with fetch_test_log(test_id):\n" + "\n".join(
            f"{t} ({requests[t]}): {s}" if t in requests else f"{t}: {s}" for t, s in lines
        )
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def script(tests: int) -> list[AIMessage]:
    turns = [
        AIMessage(
            content="",
            tool_calls=[{"name": "fetch_test_log", "args": {"test_id": f"T{n}"}, "id": f"call-T{n}"}],
        )
        for n in range(1, tests + 1)
    ]
    failing = ", ".join(f"T{n} ({FAILING[n]})" for n in sorted(FAILING) if n <= tests)
    turns.append(AIMessage(content=f"Report: {tests} tests read; failing: {failing or 'none'}."))
    return turns


@dataclass
class ExampleRun:
    workflow: str
    messages: list[BaseMessage]
    middleware: MemoryHubSummarizationMiddleware
    artifact: dict[str, Any] = field(default_factory=dict)


def run_example(
    client: MemoryHubClient,
    workflow: str,
    *,
    tests: int = 12,
    artifact_id: str | None = "LC-REPORT-1",
    policy: dict[str, Any] | None = None,
    trigger: Any = None,
    keep: tuple[str, int] = ("messages", 4),
    deadline: float = 30.0,
    spool_dir: str | None = None,
) -> ExampleRun:
    """Run the agent on a fresh workflow; record the final answer as an artifact.

    ``trigger=None`` lets the workflow's policy (``policy``, default EXAMPLE_POLICY) decide; a
    LangChain trigger (``("tokens", 1400)``) is evaluated as LangChain does. The example waits up
    to ``deadline`` per call (an agent would keep the 200 ms default) and delivers everything
    before it records the artifact.
    """
    client.create_workflow(workflow, name="LangChain agent: payments test logs", source="langchain")
    client.put_policy(workflow, policy or EXAMPLE_POLICY)
    model = ScriptedAgentModel(messages=iter(script(tests)))
    hub = ResilientHub(
        client=client,
        component="langchain-example",
        deadline=deadline,
        spool_dir=spool_dir or tempfile.mkdtemp(prefix="memoryhub-langchain-example-"),
    )
    middleware = MemoryHubSummarizationMiddleware(
        model,
        hub=hub,
        trigger=trigger,
        agent="log-reader",
        summarizer=ExtractiveSummarizer(),
        keep=keep,
        expected_next_step_tokens=150,
        graph_release="lc-example-1",
    )
    agent = create_agent(model, [fetch_test_log], middleware=[middleware])
    state = agent.invoke(
        {"messages": [HumanMessage(f"Read the logs of T1..T{tests} and report the failing tests.")]},
        {"configurable": {"thread_id": workflow}, "recursion_limit": 4 * tests + 10},
    )
    if not middleware.flush(timeout=60):
        raise RuntimeError(f"MemoryHub did not take the run's records: {hub.status()}")
    hub.close()
    run = ExampleRun(workflow=workflow, messages=state["messages"], middleware=middleware)
    if artifact_id and middleware.last_model_call_id:
        run.artifact = client.record_artifact(
            workflow,
            artifact_id=artifact_id,
            kind="report",
            produced_by={"model_call_id": middleware.last_model_call_id},
        ).raw
    return run


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    with MemoryHubClient.from_env() as client:
        run = run_example(client, args[0] if args else "lc-example")
    print(run.messages[-1].content)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
