"""Anthropic Messages API server-side compaction (``compact_20260112``) → observed compactions.

With ``context_management={"edits": [{"type": "compact_20260112", ...}]}`` the API summarises
older context itself and returns a ``compaction`` content block (``content``: the summary text,
or ``encrypted_content``: opaque bytes to round-trip). ``record_anthropic_response`` records
each such block as an observed compaction of the workflow (covering every event sent before the
request), its text blocks as assistant events, and the call as a consumer trace::

    from memoryhub.client import MemoryHubClient
    from memoryhub.client.anthropic import record_anthropic_response

    response = anthropic.Anthropic().beta.messages.create(..., context_management=cm)
    record_anthropic_response(hub, "ticket-991", response, context_management=cm)

Works on the ``anthropic`` package's ``BetaMessage`` (optional extra ``memoryhub[anthropic]``)
or on the same data as a dict. Nothing here imports ``anthropic``.
"""

from __future__ import annotations

import hashlib
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


def record_anthropic_response(
    client: Any,
    workflow_id: str,
    response: Any,
    *,
    context_management: Any = None,
    covers_to_seq: int | None = None,
    agent: str = "anthropic",
    append_text: bool = True,
) -> dict[str, Any]:
    """Record one Messages API response: its compaction block(s), text, and the call itself.

    ``covers_to_seq`` defaults to the workflow head when called (every event sent so far was in
    the request the API compacted). Returns ``{"compactions": [...], "events": n, "trace_id"}``.
    A block with neither text nor encrypted content (a failed compaction) is skipped.
    """
    blocks = compaction_blocks(response)
    response_id = str(_get(response, "id") or "")
    model = str(_get(response, "model") or "")[:100]
    edit = _edit(context_management)
    recorded: list[dict[str, Any]] = []
    workflow = client.get_workflow(workflow_id)
    if covers_to_seq is None:
        covers_to_seq = workflow.head_seq
    usage = compaction_usage(response)
    # The request carried the earlier compaction block (round-tripped) if one is active.
    summary_id = workflow.active_summary_id
    for block in blocks:
        text, encrypted = block["content"], block["encrypted_content"]
        if not text and not encrypted:
            continue
        opaque = None
        if not text:
            raw = encrypted.encode("utf-8")
            opaque = {
                "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
                "size_bytes": len(raw),
                "media_type": "application/x-anthropic-encrypted-compaction",
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
        if covers_to_seq < 1:
            continue  # nothing recorded before the request: no event for the summary to cover
        result = client.record_observed_compaction(
            workflow_id,
            covers_to_seq,
            {"name": "anthropic", "model": model, "version": EDIT_TYPE, "settings": settings},
            text=text or None,
            opaque=opaque,
            trigger=trigger,
            observation_id=f"anthropic-{response_id}-{block['index']}"[:200],
        )
        recorded.append(result)
        if result.get("status") == "ACTIVE":
            summary_id = result["summary_id"]
    events = 0
    if append_text:
        texts = [
            _get(b, "text")
            for b in _get(response, "content", None) or []
            if _get(b, "type") == "text" and _get(b, "text")
        ]
        batch = [
            {
                "kind": "message",
                "role": "assistant",
                "agent": agent,
                "content": t,
                "client_event_id": f"anthropic:{response_id}:{i}",
            }
            for i, t in enumerate(texts)
        ]
        if batch:
            client.append_events(workflow_id, batch)
            events = len(batch)
    usage_obj = _get(response, "usage")
    input_tokens = _get(usage_obj, "input_tokens")
    trace = client.record_trace(
        workflow_id,
        agent=agent,
        agent_run_id=workflow_id,
        model_call_id=f"anthropic:{response_id}",
        summary_id=summary_id,
        tail_to_seq=max(covers_to_seq, 0),
        model=model,
        input_tokens=input_tokens if isinstance(input_tokens, int) else None,
    )
    return {"compactions": recorded, "events": events, "trace_id": _get(trace, "trace_id")}
