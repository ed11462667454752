"""Trigger pages: policy form (tenant default + workflow override), decision log, simulator."""

from __future__ import annotations

import json
import re
from unittest.mock import ANY

import plotly.graph_objects as go
import pytest

from audit.models import AuditEntry
from memoryhub.core.actors import Actor
from tests.factories import append, event, make_workflow
from tests.helpers import form_post
from triggers import services, simulator
from triggers.engine import STRATEGY_NAMES, STRATEGY_SCHEMA, PolicySpec
from triggers.forms import PolicyForm, field_name
from triggers.models import ContextPolicy

pytestmark = pytest.mark.django_db


def form_data(spec: PolicySpec | None = None, **changes) -> dict[str, str]:
    """What a browser posts for ``spec`` (checkboxes only when checked)."""
    initial = PolicyForm.initial_from(spec or PolicySpec())
    initial.update(changes)
    data = {}
    for key, value in initial.items():
        if isinstance(value, bool):
            if value:
                data[key] = "on"
        elif value is not None:
            data[key] = str(value)
    return data


@pytest.fixture
def wf(tenant):
    return make_workflow(tenant, "wf-page")


def test_workflow_policy_page_shows_seed_budget_and_exports(carol, wf):
    r = carol.web.get("/triggers/workflows/wf-page/policy/")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'data-testid="safe-budget">18000<' in html
    assert "32000 − 4000 − 5000 − 3000 − 2000" in html
    assert "max_tokens_before_summary=18000" in html
    assert "trigger=(&#x27;tokens&#x27;, 18000)" in html
    assert "Read only: changing this policy needs the reviewer role." in html
    assert 'data-strategy="cost_benefit"' in html


def test_form_saves_workflow_override(bob, wf, tenant):
    data = form_data(context_window=64_000, target_tokens=20_000)
    data[field_name("message_count", "enabled")] = "on"
    data[field_name("message_count", "messages")] = "40"
    r = form_post(bob.web, "/triggers/workflows/wf-page/policy/", data)
    assert r.status_code == 302
    row = ContextPolicy.objects.get(workflow=wf)
    assert (row.context_window, row.target_tokens) == (64_000, 20_000)
    assert row.strategies["message_count"] == {"enabled": True, "messages": 40}
    assert row.strategies["cost_benefit"]["enabled"] is False
    assert row.updated_by == "user:bob"
    assert AuditEntry.objects.filter(tenant=tenant, action="policy.update").exists()
    page = bob.web.get("/triggers/workflows/wf-page/policy/").content.decode()
    assert 'data-testid="policy-source">workflow<' in page


def test_form_shows_validation_errors_next_to_fields(bob, wf):
    data = form_data(target_tokens=18_000)
    data[field_name("window_fraction", "fraction")] = "1.5"
    r = form_post(bob.web, "/triggers/workflows/wf-page/policy/", data)
    assert r.status_code == 200
    html = r.content.decode()
    assert "must be below the trigger budget (18,000)" in html
    assert "must be at most 1" in html
    assert not ContextPolicy.objects.exists()


def test_form_refuses_reserves_at_window(bob, wf):
    r = form_post(bob.web, "/triggers/workflows/wf-page/policy/", form_data(context_window=14_000))
    assert r.status_code == 200
    assert "no room is left for history" in r.content.decode()
    assert not ContextPolicy.objects.exists()


def test_viewer_cannot_post_and_admin_only_for_tenant_default(carol, bob, alice, wf):
    r = form_post(carol.web, "/triggers/workflows/wf-page/policy/", form_data())
    assert r.status_code == 403
    assert form_post(bob.web, "/triggers/policy/", form_data()).status_code == 403
    r = form_post(alice.web, "/triggers/policy/", form_data(context_window=40_000))
    assert r.status_code == 302
    assert ContextPolicy.objects.get(workflow__isnull=True).context_window == 40_000
    assert not ContextPolicy.objects.filter(workflow__isnull=False).exists()


def test_reset_removes_the_override(bob, wf, tenant):
    services.save_policy(tenant, {"context_window": 64_000}, Actor.user("bob"), workflow=wf)
    r = form_post(bob.web, "/triggers/workflows/wf-page/policy/", {"action": "reset"})
    assert r.status_code == 302
    assert not ContextPolicy.objects.filter(workflow=wf).exists()


def test_outsider_gets_404(mallory, wf):
    assert mallory.web.get("/triggers/workflows/wf-page/policy/").status_code == 404
    assert mallory.web.get("/triggers/workflows/wf-page/decisions/").status_code == 404
    assert mallory.web.get("/triggers/simulator/?workflow=wf-page").status_code == 404


def test_decision_log_page(alice, carol, wf):
    alice.api.post("/api/v1/workflows/wf-page/trigger/", {"expected_next_step_tokens": 5}, format="json")
    r = carol.web.get("/triggers/workflows/wf-page/decisions/")
    assert r.status_code == 200
    html = r.content.decode()
    assert "action-continue" in html
    assert "stays within the safe budget 18,000" in html
    assert (
        "No decisions logged yet" not in carol.web.get("/triggers/workflows/wf-page/policy/").content.decode()
    )
    filtered = carol.web.get("/triggers/workflows/wf-page/decisions/?action=compact").content.decode()
    assert "No decisions logged yet" in filtered


def _figure(html: str) -> dict:
    match = re.search(r'data-figure="([^"]*)"', html)
    assert match, "chart present"
    import html as html_lib

    return json.loads(html_lib.unescape(match.group(1)))


def test_simulator_page_replays_current_vs_candidate(carol, wf):
    agents = ["requirements"] * 4 + ["tests"] * 4 + ["reviewer"] * 4
    append(wf, [event(i, agent=a, content="token " * 900) for i, a in enumerate(agents, start=1)])
    r = carol.web.get("/triggers/simulator/?workflow=wf-page&group=event")
    assert r.status_code == 200
    html = r.content.decode()
    fig = _figure(html)
    go.Figure(fig)  # a valid Plotly figure
    names = [t["name"] for t in fig["data"]]
    assert "current: context per call" in names and "candidate: context per call" in names
    assert any(n.startswith("candidate safe budget 18,000") for n in names)
    assert "/static/plotly/plotly.min.js" in html
    assert 'data-count="compactions"' in html

    # A viewer may simulate (nothing is written): a tight candidate compacts more.
    data = form_data(context_window=16_000, reserve_retrieval=1_000, target_tokens=2_000)
    data |= {"workflow": "wf-page", "group": "event"}
    r = form_post(carol.web, "/triggers/simulator/?workflow=wf-page", data)
    assert r.status_code == 200
    html = r.content.decode()
    fig = _figure(html)
    go.Figure(fig)
    compactions = {t["name"].split(":")[0]: t for t in fig["data"] if "compactions" in t["name"]}
    assert len(compactions["candidate"]["x"]) > len(compactions["current"]["x"])
    assert not ContextPolicy.objects.exists()


def test_simulator_says_when_a_threshold_changes_nothing_because_its_strategy_is_off(carol, wf):
    from triggers.forms import field_name

    agents = ["requirements"] * 4 + ["tests"] * 4
    append(wf, [event(i, agent=a, content="token " * 900) for i, a in enumerate(agents, start=1)])
    base = form_data() | {"workflow": "wf-page", "group": "event"}
    # The absolute threshold lowered to 12,000 while the strategy stays off (its default): nothing
    # changes, and the page says why instead of ignoring it.
    off = base | {field_name("absolute_tokens", "tokens"): "12000"}
    html = form_post(carol.web, "/triggers/simulator/?workflow=wf-page", off).content.decode()
    assert 'id="inert-thresholds"' in html
    assert 'data-field="strategies.absolute_tokens.tokens"' in html and "is 12,000 (default 16,000)" in html
    trigger = [t["name"] for t in _figure(html)["data"] if t["name"].startswith("candidate trigger")]
    assert trigger == ["candidate trigger 18,000"]  # the line says what decides: the safe budget
    # Enabled, the same threshold moves the trigger line, and the note is gone.
    on = off | {field_name("absolute_tokens", "enabled"): "on"}
    html = form_post(carol.web, "/triggers/simulator/?workflow=wf-page", on).content.decode()
    assert 'id="inert-thresholds"' not in html
    trigger = [t["name"] for t in _figure(html)["data"] if t["name"].startswith("candidate trigger")]
    assert trigger == ["candidate trigger 12,000"]
    # The API answers the same notes.
    assert services.simulate_workflow(
        wf, {"candidate": {"strategies": {"absolute_tokens": {"tokens": 5000}}}}
    )["candidate_notes"] == [{"field": "strategies.absolute_tokens.tokens", "note": ANY}]


def test_simulator_invalid_candidate_shows_errors(carol, wf):
    append(wf, [event(1)])
    data = form_data(target_tokens=30_000) | {"workflow": "wf-page"}
    r = form_post(carol.web, "/triggers/simulator/?workflow=wf-page", data)
    assert r.status_code == 200
    html = r.content.decode()
    assert "must be below the trigger budget" in html
    assert "data-figure" not in html


def test_simulator_without_workflows(carol):
    r = carol.web.get("/triggers/simulator/")
    assert r.status_code == 200
    assert "No workflows yet" in r.content.decode()


def test_form_round_trips_every_strategy_threshold():
    spec = PolicySpec()
    form = PolicyForm(data=form_data(spec))
    assert form.is_valid(), form.errors
    policy = form.to_policy()
    assert PolicySpec.from_dict(policy).to_dict() == spec.to_dict()
    for name in STRATEGY_NAMES:
        assert set(policy["strategies"][name]) == {"enabled", *STRATEGY_SCHEMA[name]}


def test_simulator_refuses_an_unreadable_or_out_of_range_ratio_without_simulating(carol, wf):
    append(wf, [event(1)])
    for ratio, message in (
        ("half", "compaction ratio must be a number between 0 and 1"),
        ("1.5", "between 0 and 1"),
    ):
        data = form_data() | {"workflow": "wf-page", "compaction_ratio": ratio}
        html = form_post(carol.web, "/triggers/simulator/?workflow=wf-page", data).content.decode()
        assert message in html and "data-figure" not in html


def test_simulator_run_compacts_to_the_ratio_and_lists_what_the_candidate_changes(wf):
    append(wf, [event(i, content="token " * 900) for i in range(1, 9)])
    current = PolicySpec()
    run = simulator.run(wf, current, group="event", candidate={"target_tokens": 6_000}, ratio=" 0.25 ")
    assert run.errors == [] and run.result is not None
    assert run.diff == [{"field": "target_tokens", "current": 8_000, "candidate": 6_000}]
    assert [row["key"] for row in run.count_rows] == [key for key, _ in simulator.COUNT_LABELS]
    assert json.loads(run.figure_json)["data"]
    refused = simulator.run(wf, current, group="event", ratio="x", refused=True)
    assert refused.result is None and [e.detail for e in refused.errors] == [
        "compaction ratio must be a number between 0 and 1"
    ]
