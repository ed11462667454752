"""The demo looks like a real day in the browser: no page the nav reaches (nor any demo workflow's
page) says "from now", and no bar on the overview, in any window, is negative (a future-dated row
read "23 hours from now" and drew a negative "oldest active summary" bar)."""

from __future__ import annotations

import pytest
from django.db import connections

from memoryhub.demo import scenario
from memoryhub.models import Workflow
from memoryhub.observe.reports import WINDOWS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every numeric value of every bar trace (vertical or horizontal), per chart.
BAR_VALUES = """els => els.map(el => ({
    id: el.id,
    values: el.data.filter(t => t.type === 'bar')
        .flatMap(t => [...(t.x || []), ...(t.y || [])])
        .filter(v => typeof v === 'number'),
}))"""


@pytest.fixture(autouse=True)
def _close_connections():
    yield
    connections.close_all()  # ORM calls made inside Playwright's loop hold their own connection


def _drawn(page) -> None:
    page.wait_for_function(
        "[...document.querySelectorAll('[data-figure]')].every(el => el.dataset.drawn === '1')"
    )


def test_no_demo_page_says_from_now(page, live_server, login, demo_db):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    page.goto(f"{live_server.url}/overview/")
    nav = page.eval_on_selector_all("a[data-nav]", "els => els.map(a => a.getAttribute('href'))")
    assert "/workflows/" in nav and "/traces/" in nav and "/alerts/" in nav, nav
    acme = Workflow.objects.filter(tenant__slug=scenario.TENANT_SLUG)
    workflows = [f"/workflows/{w}/" for w in acme.values_list("external_id", flat=True)]
    assert any("lc-payments-logs" in p for p in workflows)  # the pages that read "23 hours from now"
    said = {}
    for path in [*dict.fromkeys(nav), *workflows]:
        answer = page.goto(f"{live_server.url}{path}")
        assert answer is not None and answer.status == 200, path
        text = page.inner_text("body")
        if "from now" in text.lower():
            at = text.lower().index("from now")
            said[path] = text[max(0, at - 60) : at + 8]
    assert said == {}
    assert page.js_errors == []


def test_every_overview_bar_is_at_least_zero(page, live_server, login, demo_db):
    login(scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD)
    seen = 0
    for key in WINDOWS:
        page.goto(f"{live_server.url}/overview/?window={key}")
        _drawn(page)
        charts = page.eval_on_selector_all("[data-figure]", BAR_VALUES)
        negative = {c["id"]: [v for v in c["values"] if v < 0] for c in charts}
        assert {k: v for k, v in negative.items() if v} == {}, key
        seen += sum(len(c["values"]) for c in charts)
    ages = page.eval_on_selector_all("#chart-age_now", BAR_VALUES)
    assert ages and ages[0]["values"] and min(ages[0]["values"]) >= 0  # the chart that went negative
    assert seen > 0 and page.js_errors == []
