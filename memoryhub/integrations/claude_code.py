"""Claude Code / Claude Agent SDK hooks: a session's transcript and its compactions into MemoryHub.

Register the console script ``memoryhub-hook`` as a ``PreCompact`` and ``PostCompact`` hook (and
optionally ``SessionStart``/``Stop``) in ``.claude/settings.json``::

    {"hooks": {
      "PreCompact":  [{"hooks": [{"type": "command", "command": "memoryhub-hook", "async": true, "timeout": 10}]}],
      "PostCompact": [{"hooks": [{"type": "command", "command": "memoryhub-hook", "async": true, "timeout": 10}]}],
      "Stop":        [{"hooks": [{"type": "command", "command": "memoryhub-hook", "async": true, "timeout": 10}]}]}}

(as README's settings block: ``async`` so Claude Code never waits on the sync, ``timeout`` as a
second bound beside the hook's own deadline).

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
  made in the session can be investigated like any other;
- hands back what a compaction lost: the server answers each recorded compaction with its verdict
  (``memoryhub.memory.repair``); registered as a ``SessionStart`` hook too, the run that follows a
  compaction (``source: "compact"``) prints ``{"hookSpecificOutput": {"hookEventName":
  "SessionStart", "additionalContext": …}}``: the lost obligation sentences first, then the lost
  identifiers and values, each with its source seq, within the hook's deadline. Nothing is
  printed when nothing was lost, when the summary is opaque (what it lost is unknown) or when
  MemoryHub was not reached (the session goes on as Claude Code left it). Claude Code cannot keep
  its pre-compaction context, so a policy ``gate: block`` hands back instead (the verdict says so).

Register it for ``SessionStart`` with the other events::

    "SessionStart": [{"matcher": "compact", "hooks": [{"type": "command", "command": "memoryhub-hook"}]}]

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
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

log = logging.getLogger("memoryhub.hook")

SOURCE = "claude-code"
COMPACTOR = "claude-code"
BATCH = 500  # timeline items a request (events and traces); the server takes up to 1,000
DEFAULT_TIMEOUT = 5.0  # seconds one invocation may take in all (MEMORYHUB_HOOK_TIMEOUT)
HARD_STOP_GRACE = 1.0  # after the deadline, the console script exits even if a read still hangs
# A boundary whose transcript holds no summary is recorded as absent: an empty opaque payload of
# this type (never a placeholder text that would be validated as if the framework wrote it).
ABSENT_SUMMARY = "application/vnd.memoryhub.absent-summary"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(b"").hexdigest()
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
    summary_text: str | None  # None: no summary (see ``pending``)
    version: str = ""
    timestamp: str = ""
    line: int = 0
    pending: bool = False  # the boundary is the last entry: its summary is not written yet
    preserved_events: int = 0  # events of the preserved segment (kept verbatim, not summarised)
    preserved_head_missing: bool = False  # compactMetadata names a head entry the file lacks


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


def _is_conversation(entry: dict[str, Any]) -> bool:
    return entry.get("type") in ("user", "assistant") and not entry.get("isMeta")


def _boundary(
    entry: dict[str, Any],
    after: list[dict[str, Any]],
    line: int,
    line_of: dict[str, int],
    items_before: list[Any],
) -> BoundaryItem:
    """A ``compact_boundary`` entry with its summary (the ``isCompactSummary`` user entry written
    after it, attachments may come between) and its preserved segment.

    No summary before the conversation goes on: the summary is absent (recorded as such); nothing
    after the boundary yet: it is pending (PreCompact, or a file being written)."""
    meta = entry.get("compactMetadata") or {}
    summary_text: str | None = None
    pending = True
    for later in after:
        if later.get("type") == "user" and later.get("isCompactSummary"):
            summary_text = _block_text((later.get("message") or {}).get("content")).strip() or None
            pending = False
            break
        if _is_conversation(later) or (
            later.get("type") == "system" and later.get("subtype") == "compact_boundary"
        ):
            pending = False
            break
    preserved, head_missing = 0, False
    segment = meta.get("preservedSegment")
    if isinstance(segment, dict) and segment.get("headUuid"):
        head_line = line_of.get(str(segment["headUuid"]))
        if head_line is None or head_line > line:
            head_missing = True
        else:  # the head entry and everything after it up to the boundary is kept verbatim
            preserved = sum(1 for it in items_before if isinstance(it, EventItem) and it.line >= head_line)
    pre = meta.get("preTokens")
    return BoundaryItem(
        uuid=str(
            entry.get("uuid") or hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:32]
        ),
        trigger=str(meta["trigger"]) if meta.get("trigger") in ("auto", "manual") else "unknown",
        pre_tokens=pre if isinstance(pre, int) and not isinstance(pre, bool) and pre >= 0 else None,
        summary_text=summary_text,
        version=str(entry.get("version") or ""),
        timestamp=str(entry.get("timestamp") or ""),
        line=line,
        pending=pending,
        preserved_events=preserved,
        preserved_head_missing=head_missing,
    )


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
    line_of: dict[str, int] = {}  # an entry's first line (a preserved entry may be written again later)
    for i, e in enumerate(entries):
        if e.get("uuid"):
            line_of.setdefault(str(e["uuid"]), at[i])
    for i, entry in enumerate(entries):
        etype = entry.get("type")
        if etype == "system" and entry.get("subtype") == "compact_boundary":
            out.items.append(_boundary(entry, entries[i + 1 :], at[i], line_of, out.items))
        elif etype == "user" and entry.get("isCompactSummary"):
            continue  # the summary itself: recorded with its boundary, not a source event
        elif etype in ("user", "assistant") and not entry.get("isMeta"):
            message = entry.get("message") or {}
            if etype == "assistant" and message.get("id") and message["id"] not in seen_calls:
                # The call read everything before this message (its own output is not its input);
                # one API message may be split over several entries: the first one stands for it.
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
            for event in entry_events(entry):
                out.items.append(EventItem(event, at[i]))
    return out


# -- deadline ----------------------------------------------------------------------------------------


class DeadlineReached(Exception):
    """The invocation's time is up: what was sent is saved, the rest waits in the spool."""


class Deadline:
    """One wall-clock budget for a whole hook invocation: every request, retry and back-off
    draws on it, so retries never multiply it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self) -> float:
        return self.at - time.monotonic()

    def check(self) -> None:
        if self.left() <= 0:
            raise DeadlineReached(f"the hook's {self.seconds:g} s deadline is reached")

    def sleep(self, seconds: float) -> None:
        """The client's back-off, cut to what is left."""
        time.sleep(max(0.0, min(seconds, self.left())))


def deadline_transport(deadline: Deadline) -> Any:
    """An httpx transport that gives every request at most the time left (connect, write, each
    read) and refuses to start one when none is left."""
    import httpx

    class _Transport(httpx.HTTPTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            left = deadline.left()
            if left <= 0:
                raise httpx.ConnectTimeout("memoryhub-hook deadline reached", request=request)
            asked = request.extensions.get("timeout") or {}
            request.extensions["timeout"] = {
                k: min(left, asked[k]) if asked.get(k) is not None else left
                for k in ("connect", "read", "write", "pool")
            }
            return super().handle_request(request)

    return _Transport()


def hook_timeout() -> float:
    """``MEMORYHUB_HOOK_TIMEOUT``: seconds one invocation may take in all (default 5)."""
    try:
        value = float(os.environ.get("MEMORYHUB_HOOK_TIMEOUT") or DEFAULT_TIMEOUT)
    except ValueError:
        value = DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


# -- state and spool ---------------------------------------------------------------------------------


def hook_dir() -> Path:
    return Path(os.environ.get("MEMORYHUB_HOOK_DIR") or Path.home() / ".memoryhub" / "claude-code")


def _safe(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:24]


@dataclass
class SessionState:
    """What was already sent for one session, saved after every batch (every send is idempotent
    anyway: a lost or stale state re-sends, never duplicates)."""

    lines: int = 0  # transcript lines fully sent
    last_seq: int = 0  # the workflow's head after the last batch
    summary_id: str | None = None  # the observed summary the next calls were built on
    model: str = ""
    created: bool = False  # the workflow exists
    # The server's verdict on the last compaction recorded: {boundary, verdict, text, delivered}
    # (``text``: what it lost, to hand back at the next SessionStart with source "compact").
    handback: dict[str, Any] | None = None

    @classmethod
    def load(cls, directory: Path, session_id: str) -> SessionState:
        path = directory / "state" / f"{_safe(session_id)}.json"
        try:
            data = json.loads(path.read_text())
            return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        except (OSError, ValueError, TypeError):
            return cls()

    def save(self, directory: Path, session_id: str) -> None:
        path = directory / "state" / f"{_safe(session_id)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**self.__dict__, "session_id": session_id}))
        tmp.replace(path)


def _unwrap(result: Any, key: str) -> Any:
    if isinstance(result, dict):
        return result.get(key)
    return getattr(result, key, None)


def _record_timeline(sink: Sink, session_id: str, items: list[dict[str, Any]]) -> Any:
    """``POST …/timeline/``: events and the calls between them in one request."""
    method = getattr(sink, "record_timeline", None)
    if method is not None:
        return method(session_id, items)
    path = f"/api/v1/workflows/{quote(session_id, safe='')}/timeline/"
    return sink.request("POST", path, json={"items": items}, idempotent=True).json()


def sync_session(
    sink: Sink,
    session_id: str,
    transcript_path: str | os.PathLike,
    directory: Path | None = None,
    deadline: Deadline | None = None,
) -> dict[str, Any]:
    """Send what is new in the transcript; returns counts. Raises on failure (the caller spools).

    Sends at most ``BATCH`` items a request (whole transcript lines), saving its progress after
    each, so a run stopped by its deadline (or killed) resumes where it stopped.
    """
    directory = directory or hook_dir()
    deadline = deadline or Deadline(float("inf"))
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
    if not state.created:
        deadline.check()
        sink.create_workflow(session_id, name=f"Claude Code session {session_id[:8]}", source=SOURCE)
        state.created = True
    batch: list[dict[str, Any]] = []

    def flush(upto: int) -> None:
        """Send the batch; everything before line ``upto`` is then sent."""
        if batch:
            deadline.check()
            result = _record_timeline(sink, session_id, batch)
            state.last_seq = max(state.last_seq, int(_unwrap(result, "head_seq") or 0))
            stats["events"] += sum(1 for b in batch if "event" in b)
            stats["traces"] += sum(1 for b in batch if "trace" in b)
            batch.clear()
        if upto > state.lines:
            state.lines = upto
            state.save(directory, session_id)

    sent_any = state.last_seq > 0
    for item in parsed.items:
        if item.line < state.lines:
            continue  # sent by an earlier run (re-sending would be a no-op, only slower)
        if len(batch) >= BATCH and item.line > state.lines:
            flush(item.line)  # whole lines only: a saved position never splits an entry
        if isinstance(item, EventItem):
            batch.append({"event": item.event})
            sent_any = True
        elif isinstance(item, CallItem):
            state.model = item.model or state.model
            if sent_any:  # a call before any event read nothing MemoryHub holds
                batch.append(
                    {
                        "trace": {
                            "agent": "claude-code",
                            "agent_run_id": session_id,
                            "model_call_id": item.model_call_id,
                            "summary_id": state.summary_id,
                            "model": item.model[:100],
                            # Claude Code assembled this call's context: the server checks it read
                            # the summary + everything before it, and attests that read.
                            "attest_read": True,
                            **({"input_tokens": item.input_tokens} if item.input_tokens is not None else {}),
                        }
                    }
                )
        elif isinstance(item, BoundaryItem):
            flush(item.line)
            if item.pending:
                stats["pending_boundary"] = True  # PreCompact: PostCompact sends the summary
                break
            _record_boundary(sink, session_id, item, state, stats)
            flush(item.line + 1)
    else:
        flush(parsed.lines)
    return stats


def _record_boundary(
    sink: Sink, session_id: str, item: BoundaryItem, state: SessionState, stats: dict[str, Any]
) -> None:
    """One compaction: covers every event sent before the boundary except its preserved segment."""
    covers_to = state.last_seq - item.preserved_events
    if covers_to < 1:
        log.info(
            "compaction %s replaced no recorded event (covers_to_seq %d): not recorded", item.uuid, covers_to
        )
        return
    settings: dict[str, Any] = {"trigger": item.trigger}
    if item.preserved_events:
        settings["preserved_events"] = item.preserved_events
    if item.preserved_head_missing:
        settings["preserved_segment"] = "head entry not in the transcript: coverage may include it"
    body: dict[str, Any] = {"text": item.summary_text}
    if item.summary_text is None:  # the transcript holds no summary for this boundary: say so
        body = {"opaque": {"digest": EMPTY_DIGEST, "size_bytes": 0, "media_type": ABSENT_SUMMARY}}
    result = sink.record_observed_compaction(
        session_id,
        covers_to,
        {
            "name": COMPACTOR,
            "model": state.model[:100],
            "version": item.version[:50],
            "settings": settings,
        },
        trigger={
            "kind": item.trigger,
            **({"pre_tokens": item.pre_tokens} if item.pre_tokens is not None else {}),
            **({"detail": "no summary in the transcript"} if item.summary_text is None else {}),
        },
        observation_id=f"cc-{item.uuid}"[:200],
        **body,
    )
    if _unwrap(result, "activation") == "activated" or _unwrap(result, "status") == "ACTIVE":
        state.summary_id = _unwrap(result, "summary_id")
    verdict = _unwrap(result, "repair")
    if isinstance(verdict, dict):
        state.handback = {
            "boundary": item.uuid,
            "verdict": verdict.get("verdict"),
            "text": verdict.get("text") or "",
            "delivered": False,
        }
        stats["repair"] = verdict.get("verdict")
    stats["compactions"] += 1


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
        if isinstance(item, dict) and _valid_input(item):
            out.append(item)
    return out


def _write_spool(directory: Path, items: list[dict[str, Any]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    if len(items) > SPOOL_LIMIT:
        log.warning("spool over %d inputs: dropping the %d oldest", SPOOL_LIMIT, len(items) - SPOOL_LIMIT)
        items = items[-SPOOL_LIMIT:]
    path = _spool_path(directory)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(i) + "\n" for i in items))
    tmp.replace(path)


def _valid_input(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("session_id"), str)
        and isinstance(data.get("transcript_path"), str)
    )


def _key(item: dict[str, Any]) -> tuple[str, str]:
    return (item["session_id"], item["transcript_path"])


def run(
    hook_input: dict[str, Any], sink: Sink, directory: Path | None = None, deadline: Deadline | None = None
) -> dict[str, Any]:
    """Spool this input first (a killed run loses nothing), then sync every spooled session; a
    session leaves the spool once synced. Failures and what the deadline cut stay for next time."""
    directory = directory or hook_dir()
    deadline = deadline or Deadline(float("inf"))
    queue: list[dict[str, Any]] = []
    for item in [*_read_spool(directory), hook_input]:
        if _key(item) not in {_key(q) for q in queue}:  # one sync per session and run: it sends all
            queue.append(
                {k: item[k] for k in ("session_id", "transcript_path", "hook_event_name") if k in item}
            )
    _write_spool(directory, queue)
    pending = list(queue)
    result: dict[str, Any] = {"synced": 0, "spooled": 0}
    for item in queue:
        try:
            sync_session(sink, item["session_id"], item["transcript_path"], directory, deadline)
        except Exception as exc:
            log.warning(
                "memoryhub-hook: session %s not synced (%s); kept in the spool", item["session_id"], exc
            )
            if isinstance(exc, DeadlineReached):
                break
            continue
        pending.remove(item)
        result["synced"] += 1
        _write_spool(directory, pending)
    result["spooled"] = len(pending)
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


def handle(
    data: Any, directory: Path | None = None, deadline: Deadline | None = None
) -> dict[str, Any] | None:
    """Sync one hook input (the JSON Claude Code sends) within the deadline; never raises: errors
    are logged and the input stays spooled."""
    directory = directory or hook_dir()
    deadline = deadline or Deadline(hook_timeout())
    started = time.monotonic()
    if not _valid_input(data):
        log.warning("memoryhub-hook: input without session_id/transcript_path ignored: %.200r", data)
        return None
    try:
        # Inside the try: even a broken install only spools the input (the hook never fails the session).
        from memoryhub.client import MemoryHubClient

        with MemoryHubClient.from_env(
            timeout=deadline.seconds,
            max_retries=2,
            transport=deadline_transport(deadline),
            sleep=deadline.sleep,
        ) as client:
            result = run(data, client, directory, deadline)
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
            spool = _read_spool(directory)
            if _key(data) not in {_key(s) for s in spool}:
                _write_spool(directory, [*spool, data])
        except Exception:
            log.exception("memoryhub-hook could not spool its input")
        return None


CONTEXT_HEADER = (
    "MemoryHub checked the compaction that just happened against the conversation it replaced. "
    "The summary above left out the items below; treat them as still in force."
)


def session_start_output(data: Any, directory: Path | None = None) -> dict[str, Any] | None:
    """The ``SessionStart`` answer after a compaction (``source: "compact"``): the server's
    verdict on the compaction just recorded, as ``additionalContext`` (lost obligations first,
    then lost identifiers and values, each with its source seq). None when there is nothing to
    hand back (nothing lost, opaque content, MemoryHub not reached, or already handed back).
    Reads the local state only: the sync before it is what talked to the server."""
    if not (
        _valid_input(data)
        and data.get("hook_event_name") == "SessionStart"
        and data.get("source") == "compact"
    ):
        return None
    directory = directory or hook_dir()
    try:
        state = SessionState.load(directory, data["session_id"])
        handback = state.handback or {}
        if handback.get("delivered") or not handback.get("text"):
            return None
        text = handback["text"]
        # Handed back once; the text (conversation content) is not kept on disk after that.
        state.handback = {**handback, "delivered": True, "text": ""}
        state.save(directory, data["session_id"])
    except Exception:
        log.exception("memoryhub-hook: could not read the hand-back")
        return None
    return {
        "hookSpecificOutput": {
            "hookEventName": "SessionStart",
            "additionalContext": f"{CONTEXT_HEADER}\n{text}",
        }
    }


def _hard_stop(seconds: float) -> None:
    """Last resort behind the per-request bounds (a server trickling bytes): end the process.
    Safe at any point: the input is spooled first and progress is saved after every batch."""
    log.warning("memoryhub-hook: %g s deadline passed; exiting, the rest stays in the spool", seconds)
    logging.shutdown()
    os._exit(0)


USAGE = """usage: memoryhub-hook [--help]

A Claude Code hook command (PreCompact, PostCompact, SessionStart, Stop): reads the hook JSON
from stdin and sends what is new in the session transcript to MemoryHub. Always exits 0.

environment:
  MEMORYHUB_URL           MemoryHub base URL (required)
  MEMORYHUB_API_KEY       an API key with the ingest role (required)
  MEMORYHUB_HOOK_TIMEOUT  seconds one invocation may take in all, retries included (default 5)
  MEMORYHUB_HOOK_DIR      state, spool and log directory (default ~/.memoryhub/claude-code)
"""


def main(argv: list[str] | None = None, stdin: Any = None) -> int:
    """Entry point of ``memoryhub-hook``: reads the hook JSON from stdin; always exits 0."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0
    directory = hook_dir()
    _setup_logging(directory)
    deadline = Deadline(hook_timeout())
    watchdog = threading.Timer(deadline.seconds + HARD_STOP_GRACE, _hard_stop, (deadline.seconds,))
    watchdog.daemon = True
    watchdog.start()
    try:
        try:
            data = json.loads((stdin or sys.stdin).read() or "{}")
        except (OSError, ValueError, UnicodeDecodeError):
            log.warning("memoryhub-hook: stdin is not hook JSON; ignored")
            return 0
        handle(data, directory, deadline)
        output = session_start_output(data, directory)
        if output is not None:  # Claude Code adds it to the context the model reads next
            sys.stdout.write(json.dumps(output))
            sys.stdout.flush()
    finally:
        watchdog.cancel()
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
    dict; the sync runs in a worker thread, the agent waits at most the deadline for it, and its
    outcome never changes the agent's run.
    """
    _setup_logging(hook_dir())
    deadline = Deadline(hook_timeout())
    try:
        await asyncio.wait_for(
            asyncio.to_thread(handle, dict(input_data), None, deadline), deadline.seconds + HARD_STOP_GRACE
        )
    except TimeoutError:
        log.warning("memoryhub-hook: in-process sync passed its deadline; the agent goes on")
    return session_start_output(dict(input_data)) or {}


def iter_fixture_lines(entries: Iterable[dict[str, Any]]) -> Iterator[str]:
    """JSONL lines of transcript entries (tests and the demo build transcripts with this)."""
    for entry in entries:
        yield json.dumps(entry) + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
