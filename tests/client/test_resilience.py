"""ResilientHub against real failing servers: a stalled socket, a refused port, a 500-ing server.

Each test binds port 0; the "server" is a real socket or a real HTTP server (tests/client/conftest.py).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from memoryhub.client import MemoryHubClient, NotConfigured
from memoryhub.client.resilience import (
    DEFAULT_DEADLINE,
    HubConfig,
    ResilientHub,
    SpooledRequest,
    Unavailable,
)
from tests.helpers import DEADLINE_SLACK_S

from .conftest import Reply, ScriptedServer

TRACE = SpooledRequest("POST", "/api/v1/workflows/wf/traces/", {"model_call_id": "c1"})
LOGGER = "memoryhub.client.resilience"


@pytest.fixture
def stalled_url() -> Iterator[str]:
    """Accepts connections (kernel backlog) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.fixture
def refused_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more: connect() is refused
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def failing_server() -> Iterator[ScriptedServer]:
    server = ScriptedServer().start()
    server.on("POST", TRACE.path, Reply(500, {"error": "internal", "detail": "boom"}))
    yield server
    server.stop()


def make_hub(url: str, tmp_path, **kwargs) -> ResilientHub:
    config = HubConfig(url=url, api_key="mh_test", spool_dir=tmp_path / "spool", **kwargs)
    return ResilientHub(config, component="test")


def test_default_deadline_is_at_most_200_ms():
    assert DEFAULT_DEADLINE <= 0.2
    assert HubConfig(url="http://x", api_key="k").deadline == DEFAULT_DEADLINE


@pytest.mark.parametrize("missing", ["MEMORYHUB_URL", "MEMORYHUB_API_KEY"])
def test_missing_url_or_key_is_a_clear_error_at_construction(monkeypatch, missing):
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_x")
    monkeypatch.delenv(missing)
    for build in (HubConfig.from_env, ResilientHub.from_env, MemoryHubClient.from_env):
        with pytest.raises(NotConfigured, match=missing):
            build()


def test_malformed_url_and_bad_deadline_env_are_errors(monkeypatch):
    with pytest.raises(NotConfigured, match="http"):
        HubConfig(url="127.0.0.1:8000", api_key="k")
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_x")
    monkeypatch.setenv("MEMORYHUB_DEADLINE_MS", "fast")
    with pytest.raises(NotConfigured, match="MEMORYHUB_DEADLINE_MS"):
        HubConfig.from_env()
    monkeypatch.setenv("MEMORYHUB_DEADLINE_MS", "150")
    assert HubConfig.from_env().deadline == pytest.approx(0.15)


@pytest.mark.parametrize("kind", ["stalled", "refused", "500"])
def test_every_failure_is_bounded_spooled_and_warned_once(kind, request, tmp_path, caplog):
    url = {
        "stalled": lambda: request.getfixturevalue("stalled_url"),
        "refused": lambda: request.getfixturevalue("refused_url"),
        "500": lambda: request.getfixturevalue("failing_server").url,
    }[kind]()
    hub = make_hub(url, tmp_path, deadline=0.15, cooldown=0.05)
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    worst = 0.0
    for i in range(6):
        started = time.monotonic()
        assert hub.send(SpooledRequest("POST", TRACE.path, {"model_call_id": f"c{i}"})) is False
        worst = max(worst, time.monotonic() - started)
        time.sleep(0.06)  # let the breaker half-open so later calls hit the network again
    assert worst < 0.15 + DEADLINE_SLACK_S, f"{kind}: a call took {worst * 1000:.0f} ms"
    assert [r.json["model_call_id"] for r in hub.spool.pending()] == [f"c{i}" for i in range(6)]
    warnings = [
        r
        for r in caplog.records
        if r.name == LOGGER and r.levelno == logging.WARNING and str(hub.spool.directory) in r.getMessage()
    ]
    assert len(warnings) == 1
    assert hub.status()["failures"] >= 2 and hub.status()["spooled"] == 6
    hub.close()


def test_open_breaker_costs_no_network_time(stalled_url, tmp_path):
    hub = make_hub(stalled_url, tmp_path, deadline=0.1, cooldown=30)
    hub.send(TRACE)
    started = time.monotonic()
    for _ in range(50):
        hub.send(TRACE)
    assert time.monotonic() - started < 0.1
    assert hub.status()["available"] is False and hub.spool.count() == 51
    hub.close()


def test_spool_drains_in_order_once_the_server_answers_and_recovery_is_logged(tmp_path, caplog):
    server = ScriptedServer().start()
    received: list[str] = []

    def record(req):
        received.append(req.body["model_call_id"])
        return Reply(201, {"ok": True})

    server.on("POST", TRACE.path, Reply(503, {"error": "unavailable", "detail": "x"}))
    hub = make_hub(server.url, tmp_path, cooldown=0.01)
    caplog.set_level(logging.INFO, logger=LOGGER)
    for i in range(3):
        hub.send(SpooledRequest("POST", TRACE.path, {"model_call_id": f"c{i}"}))
    assert hub.spool.count() == 3 and received == []
    server.on("POST", TRACE.path, record)
    time.sleep(0.05)
    # An ordered write (an append) never overtakes the spool: it queues behind it.
    assert hub.send(SpooledRequest("POST", TRACE.path, {"model_call_id": "c3"}), ordered=True) is False
    assert hub.flush(timeout=5) is True
    assert received == ["c0", "c1", "c2", "c3"]
    assert hub.spool.count() == 0
    # An unordered write goes straight through once the spool is empty.
    assert hub.send(SpooledRequest("POST", TRACE.path, {"model_call_id": "c4"})) is True
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any("answers again" in m for m in messages) or any(
        "4 spooled request(s) delivered" in m for m in messages
    )
    hub.close()
    server.stop()


def test_send_later_costs_a_file_append_and_the_drainer_delivers(tmp_path):
    server = ScriptedServer().start()
    server.on("POST", TRACE.path, Reply(201, {"ok": True}))
    hub = make_hub(server.url, tmp_path)
    started = time.monotonic()
    for i in range(20):
        hub.send_later(SpooledRequest("POST", TRACE.path, {"model_call_id": f"c{i}"}))
    assert time.monotonic() - started < 0.1
    assert hub.flush(timeout=5) is True
    assert [r.body["model_call_id"] for r in server.hits("POST", TRACE.path)] == [f"c{i}" for i in range(20)]
    hub.close()
    server.stop()


def test_a_drain_in_flight_does_not_block_writers(stalled_url, tmp_path):
    hub = make_hub(stalled_url, tmp_path, deadline=0.1)
    hub.spool.put(TRACE)
    drain = threading.Thread(target=hub.drain, kwargs={"timeout": 1.0})
    hub._drain_client = MemoryHubClient(stalled_url, "k", timeout=1.0, max_retries=0)
    drain.start()
    time.sleep(0.05)  # the drainer is now waiting on the stalled socket
    started = time.monotonic()
    hub.spool.put(SpooledRequest("POST", TRACE.path, {"model_call_id": "later"}))
    assert time.monotonic() - started < 0.05
    drain.join()
    assert [r.json["model_call_id"] for r in hub.spool.pending()] == ["c1", "later"]
    hub.close()


def test_unreadable_spool_line_is_set_aside(tmp_path):
    server = ScriptedServer().start()
    server.on("POST", TRACE.path, Reply(201, {"ok": True}))
    hub = make_hub(server.url, tmp_path)
    hub.spool.directory.mkdir(parents=True)
    hub.spool.pending_path.write_text("{not json\n" + TRACE.to_line() + "\n")
    assert hub.drain() == 1
    assert hub.spool.count() == 0 and hub.spool.rejected_count() == 1
    hub.close()
    server.stop()


def test_a_request_the_server_calls_invalid_is_kept_aside_not_retried_forever(tmp_path, caplog):
    server = ScriptedServer().start()
    server.on("POST", TRACE.path, Reply(400, {"error": "invalid_body", "detail": "nope"}))
    hub = make_hub(server.url, tmp_path)
    assert hub.send(TRACE) is False
    assert hub.spool.count() == 0 and hub.spool.rejected_count() == 1
    assert hub.status()["available"] is True  # a bad request is not an outage
    assert any(r.levelno == logging.ERROR and "invalid_body" in r.getMessage() for r in caplog.records)
    hub.close()
    server.stop()


def test_full_spool_refuses_loudly_and_counts(refused_url, tmp_path, caplog):
    config = HubConfig(url=refused_url, api_key="k", spool_dir=tmp_path / "s", max_spool_bytes=200)
    hub = ResilientHub(config)
    for i in range(5):
        hub.send(SpooledRequest("POST", TRACE.path, {"model_call_id": f"c{i}"}))
    kept = hub.spool.count()
    assert 0 < kept < 5 and hub.status()["dropped"] == 5 - kept
    assert any("was NOT kept" in r.getMessage() for r in caplog.records)
    hub.close()


def test_call_without_default_raises_unavailable(refused_url, tmp_path):
    hub = make_hub(refused_url, tmp_path)
    with pytest.raises(Unavailable):
        hub.call(lambda client: client.get_workflow("wf"))
    assert hub.call(lambda client: client.get_workflow("wf"), default="native") == "native"
    hub.close()


def test_async_call_is_bounded_without_blocking_the_loop(stalled_url, tmp_path):
    import asyncio

    hub = make_hub(stalled_url, tmp_path, deadline=0.1)

    async def main() -> tuple[bool, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        ok = await hub.asend(TRACE)
        task.cancel()
        return ok, ticks

    started = time.monotonic()
    ok, ticks = asyncio.run(main())
    assert ok is False and time.monotonic() - started < 0.3
    assert ticks >= 3  # the loop kept running while the call waited
    hub.close()
