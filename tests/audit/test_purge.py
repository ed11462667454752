"""Purge: tombstones, scrubbed derived summaries, pointer fallback, purge epoch, and no output anywhere
returning the purged content afterwards."""

from __future__ import annotations

import json

import pytest

from audit.models import AuditEntry, Investigation, Purge, SummaryComment
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict
from memoryhub.memory import lifecycle
from memoryhub.models import Event, Summary, SummaryStatus
from memoryhub.pipeline.jobs import request_compaction, run_job
from tests.factories import append, event, make_workflow

pytestmark = pytest.mark.django_db

SECRET = "Customer Jane Roe disputes charge ch_8812 via phone 555-0142"
ACTOR = Actor.user("alice")


def compact(workflow):
    job, _ = request_compaction(workflow, actor=ACTOR)
    run_job(job.pk, f"test-{job.pk}")
    job.refresh_from_db()
    assert job.status == "SUCCEEDED" and job.outcome == "activated", (job.status, job.outcome, job.error)
    workflow.refresh_from_db()
    return job


@pytest.fixture
def incident(tenant):
    wf = make_workflow(tenant, "refunds-7")
    append(wf, [event(i) for i in range(1, 3)])
    append(
        wf,
        [
            event(
                3,
                content=SECRET + ".",
                facts=[{"key": "customer:jane-roe", "kind": "issue", "text": SECRET, "state": "open"}],
                refs=["ticket-88"],
            )
        ],
    )
    append(wf, [event(i) for i in range(4, 9)])
    compact(wf)
    first = wf.active_summary
    assert first is not None and SECRET in first.content
    append(wf, [event(i) for i in range(9, 13)])
    compact(wf)
    assert wf.active_summary.version == 2
    return wf


def test_purge_tombstones_events_and_scrubs_every_derived_summary(incident, alice):
    r = alice.api.post(
        "/api/v1/workflows/refunds-7/purge/",
        {"seq_from": 3, "seq_to": 3, "reason": "GDPR erasure request 4411"},
        format="json",
    )
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["event_count"] == 1 and body["seqs"] == [3]
    assert len(body["affected_summaries"]) == 2 and body["active_summary_before"]
    purge = Purge.objects.get(purge_id=body["purge_id"])
    ev = Event.objects.get(workflow=incident, seq=3)
    assert ev.content == "" and ev.facts == [] and ev.refs == [] and ev.purge == purge
    assert ev.content_hash.startswith("sha256:") and ev.token_count > 0  # minimal provenance kept
    for summary in Summary.objects.filter(workflow=incident):
        assert summary.purged_by == purge and SECRET not in summary.content
        assert summary.content_hash.startswith("sha256:")
    assert set(Summary.objects.filter(workflow=incident).values_list("status", flat=True)) == {
        SummaryStatus.QUARANTINED
    }
    incident.refresh_from_db()
    assert incident.purge_epoch == 1
    # the pointer never lands on a scrubbed summary
    assert incident.active_summary_id is None or incident.active_summary.purged_by_id is None
    entry = AuditEntry.objects.filter(tenant=incident.tenant, action="purge.create").get()
    assert entry.data["event_count"] == 1 and "GDPR" in entry.data["reason"]


def test_purge_by_subject_key_and_by_seqs(incident, alice):
    r = alice.api.post(
        "/api/v1/workflows/refunds-7/purge/",
        {"subject": "customer:jane-roe", "reason": "erasure"},
        format="json",
    )
    assert r.status_code == 201 and r.json()["seqs"] == [3]
    r = alice.api.post("/api/v1/workflows/refunds-7/purge/", {"seqs": [3], "reason": "again"}, format="json")
    assert r.status_code == 409 and r.json()["error"] == "nothing_to_purge"
    r = alice.api.post(
        "/api/v1/workflows/refunds-7/purge/", {"seqs": [1, 2], "reason": "cleanup"}, format="json"
    )
    assert r.status_code == 201 and r.json()["seqs"] == [1, 2]


@pytest.mark.parametrize(
    "body, code",
    [
        ({"seq_from": 3, "seq_to": 3}, "reason_required"),
        ({"reason": "x"}, "invalid_selector"),
        ({"seq_from": 5, "seq_to": 2, "reason": "x"}, "invalid_selector"),
        ({"seqs": [3], "subject": "a", "reason": "x"}, "invalid_selector"),
        ({"seqs": "3", "reason": "x"}, "invalid_selector"),
    ],
)
def test_bad_purge_requests_write_nothing(incident, alice, body, code):
    r = alice.api.post("/api/v1/workflows/refunds-7/purge/", body, format="json")
    assert r.status_code == 400 and r.json()["error"] == code
    assert not Purge.objects.exists() and Event.objects.filter(purged_at__isnull=False).count() == 0


def test_only_admins_purge(incident, bob, carol, mallory):
    body = {"seqs": [3], "reason": "x"}
    assert bob.api.post("/api/v1/workflows/refunds-7/purge/", body, format="json").status_code == 403
    assert carol.api.post("/api/v1/workflows/refunds-7/purge/", body, format="json").status_code == 403
    assert mallory.api.post("/api/v1/workflows/refunds-7/purge/", body, format="json").status_code == 404
    assert not Purge.objects.exists()


def test_a_job_started_before_the_purge_cannot_bring_content_back(incident, alice):
    append(incident, [event(i) for i in range(13, 16)])
    late_job, _ = request_compaction(incident, actor=ACTOR)  # computed against the old epoch
    alice.api.post("/api/v1/workflows/refunds-7/purge/", {"seqs": [3], "reason": "erasure"}, format="json")
    run_job(late_job.pk, "late-worker")
    incident.refresh_from_db()
    for summary in Summary.objects.filter(workflow=incident, purged_by__isnull=True):
        assert SECRET not in summary.content
        assert "ch_8812" not in summary.content
    if incident.active_summary_id:
        assert SECRET not in incident.active_summary.content


def _all_outputs(party, wf: str) -> list[str]:
    """Every API response and page that could show workflow content (JSON/HTML as text)."""
    api, web = party.api, party.web
    outputs = []
    urls = [
        f"/api/v1/workflows/{wf}/",
        f"/api/v1/workflows/{wf}/events/?limit=1000",
        f"/api/v1/workflows/{wf}/context/",
        f"/api/v1/workflows/{wf}/summaries/",
        "/api/v1/audit/?page_size=500",
        "/api/v1/purges/",
        "/api/v1/artifacts/T-77/lineage/",
        "/api/v1/artifacts/T-77/investigations/",
    ]
    for s in Summary.objects.filter(workflow__external_id=wf):
        urls += [
            f"/api/v1/summaries/{s.summary_id}/",
            f"/api/v1/summaries/{s.summary_id}/verify/",
            f"/api/v1/summaries/{s.summary_id}/diff/",
        ]
    from memoryhub.models import ConsumerTrace

    for t in ConsumerTrace.objects.filter(workflow__external_id=wf):
        urls.append(f"/api/v1/traces/{t.pk}/replay/")
    for url in urls:
        r = api.get(url)
        assert r.status_code in (200, 404, 409), (url, r.status_code)
        outputs.append(r.content.decode())
    pages = [f"/workflows/{wf}/", "/artifacts/T-77/", "/audit/", "/retention/", "/overview/"]
    pages += [f"/summaries/{s.summary_id}/" for s in Summary.objects.filter(workflow__external_id=wf)]
    for page in pages:
        r = web.get(page)
        assert r.status_code in (200, 404), (page, r.status_code)
        outputs.append(r.content.decode())
    return outputs


def test_after_a_purge_no_output_returns_the_purged_content(incident, alice):
    from audit.investigate import investigate
    from memoryhub.context.traces import record_artifact, record_trace

    summary = incident.active_summary
    trace, _ = record_trace(
        incident,
        {
            "agent": "publisher",
            "agent_run_id": "run-1",
            "model_call_id": "call-1",
            "summary_id": summary.summary_id,
            "tail_to_seq": incident.head_seq,
        },
        ACTOR,
    )
    artifact, _ = record_artifact(
        incident, {"artifact_id": "T-77", "kind": "report", "produced_by": {"model_call_id": "call-1"}}, ACTOR
    )
    investigate(artifact, "Jane Roe", ACTOR)
    # A client that builds ids from content: the tool call's ids quote the customer's charge.
    fact = {"key": "customer:jane-roe", "kind": "issue", "text": "refund lookup", "state": "open"}
    append(
        incident,
        [
            event(13, kind="tool_call", content="lookup_refund", tool_call_id="lookup-ch_8812",
                  client_event_id="jane-roe-555-0142-call", facts=[fact]),
            event(14, kind="tool_result", content="refund pending", tool_call_id="lookup-ch_8812",
                  client_event_id="jane-roe-555-0142-result", facts=[fact]),
        ],
    )  # fmt: skip
    derived_records(incident)
    before = "\n".join(_all_outputs(alice, "refunds-7"))
    assert "Jane Roe" in before  # the crawl really reaches the content
    for record_text in derived_texts(incident):  # ... and each derived record quotes it
        assert "jane" in record_text.lower(), record_text[:300]
    r = alice.api.post(
        "/api/v1/workflows/refunds-7/purge/",
        {"subject": "customer:jane-roe", "reason": "erasure"},
        format="json",
    )
    assert r.status_code == 201
    outputs = _all_outputs(alice, "refunds-7")
    after = "\n".join(outputs)
    for needle in ("Jane Roe", "555-0142", "ch_8812", "customer:jane-roe"):
        leaks = [o[max(0, o.find(needle) - 300) : o.find(needle) + 100] for o in outputs if needle in o]
        assert not leaks, (needle, leaks[:2])
    assert "unavailable: purged by " + r.json()["purge_id"] in after
    inv = Investigation.objects.get()
    assert "Jane Roe" not in json.dumps(inv.evidence) and inv.fact == "[purged]"
    # The records themselves (append-only rows read through their payloads) hold no purged text.
    for record_text in derived_texts(incident):
        for needle in ("jane roe", "555-0142", "ch_8812", "customer:jane-roe"):
            assert needle not in record_text.lower(), (needle, record_text[:300])
    # Tombstoned payloads keep their digests: the audit chain still verifies after the purge.
    from audit.verify import verify_chain

    assert verify_chain(incident.tenant)["ok"] is True


def derived_records(workflow) -> None:
    """Records derived from the secret: a candidate rejected by the validator whose check details
    quote the purged fact key and text, a reviewer's rejection reason quoting it (lifecycle event +
    audit entry), and a quarantine reason."""
    from memoryhub.memory.summaries import create_summary

    fact = {"key": "customer:jane-roe", "kind": "issue", "text": SECRET, "state": "open", "source_seqs": [2]}
    rejected = create_summary(
        workflow,
        content={"schema": "memoryhub.summary/v1", "narrative": "n", "facts": [fact]},
        covers_from_seq=1,
        covers_to_seq=workflow.head_seq,
        compactor={"name": "manual"},
        actor=ACTOR,
    )
    lifecycle.validate(rejected, ACTOR)
    rejected.refresh_from_db()
    assert rejected.status == SummaryStatus.REJECTED
    other = create_summary(
        workflow,
        content={"schema": "memoryhub.summary/v1", "narrative": "a clean retelling", "facts": []},
        covers_from_seq=1,
        covers_to_seq=workflow.head_seq,
        compactor={"name": "manual"},
        actor=ACTOR,
    )
    lifecycle.reject(
        other, Actor.user("bob"), "duplicate of Jane Roe's dispute ch_8812 (call her on 555-0142)"
    )
    from audit.review import add_comment

    add_comment(other, Actor.user("bob"), f"before we decide: the source says {SECRET}")


def derived_texts(workflow) -> list[str]:
    """Every validation record, lifecycle event and audit entry of the workflow's tenant, as text."""
    from memoryhub.models import LifecycleEvent, ValidationRecord

    texts = [
        json.dumps({"checks": v.checks, "reasons": v.reasons})
        for v in ValidationRecord.objects.filter(summary__workflow=workflow)
        if any(not c["passed"] for c in v.checks)
    ]
    texts += [e.reason for e in LifecycleEvent.objects.filter(workflow=workflow, action="reject")]
    texts += [
        json.dumps(e.data) for e in AuditEntry.objects.filter(tenant=workflow.tenant, action="summary.reject")
    ]
    texts += list(SummaryComment.objects.filter(summary__workflow=workflow).values_list("text", flat=True))
    return texts


def test_lifecycle_cannot_reactivate_a_scrubbed_summary(incident, alice):
    alice.api.post("/api/v1/workflows/refunds-7/purge/", {"seqs": [3], "reason": "erasure"}, format="json")
    scrubbed = Summary.objects.filter(workflow=incident, purged_by__isnull=False).order_by("-version").first()
    lifecycle.release(scrubbed, Actor.user("alice"), "try to bring it back")
    scrubbed.refresh_from_db()
    incident.refresh_from_db()
    with pytest.raises(Conflict) as refused:
        lifecycle.activate(scrubbed, incident.active_revision, Actor.user("alice"))
    assert refused.value.code == "summary_purged"
    incident.refresh_from_db()
    assert incident.active_summary_id != scrubbed.pk


def test_open_tool_calls_and_pending_side_effects_forget_ids_that_quote_purged_content(tenant, alice):
    wf = make_workflow(tenant, "ids-1")
    append(
        wf,
        [
            event(1),
            event(
                2,
                kind="tool_call",
                content="look up customer:jane-roe",
                tool_call_id="lookup-customer:jane-roe",
                side_effect="pending",
                refs=["customer:jane-roe"],
            ),
            event(3, kind="tool_call", tool_call_id="call-plain", side_effect="pending"),
        ],
    )
    wf.refresh_from_db()
    assert "lookup-customer:jane-roe" in wf.open_tool_calls
    r = alice.api.post(
        "/api/v1/workflows/ids-1/purge/", {"subject": "customer:jane-roe", "reason": "erasure"}, format="json"
    )
    assert r.status_code == 201 and r.json()["seqs"] == [2]
    wf.refresh_from_db()
    # Counts (what trigger guards read) are kept; the content-quoting id is gone, the plain one stays.
    assert wf.open_tool_calls == ["purged-seq-2", "call-plain"]
    assert wf.pending_side_effects == ["purged-seq-2", "call-plain"]
    assert "jane-roe" not in alice.api.get("/api/v1/workflows/ids-1/").content.decode()
