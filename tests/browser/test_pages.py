"""Every dashboard page in a real browser on the demo plus a long-data fixture (a 110-character
workflow id, a 20,000-character unbroken token, long call ids): no page scrolls sideways at 390 or
1280 px, axe-core finds no serious or critical violation, and the keyboard reaches everything.
Also the trace page from T57, the nav search, "go to seq", phrase highlight and expand/collapse."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from axe_playwright_python.sync_playwright import Axe

from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.core.actors import Actor
from memoryhub.demo import other, scenario
from memoryhub.models import Artifact, ConsumerTrace, Summary, Workflow
from tests.factories import append

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AGENT = Actor.system("browser-test")
TOKEN = "x" * 8 + "".join(f"{i:05d}" for i in range(4000))  # 20,008 characters, no break opportunity
WIDTHS = (390, 1280)


@pytest.fixture
def long_demo(demo_db):
    """The demo (which already has a 110-character workflow id) plus a 20,000-character unbroken token
    in an event, a trace with a long call id, and an artifact produced by it."""
    wf = Workflow.objects.get(external_id=other.LONG_ID)
    assert len(wf.external_id) == 110
    append(
        wf,
        [
            {
                "kind": "tool_result",
                "content": TOKEN,
                "agent": "nightly-runner",
                "role": "tool",
                "tool_call_id": "call-nr-blob",
            }
        ],
    )
    append(
        wf,
        [
            {
                "kind": "message",
                "content": "after the blob: 401 Unauthorized seen again",
                "agent": "nightly-runner",
            }
        ],
    )
    long_call = "call-" + "nightly-regression-" * 8
    record_trace(
        wf,
        {
            "agent": "nightly-runner",
            "agent_run_id": "run-" + "n" * 150,
            "model_call_id": long_call,
            "summary_id": None,
            "tail_to_seq": wf.head_seq - 1,
            "checkpoint_id": "ckpt-" + "c" * 120,
        },
        AGENT,
    )
    record_artifact(
        wf,
        {
            "artifact_id": "NR-" + "9" * 120,
            "kind": "coverage-report",
            "produced_by": {"model_call_id": long_call},
        },
        AGENT,
    )
    return wf


def every_page(wf: Workflow) -> list[str]:
    s3 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=3)
    t57 = Artifact.objects.get(artifact_id="T57")
    t57_trace = t57.produced_by.first()
    long_trace = ConsumerTrace.objects.filter(workflow=wf).first()
    long_artifact = Artifact.objects.get(workflow=wf)
    seed = scenario.WORKFLOW_ID
    return [
        "/overview/",
        "/workflows/",
        f"/workflows/{seed}/",
        f"/workflows/{wf.external_id}/",
        f"/workflows/{wf.external_id}/?seq={wf.head_seq - 1}",
        f"/workflows/{seed}/timeline/?q=401",
        f"/workflows/{wf.external_id}/timeline/",
        f"/workflows/{seed}/events/1-40/",
        f"/workflows/{wf.external_id}/events/1-{wf.head_seq}/",
        f"/summaries/{s3.summary_id}/",
        f"/summaries/{s3.summary_id}/diff/",
        "/artifacts/",
        "/artifacts/T57/",
        f"/artifacts/{long_artifact.artifact_id}/",
        "/traces/",
        f"/traces/{t57_trace.pk}/",
        f"/traces/{long_trace.pk}/",
        "/compactors/",
        f"/compactors/{s3.compactor_name}/",
        f"/compactors/{s3.compactor_name}/?version={s3.compactor_version}",
        "/search/?q=call-&all=1",
        f"/search/?q=401&workflow={wf.external_id}&all=1",
        "/audit/",
        "/alerts/",
        "/triggers/simulator/",
        "/triggers/policy/",
        f"/triggers/workflows/{wf.external_id}/policy/",
        f"/triggers/workflows/{seed}/decisions/",
        "/retention/",
        "/no/such/page/",
        "/review/",
        "/settings/members/",
        "/settings/keys/",
        *later_pages(),
    ]


def later_pages() -> list[str]:
    """Pages of what the demo shows besides the seed: the summary awaiting approval and one
    workflow per integration (each as loaded, when the loader made it)."""
    pages = []
    awaiting = Summary.objects.filter(workflow__external_id="api-tests-43").order_by("-version").first()
    if awaiting is not None:
        pages += ["/workflows/api-tests-43/", f"/summaries/{awaiting.summary_id}/"]
    for wf in Workflow.objects.exclude(source__in=["api", "langgraph"]).order_by("source", "pk"):
        pages.append(f"/workflows/{wf.external_id}/")
        observed = Summary.objects.filter(workflow=wf).order_by("-version").first()
        if observed is not None:
            pages += [f"/summaries/{observed.summary_id}/", f"/compactors/{quote(observed.compactor_name)}/"]
        traced = ConsumerTrace.objects.filter(workflow=wf).order_by("-at").first()
        if traced is not None:  # a framework's call: what its integration did not record
            pages.append(f"/traces/{traced.pk}/")
    return pages


def settle(page) -> None:
    page.wait_for_load_state("networkidle")
    if page.locator("[data-figure]").count():
        page.wait_for_function(
            "[...document.querySelectorAll('[data-figure]')].every(e => e.dataset.drawn === '1'"
            " || e.querySelector('.chart-error'))",
            timeout=20_000,
        )


def overflow(page) -> dict:
    return page.evaluate(
        """() => {
          const wide = [...document.querySelectorAll('body *')].filter(e => {
            const r = e.getBoundingClientRect(); return r.right > window.innerWidth + 1 && r.width > 0;
          }).slice(0, 3).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right));
          return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth, wide};
        }"""
    )


def test_no_page_scrolls_sideways_at_390_or_1280(page, live_server, login, shoot, long_demo):
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    failures = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for path in every_page(long_demo):
            page.goto(f"{live_server.url}{path}")
            settle(page)
            got = overflow(page)
            if got["scroll"] > got["inner"]:
                failures.append((width, path, got))
        shoot(f"long-workflow-{width}")  # the last page: 404 at this width
    page.goto(f"{live_server.url}/workflows/{long_demo.external_id}/timeline/")
    shoot("long-timeline-390")
    page.goto(f"{live_server.url}/overview/")
    settle(page)
    shoot("overview-1280")
    assert failures == [], "\n".join(map(str, failures))


def test_long_workflow_id_does_not_squash_the_bars(page, live_server, login, shoot, long_demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{live_server.url}/overview/")
    settle(page)
    shoot("overview-long-id")
    for key in ("age_now", "tail_now"):
        chart = page.locator(f"#chart-{key}")
        if not chart.locator(".main-svg").count():
            continue
        ticks = chart.locator(".xtick text").all_text_contents()
        assert ticks and all(len(t) <= 18 for t in ticks), ticks
        # The plot area keeps most of the chart's height (long tick labels used to eat it).
        plot_h = chart.locator(".nsewdrag").first.bounding_box()["height"]
        assert plot_h > 0.45 * chart.bounding_box()["height"], (key, plot_h)


def test_axe_finds_no_serious_or_critical_violation(page, live_server, login, long_demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)  # the admin sees every control and page
    page.set_viewport_size({"width": 1280, "height": 900})
    axe = Axe()
    found = {}
    pages = every_page(long_demo)
    assert "/workflows/api-tests-43/" in pages and len(later_pages()) >= 8  # the review story, integrations
    for path in pages + ["/api/docs/"]:
        if path == "/api/docs/":
            continue  # Swagger UI is a third-party page; it is checked for loading offline elsewhere
        page.goto(f"{live_server.url}{path}")
        settle(page)
        result = axe.run(page)
        bad = [
            f"{v['id']} ({v['impact']}): {v['nodes'][0]['target']}"
            for v in result.response["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        if bad:
            found[path] = bad
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    login_bad = [
        v["id"] for v in axe.run(page).response["violations"] if v["impact"] in ("serious", "critical")
    ]
    assert login_bad == []
    assert found == {}, "\n".join(f"{p}: {v}" for p, v in found.items())


def test_keyboard_skip_link_focus_and_chart_tables(page, live_server, login, shoot, long_demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/overview/")
    settle(page)
    page.keyboard.press("Tab")
    focused = page.evaluate("() => [document.activeElement.className, document.activeElement.textContent]")
    assert focused == ["skip-link", "Skip to content"]
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    shoot("skip-link-focused")
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"
    # Mode-bar buttons are not tab stops; every drill-down chart has a keyboard-reachable table.
    assert page.evaluate(
        "() => [...document.querySelectorAll('.modebar a, .modebar button')].every(b => b.tabIndex === -1)"
    )
    charts = page.locator("[data-figure][data-drilldown]")
    for i in range(charts.count()):
        chart_id = charts.nth(i).get_attribute("id")
        table = page.locator(f"details.chart-data[data-for='{chart_id}']")
        if table.count():
            table.locator("summary").focus()
            page.keyboard.press("Enter")
            assert table.get_attribute("open") is not None
    links = page.locator("details.chart-data a")
    assert links.count() > 0
    href = links.first.get_attribute("href")
    links.first.focus()
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == f"{live_server.url}{href}"
    # Titles sit above the plot in HTML, never under the mode bar.
    page.goto(f"{live_server.url}/overview/")
    settle(page)
    chart = page.locator("[data-figure]").first
    chart.hover()
    bar = chart.locator(".modebar").bounding_box()
    title = page.locator(".chart-title").first.bounding_box()
    assert bar and title and bar["y"] >= title["y"] + title["height"] - 1, (bar, title)


def test_trace_page_from_t57_search_and_timeline(page, live_server, login, shoot, long_demo):
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    # Nav search: T57 → artifact page → its trace page.
    page.goto(f"{live_server.url}/overview/")
    page.fill("#nav-search-q", "T57")
    page.press("#nav-search-q", "Enter")
    page.wait_for_url(re.compile(r"/artifacts/T57/$"))
    page.click("a[data-hop='trace-page']")
    page.wait_for_url(re.compile(r"/traces/\d+/$"))
    for field in (
        "agent",
        "run",
        "model_call",
        "graph_release",
        "checkpoint",
        "summary",
        "watermark",
        "manifest",
        "input_tokens",
        "flags",
    ):
        assert page.locator(f"[data-field='{field}']").count() == 1, field
    assert page.locator("#trace-artifacts a", has_text="T57").count() == 1
    assert page.locator("[data-field='summary'] a").first.inner_text().startswith("S")
    bundle = page.locator("#replay-bundle")
    assert not bundle.locator("pre").is_visible()
    bundle.locator("summary").click()
    assert bundle.locator("pre").is_visible()
    assert '"model_call_id"' in bundle.locator("pre").inner_text()
    shoot("trace-page")
    # S3 within the workflow, from the workflow page's nav search (it carries the workflow).
    page.goto(f"{live_server.url}/workflows/{scenario.WORKFLOW_ID}/")
    page.fill("#nav-search-q", "S3")
    page.press("#nav-search-q", "Enter")
    page.wait_for_url(re.compile(r"/summaries/sum_"))
    # Go to seq 137: the row is scrolled into view and highlighted.
    page.goto(f"{live_server.url}/workflows/{scenario.WORKFLOW_ID}/")
    page.fill("#seq", "137")
    page.press("#seq", "Enter")
    page.wait_for_selector("#event-137.target")
    assert page.locator("#event-137").is_visible()
    # In view once the page has settled (charts above the table draw after the jump).
    page.wait_for_function(
        "() => { const r = document.getElementById('event-137').getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight; }",
        timeout=5000,
    )
    assert page.locator("tr.target").count() == 1
    shoot("goto-seq-137")
    # A text hit marks the phrase, not the row.
    page.goto(f"{live_server.url}/search/?q=401+Unauthorized&workflow={scenario.WORKFLOW_ID}&all=1")
    page.locator("#event-hits a").first.click()
    page.wait_for_selector("tr.target mark")
    mark = page.locator("tr.target mark").first
    assert mark.inner_text().lower() == "401 unauthorized"
    row_w = page.locator("tr.target td.content").bounding_box()["width"]
    assert mark.bounding_box()["width"] < row_w / 2
    shoot("search-hit")
    # Long content is clamped in place and expands / collapses with a button.
    page.goto(f"{live_server.url}/workflows/{long_demo.external_id}/timeline/")
    row_id = page.locator("tr:has([data-expandable].clamped)").first.get_attribute("id")
    box = page.locator(f"#{row_id} [data-expandable]")
    toggle = box.locator("button.expand-toggle")
    clamped_h = box.bounding_box()["height"]
    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "true"
    assert box.bounding_box()["height"] > clamped_h * 2
    toggle.click()
    assert box.bounding_box()["height"] == pytest.approx(clamped_h, abs=2)
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    assert page.js_errors == []


# The summary page of the seed's S3 (75 facts, a retention table, a sentence diff) was 9,799 px
# tall at 1280 and 27,839 at 390: long fact lists and added facts fold away, a narrow table
# scrolls inside itself instead of squeezing its columns to a letter, a row lists three lost
# items and folds the rest. The losses stay in view without a click.
SUMMARY_PAGE_MAX_HEIGHT = {1280: 6_000, 390: 10_500}


@pytest.mark.parametrize("width", WIDTHS)
def test_the_summary_page_is_a_page_not_a_scroll(page, live_server, login, demo_db, width):
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    s3 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=3)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/summaries/{s3.summary_id}/")
    settle(page)
    height = page.evaluate("document.documentElement.scrollHeight")
    assert height <= SUMMARY_PAGE_MAX_HEIGHT[width], height
    assert page.locator("#retention-table tr.failed").first.is_visible()  # what was lost, unfolded
    assert page.locator("#diff-facts").is_visible()
    assert not page.locator("#fact-table").is_visible()  # 75 facts: folded
    page.click("#facts-fold > summary")
    assert page.locator("#fact-table").is_visible()
    assert overflow(page)["scroll"] <= overflow(page)["inner"]
