"""Anthropic Messages API server-side compaction (``compact_20260112``) → observed compactions.

With ``context_management={"edits": [{"type": "compact_20260112", ...}]}`` the API summarises
older context itself and returns a ``compaction`` content block (``content``: the summary text,
or ``encrypted_content``: opaque bytes to round-trip). ``record_anthropic_response`` creates the
workflow, appends the request's messages, records each such block as an observed compaction
covering them, the call as a consumer trace and the reply as an assistant event; the same
response recorded again changes nothing::

    from memoryhub.client import MemoryHubClient
    from memoryhub.client.anthropic import record_anthropic_response

    response = anthropic.Anthropic().beta.messages.create(..., messages=messages, context_management=cm)
    record_anthropic_response(hub, "ticket-991", response, messages=messages, context_management=cm)

Works on the ``anthropic`` package's ``BetaMessage`` (optional extra ``memoryhub-audit-client[anthropic]``)
or on the same data as a dict. Nothing here imports ``anthropic``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

DEFAULT_TRIGGER_TOKENS = 150_000  # compact_20260112's documented default trigger
EDIT_TYPE = "compact_20260112"


def _get(obj: Any, key: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _edit(context_management: Any) -> dict[str, Any] | None:
    for edit in _get(context_management, "edits", None) or []:
        if _get(edit, "type") == EDIT_TYPE:
            return dict(edit) if isinstance(edit, dict) else edit.model_dump()
    return None


def compaction_blocks(response: Any) -> list[dict[str, Any]]:
    """The response's compaction blocks as dicts ``{index, content, encrypted_content}``."""
    out = []
    for index, block in enumerate(_get(response, "content", None) or []):
        if _get(block, "type") == "compaction":
            out.append(
                {
                    "index": index,
                    "content": _get(block, "content"),
                    "encrypted_content": _get(block, "encrypted_content"),
                }
            )
    return out


def compaction_usage(response: Any) -> dict[str, int] | None:
    """Usage of the compaction iteration (its input tokens are the context it compacted)."""
    usage = _get(response, "usage")
    for item in _get(usage, "iterations", None) or []:
        if _get(item, "type") == "compaction":
            return {
                "input_tokens": int(_get(item, "input_tokens", 0) or 0),
                "output_tokens": int(_get(item, "output_tokens", 0) or 0),
            }
    return None


def _text_of(content: Any) -> str:
    """The replayable text of a message's content: text, tool use and tool results (a compaction
    block is recorded as a compaction, thinking is not part of the record)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = _get(block, "type")
        if kind == "text":
            parts.append(str(_get(block, "text") or ""))
        elif kind == "tool_use":
            parts.append(
                json.dumps({"tool_use": _get(block, "name"), "input": _get(block, "input")}, sort_keys=True)
            )
        elif kind == "tool_result":
            parts.append(_text_of(_get(block, "content")))
    return "\n".join(p for p in parts if p)


def message_events(messages: Any, agent: str) -> list[dict[str, Any]]:
    """Events for a request's ``messages``, one per message with text.

    A message's ``client_event_id`` is the digest of its role and text plus its occurrence (the
    second identical "ok" is another event): the next request's list repeats this one, the reply
    included, and re-sending them stores nothing twice.
    """
    seen: dict[str, int] = {}
    events = []
    for message in messages or []:
        role, text = str(_get(message, "role") or ""), _text_of(_get(message, "content"))
        if not text.strip():
            continue
        digest = hashlib.sha256(f"{role}\n{text}".encode()).hexdigest()[:32]
        n = seen[digest] = seen.get(digest, -1) + 1
        events.append(
            {
                "kind": "message",
                "role": role,
                "agent": agent,
                "content": text,
                "client_event_id": f"anthropic:{digest}:{n}",
            }
        )
    return events


def observation_id(block: Any) -> str:
    """A compaction block's observation id: derived from its content, so the block the next
    request round-trips names the same summary the response's block was recorded as."""
    payload = _get(block, "content") or _get(block, "encrypted_content") or ""
    return "anthropic-" + hashlib.sha256(str(payload).encode()).hexdigest()[:40]


def _carried_compaction(messages: Any) -> Any:
    """The last compaction block the request carried (what the API read instead of the history)."""
    found = None
    for message in messages or []:
        content = _get(message, "content")
        for block in content if isinstance(content, list) else []:
            if _get(block, "type") == "compaction" and (
                _get(block, "content") or _get(block, "encrypted_content")
            ):
                found = block
    return found


def _step_body(**parts: Any) -> dict[str, Any]:
    """A ``POST …/step/`` body (``MemoryHubClient.step_body``'s shape, without importing it:
    ``memoryhub.client.client`` imports this module)."""
    body: dict[str, Any] = {"create": {k: v for k, v in parts.pop("create").items() if v is not None}}
    body.update({key: list(items) for key, items in parts.items() if items})
    return body


def record_anthropic_response(
    client: Any,
    workflow_id: str,
    response: Any,
    *,
    messages: Any = None,
    context_management: Any = None,
    covers_to_seq: int | None = None,
    agent: str = "anthropic",
    append_text: bool = True,
    name: str | None = None,
) -> dict[str, Any]:
    """Record one Messages API call: the request's ``messages``, its compaction block(s), the call
    itself, then its reply. The same response recorded again changes nothing and returns the same
    result (``created`` False): two idempotent step requests (``POST …/step/``).

    ``client`` is anything with the client's ``step`` method: a :class:`MemoryHubClient` (errors
    raise), or ``memoryhub.integrations.anthropic``'s adapter of a ``ResilientHub`` (never raises:
    bounded by its deadline, spooled when MemoryHub is away: ``step`` answers None and the result
    says ``spooled``).
    The workflow is created if it does not exist (source ``anthropic``). A compaction covers the
    request's ``messages``; without them (plain client only) it covers every event recorded before
    the call (``covers_to_seq`` overrides), and with no event at all that is a ``ValueError``
    rather than a compaction silently left out. The call's trace names the summary it read: the
    response's compaction, else the compaction block the request carried, else none.
    """
    blocks = [b for b in compaction_blocks(response) if b["content"] or b["encrypted_content"]]
    response_id = str(_get(response, "id") or "")
    model = str(_get(response, "model") or "")[:100]
    edit = _edit(context_management)
    reply = (
        message_events([{"role": "assistant", "content": _get(response, "content", None)}], agent)
        if append_text
        else []
    )
    request = message_events(messages, agent)
    hub = getattr(client, "may_defer", False)  # its writes may be spooled: no answer to read
    if not request and hub and blocks:
        raise ValueError("record_anthropic_response through a ResilientHub needs messages=request_messages")
    coverage: dict[str, Any] = {}
    if covers_to_seq is not None:
        coverage = {"covers_to_seq": covers_to_seq}
    elif request:
        coverage = {"covers_to_event": request[-1]["client_event_id"]}
    elif not hub:
        client.create_workflow(workflow_id, name=name, source="anthropic")
        coverage = {
            "covers_to_seq": _head_before_reply(client, workflow_id, client.get_workflow(workflow_id), reply)
        }
    if blocks and coverage.get("covers_to_seq", 1) < 1:
        raise ValueError(
            f"workflow {workflow_id!r} has no event a compaction could cover: pass the request's "
            "messages (record_anthropic_response(..., messages=request_messages))"
        )
    usage = compaction_usage(response)
    compactions = []
    for block in blocks:
        text, encrypted = block["content"], block["encrypted_content"]
        body: dict[str, Any] = {"text": text}
        if not text:
            raw = encrypted.encode("utf-8")
            body = {
                "opaque": {
                    "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
                    "size_bytes": len(raw),
                    "media_type": "application/x-anthropic-encrypted-compaction",
                }
            }
        trigger: dict[str, Any] = {"kind": "auto"}
        if usage:
            trigger["pre_tokens"] = usage["input_tokens"]
        if edit is not None:
            value = _get(edit.get("trigger") or {}, "value")
            trigger["threshold_tokens"] = int(value) if isinstance(value, int) else DEFAULT_TRIGGER_TOKENS
        settings = {k: v for k, v in (edit or {}).items() if k != "instructions"}
        if edit and edit.get("instructions"):
            settings["instructions_sha256"] = hashlib.sha256(str(edit["instructions"]).encode()).hexdigest()
        compactions.append(
            {
                **coverage,
                **body,
                "compactor": {
                    "name": "anthropic",
                    "model": model,
                    "version": EDIT_TYPE,
                    "settings": settings,
                },
                "trigger": trigger,
                "observation_id": observation_id(block),
            }
        )
    create = {"name": name, "source": "anthropic"}
    first = client.step(workflow_id, _step_body(create=create, events=request, compactions=compactions))
    read = blocks[-1] if blocks else _carried_compaction(messages)
    trace: dict[str, Any] = {
        "agent": agent,
        "agent_run_id": workflow_id,
        "model_call_id": f"anthropic:{response_id}",
        "model": model,
        "attest_read": True,  # the API assembled the context: the server checks and attests the read
        **({"tail_to_seq": coverage["covers_to_seq"]} if "covers_to_seq" in coverage else {}),
        **({"tail_to_event": coverage["covers_to_event"]} if "covers_to_event" in coverage else {}),
    }
    if read is not None:
        trace["summary_observation_id"] = observation_id(read)
    else:
        trace["summary_id"] = None
    usage = _get(response, "usage")
    for key in ("input_tokens", "output_tokens"):
        tokens = _get(usage, key)
        if isinstance(tokens, int):
            trace[key] = tokens
    traces = [trace] if coverage else []  # a call with nothing recorded before it read nothing we hold
    second = client.step(workflow_id, _step_body(create=create, traces=traces, events=reply))
    if first is None or second is None:
        return {"compactions": [], "events": len(reply), "trace_id": None, "spooled": True, "repair": None}
    recorded = second.get("traces") or []
    compacted = first.get("compactions") or []
    verdict = compacted[-1].get("repair") if compacted else None
    return {
        "compactions": compacted,
        "events": len(reply),
        "trace_id": recorded[0].get("trace_id") if recorded else None,
        # The server's verdict on the (last) compaction: what it lost, to hand back (repair_block).
        "repair": verdict if isinstance(verdict, dict) else None,
    }


def repair_block(result: Any) -> dict[str, Any] | None:
    """What the response's compaction lost, as a text content block to put first in the next user
    message (after the compaction block the next request carries), or None: nothing lost, opaque
    (encrypted) content whose losses are unknown, a policy that only observes, or spooled::

        result = record_anthropic_response(hub, "ticket-991", response, messages=messages, context_management=cm)
        block = repair_block(result)
        next_user = {"role": "user", "content": [*([block] if block else []), {"type": "text", "text": question}]}
    """
    verdict = _get(result, "repair") or {}
    text = verdict.get("text") if isinstance(verdict, dict) else None
    if not isinstance(text, str) or not text or verdict.get("verdict") != "repaired":
        return None
    return {"type": "text", "text": text}


def _head_before_reply(client: Any, workflow_id: str, workflow: Any, reply: list[dict[str, Any]]) -> int:
    """The head before this response's reply: on a repeat call the reply is already stored (the
    head moved past it), and the call covered what came before it."""
    head = int(_get(workflow, "head_seq") or 0)
    if not reply or head < len(reply):
        return head
    stored = client.list_events(workflow_id, after=head - len(reply), until=head)
    if [_get(e, "client_event_id") for e in stored] == [e["client_event_id"] for e in reply]:
        return head - len(reply)
    return head
