"""The alert pages in a real browser: Plotly draws the rule's history (value + both thresholds)
and an admin mutes the rule from the list."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from memoryhub.models import AlertEvaluation, AlertRule
from memoryhub.observe.alerting.evaluate import evaluate_rule
from tests.conftest import PASSWORD
from tests.factories import activated, add_tokens, content_for, make_workflow

CHROMIUM = "/usr/bin/chromium"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} not installed (.ci/run installs it)"),
]


@pytest.fixture
def page(live_server, transactional_db, monkeypatch):
    """A Chromium page. Requested after the database so the database outlives the browser."""
    # Playwright's sync API runs an event loop in this thread; our ORM use here is synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.js_errors = errors  # type: ignore[attr-defined]
        yield page
        browser.close()
        # While Playwright's loop runs, the ORM uses a context-local connection: close it here, or
        # it stays open and the test database cannot be dropped at the end of the run.
        connections.close_all()


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def test_rule_history_chart_is_drawn_and_a_rule_is_muted(page, live_server, alice, tenant):
    rule = AlertRule.objects.get(tenant=tenant, metric="tail_budget_fraction")
    wf = make_workflow(tenant, "wf")
    now = timezone.now()
    # Tail over the 18,000-token budget: 0.2 (ok), 0.85 (warning), 1.3 (critical), then compacted.
    for minutes_ago, tokens in ((4, 3_600), (3, 11_700), (2, 8_100)):
        add_tokens(wf, tokens)
        evaluate_rule(rule, now - timedelta(minutes=minutes_ago))
    add_tokens(wf, 9_000)
    activated(wf, 1, 3, content=content_for(1, 3, narrative="Filler."))
    evaluate_rule(rule, now - timedelta(minutes=1))
    samples = AlertEvaluation.objects.filter(rule=rule).order_by("at").values_list("sample", "state")
    assert list(samples) == [(0.2, "ok"), (0.85, "warning"), (1.3, "critical"), (0.5, "critical")]
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/alerts/rules/{rule.pk}/")
    page.wait_for_selector("#rule-history-chart.js-plotly-plot", timeout=15_000)
    traces = page.evaluate("document.getElementById('rule-history-chart').data.map(t => t.name)")
    assert len(traces) == 3 and traces[1:] == ["warning threshold", "critical threshold"]
    assert page.locator("#rule-history-chart .scatterlayer .trace").count() == 3
    assert page.js_errors == []  # type: ignore[attr-defined]

    page.goto(f"{live_server.url}/alerts/")
    row = page.locator(f'tr[data-rule-id="{rule.pk}"]')
    row.locator("select[name=minutes]").select_option("60")
    row.locator("button", has_text="Mute").click()
    # Let every request finish, so no live-server thread still holds a connection at teardown.
    page.wait_for_load_state("networkidle")
    assert page.locator(f'tr[data-rule-id="{rule.pk}"] .state-muted').is_visible()
    rule.refresh_from_db()
    assert rule.muted_until is not None and rule.muted_until > timezone.now() + timedelta(minutes=55)
