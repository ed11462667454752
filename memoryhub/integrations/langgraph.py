"""Context preparation for LangGraph nodes (or any agent loop) backed by MemoryHub.

Call :func:`prepare_context` at every model-call boundary. It

1. appends the node's new messages as events (deterministic ``client_event_id`` per message id,
   so a node re-run from a checkpoint never duplicates them),
2. asks the workflow's trigger whether to compact before the next step,
3. on ``compact``: requests the job for the head it just wrote and waits for it (synchronous
   guard, bounded by ``compaction_timeout``),
4. reads the context with ``min_seq`` = that head (read-after-write),
5. refuses to hand over an oversized context: when the trigger said ``retrieve_or_block``, the
   compaction did not finish in time (or failed), or summary + tail + next step exceeds the safe
   budget, it calls the caller's targeted-retrieval function or raises
   :class:`ContextBudgetExceeded`,
6. returns the messages for the model plus a :class:`TraceHandle` that records the consumer trace
   (graph release, thread id, checkpoint id, summary id, tail watermark, context id, manifest hash).

LangGraph itself is optional: it is only consulted (for thread and checkpoint ids) when it is
already imported, i.e. when we run inside a graph. Nothing here imports Django.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memoryhub.client import (
    CompactionTimeout,
    Context,
    ContextBudgetExceeded,
    ContextSummary,
    Decision,
    Event,
    Job,
    MemoryHubClient,
    Trace,
)

__all__ = [
    "ContextBudgetExceeded",
    "PreparedContext",
    "RetrievalRequest",
    "RetrievalResult",
    "TraceHandle",
    "context_to_messages",
    "current_langgraph_ids",
    "message_to_events",
    "prepare_context",
    "render_fact",
    "render_summary",
    "stable_id",
    "to_langchain_messages",
]

# Namespace for deterministic client_event_ids / model_call_ids derived from framework ids.
_NAMESPACE = uuid.UUID("6f1c1d8e-3d55-4c64-9b8e-5a0f3f4b2c11")
_ROLE_BY_LC_TYPE = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}
_MODEL_ROLES = {"user", "assistant", "system", "tool"}


def stable_id(*parts: Any) -> str:
    """A uuid5 derived from framework ids: the same inputs give the same id on every re-run."""
    return str(uuid.uuid5(_NAMESPACE, "/".join(str(p) for p in parts)))


def _text(content: Any) -> str:
    """Plain text of a message content (LangChain content blocks are joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            else:
                parts.append(json.dumps(block, sort_keys=True, default=str))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True, default=str)


# -- messages → events ---------------------------------------------------------------------------


def message_to_events(message: Any, *, workflow_id: str, agent: str) -> list[dict[str, Any]]:
    """Turn one message into MemoryHub events.

    Accepts event-shaped dicts (with ``kind``: passed through), chat dicts (``role``/``content``,
    optional ``tool_calls`` / ``tool_call_id``), ``(role, content)`` tuples and LangChain messages.
    Structured ``facts``, ``refs``, ``side_effect`` and a ``kind`` override may ride along in a
    dict or in a LangChain message's ``additional_kwargs``. Each tool call becomes its own
    ``tool_call`` event so the server can see unresolved call/result pairs.
    """
    if isinstance(message, Mapping) and "kind" in message:
        event = dict(message)
        event.setdefault("agent", agent)
        return [event]

    extra: Mapping[str, Any]
    if isinstance(message, tuple) and len(message) == 2:
        role, content = message
        msg_id, name, extra, tool_calls, tool_call_id = None, None, {}, [], None
    elif isinstance(message, Mapping):
        role = message.get("role", "user")
        content = message.get("content")
        msg_id = message.get("id") or message.get("client_event_id")
        name = message.get("name")
        extra = message
        tool_calls = list(message.get("tool_calls") or [])
        tool_call_id = message.get("tool_call_id")
    elif hasattr(message, "type") and hasattr(message, "content"):  # LangChain BaseMessage
        role = _ROLE_BY_LC_TYPE.get(message.type, message.type)
        content = message.content
        msg_id = getattr(message, "id", None)
        name = getattr(message, "name", None)
        extra = getattr(message, "additional_kwargs", None) or {}
        tool_calls = list(getattr(message, "tool_calls", None) or [])
        tool_call_id = getattr(message, "tool_call_id", None)
    else:
        raise TypeError(f"cannot turn {type(message).__name__} into a MemoryHub event")

    def client_event_id(part: str) -> str | None:
        return stable_id(workflow_id, msg_id, part) if msg_id else None

    base = {"agent": name or agent, "role": role}
    events: list[dict[str, Any]] = []
    text = _text(content)
    if role == "tool":
        events.append({**base, "kind": "tool_result", "content": text, "tool_call_id": tool_call_id})
    elif text or not tool_calls:
        events.append({**base, "kind": extra.get("kind", "message"), "content": text})
    if events:
        for key in ("facts", "refs", "side_effect"):
            if extra.get(key):
                events[0][key] = extra[key]
        events[0]["client_event_id"] = client_event_id("content")
    for call in tool_calls:
        function = call.get("function") or {}
        call_id = call.get("id")
        payload = {
            "name": call.get("name") or function.get("name"),
            "args": call.get("args", function.get("arguments")),
        }
        events.append(
            {
                **base,
                "kind": "tool_call",
                "content": json.dumps(payload, sort_keys=True, default=str),
                "tool_call_id": call_id,
                "client_event_id": client_event_id(f"tool_call:{call_id}"),
            }
        )
    return [{k: v for k, v in e.items() if v is not None} for e in events]


# -- context → model messages --------------------------------------------------------------------


def render_fact(fact: Mapping[str, Any]) -> str:
    """One structured fact as a line: ``- [kind] key: text (state)`` (+ its source events, if any)."""
    line = f"- [{fact.get('kind')}] {fact.get('key')}: {fact.get('text')} ({fact.get('state', 'info')})"
    seqs = fact.get("source_seqs")
    return f"{line} [events {','.join(str(s) for s in seqs)}]" if seqs else line


def render_summary(summary: ContextSummary) -> str:
    """The summary as one system message: narrative, then its structured facts and open items."""
    content = summary.content or {}
    lines = [
        f"Memory summary S{summary.version} ({summary.status}) covering events up to #{summary.covers_to_seq}.",
        content.get("narrative", ""),
    ]
    facts = content.get("facts") or []
    if facts:
        lines.append("Facts:")
        lines.extend(render_fact(fact) for fact in facts)
    open_items = content.get("open_items") or []
    if open_items:
        lines.append("Open items:")
        lines.extend(
            f"- {_text(item) if not isinstance(item, Mapping) else _render_item(item)}" for item in open_items
        )
    return "\n".join(line for line in lines if line)


def _render_item(item: Mapping[str, Any]) -> str:
    return item.get("text") or json.dumps(dict(item), sort_keys=True, default=str)


def _render_event(event: Event) -> dict[str, Any]:
    # Only the content, whose tokens the server counted: structured facts are annotations of it
    # (a writer states them in the content too), so adding them here would break the budget math.
    text = event.content
    if event.kind == "tool_call":
        role, text = "assistant", f"[tool call {event.tool_call_id}] {text}"
    elif event.kind == "tool_result":
        role, text = "user", f"[tool result {event.tool_call_id}] {text}"
    else:
        role = event.role if event.role in _MODEL_ROLES - {"tool"} else "user"
    message: dict[str, Any] = {"role": role, "content": text, "seq": event.seq}
    if event.agent:
        message["name"] = event.agent
    return message


def context_to_messages(context: Context) -> list[dict[str, Any]]:
    """Model-facing messages: the summary (if any) as a system message, then every tail event."""
    messages: list[dict[str, Any]] = []
    if context.summary is not None:
        messages.append({"role": "system", "content": render_summary(context.summary)})
    messages.extend(_render_event(e) for e in context.tail)
    return messages


def to_langchain_messages(messages: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Convert chat dicts to LangChain message objects (needs langchain-core)."""
    # langchain-core is optional: this module imports without it (tests/client/test_import_isolation.py).
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    classes = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    out = []
    for message in messages:
        cls = classes.get(message["role"], HumanMessage)
        kwargs: dict[str, Any] = {"content": message["content"]}
        if message.get("name"):
            kwargs["name"] = message["name"]
        out.append(cls(**kwargs))
    return out


# -- LangGraph runtime ids -----------------------------------------------------------------------


def current_langgraph_ids() -> dict[str, str]:
    """thread_id / checkpoint_id / task_id of the LangGraph node running now ({} outside a graph).

    ``checkpoint_id`` is the checkpoint the node runs from (restoring it re-runs this node).
    Only looks when langgraph is already imported, so plain callers never pay for importing it.
    """
    if "langgraph" not in sys.modules:
        return {}
    ids: dict[str, str] = {}
    try:
        from langgraph.runtime import get_runtime

        info = getattr(get_runtime(), "execution_info", None)
    except (ImportError, RuntimeError):
        info = None
    if info is not None:
        for key in ("thread_id", "checkpoint_id", "task_id"):
            value = getattr(info, key, None)
            if value:
                ids[key] = str(value)
        return ids
    try:
        from langgraph.config import get_config

        configurable = get_config().get("configurable", {})
    except (ImportError, RuntimeError):
        return {}
    for key in ("thread_id", "checkpoint_id"):
        if configurable.get(key):
            ids[key] = str(configurable[key])
    return ids


# -- the guard -----------------------------------------------------------------------------------


@dataclass
class RetrievalRequest:
    """What a targeted-retrieval fallback gets: the context it must shrink and the room it has."""

    client: MemoryHubClient
    workflow_id: str
    context: Context
    decision: Decision
    budget_tokens: int  # tokens available for history: safe budget − expected next step
    reason: str


@dataclass
class RetrievalResult:
    """What a fallback returns: the messages to send and an honest account of what they hold."""

    messages: list[dict[str, Any]]
    input_tokens: int
    tail_to_seq: int  # highest seq contiguous with the summary watermark actually included
    summary_id: str | None = None
    source_refs: list[str] = field(default_factory=list)


RetrievalFn = Callable[[RetrievalRequest], RetrievalResult]


@dataclass
class TraceHandle:
    """Everything needed to record the consumer trace of the model call that uses this context."""

    client: MemoryHubClient
    workflow_id: str
    agent: str
    agent_run_id: str
    summary_id: str | None
    tail_to_seq: int
    context_id: str
    manifest_hash: str
    input_tokens: int
    graph_release: str | None = None
    thread_id: str | None = None
    checkpoint_id: str | None = None
    source_refs: list[str] = field(default_factory=list)
    fallback_reason: str | None = None
    model_call_id: str = ""
    recorded: Trace | None = None

    def record(
        self, model_call_id: str | None = None, input_tokens: int | None = None, **extra: Any
    ) -> Trace:
        """Record the trace (idempotent on model_call_id: recording twice returns the same trace)."""
        if model_call_id:
            self.model_call_id = model_call_id
        if self.fallback_reason:
            extra.setdefault("fallback_retrieval", True)
            extra.setdefault("fallback_reason", self.fallback_reason)
        self.recorded = self.client.record_trace(
            self.workflow_id,
            agent=self.agent,
            agent_run_id=self.agent_run_id,
            model_call_id=self.model_call_id,
            summary_id=self.summary_id,
            tail_to_seq=self.tail_to_seq,
            context_id=self.context_id or None,
            manifest_hash=self.manifest_hash or None,
            graph_release=self.graph_release,
            checkpoint_id=self.checkpoint_id,
            thread_id=self.thread_id,
            source_refs=self.source_refs or None,
            input_tokens=input_tokens if input_tokens is not None else self.input_tokens,
            **extra,
        )
        return self.recorded


@dataclass
class PreparedContext:
    """Result of :func:`prepare_context`."""

    messages: list[dict[str, Any]]
    context: Context
    decision: Decision
    head_seq: int
    job: Job | None
    trace: TraceHandle
    fallback_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def as_langchain(self) -> list[Any]:
        return to_langchain_messages(self.messages)


def prepare_context(
    client: MemoryHubClient,
    workflow_id: str,
    new_messages: Sequence[Any],
    expected_next_step_tokens: int,
    checkpoint_safe: bool = True,
    agent: str = "agent",
    graph_release: str | None = None,
    thread_id: str | None = None,
    checkpoint_id: str | None = None,
    *,
    agent_run_id: str | None = None,
    remaining_steps: int | None = None,
    compaction_timeout: float = 30.0,
    poll_interval: float = 0.25,
    retrieve: RetrievalFn | None = None,
    require_compaction: bool = True,
    source_refs: Sequence[str] | None = None,
    model_call_id: str | None = None,
) -> PreparedContext:
    """Append, ask the trigger, compact if told (bounded wait), read context, and guard the budget.

    ``require_compaction=True`` (default) treats a compaction that did not finish in time, or
    failed, as blocking even if the old context would still fit; with False the old context is
    used when it fits (and the fact is noted). Raises :class:`ContextBudgetExceeded` when blocked
    and ``retrieve`` is None or returns more than the budget allows.
    """
    ids = current_langgraph_ids() if thread_id is None or checkpoint_id is None else {}
    thread_id = thread_id or ids.get("thread_id")
    checkpoint_id = checkpoint_id or ids.get("checkpoint_id")
    agent_run_id = agent_run_id or ids.get("task_id") or str(uuid.uuid4())

    events = [e for m in new_messages for e in message_to_events(m, workflow_id=workflow_id, agent=agent)]
    if events:
        head = client.append_events(workflow_id, events).head_seq
    else:
        head = client.get_workflow(workflow_id).head_seq

    decision = client.trigger(
        workflow_id,
        expected_next_step_tokens=expected_next_step_tokens,
        checkpoint_safe=checkpoint_safe,
        remaining_steps=remaining_steps,
    )
    notes: list[str] = []
    blocked: str | None = None
    job: Job | None = None
    if decision.must_retrieve_or_block:
        blocked = "trigger said retrieve_or_block: " + "; ".join(decision.reasons)
    elif decision.should_compact:
        job = client.request_compaction(workflow_id, source_revision=head)
        try:
            job = client.wait_for_compaction(
                job.job_id, timeout=compaction_timeout, poll_interval=poll_interval
            )
        except CompactionTimeout as exc:
            problem = (
                f"compaction job {exc.job_id} not finished within {compaction_timeout:g}s ({exc.last_status})"
            )
        else:
            problem = (
                "" if job.took_effect else f"compaction job {job.job_id} ended {job.status} ({job.outcome})"
            )
        if problem and require_compaction:
            blocked = problem
        elif problem:
            notes.append(problem)

    context = client.get_context(workflow_id, min_seq=head)
    budget = decision.safe_budget
    projected = context.tokens.total + expected_next_step_tokens
    if blocked is None and budget and projected > budget:
        blocked = f"context {context.tokens.total} + next step {expected_next_step_tokens} = {projected} tokens > safe budget {budget}"

    handle = TraceHandle(
        client=client,
        workflow_id=workflow_id,
        agent=agent,
        agent_run_id=agent_run_id,
        summary_id=context.summary.summary_id if context.summary else None,
        tail_to_seq=context.tail_to_seq,
        context_id=context.context_id,
        manifest_hash=context.manifest_hash,
        input_tokens=context.tokens.total,
        graph_release=graph_release,
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        source_refs=list(source_refs or []),
        model_call_id=model_call_id
        or (
            # Same step + same context read = same call: a node re-run after a crash is recognised;
            # a re-run that read a different context is a different call and gets its own trace.
            stable_id(workflow_id, thread_id, checkpoint_id, agent_run_id, agent, context.manifest_hash)
            if checkpoint_id
            else str(uuid.uuid4())
        ),
    )
    if blocked is None:
        messages = context_to_messages(context)
    else:
        room = (budget - expected_next_step_tokens) if budget else 0
        if retrieve is None:
            raise ContextBudgetExceeded(
                f"refusing to send the context for {agent}: {blocked}",
                decision=decision,
                projected_tokens=projected,
                safe_budget=budget,
                reasons=[blocked, *decision.reasons],
            )
        result = retrieve(RetrievalRequest(client, workflow_id, context, decision, room, blocked))
        if budget and result.input_tokens > room:
            raise ContextBudgetExceeded(
                f"targeted retrieval for {agent} returned {result.input_tokens} tokens, only {room} fit: {blocked}",
                decision=decision,
                projected_tokens=result.input_tokens + expected_next_step_tokens,
                safe_budget=budget,
                reasons=[blocked],
            )
        messages = result.messages
        handle.summary_id = result.summary_id
        handle.tail_to_seq = result.tail_to_seq
        handle.input_tokens = result.input_tokens
        handle.source_refs = list(dict.fromkeys([*handle.source_refs, *result.source_refs]))
        handle.fallback_reason = blocked
    return PreparedContext(
        messages=messages,
        context=context,
        decision=decision,
        head_seq=head,
        job=job,
        trace=handle,
        fallback_reason=blocked,
        notes=notes,
    )
