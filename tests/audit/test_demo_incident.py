"""The seed's incident end to end: `manage.py load_demo` runs the scenario through the services,
then "why does T57 have no 401 test?" is answered as a compaction omission by S3 (compactor c2),
with the source event that held the requirement — through the service, the API and the pages."""

from __future__ import annotations

import pytest

from audit.investigate import investigate
from audit.lineage import artifact_lineage
from audit.replay import replay_bundle
from audit.verify import verify_chain
from memoryhub.accounts.tenancy import add_member, issue_api_key
from memoryhub.core.actors import Actor
from memoryhub.demo import scenario
from memoryhub.models import Artifact, Summary, Tenant


@pytest.fixture
def demo(demo_db):
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    artifact = Artifact.objects.get(tenant=tenant, artifact_id=scenario.INCIDENT_ARTIFACT_ID)
    versions = {s.version: s for s in Summary.objects.filter(workflow=artifact.workflow)}
    return tenant, artifact, versions


def test_investigating_401_on_t57_names_s2_as_the_first_loss(demo):
    tenant, artifact, versions = demo
    s3 = versions[3]
    assert (s3.compactor_version, s3.covers_to_seq) == ("c2", 220)
    inv = investigate(artifact, scenario.INCIDENT_FACT, Actor.user("reviewer"))
    ev = inv.evidence
    assert inv.verdict == "compaction_omission"
    assert ev["source_seqs"] == [scenario.INCIDENT_SOURCE_SEQ]
    assert ev["covered_seqs"] == [scenario.INCIDENT_SOURCE_SEQ]
    # What the publisher read: S3 + tail 221–240, and neither held the requirement.
    manifest = ev["manifest"]
    assert manifest["summary"]["summary_id"] == s3.summary_id and manifest["summary"]["label"] == "S3"
    assert manifest["summary"]["content_hash"] == s3.content_hash
    assert (manifest["tail_from_seq"], manifest["tail_to_seq"]) == (221, 240)
    assert manifest["manifest_hash"] and manifest["context_id"]
    assert ev["in_summary"] is False and ev["in_tail"] is False
    assert ev["served_at_read"]["differs"] is False
    # S1 (compactor c1) still carried the sentence; c2's S2 and S3 dropped it.
    assert [(s["label"], s["contains_fact"]) for s in ev["summaries"]] == [
        ("S1", True),
        ("S2", False),
        ("S3", False),
    ]
    # The first loss is named: S2 (its job, compactor c2, when), still missing in S3, and the
    # tail does not restore it — S3 is not blamed for what S2 dropped.
    s2 = versions[2]
    loss = ev["first_loss"]
    assert loss["summary"]["label"] == "S2" and loss["summary"]["summary_id"] == s2.summary_id
    assert loss["job"] == s2.job_id and loss["job"] is not None
    assert loss["compactor"].endswith("c2") and loss["at"] == s2.created_at.isoformat()
    assert loss["previous_with_fact"] == "S1" and loss["still_missing_in"] == ["S3"]
    assert ev["restored_by_tail"] is False
    story = ev["explanation"]
    assert f"first dropped by S2 (job #{s2.job_id}, compactor {loss['compactor']}" in story
    assert "S1 still had it" in story and "still missing in S3, which the consumer read" in story
    assert "events 221–240) does not restore it" in story and "event(s) 7" in story


def test_t57_lineage_replay_and_chain(demo):
    tenant, artifact, versions = demo
    lin = artifact_lineage(artifact)
    [trace] = lin["traces"]
    assert trace["agent"] == "publisher" and trace["summary"]["label"] == "S3"
    assert (trace["tail"]["from_seq"], trace["tail"]["to_seq"]) == (221, 240)
    assert trace["validations"] and trace["validations"][-1]["validator_version"] == "rules-5"
    assert trace["job"] and trace["job"]["attempts"]
    actions = [(e["action"], e["result"]) for e in trace["lifecycle"]]
    assert ("activate", "applied") in actions
    bundle = replay_bundle(artifact.produced_by.get())
    assert (
        bundle["summary"]["content_hash"] == versions[3].content_hash and bundle["summary"]["hash_verified"]
    )
    assert [e["seq"] for e in bundle["tail"]["events"]] == list(range(221, 241))
    assert bundle["manifest_check"]["matches"] is True
    assert bundle["graph_release"] == scenario.GRAPH_RELEASE
    assert verify_chain(tenant)["ok"] is True
    # The stale activation of S2 by the late worker is part of S2's history.
    s2_history = Summary.objects.get(pk=versions[2].pk).lifecycle_events.values_list("action", "result")
    assert ("activate", "stale") in set(s2_history)


def test_demo_incident_through_api_and_pages(demo):
    tenant, artifact, versions = demo
    from rest_framework.test import APIClient

    key = issue_api_key(tenant, "auditor", role="reviewer")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {key.secret}")
    resp = api.post("/api/v1/artifacts/T57/investigate/", {"fact": "401 Unauthorized"}, format="json")
    assert resp.status_code == 201
    body = resp.json()
    assert body["verdict"] == "compaction_omission" and body["evidence"]["source_seqs"] == [7]
    assert body["evidence"]["manifest"]["summary"]["summary_id"] == versions[3].summary_id

    from django.test import Client

    membership = add_member(tenant, "auditor-user", "reviewer", password="x-pass-123")
    web = Client(enforce_csrf_checks=True)
    web.force_login(membership.user)
    html = web.get("/artifacts/T57/").content.decode()
    assert 'data-verdict="compaction_omission"' in html
    assert 'data-version="S3" data-contains="false"' in html
    diff = web.get(f"/summaries/{versions[2].summary_id}/diff/", {"against": versions[1].summary_id})
    assert "401 Unauthorized" in diff.content.decode()  # the sentence S2 dropped, shown as deleted
