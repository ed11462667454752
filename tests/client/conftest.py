"""A real local HTTP server, scripted per test, standing in for the network edge of the client."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

DROP = object()  # scripted "response": close the connection without answering


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # send these bytes instead of JSON


Script = Reply | object | Callable[[Recorded], "Reply | object"]


class ScriptedServer:
    """Routes (method, path) to a queue of replies; the last reply repeats once the queue is down to one."""

    def __init__(self, port: int = 0, *, listen_now: bool = True) -> None:
        self.routes: dict[tuple[str, str], deque[Script]] = {}
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                recorded = Recorded(
                    method=self.command,
                    path=parts.path,
                    query={k: v[-1] for k, v in parse_qs(parts.query).items()},
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
                reply = server._next(recorded)
                if reply is DROP:
                    self.close_connection = True
                    return
                assert isinstance(reply, Reply)
                payload = (
                    reply.raw
                    if reply.raw is not None
                    else (b"" if reply.body is None else json.dumps(reply.body).encode())
                )
                self.send_response(reply.status)
                if reply.raw is None and reply.body is not None:
                    self.send_header("Content-Type", "application/json")
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        # With listen_now=False nothing listens until start(): connections are refused until then.
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler, bind_and_activate=False)
        self._listening = False
        if listen_now:
            self._listen()
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def started(self) -> bool:
        return self._thread.is_alive()

    def _listen(self) -> None:
        self.httpd.server_bind()
        self.httpd.server_activate()
        self._listening = True

    def start(self) -> ScriptedServer:
        if not self._listening:
            self._listen()
        self._thread.start()
        return self

    def stop(self) -> None:
        if self.started:
            self.httpd.shutdown()
        self.httpd.server_close()

    def on(self, method: str, path: str, *replies: Script) -> None:
        self.routes[(method, path)] = deque(replies)

    def _next(self, recorded: Recorded) -> Reply | object:
        with self._lock:
            self.requests.append(recorded)
            queue = self.routes.get((recorded.method, recorded.path))
            if not queue:
                return Reply(
                    404, {"error": "not_found", "detail": f"unscripted {recorded.method} {recorded.path}"}
                )
            script = queue.popleft() if len(queue) > 1 else queue[0]
        return script(recorded) if callable(script) else script

    def hits(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer().start()
    yield scripted
    scripted.stop()


class SleepRecorder:
    """Injected in place of time.sleep: records the retry schedule without waiting."""

    def __init__(self, on_sleep: Callable[[float], None] | None = None) -> None:
        self.calls: list[float] = []
        self.on_sleep = on_sleep

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)
        if self.on_sleep:
            self.on_sleep(seconds)


@pytest.fixture
def sleeps() -> SleepRecorder:
    return SleepRecorder()
