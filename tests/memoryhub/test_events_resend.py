"""A re-sent client_event_id is idempotent only when it is exactly the stored event: any change of
content, facts, refs, kind, agent, role, tool_call_id or side_effect is a 409 naming the fields, and
nothing of the batch is written (the change is never silently dropped)."""

from __future__ import annotations

import pytest

from audit.purge import purge_events
from memoryhub.core.actors import Actor
from memoryhub.models import Event, Workflow
from tests.factories import make_workflow

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/wf/events/"


def original(**overrides):
    body = {
        "kind": "tool_call",
        "content": "lookup order 991",
        "agent": "support-agent",
        "role": "assistant",
        "client_event_id": "ev-1",
        "tool_call_id": "call-1",
        "side_effect": "pending",
        "facts": [{"key": "order:991", "kind": "decision", "text": "refund approved", "state": "open"}],
        "refs": ["ticket-7"],
    }
    return body | overrides


@pytest.fixture
def stored(alice, tenant):
    make_workflow(tenant, "wf")
    r = alice.api.post(URL, {"events": [original()]}, format="json")
    assert r.status_code == 201, r.content
    return Workflow.objects.get(external_id="wf")


def test_an_exact_resend_returns_the_original_seq_and_writes_nothing(alice, stored):
    r = alice.api.post(URL, {"events": [original()]}, format="json")
    assert r.status_code == 200 and r.json()["events"][0]["seq"] == 1
    assert Event.objects.filter(workflow=stored).count() == 1


@pytest.mark.parametrize(
    "change, field",
    [
        ({"content": "lookup order 992"}, "content"),
        ({"facts": []}, "facts"),
        (
            {"facts": [{"key": "order:991", "kind": "decision", "text": "refund denied", "state": "open"}]},
            "facts",
        ),
        ({"refs": ["ticket-8"]}, "refs"),
        ({"refs": []}, "refs"),
        ({"role": "user"}, "role"),
        ({"side_effect": "done"}, "side_effect"),
        ({"tool_call_id": "call-2"}, "tool_call_id"),
        ({"agent": "other-agent"}, "agent"),
        ({"kind": "tool_result"}, "kind"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_resend_that_differs_in_any_field_is_a_409(alice, stored, change, field):
    fresh = {"kind": "message", "content": "new", "client_event_id": "ev-2"}
    r = alice.api.post(URL, {"events": [fresh, original(**change)]}, format="json")
    assert r.status_code == 409, r.content
    body = r.json()
    assert body["error"] == "client_event_id_conflict" and body["fields"] == [field]
    assert field in body["detail"] and body["seq"] == 1
    assert Event.objects.filter(workflow=stored).count() == 1  # the fresh event was not written either
    stored_event = Event.objects.get(workflow=stored, seq=1)
    assert stored_event.refs == ["ticket-7"] and stored_event.side_effect == "pending"


def test_a_resend_of_a_purged_event_is_compared_on_what_the_tombstone_kept(alice, stored):
    purge_events(stored, {"seqs": [1]}, Actor.user("alice"), "erasure")
    # The client still holds the original: an exact re-send is recognised and writes nothing back.
    r = alice.api.post(URL, {"events": [original()]}, format="json")
    assert r.status_code == 200 and r.json()["events"][0]["seq"] == 1
    ev = Event.objects.get(workflow=stored, seq=1)
    assert ev.content == "" and ev.facts == [] and ev.refs == []
    r = alice.api.post(URL, {"events": [original(tool_call_id="call-9")]}, format="json")
    assert r.status_code == 409 and r.json()["fields"] == ["tool_call_id"]
