"""OpenAI Agents SDK session backed by MemoryHub, and a recorder for its compaction session.

::

    from agents import Runner
    from memoryhub.integrations.openai_agents import MemoryHubSession, compaction_session

    session = compaction_session(MemoryHubSession("support-42"), model="gpt-4.1")
    result = await Runner.run(agent, "Where is order 1234?", session=session)

:class:`MemoryHubSession` implements the SDK's ``Session`` protocol (``get_items``, ``add_items``,
``pop_item``, ``clear_session``). Every item added becomes a MemoryHub event (message → ``message``
with its role as given, ``function_call`` → ``tool_call``, ``function_call_output`` →
``tool_result``, anything else — reasoning, an encrypted ``compaction`` item — → a ``note`` holding
the item's exact JSON). Events are append-only: ``pop_item`` and ``clear_session`` append a marker
note naming the events they withdraw, before they answer. Items are served from memory; a new
process rebuilds them from the events after the session's last compaction, applying the markers,
so it holds the same items the SDK's own ``SQLiteSession`` would (a marker is never an item).

:func:`compaction_session` wraps it in the SDK's ``OpenAIResponsesCompactionSession``. When that
session replaces the history with what ``responses.compact`` returned, the replacement reaches
``MemoryHubSession._atomic_replace_items`` and is recorded as a summary version covering every
event it replaced (an observed compaction: trigger ``auto`` with ``pre_tokens`` = the replaced
events' tokens), compactor = ``openai-responses-compact`` + the model; then the returned items are
appended as the events the session continues from. The summary's content is the readable text of
the returned items; when they hold an encrypted ``compaction`` item it is an opaque stub (that
item's digest and size) and validation reports it as unverifiable rather than passed. Whether
it is activated is MemoryHub's decision (observed compactions are activated by compare-and-swap).

Needs the ``openai-agents`` package (``pip install 'memoryhub[openai-agents]'``); no Django.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from agents import __version__ as sdk_version
from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionSession
from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings

from memoryhub.client import Event, MemoryHubClient, Summary
from memoryhub.integrations.langgraph import stable_id
from memoryhub.integrations.recorder import opaque_content

__all__ = ["COMPACTOR_NAME", "MemoryHubSession", "compaction_content", "compaction_session", "item_to_event"]

logger = logging.getLogger(__name__)

COMPACTOR_NAME = "openai-responses-compact"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(b"").hexdigest()
# client_event_id prefixes: an item of the session, and the markers that withdraw items (events are
# append-only, so a pop or clear is itself an event; it is never handed back as an item).
ITEM_PREFIX = "oa:"
POP_PREFIX = "oa-pop:"
CLEAR_PREFIX = "oa-clear:"
OBSERVATION_PREFIX = "oa-compact-"
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "refusal"})


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
            role=str(item.get("role") or "user"),  # kept as given: developer, system, user, assistant
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
    else:  # reasoning, compaction (encrypted), anything else: kept exactly, handed back as is
        event.update(kind="note", content=json.dumps(item, sort_keys=True, default=str))
    event["client_event_id"] = ITEM_PREFIX + (
        stable_id(workflow_id, "item", item["id"]) if item.get("id") else str(uuid.uuid4())
    )
    content = event.pop("content", "")
    return {k: v for k, v in event.items() if v not in (None, "")} | {"content": content}


def _event_to_item(event: Event) -> dict[str, Any]:
    """An item event back as the Responses input item (for a session rebuilt from MemoryHub)."""
    if event.kind == "note":
        return dict(json.loads(event.content))
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
    return {"role": event.role or "user", "content": event.content}


def replay(events: Sequence[Event]) -> list[tuple[int, int, dict[str, Any]]]:
    """The session's items after ``events`` (those after its last compaction, in order): item
    events become items; ``pop_item`` and ``clear_session`` markers withdraw the ones they name."""
    items: list[tuple[int, int, dict[str, Any]]] = []
    for event in events:
        cid = event.client_event_id or ""
        if cid.startswith(ITEM_PREFIX):
            items.append((event.seq, event.token_count, _event_to_item(event)))
        elif cid.startswith(POP_PREFIX):
            seq = int(cid[len(POP_PREFIX) :].split(":")[0])
            items = [i for i in items if i[0] != seq]
        elif cid.startswith(CLEAR_PREFIX):
            low, high = (int(n) for n in cid[len(CLEAR_PREFIX) :].split(":")[0].split("-"))
            items = [i for i in items if not low <= i[0] <= high]
    return items


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
        self._items: list[tuple[int, int, dict[str, Any]]] | None = None  # (seq, tokens, item)
        self._compactions = 0  # recorded by this session (and its predecessors), numbers observation ids
        self._lock = asyncio.Lock()

    # -- MemoryHub side (synchronous HTTP, run off the event loop) ----------------------------------

    def _load(self) -> list[tuple[int, int, dict[str, Any]]]:
        """The items, rebuilt on first use from the events after this session's last compaction."""
        if self._items is None:
            self.client.create_workflow(self.workflow_id, name=self.workflow_name, source="openai-agents")
            observed = self.client.list_observed_compactions(self.workflow_id).get("observed") or []
            ours = [
                o["covers_to_seq"]
                for o in observed
                if str(o.get("observation_id") or "").startswith(OBSERVATION_PREFIX)
            ]
            after = max(ours, default=0)
            self._compactions = len(ours)
            self._items = replay(list(self.client.iter_events(self.workflow_id, after=after)))
        return self._items

    def _append(self, items: list[dict[str, Any]]) -> list[tuple[int, int]]:
        events = [item_to_event(i, workflow_id=self.workflow_id, agent=self.agent) for i in items]
        if not events:
            return []
        return [(e.seq, e.token_count) for e in self.client.append_events(self.workflow_id, events).events]

    def _mark(self, client_event_id: str, text: str) -> None:
        self.client.append_events(
            self.workflow_id,
            [{"kind": "note", "agent": self.agent, "content": text, "client_event_id": client_event_id}],
        )

    def _record(
        self, replaced: list[tuple[int, int, dict[str, Any]]], output_items: list[dict[str, Any]]
    ) -> None:
        """The compaction as an observed compaction of every event it replaced, then its output
        items as the events the session continues from (a restart hands them back as they were)."""
        end = max((seq for seq, _, _ in replaced), default=0)
        self._compactions += 1
        if end:
            content = compaction_content(output_items)
            body: dict[str, Any] = (
                {"opaque": {"digest": content["opaque_digest"], "size_bytes": content["opaque_size"]}}
                if content.get("opaque")
                else {"text": content["narrative"]}
            )
            if not content.get("opaque") and not content["narrative"].strip():
                body = {"opaque": {"digest": EMPTY_DIGEST, "size_bytes": 0, "media_type": "application/json"}}
            observed = self.client.record_observed_compaction(
                self.workflow_id,
                end,
                self.compactor,
                trigger={
                    "kind": "auto",
                    "pre_tokens": sum(tokens for _, tokens, _ in replaced),
                    "detail": f"OpenAIResponsesCompactionSession replaced {len(replaced)} item(s)",
                },
                observation_id=f"{OBSERVATION_PREFIX}{self._compactions}-{end}",
                **body,
            )
            self.summaries.append(self.client.get_summary(observed["summary_id"]))
        events = [item_to_event(i, workflow_id=self.workflow_id, agent=self.agent) for i in output_items]
        for i, event in enumerate(events):  # stable ids: a retried compaction stores nothing twice
            event["client_event_id"] = ITEM_PREFIX + stable_id(self.workflow_id, "compacted", end, i)
        stored = self.client.append_events(self.workflow_id, events).events if events else []
        self._items = [(e.seq, e.token_count, item) for e, item in zip(stored, output_items, strict=True)]

    async def _io(self, fn: Any, *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args) if self.offload else fn(*args)

    # -- Session protocol ---------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        async with self._lock:
            items = [item for _, _, item in await self._io(self._load)]
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        if not items:
            return
        plain = [_as_dict(i) for i in items]
        async with self._lock:
            live = await self._io(self._load)
            stored = await self._io(self._append, plain)
            live.extend((seq, tokens, item) for (seq, tokens), item in zip(stored, plain, strict=True))

    async def pop_item(self) -> Any | None:
        async with self._lock:
            live = await self._io(self._load)
            if not live:
                return None
            seq, _, item = live[-1]
            # Durable first: the marker names the event, so a restart withdraws it too.
            await self._io(
                self._mark,
                f"{POP_PREFIX}{seq}:{uuid.uuid4()}",
                f"pop_item: the session withdrew event #{seq}",
            )
            live.pop()
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            live = await self._io(self._load)
            seqs = [seq for seq, _, _ in live]
            if seqs:
                low, high = min(seqs), max(seqs)
                await self._io(
                    self._mark,
                    f"{CLEAR_PREFIX}{low}-{high}:{uuid.uuid4()}",
                    f"clear_session: the session dropped events #{low}..#{high}",
                )
            live.clear()

    async def _atomic_replace_items(self, output_items: list[Any]) -> bool:
        """Called by ``OpenAIResponsesCompactionSession`` with what ``responses.compact`` returned."""
        plain = [_as_dict(i) for i in output_items]
        async with self._lock:
            live = await self._io(self._load)
            await self._io(self._record, list(live), plain)
        return True


def compaction_session(
    session: MemoryHubSession, *, model: str = "gpt-4.1", **kwargs: Any
) -> OpenAIResponsesCompactionSession:
    """The SDK's compaction session over ``session``; each compaction it applies is recorded."""
    session.compactor = {"name": COMPACTOR_NAME, "model": model, "version": f"openai-agents-{sdk_version}"}
    return OpenAIResponsesCompactionSession(session.session_id, session, model=model, **kwargs)
