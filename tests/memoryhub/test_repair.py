"""Close the loop (issue #32): the server's verdict on a framework's summary and the hand-back."""

from __future__ import annotations

import json

import pytest

from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from memoryhub.examples.repair_scenario import (
    CONSTRAINT,
    LOSSY_SUMMARY,
    MUST_RETURN,
    ORDER_ID,
    REQUIREMENT,
    TRACKING_ID,
    TURNS,
)
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.models import CompactionJob, SummaryStatus, WorkflowSource
from tests.factories import append, make_workflow
from triggers.services import save_policy

ACTOR = Actor.system("framework")
LC = {"name": "langchain-summarization", "model": "fake"}


def _wf(tenant, external_id="rep-1", source=WorkflowSource.LANGCHAIN):
    wf = make_workflow(tenant, external_id, source=source)
    append(wf, [{"kind": "message", "role": role, "content": text} for role, text in TURNS])
    return wf


def _record(wf, text=LOSSY_SUMMARY, **kw):
    kw.setdefault("covers_to_seq", len(TURNS))
    return record_observed_compaction(wf, text=text, compactor=LC, actor=ACTOR, **kw)


def test_a_lossy_summary_is_repaired_obligations_first_each_with_its_seq(tenant):
    wf = _wf(tenant)
    result = _record(wf, observation_id="obs-1")
    rep = result.repair
    assert rep["verdict"] == "repaired" and rep["needed"] and rep["gate"] == "repair"
    kinds = [i["kind"] for i in rep["items"]]
    assert kinds.index("unit") > max(i for i, k in enumerate(kinds) if k == "obligation")
    by_seq: dict[int, str] = {}
    for item in rep["items"]:
        by_seq[item["seq"]] = by_seq.get(item["seq"], "") + " " + item["text"]
    assert REQUIREMENT in by_seq[2] and CONSTRAINT in by_seq[4]
    assert ORDER_ID in by_seq[6] and TRACKING_ID in by_seq[6]
    for value in MUST_RETURN:
        assert value in rep["text"]
    assert rep["text"].startswith("Kept from before the summary")
    assert rep["lost"]["obligations"] >= 2 and rep["lost"]["units"] >= 2
    # The summary is still what the framework reads (repair, not block) ...
    assert result.activation == "activated" and result.summary.status == SummaryStatus.ACTIVE
    # ... and the job keeps the verdict without any event text (a purge leaves nothing behind).
    stored = CompactionJob.objects.get(pk=result.job.pk).attempts[0]["repair"]
    assert stored["verdict"] == "repaired" and {"kind": "obligation", "seq": 2} in stored["handed_back"]
    assert ORDER_ID not in json.dumps(stored) and "Friday" not in json.dumps(stored)
    # A repeat answers the same hand-back.
    again = _record(wf, observation_id="obs-1")
    assert not again.created and again.repair["items"] == rep["items"]


def test_a_summary_that_keeps_everything_hands_back_nothing(tenant):
    wf = _wf(tenant)
    full = " ".join(text for _, text in TURNS)
    rep = _record(wf, text=full, observation_id="obs-full").repair
    assert rep["verdict"] == "kept" and rep["items"] == [] and rep["text"] == "" and not rep["needed"]


def test_the_hand_back_is_capped_to_the_policy_budget(tenant):
    wf = _wf(tenant)
    save_policy(tenant, {"repair": {"max_tokens": 40}}, ACTOR, workflow=wf, partial=True)
    rep = _record(wf, observation_id="obs-cap").repair
    assert rep["omitted"] >= 1 and len(rep["items"]) >= 1
    assert rep["items"][0]["seq"] == 2  # the obligations come first
    assert "more (see MemoryHub)" in rep["text"]


@pytest.mark.parametrize("text", ["", "   ", "…  ---"])
def test_an_empty_or_unreadable_summary_is_flagged_and_repaired_with_the_tail(tenant, text):
    wf = _wf(tenant)
    result = _record(wf, text=text, observation_id="obs-empty")
    rep = result.repair
    assert rep["empty_summary"] and rep["verdict"] == "repaired"
    assert "empty or unreadable" in rep["note"]
    for value in MUST_RETURN:
        assert value in rep["text"]
    # the tail the summary replaced: the last assistant turn comes back too
    assert "Thanks, I will keep an eye on the shipment." in rep["text"]
    assert CompactionJob.objects.get(pk=result.job.pk).attempts[0]["repair"]["empty_summary"] is True


def test_an_absent_claude_code_summary_is_empty_not_unknown(tenant):
    wf = _wf(tenant, source=WorkflowSource.CLAUDE_CODE)
    from memoryhub.integrations.claude_code import ABSENT_SUMMARY, EMPTY_DIGEST

    result = record_observed_compaction(
        wf,
        covers_to_seq=len(TURNS),
        opaque={"digest": EMPTY_DIGEST, "size_bytes": 0, "media_type": ABSENT_SUMMARY},
        compactor={"name": "claude-code"},
        actor=ACTOR,
    )
    assert result.repair["empty_summary"] and ORDER_ID in result.repair["text"]


def test_opaque_content_is_unknown_and_never_repaired(tenant):
    wf = _wf(tenant)
    result = record_observed_compaction(
        wf,
        covers_to_seq=len(TURNS),
        opaque={"digest": "sha256:" + "ab" * 32, "size_bytes": 900},
        compactor={"name": "anthropic"},
        actor=ACTOR,
    )
    rep = result.repair
    assert rep["verdict"] == "unknown" and rep["items"] == [] and "cannot be read" in rep["note"]


def test_gate_block_refuses_the_summary_for_a_caller_that_can_keep_its_context(tenant):
    wf = _wf(tenant)
    save_policy(tenant, {"repair": {"gate": "block"}}, ACTOR, workflow=wf, partial=True)
    result = _record(wf, observation_id="obs-block", can_block=True)
    assert result.repair["verdict"] == "blocked" and result.activation == "blocked"
    wf.refresh_from_db()
    assert wf.active_summary_id is None  # the framework keeps its previous context: nothing active
    assert CompactionJob.objects.get(pk=result.job.pk).outcome == "blocked"
    # A caller that cannot keep its context (Claude Code) gets the hand-back instead, said so.
    other = _record(wf, observation_id="obs-block-2", covers_to_seq=5)
    assert (
        other.repair["verdict"] == "repaired" and "cannot keep the previous context" in other.repair["note"]
    )
    assert other.activation == "activated"


def test_gate_observe_records_the_loss_and_hands_back_nothing(tenant):
    wf = _wf(tenant)
    save_policy(tenant, {"repair": {"gate": "observe"}}, ACTOR, workflow=wf, partial=True)
    rep = _record(wf, observation_id="obs-observe").repair
    assert rep["verdict"] == "observed" and rep["items"] == [] and rep["text"] == ""
    assert rep["omitted"] >= 4 and rep["lost"]["obligations"] >= 2


@pytest.mark.parametrize(
    "repair",
    [{"gate": "maybe"}, {"resummarize": "yes"}, {"max_tokens": 5}, {"max_tokens": True}, {"colour": 1}, []],
)
def test_a_bad_repair_policy_is_refused(tenant, repair):
    wf = _wf(tenant)
    with pytest.raises(InvalidInput):
        save_policy(tenant, {"repair": repair}, ACTOR, workflow=wf, partial=True)


def test_summary_and_workflow_pages_show_the_badge_and_the_handed_back_items(tenant, alice):
    wf = _wf(tenant)
    result = _record(wf, observation_id="obs-page")
    page = alice.web.get(f"/summaries/{result.summary.summary_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-repair="repaired"' in html and 'id="repair"' in html
    for value in (REQUIREMENT, CONSTRAINT, ORDER_ID, TRACKING_ID):
        assert value in html, value
    assert 'data-kind="obligation" data-seq="2"' in html
    page = alice.web.get(f"/workflows/{wf.external_id}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="repair-table"' in html
    assert html.count('data-repair="repaired"') >= 2  # the versions table and the verdict table
    assert ORDER_ID in html and REQUIREMENT in html


def test_pages_say_empty_summary_and_blocked(tenant, alice):
    wf = _wf(tenant)
    save_policy(tenant, {"repair": {"gate": "block"}}, ACTOR, workflow=wf, partial=True)
    blocked = _record(wf, observation_id="obs-b", can_block=True)
    empty = _record(wf, text="", observation_id="obs-e", covers_to_seq=5)
    html = alice.web.get(f"/workflows/{wf.external_id}/").content.decode()
    assert 'data-repair="blocked"' in html and "refused" in html
    assert 'data-flag="empty_summary"' in html
    html = alice.web.get(f"/summaries/{empty.summary.summary_id}/").content.decode()
    assert 'data-flag="empty_summary"' in html and "cannot keep the previous context" in html
    assert blocked.summary.summary_id in alice.web.get(f"/workflows/{wf.external_id}/").content.decode()


def test_the_metric_counts_compactions_that_needed_repair_per_source_and_each_source_has_its_alert(tenant):
    from datetime import timedelta

    from django.utils import timezone

    from memoryhub.models import AlertEvent, AlertRule
    from memoryhub.observe import metrics
    from memoryhub.observe.alerting.deliver import flip_message
    from memoryhub.observe.alerting.evaluate import evaluate_rule
    from memoryhub.observe.alerting.prometheus import render
    from memoryhub.observe.reports import WINDOWS, overview_series, source_rows, workflow_state

    lc = _wf(tenant)
    cc = _wf(tenant, "rep-cc", source=WorkflowSource.CLAUDE_CODE)
    _record(lc, observation_id="m-1")  # lossy
    _record(lc, text=" ".join(t for _, t in TURNS), observation_id="m-2", covers_to_seq=7)  # keeps all
    _record(cc, text="", observation_id="m-3")  # empty
    since = timezone.now() - timedelta(hours=1)
    assert metrics.compute(tenant, "compactions_needing_repair", since=since) == 2
    assert metrics.needing_repair_by_source(tenant) == {"langchain": 1, "claude-code": 1}
    series = overview_series(tenant, WINDOWS["1h"], timezone.now())
    per_source = workflow_state(tenant, 0, timezone.now()).per_source
    rows = {r.source: r for r in source_rows(per_source, series.per_source)}
    assert rows["langchain"].needed_repair == 1 and rows["langchain"].observed == 2
    text = render([tenant])
    assert 'memoryhub_compactions_needing_repair{tenant="acme"} 2' in text
    assert 'memoryhub_compactions_needing_repair_by_source{tenant="acme",source="claude-code"} 1' in text
    # One default rule per source: each measures only its own integration's compactions, and the
    # alert it raises names that source.
    rules = {
        r.source_filter: r
        for r in AlertRule.objects.filter(tenant=tenant, metric="compactions_needing_repair")
    }
    assert set(rules) == {s.value for s in WorkflowSource} - {"langgraph"}
    assert all(
        r.is_default and r.warning_threshold == 0 and r.critical_threshold == 5 for r in rules.values()
    )
    for rule in rules.values():
        evaluate_rule(rule)
    states = {source: AlertRule.objects.get(pk=r.pk).state for source, r in rules.items()}
    assert states == {
        source: "warning" if source in ("langchain", "claude-code") else "ok" for source in rules
    }
    flip = AlertEvent.objects.get(rule=rules["claude-code"])
    assert "source Claude Code" in flip_message(flip).text and "is 1 " in flip_message(flip).text


def _counts():
    from memoryhub.models import Event, Summary

    return Event.objects.count(), Summary.objects.count(), CompactionJob.objects.count()


def test_the_verdict_route_judges_before_the_record_and_writes_nothing(tenant, api):
    wf = _wf(tenant)
    append(wf, [{"kind": "message", "role": "user", "content": "stored", "client_event_id": "c-8"}])
    before = _counts()
    url = f"/api/v1/workflows/{wf.external_id}/repair/"
    # Two more events not stored yet (the step that records the compaction is queued after).
    body = {
        "text": LOSSY_SUMMARY,
        "covers_to_event": "c-10",
        "events": [
            {"kind": "message", "role": "user", "content": "stored", "client_event_id": "c-8"},  # skipped
            {
                "kind": "message",
                "role": "user",
                "content": "Order ORD-99172 is urgent.",
                "client_event_id": "c-9",
            },
            {"kind": "message", "role": "assistant", "content": "On it.", "client_event_id": "c-10"},
        ],
        "can_block": True,
    }
    answer = api.post(url, body, format="json")
    assert answer.status_code == 200, answer.content
    rep = answer.json()
    assert rep["verdict"] == "repaired" and all(v in rep["text"] for v in MUST_RETURN)
    assert "[seq 9] ORD-99172" in rep["text"]  # the provisional seq after the head (8)
    assert _counts() == before  # nothing written
    # The same verdict the record computes.
    recorded = _record(wf, covers_to_seq=8, observation_id="v-1").repair
    answer = api.post(url, {"text": LOSSY_SUMMARY, "covers_to_seq": 8}, format="json").json()
    assert answer["items"] == recorded["items"]


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"covers_to_seq": 3}, 400, "invalid_repair_request"),
        ({"text": 5, "covers_to_seq": 3}, 400, "invalid_repair_request"),
        ({"text": "x"}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_seq": 3, "covers_to_event": "a"}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_seq": 99}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_seq": True}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_event": "nope"}, 400, "unknown_event"),
        ({"text": "x", "covers_to_seq": 3, "can_block": "yes"}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_seq": 3, "colour": 1}, 400, "invalid_repair_request"),
        ({"text": "x", "covers_to_seq": 3, "events": [{"kind": "bogus"}]}, 400, None),
        ({"text": "x" * 3_000_000, "covers_to_seq": 3}, 413, None),
    ],
)
def test_the_verdict_route_refuses_bad_input_with_an_error_and_writes_nothing(
    tenant, api, body, status, code
):
    wf = _wf(tenant)
    before = _counts()
    answer = api.post(f"/api/v1/workflows/{wf.external_id}/repair/", body, format="json")
    assert answer.status_code == status, answer.content
    data = answer.json()
    assert set(data) >= {"error", "detail"} and (code is None or data["error"] == code)
    assert _counts() == before
    assert (
        api.post(
            "/api/v1/workflows/nope/repair/", {"text": "", "covers_to_seq": 1}, format="json"
        ).status_code
        == 404
    )


def test_the_policy_page_switches_the_gate_and_keeps_it_on_the_next_save(tenant, alice):
    from tests.helpers import form_post
    from tests.triggers.test_pages import form_data
    from triggers.models import ContextPolicy

    wf = _wf(tenant)
    url = f"/triggers/workflows/{wf.external_id}/policy/"
    page = alice.web.get(url).content.decode()
    assert 'data-testid="policy-repair"' in page and 'value="block"' in page
    r = form_post(alice.web, url, form_data(repair_gate="block", repair_max_tokens=120))
    assert r.status_code == 302
    assert ContextPolicy.objects.get(workflow=wf).repair == {
        "gate": "block",
        "resummarize": False,
        "max_tokens": 120,
    }
    # A later save of other fields keeps the gate (the form shows what is in force).
    from triggers.forms import PolicyForm
    from triggers.policy import policy_for

    data = {k: v for k, v in form_data(policy_for(wf), target_tokens=9000).items()}
    assert form_post(alice.web, url, data).status_code == 302
    assert ContextPolicy.objects.get(workflow=wf).repair["gate"] == "block"
    assert PolicyForm.initial_from(policy_for(wf))["repair_gate"] == "block"
    # A bad budget is shown beside its input, nothing saved.
    r = form_post(alice.web, url, form_data(policy_for(wf), repair_max_tokens=5))
    assert r.status_code == 200 and "must be a whole number from 20" in r.content.decode()
    assert ContextPolicy.objects.get(workflow=wf).repair["max_tokens"] == 120
