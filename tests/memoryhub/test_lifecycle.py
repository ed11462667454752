"""The lifecycle state machine exactly as docs/ARCHITECTURE.md describes it: every transition, every refusal recorded, roles,
reasons, approval policy, quarantine fallback, waivers, release, rollback and running totals."""

from __future__ import annotations

import pytest

from audit.models import AuditEntry
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict, InvalidInput
from memoryhub.memory import lifecycle
from memoryhub.memory.events import tokens_through
from memoryhub.models import LifecycleEvent, Summary, ValidationRecord, Workflow
from tests.factories import (
    REVIEWER,
    WORKER,
    activated,
    add_events,
    build_workflow,
    candidate,
    content_for,
    require_approval,
    validated,
)
from tests.helpers import post

pytestmark = pytest.mark.django_db


def action(client, summary: Summary, name: str, body: dict | None = None):
    return post(client, f"/api/v1/summaries/{summary.summary_id}/{name}/", body or {})


def status_of(summary: Summary) -> str:
    return Summary.objects.values_list("status", flat=True).get(pk=summary.pk)


def events_of(summary: Summary) -> list[tuple[str, str, str, str]]:
    rows = LifecycleEvent.objects.filter(summary=summary).order_by("id")
    return [(e.action, e.result, e.from_status, e.to_status) for e in rows]


def assert_totals(wf: Workflow) -> None:
    """Running totals follow the pointer (what the trigger and the context reader rely on)."""
    wf.refresh_from_db()
    active = wf.active_summary
    watermark = active.covers_to_seq if active else 0
    assert wf.summary_tokens == (active.token_count if active else 0)
    assert wf.tail_events == wf.head_seq - watermark
    assert wf.tail_tokens == wf.total_tokens - tokens_through(wf, watermark)


# -- validate --------------------------------------------------------------------------------------


def test_validate_pass_and_fail_append_records_events_and_audit(api, tenant):
    wf = build_workflow(tenant)
    good = candidate(wf)
    r = action(api, good, "validate")
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "VALIDATED" and r.json()["validation"]["passed"] is True
    bad = candidate(wf, content=content_for(1, 30, drop=(20,)))  # loses a mandatory scope fact
    r = action(api, bad, "validate")
    assert r.json()["status"] == "REJECTED"
    record = ValidationRecord.objects.get(summary=bad)
    assert record.passed is False and any("scope-20" in reason for reason in record.reasons)
    assert events_of(bad) == [("validate", "applied", "CANDIDATE", "REJECTED")]
    event = LifecycleEvent.objects.get(summary=bad)
    assert (
        "scope-20" in event.reason
        and event.actor.startswith("api_key:alice-key")
        and event.actor_kind == "api_key"
    )
    assert AuditEntry.objects.filter(action="summary.validate", object_id=bad.summary_id).count() == 1


def test_worker_actor_and_task_attempt_are_recorded(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf)
    event = LifecycleEvent.objects.get(summary=s1, action="activate")
    assert event.actor == str(WORKER) and event.actor_kind == "worker" and event.task_attempt_id == "task-1#1"


def test_illegal_transition_is_409_naming_the_status_and_is_recorded(api, tenant):
    wf = build_workflow(tenant)
    s1 = validated(wf)
    r = action(api, s1, "validate")
    assert r.status_code == 409
    assert r.json()["error"] == "illegal_transition" and r.json()["current_status"] == "VALIDATED"
    assert "VALIDATED" in r.json()["detail"]
    # The refused attempt survives the 409, with its audit entry.
    assert events_of(s1)[-1] == ("validate", "refused", "VALIDATED", "VALIDATED")
    assert AuditEntry.objects.filter(action="summary.validate", object_id=s1.summary_id).count() == 2
    c = candidate(wf)
    r = action(api, c, "activate", {"expected_revision": 0})
    assert r.status_code == 409 and r.json()["current_status"] == "CANDIDATE"
    assert events_of(c)[-1] == ("activate", "refused", "CANDIDATE", "CANDIDATE")
    wf.refresh_from_db()
    assert wf.active_revision == 0 and wf.active_summary is None


# -- activate / supersede ----------------------------------------------------------------------------


def test_activation_moves_pointer_supersedes_and_keeps_totals(api, tenant):
    wf = build_workflow(tenant, n=20)
    s1 = validated(wf, 1, 10)
    r = action(api, s1, "activate", {"expected_revision": 0})
    assert r.status_code == 200, r.content
    assert r.json() == {
        "summary_id": s1.summary_id, "version": 1, "status": "ACTIVE", "active_revision": 1,
        "superseded_summary_id": None,
    }  # fmt: skip
    wf.refresh_from_db()
    assert wf.active_summary_id == s1.pk and wf.activated_at and wf.last_compacted_at
    assert wf.tokens_at_last_compaction == tokens_through(wf, 10)
    assert_totals(wf)
    assert wf.tail_events == 10
    add_events(wf, 21, 25)  # appends keep the tail growing from the watermark
    assert_totals(wf)
    s2 = validated(wf, 1, 25)
    r = action(api, s2, "activate", {"expected_revision": 1})
    assert r.json()["active_revision"] == 2 and r.json()["superseded_summary_id"] == s1.summary_id
    assert status_of(s1) == "SUPERSEDED" and status_of(s2) == "ACTIVE"
    assert events_of(s1)[-1] == ("supersede", "applied", "ACTIVE", "SUPERSEDED")
    event = LifecycleEvent.objects.get(summary=s2, action="activate")
    assert (event.expected_revision, event.observed_revision) == (1, 1)
    assert event.prior_active_summary_id == s1.pk and event.source_revision_at_activation == 25
    assert_totals(wf)
    assert wf.tail_events == 0 and wf.summary_tokens == s2.token_count


def test_stale_activation_is_409_recorded_and_changes_nothing_else(api, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    s2 = validated(wf, 1, 30)
    wf.refresh_from_db()
    before = Workflow.objects.filter(pk=wf.pk).values().get()
    r = action(api, s2, "activate", {"expected_revision": 0})
    assert r.status_code == 409
    assert r.json()["error"] == "stale_revision" and r.json()["current_revision"] == 1
    stale = LifecycleEvent.objects.get(summary=s2, result="stale")
    assert (stale.action, stale.expected_revision, stale.observed_revision) == ("activate", 0, 1)
    assert stale.prior_active_summary_id == s1.pk
    assert status_of(s1) == "ACTIVE" and status_of(s2) == "VALIDATED"
    assert Workflow.objects.filter(pk=wf.pk).values().get() == before
    assert (
        AuditEntry.objects.filter(action="summary.activate", object_id=s2.summary_id).get().data["result"]
        == "stale"
    )


def test_service_activate_returns_stale_outcome_without_raising(tenant):
    wf = build_workflow(tenant)
    activated(wf, 1, 20)
    result = lifecycle.activate(validated(wf), 0, WORKER)
    assert not result.applied and result.outcome == "stale" and result.active_revision == 1
    error = result.error()
    assert isinstance(error, Conflict) and error.as_dict()["current_revision"] == 1


def test_watermark_below_active_is_refused_and_rollback_is_no_way_around_it(api, bob, tenant):
    """A never-active version below the watermark cannot go live: activate refuses the
    regression and rollback only re-activates a version that was ACTIVE before (SUPERSEDED)."""
    wf = build_workflow(tenant)
    first = activated(wf, 1, 20)
    activated(wf, 1, 30)
    older = validated(wf, 1, 20)
    r = action(api, older, "activate", {"expected_revision": 2})
    assert r.status_code == 409 and r.json()["error"] == "watermark_regression"
    assert r.json()["active_watermark"] == 30
    refused = LifecycleEvent.objects.get(summary=older, action="activate")
    assert refused.result == "refused" and "watermark" in refused.reason
    r = action(bob.api, older, "rollback", {"expected_revision": 2, "reason": "go back"})
    assert r.status_code == 409 and r.json()["error"] == "illegal_transition", r.content
    assert events_of(older)[-1] == ("rollback", "refused", "VALIDATED", "VALIDATED")
    r = action(bob.api, first, "rollback", {"expected_revision": 2, "reason": "S2 lost context, go back"})
    assert r.status_code == 200, r.content
    assert r.json()["active_revision"] == 3
    assert_totals(wf)
    assert wf.tail_events == 10


def test_expected_revision_is_required_and_validated(api, tenant):
    s1 = validated(build_workflow(tenant))
    for payload, code in [({}, "expected_revision_required"), ({"expected_revision": -1}, "invalid_expected_revision"),
                          ({"expected_revision": True}, "invalid_expected_revision"),
                          ({"expected_revision": "0"}, "invalid_expected_revision")]:  # fmt: skip
        r = action(api, s1, "activate", payload)
        assert r.status_code == 400 and r.json()["error"] == code
    assert LifecycleEvent.objects.filter(summary=s1, action="activate").count() == 0


# -- approval policy ---------------------------------------------------------------------------------


def test_require_approval_holds_validated_summaries_until_a_reviewer_approves(api, bob, tenant):
    wf = build_workflow(tenant)
    require_approval(tenant)
    s1 = validated(wf)
    r = action(api, s1, "activate", {"expected_revision": 0})
    assert r.status_code == 409 and r.json()["error"] == "approval_required"
    assert events_of(s1)[-1] == ("activate", "refused", "VALIDATED", "VALIDATED")
    assert action(bob.api, s1, "approve", {}).json()["error"] == "reason_required"
    r = action(bob.api, s1, "approve", {"reason": "read it, facts are complete"})
    assert r.status_code == 200 and r.json()["status"] == "VALIDATED"
    detail = api.get(f"/api/v1/summaries/{s1.summary_id}/").json()["lifecycle"]
    assert detail["approval_required"] is True and detail["approved"] is True
    assert action(api, s1, "activate", {"expected_revision": 0}).status_code == 200


def test_workflow_policy_overrides_the_tenant_default(tenant):
    wf = build_workflow(tenant)
    require_approval(tenant)
    assert lifecycle.approval_required(wf) is True
    require_approval(tenant, wf, required=False)
    assert lifecycle.approval_required(wf) is False
    assert lifecycle.activate(validated(wf), 0, WORKER).applied


def test_quarantine_voids_an_earlier_approval(tenant):
    wf = build_workflow(tenant)
    require_approval(tenant, wf)
    s1 = validated(wf)
    lifecycle.approve(s1, REVIEWER, "ok")
    lifecycle.quarantine(s1, REVIEWER, "second look")
    lifecycle.release(s1, Actor.user("alice"), "fine after all")
    with pytest.raises(Conflict) as refused:  # a refusal raises (recorded first)
        lifecycle.activate(s1, 0, WORKER)
    assert refused.value.code == "approval_required"
    assert events_of(s1)[-1] == ("activate", "refused", "VALIDATED", "VALIDATED")


# -- quarantine / release ------------------------------------------------------------------------------


def test_quarantining_the_active_summary_falls_back_to_the_newest_older_version(api, bob, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 10)
    s2 = activated(wf, 1, 20)
    s3 = activated(wf, 1, 30)
    r = action(bob.api, s3, "quarantine", {"reason": "leaks a customer email"})
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "QUARANTINED" and r.json()["active_summary_id"] == s2.summary_id
    assert r.json()["active_revision"] == 4
    assert (status_of(s1), status_of(s2), status_of(s3)) == ("SUPERSEDED", "ACTIVE", "QUARANTINED")
    assert events_of(s3)[-1] == ("quarantine", "applied", "ACTIVE", "QUARANTINED")
    fallback = LifecycleEvent.objects.filter(summary=s2).order_by("id").last()
    assert (fallback.action, fallback.from_status, fallback.to_status) == ("rollback", "SUPERSEDED", "ACTIVE")
    assert fallback.observed_revision == 3 and fallback.prior_active_summary_id == s3.pk
    assert "automatic fallback" in fallback.reason and fallback.actor.startswith("api_key:bob-key")
    assert_totals(wf)
    assert wf.tail_events == 10
    # Quarantine S2 then S1: the pointer ends at none and readers get the raw history.
    lifecycle.quarantine(s2, REVIEWER, "also bad")
    lifecycle.quarantine(s1, REVIEWER, "all bad")
    wf.refresh_from_db()
    assert wf.active_summary is None and wf.active_revision == 6 and wf.activated_at is None
    assert_totals(wf)
    assert wf.tail_events == wf.head_seq and wf.tail_tokens == wf.total_tokens and wf.summary_tokens == 0
    to_none = LifecycleEvent.objects.filter(summary=s1, action="quarantine").get()
    assert to_none.observed_revision == 5


def test_fallback_skips_purged_and_unapproved_versions(tenant):
    wf = build_workflow(tenant)
    require_approval(tenant, wf)
    s1 = validated(wf, 1, 10)
    lifecycle.approve(s1, REVIEWER, "ok")
    assert lifecycle.activate(s1, 0, WORKER).applied
    validated(wf, 1, 20)  # S2: VALIDATED, never approved
    s3 = validated(wf, 1, 30)
    lifecycle.approve(s3, REVIEWER, "ok")
    assert lifecycle.activate(s3, 1, WORKER).applied
    lifecycle.quarantine(s3, REVIEWER, "bad")
    wf.refresh_from_db()
    assert wf.active_summary_id == s1.pk


def test_quarantine_of_a_non_active_summary_leaves_the_pointer(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    s2 = validated(wf)
    lifecycle.quarantine(s2, REVIEWER, "suspicious")
    wf.refresh_from_db()
    assert wf.active_summary_id == s1.pk and wf.active_revision == 1
    with pytest.raises(Conflict) as exc:
        lifecycle.quarantine(s2, REVIEWER, "again")
    assert exc.value.as_dict()["current_status"] == "QUARANTINED"


def test_release_needs_an_admin_and_a_reason_and_never_skips_validation(api, bob, tenant):
    wf = build_workflow(tenant)
    passed = validated(wf)
    never_validated = candidate(wf)
    failed = lifecycle.validate(candidate(wf, content=content_for(1, 30, drop=(10,))), WORKER)
    for s in (passed, never_validated, failed):
        lifecycle.quarantine(s, REVIEWER, "hold")
    r = action(bob.api, passed, "release", {"reason": "ok"})
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    r = action(api, passed, "release", {})
    assert r.status_code == 400 and r.json()["error"] == "reason_required"
    assert status_of(passed) == "QUARANTINED"
    assert action(api, passed, "release", {"reason": "false alarm"}).json()["status"] == "VALIDATED"
    assert action(api, never_validated, "release", {"reason": "x"}).json()["status"] == "CANDIDATE"
    assert action(api, failed, "release", {"reason": "x"}).json()["status"] == "REJECTED"
    assert events_of(passed)[-1] == ("release", "applied", "QUARANTINED", "VALIDATED")
    # Released to CANDIDATE, it can now be validated.
    assert lifecycle.validate(never_validated, WORKER).status == "VALIDATED"


# -- waive / reject --------------------------------------------------------------------------------------


def test_waive_appends_a_record_and_revalidates(api, bob, tenant):
    wf = build_workflow(tenant)
    over = lifecycle.validate(candidate(wf, compactor={"name": "c1", "token_budget": 5}), WORKER)
    assert over.status == "REJECTED"
    r = action(bob.api, over, "waive", {"checks": ["integrity"], "reason": "x"})
    assert r.status_code == 400 and r.json()["error"] == "invalid_waiver"
    r = action(bob.api, over, "waive", {"checks": ["token_budget"]})
    assert r.status_code == 400 and r.json()["error"] == "reason_required"
    assert ValidationRecord.objects.filter(summary=over).count() == 1
    r = action(bob.api, over, "waive", {"checks": ["token_budget"], "reason": "budget was a typo"})
    assert r.status_code == 200, r.content
    assert r.json()["status"] == "VALIDATED" and r.json()["validation"]["waived_checks"] == ["token_budget"]
    records = list(ValidationRecord.objects.filter(summary=over).order_by("id"))
    assert len(records) == 2 and records[0].passed is False and records[1].passed is True
    assert records[1].waived_by.startswith("api_key:bob-key")
    assert events_of(over)[-1] == ("waive", "applied", "REJECTED", "VALIDATED")
    r = action(bob.api, over, "waive", {"checks": ["token_budget"], "reason": "again"})
    assert r.status_code == 409 and r.json()["current_status"] == "VALIDATED"


def test_partial_waiver_keeps_the_summary_rejected(tenant):
    wf = build_workflow(tenant)
    content = content_for(1, 30, drop=(10,))
    s = lifecycle.validate(
        candidate(wf, content=content, compactor={"name": "c1", "token_budget": 5}), WORKER
    )
    s = lifecycle.waive(s, ["token_budget"], REVIEWER, "budget is fine")
    assert s.status == "REJECTED"
    latest = s.validations.order_by("-id").first()
    assert latest.waived_checks == ["token_budget"] and not latest.passed
    assert lifecycle.waive(s, ["mandatory_facts"], REVIEWER, "scope-10 is obsolete").status == "VALIDATED"
    assert s.validations.order_by("-id").first().waived_checks == ["mandatory_facts", "token_budget"]


def test_manual_reject(api, bob, tenant):
    wf = build_workflow(tenant)
    c = candidate(wf)
    assert action(bob.api, c, "reject", {"reason": "wrong compactor"}).json()["status"] == "REJECTED"
    active = activated(wf)
    r = action(bob.api, active, "reject", {"reason": "no"})
    assert r.status_code == 409 and r.json()["current_status"] == "ACTIVE"


# -- rollback ----------------------------------------------------------------------------------------------


def test_rollback_reactivates_a_superseded_version_by_cas(api, bob, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    s2 = activated(wf, 1, 30)
    r = action(bob.api, s1, "rollback", {"expected_revision": 2})
    assert r.status_code == 400 and r.json()["error"] == "reason_required"
    r = action(bob.api, s1, "rollback", {"expected_revision": 1, "reason": "S2 is wrong"})
    assert (
        r.status_code == 409 and r.json()["error"] == "stale_revision" and r.json()["current_revision"] == 2
    )
    r = action(bob.api, s1, "rollback", {"expected_revision": 2, "reason": "S2 is wrong"})
    assert r.status_code == 200 and r.json()["superseded_summary_id"] == s2.summary_id
    assert (status_of(s1), status_of(s2)) == ("ACTIVE", "SUPERSEDED")
    event = LifecycleEvent.objects.get(summary=s1, action="rollback", result="applied")
    assert event.reason == "S2 is wrong" and event.from_status == "SUPERSEDED"
    wf.refresh_from_db()
    assert wf.active_revision == 3
    assert_totals(wf)


def test_rollback_is_a_human_action(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    activated(wf, 1, 30)
    with pytest.raises(Conflict) as refused:
        lifecycle.rollback(s1, 2, WORKER, "automation wants to go back")
    assert refused.value.code == "rollback_requires_reviewer"
    assert LifecycleEvent.objects.filter(summary=s1, action="rollback", result="refused").exists()


# -- roles, isolation, audit, page ------------------------------------------------------------------------


def test_roles_and_isolation(api, carol, mallory, tenant):
    s1 = validated(build_workflow(tenant))
    r = action(carol.api, s1, "activate", {"expected_revision": 0})
    assert r.status_code == 403
    r = action(carol.api, s1, "quarantine", {"reason": "x"})
    assert r.status_code == 403
    r = action(mallory.api, s1, "activate", {"expected_revision": 0})
    assert r.status_code == 404
    assert LifecycleEvent.objects.filter(summary=s1).count() == 1  # only its validation


def test_every_lifecycle_event_has_an_audit_entry(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    s2 = activated(wf, 1, 30)
    lifecycle.activate(validated(wf), 0, WORKER)  # stale
    lifecycle.quarantine(s2, REVIEWER, "x")
    lifecycle.release(s2, REVIEWER, "y")
    with pytest.raises(Conflict):
        lifecycle.release(s2, REVIEWER, "y")
    with pytest.raises(InvalidInput):
        lifecycle.reject(s1, REVIEWER, "  ")
    lifecycle_count = LifecycleEvent.objects.filter(workflow=wf).count()
    audit = AuditEntry.objects.filter(action__startswith="summary.").exclude(action="summary.create")
    assert audit.count() == lifecycle_count
    assert set(audit.values_list("chained_data__lifecycle_event", flat=True)) == set(
        LifecycleEvent.objects.filter(workflow=wf).values_list("id", flat=True)
    )


def test_active_revision_counts_pointer_moves(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 10)  # 1
    activated(wf, 1, 20)  # 2
    s3 = activated(wf, 1, 30)  # 3
    lifecycle.quarantine(s3, REVIEWER, "bad")  # 4: falls back to S2
    lifecycle.rollback(s1, 4, REVIEWER, "back")  # 5
    lifecycle.quarantine(s1, REVIEWER, "bad")  # 6: no older version, to none
    lifecycle.activate(validated(wf), 0, WORKER)  # stale: not counted
    wf.refresh_from_db()
    assert wf.active_summary is None
    moves = lifecycle.pointer_moves(wf)
    assert wf.active_revision == moves.count() == 6
    assert sorted(moves.values_list("observed_revision", flat=True)) == [0, 1, 2, 3, 4, 5]


def test_workflow_page_lists_versions_and_activation_history(alice, tenant):
    wf = build_workflow(tenant)
    activated(wf, 1, 20)
    s2 = activated(wf, 1, 30)
    lifecycle.activate(validated(wf), 0, WORKER)  # a stale attempt shows in the history
    page = alice.web.get(f"/workflows/{wf.external_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    for text in ("S1", "S2", "S3", "SUPERSEDED", "ACTIVE", "VALIDATED", "result-stale", s2.summary_id):
        assert text in html


# -- approval cannot be bypassed ---------------------------------------------------------------------


def test_rollback_applies_the_approval_rule_of_activate(api, bob, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    activated(wf, 1, 30)
    require_approval(tenant)
    r = action(bob.api, s1, "rollback", {"expected_revision": 2, "reason": "go back"})
    assert r.status_code == 409 and r.json()["error"] == "approval_required"
    assert events_of(s1)[-1] == ("rollback", "refused", "SUPERSEDED", "SUPERSEDED")
    assert action(bob.api, s1, "approve", {"reason": "S1 re-read, fine"}).status_code == 200
    r = action(bob.api, s1, "rollback", {"expected_revision": 2, "reason": "go back"})
    assert r.status_code == 200, r.content


def test_quarantine_fallback_never_serves_an_unapproved_version(tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)  # activated before approval was required: never approved
    s2 = activated(wf, 1, 30)
    require_approval(tenant)
    lifecycle.quarantine(s2, REVIEWER, "bad")
    wf.refresh_from_db()
    assert wf.active_summary_id is None and status_of(s1) == "SUPERSEDED"


def test_approve_and_activate_in_one_call_over_the_api(api, bob, carol, tenant):
    wf = build_workflow(tenant)
    require_approval(tenant)
    s1 = validated(wf)
    body = {"reason": "read it", "activate": True, "expected_revision": 0}
    assert action(carol.api, s1, "approve", body).status_code == 403
    r = action(bob.api, s1, "approve", {**body, "activate": "yes"})
    assert r.status_code == 400
    r = action(bob.api, s1, "approve", body)
    assert r.status_code == 200 and r.json()["status"] == "ACTIVE", r.content
    assert [e[:2] for e in events_of(s1)][-2:] == [("approve", "applied"), ("activate", "applied")]


def test_api_roles_come_from_the_same_rule_as_the_buttons(api, bob, carol, tenant):
    from memoryhub.web.api import summaries as views

    for name, view in vars(views).items():
        if isinstance(view, type) and issubclass(view, views._Action) and view.lifecycle_action:
            assert view.write_role == lifecycle.ACTION_ROLES[view.lifecycle_action], name
    wf = build_workflow(tenant)
    s1 = lifecycle.quarantine(validated(wf), REVIEWER, "hold")
    policy = lifecycle.action_policy(s1)
    assert lifecycle.allowed_actions(s1, "reviewer", policy) == []
    assert lifecycle.allowed_actions(s1, "admin", policy) == ["release"]
    r = action(bob.api, s1, "release", {"reason": "fine"})
    assert r.status_code == 403


@pytest.mark.parametrize("tenant_default", [True, False])
def test_a_reviewer_cannot_switch_approval_off(api, bob, tenant, tenant_default):
    """Tenant policy is admin-only; a reviewer's workflow override may only be stricter."""
    wf = build_workflow(tenant)
    url_tenant = "/api/v1/triggers/policy/"
    url_wf = f"/api/v1/workflows/{wf.external_id}/policy/"
    assert bob.api.patch(url_tenant, {"require_approval": False}, format="json").status_code == 403
    assert api.patch(url_tenant, {"require_approval": tenant_default}, format="json").status_code == 200
    # Stricter is fine for a reviewer.
    assert bob.api.patch(url_wf, {"require_approval": True}, format="json").status_code == 200
    r = bob.api.patch(url_wf, {"require_approval": False}, format="json")
    assert r.status_code == 403 and r.json()["error"] == "approval_policy_admin_only"
    r = bob.api.put(url_wf, {}, format="json")  # a PUT of defaults would switch it off too
    assert r.status_code == 403
    if not tenant_default:  # dropping the override would lower it
        assert bob.api.delete(url_wf).status_code == 403
    assert lifecycle.approval_required(wf) is True
    assert api.patch(url_wf, {"require_approval": False}, format="json").status_code == 200
    assert lifecycle.approval_required(wf) is False
