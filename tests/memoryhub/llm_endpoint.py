"""A real local HTTP server that answers like an OpenAI chat-completions endpoint (test support).

It is the network edge we do not own, so tests run it instead of a provider: it records every
request, can answer with queued HTTP statuses, and can hold answers until a gate opens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.helpers import send_json


@dataclass
class FakeLLM:
    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: int = 200  # answer for every request once ``statuses`` is empty
    statuses: list[int] = field(default_factory=list)  # consumed one per request, first
    delay: float = 0.0
    gate: threading.Event | None = None  # when set, answers wait until the gate opens
    received: threading.Event = field(default_factory=threading.Event)
    model_id: str = "gpt-test-2026-01-15"
    narrative: str = "The agents specified POST /payments and generated tests; approval-12 is pending."
    raw_content: str | None = None

    def next_status(self) -> int:
        return self.statuses.pop(0) if self.statuses else self.status

    def body(self, status: int) -> bytes:
        if status != 200:
            return json.dumps({"error": {"message": "upstream exploded"}}).encode()
        content = (
            self.raw_content if self.raw_content is not None else json.dumps({"narrative": self.narrative})
        )
        return json.dumps(
            {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "model": self.model_id,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366},
            }
        ).encode()


@contextmanager
def fake_llm() -> Iterator[FakeLLM]:
    state = FakeLLM()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers["Content-Length"])
            state.requests.append(
                {
                    "path": self.path,
                    "auth": self.headers.get("Authorization"),
                    "json": json.loads(self.rfile.read(length)),
                }
            )
            status = state.next_status()
            state.received.set()
            if state.gate is not None:
                state.gate.wait(timeout=120)
            time.sleep(state.delay)
            send_json(self, status, state.body(status))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        if state.gate is not None:
            state.gate.set()
        server.shutdown()
        server.server_close()
