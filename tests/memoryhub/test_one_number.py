"""One number, one definition, everywhere (issue #31, item 2).

On the demo, every figure a page shows that another page (or an alert) shows too is parsed out
of the rendered HTML and compared with ``metrics.compute`` over the window the page states: the
overview's counts and acceptance rate, the per-source table (its sum is the compactions count),
the firing alerts' values (each over its rule's window), the workflow list's drill-downs (the
workflows behind an overview count) and its all-time columns. Time is frozen while a page renders
and is compared, so "the last hour" means the same hour on both sides.
"""

from __future__ import annotations

import html
import re
from datetime import datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from memoryhub.demo import scenario
from memoryhub.models import AlertRule, CompactionJob, JobStatus, Tenant, Workflow
from memoryhub.observe.alerting.evaluate import evaluate_rule
from memoryhub.observe.metrics import compute
from memoryhub.observe.reports import SIGNALS, WINDOWS

pytestmark = pytest.mark.django_db(transaction=True)

TILE = re.compile(r'data-stat="([\w-]+)"><div class="label">[^<]*</div><div class="value">([^<]*)</div>')
SOURCE_ROW = re.compile(
    r'<tr data-source="([\w-]+)">.*?</td><td class="num">[\d,]+</td><td class="num">([\d,]+)</td>'
    r'<td class="num">[\d,]+</td><td class="num" data-needed-repair="(\d+)">',
    re.S,
)
ALERT = re.compile(
    r'<li data-rule="(\d+)">.*?data-alert-value="([^"]*)" data-alert-window="(\d+)">([^<]*)</span>', re.S
)


def _client() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=scenario.DEMO_USERNAME))
    return client


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _page(client: Client, url: str) -> str:
    answer = client.get(url)
    assert answer.status_code == 200, url
    return answer.content.decode()


def _since(page: str) -> datetime:
    stated = re.search(r'data-since="([^"]+)"', page)
    assert stated, "the overview does not say where its window starts"
    return datetime.fromisoformat(stated.group(1))


def _check_overview(client: Client, tenant: Tenant, key: str, now: datetime) -> dict[str, int]:
    """The overview's window figures against compute over the window it states; returns the tiles."""
    page = _page(client, f"/overview/?window={key}")
    since = _since(page)
    assert now - WINDOWS[key].span <= since <= now
    assert WINDOWS[key].label in page  # and says which window, in words
    tiles = dict(TILE.findall(page))
    counts = {s.key: _int(tiles[s.key]) for s in SIGNALS.values()}
    assert counts == {s.key: compute(tenant, s.metric, since=since, until=now) for s in SIGNALS.values()}
    rate = compute(tenant, "acceptance_rate", since=since, until=now)
    assert tiles["acceptance"] == ("—" if rate is None else f"{round(rate * 100)}%")
    rows = SOURCE_ROW.findall(page)
    assert rows, "no per-source table"
    # The table and the tile count the same compactions over the same window.
    assert sum(_int(n) for _source, n, _repair in rows) == counts["compaction"]
    assert sum(int(r) for _source, _n, r in rows) == compute(
        tenant, "compactions_needing_repair", since=since, until=now
    )
    return counts


def _check_drilldowns(client: Client, tenant: Tenant, key: str, now: datetime) -> None:
    """A count's link lists exactly the workflows its rows (the metric's own) belong to."""
    since = WINDOWS[key].since(now)
    workflows = list(Workflow.objects.filter(tenant=tenant))
    for signal in SIGNALS.values():
        page = _page(client, f"/workflows/?has={signal.key}&window={key}")
        listed = {html.unescape(wf) for wf in re.findall(r'<tr data-workflow="([^"]+)"', page)}
        behind = {wf.external_id for wf in workflows if signal.rows.of_workflow(wf, since, now).exists()}
        assert listed == behind, (signal.key, key)


def test_every_overview_figure_is_the_metric_over_the_window_the_page_states(loaded):
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    client = _client()
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        seen = {key: _check_overview(client, tenant, key, now) for key in WINDOWS}
        for key in WINDOWS:
            _check_drilldowns(client, tenant, key, now)
    assert seen["7d"]["compaction"] > 0 and seen["7d"]["failure"] > 0  # the demo has both


def test_at_a_window_edge_the_tile_and_the_per_source_table_still_agree(loaded):
    """A compaction that finished just under 24 h ago is before the 24 h window's first hourly
    bucket: the tile, its chart and the per-source table must all leave it out (the table used to
    count from now − 24 h and the tile from the bucket: "Compactions 4" beside a table summing
    to more)."""
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    job = (
        CompactionJob.objects.filter(tenant=tenant, status=JobStatus.SUCCEEDED, finished_at__isnull=False)
        .order_by("finished_at")
        .first()
    )
    assert job is not None and job.finished_at is not None
    now = job.finished_at + timedelta(hours=24) - timedelta(seconds=1)
    window = WINDOWS["24h"]
    assert now - window.span <= job.finished_at < window.since(now)  # the edge case is exercised
    with time_machine.travel(now, tick=False):
        _check_overview(_client(), tenant, "24h", now)
        _check_drilldowns(_client(), tenant, "24h", now)  # and the count's link lists the same


def test_firing_alerts_show_their_value_over_their_own_window(loaded):
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        for rule in AlertRule.objects.filter(tenant=tenant, enabled=True):
            evaluate_rule(rule, now)
        page = _page(_client(), "/overview/")
    shown = {int(pk): (value, int(window), text) for pk, value, window, text in ALERT.findall(page)}
    firing = AlertRule.objects.filter(tenant=tenant, enabled=True).exclude(state="ok")
    assert set(shown) == set(firing.values_list("pk", flat=True)) and shown
    for rule in firing:
        value, window, text = shown[rule.pk]
        assert window == rule.window_minutes
        assert f"over the last {rule.window_minutes} min" in html.unescape(text)
        since = now - timedelta(minutes=rule.window_minutes)
        if rule.source_filter:  # the rule's scope, stated beside its value
            assert f"for {rule.get_source_filter_display()}" in html.unescape(text)
        expected = compute(
            tenant,
            rule.metric,
            since=since,
            until=now,
            workflow_prefix=rule.workflow_filter,
            source=rule.source_filter,
        )
        assert float(value) == pytest.approx(expected), rule.name


def test_the_workflow_lists_all_time_columns_are_the_metrics_since_the_beginning(loaded):
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    page = _page(_client(), "/workflows/")
    assert "all time" in page
    rows = re.findall(
        r'<tr data-workflow="([^"]+)">.*?data-col="stale"[^>]*>(\d+)</td>\s*'
        r'<td data-col="unvalidated"[^>]*>(\d+)</td>',
        page,
        re.S,
    )
    assert rows
    for wf, stale, unvalidated in rows:
        workflow = Workflow.objects.get(tenant=tenant, external_id=html.unescape(wf))
        for metric, shown in (
            ("stale_activation_attempts", stale),
            ("unvalidated_consumptions", unvalidated),
        ):
            rows_of = SIGNALS["stale" if metric.startswith("stale") else "unvalidated"].rows
            assert int(shown) == rows_of.of_workflow(workflow).count(), (wf, metric)
    assert any(int(stale) for _wf, stale, _u in rows)  # the seed's stale activation is counted


def test_the_acceptance_rate_is_the_metric_even_where_rollups_cover_the_window(loaded):
    """Rollups keep each bucket's rate, not its tallies: once S3 (accepted when its bucket was
    rolled up) is quarantined, a mean of rolled-up rates still said 100% while the metric, the
    alert and the API said less. The headline rate is the metric over the window."""
    from memoryhub.core.actors import Actor
    from memoryhub.memory import lifecycle
    from memoryhub.models import Summary
    from memoryhub.observe.metrics import rollup

    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    s3 = Summary.objects.get(workflow__tenant=tenant, workflow__external_id=scenario.WORKFLOW_ID, version=3)
    finished = CompactionJob.objects.get(summary=s3).finished_at
    assert finished is not None
    # Roll up the hours around S3's compaction, as beat did while the story happened.
    rollup(tenant, now=finished + timedelta(hours=2), backfill=timedelta(hours=4), gauges=False)
    lifecycle.quarantine(s3, Actor.user(scenario.REVIEWER_USERNAME), "drops the 401 requirement")
    now = timezone.now()
    with time_machine.travel(now, tick=False):
        counts = _check_overview(_client(), tenant, "7d", now)
    rate = compute(tenant, "acceptance_rate", since=WINDOWS["7d"].since(now), until=now)
    assert rate is not None and rate < 1 and counts["compaction"] > 0


def test_a_framework_workflow_page_counts_the_compactions_the_overview_counts(loaded):
    """A workflow page's "N compactions reported, all time" is the compactions metric's rows of
    that workflow that a framework reported, since the beginning (the per-source table's
    "of which observed", over all time)."""
    from memoryhub.observe.metrics import counted_rows

    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    client = _client()
    checked = 0
    for workflow in Workflow.objects.filter(tenant=tenant).exclude(source__in=["api", "langgraph"]):
        page = _page(client, f"/workflows/{workflow.external_id}/")
        shown = re.search(
            r"<span data-framework-compactions>(\d+)</span> compactions? reported, all time", page
        )
        assert shown, workflow.external_id
        rows = (
            counted_rows("compactions").of_workflow(workflow).filter(idempotency_key__startswith="observed/")
        )
        assert int(shown.group(1)) == rows.count(), workflow.external_id
        checked += 1
    assert checked >= 4  # LangChain, OpenAI Agents, Claude Code, OTel, Anthropic


def test_a_workflow_page_and_the_list_count_the_same_stale_attempts(loaded):
    """The list's "Stale attempts, all time" column and the workflow page's count are the
    stale_activation_attempts metric (stale or refused) of that workflow since the beginning."""
    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    client = _client()
    listed = dict(
        re.findall(
            r'<tr data-workflow="([^"]+)">.*?data-col="stale"[^>]*>(\d+)</td>',
            _page(client, "/workflows/"),
            re.S,
        )
    )
    assert listed
    for external_id, in_list in listed.items():
        workflow = Workflow.objects.get(tenant=tenant, external_id=html.unescape(external_id))
        page = _page(client, f"/workflows/{workflow.external_id}/")
        shown = re.search(r'data-stale-attempts="(\d+)"', page)
        assert shown, external_id
        expected = SIGNALS["stale"].rows.of_workflow(workflow).count()
        assert int(shown.group(1)) == int(in_list) == expected, external_id
    assert any(int(n) for n in listed.values())  # the seed's late worker
