"""The LangChain middleware never hurts the agent: MemoryHub stalled, refused, 500-ing, missing,
or handed a 10,000-message history — and what it could not deliver arrives later."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain.agents.middleware.summarization import SummarizationMiddleware
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from memoryhub.client import NotConfigured
from memoryhub.client.resilience import HubConfig, ResilientHub, SpooledRequest
from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware
from memoryhub.models import ConsumerTrace, Event, Summary
from tests.helpers import DEADLINE_SLACK_S

from .lc_script import FakeSummarizer, ScriptedModel, run_script

ARGS = {"trigger": ("tokens", 900), "keep": ("messages", 6)}
DEADLINE = 0.2


@pytest.fixture
def stalled_url() -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # accepts (kernel backlog), never answers
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def refused_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def error_url() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"error": "internal", "detail": "boom"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def timed_native(args):
    summarizer, model = FakeSummarizer(), ScriptedModel()
    started = time.monotonic()
    run = run_script(SummarizationMiddleware(summarizer, **args), model, summarizer)
    return run, time.monotonic() - started


# "policy": trigger=None, the workflow policy decides and each call waits (≤ deadline) for it;
# with MemoryHub away nothing is summarized, which is LangChain's behaviour for trigger=None.
MODES = {"trigger": ARGS, "policy": {"keep": ("messages", 6)}}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("kind", ["stalled", "refused", "500"])
def test_memoryhub_failing_costs_at_most_the_deadline_per_call(kind, mode, request, tmp_path, caplog):
    url = request.getfixturevalue(
        {"stalled": "stalled_url", "refused": "refused_url", "500": "error_url"}[kind]
    )
    args = MODES[mode]
    expected, native_seconds = timed_native(args)
    hub = ResilientHub(
        HubConfig(url=url, api_key="mh_x", spool_dir=tmp_path / "spool"),
        component="langchain",
        drain_timeout=1.0,
    )
    summarizer, model = FakeSummarizer(), ScriptedModel()
    middleware = MemoryHubSummarizationMiddleware(summarizer, hub=hub, **args)
    # Time spent inside our hooks (the machine is shared: whole-run wall times are too noisy).
    # A compaction turn (the hook returns LangChain's update) waits for the repair verdict at most
    # ``repair_deadline`` (it already waited for the summarizer); every other call the deadline.
    spent: list[float] = []
    compaction_turns: list[float] = []
    for hook in ("before_model", "after_agent"):
        original = getattr(middleware, hook)

        # LangChain injects ``runtime`` by parameter name: keep the hook's signature.
        def timed(state, runtime, _original=original):
            started = time.monotonic()
            update = None
            try:
                update = _original(state, runtime)
                return update
            finally:
                (compaction_turns if update is not None else spent).append(time.monotonic() - started)

        setattr(middleware, hook, timed)
    got = run_script(middleware, model, summarizer)
    assert got.calls == expected.calls and got.compactions == expected.compactions
    del native_seconds
    # every before_model and each turn's after_agent
    assert len(spent) + len(compaction_turns) == len(got.calls) + 12
    assert max(spent) < DEADLINE + DEADLINE_SLACK_S, f"{kind}/{mode}: a hook took {max(spent):.2f} s"
    assert middleware.repair_deadline == 1.0
    if compaction_turns:
        assert max(compaction_turns) < middleware.repair_deadline + 0.3, (kind, mode, compaction_turns)
        # After the first stall the breaker is open: at most one compaction turn waited.
        assert sum(1 for t in compaction_turns if t >= DEADLINE + 0.3) <= 1, compaction_turns
    assert hub.status()["spooled"] > 0

    def warnings() -> list:
        return [
            r
            for r in caplog.records
            if r.levelname == "WARNING" and str(hub.spool.directory) in r.getMessage()
        ]

    # The records go out in the background (LangChain's trigger needs no answer): the drainer
    # meets the failure, warns once, and keeps everything spooled.
    waited = time.monotonic() + 5
    while not warnings() and time.monotonic() < waited:
        time.sleep(0.05)
    assert len(warnings()) == 1
    assert hub.status()["spooled"] > 0 and hub.status()["rejected"] == 0


@pytest.mark.parametrize("missing", ["MEMORYHUB_URL", "MEMORYHUB_API_KEY"])
def test_missing_configuration_is_an_error_at_construction(monkeypatch, missing):
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_x")
    monkeypatch.delenv(missing)
    with pytest.raises(NotConfigured, match=missing):
        MemoryHubSummarizationMiddleware(FakeSummarizer(), **ARGS)


def test_what_was_spooled_while_down_reaches_memoryhub_later(live_server, alice, refused_url, tmp_path):
    spool = tmp_path / "spool"
    down = ResilientHub(HubConfig(url=refused_url, api_key="x", spool_dir=spool), component="langchain")
    summarizer, model = FakeSummarizer(), ScriptedModel()
    run = run_script(MemoryHubSummarizationMiddleware(summarizer, hub=down, **ARGS), model, summarizer)
    assert down.spool.count() > 0 and Event.objects.count() == 0
    # MemoryHub is back (the same spool directory, e.g. the next process): everything arrives.
    up = ResilientHub(HubConfig(url=live_server.url, api_key=alice.key.secret, spool_dir=spool))
    assert up.flush(timeout=60)
    assert Event.objects.filter(workflow__external_id="t-1", kind="message", role="user").count() == 12
    assert Summary.objects.filter(workflow__external_id="t-1").count() == run.compactions
    assert ConsumerTrace.objects.filter(workflow__external_id="t-1").count() == len(run.calls)
    assert up.status()["rejected"] == 0


def long_history(n: int) -> list:
    messages = []
    for i in range(n // 2):
        messages.append(HumanMessage(f"question {i} about order A{i}", id=f"h{i}"))
        messages.append(AIMessage(f"answer {i}: shipped", id=f"a{i}"))
    return messages


def test_a_10k_message_history_is_caught_up_in_chunks_not_a_413(live_server, alice, tmp_path):
    hub = ResilientHub(HubConfig(url=live_server.url, api_key=alice.key.secret, spool_dir=tmp_path / "s"))
    middleware = MemoryHubSummarizationMiddleware(
        FakeSummarizer(), hub=hub, workflow_id="long", trigger=("tokens", 10**9)
    )
    messages = long_history(10_000)
    started = time.monotonic()
    assert middleware.before_model({"messages": messages}, None) is None
    # The agent does not wait for the catch-up's HTTP (only for turning 10k messages into events).
    assert time.monotonic() - started < 5.0
    messages.append(HumanMessage("one more", id="last"))
    middleware.before_model({"messages": messages}, None)
    assert hub.flush(timeout=120)
    assert Event.objects.filter(workflow__external_id="long").count() == 10_001
    assert hub.status()["rejected"] == 0


def test_running_token_count_equals_langchains_whole_history_count():
    rng = random.Random(7)
    middleware = MemoryHubSummarizationMiddleware(
        FakeSummarizer(), hub=ResilientHub(HubConfig(url="http://127.0.0.1:1", api_key="k")), **ARGS
    )
    tally = middleware._thread("w").tally
    assert tally is not None and tally.scaling  # the default counter scales by reported usage
    messages: list = []
    for i in range(300):
        kind = rng.choice(["human", "ai", "ai_usage", "tool", "ai_other_provider"])
        if kind == "human":
            message = HumanMessage("x" * rng.randint(0, 400), id=f"m{i}")
        elif kind == "tool":
            message = ToolMessage("y" * rng.randint(0, 300), tool_call_id=f"c{i}", id=f"m{i}")
        else:
            message = AIMessage(
                "z" * rng.randint(0, 500),
                id=f"m{i}",
                response_metadata={"model_provider": "other" if kind == "ai_other_provider" else "openai"},
                usage_metadata={
                    "input_tokens": 1,
                    "output_tokens": 1,
                    "total_tokens": rng.randint(50, 90_000),
                }
                if kind == "ai_usage"
                else None,
            )
        messages.append(message)
        tally.add(message)
        assert tally.value() == middleware.token_counter(messages), i


def test_an_unwritable_spool_or_a_recording_bug_never_stops_the_agent(
    refused_url, tmp_path, caplog, monkeypatch
):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the spool directory should be")
    hub = ResilientHub(
        HubConfig(url=refused_url, api_key="k", spool_dir=blocker / "spool"), component="langchain"
    )
    expected, _ = timed_native(ARGS)
    summarizer, model = FakeSummarizer(), ScriptedModel()
    middleware = MemoryHubSummarizationMiddleware(summarizer, hub=hub, **ARGS)

    def broken(*args, **kwargs):
        raise TypeError("an unexpected message shape")

    monkeypatch.setattr("memoryhub.integrations.langchain.message_to_events", broken)
    got = run_script(middleware, model, summarizer)
    assert got.calls == expected.calls and got.compactions == expected.compactions
    assert any("recording failed" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    monkeypatch.undo()
    assert hub.spool.put(SpooledRequest("POST", "/x/", {})) is False  # unwritable: refused, logged, counted
    assert hub.status()["dropped"] >= 1
