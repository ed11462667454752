"""The dashboard in a real browser (Chromium via Playwright) against a live server, on the seed
scenario loaded by the demo loader (acme / api-tests-42, S1–S3, T57)."""

from __future__ import annotations

import re

import pytest

from audit.models import AuditEntry
from memoryhub.context.traces import record_trace
from memoryhub.core.actors import Actor
from memoryhub.demo import scenario
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.models import Summary, SummaryStatus, Workflow
from tests.factories import append, event, make_workflow
from triggers.services import decide

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WORKER = Actor.worker("memoryhub.compaction.run_job", "browser-test#1")


@pytest.fixture
def demo(demo_db):
    """The seed scenario, loaded through the real services (back-dated to end three days ago)."""
    return demo_db


@pytest.fixture
def busy_demo(demo):
    """The demo plus what it does not contain: a rejected candidate that an agent read anyway, and
    a trigger decision projected past the hard limit — so every overview chart has something."""
    workflow = Workflow.objects.get(external_id=scenario.WORKFLOW_ID)
    bad = create_summary(
        workflow,
        content={"narrative": "Everything is fine.", "facts": [], "open_items": []},
        covers_from_seq=1,
        covers_to_seq=workflow.head_seq,
        compactor={"name": "careless", "version": "0"},
        actor=WORKER,
    )
    lifecycle.validate(bad, WORKER)
    assert Summary.objects.get(pk=bad.pk).status == SummaryStatus.REJECTED
    record_trace(
        workflow,
        {
            "agent": "publisher",
            "agent_run_id": "run-late",
            "model_call_id": "call-late",
            "summary_id": bad.summary_id,
            "tail_to_seq": workflow.head_seq,
        },
        WORKER,
    )
    decide(workflow, {"expected_next_step_tokens": 60_000}, WORKER)
    return demo


def summary_id(version: int) -> str:
    return Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=version).summary_id


def badge(page, selector: str) -> str:
    return page.locator(f"{selector} [data-status]").first.get_attribute("data-status")


def test_reviewer_quarantines_s3_and_the_pointer_falls_back(page, live_server, login, shoot, demo):
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    page.goto(f"{live_server.url}/workflows/")
    shoot("workflow-list")
    page.click(f"a[href='/workflows/{scenario.WORKFLOW_ID}/']")
    page.wait_for_selector("#chart-history[data-drawn='1']")
    shoot("workflow-detail")
    page.click("#summary-table a:text-is('S3')")
    page.wait_for_url(re.compile(r"/summaries/sum_"))
    s3 = summary_id(3)
    assert page.url.endswith(f"/summaries/{s3}/")
    assert badge(page, "#summary-status [data-stat=status]") == "ACTIVE"
    assert page.locator("#summary-status [data-stat=pointer] .value").inner_text() == "this version"
    shoot("summary-s3")

    # Quarantine asks for a reason (the browser refuses an empty one), then posts it.
    page.click("details[data-action=quarantine] > summary")
    page.click("details[data-action=quarantine] button[type=submit]")
    assert page.url.endswith(f"/summaries/{s3}/")  # not submitted: the reason is required
    page.fill(
        "details[data-action=quarantine] textarea[name=reason]", "drops the 401 requirement (incident T57)"
    )
    page.click("details[data-action=quarantine] button[type=submit]")
    page.wait_for_load_state()
    assert page.url.endswith(f"/summaries/{s3}/")
    assert badge(page, "#summary-status [data-stat=status]") == "QUARANTINED"
    assert page.locator("#summary-status [data-stat=pointer] .value").inner_text() == "S2"
    assert "Quarantine" in page.locator(".messages").inner_text()
    shoot("summary-s3-quarantined")

    # The workflow page shows the fallback: S2 is ACTIVE again, S3 QUARANTINED.
    page.goto(f"{live_server.url}/workflows/{scenario.WORKFLOW_ID}/")
    rows = {
        page.locator(f"#summary-table tr[data-summary='{summary_id(v)}'] [data-status]").get_attribute(
            "data-status"
        )
        for v in (2, 3)
    }
    assert rows == {"ACTIVE", "QUARANTINED"}
    assert badge(page, f"#summary-table tr[data-summary='{summary_id(2)}']") == "ACTIVE"
    assert page.locator("#workflow-stats [data-stat=active] .value").inner_text() == "S2"
    assert Workflow.objects.get(external_id=scenario.WORKFLOW_ID).active_summary.version == 2

    # The audit entry is on the audit page.
    entry = AuditEntry.objects.filter(action="summary.quarantine", object_id=s3).get()
    page.goto(f"{live_server.url}/audit/?action=summary.quarantine")
    row = page.locator(f"#audit-{entry.seq}")
    assert "summary.quarantine" in row.inner_text() and f"{scenario.WORKFLOW_ID} · S3" in row.inner_text()
    assert row.locator(f"a[href='/summaries/{s3}/']").count() == 1
    assert f"user:{scenario.REVIEWER_USERNAME}" in row.inner_text()
    shoot("audit-log")
    assert page.js_errors == []


def test_viewer_sees_no_review_buttons_and_a_forged_post_is_refused(page, live_server, login, shoot, demo):
    login(scenario.VIEWER_USERNAME, scenario.VIEWER_PASSWORD)
    s3 = summary_id(3)
    page.goto(f"{live_server.url}/summaries/{s3}/")
    assert page.locator("#review-actions details.action").count() == 0
    assert page.locator("#review-actions form").count() == 0
    assert "read-only" in page.locator("#review-actions").inner_text()
    shoot("summary-s3-viewer")
    csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    response = page.request.post(
        f"{live_server.url}/summaries/{s3}/action/quarantine/",
        form={"reason": "forged", "csrfmiddlewaretoken": csrf},
        headers={"X-CSRFToken": csrf},
        max_redirects=0,
    )
    assert response.status == 403
    assert Summary.objects.get(summary_id=s3).status == SummaryStatus.ACTIVE
    assert not AuditEntry.objects.filter(action="summary.quarantine").exists()


def test_every_overview_chart_has_data_and_drills_down(page, live_server, login, shoot, busy_demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/overview/?window=7d")
    page.wait_for_function(
        "[...document.querySelectorAll('[data-figure]')].every(el => el.dataset.drawn === '1')"
    )
    charts = page.eval_on_selector_all(
        "[data-figure]",
        """els => els.map(el => ({
            id: el.id,
            points: el.data.reduce((n, t) => n + (t.x || []).length, 0),
            nonzero: el.data.some(t => (t.y || []).some(v => v)),
        }))""",
    )
    assert len(charts) == 10
    for chart in charts:
        assert chart["points"] > 0 and chart["nonzero"], chart
    shoot("overview")

    # A bucket of the stale-activation chart opens the workflows behind it (scrolled into view:
    # a mouse click only lands inside the viewport).
    page.locator("#chart-stale").scroll_into_view_if_needed()
    bar = page.locator("#chart-stale g.point path").filter(has_not=page.locator("[d='M0,0Z']"))
    boxes = [b for b in (bar.nth(i).bounding_box() for i in range(bar.count())) if b and b["height"] > 1]
    assert len(boxes) == 1
    box = boxes[0]
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_url(re.compile(r"/workflows/\?has=stale"))
    assert (
        page.locator("#workflow-table [data-workflow]").all_inner_texts()[0].startswith(scenario.WORKFLOW_ID)
    )
    shoot("workflow-list-drilldown")
    assert page.js_errors == []


def test_overview_numbers_refresh_without_a_reload(page, live_server, login, demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/overview/")
    before = int(page.locator("[data-stat=workflows] .value").inner_text())
    page.evaluate("window.__sameDocument = true")
    wf = make_workflow(Workflow.objects.get(external_id=scenario.WORKFLOW_ID).tenant, "arrived-later")
    append(wf, [event(1)])
    page.evaluate(
        "document.dispatchEvent(new Event('visibilitychange'))"
    )  # a returning tab refreshes at once
    page.wait_for_function(
        f"document.querySelector('[data-stat=workflows] .value').textContent.trim() === '{before + 1}'"
    )
    assert page.evaluate("window.__sameDocument") is True


def test_artifact_page_is_linked_from_the_workflow_page(page, live_server, login, shoot, demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/workflows/{scenario.WORKFLOW_ID}/")
    page.click(f"#artifact-table a:text-is('{scenario.INCIDENT_ARTIFACT_ID}')")
    page.wait_for_url(re.compile(rf"/artifacts/{scenario.INCIDENT_ARTIFACT_ID}/$"))
    assert scenario.INCIDENT_ARTIFACT_ID in page.locator("h1").inner_text()
    shoot("artifact-t57")
