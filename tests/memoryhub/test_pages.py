"""Dashboard pages (overview, workflow browser, workflow page, summary page) through the Django
test client, with data written by the real services (events, summaries, lifecycle, traces,
artifacts, trigger decisions)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import timedelta
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import plotly.graph_objects as go
import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memoryhub.core.actors import Actor
from memoryhub.memory import lifecycle
from memoryhub.models import Summary, SummaryStatus, Workflow
from memoryhub.observe import detail, figures, reports
from tests.factories import (
    SCOPE_EVERY,
    WORKER,
    activated,
    add_events,
    append,
    artifact,
    content_for,
    event,
    imported_job,
    make_workflow,
    rejected,
    stale_activation,
    trace,
)
from tests.helpers import form_post
from triggers.services import decide

pytestmark = pytest.mark.django_db

# --- data, through the services ---------------------------------------------------------------


@dataclass
class Story:
    workflow: Workflow
    s1: Summary
    s2: Summary
    s3: Summary  # REJECTED: it dropped a mandatory fact


def build_story(tenant, external_id: str = "api-tests-42", events: int = 60) -> Story:
    """S1 (1..20) and S2 (1..events-10) activated, one stale attempt, S3 rejected, a clean and an
    unvalidated read, an artifact, a finished compaction job and an overflow decision."""
    workflow = make_workflow(tenant, external_id, name="Payments API tests")
    add_events(workflow, 1, 20)
    s1 = activated(workflow, 1, 20)
    add_events(workflow, 21, events)
    s2 = activated(workflow, 1, events - 10)
    stale_activation(s1)  # a late worker: stale, nothing changes
    s3 = rejected(workflow, 1, events, content=content_for(1, events, drop=(SCOPE_EVERY,)))
    head = workflow.head_seq
    ok = trace(workflow, s2, head, call="call-1", context_id="ctx-1", manifest_hash="sha256:" + "a" * 64)
    trace(workflow, s3, head, call="call-2", agent="reviewer", context_id="", manifest_hash="")  # unvalidated
    artifact(workflow, f"T57-{external_id}", [ok])
    imported_job(workflow, s2.covers_to_seq, "c1", summary=s2)
    decide(workflow, {"expected_next_step_tokens": 40_000}, WORKER)  # projected past the hard limit
    for s in (s1, s2, s3):
        s.refresh_from_db()
    workflow.refresh_from_db()
    return Story(workflow, s1, s2, s3)


@pytest.fixture
def story(tenant) -> Story:
    return build_story(tenant)


def figures_in(html: str) -> dict[str, dict]:
    """The Plotly figures a page embeds, by chart id."""
    found = re.findall(r'id="chart-([\w-]+)" data-figure="([^"]*)"', html)
    return {key: json.loads(unescape(raw)) for key, raw in found}


# --- overview ---------------------------------------------------------------------------------


def test_home_redirects_to_overview_or_login(client, alice):
    assert client.get("/")["Location"] == "/accounts/login/"
    r = alice.web.get("/")
    assert r.status_code == 302 and r["Location"] == "/overview/"


def test_overview_numbers_and_every_chart_has_data(alice, story):
    with time_machine.travel(timezone.now() + timedelta(hours=2)):  # the active summary has an age
        r = alice.web.get("/overview/?window=24h")
    html = r.content.decode()
    assert r.status_code == 200
    assert 'src="/static/plotly/plotly.min.js"' in html  # served from the installed package
    numbers = dict(
        re.findall(r'data-stat="([\w-]+)"><div class="label">[^<]*</div><div class="value">([^<]*)<', html)
    )
    assert numbers["workflows"] == "1"
    assert numbers["stale"] == "1" and numbers["failure"] == "1" and numbers["compaction"] == "1"
    assert numbers["overflow"] == "1" and numbers["unvalidated"] == "1"
    assert numbers["acceptance"] == "100%"
    charts = figures_in(html)
    assert set(charts) == {
        "age",
        "tail",
        "age_now",
        "tail_now",
        "stale",
        "failure",
        "compaction",
        "acceptance",
        "overflow",
        "unvalidated",
    }
    for key, fig in charts.items():
        go.Figure(fig)  # valid Plotly (attribute names checked by plotly itself)
        assert figures.point_count(fig) > 0, key
        assert any(v for trace in fig["data"] for v in trace["y"] if v), f"{key} has only zeros"
    # The tail chart carries the safe budget line (seed: 18,000).
    assert any(shape["y0"] == 18_000 for shape in charts["tail_now"]["layout"]["shapes"])


def test_overview_chart_points_drill_down_to_their_workflows(alice, story, tenant):
    other = make_workflow(tenant, "quiet-one")
    add_events(other, 1, 3)
    charts = figures_in(alice.web.get("/overview/?window=24h").content.decode())
    for key in ("stale", "failure", "compaction", "overflow", "unvalidated"):
        trace = charts[key]["data"][0]
        hits = [url for url, y in zip(trace["customdata"], trace["y"], strict=True) if y]
        assert len(hits) == 1, key
        page = alice.web.get(hits[0]).content.decode()
        assert 'data-workflow="api-tests-42"' in page and 'data-workflow="quiet-one"' not in page, key
        empty = next(url for url, y in zip(trace["customdata"], trace["y"], strict=True) if not y)
        assert 'data-workflow="api-tests-42"' not in alice.web.get(empty).content.decode()
    bars = charts["tail_now"]["data"][0]
    assert bars["x"][0] == "api-tests-42" and bars["customdata"][0] == "/workflows/api-tests-42/"


def test_overview_windows_and_fragments(alice, story):
    for window in ("1h", "24h", "7d", "30d"):
        r = alice.web.get(f"/overview/?window={window}")
        assert r.status_code == 200 and f'data-window="{window}" aria-current="true"' in r.content.decode()
    assert b'aria-current="true">7d' in alice.web.get("/overview/?window=bogus").content  # the default
    numbers = alice.web.get("/overview/numbers/?window=1h")
    assert (
        numbers.status_code == 200
        and b"<html" not in numbers.content
        and b'data-stat="stale"' in numbers.content
    )
    charts = alice.web.get("/overview/charts/?window=1h").content.decode()
    assert "<html" not in charts and len(figures_in(charts)) == 10


def test_overview_empty_state(alice):
    charts = figures_in(alice.web.get("/overview/").content.decode())
    assert "No workflow has an active summary" in json.dumps(charts["age_now"])
    assert "None in the last 7 days" in json.dumps(charts["stale"])


def test_overview_window_buckets_are_aligned_and_cover_the_span():
    now = timezone.now()
    for window in reports.WINDOWS.values():
        starts = window.starts(now)
        assert starts[-1] <= now < starts[-1] + window.bucket
        assert starts[0] <= now - window.span + window.bucket
        assert all(int(s.timestamp()) % int(window.bucket.total_seconds()) == 0 for s in starts)


# --- workflow browser --------------------------------------------------------------------------


def listed(response) -> list[str]:
    return re.findall(r'data-workflow="([^"]+)"', response.content.decode())


def test_workflow_list_filters(alice, story, tenant):
    plain = make_workflow(tenant, "plain-wf", name="refunds")
    add_events(plain, 1, 5)
    web = alice.web
    assert listed(web.get("/workflows/?q=REFUNDS")) == ["plain-wf"]
    assert listed(web.get("/workflows/?q=api-tests")) == ["api-tests-42"]
    assert listed(web.get("/workflows/?status=active")) == ["api-tests-42"]
    assert listed(web.get("/workflows/?status=none")) == ["plain-wf"]
    assert listed(web.get("/workflows/?status=REJECTED")) == ["api-tests-42"]
    assert listed(web.get("/workflows/?status=QUARANTINED")) == []
    assert listed(web.get("/workflows/?min_tail_events=6")) == ["api-tests-42"]
    assert set(listed(web.get("/workflows/?min_tail_tokens=1"))) == {"api-tests-42", "plain-wf"}
    assert listed(web.get("/workflows/?min_tail_tokens=1&sort=tail_tokens"))[0] == "api-tests-42"
    for key in ("stale", "unvalidated", "failure", "compaction", "overflow"):
        assert listed(web.get(f"/workflows/?has={key}&window=1h")) == ["api-tests-42"], key
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    assert listed(web.get("/workflows/?" + f"has=stale&since={future.replace('+', '%2B')}")) == []
    row = re.search(r'data-workflow="api-tests-42">(.*?)</tr>', web.get("/workflows/").content.decode(), re.S)
    assert row and 'class="num warn">1<' in row.group(1) and 'class="num bad">1<' in row.group(1)


def test_workflow_list_bad_filters_are_reported_not_fatal(alice, story):
    r = alice.web.get("/workflows/?min_tail_events=lots&status=NOPE&cursor=garbage")
    assert r.status_code == 200 and b"Some filters were ignored" in r.content
    assert listed(r) == ["api-tests-42"]


@pytest.mark.parametrize("sort", ["recent", "tail_tokens", "head"])
def test_workflow_list_keyset_pages_cover_everything_once(alice, tenant, sort):
    for i in range(60):
        wf = make_workflow(tenant, f"wf-{i:02d}")
        if i % 7:
            append(wf, [event(j) for j in range(1, 1 + i % 7)])
    seen: list[str] = []
    url = f"/workflows/?sort={sort}"
    pages = []
    while url:
        r = alice.web.get(url)
        html = r.content.decode()
        pages.append(html)
        seen += listed(r)
        nxt = re.search(r'href="\?([^"]+)" rel="next"', html)
        url = "/workflows/?" + unescape(nxt.group(1)) if nxt else ""
    assert len(seen) == 60 and len(set(seen)) == 60
    assert "Page 1 of 3" in pages[0] and "Page 3 of 3" in pages[-1]
    # Walking back from the last page gives the previous page again.
    prev = re.search(r'href="\?([^"]+)" rel="prev"', pages[-1]).group(1)
    back = alice.web.get("/workflows/?" + unescape(prev))
    assert (
        listed(back) == re.findall(r'data-workflow="([^"]+)"', pages[1])
        and "Page 2 of 3" in back.content.decode()
    )
    assert "cursor" in parse_qs(urlsplit("/?" + unescape(prev)).query)


def test_workflow_list_pages_never_use_offset(alice, tenant, django_assert_max_num_queries):
    for i in range(30):
        make_workflow(tenant, f"wf-{i:02d}")
    first = alice.web.get("/workflows/").content.decode()
    nxt = unescape(re.search(r'href="\?([^"]+)" rel="next"', first).group(1))
    with CaptureQueriesContext(connection) as ctx:
        alice.web.get("/workflows/?" + nxt)
    assert not any("OFFSET" in q["sql"].upper() for q in ctx.captured_queries)


def test_workflow_list_fragment_is_the_table_only(alice, story):
    r = alice.web.get("/workflows/?status=active&fragment=table")
    assert b"<html" not in r.content and listed(r) == ["api-tests-42"]


# --- workflow page ----------------------------------------------------------------------------


def test_workflow_page_sections(alice, story):
    r = alice.web.get("/workflows/api-tests-42/")
    html = r.content.decode()
    assert r.status_code == 200
    for section in (
        "summary-table",
        "lifecycle-table",
        "job-table",
        "trace-table",
        "artifact-table",
        "event-table",
    ):
        assert f'id="{section}"' in html, section
    assert 'data-status="ACTIVE"' in html and 'data-status="REJECTED"' in html
    assert "1 stale" in html and "badge result-stale" in html
    assert 'href="/artifacts/T57-api-tests-42/"' in html
    assert "unvalidated_summary" in html  # the flagged read
    stats = alice.web.get("/workflows/api-tests-42/?fragment=stats")
    assert b"<html" not in stats.content and b'data-stat="history"' in stats.content


def test_history_curve_drops_at_activations_and_draws_the_budget(alice, story):
    fig = figures_in(alice.web.get("/workflows/api-tests-42/").content.decode())["history"]
    go.Figure(fig)
    history = next(t for t in fig["data"] if t["name"].startswith("history"))
    raw = next(t for t in fig["data"] if t["name"] == "without compaction")
    activations = next(t for t in fig["data"] if t["name"] == "activations")
    attempts = next(t for t in fig["data"] if t["name"].startswith("stale"))
    assert activations["x"] == [20, 60] and activations["text"] == ["S1", "S2"]
    assert attempts["x"] == [60]
    wf, s1 = story.workflow, story.s1
    # Right after S1's activation, the model reads S1 only; at head, S2 + the tail (running totals).
    at_20 = [y for x, y in zip(history["x"], history["y"], strict=True) if x == 20]
    assert min(at_20) == s1.token_count and max(at_20) == raw["y"][history["x"].index(20)]
    assert history["x"][-1] == wf.head_seq and history["y"][-1] == wf.history_tokens
    assert raw["y"][-1] == wf.total_tokens
    budget = {
        n["text"]: s["y0"]
        for s, n in zip(fig["layout"]["shapes"], fig["layout"]["annotations"], strict=False)
    }
    assert budget["safe budget = trigger 18,000"] == 18_000 and budget["target 8,000"] == 8_000


def test_history_curve_samples_long_histories(alice, tenant, django_assert_max_num_queries):
    wf = make_workflow(tenant, "long")
    for lo in range(1, 3001, 500):
        append(wf, [event(i) for i in range(lo, lo + 500)])
    fig = figures_in(alice.web.get("/workflows/long/").content.decode())["history"]
    history = next(t for t in fig["data"] if t["name"].startswith("history"))
    assert len(history["x"]) <= detail.CURVE_POINTS + 2
    assert history["x"][-1] == 3000 and history["y"][-1] == Workflow.objects.get(pk=wf.pk).total_tokens
    assert "every 13 events" in fig["layout"]["title"]["text"]


def test_event_timeline_pages_by_seq_range(alice, story):
    web = alice.web
    html = web.get("/workflows/api-tests-42/?page=2").content.decode()
    assert 'id="event-51"' in html and 'id="event-50"' not in html and "Page 2 of 2" in html
    assert 'id="event-7"' in web.get("/workflows/api-tests-42/?seq=7").content.decode()
    assert 'id="event-60"' in web.get("/workflows/api-tests-42/?page=2&seq=x").content.decode()
    last = web.get("/workflows/api-tests-42/?page=999").content.decode()
    assert 'id="event-60"' in last  # clamped to the last page
    first = web.get("/workflows/api-tests-42/").content.decode()
    covered = re.search(r'<tr id="event-50" class="(\w+)"', first).group(1)
    tail = re.search(r'<tr id="event-51" class="(\w+)"', html).group(1)
    assert covered == "covered" and tail == "tail"


def test_workflow_page_of_another_tenant_is_404(mallory, story):
    assert mallory.web.get("/workflows/api-tests-42/").status_code == 404


# --- summary page -----------------------------------------------------------------------------


def test_summary_page_shows_the_eight_groups_content_and_diff(alice, story):
    s2 = story.s2
    html = alice.web.get(f"/summaries/{s2.summary_id}/").content.decode()
    for n, group in enumerate(
        (
            "Identity",
            "Source lineage",
            "Compactor",
            "Validation record",
            "Content integrity",
            "Lifecycle status",
            "Activation",
            "Consumer trace",
        ),
        start=1,
    ):
        assert f"{n} · {group.upper()}" in html.upper(), group
    assert s2.content_hash in html and "extractive-v1" in html
    # Facts link to their source events on the workflow page (page of 50 seqs, anchored).
    assert 'href="/workflows/api-tests-42/?page=1#event-10"' in html
    assert 'href="/workflows/api-tests-42/?page=1#event-50"' in html
    assert "Events 1-50: requirements for POST /payments were discussed." in html
    assert 'id="check-table"' in html and 'id="summary-diff"' in html  # audit's diff partial
    assert "call-1" in html  # its consumer


def test_summary_page_marks_waived_checks(bob, story):
    s3 = story.s3
    failed = [c["name"] for c in s3.validations.get().checks if not c["passed"]]
    lifecycle.waive(s3, failed, Actor.user("bob"), "covered by a manual review")
    html = bob.web.get(f"/summaries/{s3.summary_id}/").content.decode()
    for name in failed:
        assert re.search(rf'<tr class="waived"><td><code>{name}</code>', html), name
    assert 'title="waived">waived</span>' in html


def actions_on(party, summary: Summary) -> list[str]:
    return re.findall(
        r'<details class="action" data-action="(\w+)"',
        party.web.get(f"/summaries/{summary.summary_id}/").content.decode(),
    )


def test_review_buttons_follow_role_and_status(alice, bob, carol, story):
    s1, s2, s3 = story.s1, story.s2, story.s3
    assert actions_on(carol, s2) == [] and actions_on(carol, s3) == []
    assert actions_on(bob, s2) == ["quarantine"]  # ACTIVE
    assert actions_on(bob, s1) == ["rollback", "quarantine"]  # SUPERSEDED: it was active before
    assert actions_on(bob, s3) == ["waive"]  # REJECTED with failed checks
    lifecycle.quarantine(Summary.objects.get(pk=s1.pk), Actor.user("bob"), "suspicious")
    assert actions_on(bob, s1) == []  # release is admin-only
    assert actions_on(alice, s1) == ["release"]
    page = carol.web.get(f"/summaries/{s2.summary_id}/").content.decode()
    assert "read-only access" in page and "action-form" not in page


def test_quarantine_from_the_summary_page_moves_the_pointer(bob, story):
    s2 = story.s2
    html = bob.web.get(f"/summaries/{s2.summary_id}/").content.decode()
    form = re.search(r'data-action="quarantine">.*?<form method="post" action="([^"]+)"', html, re.S)
    r = form_post(
        bob.web, form.group(1), {"reason": "drops scope facts", "next": f"/summaries/{s2.summary_id}/"}
    )
    assert r.status_code == 302 and r["Location"] == f"/summaries/{s2.summary_id}/"
    s2.refresh_from_db()
    assert s2.status == SummaryStatus.QUARANTINED
    wf = Workflow.objects.get(pk=story.workflow.pk)
    assert wf.active_summary_id == story.s1.pk  # fell back to S1
    status = bob.web.get(f"/summaries/{s2.summary_id}/?fragment=status").content.decode()
    assert 'data-status="QUARANTINED"' in status and "<html" not in status


def post_action_form(party, summary: Summary, action: str, **extra: str):
    """Submit the summary page's form for ``action`` with its hidden fields, like the browser."""
    html = party.web.get(f"/summaries/{summary.summary_id}/").content.decode()
    form = re.search(
        rf'data-action="{action}">.*?<form method="post" action="([^"]+)"(.*?)</form>', html, re.S
    )
    fields: dict[str, Any] = dict(
        re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', form.group(2))
    )
    checks = re.findall(r'name="checks" value="([^"]+)" checked', form.group(2))
    if checks:
        fields["checks"] = checks
    return party.web.post(form.group(1), {**fields, **extra})


def test_rollback_and_waive_forms_carry_what_the_service_needs(bob, story):
    r = post_action_form(bob, story.s1, "rollback", reason="S2 lost a scope")
    assert r.status_code == 302
    wf = Workflow.objects.get(pk=story.workflow.pk)
    assert wf.active_summary_id == story.s1.pk and wf.active_revision == 3
    r = post_action_form(bob, story.s3, "waive", reason="scope-10 is covered elsewhere")
    assert r.status_code == 302
    assert Summary.objects.get(pk=story.s3.pk).status == SummaryStatus.VALIDATED
    page = bob.web.get(f"/summaries/{story.s3.summary_id}/").content.decode()
    assert 'title="waived">waived</span>' in page


def test_viewer_forged_review_post_is_forbidden(carol, story):
    r = form_post(carol.web, f"/summaries/{story.s2.summary_id}/action/quarantine/", {"reason": "forged"})
    assert r.status_code == 403
    assert Summary.objects.get(pk=story.s2.pk).status == SummaryStatus.ACTIVE


def test_summary_page_of_another_tenant_is_404(mallory, story):
    assert mallory.web.get(f"/summaries/{story.s2.summary_id}/").status_code == 404


# --- figures ----------------------------------------------------------------------------------


def test_figure_builders_make_valid_plotly_figures():
    now = timezone.now()
    starts = [now - timedelta(hours=i) for i in range(3)]
    built = [
        figures.time_series(
            "t",
            [
                figures.Series("a", starts, [1, 0, None], ["/a/"] * 3, "x"),
                figures.Series("b", starts, [2, 3, 4], ["/b/"] * 3, "y", kind="line", secondary=True),
            ],
            lines=[figures.Line(5, "budget")],
            span=(starts[-1], now),
        ),
        figures.time_series(
            "rate", [figures.Series("r", starts, [0.5, None, 1.0], ["/r/"] * 3)], percent=True
        ),
        figures.workflow_bars("b", [figures.Bar("wf", 3, "/workflows/wf/")], lines=[figures.Line(2, "x")]),
        figures.workflow_bars("empty", []),
        figures.history_curve(
            [figures.CurvePoint(1, 10, 10), figures.CurvePoint(2, 5, 20)],
            activations=[figures.Marker(2, 5, "S1 activate", "/summaries/x/")],
            attempts=[figures.Marker(2, 5, "S2 activate stale", "/summaries/y/")],
            lines=[figures.Line(18_000, "safe budget")],
        ),
        figures.history_curve([]),
    ]
    for fig in built:
        go.Figure(fig)
        json.loads(figures.to_json(fig))
    assert built[1]["data"][0]["y"] == [50.0, None, 100.0]
    assert built[0]["layout"]["yaxis2"]["overlaying"] == "y"
    assert "No workflows to show" in json.dumps(built[3]) and "No events yet" in json.dumps(built[5])
