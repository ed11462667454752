"""POST /api/v1/workflows/<wf>/timeline/: events and the calls between them, in one request."""

from __future__ import annotations

import pytest

from memoryhub.models import ConsumerTrace, Event, Workflow

pytestmark = pytest.mark.django_db
URL = "/api/v1/workflows/chat/timeline/"


def _ev(i: int, role: str = "user") -> dict:
    return {"event": {"kind": "message", "role": role, "content": f"message {i}", "client_event_id": f"e{i}"}}


def _call(name: str) -> dict:
    return {"trace": {"agent": "a", "agent_run_id": "r", "model_call_id": name, "summary_id": None}}


@pytest.fixture
def chat(api):
    api.post("/api/v1/workflows/", {"external_id": "chat"}, format="json")
    return api


def test_each_call_reads_what_came_before_it_and_a_resend_changes_nothing(chat):
    items = [_ev(1), _call("c1"), _ev(2, "assistant"), _ev(3), _call("c2"), _ev(4, "assistant")]
    first = chat.post(URL, {"items": items}, format="json")
    assert first.status_code == 201, first.content
    assert [(t["model_call_id"], t["tail_to_seq"], t["created"]) for t in first.json()["traces"]] == [
        ("c1", 1, True),
        ("c2", 3, True),
    ]
    assert first.json()["head_seq"] == 4
    flags = {t.model_call_id: t.flags for t in ConsumerTrace.objects.all()}
    assert not [f for f in flags.values() if "tail_loss" in f]  # later events were not there yet
    again = chat.post(URL, {"items": items}, format="json")
    assert again.status_code == 200 and again.json()["traces"] == [
        {**t, "created": False} for t in first.json()["traces"]
    ]
    assert Event.objects.count() == 4 and ConsumerTrace.objects.count() == 2


def test_a_call_first_in_the_timeline_read_the_head_before_it(chat):
    chat.post(URL, {"items": [_ev(1), _ev(2)]}, format="json")
    answer = chat.post(URL, {"items": [_call("c"), _ev(3)]}, format="json")
    assert answer.json()["traces"][0]["tail_to_seq"] == 2


@pytest.mark.parametrize(
    ("items", "code"),
    [
        ([_ev(1), {"note": {}}], "invalid_timeline"),
        ([_ev(1), {"event": {}, "trace": {}}], "invalid_timeline"),
        ([_ev(1), {"trace": {**_call("c")["trace"], "tail_to_seq": 1}}], "invalid_timeline"),
        ([_ev(1), {"trace": {"agent": "a"}}], "invalid_trace"),
        ([_ev(1), {"event": {"kind": "nope", "content": "x"}}], "invalid_event"),
        ([], "invalid_body"),
    ],
)
def test_bad_input_is_a_clear_400_and_writes_nothing(chat, items, code):
    answer = chat.post(URL, {"items": items}, format="json")
    assert answer.status_code == 400 and answer.json()["error"] == code, answer.content
    assert Workflow.objects.get(external_id="chat").head_seq == 0 and not ConsumerTrace.objects.exists()


def test_over_the_batch_limit_is_413(chat, settings):
    settings.MEMORYHUB_MAX_BATCH_EVENTS = 3
    answer = chat.post(URL, {"items": [_ev(i) for i in range(4)]}, format="json")
    assert answer.status_code == 413 and answer.json()["error"] == "batch_too_large"


def test_missed_compaction_is_judged_at_each_calls_own_read(chat):
    """The safe budget is 18,000 tokens: the first call read ~10k, the second ~20k (over it)."""
    from tests.triggers.test_api import SEED_POLICY

    assert chat.put("/api/v1/workflows/chat/policy/", SEED_POLICY, format="json").status_code == 200
    big = " ".join(f"word{i}" for i in range(5_000))  # ~10k tokens
    items = [
        {"event": {"kind": "message", "role": "user", "content": big, "client_event_id": "b1"}},
        _call("under"),
        {"event": {"kind": "message", "role": "user", "content": big + " again", "client_event_id": "b2"}},
        _call("over"),
    ]
    answer = chat.post(URL, {"items": items}, format="json")
    assert answer.status_code == 201, answer.content
    flags = {t["model_call_id"]: t["flags"] for t in answer.json()["traces"]}
    assert "missed_compaction" not in flags["under"] and "missed_compaction" in flags["over"]


def test_attest_read_gives_each_call_the_read_it_made_and_a_resend_keeps_it(chat):
    """A framework that assembled its own context (the Claude Code hook) asks the server to attest
    each call's read: summary + everything before the call, checked at that call's place."""
    from memoryhub.context.assembly import parse_context_id, recompute_manifest_hash

    attest = {"trace": {**_call("c1")["trace"], "attest_read": True}}
    items = [_ev(1), attest, _ev(2, "assistant"), _call("c2")]
    assert chat.post(URL, {"items": items}, format="json").status_code == 201
    c1, c2 = ConsumerTrace.objects.get(model_call_id="c1"), ConsumerTrace.objects.get(model_call_id="c2")
    assert c1.flags == [] and c1.context_id and c1.manifest_hash
    coords = parse_context_id(c1.context_id)
    assert coords is not None and coords.head_seq == 1 and coords.summary_pk is None
    assert recompute_manifest_hash(c1.workflow, coords) == c1.manifest_hash
    assert c2.flags == ["missing_provenance"] and not c2.context_id  # not asked: not attested
    again = chat.post(URL, {"items": items}, format="json")
    assert again.status_code == 200, again.content  # the retry is the same trace, not a conflict


def test_attest_read_is_refused_for_a_summary_that_is_not_served(chat, alice):
    """The server attests only the read it would serve: a call naming a summary that is not the
    active one stays without provenance (flagged), never gets a made-up manifest."""
    from memoryhub.core.actors import Actor
    from memoryhub.memory.summaries import create_summary

    chat.post(URL, {"items": [_ev(1), _ev(2)]}, format="json")
    workflow = Workflow.objects.get(external_id="chat")
    summary = create_summary(
        workflow,
        content={"narrative": "one and two", "facts": [], "open_items": []},
        covers_from_seq=1,
        covers_to_seq=2,
        compactor={"name": "t", "version": "1"},
        actor=Actor.user("alice"),
    )  # a CANDIDATE, never activated: readers are served the raw history
    trace = {**_call("c")["trace"], "summary_id": summary.summary_id, "attest_read": True}
    assert chat.post(URL, {"items": [{"trace": trace}, _ev(3)]}, format="json").status_code == 201
    made = ConsumerTrace.objects.get(model_call_id="c")
    assert "missing_provenance" in made.flags and made.context_id == "" and made.manifest_hash == ""


def test_attest_read_must_be_a_boolean(chat):
    bad = {"trace": {**_call("c")["trace"], "attest_read": "yes"}}
    answer = chat.post(URL, {"items": [_ev(1), bad]}, format="json")
    assert answer.status_code == 400 and "attest_read" in answer.json()["detail"]
