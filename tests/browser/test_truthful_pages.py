"""Issue #31 "pages that tell the truth", in a real browser on the demo at a phone and a laptop
width: tenant-wide search with its scope toggle and pages; opaque and framework-compacted pages; the
trace page with the call's content (and "not recorded" for what a framework call did not record);
the compactor page. Each page must not scroll sideways and axe-core must find no serious or
critical violation."""

from __future__ import annotations

import json

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.db import connections

from memoryhub.demo import other, scenario
from memoryhub.models import Artifact, ConsumerTrace, Summary, Workflow, WorkflowSource
from tests.browser.test_pages import overflow, settle

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (390, 1280)


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    connections.close_all()  # ORM calls made inside Playwright's loop hold their own connection


def fits_and_is_accessible(page, width: int) -> None:
    settle(page)
    got = overflow(page)
    assert got["scroll"] <= got["inner"], got
    bad = [
        f"{v['id']} ({v['impact']}): {v['nodes'][0]['target']}"
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert bad == [], bad


@pytest.mark.parametrize("width", WIDTHS)
def test_search_spans_the_tenant_and_toggles_to_one_workflow(page, live_server, login, shoot, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    # From a workflow page, the nav search still searches every workflow (the toggle narrows it).
    page.goto(f"{live_server.url}/workflows/{scenario.WORKFLOW_ID}/")
    page.fill("#nav-search-q", "401")
    page.press("#nav-search-q", "Enter")
    page.wait_for_selector("#event-results")
    assert page.locator("#event-results").get_attribute("data-scope") == "tenant"
    workflows = set(page.locator("#event-hits li").evaluate_all("els => els.map(e => e.dataset.workflow)"))
    assert len(workflows) >= 2, workflows  # the demo mentions 401 in more than one workflow
    assert page.locator("#event-hits mark").count() > 0
    fits_and_is_accessible(page, width)
    shoot(f"search-tenant-{width}")
    page.locator("#scope-toggle a", has_text="Only").click()
    page.wait_for_selector("#event-results[data-scope=workflow]")
    workflows = set(page.locator("#event-hits li").evaluate_all("els => els.map(e => e.dataset.workflow)"))
    assert workflows == {scenario.WORKFLOW_ID}
    assert page.locator("#search-scope input[value=workflow]").is_checked()
    fits_and_is_accessible(page, width)
    shoot(f"search-workflow-{width}")
    # A 110-character workflow id in the toggle and the heading stays within the width.
    page.goto(f"{live_server.url}/search/?q=401&workflow={other.LONG_ID}&all=1")
    assert page.locator("#event-results").get_attribute("data-scope") == "workflow"
    fits_and_is_accessible(page, width)
    # The next page of a broad query (the demo has more than a page of matches for "the").
    page.goto(f"{live_server.url}/search/?q=the&all=1")
    if page.locator("a[rel=next]").count():
        page.click("a[rel=next]")
        page.wait_for_selector("a[rel=prev]")
        assert page.locator("#event-hits li").count() > 0
        fits_and_is_accessible(page, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_opaque_and_framework_pages_tell_the_truth(page, live_server, login, shoot, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    desk = Workflow.objects.get(source=WorkflowSource.OPENAI_AGENTS)
    opaque = Summary.objects.filter(workflow=desk).order_by("-version").first()
    page.goto(f"{live_server.url}/summaries/{opaque.summary_id}/")
    fits_and_is_accessible(page, width)
    digest = json.loads(opaque.content)["digest"]
    assert page.locator("main").inner_text().count(digest) == 1
    assert "unknown" in page.locator("#opaque-content").inner_text()
    shoot(f"opaque-summary-{width}")
    page.goto(f"{live_server.url}/workflows/{desk.external_id}/")
    fits_and_is_accessible(page, width)
    assert "OpenAI Agents SDK" in page.locator("#compacted-by").inner_text()
    assert page.locator("#decay-unknown").is_visible()
    # The history chart is scaled to the data: no policy line stretches its axis.
    top = page.evaluate(
        "() => { const el = document.getElementById('chart-history');"
        " return el && el.layout ? el.layout.yaxis.range[1] : null; }"
    )
    if top is not None:
        assert top < 2 * desk.total_tokens, top
    tool = page.locator("pre[data-tool-json]").first
    assert '\\"' not in tool.inner_text() and '"order_id"' in tool.inner_text()
    assert tool.bounding_box()["x"] + tool.bounding_box()["width"] <= width
    shoot(f"framework-workflow-{width}")
    session = Workflow.objects.get(source=WorkflowSource.CLAUDE_CODE)
    page.goto(f"{live_server.url}/workflows/{session.external_id}/")
    fits_and_is_accessible(page, width)
    assert "Claude Code" in page.locator("#compacted-by").inner_text()


@pytest.mark.parametrize("width", WIDTHS)
def test_sentence_diff_reads_side_by_side(page, live_server, login, shoot, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    s1, s2 = Summary.objects.filter(workflow__external_id=scenario.WORKFLOW_ID).order_by("version")[:2]
    page.goto(f"{live_server.url}/summaries/{s2.summary_id}/diff/?against={s1.summary_id}")
    fits_and_is_accessible(page, width)
    rows = page.locator("#diff-sentences tbody tr")
    assert rows.count() > 0
    states = set(rows.evaluate_all("els => els.map(e => e.dataset.state)"))
    assert states - {"same"}, states  # the demo's S2 rewrites S1
    # Both columns share the width: each cell within the viewport.
    for cell in page.locator("#diff-sentences tbody tr:first-child td").all():
        box = cell.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1
    shoot(f"sentence-diff-{width}")
    # The opaque workflow's diff says unknown.
    desk = Workflow.objects.get(source=WorkflowSource.OPENAI_AGENTS)
    latest = Summary.objects.filter(workflow=desk).order_by("-version").first()
    page.goto(f"{live_server.url}/summaries/{latest.summary_id}/diff/")
    fits_and_is_accessible(page, width)
    assert page.locator("[data-opaque]").count() == 2
    assert page.locator("del.loss").count() == 0


@pytest.mark.parametrize("width", WIDTHS)
def test_the_t57_trace_page_shows_the_call_and_fits(page, live_server, login, shoot, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    call = Artifact.objects.get(artifact_id=scenario.INCIDENT_ARTIFACT_ID).produced_by.get()
    page.goto(f"{live_server.url}/traces/{call.pk}/")
    fits_and_is_accessible(page, width)
    assert page.locator("[data-field='model']").inner_text() == call.model
    assert page.locator("[data-field='latency']").inner_text() == f"{call.latency_ms:,} ms"
    assert page.locator("[data-field='output_tokens']").inner_text() == f"{call.output_tokens:,}"
    assert page.locator("[data-field='cost']").inner_text().startswith("$0.00")
    # Served: S3 (linked), then the tail after its watermark, each event linked.
    summary_link = page.locator("#served-summary a").first
    assert summary_link.inner_text() == f"S{call.summary.version}"
    seqs = page.locator("#served-tail-events tr[data-seq]").evaluate_all(
        "rows => rows.map(r => +r.dataset.seq)"
    )
    assert seqs == list(range(call.summary.covers_to_seq + 1, call.tail_to_seq + 1))
    assert page.locator("#served-messages li.message").count() == len(call.input_messages)
    # The output is the tool call that registered T57, shown as JSON once.
    output = page.locator("#trace-output pre[data-tool-json]")
    assert '"artifact_id": "T57"' in output.inner_text() and '\\"' not in output.inner_text()
    box = output.bounding_box()
    assert box["x"] + box["width"] <= width
    shoot(f"trace-content-{width}")
    summary_link.click()
    page.wait_for_url(f"**/summaries/{call.summary.summary_id}/")


@pytest.mark.parametrize("width", WIDTHS)
def test_a_framework_call_says_what_was_not_recorded(page, live_server, login, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    framework_call = ConsumerTrace.objects.filter(output__isnull=True).order_by("-at").first()
    page.goto(f"{live_server.url}/traces/{framework_call.pk}/")
    fits_and_is_accessible(page, width)
    assert page.locator("[data-field='output'] .not-recorded").count() == 1
    assert page.locator("[data-field='messages'] .not-recorded").count() == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_the_compactor_page_from_the_summary_page(page, live_server, login, shoot, demo_db, width):
    page.set_viewport_size({"width": width, "height": 900})
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    s3 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=3)
    page.goto(f"{live_server.url}/summaries/{s3.summary_id}/")
    page.locator("[data-field='compactor'] a").click()
    page.wait_for_selector("#compactor-summaries")
    fits_and_is_accessible(page, width)
    produced = Summary.objects.filter(
        tenant=s3.tenant, compactor_name=s3.compactor_name, compactor_version=s3.compactor_version
    )
    assert page.locator("[data-count='summaries']").inner_text().startswith(f"{produced.count()}:")
    assert (
        page.locator(f"#compactor-summaries tr[data-summary='{s3.summary_id}'] a").first.inner_text() == "S3"
    )
    shoot(f"compactor-{width}")
