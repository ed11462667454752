"""OpenAI Agents SDK session + compaction recorder against a live MemoryHub server, with the real
``openai-agents`` package, a scripted local model provider and a local ``responses.compact`` server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from openai import AsyncOpenAI

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.client import MemoryHubClient
from memoryhub.core.checks import validation_result
from memoryhub.core.opaque import OPAQUE_SCHEMA
from memoryhub.examples.openai_agents_example import compact_handler, run_example
from memoryhub.integrations.openai_agents import COMPACTOR_NAME, MemoryHubSession
from memoryhub.models import CompactionJob, Event, Role, Summary, Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hub(live_server, alice) -> Iterator[MemoryHubClient]:
    with MemoryHubClient(
        live_server.url,
        api_key=issue_api_key(alice.tenant, "integration", role=Role.INGEST).secret,
        timeout=30,
    ) as client:
        yield client


class CompactServer:
    """A real local HTTP server standing in for OpenAI's ``POST /v1/responses/compact``."""

    def __init__(self, *, readable: bool = False) -> None:
        self.bodies: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                status, payload = (
                    (200, compact_handler(body, readable=readable))
                    if self.path == "/v1/responses/compact"
                    else (404, {"error": {"message": self.path}})
                )
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.client = AsyncOpenAI(
            api_key="local-fake",
            base_url=f"http://127.0.0.1:{self.httpd.server_address[1]}/v1",
            max_retries=0,
        )

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def compact_server() -> Iterator[CompactServer]:
    server = CompactServer()
    yield server
    server.stop()


@pytest.fixture
def readable_compact_server() -> Iterator[CompactServer]:
    server = CompactServer(readable=True)
    yield server
    server.stop()


def test_every_item_is_an_event_and_an_encrypted_compaction_is_recorded_as_opaque(hub, compact_server):
    run = asyncio.run(run_example(hub, "oa-run", openai_client=compact_server.client))

    workflow = Workflow.objects.get(external_id="oa-run")
    assert workflow.source == "openai-agents"
    assert run.answers[0].startswith("Status: order A-1001: shipped")
    events = list(Event.objects.filter(workflow=workflow).order_by("seq"))
    kinds = [e.kind for e in events]
    # Per question: user message, tool call, tool result, assistant answer.
    assert kinds[:4] == ["message", "tool_call", "tool_result", "message"]
    assert kinds.count("tool_result") == 4 and kinds.count("tool_call") == 4

    assert compact_server.bodies, "the SDK's compaction session never called responses.compact"
    summaries = list(Summary.objects.filter(workflow=workflow).order_by("version"))
    assert len(summaries) == len(compact_server.bodies) == len(run.session.summaries) >= 1
    first = summaries[0]
    content = json.loads(first.content)
    assert content["schema"] == OPAQUE_SCHEMA and content["digest"].startswith("sha256:")
    assert content["size_bytes"] > 0
    assert (first.compactor_name, first.model) == (COMPACTOR_NAME, "gpt-4.1")
    # It covers exactly the events the compaction replaced: everything up to the last one sent.
    sent = compact_server.bodies[0]["input"]
    assert first.covers_from_seq == 1
    assert first.covers_to_seq == max(e.seq for e in events if e.seq <= first.covers_to_seq)
    assert len([i for i in sent if i.get("type") == "function_call_output"]) == len(
        [e for e in events if e.kind == "tool_result" and e.seq <= first.covers_to_seq]
    )
    # The user's own words are events; the compaction itself is only a digest.
    assert any(
        "What is the status of order A-1001?" in e.content for e in events if e.seq <= first.covers_to_seq
    )
    # Validation reports unverifiable content, not passed; it is activated by CAS like any other.
    record = first.validations.get()
    assert validation_result(record.passed, record.checks) == "unverifiable"
    assert summaries[-1].status == "ACTIVE"
    # The compacted items replaced the session's history; later items continue the event log.
    items = asyncio.run(run.session.get_items())
    assert any(i.get("type") == "compaction" for i in items)


def test_a_readable_compaction_is_validated_and_activated(hub, readable_compact_server):
    run = asyncio.run(run_example(hub, "oa-readable", openai_client=readable_compact_server.client))
    summaries = list(Summary.objects.filter(workflow__external_id="oa-readable").order_by("version"))
    assert summaries and summaries[-1].status == "ACTIVE", [s.validations.last().reasons for s in summaries]
    content = json.loads(summaries[0].content)
    assert "opaque" not in content and "A-1001: shipped" in content["narrative"]
    assert _observed_verdict_holds(summaries[0])
    assert run.session.summaries[-1]["summary_id"] == summaries[-1].summary_id


def _same_script(underlying, openai_client) -> list[str]:
    """The example's run (4 questions, a compaction every 6 items), then an item added and popped."""
    from agents import Agent, ModelSettings, RunConfig, Runner, set_tracing_disabled
    from agents.memory.openai_responses_compaction_session import OpenAIResponsesCompactionSession

    from memoryhub.examples.openai_agents_example import ORDERS, ScriptedModelProvider, lookup_order

    set_tracing_disabled(True)
    wrapped = OpenAIResponsesCompactionSession(
        underlying.session_id,
        underlying,
        model="gpt-4.1",
        client=openai_client,
        compaction_mode="input",
        should_trigger_compaction=lambda ctx: len(ctx["session_items"]) >= 6,
    )
    agent = Agent(name="order-desk", instructions="Answer order questions.", tools=[lookup_order],
                  model_settings=ModelSettings())  # fmt: skip
    config = RunConfig(model_provider=ScriptedModelProvider(), tracing_disabled=True)

    async def go() -> list[str]:
        answers = [
            str(
                (
                    await Runner.run(
                        agent, f"What is the status of order {o}?", session=wrapped, run_config=config
                    )
                ).final_output
            )
            for o in ORDERS
        ]
        await underlying.add_items([{"role": "user", "content": "one more thing"}])
        await underlying.pop_item()  # withdrawn: after a restart it must stay withdrawn
        return answers

    return asyncio.run(go())


def _shape(item: dict[str, Any]) -> tuple:
    """What the model reads of an item: kind, role, text, call, output, encrypted payload."""
    from memoryhub.integrations.openai_agents import _text

    kind = item.get("type") or "message"
    text = _text(item.get("content")) if kind == "message" else ""
    fields = ("call_id", "name", "arguments", "output", "encrypted_content", "summary")
    return (kind, item.get("role"), text, *(json.dumps(item.get(f), sort_keys=True) for f in fields))


@pytest.mark.parametrize("readable", [False, True], ids=["encrypted", "readable"])
def test_after_a_restart_the_session_holds_what_sqlitesession_holds(hub, tmp_path, readable):
    """Side by side with the SDK's own session on the same scripted run (compactions, a pop)."""
    from agents import SQLiteSession

    server = CompactServer(readable=readable)
    try:
        db = str(tmp_path / "sdk.sqlite")
        sdk_answers = _same_script(SQLiteSession("s", db), server.client)
        ours = MemoryHubSession("oa-side", client=hub, deadline=10, spool_dir=tmp_path)
        hub_answers = _same_script(ours, server.client)
    finally:
        server.stop()
    assert hub_answers == sdk_answers and len(server.bodies) >= 2  # compacted in both runs
    before_restart = asyncio.run(ours.get_items())
    sdk_items = asyncio.run(SQLiteSession("s", db).get_items())  # a new process: new objects
    hub_items = asyncio.run(
        MemoryHubSession("oa-side", client=hub, deadline=10, spool_dir=tmp_path).get_items()
    )
    assert (
        [_shape(i) for i in hub_items]
        == [_shape(i) for i in sdk_items]
        == [_shape(i) for i in before_restart]
    )
    assert hub_items, "the compaction's output and later items are the session's history"
    if not readable:  # the encrypted compaction item comes back exactly, as the SDK stored it
        assert (
            [i for i in hub_items if i.get("type") == "compaction"]
            == [i for i in sdk_items if i.get("type") == "compaction"]
            != []
        )
    else:  # a readable summary keeps the role the compactor gave it
        roles = {i.get("role") for i in hub_items if "Summary: " in _shape(i)[2]}
        assert roles == {i.get("role") for i in sdk_items if "Summary: " in _shape(i)[2]} and roles
    # Every compaction recorded its trigger and what it replaced.
    jobs = CompactionJob.objects.filter(workflow__external_id="oa-side").order_by("id")
    triggers = [j.attempts[0]["trigger"] for j in jobs]
    assert len(triggers) == len(server.bodies) // 2 and all(
        t["kind"] == "auto" and t["pre_tokens"] > 0 for t in triggers
    )


def test_pop_and_clear_are_durable_and_never_replayed_as_messages(hub, tmp_path):
    session = MemoryHubSession("oa-proto", client=hub, deadline=10, spool_dir=tmp_path)

    async def scenario() -> tuple[Any, list[Any], list[Any]]:
        await session.add_items(
            [{"role": "user", "content": "hi"}, {"role": "developer", "content": "be brief"},
             {"role": "assistant", "content": "hello"}]
        )  # fmt: skip
        popped = await session.pop_item()
        fresh = await MemoryHubSession("oa-proto", client=hub, deadline=10, spool_dir=tmp_path).get_items()
        await session.clear_session()
        return (
            popped,
            fresh,
            await MemoryHubSession("oa-proto", client=hub, deadline=10, spool_dir=tmp_path).get_items(),
        )

    popped, fresh, after_clear = asyncio.run(scenario())
    assert popped == {"role": "assistant", "content": "hello"}
    # A restart does not bring the popped item back, and the marker is no message.
    assert fresh == [{"role": "user", "content": "hi"}, {"role": "developer", "content": "be brief"}]
    assert after_clear == []
    # Events are append-only: the withdrawals are themselves recorded.
    notes = list(
        Event.objects.filter(workflow__external_id="oa-proto", kind="note").values_list("content", flat=True)
    )
    assert len(notes) == 2 and notes[0].startswith("pop_item: the session withdrew oa:")
    assert notes[1].startswith("clear_session: the session dropped 2 item(s)")
    assert asyncio.run(session.get_items(limit=0)) == []


def _observed_verdict_holds(summary) -> bool:
    """rules-7 judges the framework's summary as written; what it fails, the observer waives,
    saying so (memoryhub.memory.observed), so the pointer shows what the model reads. The verdict
    holds when the last record passes and any failure before it was waived, never overwritten."""
    records = list(summary.validations.order_by("created_at", "id"))
    last = records[-1]
    return last.passed and (records[0].passed or bool(last.waived_checks and last.waived_by))
