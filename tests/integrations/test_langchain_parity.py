"""MemoryHubSummarizationMiddleware beside LangChain's SummarizationMiddleware on one scripted run.

Same constructor arguments, same decisions, same messages handed to the agent's model, sync and
async — with MemoryHub answering (real live server) and with MemoryHub gone (refused port).
"""

from __future__ import annotations

import socket

import pytest
from langchain.agents.middleware.summarization import SummarizationMiddleware

from memoryhub.client.resilience import HubConfig, ResilientHub
from memoryhub.integrations.langchain import MemoryHubSummarizationMiddleware
from memoryhub.models import ConsumerTrace, Event, Summary

from .lc_script import FakeSummarizer, ScriptedModel, run_script

ARGS = {"trigger": ("tokens", 900), "keep": ("messages", 6)}


def native(use_async: bool = False, **args):
    summarizer = FakeSummarizer()
    model = ScriptedModel()
    return run_script(
        SummarizationMiddleware(summarizer, **(args or ARGS)), model, summarizer, use_async=use_async
    )


def ours(hub: ResilientHub, use_async: bool = False, **args):
    summarizer = FakeSummarizer()
    model = ScriptedModel()
    # Parity is LangChain's behaviour exactly: repair off (with repair on, the calls differ only by
    # the handed-back block: tests/integrations/test_langchain_repair.py).
    middleware = MemoryHubSummarizationMiddleware(summarizer, hub=hub, repair=False, **(args or ARGS))
    run = run_script(middleware, model, summarizer, use_async=use_async)
    return run, middleware


@pytest.fixture
def refused_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"


def hub_for(url: str, key: str, tmp_path) -> ResilientHub:
    return ResilientHub(HubConfig(url=url, api_key=key, spool_dir=tmp_path / "spool"), component="langchain")


def test_the_script_compacts_natively():
    run = native()
    assert run.compactions >= 2  # the figure from the issue: twice in 12 turns
    assert len(run.calls) > 12


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_same_decisions_and_messages_with_memoryhub_up(live_server, alice, tmp_path, use_async):
    expected = native(use_async)
    hub = hub_for(live_server.url, alice.key.secret, tmp_path)
    got, middleware = ours(hub, use_async)
    assert got.compactions == expected.compactions
    assert got.calls == expected.calls  # every message the agent's model saw, in order
    assert [(m.type, m.content) for m in got.final] == [(m.type, m.content) for m in expected.final]
    assert middleware.flush(timeout=30)
    # MemoryHub holds the whole conversation once, every compaction and every model call's trace.
    events = Event.objects.filter(workflow__external_id="t-1")
    assert events.filter(kind="message", role="user").count() == 12
    assert events.count() == len(set(events.values_list("client_event_id", flat=True)))
    summaries = Summary.objects.filter(workflow__external_id="t-1").order_by("version")
    assert summaries.count() == expected.compactions
    traces = ConsumerTrace.objects.filter(workflow__external_id="t-1")
    assert traces.count() == len(expected.calls)
    # The agent never waited for an answer, yet each trace got the server-attested read it made.
    assert [t.flags for t in traces] == [[] for _ in traces]
    # A call that read a summary names it; the last call read the last summary.
    last = traces.order_by("-tail_to_seq", "-id").first()
    assert last.summary_id == summaries.last().pk
    assert hub.status()["spooled"] == 0 and hub.status()["rejected"] == 0


@pytest.mark.parametrize("use_async", [False, True], ids=["invoke", "ainvoke"])
def test_memoryhub_down_changes_nothing_for_the_agent(refused_url, tmp_path, use_async, caplog):
    expected = native(use_async)
    hub = hub_for(refused_url, "mh_x", tmp_path)
    got, _ = ours(hub, use_async)
    assert got.calls == expected.calls and got.compactions == expected.compactions
    assert hub.status()["spooled"] > 0
    warnings = [
        r for r in caplog.records if r.name == "memoryhub.client.resilience" and r.levelname == "WARNING"
    ]
    assert len(warnings) == 1


def test_other_trigger_and_keep_forms_decide_the_same(refused_url, tmp_path):
    for args in (
        {"trigger": ("messages", 10), "keep": ("messages", 4)},
        {"trigger": [("tokens", 2000), ("messages", 14)], "keep": ("tokens", 600)},
        {"trigger": {"tokens": 700, "messages": 8}, "keep": ("messages", 3)},
    ):
        expected = native(**args)
        got, _ = ours(hub_for(refused_url, "k", tmp_path), **args)
        assert got.compactions == expected.compactions and got.calls == expected.calls, args
