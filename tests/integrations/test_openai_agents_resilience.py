"""The OpenAI Agents session never hurts the agent: with MemoryHub stalled, refused or 500-ing,
every session call returns within its bound with the agent's items, and what it could not
deliver reaches MemoryHub later, in order. Without configuration it fails at construction."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.client import NotConfigured
from memoryhub.client.resilience import HubConfig, ResilientHub
from memoryhub.integrations.openai_agents import MemoryHubSession
from memoryhub.models import Event, Role
from tests.helpers import DEADLINE_SLACK_S

# The servers that fail in each way (stalled, refused, 500) are the LangChain tests' fixtures.
from .test_langchain_resilience import error_url, refused_url, stalled_url  # noqa: F401

DEADLINE = 0.2
ITEMS = [{"role": "user", "content": f"message {i}"} for i in range(5)]


def _session(url: str, spool: Path, name: str = "oa-down") -> MemoryHubSession:
    config = HubConfig(url=url, api_key="mh_test", deadline=DEADLINE, spool_dir=spool)
    return MemoryHubSession(name, hub=ResilientHub(config, component="openai-agents"))


@pytest.mark.parametrize("failure", ["stalled_url", "refused_url", "error_url"])
def test_every_call_returns_within_its_bound_with_the_agents_items(request, tmp_path, failure):
    url = request.getfixturevalue(failure)
    session = _session(url, tmp_path)

    async def scenario() -> tuple[list[float], float, list, dict]:
        writes = []
        for item in ITEMS:
            started = time.monotonic()
            await session.add_items([item])
            writes.append(time.monotonic() - started)
        started = time.monotonic()
        items = await session.get_items()
        read = time.monotonic() - started
        started = time.monotonic()
        popped = await session.pop_item()
        writes.append(time.monotonic() - started)
        return writes, read, items, popped

    writes, read, items, popped = asyncio.run(scenario())
    # A write costs at most the deadline; the first read drains the spool, then reads (two bounds).
    assert max(writes) < DEADLINE + DEADLINE_SLACK_S, writes
    assert read < 2 * DEADLINE + DEADLINE_SLACK_S, read
    assert items == ITEMS and popped == ITEMS[-1]
    assert session.hub.status()["spooled"] > 0  # kept for later, not lost


@pytest.mark.django_db(transaction=True)
def test_what_was_spooled_while_down_reaches_memoryhub_later(live_server, alice, refused_url, tmp_path):  # noqa: F811
    asyncio.run(_session(refused_url, tmp_path, "oa-later").add_items(ITEMS))
    assert not Event.objects.filter(workflow__external_id="oa-later").exists()

    key = issue_api_key(alice.tenant, "oa", role=Role.INGEST).secret
    config = HubConfig(url=live_server.url, api_key=key, deadline=10, spool_dir=tmp_path)
    back = MemoryHubSession("oa-later", hub=ResilientHub(config, component="openai-agents"))
    items = asyncio.run(back.get_items())  # a new session drains this machine's spool first

    assert items == ITEMS
    contents = list(
        Event.objects.filter(workflow__external_id="oa-later")
        .order_by("seq")
        .values_list("content", flat=True)
    )
    assert [c for c in contents if c.startswith("message ")] == [i["content"] for i in ITEMS]


@pytest.mark.parametrize("missing", ["MEMORYHUB_URL", "MEMORYHUB_API_KEY"])
def test_missing_configuration_is_an_error_at_construction(monkeypatch, tmp_path, missing):
    monkeypatch.setenv("MEMORYHUB_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("MEMORYHUB_API_KEY", "mh_test")
    monkeypatch.delenv(missing)
    with pytest.raises(NotConfigured, match=missing):
        MemoryHubSession("oa-unset", spool_dir=tmp_path)
