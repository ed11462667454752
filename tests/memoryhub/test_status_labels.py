"""Status is obvious (issue 17 item 2): awaiting approval on the list, workflow and summary pages;
rules read "not evaluated yet" until evaluated; a flip whose deliveries all failed says so;
numbers are formatted; firing alerts show in the nav and on the overview with the workflows
that breach them."""

from __future__ import annotations

import re

import pytest

from memoryhub.models import AlertRule
from memoryhub.observe.alerting.deliver import MAX_ATTEMPTS, deliver_pending
from memoryhub.observe.alerting.evaluate import evaluate_rule
from memoryhub.templatetags.numbers import format_duration, format_metric, format_number, format_percent
from tests.factories import activated, alert_channel, build_workflow, only_rule, require_approval, validated

pytestmark = pytest.mark.django_db


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_awaiting_approval_is_labelled_on_list_workflow_and_summary_pages(alice, tenant):
    wf = build_workflow(tenant, "needs-approval")
    require_approval(tenant, wf)
    s1 = validated(wf)
    other = build_workflow(tenant, "free")
    validated(other)  # no policy: VALIDATED, nothing awaited
    page = alice.web.get("/workflows/").content.decode()
    row = re.search(r'<tr data-workflow="needs-approval">.*?</tr>', page, re.S).group(0)
    assert "S1 awaiting approval" in text(row)
    row = re.search(r'<tr data-workflow="free">.*?</tr>', page, re.S).group(0)
    assert "awaiting approval" not in row
    page = alice.web.get(f"/workflows/{wf.external_id}/").content.decode()
    assert 'id="awaiting-approval"' in page and 'data-awaiting="approval"' in page
    page = alice.web.get(f"/summaries/{s1.summary_id}/").content.decode()
    assert 'data-awaiting="approval"' in page and "required, not given yet" in text(page)
    fragment = alice.web.get(f"/summaries/{s1.summary_id}/?fragment=status").content.decode()
    assert 'data-awaiting="approval"' in fragment
    nav = re.search(r'id="nav-review".*?</a>', page, re.S).group(0)
    assert 'data-count="1"' in nav


def test_rules_are_not_evaluated_yet_until_their_first_evaluation(alice, tenant):
    page = alice.web.get("/alerts/").content.decode()
    rule = AlertRule.objects.filter(tenant=tenant).first()
    row = re.search(rf'<tr data-rule-id="{rule.pk}">.*?</tr>', page, re.S).group(0)
    assert 'data-state="not-evaluated"' in row and 'data-state="ok"' not in row
    evaluate_rule(rule)
    page = alice.web.get("/alerts/").content.decode()
    row = re.search(rf'<tr data-rule-id="{rule.pk}">.*?</tr>', page, re.S).group(0)
    assert 'data-state="ok"' in row and "not evaluated" not in row
    detail = alice.web.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert "not evaluated yet" not in detail


def test_firing_alert_in_nav_and_overview_links_the_breaching_workflow_and_failed_deliveries(
    alice, tenant, receiver
):
    hot = build_workflow(tenant, "hot", n=30)
    activated(hot, 1, 10)  # 20 events behind head
    build_workflow(tenant, "cool", n=3)
    channel = alert_channel(
        tenant, name="broken hook", url=receiver.url("/status/503"), secret=receiver.secret
    )
    rule = only_rule(
        tenant,
        channel,
        name="Tail too long",
        metric="tail_events",
        aggregation="max",
        warning_threshold=5,
        critical_threshold=5124,
    )
    flip = evaluate_rule(rule).flip
    assert flip is not None and flip.to_state == "warning"
    for _ in range(MAX_ATTEMPTS):
        deliver_pending()
    overview = alice.web.get("/overview/").content.decode()
    section = re.search(r'<section class="card firing-alerts".*?</section>', overview, re.S).group(0)
    assert (
        "Tail too long" in section and 'data-breach="hot"' in section and 'data-breach="cool"' not in section
    )
    assert 'href="/workflows/hot/"' in section
    nav = re.search(r'id="nav-alerts".*?</a>', overview, re.S).group(0)
    assert "1 firing" in text(nav)
    page = alice.web.get("/alerts/").content.decode()
    assert 'data-delivery="all_failed"' in page and f"all {MAX_ATTEMPTS} deliveries failed" in page
    assert "5,124" in page and "5124.0" not in page  # thresholds with separators, no trailing .0
    detail = alice.web.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert 'data-delivery="all_failed"' in detail


def test_number_formats():
    assert format_number(5124.0) == "5,124" and format_number(0.5) == "0.5" and format_number(None) == "—"
    assert format_percent(0.8333) == "83.3%" and format_percent(1) == "100%"
    assert format_duration(3 * 86400 + 2 * 3600) == "3 d 2 h" and format_duration(42) == "42 s"
    assert format_metric(0.25, "acceptance_rate") == "25%"
    assert format_metric(90000, "active_summary_age_seconds") == "1 d 1 h"
    assert format_metric(12345.0, "tail_tokens") == "12,345 tokens"
    assert format_metric(None, "tail_tokens") == "no data"
