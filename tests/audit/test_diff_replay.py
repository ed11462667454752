"""Summary diff (service, API, page) and replay bundles (service, API, download)."""

from __future__ import annotations

import json

from audit.diff import diff_summaries
from audit.replay import replay_bundle
from memoryhub.core.canonical import sha256_hex
from tests import factories as f

# --- diff ------------------------------------------------------------------------------------------------


def test_diff_facts_narrative_coverage(incident):
    d = diff_summaries(incident.s2, incident.s3)
    assert (d["from"]["label"], d["to"]["label"]) == ("S2", "S3")
    assert [x["key"] for x in d["facts"]["added"]] == ["T49"]
    assert d["facts"]["removed"] == []
    [changed] = d["facts"]["changed"]
    assert changed["key"] == "bug-88"
    assert changed["changes"]["state"] == {"from": "open", "to": "resolved"}
    assert changed["changes"]["text"]["to"] == "bug-88: fixed in 3.14.2"
    assert d["facts"]["unchanged"] == 1
    assert [x["key"] for x in d["open_items"]["removed"]] == ["bug-88"]
    assert d["coverage"]["from"] == {"covers_from_seq": 1, "covers_to_seq": 20}
    assert d["coverage"]["newly_covered"] == [21, 30] and d["coverage"]["watermark_delta"] == 10
    ops = d["narrative"]["ops"]
    assert {"op": "replace", "old": "open.", "new": "fixed."} in ops
    rebuilt_new = "".join(o["new"] if o["op"] != "equal" else o["old"] for o in ops)
    assert rebuilt_new == json.loads(incident.s3.content)["narrative"]
    assert any(line.startswith("+") and "fixed" in line for line in d["narrative"]["unified"])
    assert d["compactor_changes"] == {"token_budget": {"from": 6000, "to": 20}}


def test_diff_shows_the_dropped_requirement_and_compactor_change(incident):
    d = diff_summaries(incident.s1, incident.s2)
    deleted = " ".join(o["old"] for o in d["narrative"]["ops"] if o["op"] in ("delete", "replace"))
    assert "401" in deleted and "Unauthorized" in deleted
    assert d["compactor_changes"]["compactor_version"] == {"from": "c1", "to": "c2"}
    assert [x["key"] for x in d["facts"]["added"]] == ["bug-88"]


def test_diff_against_nothing_and_purged(incident):
    first = diff_summaries(None, incident.s1)
    assert first["from"] is None and [x["key"] for x in first["facts"]["added"]] == ["payments:write"]
    purge = f.purge(incident.workflow, [12])  # S2 and S3 cover event 12: both are scrubbed
    incident.s2.refresh_from_db()
    incident.s3.refresh_from_db()
    d = diff_summaries(incident.s2, incident.s3)
    assert d["facts"] is None and d["narrative"] is None
    assert f"purged by {purge.purge_id}" in d["unavailable"][0]
    assert d["coverage"]["newly_covered"] == [21, 30]


def test_api_diff_default_previous_and_against(incident, carol, mallory):
    url = f"/api/v1/summaries/{incident.s3.summary_id}/diff/"
    body = carol.api.get(url).json()
    assert body["from"]["summary_id"] == incident.s2.summary_id
    body = carol.api.get(url, {"against": incident.s1.summary_id}).json()
    assert body["from"]["summary_id"] == incident.s1.summary_id
    assert body["coverage"]["newly_covered"] == [11, 30]
    first = carol.api.get(f"/api/v1/summaries/{incident.s1.summary_id}/diff/").json()
    assert first["from"] is None
    assert carol.api.get(url, {"against": "sum_nope"}).status_code == 404
    assert mallory.api.get(url).status_code == 404


def test_api_diff_refuses_another_workflow(incident, api, tenant):
    wf = f.make_workflow(tenant, "other-wf")
    f.history(wf, 3)
    other = f.candidate(wf, 1, 3, content=f.summary_content("other"))
    resp = api.get(f"/api/v1/summaries/{incident.s3.summary_id}/diff/", {"against": other.summary_id})
    assert resp.status_code == 400 and resp.json()["error"] == "different_workflow"


def test_diff_page(incident, carol):
    html = carol.web.get(
        f"/summaries/{incident.s2.summary_id}/diff/", {"against": incident.s1.summary_id}
    ).content.decode()
    assert 'id="summary-diff"' in html
    assert "<del>" in html and "Unauthorized" in html
    assert "compactor_version: c1 → c2" in html
    assert f'<option value="{incident.s1.summary_id}" selected>' in html


# --- replay ----------------------------------------------------------------------------------------------


def test_replay_bundle_contents(incident):
    b = replay_bundle(incident.trace)
    assert b["schema"] == "memoryhub.replay/v1"
    assert b["summary"]["summary_id"] == incident.s3.summary_id
    assert b["summary"]["content"] == incident.s3.content
    assert (
        sha256_hex(b["summary"]["content"].encode())
        == b["summary"]["content_hash"]
        == incident.s3.content_hash
    )
    assert b["summary"]["hash_verified"] is True
    assert [e["seq"] for e in b["tail"]["events"]] == list(range(31, 41))
    assert b["tail"]["events"][5]["content"] == "Draft suite T49 published to staging."
    assert b["compactor"]["version"] == "c2" and b["compactor"]["prompt_template_version"] == "compact-v4"
    assert [v["validator_version"] for v in b["validator"]] == ["rules-5", "rules-5"]
    assert b["graph_release"] == "api-testgen@2026.11.2" and b["checkpoint_id"] == "ckpt-40"
    assert b["model_ids"] == {"consumer": "gpt-4.1-mini", "compactor": "gpt-4.1-mini"}
    assert b["context_id"] == incident.trace.context_id and b["manifest_hash"] == incident.trace.manifest_hash
    assert b["compaction_job"]["source_revision"] == 30
    assert b["unavailable"] == [] and b["complete"] is True
    check = b["manifest_check"]
    assert check["matches"] is True and check["recomputed"] == check["served"] == incident.trace.manifest_hash


def test_replay_bundle_flags_a_manifest_that_does_not_match(incident):
    fake = "sha256:" + "ef" * 32  # the consumer reports a manifest other than the one it was served
    trace = f.read_and_trace(incident.workflow, "call-fake-manifest", manifest_hash=fake)
    assert "context_mismatch" in trace.flags
    check = replay_bundle(trace)["manifest_check"]
    assert check["recorded"] == fake and check["matches"] is False


def test_replay_bundle_names_what_is_unavailable(incident):
    wf = incident.workflow
    trace = f.trace(wf, incident.s3, 40, call="call-nockpt", checkpoint_id="", model="")
    purge = f.purge(wf, [33, 34, 35, 38])  # tail events only: S3 keeps its content
    b = replay_bundle(trace)
    day = purge.events.first().purged_at.date().isoformat()
    texts = [u["text"] for u in b["unavailable"]]
    assert f"events 33-35: purged by {purge.purge_id} on {day}" in texts
    assert f"event 38: purged by {purge.purge_id} on {day}" in texts
    assert "checkpoint id: not recorded by the consumer trace" in texts
    assert "consumer model id: not recorded by the consumer trace" in texts
    assert [e["seq"] for e in b["tail"]["events"]] == [31, 32, 36, 37, 39, 40]
    assert b["complete"] is False


def test_api_replay_and_download(incident, carol, mallory):
    body = carol.api.get(f"/api/v1/traces/{incident.trace.pk}/replay/").json()
    assert body["summary"]["content_hash"] == incident.s3.content_hash
    assert mallory.api.get(f"/api/v1/traces/{incident.trace.pk}/replay/").status_code == 404
    assert carol.api.get("/api/v1/traces/abc/replay/").status_code == 404
    resp = carol.web.get(f"/traces/{incident.trace.pk}/replay/")
    assert resp.status_code == 200
    assert resp["Content-Disposition"].startswith(
        'attachment; filename="replay-api-tests-42-call-pub-0007-03.json"'
    )
    assert json.loads(resp.content)["tail"]["to_seq"] == 40
    assert mallory.web.get(f"/traces/{incident.trace.pk}/replay/").status_code == 404


def test_replay_bundle_carries_what_was_recorded_of_the_call(incident, carol):
    wf = incident.workflow
    messages = [{"role": "user", "content": "Write the tests."}]
    recorded = f.trace(
        wf, incident.s3, 40, call="call-with-output", input_messages=messages, output="Done.", cost_usd=0.0042
    )
    body = carol.api.get(f"/api/v1/traces/{recorded.pk}/replay/").json()["trace"]
    assert body["input_messages"] == messages and body["output"] == "Done." and body["cost_usd"] == 0.0042
    assert body["output_tokens"] is None and body["latency_ms"] is None  # not recorded: null, not 0
