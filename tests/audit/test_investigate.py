"""Investigations: every verdict, text and regex matching, evidence, saving, API and page."""

from __future__ import annotations

import pytest

from audit.investigate import investigate
from audit.models import AuditEntry, Investigation
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from tests import factories as f
from tests.helpers import form_post

ACTOR = Actor.user("bob")


def test_incident_is_a_compaction_omission_with_the_source_seq(incident):
    inv = investigate(incident.artifact, "401 Unauthorized", ACTOR)
    ev = inv.evidence
    assert inv.verdict == "compaction_omission"
    assert ev["source_seqs"] == [7]
    assert ev["covered_seqs"] == [7]
    assert ev["in_summary"] is False and ev["in_tail"] is False
    assert ev["manifest"]["summary"]["summary_id"] == incident.s3.summary_id
    assert ev["manifest"]["summary"]["content_hash"] == incident.s3.content_hash
    assert (ev["manifest"]["tail_from_seq"], ev["manifest"]["tail_to_seq"]) == (31, 40)
    assert ev["manifest"]["manifest_hash"] == incident.trace.manifest_hash
    # S1 still carried the requirement; c2's S2 and S3 dropped it.
    assert [(s["label"], s["contains_fact"]) for s in ev["summaries"]] == [
        ("S1", True),
        ("S2", False),
        ("S3", False),
    ]
    assert inv.elapsed_ms > 0
    assert ev["first_loss"]["summary"]["label"] == "S2" and ev["first_loss"]["still_missing_in"] == ["S3"]
    assert "first dropped by S2" in ev["explanation"] and "still missing in S3" in ev["explanation"]
    # Evidence keeps seqs and hashes, never event text (a purge must not leave copies behind).
    assert "WWW-Authenticate" not in str(ev)


def test_match_is_case_and_whitespace_insensitive(incident):
    inv = investigate(incident.artifact, "401 UNAUTHORIZED", ACTOR)
    assert inv.verdict == "compaction_omission" and inv.evidence["source_seqs"] == [7]


def test_regex_match_and_invalid_regex(incident):
    inv = investigate(incident.artifact, r"40[13]\s+unauth\w+", ACTOR, regex=True)
    assert inv.verdict == "compaction_omission" and inv.evidence["source_seqs"] == [7]
    assert inv.is_regex
    with pytest.raises(InvalidInput) as exc:
        investigate(incident.artifact, "401 (Unauthorized", ACTOR, regex=True)
    assert exc.value.code == "invalid_regex"
    assert Investigation.objects.count() == 1


def test_fact_in_no_source_event_is_source_extraction_failure(incident):
    inv = investigate(incident.artifact, "429 Too Many Requests", ACTOR)
    assert inv.verdict == "source_extraction_failure"
    assert inv.evidence["source_seqs"] == []


def test_fact_in_consumed_tail_or_summary_is_downstream_reasoning(incident):
    in_tail = investigate(incident.artifact, "draft suite T49 published", ACTOR)
    assert in_tail.verdict == "downstream_reasoning_failure"
    assert in_tail.evidence["in_tail"] is True and in_tail.evidence["tail_seqs"] == [36]
    in_summary = investigate(incident.artifact, "bug-88", ACTOR)
    assert in_summary.verdict == "downstream_reasoning_failure"
    assert in_summary.evidence["in_summary"] is True
    assert any(p.startswith("facts[") for p in in_summary.evidence["summary_fields"])


def test_tail_cut_short_is_assembly_failure(incident):
    wf = incident.workflow
    short = f.trace(wf, incident.s3, 33, call="call-short")  # head 40 at read time
    artifact = f.artifact(wf, "T58", [short])
    inv = investigate(artifact, "published to staging", ACTOR)
    assert inv.verdict == "assembly_failure"
    assert inv.evidence["missing_tail_seqs"] == [36]
    assert inv.evidence["in_tail"] is False


def test_reading_a_summary_other_than_the_active_one_is_assembly_failure(tenant):
    wf = f.make_workflow(tenant, "wf-stale-read")
    f.history(wf, 20, {5: "Refunds need the refunds:write scope."})
    old = f.activated(wf, 1, 10, content=f.summary_content("Routine messages 1-10 about POST /payments."))
    new = f.activated(
        wf, 1, 12, content=f.summary_content("Refunds need the refunds:write scope (POST /payments).")
    )
    # The consumer read the superseded version (and the tail after it) while `new` was active.
    trace = f.trace(wf, old, 20, call="call-old")
    artifact = f.artifact(wf, "R1", [trace])
    inv = investigate(artifact, "refunds:write scope", ACTOR)
    assert inv.verdict == "assembly_failure"
    served = inv.evidence["served_at_read"]
    assert served["summary"]["summary_id"] == new.summary_id and served["basis"] == "lifecycle"
    assert served["differs"] is True and served["contains_fact"] is True


def test_most_downstream_trace_wins(incident):
    wf = incident.workflow
    other = f.trace(wf, incident.s1, 40, call="call-with-s1")
    both = f.artifact(wf, "T57b", [incident.trace, other])
    inv = investigate(both, "401 Unauthorized", ACTOR)
    assert inv.verdict == "downstream_reasoning_failure"
    assert inv.evidence["trace"]["model_call_id"] == "call-with-s1"
    assert inv.evidence["other_traces"] == [
        {"trace_id": incident.trace.pk, "model_call_id": "call-pub-0007-03", "verdict": "compaction_omission"}
    ]


def test_purged_source_events_are_named_as_unsearchable(incident):
    purge = f.purge(incident.workflow, [7])
    inv = investigate(incident.artifact, "401 Unauthorized", ACTOR)
    assert inv.verdict == "source_extraction_failure"
    assert inv.evidence["unsearchable"][0]["from_seq"] == 7
    assert f"purged by {purge.purge_id}" in inv.evidence["unsearchable"][0]["text"]
    assert purge.purge_id in inv.evidence["explanation"]


def test_investigation_is_saved_with_an_audit_entry(incident):
    inv = investigate(incident.artifact, "401 Unauthorized", ACTOR)
    entry = AuditEntry.objects.filter(tenant=incident.workflow.tenant, action="artifact.investigate").get()
    assert (entry.object_type, entry.object_id) == ("artifact", "T57")
    assert entry.data["investigation"] == inv.pk and entry.data["verdict"] == "compaction_omission"


@pytest.mark.impossible_state(
    "record_artifact requires a producer; an artifact imported or recorded before that rule has none"
)
def test_artifact_without_trace(tenant):
    wf = f.make_workflow(tenant, "wf-untraced")
    f.history(wf, 5, {2: "the 401 rule"})
    artifact = f.orphan_artifact_bypassing_services(wf, "X1")
    assert investigate(artifact, "nowhere to be found", ACTOR).verdict == "source_extraction_failure"
    with pytest.raises(Exception) as exc:
        investigate(artifact, "401 rule", ACTOR)
    assert getattr(exc.value, "code", "") == "no_consumer_trace"


# --- API ---------------------------------------------------------------------------------------------


def test_api_investigate_and_list(incident, bob, carol):
    url = "/api/v1/artifacts/T57/investigate/"
    resp = bob.api.post(url, {"fact": "401 Unauthorized"}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["verdict"] == "compaction_omission"
    assert body["evidence"]["source_seqs"] == [7]
    assert body["evidence"]["in_summary"] is False and body["evidence"]["in_tail"] is False
    assert body["elapsed_ms"] > 0
    listing = carol.api.get("/api/v1/artifacts/T57/investigations/").json()
    assert [i["id"] for i in listing["results"]] == [body["id"]]
    # Viewers may read but not investigate.
    assert carol.api.post(url, {"fact": "x"}, format="json").status_code == 403


@pytest.mark.parametrize(
    "payload, code",
    [
        ({"fact": "(", "regex": True}, "invalid_regex"),
        ({"fact": ""}, "invalid_fact"),
        ({}, "invalid_fact"),
        ({"fact": "x" * 501}, "invalid_fact"),
        ({"fact": "x", "regex": "yes"}, "invalid_regex"),
        ({"fact": "x", "extra": 1}, "invalid_body"),
    ],
)
def test_api_investigate_rejects_bad_input_and_writes_nothing(incident, api, payload, code):
    before = AuditEntry.objects.count()
    resp = api.post("/api/v1/artifacts/T57/investigate/", payload, format="json")
    assert resp.status_code == 400
    assert resp.json()["error"] == code
    assert Investigation.objects.count() == 0 and AuditEntry.objects.count() == before


def test_api_other_tenant_gets_404(incident, mallory):
    assert (
        mallory.api.post("/api/v1/artifacts/T57/investigate/", {"fact": "401"}, format="json").status_code
        == 404
    )
    assert mallory.api.get("/api/v1/artifacts/T57/investigations/").status_code == 404


# --- page ------------------------------------------------------------------------------------------------


def test_page_form_runs_and_shows_investigation(incident, bob):
    resp = form_post(bob.web, "/artifacts/T57/investigate/", {"fact": "401 Unauthorized"})
    assert resp.status_code == 302
    inv = Investigation.objects.get()
    assert resp["Location"].endswith(f"#investigation-{inv.pk}")
    html = bob.web.get("/artifacts/T57/").content.decode()
    assert f'id="investigation-{inv.pk}"' in html
    assert 'data-verdict="compaction_omission"' in html
    assert (
        'data-version="S3" data-contains="false"' in html and 'data-version="S1" data-contains="true"' in html
    )
    assert "/workflows/api-tests-42/events/7-7/?q=401%20Unauthorized" in html


def test_page_bad_regex_is_400_with_message(incident, bob):
    resp = form_post(bob.web, "/artifacts/T57/investigate/", {"fact": "(", "regex": "on"})
    assert resp.status_code == 400
    assert "invalid regular expression" in resp.content.decode()
    assert Investigation.objects.count() == 0


def test_page_viewer_cannot_investigate_and_csrf_is_enforced(incident, carol, bob):
    assert 'id="investigate-form"' not in carol.web.get("/artifacts/T57/").content.decode()
    assert form_post(carol.web, "/artifacts/T57/investigate/", {"fact": "401"}).status_code == 403
    assert bob.web.post("/artifacts/T57/investigate/", {"fact": "401"}).status_code == 403  # no CSRF token
    assert Investigation.objects.count() == 0


def _version(n: int, has: bool, status: str = "SUPERSEDED", covers_to: int | None = None) -> dict:
    return {
        "version": n,
        "label": f"S{n}",
        "summary_id": f"s{n}",
        "covers_from_seq": 1,
        "covers_to_seq": covers_to or 10 * n,
        "contains_fact": has,
        "available": True,
        "status": status,
    }


def test_first_loss_is_the_start_of_the_loss_still_running_at_the_consumed_version():
    from audit.investigate import loss_start

    history = [
        _version(1, True),
        _version(2, False),  # lost …
        _version(3, True),  # … restored
        _version(4, False, "REJECTED"),  # never served anyone: not a loss
        _version(5, False),  # lost again: the first loss
        _version(6, False, "ACTIVE"),  # still missing (consumed)
    ]
    start, still = loss_start(history, [5], history[5])
    assert start["label"] == "S5" and still == ["S6"]
    start, still = loss_start(history, [5], history[2])  # consumed S3, which has it
    assert start is None and still == []
    start, still = loss_start(history, [5], history[1])
    assert start["label"] == "S2" and still == []
    # A version whose coverage does not reach the matching event cannot have dropped it.
    start, _ = loss_start([_version(1, False, covers_to=3), _version(2, False)], [5], {"version": 2})
    assert start["label"] == "S2"
    assert loss_start(history, [5], None) == (None, [])
