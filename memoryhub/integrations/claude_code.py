"""Claude Code / Claude Agent SDK hooks: a session's transcript and its compactions into MemoryHub.

Register the console script ``memoryhub-hook`` as a ``PreCompact`` and ``PostCompact`` hook (and
optionally ``SessionStart``/``Stop``) in ``.claude/settings.json``::

    {"hooks": {"PreCompact": [{"hooks": [{"type": "command", "command": "memoryhub-hook"}]}],
               "PostCompact": [{"hooks": [{"type": "command", "command": "memoryhub-hook"}]}],
               "Stop": [{"hooks": [{"type": "command", "command": "memoryhub-hook"}]}]}}

The hook reads its JSON from stdin (``session_id``, ``transcript_path``, ``hook_event_name``,
``trigger``) and the session transcript (JSONL, one entry per line) it points to, and:

- appends every entry not yet sent as events of the workflow whose external id is the session id
  (created with ``source="claude-code"``); ``client_event_id`` is the entry's ``uuid`` (``#k`` for
  its k-th block), so a re-send never duplicates anything;
- records each ``compact_boundary`` system entry (``compactMetadata``: ``trigger`` manual/auto,
  ``preTokens``) with the compacted summary (the ``isCompactSummary`` user entry after it) as an
  observed compaction covering every event before the boundary (``observation_id`` = boundary
  uuid);
- records each assistant message as a consumer trace (``model_call_id`` = the API message id,
  ``input_tokens`` from its usage) naming the observed summary it was built on, so an artifact
  made in the session can be investigated like any other.

It reads ``MEMORYHUB_URL`` and ``MEMORYHUB_API_KEY`` like the Python client. It never blocks or
fails the user's session: any error is logged, the hook input is kept in a local spool
(``MEMORYHUB_HOOK_DIR``, default ``~/.memoryhub/claude-code``) that the next run retries first,
and the exit code is always 0.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("memoryhub.hook")

SOURCE = "claude-code"
COMPACTOR = "claude-code"
BATCH = 500
MAX_CONTENT = 100_000  # characters kept of one block (tool results can be huge); the rest is noted
SPOOL_LIMIT = 200  # hook inputs kept for retry; older ones are dropped (and logged)


# What the hook needs from MemoryHub (``sink``): the Python client's create_workflow,
# append_events, record_observed_compaction and record_trace, or an in-process stand-in with the
# same methods (the demo's ``ServiceSink``).
Sink = Any


# -- transcript → items ------------------------------------------------------------------------------


@dataclass
class EventItem:
    event: dict[str, Any]
    line: int = 0


@dataclass
class BoundaryItem:
    uuid: str
    trigger: str
    pre_tokens: int | None
    summary_text: str | None  # None while the summary entry is not written yet (PreCompact)
    version: str = ""
    timestamp: str = ""
    line: int = 0


@dataclass
class CallItem:
    model_call_id: str
    model: str
    input_tokens: int | None
    line: int = 0


@dataclass
class Parsed:
    items: list[Any] = field(default_factory=list)
    lines: int = 0  # complete lines consumed (a trailing partial line is left for next time)
    bad_lines: int = 0


def _clip(text: str) -> str:
    if len(text) <= MAX_CONTENT:
        return text
    return text[:MAX_CONTENT] + f"\n[… {len(text) - MAX_CONTENT} more characters not sent by memoryhub-hook]"


def _block_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _block_text(c.get("text", c.get("content", ""))) if isinstance(c, dict) else str(c)
            for c in content
        )
    return json.dumps(content, sort_keys=True) if content is not None else ""


def entry_events(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The events of one user/assistant transcript entry (text, tool calls, tool results)."""
    uuid = str(entry.get("uuid") or "")
    message = entry.get("message") or {}
    role = message.get("role") or entry.get("type") or ""
    agent = f"subagent:{entry['agentId']}" if entry.get("agentId") else "claude-code"
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])
    events: list[dict[str, Any]] = []
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind, text, tool_call_id = "message", "", ""
        btype = block.get("type")
        if btype == "text":
            text = block.get("text") or ""
        elif btype == "tool_use":
            kind, tool_call_id = "tool_call", str(block.get("id") or "")
            text = json.dumps({"name": block.get("name"), "input": block.get("input")}, sort_keys=True)
        elif btype == "tool_result":
            kind, tool_call_id = "tool_result", str(block.get("tool_use_id") or "")
            text = _block_text(block.get("content"))
        else:  # thinking, images, documents: not part of the replayable text record
            continue
        if not text.strip() or (kind != "message" and not tool_call_id):
            continue
        n = len(events)
        events.append(
            {
                "kind": kind,
                "role": role,
                "agent": agent,
                "content": _clip(text),
                "tool_call_id": tool_call_id,
                "client_event_id": f"cc:{uuid}" if n == 0 else f"cc:{uuid}#{n}",
            }
        )
    return events


def parse_transcript(lines: Iterable[str]) -> Parsed:
    """Items of a Claude Code transcript, in order. Unknown entries are skipped, bad lines counted."""
    out = Parsed()
    entries: list[dict[str, Any]] = []
    at: list[int] = []  # line index of each entry
    for raw in lines:
        if not raw.endswith("\n"):  # being written right now: leave it for the next run
            break
        out.lines += 1
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            out.bad_lines += 1
            continue
        if isinstance(entry, dict):
            entries.append(entry)
            at.append(out.lines - 1)
        else:
            out.bad_lines += 1
    seen_calls: set[str] = set()
    for i, entry in enumerate(entries):
        etype = entry.get("type")
        if etype == "system" and entry.get("subtype") == "compact_boundary":
            meta = entry.get("compactMetadata") or {}
            summary = next(
                (e for e in entries[i + 1 : i + 6] if e.get("type") == "user" and e.get("isCompactSummary")),
                None,
            )
            text = _block_text((summary.get("message") or {}).get("content")) if summary else None
            pre = meta.get("preTokens")
            out.items.append(
                BoundaryItem(
                    uuid=str(
                        entry.get("uuid")
                        or hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:32]
                    ),
                    trigger=str(meta["trigger"]) if meta.get("trigger") in ("auto", "manual") else "unknown",
                    pre_tokens=pre
                    if isinstance(pre, int) and not isinstance(pre, bool) and pre >= 0
                    else None,
                    summary_text=text,
                    version=str(entry.get("version") or ""),
                    timestamp=str(entry.get("timestamp") or ""),
                    line=at[i],
                )
            )
        elif etype == "user" and entry.get("isCompactSummary"):
            continue  # the summary itself: recorded with its boundary, not a source event
        elif etype in ("user", "assistant") and not entry.get("isMeta"):
            for event in entry_events(entry):
                out.items.append(EventItem(event, at[i]))
            message = entry.get("message") or {}
            if etype == "assistant" and message.get("id") and message["id"] not in seen_calls:
                seen_calls.add(message["id"])
                usage = message.get("usage") or {}
                tokens = [
                    usage.get(k)
                    for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
                ]
                ints = [t for t in tokens if isinstance(t, int)]
                out.items.append(
                    CallItem(
                        str(message["id"]),
                        str(message.get("model") or ""),
                        sum(ints) if ints else None,
                        at[i],
                    )
                )
    return out


# -- state and spool ---------------------------------------------------------------------------------


def hook_dir() -> Path:
    return Path(os.environ.get("MEMORYHUB_HOOK_DIR") or Path.home() / ".memoryhub" / "claude-code")


def _safe(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:24]


@dataclass
class SessionState:
    """What was already sent for one session (an optimisation: every send is idempotent anyway)."""

    lines: int = 0
    last_seq: int = 0
    summary_id: str | None = None
    model: str = ""

    @classmethod
    def load(cls, directory: Path, session_id: str) -> SessionState:
        path = directory / "state" / f"{_safe(session_id)}.json"
        try:
            data = json.loads(path.read_text())
            return cls(**{k: data[k] for k in ("lines", "last_seq", "summary_id", "model") if k in data})
        except (OSError, ValueError, TypeError):
            return cls()

    def save(self, directory: Path, session_id: str) -> None:
        path = directory / "state" / f"{_safe(session_id)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self.__dict__, "session_id": session_id}))
        tmp.replace(path)


def _unwrap(result: Any, key: str) -> Any:
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, key, None)


def sync_session(
    sink: Sink, session_id: str, transcript_path: str | os.PathLike, directory: Path | None = None
) -> dict[str, Any]:
    """Send what is new in the transcript; returns counts. Raises on failure (the caller spools)."""
    directory = directory or hook_dir()
    state = SessionState.load(directory, session_id)
    path = Path(transcript_path)
    with path.open(encoding="utf-8", errors="replace") as fh:
        parsed = parse_transcript(fh)
    if parsed.lines < state.lines:  # the file was rewritten (a new machine, a cleared file): resend all
        state = SessionState()
    stats = {
        "events": 0,
        "compactions": 0,
        "traces": 0,
        "bad_lines": parsed.bad_lines,
        "pending_boundary": False,
    }
    if state.lines == 0:
        sink.create_workflow(session_id, name=f"Claude Code session {session_id[:8]}", source=SOURCE)
    pending: list[dict[str, Any]] = []
    last_seq = state.last_seq
    summary_id = state.summary_id

    def flush() -> None:
        nonlocal last_seq
        while pending:
            chunk, pending[:] = pending[:BATCH], pending[BATCH:]
            result = sink.append_events(session_id, chunk)
            events = _unwrap(result, "events") or []
            if events:
                last_seq = max(last_seq, max(_unwrap(e, "seq") for e in events))
            stats["events"] += len(chunk)

    stop_at_boundary = False
    upto = parsed.lines
    model = state.model
    for item in parsed.items:
        if item.line < state.lines:
            continue  # sent by an earlier run (re-sending would be a no-op, only slower)
        if isinstance(item, EventItem):
            pending.append(item.event)
        elif isinstance(item, CallItem):
            model = item.model or model
            flush()
            if last_seq:
                sink.record_trace(
                    session_id,
                    agent="claude-code",
                    agent_run_id=session_id,
                    model_call_id=item.model_call_id,
                    summary_id=summary_id,
                    tail_to_seq=last_seq,
                    input_tokens=item.input_tokens,
                )
                stats["traces"] += 1
        elif isinstance(item, BoundaryItem):
            flush()
            if item.summary_text is None:
                stop_at_boundary = True  # PreCompact: the summary is not written yet; PostCompact sends it
                upto = item.line
                break
            if last_seq == 0:
                continue  # nothing before it was recorded (a transcript that starts with a boundary)
            result = sink.record_observed_compaction(
                session_id,
                last_seq,
                {
                    "name": COMPACTOR,
                    "model": model[:100],
                    "version": item.version[:50],
                    "settings": {"trigger": item.trigger},
                },
                text=item.summary_text or "(empty summary)",
                trigger={
                    "kind": item.trigger,
                    **({"pre_tokens": item.pre_tokens} if item.pre_tokens is not None else {}),
                },
                observation_id=f"cc-{item.uuid}"[:200],
            )
            if _unwrap(result, "activation") == "activated" or _unwrap(result, "status") == "ACTIVE":
                summary_id = _unwrap(result, "summary_id")
            stats["compactions"] += 1
    flush()
    stats["pending_boundary"] = stop_at_boundary
    state.lines = upto
    state.last_seq = last_seq
    state.summary_id = summary_id
    state.model = model
    state.save(directory, session_id)
    return stats


def _spool_path(directory: Path) -> Path:
    return directory / "spool.jsonl"


def _read_spool(directory: Path) -> list[dict[str, Any]]:
    try:
        lines = _spool_path(directory).read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            out.append(item)
    return out


def _write_spool(directory: Path, items: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if len(items) > SPOOL_LIMIT:
        log.warning("spool over %d inputs: dropping the %d oldest", SPOOL_LIMIT, len(items) - SPOOL_LIMIT)
        items = items[-SPOOL_LIMIT:]
    path = _spool_path(directory)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(i) + "\n" for i in items))
    tmp.replace(path)


def _valid_input(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("session_id"), str)
        and isinstance(data.get("transcript_path"), str)
    )


def run(hook_input: dict[str, Any], sink: Sink, directory: Path | None = None) -> dict[str, Any]:
    """Retry the spool, then sync this input's session. Failures go (back) to the spool."""
    directory = directory or hook_dir()
    queue = [*_read_spool(directory), hook_input]
    done: set[tuple[str, str]] = set()
    failed: list[dict[str, Any]] = []
    result: dict[str, Any] = {"synced": 0, "spooled": 0}
    for item in queue:
        key = (item["session_id"], item["transcript_path"])
        if key in done:
            continue  # one sync per session and run: it sends everything new
        try:
            sync_session(sink, item["session_id"], item["transcript_path"], directory)
            done.add(key)
            result["synced"] += 1
        except Exception as exc:
            log.warning(
                "memoryhub-hook: session %s not synced (%s); kept in the spool", item["session_id"], exc
            )
            if not any((f["session_id"], f["transcript_path"]) == key for f in failed):
                failed.append(
                    {k: item[k] for k in ("session_id", "transcript_path", "hook_event_name") if k in item}
                )
    _write_spool(directory, failed)
    result["spooled"] = len(failed)
    return result


def _setup_logging(directory: Path) -> None:
    if any(getattr(h, "memoryhub_hook", False) for h in log.handlers):
        return  # in-process (Agent SDK): configured by an earlier call
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(directory / "hook.log")
    except OSError:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.memoryhub_hook = True  # type: ignore[attr-defined]  # marks our handler to find it again
    log.addHandler(handler)
    log.setLevel(logging.INFO)


def handle(data: Any, directory: Path | None = None) -> dict[str, Any] | None:
    """Sync one hook input (the JSON Claude Code sends); never raises: errors are logged and spooled."""
    directory = directory or hook_dir()
    started = time.monotonic()
    if not _valid_input(data):
        log.warning("memoryhub-hook: input without session_id/transcript_path ignored: %.200r", data)
        return None
    try:
        # Inside the try: even a broken install only spools the input (the hook never fails the session).
        from memoryhub.client import MemoryHubClient

        timeout = float(os.environ.get("MEMORYHUB_HOOK_TIMEOUT", "10"))
        with MemoryHubClient.from_env(timeout=timeout, max_retries=1) as client:
            result = run(data, client, directory)
        log.info(
            "memoryhub-hook %s session %s: %s in %.0f ms",
            data.get("hook_event_name", "?"),
            data["session_id"],
            result,
            (time.monotonic() - started) * 1000,
        )
        return result
    except Exception:
        log.exception("memoryhub-hook failed")
        try:
            _write_spool(directory, [*_read_spool(directory), data])
        except Exception:
            log.exception("memoryhub-hook could not spool its input")
        return None


def main(argv: list[str] | None = None, stdin: Any = None) -> int:
    """Entry point of ``memoryhub-hook``: reads the hook JSON from stdin; always exits 0."""
    directory = hook_dir()
    _setup_logging(directory)
    try:
        raw = (stdin or sys.stdin).read()
        data = json.loads(raw or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        log.warning("memoryhub-hook: stdin is not hook JSON; ignored")
        return 0
    handle(data, directory)
    return 0


async def agent_sdk_hook(
    input_data: dict[str, Any], tool_use_id: str | None = None, context: Any = None
) -> dict[str, Any]:
    """The same hook for the Claude Agent SDK, in process::

        from claude_agent_sdk import ClaudeAgentOptions, HookMatcher
        from memoryhub.integrations.claude_code import agent_sdk_hook

        hooks = {e: [HookMatcher(hooks=[agent_sdk_hook])] for e in ("PreCompact", "PostCompact", "Stop")}
        options = ClaudeAgentOptions(hooks=hooks)

    The SDK passes the hook input (``session_id``, ``transcript_path``, ``hook_event_name``…) as a
    dict; the sync runs in a worker thread and its outcome never changes the agent's run.
    """
    _setup_logging(hook_dir())
    await asyncio.to_thread(handle, dict(input_data))
    return {}


def iter_fixture_lines(entries: Iterable[dict[str, Any]]) -> Iterator[str]:
    """JSONL lines of transcript entries (tests and the demo build transcripts with this)."""
    for entry in entries:
        yield json.dumps(entry) + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
