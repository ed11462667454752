"""Demo workflows fed by the framework integrations themselves, run locally at load time.

``lc-payments-logs`` is a real LangChain ``create_agent`` run under MemoryHub's middleware and
``oa-order-desk`` a real OpenAI Agents SDK run on a MemoryHub session wrapped in the SDK's compaction
session — both with local fake models, so nothing leaves the machine. They talk to MemoryHub over
its REST API exactly as in production, through an in-process WSGI transport instead of a socket,
so they run inside the loader's transaction. Each shows observed compactions as summary versions
(the OpenAI one opaque, hence "unverifiable") and their lineage.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from memoryhub.client import MemoryHubClient

LANGCHAIN_WORKFLOW = "lc-payments-logs"
OPENAI_AGENTS_WORKFLOW = "oa-order-desk"
LANGCHAIN_ARTIFACT = "LC-REPORT-1"


@contextlib.contextmanager
def in_process_client(api_key: str) -> Iterator[MemoryHubClient]:
    """A MemoryHub client whose requests are served by this process's Django (no socket).

    Like Django's test client, it keeps the request signals from closing the caller's database
    connection, so the calls join the caller's transaction (also from inside an event loop).
    """
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    # Django keeps its connection per thread, or per context while an event loop runs in the thread
    # (asgiref). Serve each request as the caller would have run it (its loop state and a copy of
    # its context), so calls made from inside an agent's event loop (the OpenAI Agents SDK is async)
    # still use the caller's connection and transaction.
    caller_loop = asyncio.events._get_running_loop()
    caller_context = contextvars.copy_context()
    handler = WSGIHandler()

    def app(environ: dict[str, Any], start_response: Any) -> Any:
        current = asyncio.events._get_running_loop()
        asyncio.events._set_running_loop(caller_loop)
        try:
            return caller_context.run(handler, environ, start_response)
        finally:
            asyncio.events._set_running_loop(current)

    try:
        transport = httpx.WSGITransport(app=app)
        with MemoryHubClient("http://localhost", api_key, transport=transport, max_retries=0) as client:
            yield client
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@contextlib.contextmanager
def _outside_any_event_loop() -> Iterator[None]:
    """Let ``asyncio.run`` start the agent's loop even when the caller's thread marks one as running
    (Playwright's sync API does): the caller's loop is set aside and put back afterwards."""
    caller_loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    try:
        yield
    finally:
        asyncio.events._set_running_loop(caller_loop)


def load_integration_workflows(
    api_key: str, out: Callable[[str], None], at: Callable[[float], Any] = lambda _: contextlib.nullcontext()
) -> dict[str, Any]:
    """Run both integrations against the demo tenant; returns what they produced (for tests)."""
    try:
        from memoryhub.examples import langchain_example, openai_agents_example
    except ImportError as exc:  # optional extras not installed: the rest of the demo still loads
        out(f"  integrations skipped ({exc.name} is not installed)")
        return {}
    produced: dict[str, Any] = {}
    with in_process_client(api_key) as client:
        with at(0):
            run = langchain_example.run_example(
                client, LANGCHAIN_WORKFLOW, tests=8, artifact_id=LANGCHAIN_ARTIFACT
            )
        versions = [s.version for s in client.list_summaries(LANGCHAIN_WORKFLOW)]
        produced["langchain"] = run
        out(
            f"  workflow {LANGCHAIN_WORKFLOW} (LangChain create_agent + MemoryHub middleware): "
            f"{len(run.messages)} messages, summaries {', '.join(f'S{v}' for v in sorted(versions))}, "
            f"artifact {LANGCHAIN_ARTIFACT}"
        )
        with at(3600), _outside_any_event_loop():
            oa = asyncio.run(openai_agents_example.run_example(client, OPENAI_AGENTS_WORKFLOW))
        produced["openai_agents"] = oa
        statuses = ", ".join(f"S{s['version']} {s['status']}" for s in oa.session.summaries)
        out(
            f"  workflow {OPENAI_AGENTS_WORKFLOW} (OpenAI Agents SDK session + compaction session): "
            f"{len(oa.answers)} turns, observed compactions {statuses}"
        )
    return produced
