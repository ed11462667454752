"""Every dashboard page on the demo: server time through gunicorn, load time in Chromium.

The pages are enumerated from the URL conf, not listed: every route outside ``api/``, ``v1/`` and
``admin/`` whose view answers a GET is a page. A page without URL parameters is a nav page; a
detail page gets its parameters from real demo objects (``demo_kwargs``: by parameter name, or by
route where a name is ambiguous). A page the bench cannot fill or should not time is in
``EXCLUDED`` with the reason; ``tests/memoryhub/test_pages_bench_routes.py``
fails for any other page, so a page added tomorrow is measured (or named) without editing here.

Server time: the app sets no ``Server-Timing`` header, so it is the HTTP response time measured by
the client on loopback (request sent to last byte read), through gunicorn with the production
settings (DEBUG off), logged in as the demo's admin. The pages are requested round after round,
each round visiting every page once in shuffled order, after warm-up rounds.

Load time: Debian's Chromium (headless, through Playwright), logged in once through the login
form, opens each page repeatedly; ``performance.getEntriesByType('navigation')[0]`` gives
``loadEventEnd`` and ``domContentLoadedEventEnd`` from the navigation's start. The browser's cache
is warm after the warm-up visit (a returning user: static files are not fetched again).
"""

from __future__ import annotations

import random
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from django.conf import settings
from django.urls import URLPattern, URLResolver, get_resolver

from memoryhub.bench.server import running_server

Log = Callable[[str], None]

GOAL_SERVER_P95_MS = 300.0
GOAL_LOAD_P95_MS = 1000.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# Not pages of the dashboard: the REST API, OTLP ingest, Django's admin site.
NOT_DASHBOARD = ("api/", "v1/", "admin/")

# Dashboard routes that answer a GET but are not timed, each with the reason. Any other GET route
# outside NOT_DASHBOARD is measured; a route missing from both fails the route test.
EXCLUDED: dict[str, str] = {
    "favicon.ico": "a permanent redirect to a static file, not a page",
    "": "the home URL redirects to /overview/ (measured)",
    "settings/": "redirects to /settings/members/ (measured)",
    "accounts/login/": "the login form: the bench is logged in (Chromium fills it once)",
    "metrics": "Prometheus text exposition, not an HTML page",
    "overview/numbers/": "the refresh fragment /overview/ polls every 15 s (its first render is in /overview/)",
    "overview/charts/": "the refresh fragment /overview/ polls every 60 s (its first render is in /overview/)",
    "traces/<int:trace_id>/replay/": "the replay bundle, a JSON download (attachment), not an HTML page",
    "alerts/channels/<int:pk>/": "the demo has no notification channel to open",
}

# Query strings for pages that show little without one (the nav search box's result page).
QUERIES: dict[str, str] = {"search/": "q=Unauthorized"}

KWARG = re.compile(r"<(?:(\w+):)?(\w+)>")


@dataclass(frozen=True)
class Route:
    route: str  # the pattern, e.g. "workflows/<str:wf>/"
    name: str  # the URL name, e.g. "memoryhub:workflow-detail"
    methods: frozenset[str] | None  # the HTTP methods the view allows (None: any)

    @property
    def kwargs(self) -> list[str]:
        return [m.group(2) for m in KWARG.finditer(self.route)]

    @property
    def answers_get(self) -> bool:
        return self.methods is None or "GET" in self.methods


@dataclass(frozen=True)
class Page:
    name: str
    route: str
    path: str  # the URL path to request, query string included


def allowed_methods(view: Any) -> frozenset[str] | None:
    """The methods a view answers, from ``require_http_methods`` (``require_GET``, ``require_POST``)
    anywhere in its decorator chain, or a class-based view's ``http_method_names``; None: any."""
    view_class = getattr(view, "view_class", None)
    if view_class is not None:
        names = set(view_class.http_method_names) - {"options", "head"}
        return frozenset(n.upper() for n in names)
    seen = set()
    fn = view
    while fn is not None and id(fn) not in seen:
        seen.add(id(fn))
        code, closure = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
        if code is not None and closure:
            cells = dict(zip(code.co_freevars, closure, strict=False))
            if "request_method_list" in cells:
                return frozenset(m.upper() for m in cells["request_method_list"].cell_contents)
        fn = getattr(fn, "__wrapped__", None)
    return None


def all_routes() -> list[Route]:
    """Every route of the URL conf, with its full name and allowed methods."""
    found: list[Route] = []

    def walk(resolver: URLResolver, prefix: str, namespace: str) -> None:
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern).lstrip("^")
            if isinstance(entry, URLResolver):
                inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
                walk(entry, route, inner)
            elif isinstance(entry, URLPattern):
                name = f"{namespace}{entry.name}" if entry.name else route
                found.append(Route(route, name, allowed_methods(entry.callback)))

    walk(get_resolver(), "", "")
    return found


def dashboard_routes() -> list[Route]:
    """The dashboard's GET routes: outside the API, OTLP and admin, not POST-only actions."""
    return [r for r in all_routes() if not r.route.startswith(NOT_DASHBOARD) and r.answers_get]


def measured_routes() -> list[Route]:
    return [r for r in dashboard_routes() if r.route not in EXCLUDED]


# --- the demo objects behind the detail pages ---------------------------------------------------


def demo_kwargs() -> dict[str, str]:
    """A value for each URL parameter, from the loaded demo (acme/api-tests-42 and friends).

    Keys: a parameter name (``wf``), or ``<route text before the parameter>:<name>`` where one name
    means different objects (``alerts/rules/:pk``), or ``<route>:<name>`` for one route.
    """
    from memoryhub.demo import scenario
    from memoryhub.models import AlertRule, Artifact, ConsumerTrace, Summary, Tenant, Workflow

    tenant = Tenant.objects.get(slug=scenario.TENANT_SLUG)
    workflow = Workflow.objects.get(tenant=tenant, external_id=scenario.WORKFLOW_ID)
    summary = workflow.active_summary or Summary.objects.filter(workflow=workflow).latest("pk")
    trace = ConsumerTrace.objects.filter(workflow=workflow).latest("pk")
    artifact = Artifact.objects.get(tenant=tenant, artifact_id=scenario.INCIDENT_ARTIFACT_ID)
    rule = AlertRule.objects.filter(tenant=tenant).order_by("pk").first()
    # The review action's confirmation page opens the summary awaiting approval (the inbox's link).
    awaiting = Summary.objects.filter(workflow__tenant=tenant, status="VALIDATED").order_by("pk").first()
    if rule is None or awaiting is None:
        raise RuntimeError("the demo tenant has no alert rule, or no summary awaiting approval")
    return {
        "wf": workflow.external_id,
        "summary_id": summary.summary_id,
        "trace_id": str(trace.pk),
        "artifact_id": artifact.artifact_id,
        "alerts/rules/:pk": str(rule.pk),
        "compactor": summary.compactor_name,
        "from_seq": "1",  # the first compaction's range (S1: events 1–100)
        "to_seq": "100",
        "action": "approve",
        "summaries/<str:summary_id>/action/<str:action>/:summary_id": awaiting.summary_id,
    }


# The keys demo_kwargs() returns (known without a database, for the route test).
KWARG_SOURCES = frozenset(
    {
        "wf",
        "summary_id",
        "trace_id",
        "artifact_id",
        "alerts/rules/:pk",
        "compactor",
        "from_seq",
        "to_seq",
        "action",
        "summaries/<str:summary_id>/action/<str:action>/:summary_id",
    }
)


def _value(route: str, match: re.Match, values: dict[str, str]) -> str | None:
    name = match.group(2)
    for key in (f"{route}:{name}", f"{route[: match.start()]}:{name}", name):
        if values.get(key):
            return values[key]
    return None


def fill(route: str, values: dict[str, str]) -> str:
    """The route's path with its parameters filled (quoted; a ``path`` parameter keeps its "/").
    Raises KeyError naming the parameters without a value."""
    missing = [m.group(2) for m in KWARG.finditer(route) if _value(route, m, values) is None]
    if missing:
        raise KeyError(missing)

    def sub(m: re.Match) -> str:
        return quote(_value(route, m, values) or "", safe="/" if m.group(1) == "path" else "")

    return "/" + KWARG.sub(sub, route)


def pages(values: dict[str, str] | None = None) -> list[Page]:
    """Every measured route as a requestable page, its parameters filled from the demo."""
    values = demo_kwargs() if values is None else values
    found = []
    for r in measured_routes():
        try:
            path = fill(r.route, values)
        except KeyError as exc:
            raise RuntimeError(
                f"{r.name} ({r.route}): no demo value for {exc.args[0]}; give it one in "
                "memoryhub.bench.pages.demo_kwargs or exclude the route in EXCLUDED"
            ) from None
        if r.route in QUERIES:
            path += "?" + QUERIES[r.route]
        found.append(Page(r.name, r.route, path))
    return found


# --- figures --------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0–100): a value that was measured."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-q * len(ordered) // 100))))
    return round(ordered[rank - 1], 1)


def _figures(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": percentile(samples, 95),
        "max_ms": round(max(samples), 1),
    }


# --- server time -----------------------------------------------------------------------------------


def log_in(client: httpx.Client, username: str, password: str) -> None:
    """Log in through the login form, as a browser does (CSRF cookie and token, Referer)."""
    form = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    if form.status_code != 200 or token is None:
        raise RuntimeError(f"the login form did not load: {form.status_code}")
    done = client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token.group(1)},
        headers={"Referer": f"{client.base_url}/accounts/login/"},
    )
    if done.status_code != 302 or "sessionid" not in client.cookies:
        raise RuntimeError(f"logging in as {username} failed: {done.status_code}")


def server_times(
    base: str, found: list[Page], username: str, password: str, rounds: int, warmup: int, log: Log
) -> tuple[dict[str, list[float]], bool]:
    """Milliseconds per response of every page (200 required), rounds interleaved page by page."""
    samples: dict[str, list[float]] = {p.path: [] for p in found}
    rng = random.Random(31)
    server_timing = False
    with httpx.Client(base_url=base, timeout=60, follow_redirects=False) as client:
        log_in(client, username, password)
        order = list(found)
        for i in range(warmup + rounds):
            rng.shuffle(order)
            for page in order:
                started = time.perf_counter()
                response = client.get(page.path)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(f"GET {page.path} ({page.name}): {response.status_code}, not 200")
                if not response.headers.get("content-type", "").startswith("text/html"):
                    raise RuntimeError(
                        f"GET {page.path} ({page.name}) is not HTML ({response.headers.get('content-type')}): "
                        "name it in memoryhub.bench.pages.EXCLUDED"
                    )
                server_timing = server_timing or "server-timing" in response.headers
                if i >= warmup:
                    samples[page.path].append(elapsed)
            if i >= warmup:
                log(f"  server: round {i - warmup + 1}/{rounds} done")
    return samples, server_timing


# --- Chromium load time --------------------------------------------------------------------------

NAVIGATION = """() => {
  const n = performance.getEntriesByType('navigation')[0];
  return {load: n.loadEventEnd - n.startTime, dcl: n.domContentLoadedEventEnd - n.startTime};
}"""


def load_times(
    base: str, found: list[Page], username: str, password: str, rounds: int, warmup: int, log: Log
) -> dict[str, dict[str, list[float]]]:
    """Chromium's load and DOMContentLoaded times (ms from navigation start) of every page."""
    from playwright.sync_api import sync_playwright

    samples: dict[str, dict[str, list[float]]] = {p.path: {"load": [], "dcl": []} for p in found}
    rng = random.Random(32)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": 1366, "height": 900})
            tab = context.new_page()
            tab.goto(f"{base}/accounts/login/")
            tab.fill("#id_username", username)
            tab.fill("#id_password", password)
            tab.click("button[type=submit]")
            tab.wait_for_load_state()
            if "/accounts/login/" in tab.url:
                raise RuntimeError(f"Chromium: logging in as {username} failed")
            order = list(found)
            for i in range(warmup + rounds):
                rng.shuffle(order)
                for page in order:
                    response = tab.goto(base + page.path, wait_until="load")
                    status = response.status if response else None
                    if status != 200:
                        raise RuntimeError(f"Chromium: {page.path} ({page.name}): {status}, not 200")
                    tab.wait_for_function(
                        "performance.getEntriesByType('navigation')[0].loadEventEnd > 0", timeout=30_000
                    )
                    timing = tab.evaluate(NAVIGATION)
                    if i >= warmup:
                        samples[page.path]["load"].append(float(timing["load"]))
                        samples[page.path]["dcl"].append(float(timing["dcl"]))
                if i >= warmup:
                    log(f"  chromium: round {i - warmup + 1}/{rounds} done")
            context.close()
        finally:
            browser.close()
    return samples


# --- the demo ----------------------------------------------------------------------------------------


def prepare_demo(log: Log) -> None:
    """Load the demo (as ``manage.py load_demo`` does, metric rollups included) unless it is loaded,
    then ANALYZE: fresh planner statistics, as a running deployment's would be (like the other
    benches after preparing their data). A just-loaded demo has none for its small tables, and the
    planner's guesses can cost a page far more than its data does (see the search page)."""
    from memoryhub.demo import loader

    Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)  # the load writes the demo API key there
    if loader.is_loaded():
        log("pages: the demo is loaded in this database; measuring it as it is")
    else:
        log("pages: loading the demo (manage.py load_demo; about 20 s)")
        loader.load(lambda msg: log(f"  demo: {msg}"), backdate=True, rollups=True)
    loader.analyze_tables()


def table(rows: list[dict[str, Any]], overall: dict[str, Any]) -> list[str]:
    lines = [
        f"{'page':<34} {'path':<58} {'srv p50':>8} {'srv p95':>8} {'load p50':>9} {'load p95':>9}",
    ]
    for row in rows:
        path = row["path"] if len(row["path"]) <= 58 else row["path"][:55] + "..."
        lines.append(
            f"{row['name'].removeprefix('memoryhub:'):<34} {path:<58} "
            f"{row['server']['p50_ms']:>8.1f} {row['server']['p95_ms']:>8.1f} "
            f"{row['load']['p50_ms']:>9.1f} {row['load']['p95_ms']:>9.1f}"
        )
    s, ld = overall["server_p95_ms"], overall["load_p95_ms"]
    lines.append(
        f"overall p95: server {s:.1f} ms (goal <= {GOAL_SERVER_P95_MS:g}: "
        f"{'met' if overall['server_goal_met'] else 'MISSED'}), Chromium load {ld:.1f} ms "
        f"(goal <= {GOAL_LOAD_P95_MS:g}: {'met' if overall['load_goal_met'] else 'MISSED'})"
    )
    return lines


def run(
    rounds: int = 20,
    load_rounds: int = 5,
    warmup: int = 2,
    workers: int = 2,
    log: Log = print,
) -> dict[str, Any]:
    from memoryhub.demo import scenario

    prepare_demo(log)
    found = pages()  # every ORM read before Playwright starts (its loop makes the ORM refuse)
    nav = sum(1 for p in found if "<" not in p.route)
    log(f"pages: {len(found)} pages ({nav} nav, {len(found) - nav} detail); {len(EXCLUDED)} routes excluded")
    user, password = scenario.DEMO_USERNAME, scenario.DEMO_PASSWORD
    with running_server(workers=workers) as base:
        log(f"pages: server time, {rounds} rounds after {warmup} warm-up, gunicorn ({workers} workers)")
        server, server_timing = server_times(base, found, user, password, rounds, warmup, log)
        log(f"pages: Chromium load time, {load_rounds} rounds after 1 warm-up")
        browser = load_times(base, found, user, password, load_rounds, 1, log)

    rows: list[dict[str, Any]] = [
        {
            "name": p.name,
            "route": p.route,
            "path": p.path,
            "server": _figures(server[p.path]),
            "load": _figures(browser[p.path]["load"]),
            "dom_content_loaded": _figures(browser[p.path]["dcl"]),
        }
        for p in found
    ]
    all_server = [v for values in server.values() for v in values]
    all_load = [v for by in browser.values() for v in by["load"]]
    overall = {
        "server_p95_ms": percentile(all_server, 95),
        "load_p95_ms": percentile(all_load, 95),
        "dom_content_loaded_p95_ms": percentile([v for by in browser.values() for v in by["dcl"]], 95),
    }
    overall["server_goal_met"] = overall["server_p95_ms"] <= GOAL_SERVER_P95_MS
    overall["load_goal_met"] = overall["load_p95_ms"] <= GOAL_LOAD_P95_MS
    source = "server time is the HTTP response time measured by the client on loopback" + (
        " (the app sends Server-Timing too; not read here)"
        if server_timing
        else " (the app sends no Server-Timing header)"
    )
    log(f"pages: {source}")
    for line in table(rows, overall):
        log(line)
    slow = [r["path"] for r in rows if r["server"]["p95_ms"] > GOAL_SERVER_P95_MS]
    slow_load = [r["path"] for r in rows if r["load"]["p95_ms"] > GOAL_LOAD_P95_MS]
    if slow or slow_load:
        log(
            f"pages over a goal on their own (p95): server {', '.join(slow) or 'none'}; "
            f"load {', '.join(slow_load) or 'none'}"
        )
    return {
        "pages": len(found),
        "rounds": rounds,
        "load_rounds": load_rounds,
        "server_time_source": source,
        "server_p95_ms": overall["server_p95_ms"],
        "load_p95_ms": overall["load_p95_ms"],
        "dom_content_loaded_p95_ms": overall["dom_content_loaded_p95_ms"],
        "goals_ms": {"server_p95": GOAL_SERVER_P95_MS, "load_p95": GOAL_LOAD_P95_MS},
        "meets_goals": overall["server_goal_met"] and overall["load_goal_met"],
        "slow_pages": slow,
        "slow_load_pages": slow_load,
        "excluded": EXCLUDED,
        "per_page": {row["path"]: row for row in rows},
    }
