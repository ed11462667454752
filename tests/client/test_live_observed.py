"""The client's observed-compaction call against the live API (what integrations in other processes use)."""

from __future__ import annotations

import pytest

from memoryhub.client import MemoryHubClient, ValidationFailed

pytestmark = pytest.mark.django_db(transaction=True)


def test_client_records_an_observed_compaction_idempotently(live_server, alice):
    with MemoryHubClient(live_server.url, api_key=alice.key.secret, timeout=30) as hub:
        wf = hub.create_workflow("cc-session", source="claude-code")
        assert wf.source == "claude-code"
        hub.append_events("cc-session", [{"kind": "message", "content": f"turn {i}"} for i in range(4)])
        kwargs = dict(
            text="summary of turns 0-2", trigger={"kind": "auto", "pre_tokens": 1200}, observation_id="cb-1"
        )
        first = hub.record_observed_compaction("cc-session", 3, {"name": "claude-code"}, **kwargs)
        assert first["created"] and first["activation"] == "activated" and first["covers_to_seq"] == 3
        again = hub.record_observed_compaction("cc-session", 3, {"name": "claude-code"}, **kwargs)
        assert not again["created"] and again["summary_id"] == first["summary_id"]
        listed = hub.list_observed_compactions("cc-session")
        assert listed["threshold_in_force"]["tokens"] == 1200
        assert hub.get_context("cc-session").summary.summary_id == first["summary_id"]
        with pytest.raises(ValidationFailed):
            hub.record_observed_compaction("cc-session", 99, {"name": "claude-code"}, text="x")
