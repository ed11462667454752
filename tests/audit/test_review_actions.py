"""Review actions through the UI: roles, required reason, CSRF, and one LifecycleEvent + AuditEntry
per action (written by memoryhub.memory.lifecycle)."""

from __future__ import annotations

import pytest

from audit.models import AuditEntry, SummaryComment
from audit.review import available_actions
from memoryhub.memory import lifecycle
from memoryhub.models import LifecycleEvent, Summary
from tests.audit.conftest import BUG_FIXED, SCOPE, T49, summarize
from tests.factories import REVIEWER, require_approval
from tests.helpers import form_post


def url(summary, action: str) -> str:
    return f"/summaries/{summary.summary_id}/action/{action}/"


def act(party, summary, action: str, **data):
    return form_post(party.web, url(summary, action), data)


def over_budget(wf):
    """A faithful candidate whose only failed check is a too-small token budget (so it is REJECTED)."""
    return summarize(
        wf,
        40,
        "Everything so far; the 401 rule is still missing.",
        [SCOPE, BUG_FIXED, T49],
        {"name": "llm-compactor", "version": "c2", "token_budget": 5},
        {"payments:write": 3, "bug-88": 22, "T49": 26},
    )


def history(summary) -> list[tuple[str, str]]:
    return list(LifecycleEvent.objects.filter(summary=summary).order_by("id").values_list("action", "result"))


def audit_actions(tenant) -> list[str]:
    return list(AuditEntry.objects.filter(tenant=tenant).order_by("seq").values_list("action", flat=True))


def test_reviewer_quarantines_the_active_summary(incident, bob):
    s3, s2 = incident.s3, incident.s2
    before = AuditEntry.objects.filter(tenant=s3.tenant).count()
    resp = act(bob, s3, "quarantine", reason="drops the 401 requirement", next="/artifacts/T57/")
    assert resp.status_code == 302 and resp["Location"] == "/artifacts/T57/"
    s3.refresh_from_db()
    assert s3.status == "QUARANTINED"
    event = LifecycleEvent.objects.filter(summary=s3, action="quarantine").get()
    assert (event.result, event.actor, event.reason) == ("applied", "user:bob", "drops the 401 requirement")
    entry = AuditEntry.objects.filter(tenant=s3.tenant, action="summary.quarantine").get()
    assert entry.object_id == s3.summary_id and entry.actor == "user:bob"
    assert AuditEntry.objects.filter(tenant=s3.tenant).count() > before
    incident.workflow.refresh_from_db()
    assert incident.workflow.active_summary_id == s2.pk  # the pointer fell back to S2


def test_get_shows_a_confirmation_form(incident, bob):
    html = bob.web.get(url(incident.s3, "quarantine")).content.decode()
    assert 'id="review-action-form"' in html and 'name="reason"' in html and "csrfmiddlewaretoken" in html


def test_reason_is_required(incident, bob):
    before = (history(incident.s3), audit_actions(incident.s3.tenant))
    resp = act(bob, incident.s3, "quarantine", reason="   ")
    assert resp.status_code == 400
    assert "a reason is required" in resp.content.decode()
    incident.s3.refresh_from_db()
    assert incident.s3.status == "ACTIVE"
    assert (history(incident.s3), audit_actions(incident.s3.tenant)) == before


def test_viewer_gets_403_and_nothing_is_written(incident, carol):
    before = history(incident.s3)
    assert carol.web.get(url(incident.s3, "quarantine")).status_code == 403
    resp = act(carol, incident.s3, "quarantine", reason="I am only a viewer")
    assert resp.status_code == 403
    assert history(incident.s3) == before


def test_csrf_is_enforced(incident, bob):
    resp = bob.web.post(url(incident.s3, "quarantine"), {"reason": "no token"})
    assert resp.status_code == 403
    incident.s3.refresh_from_db()
    assert incident.s3.status == "ACTIVE"


def test_release_needs_an_admin(incident, bob, alice):
    lifecycle.quarantine(incident.s2, REVIEWER, "suspicious")
    assert act(bob, incident.s2, "release", reason="looks fine").status_code == 403
    resp = act(alice, incident.s2, "release", reason="checked against the source events")
    assert resp.status_code == 302
    incident.s2.refresh_from_db()
    assert incident.s2.status == "VALIDATED"
    assert history(incident.s2)[-1] == ("release", "applied")
    assert audit_actions(incident.s2.tenant)[-1] == "summary.release"


def test_reject_approve_and_waive(incident, bob):
    wf = incident.workflow
    candidate = over_budget(wf)
    assert candidate.status == "REJECTED"
    resp = act(bob, candidate, "waive", reason="budget too tight", checks=["token_budget"])
    assert resp.status_code == 302
    candidate.refresh_from_db()
    assert candidate.status == "VALIDATED"
    assert candidate.validations.order_by("-id").first().waived_checks == ["token_budget"]
    assert act(bob, candidate, "reject", reason="changed my mind").status_code == 302
    candidate.refresh_from_db()
    assert candidate.status == "REJECTED"
    assert [a for a, _ in history(candidate)] == ["validate", "waive", "reject"]
    assert audit_actions(wf.tenant)[-2:] == ["summary.waive", "summary.reject"]


def test_approve_makes_the_summary_live_in_the_same_action(incident, bob):
    """Approve carries the revision the reviewer saw: approved and ACTIVE in one transaction."""
    wf = incident.workflow
    require_approval(wf.tenant, wf)
    candidate = over_budget(wf)
    lifecycle.waive(candidate, ["token_budget"], REVIEWER, "budget too tight")
    candidate.refresh_from_db()
    assert [s.name for s in available_actions(candidate, bob.role)] == ["approve", "reject", "quarantine"]
    assert act(bob, candidate, "approve", reason="read it").status_code == 400  # no revision: nothing
    assert [a for a, _ in history(candidate)][-1] == "waive"
    revision = wf.active_revision
    resp = act(bob, candidate, "approve", reason="read it against the source", expected_revision=revision)
    assert resp.status_code == 302
    candidate.refresh_from_db()
    wf.refresh_from_db()
    assert candidate.status == "ACTIVE" and wf.active_summary_id == candidate.pk
    assert wf.active_revision == revision + 1
    assert history(candidate)[-2:] == [("approve", "applied"), ("activate", "applied")]
    assert audit_actions(wf.tenant)[-3:] == ["summary.approve", "summary.supersede", "summary.activate"]


def test_approve_with_a_stale_revision_keeps_the_approval_and_offers_activate(incident, bob):
    wf = incident.workflow
    require_approval(wf.tenant, wf)
    candidate = over_budget(wf)
    lifecycle.waive(candidate, ["token_budget"], REVIEWER, "budget too tight")
    revision = wf.active_revision
    resp = act(bob, candidate, "approve", reason="fine", expected_revision=revision - 1)
    assert resp.status_code == 302
    page = bob.web.get(resp["Location"]).content.decode()
    assert "approved, but not activated" in page
    candidate.refresh_from_db()
    assert candidate.status == "VALIDATED"
    assert history(candidate)[-2:] == [("approve", "applied"), ("activate", "stale")]
    assert [s.name for s in available_actions(candidate, bob.role)] == ["activate", "reject", "quarantine"]
    assert f'value="{revision}"' in page and 'data-action="activate"' in page
    resp = act(bob, candidate, "activate", reason="now", expected_revision=revision)
    assert resp.status_code == 302
    candidate.refresh_from_db()
    assert candidate.status == "ACTIVE"


def test_waive_without_checks_is_400(incident, bob):
    wf = incident.workflow
    candidate = over_budget(wf)
    resp = act(bob, candidate, "waive", reason="why not")
    assert resp.status_code == 400
    assert [a for a, _ in history(candidate)] == ["validate"]


def test_rollback_with_the_revision_seen_and_a_stale_one(incident, bob):
    wf = incident.workflow
    revision = wf.active_revision
    stale = act(bob, incident.s2, "rollback", reason="S3 drops the 401 rule", expected_revision=revision - 1)
    assert stale.status_code == 409
    assert "stale" in stale.content.decode().lower() or "revision" in stale.content.decode()
    assert history(incident.s2)[-1] == ("rollback", "stale")
    ok = act(bob, incident.s2, "rollback", reason="S3 drops the 401 rule", expected_revision=revision)
    assert ok.status_code == 302
    wf.refresh_from_db()
    assert wf.active_summary_id == incident.s2.pk and wf.active_revision == revision + 1
    assert history(incident.s2)[-1] == ("rollback", "applied")
    missing = act(bob, incident.s1, "rollback", reason="x")
    assert missing.status_code == 400


def test_action_refused_by_the_state_machine_is_shown(incident, bob):
    resp = act(bob, incident.s3, "release", reason="not quarantined")
    assert resp.status_code == 403  # release is admin-only, before any state check
    resp = act(bob, incident.s3, "waive", reason="nothing failed", checks=["token_budget"])
    assert resp.status_code == 409
    assert history(incident.s3)[-1][1] == "refused"


def test_unknown_action_and_other_tenant(incident, bob, mallory):
    assert bob.web.get(f"/summaries/{incident.s3.summary_id}/action/delete/").status_code == 404
    assert mallory.web.get(url(incident.s3, "quarantine")).status_code == 404


@pytest.mark.parametrize(
    "role_party, status_summary, expected",
    [
        ("carol", "s3", []),
        ("bob", "s3", ["quarantine"]),
        ("bob", "s2", ["rollback", "quarantine"]),
        ("alice", "s3", ["quarantine"]),
    ],
)
def test_available_actions_by_role_and_status(incident, request, role_party, status_summary, expected):
    party = request.getfixturevalue(role_party)
    summary = getattr(incident, status_summary)
    assert [s.name for s in available_actions(summary, party.role)] == expected


def test_release_shown_to_admins_only(incident, bob, alice):
    lifecycle.quarantine(incident.s2, REVIEWER, "suspicious")
    s2 = Summary.objects.get(pk=incident.s2.pk)
    assert [s.name for s in available_actions(s2, bob.role)] == []
    assert [s.name for s in available_actions(s2, alice.role)] == ["release"]


def test_rejected_summary_offers_waive_not_quarantine(incident, bob):
    candidate = over_budget(incident.workflow)
    assert candidate.status == "REJECTED"
    assert [s.name for s in available_actions(candidate, bob.role)] == ["waive"]


def test_comments_on_a_summary_are_audited_and_need_a_reviewer(incident, bob, carol, mallory):
    s3 = incident.s3
    url_api = f"/api/v1/summaries/{s3.summary_id}/comments/"
    assert carol.api.post(url_api, {"text": "viewer opinion"}, format="json").status_code == 403
    assert mallory.api.post(url_api, {"text": "outsider"}, format="json").status_code == 404
    r = bob.api.post(url_api, {"text": "   "}, format="json")
    assert r.status_code == 400 and r.json()["error"] == "comment_required"
    r = bob.api.post(url_api, {"text": "x" * 4001}, format="json")
    assert r.status_code == 400 and r.json()["error"] == "invalid_comment"
    assert SummaryComment.objects.count() == 0
    r = bob.api.post(url_api, {"text": "S3 lacks the 401 rule; see T57."}, format="json")
    assert r.status_code == 201 and r.json()["author"].startswith("api_key:bob")
    # The page form goes through the same service.
    resp = form_post(bob.web, f"/summaries/{s3.summary_id}/comments/", {"text": "Agreed."})
    assert resp.status_code == 302 and resp["Location"].endswith(
        f"#comment-{SummaryComment.objects.last().pk}"
    )
    listed = carol.api.get(url_api).json()
    assert [c["text"] for c in listed] == ["S3 lacks the 401 rule; see T57.", "Agreed."]
    assert listed[1]["author"] == "user:bob"
    entries = AuditEntry.objects.filter(action="summary.comment", object_id=s3.summary_id).order_by("seq")
    assert entries.count() == 2
    assert all("text" not in e.data and e.data["text_sha256"].startswith("sha256:") for e in entries)
    page = carol.web.get(f"/summaries/{s3.summary_id}/").content.decode()
    assert "Agreed." in page and 'id="comment-form"' not in page  # viewers read, reviewers write
