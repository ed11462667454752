"""Close the loop (issue #32) for the integrations that cannot edit what the model reads: the
OpenAI Agents session and the Anthropic helper return what a compaction lost, for the caller to
prepend to the next input. Live MemoryHub; the provider's answers are built here."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from memoryhub.accounts.tenancy import issue_api_key
from memoryhub.client import MemoryHubClient
from memoryhub.client.resilience import ResilientHub
from memoryhub.examples.repair_scenario import LOSSY_SUMMARY, MUST_RETURN, ORDER_ID, REQUIREMENT, TURNS
from memoryhub.integrations.anthropic import record_anthropic_response, repair_block
from memoryhub.integrations.openai_agents import MemoryHubSession
from memoryhub.models import CompactionJob, Role

pytestmark = pytest.mark.django_db(transaction=True)
CM = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 100_000}}]}


@pytest.fixture
def client(live_server, alice) -> Iterator[MemoryHubClient]:
    with MemoryHubClient(
        live_server.url,
        api_key=issue_api_key(alice.tenant, "integration", role=Role.INGEST).secret,
        timeout=30,
    ) as c:
        yield c


@pytest.fixture
def hub(client, tmp_path) -> ResilientHub:
    return ResilientHub(client=client, component="test", deadline=10, spool_dir=tmp_path / "spool")


def _session(hub: ResilientHub, name: str) -> MemoryHubSession:
    session = MemoryHubSession(name, hub=hub)
    items = [{"role": role, "content": text} for role, text in TURNS]
    asyncio.run(session.add_items(items))
    return session


def test_openai_agents_session_hands_back_what_the_compaction_lost(hub):
    session = _session(hub, "oa-repair")
    # What OpenAIResponsesCompactionSession hands the session after responses.compact:
    asyncio.run(session._atomic_replace_items([{"role": "user", "content": LOSSY_SUMMARY}]))
    assert session.last_repair["verdict"] == "repaired"
    (item,) = session.take_handback()
    assert item["role"] == "user"
    for value in MUST_RETURN:
        assert value in item["content"], value
    assert item["content"].index(REQUIREMENT) < item["content"].index(ORDER_ID)
    assert session.take_handback() == []  # once
    # Prepended to the next input, it is what the model reads after the compacted items.
    items = asyncio.run(session.get_items())
    assert items == [{"role": "user", "content": LOSSY_SUMMARY}]


def test_openai_agents_encrypted_compaction_is_unknown_and_hands_back_nothing(hub):
    session = _session(hub, "oa-opaque")
    encrypted = [{"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAA" + "x" * 200}]
    asyncio.run(session._atomic_replace_items(encrypted))
    assert session.last_repair["verdict"] == "unknown" and session.take_handback() == []


def _response(summary: str | None, encrypted: str | None = None) -> dict:
    block = {"type": "compaction", "content": summary, "encrypted_content": encrypted}
    return {
        "id": "msg_rep_1",
        "model": "claude-opus-4-6",
        "content": [block, {"type": "text", "text": "On it."}],
        "usage": {"input_tokens": 3000, "iterations": [{"type": "compaction", "input_tokens": 120_000}]},
    }


@pytest.mark.parametrize("through", ["client", "resilient hub"])
def test_anthropic_helper_returns_what_the_compaction_lost_as_a_block(client, hub, through):
    messages = [{"role": role, "content": text} for role, text in TURNS]
    sender = client if through == "client" else hub
    record = client.record_anthropic_response if through == "client" else None
    if record is not None:
        result = record("an-repair", _response(LOSSY_SUMMARY), messages=messages, context_management=CM)
    else:
        result = record_anthropic_response(
            sender, "an-repair", _response(LOSSY_SUMMARY), messages=messages, context_management=CM
        )
    assert result["repair"]["verdict"] == "repaired"
    block = repair_block(result)
    assert block["type"] == "text"
    for value in MUST_RETURN:
        assert value in block["text"], value
    job = CompactionJob.objects.get(workflow__external_id="an-repair")
    assert job.attempts[0]["repair"]["verdict"] == "repaired"


def test_anthropic_encrypted_compaction_hands_back_nothing(client):
    messages = [{"role": role, "content": text} for role, text in TURNS]
    result = client.record_anthropic_response(
        "an-opaque", _response(None, encrypted="Zm9v" * 40), messages=messages, context_management=CM
    )
    assert result["repair"]["verdict"] == "unknown" and repair_block(result) is None
