"""Free-text search over the events of every workflow of a tenant (issue #31, item 6): ranked, a
page at a time, within one workflow only when asked, never another tenant's events, never a purged
one. The same tests run on SQLite (substring ranked by hits) and PostgreSQL (full-text search)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.purge import purge_events
from memoryhub.core.actors import Actor
from memoryhub.memory.search import search_events
from memoryhub.observe import search as report
from tests.factories import append, event, make_workflow

pytestmark = pytest.mark.django_db

ADMIN = Actor.system("search-test")


@pytest.fixture
def fleet(tenant, other_tenant):
    """Three workflows of acme mention a gateway timeout (one of them three times over); globex has
    one too; acme's billing workflow also has a purged event that mentioned it."""
    a = make_workflow(tenant, "checkout")
    append(a, [event(1), event(2, content="gateway timeout calling the payments gateway: timeout again")])
    append(a, [event(3, content="retry after a gateway timeout, then a gateway timeout, then a timeout")])
    b = make_workflow(tenant, "billing")
    append(b, [event(1, content="a gateway timeout while exporting invoices"), event(2)])
    append(b, [event(3, content="cust-jane-roe: gateway timeout in her refund")])
    purge_events(b, {"seqs": [3]}, ADMIN, "erasure")
    c = make_workflow(tenant, "reports")
    append(c, [event(1, content="nothing to see")])
    g = make_workflow(other_tenant, "globex-wf")
    append(g, [event(1, content="globex gateway timeout secret")])
    return {"checkout": a, "billing": b, "reports": c, "globex": g}


def found(tenant, q, **kw):
    return [(m.workflow_external_id, m.event.seq) for m in search_events(tenant, q, **kw).matches]


def test_finds_events_of_every_workflow_of_the_tenant_best_first(fleet, tenant):
    hits = found(tenant, "gateway timeout")
    assert set(hits) == {("checkout", 2), ("checkout", 3), ("billing", 1)}
    assert hits[0] == ("checkout", 3)  # the most mentions (and the highest rank) first
    assert hits[-1] == ("billing", 1)
    assert found(tenant, "TIMEOUT invoices") == [("billing", 1)]  # every word must match, any case
    assert found(tenant, "") == [] and found(tenant, "   ") == []


def test_within_one_workflow_when_asked(fleet, tenant, other_tenant):
    assert found(tenant, "gateway timeout", workflow=fleet["billing"]) == [("billing", 1)]
    assert found(tenant, "gateway", workflow=fleet["reports"]) == []
    assert found(tenant, "gateway", workflow=fleet["globex"]) == []  # another tenant's workflow


def test_never_another_tenants_events_nor_a_purged_one(fleet, tenant, other_tenant):
    assert ("billing", 3) not in found(tenant, "gateway timeout")
    assert found(tenant, "jane") == [] and found(tenant, "refund") == []
    assert found(tenant, "globex") == [] and found(tenant, "secret") == []
    assert found(other_tenant, "gateway timeout") == [("globex-wf", 1)]


def test_pages_do_not_overlap_and_say_when_there_is_more(tenant):
    wf = make_workflow(tenant, "many")
    append(wf, [event(i, content=f"needle {i} " + "needle " * (i % 4)) for i in range(1, 26)])
    first = search_events(tenant, "needle", limit=20)
    second = search_events(tenant, "needle", offset=20, limit=20)
    assert len(first.matches) == 20 and first.has_next
    assert len(second.matches) == 5 and not second.has_next
    seqs = [m.event.seq for m in first.matches + second.matches]
    assert sorted(seqs) == list(range(1, 26))
    ranks = [m.rank for m in first.matches + second.matches]
    assert ranks == sorted(ranks, reverse=True)
    assert first.engine == ("postgres-fts" if connection.vendor == "postgresql" else "substring")


def test_the_page_searches_the_tenant_by_default_with_a_scope_toggle(fleet, carol):
    html = carol.web.get("/search/", {"q": "gateway timeout"}).content.decode()
    assert 'data-scope="tenant"' in html and 'id="scope-toggle"' in html
    assert re.findall(r'<li data-workflow="([^"]+)">', html) == ["checkout", "checkout", "billing"]
    assert "<mark>gateway timeout</mark>" in html
    assert "jane" not in html and "globex" not in html
    assert 'value="tenant" checked' in html


def test_the_page_searches_one_workflow_when_named_and_can_widen(fleet, carol):
    html = carol.web.get("/search/", {"q": "gateway timeout", "workflow": "checkout"}).content.decode()
    assert 'data-scope="workflow"' in html and 'value="workflow" checked' in html
    assert re.findall(r'<li data-workflow="([^"]+)">', html) == ["checkout", "checkout"]
    assert "?workflow=checkout&amp;q=gateway%20timeout&amp;scope=tenant&amp;all=1" in html  # the toggle
    wide = carol.web.get("/search/", {"q": "gateway timeout", "workflow": "checkout", "scope": "tenant"})
    assert re.findall(r'<li data-workflow="([^"]+)">', wide.content.decode()) == [
        "checkout",
        "checkout",
        "billing",
    ]
    # A workflow of another tenant (or none) finds nothing and says so.
    html = carol.web.get("/search/", {"q": "gateway", "workflow": "globex-wf"}).content.decode()
    assert "This tenant has no workflow" in html and "secret" not in html


def test_the_page_paginates_and_refuses_bad_pages(tenant, carol):
    wf = make_workflow(tenant, "many")
    append(wf, [event(i, content=f"needle {i}") for i in range(1, 26)])
    first = carol.web.get("/search/", {"q": "needle"}).content.decode()
    assert first.count("<li data-workflow=") == report.EVENTS_PER_PAGE
    nxt = re.search(r'href="\?([^"]+)" rel="next"', first).group(1).replace("&amp;", "&")
    second = carol.web.get(f"/search/?{nxt}").content.decode()
    assert second.count("<li data-workflow=") == 5 and 'rel="next"' not in second and 'rel="prev"' in second
    for bad in ("0", "-1", "x", "²", "99999", str(report.MAX_EVENT_PAGE + 1)):
        assert carol.web.get("/search/", {"q": "needle", "page": bad}).status_code == 400
    assert carol.web.get("/search/", {"q": "needle", "scope": "galaxy"}).status_code == 400


def test_the_page_never_crosses_tenants(fleet, mallory):
    html = mallory.web.get("/search/", {"q": "gateway timeout"}).content.decode()
    assert re.findall(r'<li data-workflow="([^"]+)">', html) == ["globex-wf"]
    html = mallory.web.get("/search/", {"q": "gateway", "workflow": "checkout"}).content.decode()
    assert "This tenant has no workflow" in html


@pytest.mark.postgres
def test_postgres_matches_word_forms_and_search_syntax(fleet, tenant):
    assert found(tenant, "exported invoice") == [("billing", 1)]  # stemmed: exporting, invoices
    assert ("billing", 1) not in found(tenant, "gateway timeout -invoices")
    assert set(found(tenant, '"payments gateway"')) == {("checkout", 2)}


@pytest.mark.postgres
def test_postgres_answers_from_the_full_text_index(tenant):
    """The query's expression is the one migration 0025 indexes (else a scan of every event)."""
    wf = make_workflow(tenant, "long")
    for lo in range(1, 1501, 500):
        append(
            wf,
            [
                {
                    "kind": "message",
                    "content": f"event {i} about refunds" + (" gateway" if i % 700 == 0 else ""),
                }
                for i in range(lo, lo + 500)
            ],
        )
    with CaptureQueriesContext(connection) as queries:
        assert len(search_events(tenant, "gateway").matches) == 2
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memoryhub_event")
        cursor.execute("EXPLAIN " + queries.captured_queries[-1]["sql"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert re.search(r"Bitmap Index Scan on memoryhub_event\w*(_fts|to_tsvector_idx)", plan), plan
