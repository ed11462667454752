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

**What the compaction lost comes back to the caller.** The server answers the recorded compaction
with its verdict (``memoryhub.memory.repair``); :meth:`MemoryHubSession.take_handback` returns
what was lost as input items to prepend to the next turn (the SDK's compaction session gives the
session no way to add items the model reads, so the caller does it)::

    result = await Runner.run(agent, "Where is order 1234?", session=session)
    extra = base.take_handback()  # [] or [{"role": "user", "content": "Kept from before the summary …"}]
    result = await Runner.run(agent, [*extra, {"role": "user", "content": "And the refund?"}], session=session)

An encrypted compaction is opaque: what it lost is unknown and nothing is handed back.

Needs the ``openai-agents`` package (``pip install 'memoryhub-audit-client[openai-agents]'``); no Django.
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

from memoryhub.client import Event, MemoryHubClient
from memoryhub.client.errors import NotFound
from memoryhub.client.resilience import ResilientHub, SpooledRequest
from memoryhub.integrations.langgraph import stable_id
from memoryhub.integrations.recorder import opaque_content

__all__ = [
    "COMPACTOR_NAME",
    "MemoryHubSession",
    "compaction_content",
    "compaction_session",
    "handback_items",
    "item_to_event",
]

logger = logging.getLogger(__name__)

COMPACTOR_NAME = "openai-responses-compact"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(b"").hexdigest()
ABSENT_SUMMARY = "application/vnd.memoryhub.absent-summary"  # as the Claude Code hook records one
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


def replay(events: Sequence[Event]) -> list[tuple[str, int | None, dict[str, Any]]]:
    """The session's items after ``events`` (those after its last compaction, in order): item
    events become items; a ``pop_item`` marker withdraws the item it names, a ``clear_session``
    marker every item before it. Markers are never items."""
    items: list[tuple[str, int | None, dict[str, Any]]] = []
    for event in events:
        cid = event.client_event_id or ""
        if cid.startswith(ITEM_PREFIX):
            items.append((cid, event.token_count, _event_to_item(event)))
        elif cid.startswith(POP_PREFIX):
            items = [i for i in items if i[0] != cid[len(POP_PREFIX) :]]
        elif cid.startswith(CLEAR_PREFIX):
            items = []
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
    """A Session whose every item is a MemoryHub event and whose compactions are summary versions.

    It talks to MemoryHub through a :class:`~memoryhub.client.resilience.ResilientHub`: a write
    costs the agent at most the hub's deadline (default 200 ms) and is spooled when MemoryHub is
    down or slow; a new session reads its items back (within the deadline; an unreachable
    MemoryHub starts it empty, with the hub's one warning). Without ``hub`` or ``client`` it reads
    ``MEMORYHUB_URL``/``MEMORYHUB_API_KEY`` and raises ``NotConfigured`` here when either is missing.
    """

    def __init__(
        self,
        session_id: str,
        *,
        hub: ResilientHub | None = None,
        client: MemoryHubClient | None = None,
        workflow_id: str | None = None,
        agent: str = "openai-agent",
        workflow_name: str | None = None,
        session_settings: SessionSettings | None = None,
        deadline: float | None = None,
        spool_dir: Any = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.workflow_id = workflow_id or session_id
        if hub is None:
            options = {"component": "openai-agents", "deadline": deadline, "spool_dir": spool_dir}
            hub = (
                ResilientHub(client=client, **options)
                if client is not None
                else ResilientHub.from_env(**{k: v for k, v in options.items() if v is not None})
            )
        self.hub = hub
        self.agent = agent
        self.workflow_name = workflow_name
        self.compactor: dict[str, Any] = {"name": COMPACTOR_NAME}
        self.summaries: list[dict[str, Any]] = []  # the compactions recorded (answers of the server)
        self.last_repair: dict[str, Any] | None = None  # the server's verdict on the last compaction
        self._handback: list[dict[str, Any]] = []  # items to prepend to the next input (take_handback)
        self._items: list[tuple[str, int | None, dict[str, Any]]] | None = None  # (event id, tokens, item)
        self._lock = asyncio.Lock()

    # -- MemoryHub side (through the resilient hub: bounded, spooled) --------------------------------

    def _rebuild(self, client: MemoryHubClient) -> list[tuple[str, int | None, dict[str, Any]]]:
        try:
            observed = client.list_observed_compactions(self.workflow_id).get("observed") or []
        except NotFound:
            return []  # a new session
        ours = [
            o["covers_to_seq"]
            for o in observed
            if str(o.get("observation_id") or "").startswith(OBSERVATION_PREFIX)
        ]
        return replay(list(client.iter_events(self.workflow_id, after=max(ours, default=0))))

    def _load(self) -> list[tuple[str, int | None, dict[str, Any]]]:
        """The items, rebuilt on first use from the events after this session's last compaction."""
        if self._items is None:
            self.hub.drain(timeout=self.hub.deadline)  # what this machine spooled goes first
            self._items = self.hub.call(self._rebuild, default=[])
        return self._items

    def _step(self, **parts: Any) -> dict[str, Any] | None:
        """One idempotent step request, now or spooled (then None: the answer is not known)."""
        create = {"name": self.workflow_name, "source": "openai-agents"}
        body = MemoryHubClient.step_body(create=create, **parts)
        request = SpooledRequest("POST", MemoryHubClient.step_path(self.workflow_id), body)
        answer: dict[str, Any] | None = self.hub.call(
            lambda client: client.step(self.workflow_id, body), default=None, spool=request, ordered=True
        )
        return answer

    def _append(self, items: list[dict[str, Any]]) -> list[tuple[str, int | None, dict[str, Any]]]:
        events = [item_to_event(i, workflow_id=self.workflow_id, agent=self.agent) for i in items]
        answer = self._step(events=events) if events else None
        tokens = [e.get("token_count") for e in answer["events"]] if answer else [None] * len(events)
        return [(e["client_event_id"], t, i) for e, t, i in zip(events, tokens, items, strict=True)]

    def _mark(self, client_event_id: str, text: str) -> None:
        note = {"kind": "note", "agent": self.agent, "content": text, "client_event_id": client_event_id}
        self._step(events=[note])

    def _record(
        self, replaced: list[tuple[str, int | None, dict[str, Any]]], output_items: list[dict[str, Any]]
    ) -> None:
        """The compaction as an observed compaction of every event it replaced, and its output items
        as the events the session continues from (a restart hands them back as they were)."""
        last = replaced[-1][0] if replaced else ""
        events = [item_to_event(i, workflow_id=self.workflow_id, agent=self.agent) for i in output_items]
        for i, event in enumerate(events):  # stable ids: a retried compaction stores nothing twice
            event["client_event_id"] = ITEM_PREFIX + stable_id(self.workflow_id, "compacted", last, i)
        compactions = []
        if last:
            content = compaction_content(output_items)
            body: dict[str, Any] = (
                {"opaque": {"digest": content["opaque_digest"], "size_bytes": content["opaque_size"]}}
                if content.get("opaque")
                else {"text": content["narrative"]}
            )
            if not content.get("opaque") and not content["narrative"].strip():
                body = {"opaque": {"digest": EMPTY_DIGEST, "size_bytes": 0, "media_type": ABSENT_SUMMARY}}
            tokens = [t for _, t, _ in replaced]
            trigger: dict[str, Any] = {
                "kind": "auto",
                "detail": f"OpenAIResponsesCompactionSession replaced {len(replaced)} item(s)",
            }
            if None not in tokens:  # known when the items were delivered (not spooled)
                trigger["pre_tokens"] = sum(t for t in tokens if t is not None)
            compactions.append(
                {
                    "covers_to_event": last,
                    "compactor": self.compactor,
                    "trigger": trigger,
                    "observation_id": OBSERVATION_PREFIX + stable_id(self.workflow_id, last),
                    **body,
                }
            )
        answer = self._step(events=events, compactions=compactions)
        if answer:
            recorded = answer.get("compactions") or []
            self.summaries.extend(recorded)
            verdict = recorded[-1].get("repair") if recorded else None
            self.last_repair = verdict if isinstance(verdict, dict) else None
            self._handback = handback_items(self.last_repair)
        tokens_out = [e.get("token_count") for e in answer["events"]] if answer else [None] * len(events)
        self._items = [
            (e["client_event_id"], t, item)
            for e, t, item in zip(events, tokens_out, output_items, strict=True)
        ]

    async def _io(self, fn: Any, *args: Any) -> Any:
        return fn(*args) if self.hub.inline else await asyncio.to_thread(fn, *args)

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
            live.extend(await self._io(self._append, plain))

    async def pop_item(self) -> Any | None:
        async with self._lock:
            live = await self._io(self._load)
            if not live:
                return None
            cid, _, item = live.pop()
            # The marker names the item's event: a restart withdraws it too, and it is no item.
            await self._io(self._mark, f"{POP_PREFIX}{cid}", f"pop_item: the session withdrew {cid}")
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            live = await self._io(self._load)
            if live:
                await self._io(
                    self._mark,
                    f"{CLEAR_PREFIX}{uuid.uuid4()}",
                    f"clear_session: the session dropped {len(live)} item(s), {live[0][0]}..{live[-1][0]}",
                )
            live.clear()

    def take_handback(self) -> list[dict[str, Any]]:
        """What the last compaction lost, as input items to put before the next input (once).

        ``[]`` when nothing was lost, the compaction was opaque (encrypted: what it lost is
        unknown), the policy only observes, or MemoryHub was not reached. See :func:`handback_items`.
        """
        items, self._handback = self._handback, []
        return items

    async def _atomic_replace_items(self, output_items: list[Any]) -> bool:
        """Called by ``OpenAIResponsesCompactionSession`` with what ``responses.compact`` returned."""
        plain = [_as_dict(i) for i in output_items]
        async with self._lock:
            live = await self._io(self._load)
            await self._io(self._record, list(live), plain)
        return True


def handback_items(verdict: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The server's hand-back (``memoryhub.memory.repair``) as Responses input items: one user
    message holding the "kept from before the summary" block (the lost obligation sentences first,
    then the lost identifiers and values, each with its source seq), or ``[]``."""
    text = (verdict or {}).get("text")
    if not isinstance(text, str) or not text or (verdict or {}).get("verdict") != "repaired":
        return []
    return [{"role": "user", "content": text}]


def compaction_session(
    session: MemoryHubSession, *, model: str = "gpt-4.1", **kwargs: Any
) -> OpenAIResponsesCompactionSession:
    """The SDK's compaction session over ``session``; each compaction it applies is recorded."""
    session.compactor = {"name": COMPACTOR_NAME, "model": model, "version": f"openai-agents-{sdk_version}"}
    return OpenAIResponsesCompactionSession(session.session_id, session, model=model, **kwargs)
