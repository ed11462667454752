"""One rule, one place: ``lifecycle.allowed_actions`` decides who may press which review button,
and ``core.checks.check_state`` decides which checks failed or were waived. Every consumer is
compared with the rule over a table of cases: the API's accept/refuse answers, the review form's,
the summary page's buttons and the template tag (status × role × approval setting); the
validator's verdict, waivers, the summary and lineage pages, the inbox and the waive button
(check results)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import transaction
from django.template import Context, Template

from audit.lineage import validation_records
from audit.review import review_inbox
from memoryhub.core.checks import FAILED, PASSED, UNVERIFIABLE, WAIVED, check_state, waivable
from memoryhub.core.errors import Conflict
from memoryhub.memory import lifecycle
from memoryhub.memory.validation import WaiverError, apply_waivers, judged
from memoryhub.models import LifecycleEvent, Summary, SummaryStatus, Workflow, role_at_least
from tests.factories import (
    REVIEWER,
    WORKER,
    activated,
    build_workflow,
    candidate,
    content_for,
    require_approval,
    validated,
)

pytestmark = pytest.mark.django_db

ACTIONS = ("validate", "approve", "activate", "rollback", "waive", "reject", "quarantine", "release")
ROLES = ("carol", "bob", "alice")  # viewer, reviewer, admin


def _scene(tenant, approval: str) -> dict[str, Summary]:
    """One summary in each status a button depends on, under the approval setting ``approval``:
    off | required (nothing approved) | approved (required, every VALIDATED/SUPERSEDED one approved)."""
    wf = build_workflow(tenant, n=30)
    superseded = activated(wf, 1, 20)
    active = activated(wf, 1, 30)
    summaries = {
        "CANDIDATE": candidate(wf, 1, 30),
        "VALIDATED": validated(wf, 1, 30),
        "VALIDATED below the watermark": validated(wf, 1, 20),
        "ACTIVE": active,
        "SUPERSEDED": superseded,
        "REJECTED with failed checks": lifecycle.validate(
            candidate(wf, 1, 30, content=content_for(1, 30, drop=(10,))), WORKER
        ),
        "REJECTED by a reviewer": lifecycle.reject(validated(wf, 1, 30), REVIEWER, "not this one"),
        "QUARANTINED": lifecycle.quarantine(validated(wf, 1, 30), REVIEWER, "second look"),
    }
    if approval != "off":
        require_approval(tenant, wf)
    fresh = {name: Summary.objects.get(pk=s.pk) for name, s in summaries.items()}
    if approval == "approved":
        for s in fresh.values():
            if s.status in (SummaryStatus.VALIDATED, SummaryStatus.SUPERSEDED):
                lifecycle.approve(s, REVIEWER, "read it")
    return fresh


@contextmanager
def undone() -> Iterator[None]:
    """Run one attempt and roll everything it wrote back (each case starts from the scene)."""
    point = transaction.savepoint()
    try:
        yield
    finally:
        transaction.savepoint_rollback(point)


def _api_body(summary: Summary, action: str) -> dict[str, Any]:
    revision = Workflow.objects.get(pk=summary.workflow_id).active_revision
    failed = lifecycle.failed_checks(lifecycle.latest_validation(summary))
    return {
        "validate": {},
        "approve": {"reason": "read it"},
        "activate": {"expected_revision": revision},
        "rollback": {"expected_revision": revision, "reason": "go back"},
        "waive": {"checks": failed or ["mandatory_facts"], "reason": "covered elsewhere"},
    }.get(action, {"reason": "because"})


def _form(summary: Summary, action: str, party) -> dict[str, Any]:
    if "csrftoken" not in party.web.cookies:
        party.web.get("/review/")  # any page with a form sets the CSRF cookie
    body = _api_body(summary, action)
    data = {"csrfmiddlewaretoken": party.web.cookies["csrftoken"].value, "reason": "because"}
    if action in ("approve", "activate", "rollback"):
        data["expected_revision"] = str(Workflow.objects.get(pk=summary.workflow_id).active_revision)
    if action == "waive":
        data["checks"] = body["checks"]
    return data


def _refusals(summary: Summary) -> int:
    return LifecycleEvent.objects.filter(summary=summary, result="refused").count()


def _buttons(party, summary: Summary) -> list[str]:
    page = party.web.get(f"/summaries/{summary.summary_id}/").content.decode()
    return re.findall(r'<details class="action" data-action="(\w+)"', page)


def _tag(summary: Summary, role: str) -> list[str]:
    template = Template(
        "{% load audit_tags %}{% review_actions_for summary role as specs %}"
        "{% for s in specs %}{{ s.name }} {% endfor %}"
    )
    return template.render(Context({"summary": summary, "role": role})).split()


@pytest.mark.parametrize("approval", ["off", "required", "approved"])
def test_api_form_buttons_and_tag_follow_allowed_actions(tenant, alice, bob, carol, approval):
    parties = {"alice": alice, "bob": bob, "carol": carol}
    scene = _scene(tenant, approval)
    offered: set[tuple[str, str]] = set()
    for name, summary in scene.items():
        policy = lifecycle.action_policy(summary)
        for party_name in ROLES:
            party = parties[party_name]
            allowed = lifecycle.allowed_actions(summary, party.role, policy)
            case = f"{approval} · {name} · {party.role}"
            assert _buttons(party, summary) == allowed, case
            assert _tag(summary, party.role) == allowed, case
            offered |= {(name, action) for action in allowed}
            for action in ACTIONS:
                expected = action in allowed
                role_ok = role_at_least(party.role, lifecycle.ACTION_ROLES[action])
                for via in ("api", "form"):
                    with undone():
                        target = Summary.objects.get(pk=summary.pk)
                        refusals = _refusals(target)
                        if via == "api":
                            url = f"/api/v1/summaries/{target.summary_id}/{action}/"
                            r = party.api.post(url, _api_body(target, action), format="json")
                            accepted = r.status_code == 200
                        else:
                            url = f"/summaries/{target.summary_id}/action/{action}/"
                            r = party.web.post(url, _form(target, action, party))
                            accepted = r.status_code == 302
                        assert accepted == expected, (case, action, via, r.status_code, r.content[:300])
                        if not accepted:
                            # A role refusal (403) writes nothing; a state refusal is recorded, then 409.
                            assert r.status_code == (409 if role_ok else 403), (
                                case,
                                action,
                                via,
                                r.content[:300],
                            )
                            assert _refusals(target) == refusals + role_ok, (case, action, via)
    # The table is not vacuous: every action is offered somewhere, but what the setting rules out.
    ruled_out = {"off": {"approve"}, "required": {"activate", "rollback"}, "approved": {"approve"}}
    assert {action for _, action in offered} == set(ACTIONS) - ruled_out[approval]


def test_the_confirmation_form_says_why_an_action_is_not_available(tenant, bob):
    scene = _scene(tenant, "off")
    page = bob.web.get(f"/summaries/{scene['ACTIVE'].summary_id}/action/activate/").content.decode()
    assert 'id="not-now"' in page and "cannot activate" in page
    page = bob.web.get(f"/summaries/{scene['VALIDATED'].summary_id}/action/activate/").content.decode()
    assert 'id="not-now"' not in page


def test_a_refusal_from_the_button_rule_is_recorded_like_the_services(tenant, bob):
    """Approve is offered only where the policy asks for it; the API refuses it elsewhere (409,
    recorded with its audit entry) instead of writing an approval nobody needs."""
    scene = _scene(tenant, "off")
    s = scene["VALIDATED"]
    r = bob.api.post(f"/api/v1/summaries/{s.summary_id}/approve/", {"reason": "why not"}, format="json")
    assert r.status_code == 409 and r.json()["error"] == "approval_not_required"
    event = LifecycleEvent.objects.filter(summary=s).latest("id")
    assert (event.action, event.result, event.reason) == ("approve", "refused", "why not")
    assert not lifecycle.is_approved(s)


def test_a_stale_revision_is_answered_by_the_compare_and_swap_first(tenant, bob):
    """The gate lets a stale revision through: the person is told their view is out of date
    (stale_revision), not refused over a state they have not seen."""
    scene = _scene(tenant, "off")
    below = scene["VALIDATED below the watermark"]
    r = bob.api.post(
        f"/api/v1/summaries/{below.summary_id}/activate/", {"expected_revision": 0}, format="json"
    )
    assert r.status_code == 409 and r.json()["error"] == "stale_revision"
    revision = Workflow.objects.get(pk=below.workflow_id).active_revision
    r = bob.api.post(
        f"/api/v1/summaries/{below.summary_id}/activate/", {"expected_revision": revision}, format="json"
    )
    assert r.status_code == 409 and r.json()["error"] == "watermark_regression"
    assert r.json()["active_watermark"] == 30 and r.json()["current_revision"] == revision


# -- which checks count as failed or waived ------------------------------------------------------------

OK = {"passed": True, "detail": "ok"}
NO = {"passed": False, "detail": "bad"}
CANT = {"passed": None, "unverifiable": True, "detail": "unverifiable content: digest only"}
OPAQUE_REST = [("tool_call_pairs", CANT), ("mandatory_facts", CANT), ("groundedness", CANT)]

# name: (validator, [(check, result)], checks a reviewer waives afterwards, {check: state}, verdict)
CHECK_CASES: dict[str, tuple[str, list, list[str], dict[str, str], str]] = {
    "all passed": (
        "rules-5",
        [("integrity", OK), ("token_budget", OK)],
        [],
        {"integrity": PASSED, "token_budget": PASSED},
        "passed",
    ),
    "one failed": (
        "rules-5",
        [("integrity", OK), ("token_budget", NO)],
        [],
        {"integrity": PASSED, "token_budget": FAILED},
        "failed",
    ),
    "one of two waived": (
        "rules-5",
        [("integrity", OK), ("token_budget", NO), ("open_issues", NO)],
        ["token_budget"],
        {"integrity": PASSED, "token_budget": WAIVED, "open_issues": FAILED},
        "failed",
    ),
    "all failures waived": (
        "rules-5",
        [("integrity", OK), ("token_budget", NO), ("open_issues", NO)],
        ["token_budget", "open_issues"],
        {"integrity": PASSED, "token_budget": WAIVED, "open_issues": WAIVED},
        "passed",
    ),
    "broken hash": (
        "rules-5",
        [("integrity", NO), ("token_budget", NO)],
        [],
        {"integrity": FAILED, "token_budget": FAILED},
        "failed",
    ),
    "opaque, nothing failed": (
        "opaque-1",
        [("integrity", OK), ("coverage_contiguity", OK), *OPAQUE_REST],
        [],
        {"integrity": PASSED, "coverage_contiguity": PASSED} | {n: UNVERIFIABLE for n, _ in OPAQUE_REST},
        "unverifiable",
    ),
    "opaque, coverage failed": (
        "opaque-1",
        [("integrity", OK), ("coverage_contiguity", NO), *OPAQUE_REST],
        [],
        {"integrity": PASSED, "coverage_contiguity": FAILED} | {n: UNVERIFIABLE for n, _ in OPAQUE_REST},
        "failed",
    ),
    "opaque, coverage waived": (
        "opaque-1",
        [("integrity", OK), ("coverage_contiguity", NO), *OPAQUE_REST],
        ["coverage_contiguity"],
        {"integrity": PASSED, "coverage_contiguity": WAIVED} | {n: UNVERIFIABLE for n, _ in OPAQUE_REST},
        "unverifiable",
    ),
    "encrypted item in readable content": (
        "rules-5",
        [("integrity", OK), ("content_readable", {"passed": False, "detail": "unverifiable content: item"})],
        [],
        {"integrity": PASSED, "content_readable": FAILED},
        "failed",
    ),
}


@pytest.mark.parametrize("case", sorted(CHECK_CASES))
def test_every_consumer_agrees_on_failed_and_waived_checks(tenant, bob, case):
    version, results, waive, states, verdict = CHECK_CASES[case]
    checks = [{"name": name, **result} for name, result in results]
    failed = [n for n, state in states.items() if state == FAILED]
    wf = build_workflow(tenant, n=30)
    summary = lifecycle.validate(candidate(wf, 1, 30), WORKER, outcome=judged(version, checks, 1.0))
    if waive:
        summary = lifecycle.waive(summary, waive, REVIEWER, "accepted on review")
    summary = Summary.objects.get(pk=summary.pk)
    record = lifecycle.latest_validation(summary)
    assert record is not None

    # The rule, and the record's own views of it.
    assert {c["name"]: check_state(c, record.waived_checks) for c in record.checks} == states
    assert {c["name"]: c["state"] for c in record.checks_with_state()} == states
    assert record.failed_checks == lifecycle.failed_checks(record) == failed
    assert record.passed is (not failed) and record.result == verdict
    assert record.reasons == [f"{c['name']}: {c['detail']}" for c in record.checks if c["name"] in failed]
    assert summary.status == (SummaryStatus.REJECTED if failed else SummaryStatus.VALIDATED)
    # Waivers accept exactly the failed checks a reviewer may waive.
    outcome = judged(version, record.checks, 1.0, waived=record.waived_checks)
    for name, state in states.items():
        if state == FAILED and name != "integrity":
            assert name not in apply_waivers(outcome, [name]).reasons
        else:
            with pytest.raises(WaiverError):
                apply_waivers(outcome, [name])
    # The waive button (and observed compactions' auto-waiver) ask the same question.
    policy = lifecycle.action_policy(summary)
    assert list(policy.failed_checks) == failed
    assert ("waive" in lifecycle.allowed_actions(summary, bob.role, policy)) == waivable(failed)
    # Summary page: each row's state; the waive form lists the failed checks.
    page = bob.web.get(f"/summaries/{summary.summary_id}/").content.decode()
    for name, state in states.items():
        assert re.search(rf'<tr class="{state}"><td><code>{name}</code>', page), (case, name, state)
    waive_form = page.split('data-action="waive"')[1].split("</details>")[0] if waivable(failed) else ""
    assert re.findall(r'name="checks" value="(\w+)"', waive_form) == (failed if waivable(failed) else [])
    # Lineage (artifact page and API), the summary API and the inbox.
    latest = validation_records(summary)[-1]
    assert latest["failed_checks"] == failed
    assert {c["name"]: c["state"] for c in latest["checks"]} == states
    detail = bob.api.get(f"/api/v1/summaries/{summary.summary_id}/").json()["validation"]["latest"]
    assert detail["result"] == verdict and detail["passed"] is (not failed)
    in_inbox = {row.summary.pk: row.why for row in review_inbox(tenant.pk)}
    assert (in_inbox.get(summary.pk) == "failed_checks") == bool(failed)


def test_refusals_raise_and_a_stale_compare_and_swap_is_returned(tenant):
    """The refusal style: a refused activation raises (its row committed first), a stale one is an
    outcome; approve-and-activate whose activation is refused says the approval stands."""
    scene = _scene(tenant, "required")
    below = scene["VALIDATED below the watermark"]
    revision = Workflow.objects.get(pk=below.workflow_id).active_revision
    stale = lifecycle.activate(scene["VALIDATED"], revision - 1, WORKER)
    assert stale.outcome == "stale" and not stale.applied
    with pytest.raises(Conflict) as refused:
        lifecycle.approve_and_activate(below, revision, REVIEWER, "read it")  # the service, no gate
    assert refused.value.code == "watermark_regression" and refused.value.extra["approved"] is True
    assert "is approved, but was not activated" in refused.value.detail
    assert lifecycle.is_approved(below)
    rows = list(LifecycleEvent.objects.filter(summary=below).order_by("id").values_list("action", "result"))
    assert rows[-2:] == [("approve", "applied"), ("activate", "refused")]
