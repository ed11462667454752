"""OpenAI Agents SDK session backed by MemoryHub, and a recorder for its compaction session.

::

    from agents import Runner
    from memoryhub.integrations.openai_agents import MemoryHubSession, compaction_session

    session = compaction_session(MemoryHubSession("support-42"), model="gpt-4.1")
    result = await Runner.run(agent, "Where is order 1234?", session=session)

:class:`MemoryHubSession` implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``). Every item added becomes a MemoryHub event (message → ``message``,
``function_call`` → ``tool_call``, ``function_call_output`` → ``tool_result``, anything else →
``note``); popping or clearing appends a ``note`` saying which events were withdrawn (events are
append-only). Items are served from memory; a new process rebuilds them from MemoryHub's context
(readable summary + tail).

:func:`compaction_session` wraps it in the SDK's ``OpenAIResponsesCompactionSession``. When that
session replaces the history with what ``responses.compact`` returned, the replacement reaches
``MemoryHubSession._atomic_replace_items`` and is recorded as a summary version covering every
event it replaced, compactor = ``openai-responses-compact`` + the model. Its content is the
readable text of the returned items; when the output holds an encrypted ``compaction`` item, the
content is marked ``opaque`` with that item's digest and size (what it summarised cannot be read),
and validation reports it as unverifiable rather than passed.

Needs the ``openai-agents`` package (``pip install 'memoryhub[openai-agents]'``); no Django.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from agents import __version__ as sdk_version
from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionSession
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings

from memoryhub.client import Event, MemoryHubClient, Summary
from memoryhub.integrations.langgraph import stable_id
from memoryhub.integrations.recorder import opaque_content, record_compaction

__all__ = ["COMPACTOR_NAME", "MemoryHubSession", "compaction_content", "compaction_session", "item_to_event"]

logger = logging.getLogger(__name__)

COMPACTOR_NAME = "openai-responses-compact"
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "refusal"})
_ROLES = {"developer": "system"}


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS:
                parts.append(str(part.get("text") or part.get("refusal") or ""))
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(p for p in parts if p)
    return json.dumps(content, sort_keys=True, default=str)


def _as_dict(item: Any) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dict(dump(exclude_unset=True))
    raise TypeError(f"cannot record a {type(item).__name__} session item")


def item_to_event(item: Mapping[str, Any], *, workflow_id: str, agent: str) -> dict[str, Any]:
    """One Responses input item as one MemoryHub event."""
    kind_of = item.get("type") or ("message" if "role" in item else "")
    event: dict[str, Any] = {"agent": agent}
    if kind_of == "message":
        event.update(
            kind="message",
            role=_ROLES.get(str(item.get("role")), str(item.get("role") or "user")),
            content=_text(item.get("content")),
        )
    elif kind_of == "function_call":
        payload = {"name": item.get("name"), "arguments": item.get("arguments")}
        event.update(
            kind="tool_call",
            role="assistant",
            content=json.dumps(payload, sort_keys=True),
            tool_call_id=str(item.get("call_id") or ""),
        )
    elif kind_of == "function_call_output":
        output = item.get("output")
        event.update(
            kind="tool_result",
            role="tool",
            content=output if isinstance(output, str) else _text(output),
            tool_call_id=str(item.get("call_id") or ""),
        )
    else:
        summary = _text(item.get("summary")) if kind_of == "reasoning" else ""
        event.update(kind="note", content=summary or json.dumps(item, sort_keys=True, default=str))
    if item.get("id"):
        event["client_event_id"] = stable_id(workflow_id, "item", item["id"])
    content = event.pop("content", "")
    return {k: v for k, v in event.items() if v not in (None, "")} | {"content": content}


def _event_to_item(event: Event) -> dict[str, Any]:
    """A tail event back as a Responses input item (for a session rebuilt from MemoryHub)."""
    if event.kind == "tool_call":
        payload = json.loads(event.content or "{}")
        return {
            "type": "function_call",
            "call_id": event.tool_call_id,
            "name": payload.get("name"),
            "arguments": payload.get("arguments") or "{}",
        }
    if event.kind == "tool_result":
        return {"type": "function_call_output", "call_id": event.tool_call_id, "output": event.content}
    role = event.role if event.role in ("user", "assistant", "system") else "user"
    return {"role": role, "content": event.content}


def compaction_content(output_items: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Summary content for what a compaction returned: its readable text, marked ``opaque`` (with
    digest and size of the encrypted part) when an encrypted ``compaction`` item is among it."""
    readable = [_text(i.get("content")) for i in output_items if i.get("type", "message") == "message"]
    narrative = "\n\n".join(t for t in readable if t)
    encrypted = [str(i.get("encrypted_content") or "") for i in output_items if i.get("type") == "compaction"]
    if encrypted:
        return opaque_content("\n".join(encrypted)) | {"narrative": narrative}
    return {"narrative": narrative, "facts": []}


class MemoryHubSession(SessionABC):
    """A Session whose every item is a MemoryHub event and whose compactions are summary versions."""

    def __init__(
        self,
        session_id: str,
        *,
        client: MemoryHubClient | None = None,
        workflow_id: str | None = None,
        agent: str = "openai-agent",
        workflow_name: str | None = None,
        session_settings: SessionSettings | None = None,
        offload: bool = True,
    ) -> None:
        self.session_id = session_id
        # The client is synchronous: by default its calls run in a worker thread, off the event loop.
        self.offload = offload
        self.session_settings = session_settings
        self.workflow_id = workflow_id or session_id
        self.client = client or MemoryHubClient.from_env()
        self.agent = agent
        self.workflow_name = workflow_name
        self.compactor: dict[str, Any] = {"name": COMPACTOR_NAME}
        self.summaries: list[Summary] = []  # the compactions recorded by this session object
        self._items: list[tuple[int, dict[str, Any]]] | None = None  # (seq or 0 if derived, item)
        self._lock = asyncio.Lock()

    # -- MemoryHub side (synchronous HTTP, run off the event loop) ----------------------------------

    def _load(self) -> list[tuple[int, dict[str, Any]]]:
        if self._items is None:
            self.client.create_workflow(self.workflow_id, name=self.workflow_name, source="openai-agents")
            context = self.client.get_context(self.workflow_id)
            items: list[tuple[int, dict[str, Any]]] = []
            if context.summary is not None:
                narrative = (context.summary.content or {}).get("narrative") or ""
                if (context.summary.content or {}).get("opaque"):
                    logger.warning(
                        "session %s: summary S%s is opaque (encrypted by the provider); its content cannot be "
                        "rebuilt from MemoryHub",
                        self.session_id,
                        context.summary.version,
                    )
                if narrative:
                    items.append((0, {"role": "user", "content": narrative}))
            items.extend((e.seq, _event_to_item(e)) for e in context.tail)
            self._items = items
        return self._items

    def _append(self, items: list[dict[str, Any]]) -> list[int]:
        events = [item_to_event(i, workflow_id=self.workflow_id, agent=self.agent) for i in items]
        if not events:
            return []
        return [e.seq for e in self.client.append_events(self.workflow_id, events).events]

    def _note(self, text: str) -> None:
        self.client.append_events(self.workflow_id, [{"kind": "note", "agent": self.agent, "content": text}])

    def _record(self, replaced: list[tuple[int, dict[str, Any]]], output_items: list[dict[str, Any]]) -> None:
        end = max((seq for seq, _ in replaced), default=0)
        if end == 0:
            return
        summary = record_compaction(
            self.client,
            self.workflow_id,
            covers_from_seq=1,  # the previous compaction's output is part of what was compacted
            covers_to_seq=end,
            content=compaction_content(output_items),
            compactor=self.compactor,
        )
        self.summaries.append(summary)

    async def _io(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if self.offload else fn(*args)

    # -- Session protocol ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        async with self._lock:
            items = [item for _, item in await self._io(self._load)]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        plain = [_as_dict(i) for i in items]
        async with self._lock:
            live = await self._io(self._load)
            seqs = await self._io(self._append, plain)
            live.extend(zip(seqs, plain, strict=True))

    async def pop_item(self) -> Any | None:
        async with self._lock:
            live = await self._io(self._load)
            if not live:
                return None
            seq, item = live.pop()
            if seq:
                await self._io(self._note, f"pop_item: the session withdrew event #{seq}")
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            live = await self._io(self._load)
            seqs = [seq for seq, _ in live if seq]
            live.clear()
            if seqs:
                await self._io(
                    self._note, f"clear_session: the session dropped events #{min(seqs)}..#{max(seqs)}"
                )

    async def _atomic_replace_items(self, output_items: list[Any]) -> bool:
        """Called by ``OpenAIResponsesCompactionSession`` with what ``responses.compact`` returned."""
        plain = [_as_dict(i) for i in output_items]
        async with self._lock:
            live = await self._io(self._load)
            await self._io(self._record, list(live), plain)
            live[:] = [(0, item) for item in plain]  # derived items: not new events
        return True


def compaction_session(
    session: MemoryHubSession, *, model: str = "gpt-4.1", **kwargs: Any
) -> OpenAIResponsesCompactionSession:
    """The SDK's compaction session over ``session``; each compaction it applies is recorded."""
    session.compactor = {"name": COMPACTOR_NAME, "model": model, "version": f"openai-agents-{sdk_version}"}
    return OpenAIResponsesCompactionSession(session.session_id, session, model=model, **kwargs)
