"""In a real browser, on the demo: a chart keeps the user's zoom across the periodic refresh, the
simulator shares a run as a URL and saves its candidate as a policy (with the diff shown first),
and /api/docs/ renders with every request outside this server blocked."""

from __future__ import annotations

import re

import pytest
from django.db import connections

from memoryhub.demo import scenario
from memoryhub.models import Workflow
from triggers import policy

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(demo_db):
    yield
    connections.close_all()  # ORM calls made inside Playwright's loop hold their own connection


def drawn(page) -> None:
    page.wait_for_function(
        "[...document.querySelectorAll('[data-figure]')].every(e => e.dataset.drawn === '1' && !e.dataset.pending)",
        timeout=20_000,
    )


def force_refresh(page) -> None:
    """The charts fragment's refresh now (what the timer does), waited for until it lands."""
    page.evaluate(
        """() => new Promise(done => {
            const wrap = document.querySelector('[data-refresh-url] #chart-compaction').closest('[data-refresh-url]');
            const seen = new MutationObserver(() => {
              if (!wrap.classList.contains('refreshing')) { seen.disconnect(); done(); }
            });
            seen.observe(wrap, {attributes: true, attributeFilter: ['class']});
            document.dispatchEvent(new Event('visibilitychange'));
        })"""
    )


def test_chart_zoom_survives_the_periodic_refresh(page, live_server, login, shoot, demo):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/overview/")
    drawn(page)
    chart = page.locator("#chart-compaction")
    chart.scroll_into_view_if_needed()
    page.evaluate("document.getElementById('chart-compaction').__kept = true")
    before = page.evaluate("document.getElementById('chart-compaction').layout.xaxis.range.slice()")
    # Drag a zoom box across the middle of the plot, as a user would.
    drag = chart.locator(".nsewdrag").first.bounding_box()
    y = drag["y"] + drag["height"] / 2
    page.mouse.move(drag["x"] + drag["width"] * 0.3, y)
    page.mouse.down()
    page.mouse.move(drag["x"] + drag["width"] * 0.6, y + 5, steps=8)
    page.mouse.up()
    zoomed = page.evaluate("document.getElementById('chart-compaction').layout.xaxis.range.slice()")
    assert zoomed != before
    force_refresh(page)
    drawn(page)
    after = page.evaluate(
        "() => { const el = document.getElementById('chart-compaction');"
        " return {kept: el.__kept === true, range: el.layout.xaxis.range.slice(), rev: el.layout.uirevision}; }"
    )
    assert after["kept"], "the refresh replaced the chart element instead of updating it"
    assert after["rev"] == "chart-compaction"
    assert after["range"] == zoomed
    shoot("overview-zoom-kept")
    # A double-click resets the zoom: the next refresh shows the window again, not the old zoom.
    chart.locator(".nsewdrag").first.dblclick(position={"x": drag["width"] * 0.5, "y": drag["height"] * 0.5})
    force_refresh(page)
    drawn(page)
    reset = page.evaluate(
        "() => { const el = document.getElementById('chart-compaction');"
        " return {range: el.layout.xaxis.range.slice(), window: JSON.parse(el.dataset.figure).layout.xaxis.range}; }"
    )
    assert reset["range"] == reset["window"] != zoomed
    assert page.js_errors == []


def test_simulator_shares_a_run_and_saves_it_as_policy(page, live_server, login, shoot, demo):
    workflow = Workflow.objects.get(external_id=scenario.WORKFLOW_ID)
    login(scenario.REVIEWER_USERNAME, scenario.REVIEWER_PASSWORD)
    page.goto(f"{live_server.url}/triggers/simulator/?workflow={scenario.WORKFLOW_ID}")
    page.wait_for_selector("[data-testid=simulation-chart][data-drawn='1']")
    page.fill("input[name=target_tokens]", "9000")
    page.fill("input[name=min_new_tokens]", "1500")
    page.click("[data-testid=candidate-form] button[type=submit]")
    page.wait_for_selector("#policy-diff")
    changed = page.locator("#policy-diff tr[data-field]").evaluate_all(
        "rows => rows.map(r => r.dataset.field)"
    )
    assert set(changed) == {"target_tokens", "min_new_tokens"}
    counts = page.locator("[data-testid=simulation-counts] tbody").inner_text()
    shoot("simulator-save")
    # The shareable URL reproduces the same run in a fresh page.
    url = page.input_value("#sim-share-url")
    assert url.startswith(live_server.url) and "run=1" in url
    other = page.context.new_page()
    other.goto(url)
    other.wait_for_selector("[data-testid=simulation-chart][data-drawn='1']")
    assert other.locator("[data-testid=simulation-counts] tbody").inner_text() == counts
    assert other.input_value("input[name=target_tokens]") == "9000"
    other.close()
    # Save as this workflow's override (a reviewer may; the tenant default is not offered).
    assert page.locator("#save-policy-form input[name=scope][value=tenant]").count() == 0
    page.click("#save-policy-form button[type=submit]")
    page.wait_for_url(re.compile(rf"/triggers/workflows/{scenario.WORKFLOW_ID}/policy/$"))
    assert "Saved the simulated candidate" in page.locator(".messages").inner_text()
    spec, source, _ = policy.effective_policy(workflow.tenant, workflow)
    assert (source, spec.target_tokens, spec.min_new_tokens) == ("workflow", 9000, 1500)
    assert page.js_errors == []


def test_api_docs_render_with_no_network(page, live_server, login, shoot, demo):
    blocked: list[str] = []

    def only_local(route):
        if route.request.url.startswith(live_server.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_local)
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/api/docs/")
    page.wait_for_selector(".swagger-ui .info .title", timeout=20_000)
    assert "MemoryHub API" in page.locator(".swagger-ui .info .title").inner_text()
    assert page.locator(".opblock").count() > 20  # the operations rendered, not a blank page
    shoot("api-docs-offline")
    assert blocked == []
