"""LangChain v1 agent middleware backed by MemoryHub: a drop-in for ``SummarizationMiddleware``.

::

    from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware

    agent = create_agent(model, tools, middleware=[
        MemoryHubSummarizationMiddleware("openai:gpt-4.1-mini", trigger=("tokens", 4000), keep=("messages", 20)),
    ])

**Same arguments, same decisions, same messages.** It subclasses LangChain's
``SummarizationMiddleware`` and takes its arguments unchanged (``model``, ``trigger``, ``keep``,
``token_counter``, ``summary_prompt``, ``trim_tokens_to_summarize``, ``summarizer``). When to
summarize, where to cut (tool calls stay with their results), the summary text and the summary
message are LangChain's own code paths, so the agent's model sees exactly what it would see with
``SummarizationMiddleware`` (tests/integrations/test_langchain_parity.py runs both side by side,
``invoke`` and ``ainvoke``, MemoryHub up and down). Two differences, both by design:

* the count is kept incrementally: only messages new since the previous model call are counted
  (with the default ``count_tokens_approximately``, including its usage-metadata scaling, the
  total is identical to LangChain's whole-history count). A custom ``token_counter`` cannot be
  assumed additive, so it is called on the whole history each time, as LangChain does;
* ``trigger=None`` (LangChain: never summarize) means "the workflow's MemoryHub policy decides":
  the decision comes back with the step call, and when MemoryHub is unreachable nothing is
  summarized (LangChain's behaviour for ``trigger=None``).

The summary message carries ``additional_kwargs["memoryhub_summary"]`` (observation id, summary id
once known, the repair verdict) and an id; its content is LangChain's, plus the hand-back below.

**Repair: what the summary lost comes back (on by default, ``repair=False`` switches it off).**
On a compaction turn, after LangChain's summarizer ran and before its summary replaces the
history, the middleware asks the server for its verdict on the summary (``POST …/repair/``: the
summary, its coverage and this turn's not-yet-stored messages; it writes nothing), then queues the
step that records the compaction as usual. The server judges the summary against the messages it
replaces (``memoryhub.memory.repair``) and, by the workflow policy's ``repair.gate``:

* ``repair`` (default): the lost obligation sentences and the lost identifiers/values, each with
  its source seq, are appended to the summary message as a short "Kept from before the summary"
  block (capped by ``repair.max_tokens``); an empty summary gets the tail it replaced;
* ``block``: the summary is refused, LangChain's update is dropped, the agent keeps the messages
  it would have dropped (the recorded compaction says ``blocked``; the trigger fires again on the
  next call);
* ``observe``: the verdict is recorded, the messages are LangChain's.

Cost: one round trip on compaction turns only, after any queued earlier steps reached the server
(the verdict reads them), all within ``repair_deadline`` (default max(deadline, 1 s): the turn
already waited for the summarizer). In policy mode the step that records the compaction is sent
live anyway and its answer carries the verdict (no extra request). MemoryHub unreachable, slower
than that, or a turn carrying more messages than one request may: LangChain's summary, unchanged
(one warning per outage). Without repair (``repair=False``) the calls are LangChain's exactly
(tests/integrations/test_langchain_parity.py); with it they differ only by the appended block
(tests/integrations/test_langchain_repair.py).

With the policy's ``repair.resummarize`` (trigger mode), a summary that lost something gets one
more summarization whose prompt names what was lost (a custom ``summarizer`` gets it as a last
message), judged the same way (a second light round trip, on those turns only); the one that lost
less is used (the first on a tie), repaired as above, and the recorded compaction's settings say
so (``repair_resummarized``). Only the summary used is recorded.

**One request per model call, flat cost.** ``before_model`` makes one ``POST …/step/``: the new
messages as events (ids derived from message ids, so a re-run never duplicates), the compaction it
just performed (coverage by event id), the consumer traces of earlier model calls, and (policy
mode) the decision request. With a LangChain ``trigger`` the answer is not needed: the request is
queued for the background sender and the agent does not wait. In policy mode the call waits (at
most the deadline) for the decision, and a compaction it leads to is recorded by a second request
before the model reads it. ``after_agent`` queues the last messages the same way. A history longer
than the server's batch maximum is sent in chunks in the background while the agent runs.

**Never hurts the agent.** All calls go through :class:`memoryhub.client.resilience.ResilientHub`:
deadline (``MEMORYHUB_DEADLINE_MS``, default 200 ms), circuit breaker, local spool drained in order
later, one warning per outage. ``MEMORYHUB_URL`` / ``MEMORYHUB_API_KEY`` missing is
:class:`~memoryhub.client.NotConfigured` at construction.

The workflow is ``workflow_id`` or the LangGraph ``thread_id`` (created with ``source="langchain"``
on first use). Without either, one workflow per middleware instance is used (logged once).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import logging
import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain.agents.middleware.summarization import (
    _DEFAULT_MESSAGES_TO_KEEP,
    _DEFAULT_TRIM_TOKEN_LIMIT,
    DEFAULT_SUMMARY_PROMPT,
    SummarizationMiddleware,
    Summarizer,
    TokenCounter,
)
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, RemoveMessage
from langchain_core.messages.utils import count_tokens_approximately
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.runtime import Runtime

from memoryhub.client import MemoryHubClient
from memoryhub.client.resilience import ResilientHub, SpooledRequest
from memoryhub.integrations.langgraph import current_langgraph_ids, message_to_events, stable_id

__all__ = ["SUMMARY_KEY", "MemoryHubSummarizationMiddleware", "TokenTally", "is_summary_message"]

logger = logging.getLogger(__name__)

SUMMARY_KEY = "memoryhub_summary"  # additional_kwargs of the summary message
_LC_SOURCE = "summarization"
COMPACT_ACTIONS = frozenset({"compact", "retrieve_or_block"})
MAX_BATCH_EVENTS = 1000  # the server's default MEMORYHUB_MAX_BATCH_EVENTS
RESUMMARIZE_NOTE = (
    "A first summary of this conversation left out the following (each with its source seq). "
    "Write the summary again and keep every one of them:"
)


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


def is_summary_message(message: AnyMessage) -> bool:
    kwargs = getattr(message, "additional_kwargs", None) or {}
    return kwargs.get("lc_source") == _LC_SOURCE


class TokenTally:
    """``count_tokens_approximately(messages, use_usage_metadata_scaling=…)`` kept as a running total.

    LangChain's count is a sum of per-message counts, optionally scaled by the last AI message's
    reported ``total_tokens`` over the approximate count up to it (1.0–1.25, only while every AI
    message names the same provider). Every term is known when a message arrives, so adding one
    message is O(1) and :meth:`value` equals the whole-list count.
    """

    def __init__(self, per_message: Callable[[Sequence[Any]], int], *, scaling: bool) -> None:
        self._per_message = per_message
        self.scaling = scaling
        self.reset()

    def reset(self) -> None:
        self.total = 0.0
        self.count = 0
        self._provider: str | None = None
        self._mixed = False
        self._last_ai_total: int | None = None
        self._approx_at_last_ai = 0.0

    def add(self, message: Any) -> None:
        self.total += self._per_message([message])
        self.count += 1
        if self.scaling and isinstance(message, AIMessage):
            provider = message.response_metadata.get("model_provider")
            if self._provider is None:
                self._provider = provider
            elif provider != self._provider:
                self._mixed = True
            usage = message.usage_metadata
            if usage and isinstance(total := usage.get("total_tokens"), int):
                self._last_ai_total = total
                self._approx_at_last_ai = self.total

    def value(self) -> int:
        total = self.total
        if (
            self.scaling
            and self.count > 1
            and not self._mixed
            and self._provider is not None
            and self._last_ai_total is not None
            and self._approx_at_last_ai > 0
        ):
            total *= min(1.25, max(1.0, self._last_ai_total / self._approx_at_last_ai))
        return math.ceil(total)


def _incremental_tally(counter: TokenCounter) -> TokenTally | None:
    """A running tally equal to ``counter``, or None when ``counter`` is not LangChain's approximate one."""
    if counter is count_tokens_approximately:
        return TokenTally(counter, scaling=False)
    if (
        isinstance(counter, functools.partial)
        and counter.func is count_tokens_approximately
        and not counter.args
    ):
        keywords = dict(counter.keywords)
        scaling = bool(keywords.pop("use_usage_metadata_scaling", False))
        if set(keywords) - {"chars_per_token", "extra_tokens_per_message", "count_name", "tokens_per_image"}:
            return None
        per_message = functools.partial(
            count_tokens_approximately, use_usage_metadata_scaling=False, **keywords
        )
        return TokenTally(per_message, scaling=scaling)
    return None


@dataclass
class _Thread:
    """What the middleware remembers about one conversation (so each call handles new messages only)."""

    workflow: str
    tally: TokenTally | None
    known: int = 0  # messages of the state already handled
    last_id: str | None = None  # id of the last of them (to recognise the same state next time)
    last_event: str | None = None  # client_event_id of the last event sent
    summary: dict[str, Any] | None = None  # SUMMARY_KEY of the summary message in the state
    pending_traces: list[dict[str, Any]] = field(default_factory=list)
    pending_compactions: list[dict[str, Any]] = field(default_factory=list)
    context: dict[str, Any] | None = None  # the server's description of the read after the last step
    calls: int = 0


@dataclass
class _Prepared:
    """The outcome of the local part of ``before_model`` (the same for sync and async)."""

    thread: _Thread
    events: list[dict[str, Any]]
    messages: list[AnyMessage]
    compact: bool
    cutoff: int = 0


class MemoryHubSummarizationMiddleware(SummarizationMiddleware):
    """``SummarizationMiddleware`` that records events, summaries and traces in MemoryHub."""

    def __init__(
        self,
        model: Any,
        *,
        trigger: Any = None,
        keep: Any = ("messages", _DEFAULT_MESSAGES_TO_KEEP),
        token_counter: TokenCounter = count_tokens_approximately,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        trim_tokens_to_summarize: int | None = _DEFAULT_TRIM_TOKEN_LIMIT,
        summarizer: Summarizer | None = None,
        # MemoryHub's own (keyword-only, all optional):
        hub: ResilientHub | None = None,
        client: MemoryHubClient | None = None,
        workflow_id: str | Callable[[], str] | None = None,
        agent: str = "agent",
        expected_next_step_tokens: int = 0,
        deadline: float | None = None,
        spool_dir: str | Path | None = None,
        graph_release: str | None = None,
        workflow_name: str | None = None,
        max_batch_events: int = MAX_BATCH_EVENTS,
        repair: bool = True,
        repair_deadline: float | None = None,
        **deprecated_kwargs: Any,
    ) -> None:
        super().__init__(
            model,
            trigger=trigger,
            keep=keep,
            token_counter=token_counter,
            summary_prompt=summary_prompt,
            trim_tokens_to_summarize=trim_tokens_to_summarize,
            summarizer=summarizer,
            **deprecated_kwargs,
        )
        if hub is None:
            hub = (
                ResilientHub(client=client, component="langchain", deadline=deadline, spool_dir=spool_dir)
                if client is not None
                else ResilientHub.from_env(component="langchain", deadline=deadline, spool_dir=spool_dir)
            )
        self.hub = hub
        self.policy_decides = not self._trigger_clauses
        self._workflow_id = workflow_id
        self._fallback_workflow = f"langchain-{uuid.uuid4().hex[:12]}"
        self.agent = agent
        self.expected_next_step_tokens = expected_next_step_tokens
        self.graph_release = graph_release
        self.workflow_name = workflow_name
        self.max_batch_events = max(1, int(max_batch_events))
        self._threads: dict[str, _Thread] = {}
        self.last_model_call_id: str | None = None
        self.last_step: dict[str, Any] | None = None  # the server's answer to the last live step
        self.repair = repair
        # A compaction turn already waits for the summarizer (an LLM call): the verdict step gets
        # at least a second before LangChain's summary is used unrepaired.
        self.repair_deadline = float(repair_deadline or max(float(getattr(hub, "deadline", 0.2)), 1.0))
        self.last_repair: dict[str, Any] | None = None  # the server's verdict on the last compaction

    # -- identity -----------------------------------------------------------------------------------

    def workflow_id(self) -> str:
        """The configured id, else the LangGraph thread id, else one id for this middleware."""
        if callable(self._workflow_id):
            return self._workflow_id()
        if self._workflow_id:
            return self._workflow_id
        thread = current_langgraph_ids().get("thread_id")
        if thread:
            return thread
        if self._fallback_workflow not in self._threads:
            logger.info(
                "MemoryHub: no workflow_id and no LangGraph thread_id; recording as %s",
                self._fallback_workflow,
            )
        return self._fallback_workflow

    def compactor(self) -> dict[str, Any]:
        """Compactor config of a LangChain-side summary: the summarizing model and the prompt."""
        if self.summarizer is not None:
            name = getattr(self.summarizer, "name", None) or type(self.summarizer).__name__
            return {"name": "langchain-summarizer", "model": str(name)[:100]}
        return {
            "name": "langchain-summarization",
            "model": _model_name(self._summary_chat_model)[:100],
            "prompt_template_version": _prompt_version(self.summary_prompt),
        }

    def _thread(self, workflow: str) -> _Thread:
        thread = self._threads.get(workflow)
        if thread is None:
            thread = self._threads[workflow] = _Thread(workflow, _incremental_tally(self.token_counter))
        return thread

    # -- the local part: new messages, count, decision ----------------------------------------------

    def _events_of(self, thread: _Thread, messages: Iterable[AnyMessage]) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for message in messages:
            if is_summary_message(message):
                summary = (message.additional_kwargs or {}).get(SUMMARY_KEY)
                thread.summary = summary if isinstance(summary, dict) else None
                continue
            events.extend(message_to_events(message, workflow_id=thread.workflow, agent=self.agent))
        if events:
            thread.last_event = events[-1]["client_event_id"]
        return events

    def _take_new(self, thread: _Thread, messages: list[AnyMessage]) -> list[AnyMessage]:
        """Messages not handled yet; the whole list when the state is not the one we left."""
        known = thread.known
        if known and known <= len(messages) and str(messages[known - 1].id) == thread.last_id:
            new = messages[known:]
        else:  # first call, a restart, or the state was rewritten by someone else: start over
            new = messages
            thread.summary = None
            if thread.tally is not None:
                thread.tally.reset()
        self._ensure_message_ids(new)
        if thread.tally is not None:
            for message in new:
                thread.tally.add(message)
        thread.known = len(messages)
        thread.last_id = str(messages[-1].id) if messages else None
        return new

    def _total_tokens(self, thread: _Thread, messages: list[AnyMessage]) -> int:
        if thread.tally is not None:
            return thread.tally.value()
        return self.token_counter(messages)  # a custom counter: whole history, as LangChain does

    def _prepare(self, state: Any) -> _Prepared:
        messages = state["messages"]
        thread = self._thread(self.workflow_id())
        new = self._take_new(thread, messages)
        events = self._recording(lambda: self._events_of(thread, new), [])
        compact = False
        if not self.policy_decides:
            compact = self._should_summarize(messages, self._total_tokens(thread, messages))
        return _Prepared(thread, events, messages, compact)

    # -- the round trip -----------------------------------------------------------------------------

    def _requests(
        self,
        thread: _Thread,
        events: list[dict[str, Any]],
        *,
        decide: bool = False,
        wait: bool = False,
        context: bool = True,
    ) -> list[SpooledRequest]:
        """The step(s) that carry ``events`` plus everything pending, at most ``max_batch_events``
        events each. Traces ride the first (they describe earlier calls: the server checks them
        against the head those calls saw), compactions and the decision the last (they may cover,
        or weigh, this step's events)."""
        path = MemoryHubClient.step_path(thread.workflow)
        size = self.max_batch_events
        chunks = [events[i : i + size] for i in range(0, len(events), size)] or [[]]
        create = {"source": "langchain", "name": self.workflow_name, "graph_release": self.graph_release}
        requests = []
        for i, chunk in enumerate(chunks):
            last = i == len(chunks) - 1
            body = MemoryHubClient.step_body(
                events=chunk,
                traces=thread.pending_traces if i == 0 else (),
                compactions=thread.pending_compactions if last else (),
                decide={"expected_next_step_tokens": self.expected_next_step_tokens}
                if decide and last
                else None,
                create=create,
                context=wait and last and context,
            )
            requests.append(SpooledRequest("POST", path, body))
        thread.pending_compactions, thread.pending_traces = [], []
        return requests

    def _backlog_left(self) -> float | None:
        """Seconds to wait for the background sender before a live step (None: nothing queued).

        A live step never overtakes the steps queued before it (the server numbers events in
        arrival order): on a repair turn after turns that did not wait, the queue gets at most the
        deadline to reach the server; still queued then, the step is queued too and LangChain's
        summary goes unrepaired (native behaviour)."""
        spool = getattr(self.hub, "spool", None)
        if spool is None or not spool.has_pending() or not getattr(self.hub, "available", False):
            return None
        self.hub.kick_drain()
        return self.repair_deadline

    def _caught_up(self) -> bool:
        spool = getattr(self.hub, "spool", None)
        return spool is None or not spool.has_pending()

    def _catch_up(self) -> bool:
        """Whether every earlier step reached the server (waited for at most ``repair_deadline``):
        the verdict is judged against stored events, so it is asked for only then."""
        left = self._backlog_left()
        if left is not None:
            until = time.monotonic() + left
            while self.hub.spool.has_pending() and self.hub.available and time.monotonic() < until:
                time.sleep(0.002)
        return self._caught_up()

    async def _acatch_up(self) -> bool:
        left = self._backlog_left()
        if left is not None:
            until = time.monotonic() + left
            while self.hub.spool.has_pending() and self.hub.available and time.monotonic() < until:
                await asyncio.sleep(0.002)
        return self._caught_up()

    def _send(
        self,
        thread: _Thread,
        events: list[dict[str, Any]],
        *,
        decide: bool,
        wait: bool = False,
        repairing: bool = False,
    ) -> dict[str, Any] | None:
        if not (decide or wait):  # LangChain's trigger decided here: no answer needed, no waiting
            for request in self._requests(thread, events):
                self.hub.send_later(request)
            return None
        # A repair step in trigger mode needs no read description (its traces attest their read).
        context = not repairing or self.policy_decides
        *early, live = self._requests(thread, events, decide=decide, wait=True, context=context)
        for request in early:  # a long history: caught up in the background, the agent runs on
            self.hub.send_later(request)
        answer = self.hub.call(
            lambda c: c.step(thread.workflow, live.json),
            default=None,
            spool=live,
            ordered=True,
            deadline=self.repair_deadline if repairing else None,
        )
        self.last_step = answer
        thread.context = (answer or {}).get("context")
        return answer

    async def _asend(
        self,
        thread: _Thread,
        events: list[dict[str, Any]],
        *,
        decide: bool,
        wait: bool = False,
        repairing: bool = False,
    ) -> dict[str, Any] | None:
        if not (decide or wait):
            return self._send(thread, events, decide=False)
        context = not repairing or self.policy_decides
        *early, live = self._requests(thread, events, decide=decide, wait=True, context=context)
        for request in early:
            self.hub.send_later(request)
        answer = await self.hub.acall(
            lambda c: c.step(thread.workflow, live.json),
            default=None,
            spool=live,
            ordered=True,
            deadline=self.repair_deadline if repairing else None,
        )
        self.last_step = answer
        thread.context = (answer or {}).get("context")
        return answer

    def _policy_cut(
        self, prepared: _Prepared, update: dict[str, Any] | None, answer: dict[str, Any] | None
    ) -> tuple[list[AnyMessage], list[AnyMessage]] | None:
        """Policy mode: the cut to make when the workflow's policy said compact."""
        decision = (answer or {}).get("decision") or {}
        if update is not None or not self.policy_decides or decision.get("action") not in COMPACT_ACTIONS:
            return None
        return self._cut(prepared)

    # -- compaction ---------------------------------------------------------------------------------

    def _cut(self, prepared: _Prepared) -> tuple[list[AnyMessage], list[AnyMessage]] | None:
        cutoff = self._determine_cutoff_index(prepared.messages)
        if cutoff <= 0:
            return None
        return self._partition_messages(prepared.messages, cutoff)

    def _compaction(
        self, thread: _Thread, replaced: list[AnyMessage], text: str, tokens: int
    ) -> dict[str, Any] | None:
        """The observed compaction to record (None when it replaced no recorded event)."""
        covered = next((m for m in reversed(replaced) if not is_summary_message(m)), None)
        if covered is not None:
            covers_to = message_to_events(covered, workflow_id=thread.workflow, agent=self.agent)[-1][
                "client_event_id"
            ]
        else:  # only the previous summary was re-summarized: same coverage
            covers_to = (thread.summary or {}).get("covers_to_event")
        if not covers_to:
            return None
        observation_id = stable_id(thread.workflow, "langchain-summary", covers_to, text)
        threshold = next((c.get("tokens") for c in self._trigger_clauses if "tokens" in c), None)
        trigger = {"kind": "threshold" if not self.policy_decides else "auto", "pre_tokens": tokens}
        if threshold:
            trigger["threshold_tokens"] = int(threshold)
        return {
            "observation_id": observation_id,
            "covers_to_event": covers_to,
            "text": text,  # an empty summary too: the server flags it and hands the tail back
            "can_block": True,  # a refused summary keeps the messages it would have dropped
            "compactor": {
                **self.compactor(),
                "settings": {"trigger": repr(self.trigger), "keep": repr(self.keep)},
            },
            "trigger": trigger,
        }

    def _apply(
        self, prepared: _Prepared, replaced: list[AnyMessage], preserved: list[AnyMessage], text: str
    ) -> dict[str, Any]:
        """LangChain's state update, plus our bookkeeping of the new state."""
        thread = prepared.thread
        tokens = self._total_tokens(thread, prepared.messages)
        record = self._recording(lambda: self._compaction(thread, replaced, text, tokens), None)
        note = self._build_new_messages(text)[0]
        meta: dict[str, Any] = {}
        if record is not None:
            thread.pending_compactions.append(record)
            meta = {"observation_id": record["observation_id"], "covers_to_event": record["covers_to_event"]}
            note.id = f"memoryhub-summary-{record['observation_id']}"
        else:
            note.id = f"memoryhub-summary-{uuid.uuid4().hex}"
        note.additional_kwargs[SUMMARY_KEY] = meta
        thread.summary = meta or None
        # The state becomes [note, *preserved]: count it afresh (bounded by ``keep``).
        if thread.tally is not None:
            thread.tally.reset()
            for message in (note, *preserved):
                thread.tally.add(message)
        thread.known = 1 + len(preserved)
        thread.last_id = str((preserved[-1] if preserved else note).id)
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), note, *preserved]}

    # -- repair: what the summary lost, handed back before the model reads it ----------------------

    def _repairing(self, update: dict[str, Any] | None) -> bool:
        """Ask for the server's verdict on this compaction (one round trip, compaction turns only;
        policy mode: the step that records it, sent live anyway, answers it)."""
        if not self.repair or update is None or self.policy_decides:
            return False
        return bool((update["messages"][1].additional_kwargs.get(SUMMARY_KEY) or {}).get("observation_id"))

    def _verdict_body(self, prepared: _Prepared, update: dict[str, Any]) -> dict[str, Any] | None:
        """``POST …/repair/``: the summary, its coverage and this turn's events (not stored yet: the
        step that records them and the compaction is queued right after). None on a turn that
        carries more events than one request may (a catch-up: LangChain's summary is used as is)."""
        meta = update["messages"][1].additional_kwargs.get(SUMMARY_KEY) or {}
        record = next(
            (
                c
                for c in prepared.thread.pending_compactions
                if c["observation_id"] == meta.get("observation_id")
            ),
            None,
        )
        if record is None or len(prepared.events) > self.max_batch_events:
            return None
        return {
            "text": record["text"],
            "covers_to_event": record["covers_to_event"],
            "events": prepared.events,
            "can_block": True,
        }

    def _ask_verdict(self, prepared: _Prepared, body: dict[str, Any]) -> dict[str, Any] | None:
        return self.hub.call(
            lambda c: c.repair_verdict(prepared.thread.workflow, body),
            default=None,
            deadline=self.repair_deadline,
        )

    async def _aask_verdict(self, prepared: _Prepared, body: dict[str, Any]) -> dict[str, Any] | None:
        return await self.hub.acall(
            lambda c: c.repair_verdict(prepared.thread.workflow, body),
            default=None,
            deadline=self.repair_deadline,
        )

    # -- the policy's re-summarization (repair.resummarize): one more attempt, the better one kept --

    @staticmethod
    def _wants_resummary(verdict: dict[str, Any] | None) -> bool:
        return (
            isinstance(verdict, dict)
            and bool(verdict.get("resummarize"))
            and verdict.get("verdict") in ("repaired", "blocked")
            and bool(verdict.get("text"))
        )

    def _resummary_input(self, replaced: list[AnyMessage], lost: str) -> tuple[list[AnyMessage], str]:
        trimmed = self._trim_messages_for_summary(replaced) or replaced
        note = f"{RESUMMARIZE_NOTE}\n{lost}"
        return trimmed, note

    def _resummarize(self, replaced: list[AnyMessage], lost: str) -> str:
        """The summarizer again, told what its first summary lost."""
        trimmed, note = self._resummary_input(replaced, lost)
        if self.summarizer is not None:
            return str(self.summarizer.invoke([*trimmed, HumanMessage(note)]))
        return self._summary_model.invoke(f"{self._format_summary_prompt(trimmed)}\n\n{note}").text.strip()

    async def _aresummarize(self, replaced: list[AnyMessage], lost: str) -> str:
        trimmed, note = self._resummary_input(replaced, lost)
        if self.summarizer is not None:
            return str(await self.summarizer.ainvoke([*trimmed, HumanMessage(note)]))
        response = await self._summary_model.ainvoke(f"{self._format_summary_prompt(trimmed)}\n\n{note}")
        return response.text.strip()

    @staticmethod
    def _score(verdict: dict[str, Any] | None) -> tuple[int, int, int]:
        if not isinstance(verdict, dict):
            return (2, 0, 0)  # no verdict: never preferred
        lost = verdict.get("lost") or {}
        return (
            0 if verdict.get("verdict") == "kept" else 1,
            int(lost.get("obligations", 0)) + int(lost.get("contradicted", 0)),
            int(lost.get("units", 0)),
        )

    def _better(
        self,
        prepared: _Prepared,
        cut: tuple[list[AnyMessage], list[AnyMessage]],
        snapshot: dict[str, Any],
        update: dict[str, Any],
        verdict: dict[str, Any] | None,
        second: str,
        second_verdict: dict[str, Any] | None,
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Keep the summary that lost less (the first on a tie); the record says which was kept."""
        thread = prepared.thread
        first_meta = update["messages"][1].additional_kwargs.get(SUMMARY_KEY) or {}
        kept_second = self._score(second_verdict) < self._score(verdict)
        note = (
            f"re-summarized after the first summary lost {(verdict or {}).get('lost')}; kept the "
            f"{'second' if kept_second else 'first'} (second lost {(second_verdict or {}).get('lost')})"
        )
        if kept_second:
            thread.pending_compactions = [
                c
                for c in thread.pending_compactions
                if c["observation_id"] != first_meta.get("observation_id")
            ]
            self._restore(thread, snapshot)
            update = self._apply(prepared, *cut, second)
            verdict = second_verdict
        meta = update["messages"][1].additional_kwargs.get(SUMMARY_KEY) or {}
        for record in thread.pending_compactions:
            if record["observation_id"] == meta.get("observation_id"):
                record["compactor"]["settings"]["repair_resummarized"] = note[:500]
        meta["resummarized"] = "second" if kept_second else "first"
        return update, verdict

    @staticmethod
    def _snapshot(thread: _Thread) -> dict[str, Any]:
        return {
            "known": thread.known,
            "last_id": thread.last_id,
            "summary": thread.summary,
            "tally": copy.copy(thread.tally),
        }

    @staticmethod
    def _restore(thread: _Thread, snapshot: dict[str, Any]) -> None:
        for name, value in snapshot.items():
            setattr(thread, name, value)

    def _gate(
        self,
        prepared: _Prepared,
        update: dict[str, Any] | None,
        answer: dict[str, Any] | None,
        snapshot: dict[str, Any] | None,
        verdict: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Apply the server's verdict on the summary just made: append the hand-back to the summary
        message (``repaired``), or keep the messages it would have dropped (``blocked``). No
        verdict (MemoryHub unreachable, an older server): LangChain's own update, unchanged."""
        if update is None or not self.repair:
            return update
        note = update["messages"][1]
        meta = note.additional_kwargs.get(SUMMARY_KEY) or {}
        if verdict is None:  # policy mode: the step that recorded it answered the verdict
            verdict = next(
                (
                    c.get("repair")
                    for c in (answer or {}).get("compactions") or []
                    if c.get("observation_id") == meta.get("observation_id")
                ),
                None,
            )
        self.last_repair = verdict
        if not isinstance(verdict, dict):
            return update
        meta["repair"] = {
            "verdict": verdict.get("verdict"),
            "handed_back": len(verdict.get("items") or []),
            "empty_summary": bool(verdict.get("empty_summary")),
        }
        if verdict.get("verdict") == "blocked" and snapshot is not None:
            self._restore(prepared.thread, snapshot)
            logger.info(
                "MemoryHub: the workflow policy blocks a summary that lost %s; the messages are kept",
                verdict.get("lost"),
            )
            return None
        text = verdict.get("text")
        if verdict.get("verdict") == "repaired" and isinstance(text, str) and text:
            note.content = f"{note.content}\n\n{text}"
            thread = prepared.thread
            if thread.tally is not None:  # the summary message grew: count the new state afresh
                thread.tally.reset()
                for message in update["messages"][1:]:
                    thread.tally.add(message)
        return update

    def _note_summary_id(self, update: dict[str, Any] | None, answer: dict[str, Any] | None) -> None:
        """Put the server's summary id on the summary message when the step already recorded it."""
        if not update or not answer:
            return
        note = update["messages"][1]
        meta = note.additional_kwargs.get(SUMMARY_KEY) or {}
        for recorded in answer.get("compactions") or []:
            if recorded.get("observation_id") == meta.get("observation_id"):
                meta.update(summary_id=recorded.get("summary_id"), version=recorded.get("version"))

    # -- LangChain hooks ----------------------------------------------------------------------------

    def before_model(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        prepared = self._prepare(state)
        update = snapshot = verdict = None
        if prepared.compact and (cut := self._cut(prepared)) is not None:
            snapshot = self._snapshot(prepared.thread)
            update = self._apply(prepared, *cut, self._create_summary(cut[0]))
            if self._repairing(update):  # one light round trip; the record goes in the background
                body = self._verdict_body(prepared, update)
                if body is not None and self._catch_up():
                    verdict = self._ask_verdict(prepared, body)
                    if self._wants_resummary(verdict):  # the policy's one more attempt
                        second = self._resummarize(cut[0], str(verdict["text"]))  # type: ignore[index]
                        update, verdict = self._better(
                            prepared,
                            cut,
                            snapshot,
                            update,
                            verdict,
                            second,
                            self._ask_verdict(prepared, {**body, "text": second}),
                        )
        answer = self._send(prepared.thread, prepared.events, decide=self.policy_decides)
        policy_cut = self._policy_cut(prepared, update, answer)
        if policy_cut is not None:
            snapshot = self._snapshot(prepared.thread)
            update = self._apply(prepared, *policy_cut, self._create_summary(policy_cut[0]))
            # Recorded before the model reads it (a second round trip, on compaction turns only).
            answer = self._send(prepared.thread, [], decide=False, wait=True, repairing=self.repair)
        self._note_summary_id(update, answer)
        return self._recording(lambda: self._gate(prepared, update, answer, snapshot, verdict), update)

    async def abefore_model(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        prepared = self._prepare(state)
        update = snapshot = verdict = None
        if prepared.compact and (cut := self._cut(prepared)) is not None:
            snapshot = self._snapshot(prepared.thread)
            update = self._apply(prepared, *cut, await self._acreate_summary(cut[0]))
            if self._repairing(update):
                body = self._verdict_body(prepared, update)
                if body is not None and await self._acatch_up():
                    verdict = await self._aask_verdict(prepared, body)
                    if self._wants_resummary(verdict):
                        second = await self._aresummarize(cut[0], str(verdict["text"]))  # type: ignore[index]
                        second_verdict = await self._aask_verdict(prepared, {**body, "text": second})
                        update, verdict = self._better(
                            prepared, cut, snapshot, update, verdict, second, second_verdict
                        )
        answer = await self._asend(prepared.thread, prepared.events, decide=self.policy_decides)
        policy_cut = self._policy_cut(prepared, update, answer)
        if policy_cut is not None:
            snapshot = self._snapshot(prepared.thread)
            update = self._apply(prepared, *policy_cut, await self._acreate_summary(policy_cut[0]))
            answer = await self._asend(prepared.thread, [], decide=False, wait=True, repairing=self.repair)
        self._note_summary_id(update, answer)
        return self._recording(lambda: self._gate(prepared, update, answer, snapshot, verdict), update)

    def _trace(self, request: ModelRequest) -> str:
        """Queue the consumer trace of this call (sent with the next step): what the model read."""
        thread = self._thread(self.workflow_id())
        thread.calls += 1
        summary = thread.summary or {}
        model_call_id = stable_id(
            thread.workflow,
            "model-call",
            thread.last_event,
            summary.get("observation_id"),
            len(request.messages),
        )
        if thread.last_event:  # a call before any event read nothing MemoryHub holds
            ids = current_langgraph_ids()
            trace = {
                "agent": self.agent,
                "agent_run_id": ids.get("thread_id", thread.workflow),
                "model_call_id": model_call_id,
                "tail_to_event": thread.last_event,
                "graph_release": self.graph_release,
                "thread_id": ids.get("thread_id"),
                "checkpoint_id": ids.get("checkpoint_id"),
                "input_tokens": thread.tally.value() if thread.tally else None,
            }
            if summary.get("observation_id"):
                trace["summary_observation_id"] = summary["observation_id"]
            else:
                trace["summary_id"] = None
            context = thread.context or {}
            if context.get("context_id") and context.get("manifest_hash"):
                # Provenance: the server's description of the read this call made (the step
                # that preceded it was answered live).
                trace["context_id"] = context["context_id"]
                trace["manifest_hash"] = context["manifest_hash"]
            else:  # the server checks this call read exactly its current state, then attests it
                trace["attest_read"] = True
            thread.pending_traces.append(
                {k: v for k, v in trace.items() if v is not None or k == "summary_id"}
            )
        self.last_model_call_id = model_call_id
        return model_call_id

    @staticmethod
    def _tag(response: Any, model_call_id: str) -> Any:
        if not model_call_id:
            return response
        results = response.result if isinstance(response, ModelResponse) else [response]
        for message in results:
            if isinstance(message, AIMessage):
                message.response_metadata["memoryhub_model_call_id"] = model_call_id
        return response

    def _note_answer(self, model_call_id: str, response: Any, started: float) -> None:
        """Add the call's latency and output tokens to its trace while it still waits to be sent
        (it rides the next step); a trace already sent goes without them."""
        if not model_call_id:
            return
        thread = self._thread(self.workflow_id())
        trace = next((t for t in thread.pending_traces if t.get("model_call_id") == model_call_id), None)
        if trace is None:
            return
        trace["latency_ms"] = round((time.monotonic() - started) * 1000)
        results = response.result if isinstance(response, ModelResponse) else [response]
        usage = [m.usage_metadata for m in results if isinstance(m, AIMessage) and m.usage_metadata]
        if usage:
            trace["output_tokens"] = sum(int(u.get("output_tokens", 0)) for u in usage)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        model_call_id = self._recording(lambda: self._trace(request), "")
        started = time.monotonic()
        response = handler(request)
        self._recording(lambda: self._note_answer(model_call_id, response, started), None)
        return self._tag(response, model_call_id)

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        model_call_id = self._recording(lambda: self._trace(request), "")
        started = time.monotonic()
        response = await handler(request)
        self._recording(lambda: self._note_answer(model_call_id, response, started), None)
        return self._tag(response, model_call_id)

    def _recording(self, record: Callable[[], Any], fallback: Any) -> Any:
        """Run MemoryHub-only bookkeeping; a failure there is logged, never raised into the agent."""
        try:
            return record()
        except Exception:  # a bug or an unexpected message shape must not stop the agent
            logger.exception("MemoryHub: recording failed; the agent continues (this record is missing)")
            return fallback

    def after_agent(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        """Queue the run's last messages and traces for the background drainer (the agent does not wait)."""
        thread = self._thread(self.workflow_id())
        new = self._take_new(thread, state["messages"])

        def queue() -> None:
            events = self._events_of(thread, new)
            if events or thread.pending_traces or thread.pending_compactions:
                for request in self._requests(thread, events):
                    self.hub.send_later(request)

        self._recording(queue, None)
        return None

    async def aafter_agent(self, state: Any, runtime: Runtime[Any] | None) -> dict[str, Any] | None:
        return self.after_agent(state, runtime)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything recorded so far has reached MemoryHub (tests, scripts, shutdown)."""
        return self.hub.flush(timeout)
