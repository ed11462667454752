"""The rest of the v1 surface through the Python client against the live server: summaries and
their lifecycle, the activation CAS, lineage and investigations, audit, policy, what-if, alerts,
metrics and retention."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memoryhub.client import Conflict, MemoryHubClient, NotFound, ValidationFailed

pytestmark = pytest.mark.django_db(transaction=True)

COMPACTOR = {"name": "external-notes", "version": "1.0", "model": "none"}


@pytest.fixture
def hub(live_server, alice) -> Iterator[MemoryHubClient]:
    with MemoryHubClient(live_server.url, api_key=alice.key.secret, timeout=30) as client:
        yield client


def content(end: int) -> dict:
    return {
        "narrative": f"Events 1-{end}: the payments API requirements were collected.",
        "facts": [
            {
                "key": "req-401",
                "kind": "requirement",
                "text": "401 without a token",
                "state": "open",
                "source_seqs": [1],
            }
        ],
        "open_items": [],
    }


def seed(hub: MemoryHubClient, wf: str, n: int = 6) -> None:
    hub.create_workflow(wf)
    events = [
        {
            "kind": "requirement",
            "content": "REQ req-401: a missing bearer token returns 401 Unauthorized",
            "agent": "requirements_agent",
            "facts": [
                {"key": "req-401", "kind": "requirement", "text": "401 without a token", "state": "open"}
            ],
        }
    ]
    events += [
        {"kind": "message", "content": f"note {i}", "agent": "test_generator"} for i in range(2, n + 1)
    ]
    hub.append_events(wf, events)


def test_summary_lifecycle_and_the_activation_cas(hub):
    seed(hub, "wf-s")
    s1 = hub.submit_summary("wf-s", 1, 4, content(4), COMPACTOR, source_refs=["spec-v7"])
    assert s1.status == "CANDIDATE" and s1.version == 1 and s1.content_hash.startswith("sha256:")
    assert hub.get_summary(s1.summary_id).covers_to_seq == 4
    verified = hub.verify_summary(s1.summary_id)
    assert verified["match"] is True and verified["computed_hash"] == s1.content_hash
    assert hub.validate(s1.summary_id)["status"] == "VALIDATED"
    workflow = hub.get_workflow("wf-s")
    activated = hub.activate(s1.summary_id, expected_revision=workflow.active_revision)
    assert activated["active_revision"] == workflow.active_revision + 1

    s2 = hub.submit_summary("wf-s", 1, 6, content(6), COMPACTOR)
    hub.validate(s2.summary_id)
    with pytest.raises(Conflict) as stale:  # a late worker still holding the old revision
        hub.activate(s2.summary_id, expected_revision=workflow.active_revision)
    assert stale.value.code == "stale_revision"
    assert stale.value.current_revision == workflow.active_revision + 1
    assert (
        hub.activate(s2.summary_id, expected_revision=stale.value.current_revision)["summary_id"]
        == s2.summary_id
    )

    context = hub.get_context("wf-s")
    assert context.summary is not None and context.summary.summary_id == s2.summary_id and context.tail == []
    assert [s.version for s in hub.list_summaries("wf-s")] == [2, 1]
    assert hub.diff_summary(s2.summary_id, against=s1.summary_id)
    quarantined = hub.quarantine(s2.summary_id, reason="reviewer found an omission")
    assert quarantined["status"] == "QUARANTINED"
    assert hub.get_context("wf-s").summary.summary_id == s1.summary_id  # pointer fell back to S1
    with pytest.raises(ValidationFailed):
        hub.submit_summary("wf-s", 1, 99, content(6), COMPACTOR)  # beyond head


def test_lineage_investigation_and_audit(hub):
    seed(hub, "wf-a")
    context = hub.get_context("wf-a")
    hub.record_trace(
        "wf-a",
        agent="publisher",
        agent_run_id="run-p",
        model_call_id="call-p",
        summary_id=None,
        tail_to_seq=context.tail_to_seq,
        context_id=context.context_id,
        manifest_hash=context.manifest_hash,
    )
    hub.record_artifact("wf-a", artifact_id="T70", kind="test_suite", produced_by={"model_call_id": "call-p"})
    lineage = hub.lineage("T70")
    assert "call-p" in str(lineage)
    investigation = hub.investigate("T70", "401 Unauthorized")
    assert investigation["verdict"] == "downstream_reasoning_failure"  # it was in what the publisher read
    assert hub.investigations("T70")[0]["verdict"] == investigation["verdict"]
    assert hub.replay_bundle(hub.list_traces("wf-a")[0].trace_id)
    entries = hub.audit()
    assert {"trace.record", "artifact.record"} <= {e["action"] for e in entries}
    assert hub.verify_audit()
    with pytest.raises(NotFound):
        hub.lineage("T404")


def test_policy_what_if_decisions_alerts_metrics_and_retention(hub):
    seed(hub, "wf-p")
    policy = hub.put_policy("wf-p", {"target_tokens": 6000})
    assert policy["safe_budget"] == 18_000 and hub.get_policy("wf-p")["target_tokens"] == 6000
    what_if = hub.evaluate_trigger(workflow="wf-p", current_tokens=17_000, expected_next_step_tokens=4_000)
    assert what_if.action == "compact" and what_if.projected_tokens == 21_000
    hub.trigger("wf-p", expected_next_step_tokens=100)
    assert [d.action for d in hub.list_decisions("wf-p")] == ["continue"]
    assert hub.list_compactions("wf-p") == []

    channel = hub.create_channel(kind="webhook", name="ops", url="https://hooks.example.com/ops")
    rule = hub.create_alert_rule(
        name="unvalidated consumers",
        metric="unvalidated_consumptions",
        comparator="gt",
        warning_threshold=0,
        critical_threshold=2,
        window_minutes=60,
        interval_seconds=60,
        channels=[channel["id"]],
    )
    assert any(r["id"] == rule["id"] for r in hub.list_alert_rules())
    assert hub.get_alert_rule(rule["id"])["metric"] == "unvalidated_consumptions"
    hub.delete_alert_rule(rule["id"])
    with pytest.raises(NotFound):
        hub.get_alert_rule(rule["id"])
    assert isinstance(hub.list_alerts(), list)
    assert hub.metrics()
    assert hub.get_retention() is not None
