"""The simulator in a real browser: Plotly (served from the installed package) draws the chart,
and editing the candidate policy redraws it with more compactions."""

from __future__ import annotations

import os

import pytest
from django.db import connections

from tests.conftest import PASSWORD
from tests.factories import append, event, make_workflow

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture
def page(live_server, monkeypatch):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the ORM work is done before it starts.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser.new_page()
        # ORM calls made while Playwright's loop runs get their own connection (asgiref's
        # context-local); close it here, or PostgreSQL refuses to drop the test database.
        connections.close_all()
        browser.close()


def test_simulator_draws_and_redraws_the_chart(live_server, page, carol):
    wf = make_workflow(carol.tenant, "wf-browser")
    agents = ["requirements"] * 5 + ["tests"] * 5 + ["reviewer"] * 5
    append(wf, [event(i, agent=a, content="token " * 700) for i, a in enumerate(agents, start=1)])

    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", "carol")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/triggers/simulator/?workflow=wf-browser&group=event")

    chart = page.locator("[data-testid=simulation-chart]")
    chart.locator(".main-svg").first.wait_for(timeout=20_000)
    legend = chart.locator(".legend").text_content()
    assert "candidate: context per call" in legend
    assert "candidate safe budget 18,000" in legend
    assert page.locator("tr[data-count=compactions] td").nth(2).inner_text() == "0"

    # A tight candidate: a small window and target. The redrawn chart shows its compactions.
    page.fill("input[name=context_window]", "16000")
    page.fill("input[name=reserve_retrieval]", "1000")
    page.fill("input[name=target_tokens]", "2000")
    page.click("[data-testid=candidate-form] button[type=submit]")
    chart = page.locator("[data-testid=simulation-chart]")
    chart.locator(".main-svg").first.wait_for(timeout=20_000)
    candidate = int(page.locator("tr[data-count=compactions] td").nth(2).inner_text())
    assert candidate > 0
    assert f"candidate: compactions ({candidate})" in chart.locator(".legend").text_content()
