"""Artifact lineage: every hop present, linked, and purges named; API and page."""

from __future__ import annotations

import re

from audit.lineage import artifact_lineage
from tests import factories as f


def test_lineage_walks_every_hop(incident):
    lin = artifact_lineage(incident.artifact)
    assert lin["artifact"]["artifact_id"] == "T57"
    assert lin["workflow"]["external_id"] == "api-tests-42"
    assert lin["complete"] is True, lin["gaps"]
    [t] = lin["traces"]
    assert t["trace_id"] == incident.trace.pk and t["model_call_id"] == "call-pub-0007-03"
    assert t["summary"]["summary_id"] == incident.s3.summary_id and t["summary"]["label"] == "S3"
    assert t["summary"]["compactor"]["version"] == "c2"
    assert t["watermark"] == 30
    # Two validator runs: the failure and the waiver that let S3 through.
    assert [v["passed"] for v in t["validations"]] == [False, True]
    assert t["validations"][0]["failed_checks"] == ["token_budget"]
    assert (
        t["validations"][1]["waived_checks"] == ["token_budget"]
        and t["validations"][1]["waived_by"] == "user:bob"
    )
    assert (t["covered"]["from_seq"], t["covered"]["to_seq"]) == (1, 30)
    assert (t["tail"]["from_seq"], t["tail"]["to_seq"], t["tail"]["count"]) == (31, 40, 10)
    assert t["covered"]["url"] == "/workflows/api-tests-42/events/1-30/"
    assert t["tail"]["url"] == "/workflows/api-tests-42/events/31-40/"
    assert t["tail_gap"] is None
    assert t["job"]["source_revision"] == 30 and len(t["job"]["attempts"]) == 1
    assert [(e["action"], e["to_status"]) for e in t["lifecycle"]] == [
        ("validate", "REJECTED"),
        ("waive", "VALIDATED"),
        ("activate", "ACTIVE"),
    ]
    assert t["lifecycle"][1]["actor"] == "user:bob" and t["lifecycle"][1]["reason"]
    assert t["replay_url"] == f"/traces/{incident.trace.pk}/replay/"


def test_lineage_names_purges_and_tail_loss(incident):
    wf = incident.workflow
    short = f.trace(wf, incident.s3, 38, call="call-short", context_id="")  # head 40 at read time
    artifact = f.artifact(wf, "T58", [short])
    purge = f.purge(wf, [5, 6, 7, 33])
    lin = artifact_lineage(artifact)
    [t] = lin["traces"]
    day = purge.events.first().purged_at.date().isoformat()
    covered = t["covered"]["unavailable"]
    assert [(u["from_seq"], u["to_seq"]) for u in covered] == [(5, 7)]
    assert covered[0]["text"] == f"unavailable: purged by {purge.purge_id} on {day}"
    assert [(u["from_seq"], u["to_seq"]) for u in t["tail"]["unavailable"]] == [(33, 33)]
    assert (t["tail_gap"]["from_seq"], t["tail_gap"]["to_seq"]) == (39, 40)
    assert lin["complete"] is False
    gaps = " | ".join(lin["gaps"])
    assert f"events 5-7: unavailable: purged by {purge.purge_id}" in gaps
    assert "events 39-40 existed at read time" in gaps
    assert "no context id" in gaps


def test_lineage_of_a_trace_without_summary(tenant):
    wf = f.make_workflow(tenant, "raw-only")
    f.history(wf, 12)
    trace = f.trace(wf, None, 12, call="call-raw")
    lin = artifact_lineage(f.artifact(wf, "A1", [trace]))
    [t] = lin["traces"]
    assert t["summary"] is None and t["covered"] is None and t["job"] is None
    assert (t["tail"]["from_seq"], t["tail"]["to_seq"]) == (1, 12)
    assert lin["complete"] is True


def test_lineage_query_count_does_not_grow_with_events(incident, django_assert_max_num_queries, tenant):
    with django_assert_max_num_queries(16):
        artifact_lineage(incident.artifact)
    big = f.make_workflow(tenant, "big")
    f.append_n(big, 900)
    s = f.activated(
        big,
        1,
        800,
        content=f.summary_content("Messages 1-800 about POST /payments."),
        job=f.imported_job(big, 800),
    )
    artifact = f.artifact(big, "BIG", [f.trace(big, s, 900)])
    with django_assert_max_num_queries(16):
        artifact_lineage(artifact)


def test_api_lineage(incident, carol, mallory):
    resp = carol.api.get("/api/v1/artifacts/T57/lineage/")
    assert resp.status_code == 200
    body = resp.json()
    assert body["traces"][0]["summary"]["summary_id"] == incident.s3.summary_id
    assert body["traces"][0]["tail"]["to_seq"] == 40
    assert mallory.api.get("/api/v1/artifacts/T57/lineage/").status_code == 404
    missing = carol.api.get("/api/v1/artifacts/NOPE/lineage/")
    assert missing.status_code == 404 and missing.json()["error"] == "artifact_not_found"


def test_artifact_page_links_every_hop(incident, carol):
    purge = f.purge(incident.workflow, [33])
    resp = carol.web.get("/artifacts/T57/")
    assert resp.status_code == 200
    html = resp.content.decode()
    by_hop = {hop: href for href, hop in re.findall(r'<a href="([^"]+)"[^>]*data-hop="([^"]+)"', html)}
    assert by_hop["workflow"] == "/workflows/api-tests-42/"
    assert by_hop["trace"] == f"#trace-{incident.trace.pk}"
    assert by_hop["summary"] == f"/summaries/{incident.s3.summary_id}/"
    assert by_hop["diff"] == f"/summaries/{incident.s3.summary_id}/diff/"
    assert by_hop["validation"].startswith("#validation-")
    assert by_hop["covered-events"] == "/workflows/api-tests-42/events/1-30/"
    assert by_hop["tail-events"] == "/workflows/api-tests-42/events/31-40/"
    assert by_hop["job"].startswith("#job-")
    assert by_hop["lifecycle"].startswith("#lifecycle-")
    assert by_hop["replay"] == f"/traces/{incident.trace.pk}/replay/"
    assert "waived: <strong>token_budget</strong> by user:bob" in html
    assert f"unavailable: purged by {purge.purge_id} on" in html
    # Every in-page anchor exists.
    for href in by_hop.values():
        if href.startswith("#"):
            assert f'id="{href[1:]}"' in html, href


def test_artifact_page_other_tenant_404(incident, mallory):
    assert mallory.web.get("/artifacts/T57/").status_code == 404


def test_event_range_page(incident, carol):
    purge = f.purge(incident.workflow, [9])
    html = carol.web.get("/workflows/api-tests-42/events/5-10/", {"q": "401 unauthorized"}).content.decode()
    assert len(re.findall(r'<tr id="event-\d+"', html)) == 6
    assert '<tr id="event-7" class="hit">' in html
    assert f"unavailable: purged by {purge.purge_id} on" in html
    assert 'href="/workflows/api-tests-42/?page=1#event-7"' in html
    assert carol.web.get("/workflows/api-tests-42/events/10-5/").status_code == 404
