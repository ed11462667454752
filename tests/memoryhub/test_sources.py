"""One page per source (issue 18 item 5): the workflow list shows and filters by source, the
overview counts compactions per source, and a framework-compacted workflow's policy page shows
the threshold actually in force next to MemoryHub's recommendation."""

from __future__ import annotations

from memoryhub.core.actors import Actor
from memoryhub.memory.observed import record_observed_compaction
from memoryhub.models import WorkflowSource
from tests.factories import append, event, make_workflow

ACTOR = Actor.system("tests")


def _workflows(tenant):
    cc = make_workflow(tenant, "cc-1", source=WorkflowSource.CLAUDE_CODE)
    append(cc, [event(i) for i in range(1, 7)])
    for seq, pre in ((3, 161_000), (6, 158_500)):
        record_observed_compaction(
            cc, covers_to_seq=seq, text=f"s{seq}", compactor={"name": "claude-code"},
            trigger={"kind": "auto", "pre_tokens": pre}, actor=ACTOR,
        )  # fmt: skip
    make_workflow(tenant, "ot-1", source=WorkflowSource.OTEL)
    make_workflow(tenant, "api-1")
    return cc


def test_workflow_list_shows_and_filters_by_source(tenant, alice):
    _workflows(tenant)
    page = alice.web.get("/workflows/").content.decode()
    assert "Claude Code" in page and "OpenTelemetry" in page and "REST API" in page
    only = alice.web.get("/workflows/?source=claude-code").content.decode()
    assert (
        'data-workflow="cc-1"' in only
        and 'data-workflow="ot-1"' not in only
        and 'data-workflow="api-1"' not in only
    )
    bad = alice.web.get("/workflows/?source=carrier-pigeon")
    assert bad.status_code == 200 and "Some filters were ignored" in bad.content.decode()


def test_overview_counts_compactions_per_source(tenant, alice):
    _workflows(tenant)
    page = alice.web.get("/overview/").content.decode()
    assert 'id="compactions-by-source"' in page
    row = page.split('data-source="claude-code"')[1].split("</tr>")[0]
    assert [cell.split("<")[0] for cell in row.split('class="num">')[1:]] == ["1", "2", "2"]
    assert 'data-source="otel"' in page  # a source with workflows but no compactions is listed too


def test_policy_page_shows_threshold_in_force_next_to_the_recommendation(tenant, alice):
    _workflows(tenant)
    page = alice.web.get("/triggers/workflows/cc-1/policy/").content.decode()
    assert (
        'data-testid="threshold-in-force"' in page
        and "158500" in page
        and "MemoryHub's recommendation" in page
    )
    plain = alice.web.get("/triggers/workflows/api-1/policy/").content.decode()
    assert 'data-testid="threshold-in-force"' not in plain
