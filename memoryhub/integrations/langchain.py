"""LangChain v1 agent middleware backed by MemoryHub (a drop-in for ``SummarizationMiddleware``).

::

    from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware

    agent = create_agent(model, tools, middleware=[
        MemoryHubSummarizationMiddleware(model="openai:gpt-4.1-mini", keep=("messages", 20)),
    ])

It subclasses LangChain's ``SummarizationMiddleware`` (same ``model``, ``keep``, ``summary_prompt``,
``trim_tokens_to_summarize`` and ``summarizer`` arguments; LangChain still picks the cut so that AI
tool calls and their tool results stay together) and changes three things:

* **events**: before and after every model call each new message becomes a MemoryHub event
  (``client_event_id`` derived from the message id, so a re-run or restart never duplicates it);
* **when**: it asks the workflow's trigger (``POST …/trigger/``, O(1) running totals on the
  server) instead of recounting the history; ``trigger=`` is not used;
* **recording**: when the trigger says compact, the summary comes either from LangChain's own
  summarizer (``compaction="langchain"``: ``model``/``summarizer`` with ``summary_prompt``) or from a
  MemoryHub compaction job (``compaction="memoryhub"``); either way it is a summary version covering
  the exact range of events replaced, with the compactor named after the model and prompt, and the
  summary message the model then reads carries its ``summary_id``.

``wrap_model_call`` records a consumer trace for every model call: the summary the model read (or
none), the last event it saw, and a context id/manifest of the same read from MemoryHub. The
trace's ``model_call_id`` is put in the AI message's ``response_metadata["memoryhub_model_call_id"]``
so artifacts can name the call that produced them.

The workflow is ``workflow_id`` or, by default, the LangGraph ``thread_id``; it is created with
``source="langchain"``. The client comes from ``MEMORYHUB_URL`` / ``MEMORYHUB_API_KEY`` unless
given.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any, Literal

from langchain.agents.middleware.summarization import (
    DEFAULT_SUMMARY_PROMPT,
    SummarizationMiddleware,
    Summarizer,
)
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, RemoveMessage
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from memoryhub.client import MemoryHubClient, Summary
from memoryhub.client.types import ContextSummary
from memoryhub.integrations.langgraph import (
    current_langgraph_ids,
    message_to_events,
    render_summary,
    stable_id,
)
from memoryhub.integrations.recorder import record_compaction

__all__ = ["MemoryHubSummarizationMiddleware", "SUMMARY_KEY"]

logger = logging.getLogger(__name__)

SUMMARY_KEY = "memoryhub_summary"  # additional_kwargs of the summary message: id, version, coverage
_LC_SOURCE = "summarization"
COMPACT_ACTIONS = frozenset({"compact", "retrieve_or_block"})


def _prompt_version(prompt: str) -> str:
    if prompt == DEFAULT_SUMMARY_PROMPT:
        return "langchain-default"
    return "sha256:" + hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:16]


def _model_name(model: Any) -> str:
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    llm_type = getattr(model, "_llm_type", None)
    return llm_type if isinstance(llm_type, str) else type(model).__name__


def _callable_name(fn: Any) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "name", None) or type(fn).__name__


def is_summary_message(message: AnyMessage) -> bool:
    kwargs = getattr(message, "additional_kwargs", None) or {}
    return kwargs.get("lc_source") == _LC_SOURCE


class MemoryHubSummarizationMiddleware(SummarizationMiddleware):
    """``SummarizationMiddleware`` whose history, trigger, summaries and traces live in MemoryHub."""

    def __init__(
        self,
        model: Any,
        *,
        client: MemoryHubClient | None = None,
        workflow_id: str | Callable[[], str] | None = None,
        agent: str = "agent",
        compaction: Literal["langchain", "memoryhub"] = "langchain",
        keep: Any = ("messages", 20),
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        trim_tokens_to_summarize: int | None = 4000,
        summarizer: Summarizer | None = None,
        expected_next_step_tokens: int = 500,
        compaction_timeout: float = 60.0,
        graph_release: str | None = None,
        workflow_name: str | None = None,
        **deprecated_kwargs: Any,
    ) -> None:
        deprecated_kwargs.pop("trigger", None)  # the MemoryHub policy decides when
        super().__init__(
            model,
            trigger=None,
            keep=keep,
            summary_prompt=summary_prompt,
            trim_tokens_to_summarize=trim_tokens_to_summarize,
            summarizer=summarizer,
            **deprecated_kwargs,
        )
        if compaction not in ("langchain", "memoryhub"):
            raise ValueError("compaction must be 'langchain' or 'memoryhub'")
        self.client = client or MemoryHubClient.from_env()
        self._workflow_id = workflow_id
        self.agent = agent
        self.compaction = compaction
        self.expected_next_step_tokens = expected_next_step_tokens
        self.compaction_timeout = compaction_timeout
        self.graph_release = graph_release
        self.workflow_name = workflow_name
        self._raw_summarizer = summarizer
        self._created: set[str] = set()
        self._seqs: dict[tuple[str, str], int] = {}  # (workflow, message id) -> last seq of its events
        self.last_model_call_id: str | None = None

    # -- identity -----------------------------------------------------------------------------------

    def workflow_id(self) -> str:
        """The MemoryHub workflow: the configured id, else the LangGraph thread id (created once)."""
        if callable(self._workflow_id):
            wf = self._workflow_id()
        elif self._workflow_id:
            wf = self._workflow_id
        else:
            wf = current_langgraph_ids().get("thread_id", "")
            if not wf:
                raise ValueError("no workflow_id given and no LangGraph thread_id in the run config")
        if wf not in self._created:
            self.client.create_workflow(
                wf, name=self.workflow_name, graph_release=self.graph_release, source="langchain"
            )
            self._created.add(wf)
        return wf

    def compactor(self) -> dict[str, Any]:
        """Compactor config of a LangChain-side summary: the summarizing model and the prompt."""
        if self.summarizer is not None:
            # A plain function or Runnable: it gets the messages, not the prompt.
            return {"name": "langchain-summarizer", "model": _callable_name(self._raw_summarizer)[:100]}
        return {
            "name": "langchain-summarization",
            "model": _model_name(self._summary_chat_model)[:100],
            "prompt_template_version": _prompt_version(self.summary_prompt),
        }

    # -- events -------------------------------------------------------------------------------------

    def sync(self, workflow: str, messages: list[AnyMessage]) -> int:
        """Append every message not yet recorded (the summary message is derived: never an event).

        Returns the last seq among ``messages`` (0 when none has events).
        """
        self._ensure_message_ids(messages)
        batch: list[dict[str, Any]] = []
        owners: list[str] = []
        for message in messages:
            if is_summary_message(message) or (workflow, str(message.id)) in self._seqs:
                continue
            events = message_to_events(message, workflow_id=workflow, agent=self.agent)
            batch.extend(events)
            owners.extend([str(message.id)] * len(events))
        if batch:
            result = self.client.append_events(workflow, batch)
            for owner, stored in zip(owners, result.events, strict=True):
                self._seqs[(workflow, owner)] = max(stored.seq, self._seqs.get((workflow, owner), 0))
        return self.last_seq(workflow, messages)

    def last_seq(self, workflow: str, messages: list[AnyMessage]) -> int:
        seqs = [self._seqs.get((workflow, str(m.id)), 0) for m in messages if not is_summary_message(m)]
        summary = self.read_summary(messages)
        return max([*seqs, summary["covers_to_seq"] if summary else 0])

    @staticmethod
    def read_summary(messages: list[AnyMessage]) -> dict[str, Any] | None:
        for message in messages:
            if is_summary_message(message):
                return (message.additional_kwargs or {}).get(SUMMARY_KEY)
        return None

    # -- compaction ---------------------------------------------------------------------------------

    def before_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        messages = state["messages"]
        workflow = self.workflow_id()
        self.sync(workflow, messages)
        decision = self.client.trigger(
            workflow, expected_next_step_tokens=self.expected_next_step_tokens, checkpoint_safe=True
        )
        if decision.action not in COMPACT_ACTIONS:
            return None
        cutoff = self._determine_cutoff_index(messages)
        if cutoff <= 0:
            return None
        replaced, preserved = self._partition_messages(messages, cutoff)
        end = self.last_seq(workflow, replaced)
        previous = self.read_summary(messages)
        if end == 0 or (previous and end <= previous["covers_to_seq"]):
            return None  # nothing new to replace: only the previous summary would be summarized
        if self.compaction == "memoryhub":
            summary = self._memoryhub_summary(workflow, end)
            text = render_summary(ContextSummary.from_dict(summary.raw))
        else:
            text = self._create_summary(replaced)
            summary = self.record(workflow, 1, end, text)
        note = self._build_new_messages(text)[0]
        note.additional_kwargs[SUMMARY_KEY] = {
            "summary_id": summary.summary_id,
            "version": summary.version,
            "status": summary.status,
            "covers_from_seq": summary.raw.get("covers_from_seq", 1),
            "covers_to_seq": end,
        }
        note.id = f"memoryhub-summary-{summary.summary_id}"
        for message in replaced:  # they leave the state: forget their seqs
            self._seqs.pop((workflow, str(message.id)), None)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), note, *preserved]}

    def record(self, workflow: str, start: int, end: int, text: str) -> Summary:
        """The summary LangChain wrote (it replaces events ``start..end``, previous summary included)."""
        return record_compaction(
            self.client,
            workflow,
            covers_from_seq=start,
            covers_to_seq=end,
            content={"narrative": text, "facts": []},
            compactor=self.compactor(),
        )

    def _memoryhub_summary(self, workflow: str, end: int) -> Summary:
        job = self.client.request_compaction(workflow, source_revision=end)
        job = self.client.wait_for_compaction(job.job_id, timeout=self.compaction_timeout)
        if not job.succeeded or not job.summary_id:
            raise RuntimeError(
                f"MemoryHub compaction job {job.job_id} for events up to #{end} ended {job.status}"
                f"/{job.outcome}: the history was not replaced"
            )
        return self.client.get_summary(job.summary_id)

    # -- consumer traces ----------------------------------------------------------------------------

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        call = self._before_call(request)
        response = handler(request)
        return self._after_call(call, response)

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        call = await asyncio.to_thread(self._before_call, request)
        response = await handler(request)
        return await asyncio.to_thread(self._after_call, call, response)

    async def abefore_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        # The HTTP calls and the summarizer are synchronous: run them off the event loop.
        return await asyncio.to_thread(self.before_model, state, runtime)

    async def aafter_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_model, state, runtime)

    async def aafter_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        return await asyncio.to_thread(self.after_agent, state, runtime)

    def _before_call(self, request: ModelRequest) -> dict[str, Any]:
        workflow = self.workflow_id()
        messages = list(request.messages)
        tail_to = self.sync(workflow, messages)
        last_id = str(messages[-1].id) if messages else ""
        return {
            "workflow": workflow,
            "tail_to": tail_to,
            "summary": self.read_summary(messages),
            "ids": current_langgraph_ids(),
            "model_call_id": stable_id(workflow, "model-call", last_id, len(messages)),
            "input_tokens": self.token_counter(messages),
        }

    def _after_call(self, call: dict[str, Any], response: Any) -> Any:
        """Record the consumer trace of a call that returned (what it read: summary + events up to tail_to)."""
        workflow, ids, summary = call["workflow"], call["ids"], call["summary"]
        context = self.client.get_context(workflow, min_seq=call["tail_to"] or None)
        self.client.record_trace(
            workflow,
            agent=self.agent,
            agent_run_id=ids.get("thread_id", workflow),
            model_call_id=call["model_call_id"],
            summary_id=summary["summary_id"] if summary else None,
            tail_to_seq=call["tail_to"],
            context_id=context.context_id,
            manifest_hash=context.manifest_hash,
            graph_release=self.graph_release,
            thread_id=ids.get("thread_id"),
            checkpoint_id=ids.get("checkpoint_id"),
            input_tokens=call["input_tokens"],
        )
        self.last_model_call_id = call["model_call_id"]
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in results:
            if isinstance(message, AIMessage):
                message.response_metadata["memoryhub_model_call_id"] = call["model_call_id"]
        return response

    def after_model(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Record the model's answer (and its tool calls) right away, before any tool runs."""
        self.sync(self.workflow_id(), state["messages"])
        return None

    def after_agent(self, state: Any, runtime: Runtime[Any]) -> dict[str, Any] | None:
        self.sync(self.workflow_id(), state["messages"])
        return None
