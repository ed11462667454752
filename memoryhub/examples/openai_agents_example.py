"""A real OpenAI Agents SDK run on a MemoryHub session, with a local fake model and compactor.

Used by the tests and the demo (no network): :class:`ScriptedModelProvider` answers the agent's
model calls from a script (one tool call, then an answer, per user turn); ``responses.compact`` is
answered by :func:`compact_handler`, which the OpenAI client reaches over HTTP (a local server in
the tests, an in-process ``httpx2.MockTransport`` in the demo). Like OpenAI's endpoint it returns
the user messages followed by one encrypted ``compaction`` item, or (``readable=True``) a plain
text summary instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx2  # the HTTP library openai>=3 is built on
from agents import Agent, ModelResponse, ModelSettings, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.models.interface import Model, ModelProvider
from agents.usage import Usage
from openai import AsyncOpenAI
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

from memoryhub.client import MemoryHubClient
from memoryhub.integrations.openai_agents import MemoryHubSession, compaction_session

__all__ = ["ScriptedModel", "ScriptedModelProvider", "compact_handler", "local_openai_client", "run_example"]

ORDERS = {
    "A-1001": "shipped 2026-11-20 via DHL, tracking 00340434161234567890",
    "A-1002": "refund approved: 49.90 EUR, ticket RF-7781",
    "A-1003": "blocked: address check failed (code ADDR-422)",
    "A-1004": "delivered 2026-11-28, signed by J. Doe",
}


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up the status of one order."""
    return f"order {order_id}: {ORDERS.get(order_id, 'unknown order')}"


class ScriptedModel(Model):
    """Answers each user turn with one ``lookup_order`` call, then a sentence quoting the result."""

    def __init__(self) -> None:
        self.calls = 0

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kwargs: Any) -> ModelResponse:  # fmt: skip
        self.calls += 1
        items = [input] if isinstance(input, str) else list(input)
        last = items[-1] if items else {}
        last = last if isinstance(last, dict) else {"role": "user", "content": str(last)}
        if last.get("type") == "function_call_output":
            output: Any = ResponseOutputMessage(
                id=f"msg_{self.calls}",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(type="output_text", text=f"Status: {last['output']}.", annotations=[])
                ],
            )
        else:
            text = last.get("content") if isinstance(last.get("content"), str) else ""
            order = next((o for o in ORDERS if o in (text or "")), "A-1001")
            output = ResponseFunctionToolCall(
                id=f"fc_{self.calls}",
                type="function_call",
                call_id=f"call_{self.calls}",
                name="lookup_order",
                arguments=json.dumps({"order_id": order}),
                status="completed",
            )
        return ModelResponse(
            output=[output],
            usage=Usage(requests=1, input_tokens=50, output_tokens=10, total_tokens=60),
            response_id=f"resp_{self.calls}",
        )

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the scripted model does not stream")


class ScriptedModelProvider(ModelProvider):
    def __init__(self) -> None:
        self.model = ScriptedModel()

    def get_model(self, model_name: str | None) -> Model:
        return self.model


def compact_handler(body: dict[str, Any], *, readable: bool = False) -> dict[str, Any]:
    """The JSON ``POST /responses/compact`` answers for ``body`` (deterministic)."""
    items = body.get("input") or []
    users = [
        i
        for i in items
        if isinstance(i, dict) and i.get("role") == "user" and i.get("type", "message") == "message"
    ]
    digest = hashlib.sha256(json.dumps(items, sort_keys=True).encode()).digest()
    if readable:
        # A faithful readable summary: earlier summaries carried forward, each call with its result.
        outputs = {
            i.get("call_id"): str(i.get("output"))
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"
        }
        facts = [
            text.removeprefix("Summary: ")
            for i in items
            if isinstance(i, dict) and i.get("role") == "assistant"
            for text in [_text(i)]
            if text.startswith("Summary: ")
        ]
        facts += [
            f"{i.get('name')}({i.get('arguments')}) -> {outputs.get(i.get('call_id'), 'no result')}"
            for i in items
            if isinstance(i, dict) and i.get("type") == "function_call"
        ]
        output: list[dict[str, Any]] = [
            {
                "type": "message",
                "role": "assistant",
                "id": f"msg_cmp_{digest.hex()[:8]}",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "Summary: " + "; ".join(facts), "annotations": []}
                ],
            }
        ]
    else:
        output = [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": _text(u)}]}
            for u in users
        ]
        output.append(
            {
                "type": "compaction",
                "id": f"cmp_{digest.hex()[:8]}",
                "encrypted_content": "gAAAAA" + base64.b64encode(digest * 8).decode(),
            }
        )
    return {
        "id": f"resp_cmp_{digest.hex()[:8]}",
        "object": "response.compaction",
        "created_at": 1764547200,
        "output": output,
        "usage": {
            "input_tokens": 40 * len(items),
            "output_tokens": 64,
            "total_tokens": 40 * len(items) + 64,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict))


def local_openai_client(*, readable: bool = False) -> AsyncOpenAI:
    """An OpenAI client whose ``responses.compact`` is answered in process (no network)."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.endswith("/responses/compact"):
            return httpx2.Response(200, json=compact_handler(json.loads(request.content), readable=readable))
        return httpx2.Response(404, json={"error": {"message": f"unscripted {request.url.path}"}})

    return AsyncOpenAI(
        api_key="local-fake",
        base_url="http://openai.local/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
        max_retries=0,
    )


@dataclass
class ExampleRun:
    workflow: str
    session: MemoryHubSession
    answers: list[str] = field(default_factory=list)


async def run_example(
    client: MemoryHubClient,
    workflow: str,
    *,
    openai_client: AsyncOpenAI | None = None,
    questions: list[str] | None = None,
    compact_every: int = 6,
    deadline: float = 10.0,
    spool_dir: str | None = None,
) -> ExampleRun:
    """Ask one question per order; the compaction session compacts once ``compact_every`` items pile up."""
    set_tracing_disabled(True)  # no trace export: nothing leaves the machine
    session = MemoryHubSession(
        workflow,
        client=client,
        agent="support-agent",
        workflow_name="OpenAI Agents: order desk",
        # An agent keeps the 200 ms default; the example waits so every item is recorded as it runs.
        deadline=deadline,
        spool_dir=spool_dir or tempfile.mkdtemp(prefix="memoryhub-openai-agents-example-"),
    )
    wrapped = compaction_session(
        session,
        model="gpt-4.1",
        client=openai_client or local_openai_client(),
        compaction_mode="input",  # send the stored items: the local compactor has no server-side history
        should_trigger_compaction=lambda ctx: len(ctx["session_items"]) >= compact_every,
    )
    agent = Agent(name="order-desk", instructions="Answer order questions.", tools=[lookup_order],
                  model_settings=ModelSettings())  # fmt: skip
    config = RunConfig(model_provider=ScriptedModelProvider(), tracing_disabled=True)
    run = ExampleRun(workflow=workflow, session=session)
    for question in questions or [f"What is the status of order {o}?" for o in ORDERS]:
        result = await Runner.run(agent, question, session=wrapped, run_config=config)
        run.answers.append(str(result.final_output))
    return run
