"""Trace page, trace and artifact lists, the nav search and the filtered event timeline, the
styled error pages, the favicon and offline API docs — server side (tests/browser covers the rest)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine
from django.test import Client
from django.utils import timezone

from memoryhub.context.traces import record_artifact, record_trace
from memoryhub.models import ConsumerTrace
from tests.factories import TEST_ACTOR, append, event, make_workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def traced(tenant):
    """wf-1 (12 events) read twice: once cleanly, once with tail loss; a flagged call produced T57."""
    wf = make_workflow(tenant, "wf-1", graph_release="g@1")
    append(wf, [event(i) for i in range(1, 11)])
    append(wf, [event(11, content="the gateway answered 401 Unauthorized here", agent="tester")])
    append(wf, [event(12, kind="note", agent="tester")])
    with time_machine.travel(timezone.now() - timedelta(days=3)):
        old, _ = record_trace(
            wf,
            {
                "agent": "planner",
                "agent_run_id": "run-1",
                "model_call_id": "call-old-1",
                "summary_id": None,
                "tail_to_seq": 12,
                "checkpoint_id": "ckpt-9",
                "input_tokens": 321,
            },
            TEST_ACTOR,
        )
    lossy, _ = record_trace(
        wf,
        {
            "agent": "publisher",
            "agent_run_id": "run-2",
            "model_call_id": "call-pub-2",
            "summary_id": None,
            "tail_to_seq": 5,
        },
        TEST_ACTOR,
    )
    record_artifact(
        wf,
        {"artifact_id": "T57", "kind": "test-suite", "produced_by": {"model_call_id": "call-pub-2"}},
        TEST_ACTOR,
    )
    other = make_workflow(tenant, "wf-2")
    append(other, [event(1)])
    record_trace(
        other,
        {
            "agent": "planner",
            "agent_run_id": "run-9",
            "model_call_id": "call-x-9",
            "summary_id": None,
            "tail_to_seq": 1,
        },
        TEST_ACTOR,
    )
    return {"wf": wf, "old": old, "lossy": lossy}


def rows(html: str, attr: str) -> list[str]:
    return re.findall(rf'data-{attr}="([^"]+)"', html)


def test_trace_page_shows_every_link_and_the_replay_bundle(traced, carol):
    lossy = traced["lossy"]
    assert "tail_loss" in lossy.flags
    html = carol.web.get(f"/traces/{lossy.pk}/").content.decode()
    assert 'data-field="agent"' in html and "publisher" in html and "run-2" in html and "call-pub-2" in html
    assert 'href="/workflows/wf-1/events/1-5/"' in html  # the tail it read, linked
    assert 'href="/artifacts/T57/"' in html
    assert "tail_loss" in html
    assert '<details class="card json-block" id="replay-bundle">' in html
    assert "&quot;model_call_id&quot;: &quot;call-pub-2&quot;" in html  # pretty-printed, escaped
    old = carol.web.get(f"/traces/{traced['old'].pk}/").content.decode()
    assert "ckpt-9" in old and "321" in old and "g@1" in old


def test_trace_page_is_tenant_scoped(traced, mallory):
    assert mallory.web.get(f"/traces/{traced['lossy'].pk}/").status_code == 404


def test_trace_list_filters_by_agent_flag_time_and_workflow(traced, carol):
    ids = lambda q: rows(carol.web.get(f"/traces/{q}").content.decode(), "trace")  # noqa: E731
    every = {str(t.pk) for t in ConsumerTrace.objects.all()}
    assert set(ids("")) == every and len(every) == 3
    assert ids("?agent=publisher") == [str(traced["lossy"].pk)]
    assert ids("?flag=tail_loss") == [str(traced["lossy"].pk)]
    assert str(traced["old"].pk) not in ids("?window=24h")
    assert ids(f"?until={(timezone.now() - timedelta(days=2)).date().isoformat()}") == [str(traced["old"].pk)]
    assert set(ids("?workflow=wf-2")) == {str(ConsumerTrace.objects.get(model_call_id="call-x-9").pk)}
    assert len(ids("?flag=not-a-flag&window=forever")) == 3  # unknown values are ignored, not 500s


def test_artifact_list_filters_by_producing_traces(traced, carol):
    ids = lambda q: rows(carol.web.get(f"/artifacts/{q}").content.decode(), "artifact")  # noqa: E731
    assert ids("") == ["T57"]
    assert ids("?agent=publisher&flag=tail_loss") == ["T57"]
    assert ids("?agent=planner") == []
    html = carol.web.get("/artifacts/").content.decode()
    assert f'href="/traces/{traced["lossy"].pk}/"' in html


def test_list_query_count_does_not_grow_with_rows(traced, carol, django_assert_max_num_queries):
    carol.web.get("/artifacts/")  # warm the session
    with django_assert_max_num_queries(12):
        carol.web.get("/artifacts/")
    with django_assert_max_num_queries(12):
        carol.web.get("/traces/")


@pytest.mark.parametrize(
    ("q", "target"),
    [
        ("T57", "/artifacts/T57/"),
        ("call-pub-2", "/traces/{lossy}/"),
        ("#{lossy}", "/traces/{lossy}/"),
        ("wf-2", "/workflows/wf-2/"),
    ],
)
def test_search_jumps_to_an_exact_id(traced, carol, q, target):
    pk = traced["lossy"].pk
    response = carol.web.get("/search/", {"q": q.format(lossy=pk)})
    assert response.status_code == 302
    assert response["Location"] == target.format(lossy=pk)


def test_search_lists_prefix_hits_and_marks_event_text_within_a_workflow(traced, carol):
    html = carol.web.get("/search/", {"q": "call-", "all": "1"}).content.decode()
    assert html.count('data-kind="trace"') == 3
    html = carol.web.get("/search/", {"q": "401 unauthorized", "workflow": "wf-1"}).content.decode()
    assert "<mark>401 Unauthorized</mark>" in html
    assert "/workflows/wf-1/timeline/?q=401+unauthorized&amp;seq=11#event-11" in html


def test_search_never_crosses_tenants(traced, mallory):
    html = mallory.web.get("/search/", {"q": "T57"}).content.decode()
    assert "/artifacts/T57/" not in html


def test_timeline_filters_by_kind_agent_and_text_and_marks_the_phrase(traced, carol):
    get = lambda **q: carol.web.get("/workflows/wf-1/timeline/", q).content.decode()  # noqa: E731
    seqs = lambda html: re.findall(r'<tr id="event-(\d+)"', html)  # noqa: E731
    assert len(seqs(get())) == 12
    assert seqs(get(kind="note")) == ["12"]
    assert seqs(get(agent="tester")) == ["11", "12"]
    html = get(q="401")
    assert seqs(html) == ["11"]
    assert "answered <mark>401</mark> Unauthorized" in html  # the phrase, not the row
    html = get(seq="7")
    assert 'class="tail target"' in html and 'data-target-seq="7"' in html


def test_timeline_escapes_content(tenant, carol):
    wf = make_workflow(tenant, "wf-x")
    append(wf, [event(1, content="<script>alert(1)</script> and <b>401</b>")])
    html = carol.web.get("/workflows/wf-x/timeline/", {"q": "401"}).content.decode()
    assert "<script>alert(1)" not in html and "&lt;b&gt;<mark>401</mark>&lt;/b&gt;" in html


def test_error_pages_carry_the_nav(carol, settings):
    settings.DEBUG = False
    client = Client(raise_request_exception=False)
    client.force_login(carol.user)
    page404 = client.get("/no/such/page/")
    assert page404.status_code == 404
    assert 'class="mainnav"' in page404.content.decode() and "Not found" in page404.content.decode()
    page403 = client.get("/summaries/sum_x/action/approve/")
    assert page403.status_code in (403, 404)
    assert 'class="mainnav"' in page403.content.decode()
    assert client.get("/api/v1/nope/").json()["error"] == "not_found"


def test_403_page_is_styled(carol, settings):
    from django.core.exceptions import PermissionDenied
    from django.test import RequestFactory

    from memoryhub.web.pages import handler403

    request = RequestFactory().get("/retention/")
    request.user = carol.user
    request.session = {}
    response = handler403(request, PermissionDenied("This needs the admin role."))
    assert response.status_code == 403
    body = response.content.decode()
    assert 'class="mainnav"' in body and "This needs the admin role." in body


def test_500_page_is_styled_and_survives_a_broken_context(carol, settings, monkeypatch):
    from django.test import RequestFactory

    from memoryhub.web import pages

    request = RequestFactory().get("/overview/")
    request.user = carol.user
    request.session = {}
    response = pages.handler500(request)
    assert response.status_code == 500 and 'class="mainnav"' in response.content.decode()

    def broken(*args, **kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(pages.loader, "render_to_string", broken)
    fallback = pages.handler500(request)
    assert fallback.status_code == 500 and b"Server error" in fallback.content


def test_favicon_and_offline_api_docs(client, carol):
    favicon = client.get("/favicon.ico")
    assert favicon.status_code == 301 and favicon["Location"].endswith("memoryhub/favicon.svg")
    docs = carol.web.get("/api/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', docs)
    assert any("swagger-ui-bundle.js" in a for a in assets)
    assert all(a.startswith("/") for a in assets), assets  # nothing from a CDN
