"""Query counts of every dashboard page: bounded, and the same with 5 or 50 rows of everything."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import (
    WORKER,
    add_events,
    append,
    artifact,
    candidate,
    event,
    make_workflow,
    stale_activation,
    trace,
)
from tests.memoryhub.test_pages import build_story
from triggers.services import decide

pytestmark = pytest.mark.django_db

# The most queries any page may take (session, user, membership, tenant, the nav's two counts —
# review inbox and firing alerts — then the page itself).
# detail: +4 for the compaction-quality section (policy, summary contents, events, token estimates).
# summary: +2 for the rules-6 retention table and the observed-compaction validation result.
# numbers: +3, the acceptance rate is the metric over the window, its jobs not accepted counted
# through three indexed queries (one aggregate over every job of a busy week took 120 ms).
MAX_QUERIES = {"overview": 40, "numbers": 19, "charts": 30, "list": 10, "detail": 24, "summary": 18}


def grow(tenant, story, n: int) -> None:
    """n more of everything the pages show: workflows, events, summaries, attempts, traces, artifacts."""
    wf = story.workflow
    for i in range(n):
        other = make_workflow(tenant, f"grown-{i:03d}")
        append(other, [event(j) for j in range(1, 3)])
    add_events(wf, wf.head_seq + 1, wf.head_seq + n)
    for _ in range(n // 10):
        candidate(wf, 1, wf.head_seq - 1)  # CANDIDATE versions
    for _ in range(n // 5):
        stale_activation(story.s1)
    for i in range(n):
        read = trace(wf, story.s2, wf.head_seq, call=f"grow-call-{i}", agent_run_id=f"grow-{i}")
        artifact(wf, f"G{i}", [read])
        decide(wf, {"expected_next_step_tokens": 100 + i}, WORKER)


def count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(ctx.captured_queries)


def page_urls(story) -> dict[str, str]:
    return {
        "overview": "/overview/?window=24h",
        "numbers": "/overview/numbers/?window=24h",
        "charts": "/overview/charts/?window=30d",
        "list": "/workflows/?has=stale&window=24h",
        "list_sorted": "/workflows/?sort=tail_tokens&status=active",
        "detail": f"/workflows/{story.workflow.external_id}/",
        "detail_stats": f"/workflows/{story.workflow.external_id}/?fragment=stats",
        "summary": f"/summaries/{story.s2.summary_id}/",
        "summary_rejected": f"/summaries/{story.s3.summary_id}/",
    }


def test_page_query_counts_do_not_grow_with_rows(alice, tenant):
    story = build_story(tenant)
    alice.web.get("/overview/")  # warm the session
    urls = page_urls(story)
    small = {name: count(alice.web, url) for name, url in urls.items()}
    grow(tenant, story, 50)
    large = {name: count(alice.web, url) for name, url in urls.items()}
    assert large == small
    for name, limit in MAX_QUERIES.items():
        assert small[name] <= limit, (name, small[name])


def test_workflow_list_second_page_costs_the_same(alice, tenant):
    for i in range(5):
        make_workflow(tenant, f"wf-{i:03d}")
    first_small = count(alice.web, "/workflows/")
    for i in range(5, 80):
        make_workflow(tenant, f"wf-{i:03d}")
    html = alice.web.get("/workflows/").content.decode()
    nxt = re.search(r'href="\?([^"]+)" rel="next"', html).group(1).replace("&amp;", "&")
    assert count(alice.web, "/workflows/") == first_small
    assert count(alice.web, "/workflows/?" + nxt) == first_small


def test_event_pages_cost_the_same_deep_in_a_long_history(alice, tenant):
    wf = make_workflow(tenant, "long")
    add_events(wf, 1, 120)
    shallow = count(alice.web, "/workflows/long/?page=1")
    for lo in range(121, 2121, 500):
        append(wf, [event(i) for i in range(lo, lo + 500)])
    assert count(alice.web, "/workflows/long/?page=1") == shallow
    assert count(alice.web, "/workflows/long/?page=40") == shallow
