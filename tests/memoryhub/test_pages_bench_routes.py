"""`manage.py bench pages` times every dashboard page: the URL conf is walked here, and each HTML GET
route must be measured by the bench (its parameters filled from the demo) or excluded with a
reason — so a page added tomorrow is timed, or named, without a hand list going stale.

No database: the routes and the bench's page list are read as they are; the demo values are
stand-ins (the bench test, ``tests/bench/test_pages_bench.py``, fills them from the real demo).
"""

from __future__ import annotations

import pytest
from django.urls import URLPattern

from memoryhub.bench import pages
from tests.helpers import url_routes

NOT_PAGES = ("api/", "v1/", "admin/")


def _get_routes() -> dict[str, URLPattern]:
    """Every route outside the API, OTLP and admin whose view answers a GET."""
    out = {}
    for route, entry in url_routes():
        if route.startswith(NOT_PAGES):
            continue
        methods = pages.allowed_methods(entry.callback)
        if methods is None or "GET" in methods:
            out[route] = entry
    return out


def _stand_ins() -> dict[str, str]:
    """A stand-in for each value the bench takes from the demo: x-<parameter name>."""
    return {key: "x-" + key.rsplit(":", 1)[-1] for key in pages.KWARG_SOURCES}


def test_every_dashboard_get_route_is_measured_or_excluded_with_a_reason():
    measured = {page.route for page in pages.pages(values=_stand_ins())}
    unaccounted = [
        route
        for route in _get_routes()
        if route not in measured and not pages.EXCLUDED.get(route, "").strip()
    ]
    assert not unaccounted, (
        f"dashboard routes neither measured by `bench pages` nor in memoryhub.bench.pages.EXCLUDED: "
        f"{unaccounted} (give their URL parameters a demo value in demo_kwargs, or exclude them with a reason)"
    )
    both = measured & set(pages.EXCLUDED)
    assert not both, f"excluded yet measured: {both}"


def test_the_page_list_has_the_nav_and_detail_pages_it_should():
    """Not empty by accident: the main nav pages and the detail pages are all there, filled."""
    found = {page.route: page.path for page in pages.pages(values=_stand_ins())}
    for route in (
        "overview/",
        "workflows/",
        "review/",
        "audit/",
        "traces/",
        "artifacts/",
        "compactors/",
        "alerts/",
    ):
        assert found.get(route) == "/" + route, route
    assert found["workflows/<str:wf>/"] == "/workflows/x-wf/"
    assert (
        found["summaries/<str:summary_id>/action/<str:action>/"] == "/summaries/x-summary_id/action/x-action/"
    )
    assert found["search/"].startswith("/search/?q=")
    assert len(found) >= 25, sorted(found)


def test_values_are_found_by_route_then_by_the_route_before_the_parameter_then_by_name():
    action = "summaries/<str:summary_id>/action/<str:action>/"
    values = {"summary_id": "s1", f"{action}:summary_id": "s2", "action": "approve", "alerts/rules/:pk": "7"}
    assert pages.fill(action, values) == "/summaries/s2/action/approve/"
    assert pages.fill("summaries/<str:summary_id>/diff/", values) == "/summaries/s1/diff/"
    assert pages.fill("alerts/rules/<int:pk>/edit/", values) == "/alerts/rules/7/edit/"
    with pytest.raises(KeyError):  # a rule's pk is not a channel's
        pages.fill("alerts/channels/<int:pk>/", values)
    # a path parameter keeps its slashes (a framework's compactor name may have one)
    assert pages.fill("compactors/<path:compactor>/", {"compactor": "a/b c"}) == "/compactors/a/b%20c/"


def test_every_exclusion_names_a_route_that_exists_and_says_why():
    routes = {route for route, _ in url_routes()}
    stale = [route for route in pages.EXCLUDED if route not in routes]
    assert not stale, f"EXCLUDED names routes the URL conf no longer has: {stale}"
    assert all(reason.strip() for reason in pages.EXCLUDED.values())


def test_post_only_actions_are_not_pages_and_get_pages_are():
    methods = {route: pages.allowed_methods(entry.callback) for route, entry in url_routes()}
    for post_only in (
        "tenant/switch/",
        "accounts/logout/",
        "alerts/rules/<int:pk>/mute/",
        "summaries/<str:summary_id>/comments/",
        "settings/keys/<str:prefix>/revoke/",
        "artifacts/<str:artifact_id>/investigate/",
    ):
        assert methods[post_only] is not None and "GET" not in methods[post_only], post_only
    assert methods["summaries/<str:summary_id>/action/<str:action>/"] == frozenset({"GET", "POST"})
    assert methods["review/"] == frozenset({"GET"})
    assert methods["overview/"] is None  # no method decorator: any method reaches the view
    bench_routes = {r.route for r in pages.dashboard_routes()}
    assert "tenant/switch/" not in bench_routes and "overview/" in bench_routes


def test_an_exclusion_taken_away_makes_the_page_list_fail(monkeypatch):
    """The demo has no notification channel: without its exclusion the channel page is named."""
    kept = {k: v for k, v in pages.EXCLUDED.items() if k != "alerts/channels/<int:pk>/"}
    monkeypatch.setattr(pages, "EXCLUDED", kept)
    with pytest.raises(RuntimeError, match="alerts/channels/<int:pk>/"):
        pages.pages(values=_stand_ins())


def test_a_new_page_with_an_unknown_parameter_fails_the_bench_page_list(monkeypatch):
    """What happens tomorrow: a detail page whose parameter the bench cannot fill is named."""
    extra = pages.Route("jobs/<str:job_id>/", "memoryhub:job-detail", None)
    real = pages.measured_routes
    monkeypatch.setattr(pages, "measured_routes", lambda: [*real(), extra])
    with pytest.raises(RuntimeError, match=r"jobs/<str:job_id>/.*job_id"):
        pages.pages(values=_stand_ins())


def test_the_readme_page_speed_table_holds_together_and_names_pages_that_exist():
    """README's page-speed table (from one `manage.py bench pages` run): the pages it names are
    pages the bench measures today, every p50 is at most its p95, the overall p95s meet the goals,
    and the goals it states are the bench's."""
    import re
    from pathlib import Path

    from django.conf import settings

    readme = Path(settings.BASE_DIR, "README.md").read_text()
    assert "`manage.py bench pages`" in readme
    table = readme[readme.index("| page speed on the demo |") :].split("\n\n", 1)[0].splitlines()[2:]
    ms = r"\*{0,2}([\d,.]+) ms\*{0,2}"
    rows = {cells[0]: cells[1:] for cells in (re.split(r"\s*\|\s*", line.strip("| ")) for line in table)}
    names = {page.name.rsplit(":", 1)[-1] for page in pages.pages(values=_stand_ins())}
    measured = [name for name in rows if name not in ("goal",) and not name.startswith("all ")]
    assert measured and set(measured) <= names, set(measured) - names
    number = lambda cell: float(re.fullmatch(ms, cell).group(1).replace(",", ""))  # noqa: E731
    for name in measured:
        srv50, srv95, load50, load95 = map(number, rows[name])
        assert srv50 <= srv95 and load50 <= load95, name
    (overall,) = [name for name in rows if name.startswith("all ")]
    assert int(overall.split()[1]) == len(names)  # "all 30 pages": the bench's page count today
    server, load = number(rows[overall][1]), number(rows[overall][3])
    goal_server, goal_load = (
        float(re.search(r"[\d,]+", c).group().replace(",", "")) for c in rows["goal"][1::2]
    )
    assert (goal_server, goal_load) == (pages.GOAL_SERVER_P95_MS, pages.GOAL_LOAD_P95_MS)
    assert server <= goal_server and load <= goal_load
