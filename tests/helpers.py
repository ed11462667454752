"""Test helpers that build no state: the shared HTTP helpers for API and page tests, a frozen
clock, a barrier race for the PostgreSQL concurrency tests and a real local webhook receiver.
State is built by tests.factories, through the real services."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import time_machine
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver

T0 = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)


def frozen(moment: datetime):
    """Freeze time (auto_now_add columns and the services' timezone.now() take this moment)."""
    return time_machine.travel(moment, tick=False)


def post(client, url: str, body: Any = None, **headers: Any):
    """POST ``body`` as JSON (an APIClient or a Django test client)."""
    return client.post(
        url, data=json.dumps(body if body is not None else {}), content_type="application/json", **headers
    )


def form_post(client, url: str, data: dict | None = None, *, page: str = "/overview/"):
    """POST a form the way a browser does: with the CSRF token of the cookie a page visit set."""
    if "csrftoken" not in client.cookies:
        client.get(page)  # any page with a form sets the CSRF cookie
    return client.post(url, {**(data or {}), "csrfmiddlewaretoken": client.cookies["csrftoken"].value})


# What a test of a deadline allows beyond the deadline: CI runs two suites on two shared cores,
# and at load average 5 a call bounded at 150 ms returned after 326 ms. A deadline that is not
# kept shows as the stalled call's own timeout (seconds), far beyond this.
DEADLINE_SLACK_S = 1.0


def race(n: int, work: Callable[[], Any]) -> list:
    """Run ``work`` in ``n`` threads released together by a barrier (PostgreSQL concurrency tests);
    each thread closes its own connection. Returns the results; any exception fails the test."""
    results: list = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run() -> None:
        try:
            barrier.wait()
            results.append(work())
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


# --- real local HTTP servers ------------------------------------------------------------------


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: bytes) -> None:
    """Answer a test server's request with a JSON body (a client that gave up is no error)."""
    try:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)
    except (BrokenPipeError, ConnectionResetError):  # the client timed out, or its worker was killed
        pass


class Receiver:
    """A local HTTP server in a thread. Paths choose the answer: /ok → 200, /status/<code> →
    that code, /sleep/<seconds> → 200 after a delay. Every request is recorded with whether its
    X-MemoryHub-Signature matches HMAC-SHA256(secret, raw body)."""

    def __init__(self, secret: str = "s3cret-webhook-key") -> None:
        self.secret = secret
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                expected = "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
                signature = self.headers.get("X-MemoryHub-Signature")
                with receiver.lock:
                    receiver.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": body,
                            "json": json.loads(body or b"null"),
                            "signature": signature,
                            "verified": signature is not None and hmac.compare_digest(signature, expected),
                        }
                    )
                status = 200
                parts = self.path.strip("/").split("/")
                if parts[0] == "status":
                    status = int(parts[1])
                elif parts[0] == "sleep":
                    time.sleep(float(parts[1]))
                send_json(self, status, b'{"ok": true}' if status < 400 else b'{"error": "nope"}')

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/ok") -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def url_routes() -> list[tuple[str, URLPattern]]:
    """Every (route text, pattern) of the URL conf, includes flattened."""
    found = []

    def walk(resolver: URLResolver, prefix: str) -> None:
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern).lstrip("^")
            if isinstance(entry, URLResolver):
                walk(entry, route)
            else:
                found.append((route, entry))

    walk(get_resolver(), "")
    return found
