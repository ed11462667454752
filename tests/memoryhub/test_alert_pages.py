"""Alert pages: list with state, create/edit through forms, test-send queued, mute, per-rule chart
of value vs thresholds, channel health with re-enable; admins write, viewers only read."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from html import unescape

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memoryhub.models import AlertRule, Channel
from memoryhub.models.alerts import RULE_RANGES, rule_max_length
from memoryhub.observe.alerting.deliver import SYSTEM_ACTOR, disable_channel
from memoryhub.observe.alerting.evaluate import evaluate_due_rules
from memoryhub.observe.alerting.services import update_rule
from tests.factories import (
    ADMIN,
    activated,
    alert_channel,
    alert_rule,
    build_workflow,
    only_rule,
    stale_activation,
)
from tests.helpers import T0, form_post, frozen

pytestmark = pytest.mark.django_db


def rule_form(**overrides):
    data = {
        "name": "Tail pressure",
        "metric": "tail_tokens",
        "aggregation": "max",
        "comparator": "gt",
        "warning_threshold": "8000",
        "critical_threshold": "16000",
        "window_minutes": "15",
        "interval_seconds": "60",
        "workflow_filter": "",
        "enabled": "on",
    }
    data.update(overrides)
    return data


@pytest.fixture
def hook(tenant):
    return alert_channel(tenant, name="ops", url="https://hooks.example.com/x", secret="k")


def test_index_lists_rules_with_state_channels_and_flips(alice, tenant, hook):
    summary = activated(build_workflow(tenant, "wf", n=10))
    with frozen(T0):
        rule = only_rule(tenant, hook, name="Stale!")
        stale_activation(summary)
        evaluate_due_rules()
    html = alice.web.get("/alerts/").content.decode()
    row = re.search(rf'<tr data-rule-id="{rule.pk}">.*?</tr>', html, re.S).group(0)
    assert 'data-state="critical"' in row and "ops" in row
    assert "Missing provenance" in html  # default rules are listed too
    assert 'id="flips-table"' in html and "Stale!" in html
    assert 'data-health="ok"' in html
    assert "New rule" in html and "Re-enable" not in html


def test_viewer_reads_but_cannot_change(carol, tenant, hook):
    rule = AlertRule.objects.filter(tenant=tenant).first()
    html = carol.web.get("/alerts/").content.decode()
    assert "New rule" not in html and ">Test<" not in html
    assert carol.web.get(f"/alerts/rules/{rule.pk}/").status_code == 200
    assert carol.web.get("/alerts/rules/new/").status_code == 403
    assert form_post(carol.web, "/alerts/rules/new/", rule_form()).status_code == 403
    assert form_post(carol.web, f"/alerts/rules/{rule.pk}/mute/", {"minutes": "60"}).status_code == 403
    assert form_post(carol.web, f"/alerts/channels/{hook.pk}/test/").status_code == 403
    assert form_post(carol.web, f"/alerts/channels/{hook.pk}/enable/").status_code == 403
    assert not AlertRule.objects.filter(name="Tail pressure").exists()


def test_reviewer_cannot_change_either(bob, tenant):
    assert form_post(bob.web, "/alerts/rules/new/", rule_form()).status_code == 403


def test_admin_creates_and_edits_a_rule(alice, tenant, hook):
    response = form_post(alice.web, "/alerts/rules/new/", rule_form(channels=[str(hook.pk)]))
    assert response.status_code == 302
    rule = AlertRule.objects.get(tenant=tenant, name="Tail pressure")
    assert response["Location"] == f"/alerts/rules/{rule.pk}/"
    assert (rule.aggregation, rule.warning_threshold, list(rule.channels.all())) == ("max", 8000, [hook])

    form = alice.web.get(f"/alerts/rules/{rule.pk}/edit/").content.decode()
    assert 'value="Tail pressure"' in form
    response = form_post(
        alice.web, f"/alerts/rules/{rule.pk}/edit/", rule_form(critical_threshold="20000", enabled="")
    )
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.critical_threshold == 20000 and rule.enabled is False and rule.channels.count() == 0


def test_form_shows_service_validation_errors(alice, tenant):
    response = form_post(alice.web, "/alerts/rules/new/", rule_form(warning_threshold="50000"))
    assert response.status_code == 200
    assert "must be at or above the warning threshold" in unescape(response.content.decode())
    response = form_post(
        alice.web, "/alerts/rules/new/", rule_form(metric="stale_activation_attempts", aggregation="max")
    )
    assert "does not apply to counter metric" in unescape(response.content.decode())
    assert not AlertRule.objects.filter(name="Tail pressure").exists()


def rule_body(**overrides):
    """``rule_form`` as a JSON body for the API."""
    numbers = ("warning_threshold", "critical_threshold", "window_minutes", "interval_seconds")
    body = {
        k: float(v) if k in numbers[:2] else int(v) if k in numbers else v for k, v in rule_form().items()
    }
    return {**body, "enabled": True, **overrides}


def _limit_cases(outside: bool) -> list[tuple[str, object]]:
    """Each rule limit's first value outside it (or its last value inside), from the one definition."""
    step = 1 if outside else 0
    cases: list[tuple[str, object]] = []
    for field, (low, high) in RULE_RANGES.items():
        cases += [(field, low - step), (field, high + step)]
    cases += [(field, "x" * (rule_max_length(field) + step)) for field in ("name", "workflow_filter")]
    return cases


@pytest.mark.parametrize(("field", "value"), _limit_cases(outside=True))
def test_the_form_and_the_api_refuse_the_same_out_of_range_values(alice, tenant, field, value):
    page = form_post(alice.web, "/alerts/rules/new/", rule_form(**{field: str(value)}))
    assert page.status_code == 200 and 'class="errorlist' in page.content.decode()
    api = alice.api.post("/api/v1/alert-rules/", rule_body(**{field: value}), format="json")
    assert api.status_code == 400 and api.json()["field"] == field, api.json()
    assert not AlertRule.objects.filter(tenant=tenant, is_default=False).exists()


@pytest.mark.parametrize(("field", "value"), _limit_cases(outside=False))
def test_the_form_and_the_api_accept_the_same_edge_values(alice, tenant, field, value):
    assert form_post(alice.web, "/alerts/rules/new/", rule_form(**{field: str(value)})).status_code == 302
    api = alice.api.post("/api/v1/alert-rules/", rule_body(**{field: value}), format="json")
    assert api.status_code == 201, api.json()
    assert AlertRule.objects.filter(tenant=tenant, is_default=False, **{field: value}).count() == 2


def test_rule_page_charts_value_against_thresholds(alice, tenant):
    with frozen(T0):
        rule = only_rule(tenant, name="stale", warning_threshold=0, critical_threshold=2)
    summary = activated(build_workflow(tenant, "wf", n=10))
    for minute, n in ((0, 0), (1, 1), (2, 2)):
        with frozen(T0 + timedelta(minutes=minute)):
            for _ in range(n):
                stale_activation(summary)
            evaluate_due_rules()
    with frozen(T0 + timedelta(minutes=3)):
        html = alice.web.get(f"/alerts/rules/{rule.pk}/").content.decode()
    figure = json.loads(unescape(re.search(r'id="rule-history-chart" data-figure="([^"]*)"', html).group(1)))
    value, warning, critical = figure["data"]
    assert value["y"] == [0, 1, 3]
    assert warning["y"] == [0, 0, 0] and critical["y"] == [2, 2, 2]
    assert warning["line"]["shape"] == "hv"
    assert "plotly/plotly.min.js" in html
    assert html.count('data-state="critical"') >= 2  # header and flip table


def test_test_send_and_mute_from_the_pages(alice, tenant, hook, django_capture_on_commit_callbacks):
    rule = update_rule(AlertRule.objects.filter(tenant=tenant).first(), {"channels": [hook.pk]}, ADMIN)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert form_post(alice.web, f"/alerts/rules/{rule.pk}/test/").status_code == 302
        assert form_post(alice.web, f"/alerts/channels/{hook.pk}/test/").status_code == 302
    assert len(callbacks) == 2  # queued for the worker, nothing sent here
    assert form_post(alice.web, f"/alerts/rules/{rule.pk}/mute/", {"minutes": "60"}).status_code == 302
    rule.refresh_from_db()
    assert rule.muted_until is not None
    html = alice.web.get("/alerts/").content.decode()
    assert "muted" in html and "Unmute" in html
    form_post(alice.web, f"/alerts/rules/{rule.pk}/mute/", {"minutes": "0", "back": "index"})
    rule.refresh_from_db()
    assert rule.muted_until is None
    assert (
        form_post(alice.web, f"/alerts/rules/{rule.pk}/mute/", {"minutes": "7"}).status_code == 302
    )  # not a choice
    rule.refresh_from_db()
    assert rule.muted_until is None


def test_disabled_channel_shows_its_reason_and_can_be_re_enabled(alice, tenant, hook):
    disable_channel(hook, "permanent delivery error: HTTP 410", SYSTEM_ACTOR)
    html = alice.web.get("/alerts/").content.decode()
    assert 'data-health="disabled"' in html and "HTTP 410" in html and "Re-enable" in html
    assert form_post(alice.web, f"/alerts/channels/{hook.pk}/enable/").status_code == 302
    hook.refresh_from_db()
    assert hook.disabled_at is None
    assert 'data-health="ok"' in alice.web.get("/alerts/").content.decode()


def test_admin_creates_and_edits_channels_without_seeing_the_secret(alice, tenant):
    response = form_post(
        alice.web,
        "/alerts/channels/new/",
        {
            "kind": "webhook",
            "name": "hook",
            "url": "https://h.example.com/",
            "secret": "sssh",
            "timeout_seconds": "5",
        },
    )
    assert response.status_code == 302
    channel = Channel.objects.get(tenant=tenant, name="hook")
    assert channel.secret == "sssh"
    page = alice.web.get(f"/alerts/channels/{channel.pk}/").content.decode()
    assert "sssh" not in page and "Signing secret: set" in page
    form_post(
        alice.web,
        f"/alerts/channels/{channel.pk}/",
        {"name": "hook2", "url": "https://h.example.com/2", "secret": "", "timeout_seconds": "3"},
    )
    channel.refresh_from_db()
    assert (channel.name, channel.secret, channel.timeout_seconds) == ("hook2", "sssh", 3.0)  # blank keeps it
    response = form_post(
        alice.web,
        "/alerts/channels/new/",
        {"kind": "email", "name": "mail", "email": "nope", "timeout_seconds": "5"},
    )
    assert response.status_code == 200 and "valid email" in response.content.decode()


def test_other_tenants_rules_are_404(mallory, tenant):
    rule = AlertRule.objects.filter(tenant=tenant).first()
    assert mallory.web.get(f"/alerts/rules/{rule.pk}/").status_code == 404
    assert form_post(mallory.web, f"/alerts/rules/{rule.pk}/mute/", {"minutes": "60"}).status_code == 404


def test_index_query_count_does_not_grow_with_rules(alice, tenant, hook):
    alice.web.get("/alerts/")  # the first request also creates the session
    with CaptureQueriesContext(connection) as few:
        alice.web.get("/alerts/")
    for i in range(15):
        alert_rule(tenant, hook, name=f"r{i}", metric="tail_tokens", critical_threshold=1)
    with CaptureQueriesContext(connection) as many:
        alice.web.get("/alerts/")
    assert len(many.captured_queries) == len(few.captured_queries)
