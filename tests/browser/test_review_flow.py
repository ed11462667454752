"""The review flow in a real browser (Chromium via Playwright) on the demo: a compaction under
``require_approval`` waits in the review inbox; the reviewer discusses it, approves it with a
reason and it goes live in the same action; rollback from a SUPERSEDED version; and the status
labels, firing alerts and formatted numbers that make the state obvious."""

from __future__ import annotations

import re

import pytest

from audit.models import AuditEntry, SummaryComment
from memoryhub.demo import loader, scenario
from memoryhub.models import AlertRule, CompactionJob, Summary, SummaryStatus, Workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REVIEW_WF = loader.REVIEW_WORKFLOW["external_id"]


@pytest.fixture
def demo(demo_db):
    return demo_db


def _summary(version: int) -> Summary:
    return Summary.objects.get(workflow__external_id=REVIEW_WF, version=version)


def _view(page, screenshot_dir, name: str, selector: str | None = None) -> None:
    """A viewport-sized screenshot (the summary page is long), scrolled to ``selector``."""
    if selector:
        page.locator(selector).scroll_into_view_if_needed()
    else:
        page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshot_dir / f"{name}.png"))


def test_reviewer_approves_from_the_inbox_and_it_goes_live_then_rolls_back(
    page, live_server, login, shoot, screenshot_dir, demo
):
    # The compaction ran through the real pipeline and stopped for approval.
    s2 = _summary(2)
    assert s2.status == SummaryStatus.VALIDATED
    assert CompactionJob.objects.get(summary=s2).outcome == "awaiting_approval"
    wf = Workflow.objects.get(external_id=REVIEW_WF)
    assert wf.active_summary_id == _summary(1).pk

    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    page.goto(f"{live_server.url}/overview/")
    assert page.locator("#nav-review [data-count]").inner_text() == "1"
    card = page.locator("[data-stat=review]")
    assert card.locator(".value").inner_text() == "1" and "1 awaiting approval" in card.inner_text()
    shoot("review-overview")

    page.click("#nav-review")
    page.wait_for_url(re.compile(r"/review/$"))
    row = page.locator(f"#inbox-table tr[data-summary='{s2.summary_id}']")
    assert row.get_attribute("data-why") == "awaiting_approval"
    assert "awaiting approval" in row.inner_text()
    shoot("review-inbox")

    row.locator("a").first.click()
    page.wait_for_url(re.compile(rf"/summaries/{s2.summary_id}/$"))
    assert page.locator("#summary-status [data-awaiting=approval]").count() == 1
    assert page.locator("#comment-list li").count() == 1  # the demo's question
    page.fill("#comment-text", "Checked events 41-80: the 401 requirement is kept. Approving.")
    page.click("#comment-form button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#comment-list li").count() == 2
    last = page.locator("#comment-list li").last.inner_text()
    assert "user:rita" in last and "401 requirement is kept" in last
    assert SummaryComment.objects.filter(summary=s2).count() == 2
    assert AuditEntry.objects.filter(action="summary.comment", object_id=s2.summary_id).count() == 2
    _view(page, screenshot_dir, "review-comments", "#comments")
    _view(page, screenshot_dir, "review-summary-awaiting")

    # Approve: one action, the summary goes live at the revision the reviewer saw.
    assert [a.get_attribute("data-action") for a in page.locator("#review-actions details.action").all()] == [
        "approve",
        "reject",
        "quarantine",
    ]
    page.click("details[data-action=approve] > summary")
    page.fill("#reason-approve", "Read against events 1-80; the 401 requirement is kept.")
    _view(page, screenshot_dir, "review-approve-form")
    page.click("details[data-action=approve] button[type=submit]")
    page.wait_for_load_state()
    assert "approved and now ACTIVE" in page.locator(".messages").inner_text()
    assert page.locator("#summary-status [data-stat=pointer] .value").inner_text() == "this version"
    assert page.locator("#summary-status [data-status]").first.get_attribute("data-status") == "ACTIVE"
    assert page.locator("#summary-status [data-awaiting]").count() == 0
    assert page.locator("#review-actions details[data-action=approve]").count() == 0
    assert page.locator("#nav-review [data-count]").count() == 0  # the inbox is empty
    _view(page, screenshot_dir, "review-summary-approved-live")

    # S1 is SUPERSEDED now: Rollback is offered there.
    s1 = _summary(1)
    assert s1.status == SummaryStatus.SUPERSEDED
    page.goto(f"{live_server.url}/summaries/{s1.summary_id}/")
    page.click("details[data-action=rollback] > summary")
    page.fill("#reason-rollback", "S2 needs another look; serve S1 meanwhile.")
    page.click("details[data-action=rollback] button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#summary-status [data-stat=pointer] .value").inner_text() == "this version"
    wf.refresh_from_db()
    assert wf.active_summary_id == s1.pk
    _view(page, screenshot_dir, "review-rollback")
    assert page.js_errors == []


def test_status_is_obvious_in_the_browser(page, live_server, login, shoot, demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/workflows/")
    row = page.locator(f"tr[data-workflow='{REVIEW_WF}']")
    assert "S2 awaiting approval" in row.inner_text()
    shoot("status-workflow-list")
    page.goto(f"{live_server.url}/workflows/{REVIEW_WF}/")
    assert "awaiting a reviewer's approval" in page.locator("#awaiting-approval").inner_text()
    assert (
        page.locator(f"#summary-table tr[data-summary='{_summary(2).summary_id}'] [data-awaiting]").count()
        == 1
    )
    shoot("status-workflow-detail")

    # The demo's alert fires; the nav and the overview say so and link the breaching workflow.
    nav = page.locator("#nav-alerts")
    assert "1 firing" in nav.inner_text()
    page.goto(f"{live_server.url}/overview/")
    alert = page.locator("#firing-alerts")
    assert loader.DEMO_ALERT["name"] in alert.inner_text()
    alert.locator(f"a[data-breach='{scenario.WORKFLOW_ID}']").click()
    page.wait_for_url(re.compile(rf"/workflows/{scenario.WORKFLOW_ID}/$"))
    shoot("status-breaching-workflow")

    # A rule never evaluated says so; values and thresholds are formatted.
    rule = AlertRule.objects.get(name=loader.DEMO_ALERT["name"])
    fresh = AlertRule.objects.filter(tenant=rule.tenant, last_evaluated_at__isnull=True).first()
    page.goto(f"{live_server.url}/alerts/")
    assert page.locator(f"tr[data-rule-id='{fresh.pk}'] [data-state=not-evaluated]").count() == 1
    demo_row = page.locator(f"tr[data-rule-id='{rule.pk}']").inner_text().lower()
    assert "critical" in demo_row and re.search(r"\d+ d", demo_row) and ".0" not in demo_row
    assert "6 h" in demo_row and "1 d" in demo_row  # thresholds as durations, not 21600.0
    shoot("status-alerts")
    assert page.js_errors == []


def test_investigation_names_the_first_loss(page, live_server, login, screenshot_dir, demo):
    """Issue 17 item 11: the demo's T57 investigation blames S2 (its job, compactor c2, when)."""
    s2 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=2)
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    page.goto(f"{live_server.url}/artifacts/{scenario.INCIDENT_ARTIFACT_ID}/")
    inv = page.locator("article.investigation").first
    text = inv.inner_text()
    assert "first dropped by S2" in text and "still missing in S3" in text and "does not restore it" in text
    loss = inv.locator("[data-first-loss]")
    assert loss.get_attribute("data-first-loss") == "S2"
    assert f"job #{s2.job_id}" in loss.inner_text() and "c2" in loss.inner_text()
    assert "not restored by the tail" in loss.inner_text()
    loss.locator(f"a[href='/summaries/{s2.summary_id}/']").click()
    page.wait_for_url(re.compile(rf"/summaries/{s2.summary_id}/$"))
    page.go_back()
    inv.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshot_dir / "investigation-first-loss.png"))
    assert page.js_errors == []


def test_audit_log_reads_like_a_story(page, live_server, login, shoot, demo):
    """Issue 17 item 12: human names, reasons inline, every object linked (jobs too), filters by
    actor, action, object and time."""
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    s3 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=3)
    page.goto(f"{live_server.url}/audit/?object={REVIEW_WF}")
    table = page.locator("#audit-table")
    approve = table.locator("tr[data-action='summary.approve']").first
    assert f"{REVIEW_WF} · S1" in approve.inner_text()
    assert "requirements intact" in approve.locator(".reason").inner_text()
    job = table.locator(
        "tr[data-action='compaction.request'] td.object a[data-object^='compactionjob:']"
    ).first
    assert re.search(rf"{REVIEW_WF} · job #\d+", job.inner_text())
    # Every row about this workflow links its object.
    assert table.locator("td.object span[data-object]").count() == 0
    shoot("audit-story")
    job.click()
    page.wait_for_url(re.compile(rf"/workflows/{REVIEW_WF}/#job-\d+$"))
    assert page.locator(page.url[page.url.index("#") :]).count() == 1

    # Filters: actor, action, object, time.
    page.goto(f"{live_server.url}/audit/?actor=user:rita&action=summary.comment")
    rows = page.locator("#audit-table tbody tr")
    assert rows.count() == 2 and all("user:rita" in r.inner_text() for r in rows.all())
    page.goto(f"{live_server.url}/audit/?object={s3.summary_id}")
    assert page.locator("#audit-table tbody tr").count() >= 3  # create, validate, waive, activate, …
    assert all(
        f"{scenario.WORKFLOW_ID} · S3" in r.inner_text() for r in page.locator("#audit-table tbody tr").all()
    )
    page.goto(f"{live_server.url}/audit/?until=2000-01-01T00:00")
    assert page.locator("#audit-table").count() == 0 and "No audit entries match" in page.content()
    page.fill("input[name=actor]", "user:rita")
    page.fill("input[name=action]", "summary.approve")
    page.fill("input[name=until]", "")
    page.click("#audit-filter button[type=submit]")
    page.wait_for_load_state()
    assert page.locator("#audit-table tbody tr").count() == 1
    shoot("audit-story-filtered")
    assert page.js_errors == []
