"""The layer that keeps an agent running whatever MemoryHub does (deadline, breaker, spool, warn-once).

Every framework integration talks to MemoryHub through one :class:`ResilientHub`. It promises the
agent three things:

* **bounded overhead**: a call returns within ``deadline`` seconds (default 0.2 s) whether the
  server answers, refuses the connection, stalls after accepting it, or answers 5xx;
* **nothing lost**: a write that could not be delivered is appended to a bounded local spool
  (``spool_dir``, one JSON line per request) and re-sent, in order, on a later successful call
  (or by :meth:`ResilientHub.drain`). Spooled requests must be idempotent on the server (events by
  ``client_event_id``, traces by ``model_call_id``, observed compactions by ``observation_id``,
  the step endpoint by its events' ids), so a request that *did* reach the server before the
  deadline cut it is harmless to send again;
* **one warning per outage**: the first failure logs a WARNING on ``memoryhub.client.resilience``
  naming the target, the reason and the spool; later failures of the same outage log at DEBUG; the
  recovery logs once at INFO with the number of spooled requests delivered.

After a failure a circuit breaker stops calling the server for ``cooldown`` seconds (doubling up
to ``max_cooldown`` while failures continue), so a dead server costs nothing per call instead of
one deadline per call. Configuration errors are not runtime failures: :func:`HubConfig.from_env`
raises :class:`NotConfigured` at construction when ``MEMORYHUB_URL`` or ``MEMORYHUB_API_KEY`` is
missing (there is no default target).

Usage (what an integration does)::

    from memoryhub.client.resilience import ResilientHub, SpooledRequest

    hub = ResilientHub.from_env(component="my-integration")   # NotConfigured if env is missing
    # A write whose answer the agent does not need: sent now, or spooled and sent later.
    hub.send(SpooledRequest("POST", f"/api/v1/workflows/{wf}/traces/", body))
    # A call whose answer the agent uses; ``default`` is what the agent gets when MemoryHub is away
    # (its native behaviour), ``spool`` what must still reach the server eventually.
    answer = hub.call(lambda client: client.step(wf, body), default=None, spool=request)
    # Async frameworks: ``await hub.acall(...)`` / ``await hub.asend(...)`` (same bound, off the loop).
    hub.drain()      # deliver what is spooled now (also happens after any successful call)
    hub.close()

``hub.status()`` reports ``{"available", "spooled", "rejected", "failures", "last_error", ...}``.
A spooled request the server refuses as invalid (4xx other than 401/403/404/408/425/429, e.g. a 409 conflict) is moved to
``rejected.jsonl`` beside the spool and logged at ERROR: it is kept for a human, never retried
forever and never silently dropped. When the spool is full (``max_spool_bytes``), new requests are
refused with an ERROR log and counted in ``status()["dropped"]``.

Nothing here imports Django.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import functools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from .client import MemoryHubClient
from .errors import ApiError, MemoryHubError, NotConfigured, TransportError

__all__ = [
    "DEFAULT_DEADLINE",
    "HubConfig",
    "NotConfigured",
    "ResilientHub",
    "Spool",
    "SpooledRequest",
    "Unavailable",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_DEADLINE = 0.2  # seconds a MemoryHub call may add to a model call
DEFAULT_MAX_SPOOL_BYTES = 64 * 1024 * 1024
# Answers that say "not now" or "not this client" rather than "this request is wrong": keep it spooled.
# A 409 is not among them: the same idempotent request would conflict again forever.
_RETRY_LATER_STATUSES = frozenset({401, 403, 404, 408, 425, 429})


class Unavailable(MemoryHubError):
    """MemoryHub did not answer usefully within the deadline (only raised by :meth:`ResilientHub.call`
    when no ``default`` is given; integrations pass a default and never see it)."""


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise NotConfigured(f"{name}={raw!r} is not a number") from exc


def default_spool_dir(component: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryhub" / "spool" / component


@dataclass(frozen=True)
class HubConfig:
    """Where MemoryHub is and how much an agent lets it cost."""

    url: str
    api_key: str
    deadline: float = DEFAULT_DEADLINE
    spool_dir: Path | None = None  # None: ``default_spool_dir(component)``
    max_spool_bytes: int = DEFAULT_MAX_SPOOL_BYTES
    cooldown: float = 1.0
    max_cooldown: float = 30.0

    def __post_init__(self) -> None:
        if not self.url or not str(self.url).strip():
            raise NotConfigured("MemoryHub URL is empty: set MEMORYHUB_URL (e.g. https://memoryhub.example)")
        if not str(self.url).startswith(("http://", "https://")):
            raise NotConfigured(f"MemoryHub URL {self.url!r} must start with http:// or https://")
        if not self.api_key or not str(self.api_key).strip():
            raise NotConfigured("MemoryHub API key is empty: set MEMORYHUB_API_KEY")
        if not self.deadline > 0:
            raise NotConfigured(f"deadline must be > 0 seconds, got {self.deadline!r}")

    @classmethod
    def from_env(cls, **overrides: Any) -> HubConfig:
        """``MEMORYHUB_URL`` and ``MEMORYHUB_API_KEY`` (required), ``MEMORYHUB_DEADLINE_MS`` (default
        200), ``MEMORYHUB_SPOOL_DIR``; keyword arguments override the environment."""
        url = overrides.pop("url", None) or os.environ.get("MEMORYHUB_URL", "").strip()
        key = overrides.pop("api_key", None) or os.environ.get("MEMORYHUB_API_KEY", "").strip()
        if not url:
            raise NotConfigured(
                "MEMORYHUB_URL is not set: MemoryHub has no default address; set it (or pass url=/client=)"
            )
        if not key:
            raise NotConfigured(
                "MEMORYHUB_API_KEY is not set: create an API key and export it (or pass api_key=)"
            )
        if "deadline" not in overrides and os.environ.get("MEMORYHUB_DEADLINE_MS"):
            overrides["deadline"] = _env_float("MEMORYHUB_DEADLINE_MS", DEFAULT_DEADLINE * 1000) / 1000
        if "spool_dir" not in overrides and os.environ.get("MEMORYHUB_SPOOL_DIR"):
            overrides["spool_dir"] = Path(os.environ["MEMORYHUB_SPOOL_DIR"])
        return cls(url=url, api_key=key, **overrides)


@dataclass(frozen=True)
class SpooledRequest:
    """One idempotent HTTP request that can be replayed later exactly as it was meant."""

    method: str
    path: str
    json: Any = None

    def to_line(self) -> str:
        return json.dumps(
            {"method": self.method, "path": self.path, "json": self.json}, separators=(",", ":")
        )

    @classmethod
    def from_line(cls, line: str) -> SpooledRequest:
        data = json.loads(line)
        return cls(str(data["method"]), str(data["path"]), data.get("json"))


@dataclass
class Spool:
    """A bounded, process-safe, append-only file of requests waiting to be delivered.

    ``pending.jsonl`` holds the queue; ``rejected.jsonl`` the requests the server refused as invalid.
    An ``flock`` on ``spool.lock`` serialises writers and the drainer across processes.
    """

    directory: Path
    max_bytes: int = DEFAULT_MAX_SPOOL_BYTES
    dropped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _drain_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)

    @property
    def pending_path(self) -> Path:
        return self.directory / "pending.jsonl"

    @property
    def rejected_path(self) -> Path:
        return self.directory / "rejected.jsonl"

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.directory / "spool.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def put(self, request: SpooledRequest) -> bool:
        """Append ``request``; False (and an ERROR log) when the spool is full."""
        try:
            line = request.to_line() + "\n"
            return self._append(line, request)
        except (OSError, TypeError, ValueError) as exc:  # unwritable spool, unserialisable body
            self.dropped += 1
            logger.error(
                "MemoryHub spool %s: %s %s NOT kept (%r)", self.directory, request.method, request.path, exc
            )
            return False

    def _append(self, line: str, request: SpooledRequest) -> bool:
        with self._locked():
            size = self.pending_path.stat().st_size if self.pending_path.exists() else 0
            if size + len(line.encode("utf-8")) > self.max_bytes:
                self.dropped += 1
                logger.error(
                    "MemoryHub spool %s is full (%d bytes, max %d): %s %s was NOT kept (%d refused so far)",
                    self.directory,
                    size,
                    self.max_bytes,
                    request.method,
                    request.path,
                    self.dropped,
                )
                return False
            with open(self.pending_path, "a", encoding="utf-8") as out:
                out.write(line)
        return True

    def pending(self) -> list[SpooledRequest]:
        if not self.pending_path.exists():
            return []
        with open(self.pending_path, encoding="utf-8") as source:
            return [SpooledRequest.from_line(line) for line in source if line.strip()]

    def has_pending(self) -> bool:
        try:
            return self.pending_path.stat().st_size > 0
        except OSError:  # absent, or an unusable spool location (put() logs that)
            return False

    def reject(self, request: SpooledRequest) -> None:
        with self._locked(), open(self.rejected_path, "a", encoding="utf-8") as out:
            out.write(request.to_line() + "\n")

    def count(self) -> int:
        return self._lines(self.pending_path)

    def rejected_count(self) -> int:
        return self._lines(self.rejected_path)

    @staticmethod
    def _lines(path: Path) -> int:
        try:
            with open(path, "rb") as source:
                return sum(1 for line in source if line.strip())
        except OSError:
            return 0

    @contextlib.contextmanager
    def _draining(self) -> Iterator[None]:
        """One drainer at a time (threads and processes); writers are not blocked by it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._drain_lock, open(self.directory / "drain.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _head(self, limit: int) -> list[str]:
        with self._locked():
            if not self.pending_path.exists():
                return []
            lines: list[str] = []
            with open(self.pending_path, encoding="utf-8") as source:
                for line in source:
                    if line.strip():
                        lines.append(line)
                        if len(lines) >= limit:
                            break
            return lines

    def _pop_head(self, delivered: list[str], rejected: list[str]) -> None:
        """Remove the first ``len(delivered)`` lines (appends only ever add at the end)."""
        with self._locked():
            with open(self.pending_path, encoding="utf-8") as source:
                lines = [line for line in source if line.strip()]
            if lines[: len(delivered)] != delivered:  # another drainer got there first
                return
            if rejected:
                with open(self.rejected_path, "a", encoding="utf-8") as out:
                    out.writelines(rejected)
            tmp = self.pending_path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as out:
                out.writelines(lines[len(delivered) :])
            os.replace(tmp, self.pending_path)

    def drain(
        self, deliver: Callable[[SpooledRequest], bool | None], *, until: float, batch: int = 64
    ) -> int:
        """Send pending requests in order until one fails or ``time.monotonic()`` passes ``until``.

        ``deliver`` returns True (delivered), None (refused as invalid: move to rejected) or False /
        raises (not now: stop, keep it and everything after it). Returns how many were delivered.
        The spool is not locked while a request is in flight, so writers never wait for the network.
        """
        done = 0
        with self._draining():
            while time.monotonic() < until:
                head = self._head(batch)
                if not head:
                    break
                sent: list[str] = []
                rejected: list[str] = []
                stop = False
                for line in head:
                    if time.monotonic() >= until:
                        stop = True
                        break
                    try:
                        request = SpooledRequest.from_line(line)
                    except (ValueError, KeyError, TypeError):
                        logger.error("MemoryHub spool %s: unreadable line moved to rejected", self.directory)
                        outcome: bool | None = None
                    else:
                        try:
                            outcome = deliver(request)
                        except Exception:  # any failure means "keep it for later"
                            outcome = False
                    if outcome is False:
                        stop = True
                        break
                    sent.append(line)
                    if outcome is None:
                        rejected.append(line)
                    else:
                        done += 1
                if sent:
                    self._pop_head(sent, rejected)
                if stop:
                    break
        return done


class ResilientHub:
    """A :class:`MemoryHubClient` behind a deadline, a circuit breaker and a spool (see module doc)."""

    def __init__(
        self,
        config: HubConfig | None = None,
        *,
        client: MemoryHubClient | None = None,
        component: str = "client",
        deadline: float | None = None,
        spool_dir: Path | str | None = None,
        drain_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if config is None and client is None:
            config = HubConfig.from_env()
        self._owns_client = client is None  # a client passed in stays the caller's to close
        self.component = component
        self.deadline = float(deadline or (config.deadline if config else DEFAULT_DEADLINE))
        if self.deadline <= 0:
            raise NotConfigured(f"deadline must be > 0 seconds, got {self.deadline!r}")
        if client is None:
            assert config is not None
            # One attempt, every phase bounded by the deadline: retrying is the spool's job.
            client = MemoryHubClient(
                config.url, config.api_key, timeout=httpx.Timeout(self.deadline), max_retries=0
            )
            # The drainer is off the agent's path: a long catch-up batch may take seconds.
            self._drain_client = MemoryHubClient(
                config.url, config.api_key, timeout=httpx.Timeout(drain_timeout), max_retries=0
            )
        else:
            self._drain_client = client
        self.client = client
        self.target = client.base_url
        directory = spool_dir or (config.spool_dir if config and config.spool_dir else None)
        self.spool = Spool(
            Path(directory) if directory else default_spool_dir(component),
            max_bytes=config.max_spool_bytes if config else DEFAULT_MAX_SPOOL_BYTES,
        )
        self.cooldown = config.cooldown if config else 1.0
        self.max_cooldown = config.max_cooldown if config else 30.0
        self.drain_timeout = drain_timeout
        self._clock = clock
        self._state = threading.Lock()
        self._open_until = 0.0
        self._next_cooldown = self.cooldown
        self._failures = 0
        self._warned = False
        self._last_error: str | None = None
        self._delivered_since_outage = 0
        # The worker runs the HTTP call so the caller can stop waiting at the deadline. One worker:
        # live calls stay in order; a call stuck past its deadline blocks the worker, not the agent.
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memoryhub")
        # The drainer delivers the spool in the background, in order, one request at a time.
        self._drainer = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="memoryhub-drain"
        )
        self._drain_scheduled = False
        # An in-process client (the demo, tests) serves requests on the calling thread's database
        # connection: call it inline (its own timeout bounds it) and drain inline.
        self.inline = bool(getattr(client, "in_process", False))

    @classmethod
    def from_env(cls, component: str = "client", **overrides: Any) -> ResilientHub:
        """Build from the environment (:meth:`HubConfig.from_env`); raises :class:`NotConfigured`."""
        extra = {k: overrides.pop(k) for k in ("spool_dir", "deadline", "drain_timeout") if k in overrides}
        config = HubConfig.from_env(**overrides)
        return cls(config, component=component, **extra)

    # -- state -------------------------------------------------------------------------------------

    @property
    def available(self) -> bool:
        """False while the breaker is open (calls skip the network and go to the spool)."""
        with self._state:
            return self._clock() >= self._open_until

    def status(self) -> dict[str, Any]:
        with self._state:
            open_for = max(0.0, self._open_until - self._clock())
            failures, last_error = self._failures, self._last_error
        return {
            "target": self.target,
            "available": open_for == 0.0,
            "retry_in": round(open_for, 3),
            "failures": failures,
            "last_error": last_error,
            "spool_dir": str(self.spool.directory),
            "spooled": self.spool.count(),
            "rejected": self.spool.rejected_count(),
            "dropped": self.spool.dropped,
        }

    def _failed(self, reason: str) -> None:
        with self._state:
            self._failures += 1
            self._last_error = reason
            self._open_until = self._clock() + self._next_cooldown
            self._next_cooldown = min(self.max_cooldown, self._next_cooldown * 2)
            first = not self._warned
            self._warned = True
        if first:
            logger.warning(
                "MemoryHub at %s is unavailable (%s): the agent continues without it; records are "
                "spooled in %s and sent when it answers again (this warning is not repeated)",
                self.target,
                reason,
                self.spool.directory,
            )
        else:
            logger.debug("MemoryHub still unavailable (%s)", reason)

    def _succeeded(self) -> None:
        with self._state:
            recovered = self._warned
            self._failures = 0
            self._open_until = 0.0
            self._next_cooldown = self.cooldown
            self._warned = False
        if recovered:
            logger.info("MemoryHub at %s answers again; delivering the spool in the background", self.target)

    # -- calls -------------------------------------------------------------------------------------

    def call(
        self,
        fn: Callable[[MemoryHubClient], T],
        *,
        default: Any = Unavailable,
        spool: SpooledRequest | None = None,
        ordered: bool = False,
        deadline: float | None = None,
    ) -> T:
        """Run ``fn(client)`` within the deadline; on any failure spool ``spool`` and return ``default``.

        ``ordered=True`` (appends: the server numbers events in arrival order) never overtakes the
        spool: while requests are waiting there, this one is queued behind them and ``default``
        is returned at once. With no ``default`` a failure raises :class:`Unavailable`. An
        ``ApiError`` that says the request itself is wrong (400/413/422...) is not an outage: it is
        logged at ERROR, the request goes to ``rejected.jsonl``, and ``default`` is returned.
        """
        budget = self.deadline if deadline is None else deadline
        if not self.available:
            return self._fallback(spool, default, self._last_error or "circuit open")
        if ordered and self.spool.has_pending():
            self.kick_drain()
            return self._fallback(spool, default, "queued behind spooled requests")
        try:
            if self.inline:
                result = fn(self.client)
            else:
                result = self._worker.submit(fn, self.client).result(timeout=budget)
        except concurrent.futures.TimeoutError:
            return self._outage(spool, default, f"no answer within {budget * 1000:.0f} ms")
        except Exception as exc:  # whatever the transport or the server did, the agent goes on
            reason = self._classify(exc)
            if reason is not None:
                return self._outage(spool, default, reason)
            if spool is not None:
                self._reject(spool, exc)
            return self._fallback(None, default, str(exc))
        self._succeeded()
        self.kick_drain()
        return result

    def send(self, request: SpooledRequest, *, deadline: float | None = None, ordered: bool = False) -> bool:
        """Deliver an idempotent write now or spool it; True when the server has it now."""
        ok = self.call(
            lambda client: self._deliver(client, request),
            default=False,
            spool=request,
            deadline=deadline,
            ordered=ordered,
        )
        return bool(ok)

    def send_later(self, request: SpooledRequest) -> None:
        """Queue an idempotent write for the background drainer: costs the agent a file append only."""
        self.spool.put(request)
        self.kick_drain()

    async def acall(self, fn: Callable[[MemoryHubClient], T], **kwargs: Any) -> T:
        """:meth:`call` for async code: the same bound, without blocking the event loop."""
        return await asyncio.to_thread(functools.partial(self.call, fn, **kwargs))

    async def asend(self, request: SpooledRequest, **kwargs: Any) -> bool:
        return await asyncio.to_thread(self.send, request, **kwargs)

    def kick_drain(self) -> None:
        """Start delivering the spool in the background (no-op when empty, already running or open)."""
        if not self.spool.has_pending() or not self.available:
            return
        if self.inline:
            self._drain(time.monotonic() + self.drain_timeout)
            return
        with self._state:
            if self._drain_scheduled:
                return
            self._drain_scheduled = True
        try:
            self._drainer.submit(self._drain_job)
        except RuntimeError:  # closed
            with self._state:
                self._drain_scheduled = False

    def drain(self, timeout: float = 10.0) -> int:
        """Deliver spooled requests now, in this thread (in order, until one fails or ``timeout``)."""
        if not self.available:
            return 0
        return self._drain(time.monotonic() + timeout)

    def flush(self, timeout: float = 10.0) -> bool:
        """Deliver the spool now and wait until it is empty (True) or ``timeout`` passes (False).

        For scripts, tests and shutdown: it waits out an open breaker instead of giving up."""
        until = time.monotonic() + timeout
        while self.spool.has_pending():
            now = time.monotonic()
            if now >= until:
                return False
            if not self.available:  # wait the breaker out, then try again
                with self._state:
                    wait = self._open_until - self._clock()
                time.sleep(min(max(wait, 0.01), until - now))
                with self._state:
                    self._open_until = min(self._open_until, self._clock())
                continue
            if self._drain(until) == 0 and self.spool.has_pending():
                time.sleep(0.01)
        return True

    def close(self, drain_timeout: float = 0.0) -> None:
        """Optionally deliver what is spooled, then release the workers and connection pools."""
        if drain_timeout > 0:
            self.flush(drain_timeout)
        self._worker.shutdown(wait=False, cancel_futures=True)
        self._drainer.shutdown(wait=False, cancel_futures=True)
        if self._owns_client:
            self.client.close()
            self._drain_client.close()

    def __enter__(self) -> ResilientHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------------------------------

    @staticmethod
    def _classify(exc: BaseException) -> str | None:
        """A reason when ``exc`` means "MemoryHub is away, keep the request"; None for "bad request"."""
        if isinstance(exc, TransportError):
            return f"transport error: {exc.cause!r}"
        if isinstance(exc, ApiError):
            if exc.status >= 500 or exc.status in _RETRY_LATER_STATUSES:
                return f"HTTP {exc.status} {exc.code}: {exc.detail[:200]}"
            return None
        if isinstance(exc, httpx.HTTPError | OSError):
            return f"transport error: {exc!r}"
        if isinstance(exc, ValueError):  # an answer that is not the JSON we expect: a proxy, not MemoryHub
            return f"unexpected answer: {exc!r}"
        return f"unexpected error: {exc!r}"

    @staticmethod
    def _deliver(client: MemoryHubClient, request: SpooledRequest) -> bool:
        client.request(request.method, request.path, json=request.json, idempotent=True)
        return True

    def _drain_job(self) -> None:
        try:
            self._drain(time.monotonic() + self.drain_timeout * 4)
        finally:
            with self._state:
                self._drain_scheduled = False
        if self.spool.has_pending() and self.available:
            self.kick_drain()  # more arrived while draining

    def _drain(self, until: float) -> int:
        def deliver(request: SpooledRequest) -> bool | None:
            try:
                return self._deliver(self._drain_client, request)
            except Exception as exc:
                reason = self._classify(exc)
                if reason is not None:
                    self._failed(reason)
                    return False
                logger.error(
                    "MemoryHub refused spooled %s %s (%s): moved to %s",
                    request.method,
                    request.path,
                    exc,
                    self.spool.rejected_path,
                )
                return None

        delivered = self.spool.drain(deliver, until=until)
        if delivered:
            logger.info("MemoryHub: %d spooled request(s) delivered to %s", delivered, self.target)
        return delivered

    def _reject(self, request: SpooledRequest, exc: BaseException) -> None:
        logger.error(
            "MemoryHub refused %s %s as invalid (%s): kept in %s",
            request.method,
            request.path,
            exc,
            self.spool.rejected_path,
        )
        self.spool.reject(request)

    def _outage(self, spool: SpooledRequest | None, default: Any, reason: str) -> Any:
        self._failed(reason)
        return self._fallback(spool, default, reason)

    def _fallback(self, spool: SpooledRequest | None, default: Any, reason: str) -> Any:
        if spool is not None:
            self.spool.put(spool)
        if default is Unavailable:
            raise Unavailable(f"MemoryHub at {self.target} unavailable: {reason}")
        return default
