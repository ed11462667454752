"""Every route gets hostile input — enumerated from the URL resolver, not listed.

The walker takes every URL pattern of ``memoryhub.urls`` (API, pages, ``/v1/traces``, the admin
site) and finds what it can write to:

* API routes: the operation's body fields and parameters from the OpenAPI schema
  (drf-spectacular, ``/api/schema/``), on top of a realistic body (the hostile-input test's
  bases, else the schema's required fields);
* pages and the admin site: every ``<form>`` of every page the walker can GET (its action, its
  fields and their default values), as an admin and superuser of the seed tenant;
* ``/v1/traces``: hostile OTLP documents (JSON and protobuf).

Each field gets the hostile set — NUL, a lone surrogate, 10,000-deep nesting, a huge integer,
wrong types, a 100,000-character token — and every door that takes a body gets compressed bombs.
The answer must cost at most ``BUDGET`` seconds of CPU (the work a hostile value makes the server
do, measured on the thread that serves it, whatever else the machine runs), come within ``HANG``
seconds of wall time, and never be a 5xx; an unstorable value (NUL,
surrogate, deep nesting, integers past 64 bits, bombs) must be refused with a 4xx — the JSON error
``{"error", "detail"}`` on the API and OTLP, a 4xx page or form error on pages — and a refused
request must leave the row count of every model as it was.

A route the walker cannot reach must be in ``UNEXERCISED`` with a reason; any other route it
cannot reach fails the test, so a route added tomorrow is walked (or named) without editing here.
"""

from __future__ import annotations

import gzip
import json
import re
import time
import zlib
from html.parser import HTMLParser
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import zstandard
from django.apps import apps
from django.core.cache import cache
from django.test import Client
from django.urls import resolve
from django.urls.exceptions import Resolver404

from memoryhub.core import inflate
from tests.hardening.test_hostile_input import REJECTION_RECORDS, SCHEMA, SEED_WF, _bases, _body_properties
from tests.hardening.world import REVIEW_WF
from tests.helpers import url_routes

pytestmark = pytest.mark.slow

BUDGET = 2.0  # seconds of CPU per request: a quadratic parse or regex shows here
HANG = 20.0  # seconds of wall time per request: a wait that never ends shows here
TOKEN = "x" * 100_000
DEEP = 10_000

# Routes the walker cannot exercise, each with the reason. Anything else it cannot reach fails.
UNEXERCISED = {
    "favicon.ico": "a redirect to a static file; takes no input",
    "api/schema/": "the OpenAPI document the walker reads its fields from; takes no input",
    "api/docs/": "Swagger UI page (static HTML of the sidecar); takes no input",
    "admin/r/<path:content_type_id>/<path:object_id>/": "admin 'view on site' redirect; no model defines get_absolute_url",
    "admin/(?P<url>.*)$": "admin catch-all (a 404 for anything else)",
    "admin/logout/": "logout: POST with no fields",
    "accounts/logout/": "logout: POST with no fields",
}


# Found by the walker, in modules this branch does not own: strict, so a fix turns them red and the
# entry goes.
KNOWN_FAILING: dict[str, str] = {}  # none today (strict xfails: an entry fixed fails until it goes)


# --- the routes ---------------------------------------------------------------------------------


ROUTES = url_routes()
KWARG = re.compile(r"<(?:(\w+):)?(\w+)>|\(\?P<(\w+)>[^)]*\)")


def _kind(route: str) -> str:
    if route.startswith("api/"):
        return "api"
    if route.startswith("v1/"):
        return "otlp"
    if route.startswith("admin/"):
        return "admin"
    return "page"


# --- values for path parameters, by name ---------------------------------------------------------


def _kwarg_values(w, route: str) -> dict[str, str]:
    mine = w.mine
    values = {
        "wf": SEED_WF,
        "summary_id": w.summaries.get("proposed") or mine.summary_ids[0],
        "job_id": str(mine.job_ids[0]),
        "trace_id": str(mine.trace_ids[0]),
        "artifact_id": mine.artifact_ids[0],
        "prefix": mine.key_prefixes[-1],
        "username": "bob",
        "from_seq": "1",
        "to_seq": "5",
        "action": "approve",
        "app_label": "memoryhub",
        "compactor": apps.get_model("memoryhub", "Summary")
        .objects.get(summary_id=mine.summary_ids[0])
        .compactor_name,
    }
    rule = route.startswith(("api/v1/alert-rules/", "alerts/rules/"))
    values["pk"] = str(mine.rule_ids[0] if rule else mine.channel_ids[0])
    if "summaries/<str:summary_id>/" in route and "workflows" not in route:
        values["wf"] = REVIEW_WF
    if route.startswith("admin/") and "<path:object_id>" in route:
        app_label, model_name = route.split("/")[1:3]
        model = apps.get_model(app_label, model_name)
        first = model._default_manager.order_by("pk").first()
        values["object_id"] = str(first.pk) if first else ""
    if route.startswith("admin/auth/user/<id>/"):
        values["id"] = str(w.parties["alice"].user.pk)
    return values


def _fill(w, route: str) -> str | None:
    """The route with real ids, or None when a parameter has no value (the route is unreachable)."""
    values = _kwarg_values(w, route)
    missing = []

    def sub(match: re.Match) -> str:
        name = match.group(2) or match.group(3)
        if not values.get(name):
            missing.append(name)
            return ""
        return quote(values[name], safe="")

    url = "/" + KWARG.sub(sub, route).rstrip("$")
    if route == "admin/^(?P<app_label>auth|memoryhub|audit|triggers)/$" or "(?P<app_label>" in route:
        url = "/admin/memoryhub/"
    return None if missing else url


# --- hostile values ----------------------------------------------------------------------------

UNSTORABLE = "unstorable"  # must be refused (4xx) wherever it goes
LEGAL = "legal"  # may be refused or stored, never a 5xx or slow

# (label, JSON value, strictness); a placeholder for the deep nesting (json.dumps cannot write it)
JSON_VALUES: list[tuple[str, Any, str]] = [
    ("nul", "a\x00b", UNSTORABLE),
    ("surrogate", "x\ud800y", UNSTORABLE),
    ("deep", "__deep__", UNSTORABLE),
    ("huge-int", 2**70, UNSTORABLE),
    ("object-for-scalar", {"x": [1]}, LEGAL),
    ("text-for-anything", "not-a-number", LEGAL),
    ("token-100k", TOKEN, LEGAL),
]
# Form fields are text: the same set, as text.
FORM_VALUES: list[tuple[str, str, str]] = [
    ("nul", "a\x00b", UNSTORABLE),
    ("surrogate", "x\ud800y", UNSTORABLE),
    ("deep", "[" * DEEP, LEGAL),
    ("huge-int", "9" * 40, LEGAL),
    ("wrong-type", '{"x": [1]}', LEGAL),
    ("token-100k", TOKEN, LEGAL),
]


def _json_body(body: Any) -> bytes:
    text = json.dumps(body, ensure_ascii=True)
    return text.replace('"__deep__"', "[" * DEEP + "1" + "]" * DEEP).encode()


def _form_body(fields: list[tuple[str, str]]) -> bytes:
    def enc(text: str) -> str:
        return quote(text.encode("utf-8", "surrogatepass"), safe="")

    return "&".join(f"{enc(k)}={enc(v)}" for k, v in fields).encode()


def _bombs() -> list[tuple[str, bytes]]:
    """A bomb in every content coding the server inflates (memoryhub.core.inflate.ENCODINGS)."""
    zeros = b"\0" * (24 * 1024 * 1024)  # 24 MiB inflated: three times the 8 MiB body limit
    compress = {
        "gzip": lambda: gzip.compress(zeros, 9),
        "deflate": lambda: zlib.compress(zeros, 9),
        "zstd": lambda: zstandard.ZstdCompressor(level=19).compress(zeros),
    }
    assert set(compress) == set(inflate.ENCODINGS) - {"identity"}, "a coding the walker sends no bomb in"
    return [(coding, make()) for coding, make in compress.items()]


BOMBS = _bombs()


# --- asking and judging -----------------------------------------------------------------------


def _counts() -> dict[str, int]:
    return {m._meta.label: m._default_manager.count() for m in apps.get_models() if m._meta.managed}


class Walk:
    """Sends requests, judges each answer, and collects every violation (reported at the end)."""

    def __init__(self, client: Client, kind: str):
        self.client, self.kind, self.problems, self.sent = client, kind, [], 0

    def send(self, label: str, strict: str, method: str, url: str, body: bytes, content_type: str, **extra):
        cache.clear()  # throttles: each request on its own
        before = _counts()
        # The test client serves the request on this thread, so its CPU time is the server's work
        # (on SQLite, the database's too). Wall time on a 2-core machine running both CI databases
        # side by side measured 10x the idle time for a 5 ms request: a scheduling verdict, not ours.
        start, cpu_start = time.perf_counter(), time.thread_time()
        response = self.client.generic(method, url, body, content_type=content_type, **extra)
        cpu, elapsed = time.thread_time() - cpu_start, time.perf_counter() - start
        self.sent += 1
        status = response.status_code
        where = f"{method} {url} {label}"
        if cpu > BUDGET:
            self.problems.append(f"{where}: cost {cpu:.2f}s of CPU (budget {BUDGET}s)")
        if elapsed > HANG:
            self.problems.append(f"{where}: took {elapsed:.2f}s (hang limit {HANG}s)")
        if status >= 500:
            self.problems.append(f"{where}: {status} {response.content[:200]!r}")
            return
        if strict == UNSTORABLE and status < 400 and not (status == 200 and self._form_error(response)):
            self.problems.append(f"{where}: accepted with {status}")
        if 400 <= status < 500 or strict == UNSTORABLE:
            if self.kind in ("api", "otlp") and 400 <= status < 500:
                try:
                    data = json.loads(response.content)
                except ValueError:
                    data = None
                if not (isinstance(data, dict) and "error" in data and "detail" in data):
                    self.problems.append(
                        f"{where}: {status} without the JSON error: {response.content[:120]!r}"
                    )
            after = _counts()
            changed = {t: (before[t], after[t]) for t in before if before[t] != after[t]}
            if status == 409:
                changed = {
                    t: c for t, c in changed.items() if t.lower().replace(".", "_") not in REJECTION_RECORDS
                }
            if changed:
                self.problems.append(f"{where}: refused ({status}) but wrote {changed}")

    @staticmethod
    def _form_error(response) -> bool:
        # A page that answers a form error re-renders the form (200) with an error list.
        return b"errorlist" in response.content or b"errornote" in response.content

    def bombs(self, method: str, url: str, content_type: str, **extra) -> None:
        for coding, bomb in BOMBS:
            self.send(
                f"{coding}-bomb",
                UNSTORABLE,
                method,
                url,
                bomb,
                content_type,
                HTTP_CONTENT_ENCODING=coding,
                **extra,
            )

    def verdict(self, route: str) -> None:
        assert self.sent, f"{route}: no request was sent"
        assert not self.problems, f"{route}: {len(self.problems)} problems:\n" + "\n".join(self.problems[:25])


# --- API ----------------------------------------------------------------------------------------


def _schema_path(route: str) -> str:
    # drf-spectacular names a <pk> path parameter {id}
    return "/" + KWARG.sub(lambda m: "{" + (m.group(2) or m.group(3)) + "}", route).replace("{pk}", "{id}")


def _operations(route: str) -> list[tuple[str, dict]]:
    methods = SCHEMA["paths"].get(_schema_path(route), {})
    return [(m, op) for m, op in methods.items() if m in ("get", "post", "put", "patch", "delete")]


def _schema_base(op: dict) -> dict:
    """Required fields filled by type, for an operation without a realistic base."""
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    ref = body.get("$ref", "").rsplit("/", 1)[-1]
    component = SCHEMA["components"]["schemas"].get(ref, {})
    samples = {"string": "walker", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}
    return {
        name: samples.get(component.get("properties", {}).get(name, {}).get("type"), "walker")
        for name in component.get("required", [])
    }


def _walk_api(w, route: str, url: str, walk: Walk) -> None:
    operations = _operations(route)
    assert operations, f"{route}: no operation in /api/schema/ — document it or list it in UNEXERCISED"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {w.parties['alice'].key.secret}"}
    bases = _bases(w)
    for method, op in operations:
        params = [p["name"] for p in op.get("parameters", []) if p.get("in") == "query" and "name" in p] or [
            "page"
        ]
        for name in params:
            for label, value, strict in FORM_VALUES[:2] + FORM_VALUES[3:4]:
                query = f"?{quote(name)}={quote(value.encode('utf-8', 'surrogatepass'), safe='')}"
                walk.send(
                    f"?{name}={label}", strict, method.upper(), url + query, b"", "application/json", **auth
                )
        if method not in ("post", "put", "patch"):
            continue
        base = bases.get((method, _schema_path(route)), None) or _schema_base(op)
        fields = _body_properties(SCHEMA, op) or sorted(base) or ["anything"]
        for name in fields:
            for label, value, strict in JSON_VALUES:
                walk.send(
                    f"{name}={label}",
                    strict,
                    method.upper(),
                    url,
                    _json_body({**base, name: value}),
                    "application/json",
                    **auth,
                )
        walk.send(
            "deep-body", UNSTORABLE, method.upper(), url, _json_body("__deep__"), "application/json", **auth
        )
        walk.bombs(method.upper(), url, "application/json", **auth)


# --- OTLP ----------------------------------------------------------------------------------------


def _otlp_document(attrs: list[dict], resource: Any = None) -> dict:
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "chat gpt-4.1-mini",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": attrs,
    }
    rs = {"scopeSpans": [{"scope": {"name": "walker"}, "spans": [span]}]}
    rs["resource"] = resource if resource is not None else {"attributes": []}
    return {"resourceSpans": [rs]}


def _attr(key: str, value: Any) -> dict:
    return {"key": key, "value": {"stringValue": value}}


def _otlp_leaves(value: Any, where: tuple = ()) -> list[tuple]:
    found = [where] if where else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _otlp_leaves(item, (*where, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += _otlp_leaves(item, (*where, i))
    return found


def _replace(doc: Any, where: tuple, value: Any) -> Any:
    doc = json.loads(json.dumps(doc))
    target = doc
    for part in where[:-1]:
        target = target[part]
    target[where[-1]] = value
    return doc


def _protobuf(text: str) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    message = ExportTraceServiceRequest()
    span = message.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes(16), bytes(8), "chat"
    span.attributes.append(KeyValue(key="gen_ai.conversation.id", value=AnyValue(string_value=text)))
    span.attributes.append(KeyValue(key="gen_ai.operation.name", value=AnyValue(string_value="chat")))
    return message.SerializeToString()


def _walk_otlp(w, route: str, url: str, walk: Walk) -> None:
    auth = {"HTTP_AUTHORIZATION": f"Bearer {w.parties['alice'].key.secret}"}
    base = _otlp_document(
        [
            _attr("gen_ai.conversation.id", "walker-conv"),
            _attr("gen_ai.operation.name", "chat"),
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
            _attr("gen_ai.output.messages", "[]"),
        ]
    )
    # every node of a realistic document gets every hostile value (wrong types included)
    for where in _otlp_leaves(base):
        for label, value, strict in JSON_VALUES:
            body = _json_body(_replace(base, where, value))
            walk.send(
                f"{'.'.join(map(str, where))}={label}", strict, "POST", url, body, "application/json", **auth
            )
    walk.send(
        "resource=abc",
        LEGAL,
        "POST",
        url,
        _json_body(_otlp_document([], resource="abc")),
        "application/json",
        **auth,
    )
    nested = "[" * 5000 + "]" * 5000
    walk.send(
        "deep-5000",
        UNSTORABLE,
        "POST",
        url,
        b'{"resourceSpans": ' + nested.encode() + b"}",
        "application/json",
        **auth,
    )
    walk.send("deep-body", UNSTORABLE, "POST", url, _json_body("__deep__"), "application/json", **auth)
    for label, text in (("nul", "conv\x00x"), ("surrogate-bytes", "conv")):
        body = _protobuf(text)
        if label == "surrogate-bytes":  # an invalid UTF-8 string field, as a hostile client writes it
            body = body.replace(b"conv", b"co\xed\xa0\x80")
        walk.send(f"protobuf-{label}", UNSTORABLE, "POST", url, body, "application/x-protobuf", **auth)
    for ctype in ("application/json", "application/x-protobuf"):
        walk.bombs("POST", url, ctype, **auth)


# --- pages and the admin site -----------------------------------------------------------------


class _Forms(HTMLParser):
    """Every <form> of a page: (method, action, [(name, default value)])."""

    def __init__(self):
        super().__init__()
        self.forms: list[tuple[str, str, list[tuple[str, str]]]] = []
        self._select: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append(((a.get("method") or "get").lower(), a.get("action") or "", []))
        elif not self.forms:
            return
        elif (
            tag in ("input", "textarea")
            and a.get("name")
            and a.get("type") not in ("submit", "button", "file")
        ):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self.forms[-1][2].append((a["name"], a.get("value") or ""))
        elif tag == "select" and a.get("name"):
            self._select = a["name"]
            self.forms[-1][2].append((a["name"], ""))
        elif tag == "option" and self._select and self.forms[-1][2][-1][1] == "":
            self.forms[-1][2][-1] = (self._select, a.get("value") or "")

    def handle_endtag(self, tag):
        if tag == "select":
            self._select = None


def _page_forms(client: Client, url: str) -> list[tuple[str, str, list[tuple[str, str]]]]:
    response = client.get(url)
    if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        return []
    parser = _Forms()
    parser.feed(response.content.decode("utf-8", "replace"))
    return [(m, urlsplit(action).path or url, fields) for m, action, fields in parser.forms]


def _forms_by_route(client: Client, urls: dict[str, str]) -> dict[str, list]:
    """route -> forms (from every reachable page) whose action resolves to that route."""
    found: dict[str, list] = {}
    for url in urls.values():
        for method, action, fields in _page_forms(client, url):
            try:
                target = resolve(action).route
            except Resolver404:
                continue
            found.setdefault(target, []).append((method, action, fields))
    return found


def _walk_forms(route: str, url: str, forms: list, walk: Walk) -> None:
    seen = set()
    for method, action, fields in forms:
        key = (method, action, tuple(name for name, _ in fields))
        if key in seen:
            continue
        seen.add(key)
        names = [name for name, _ in fields if name != "csrfmiddlewaretoken"] or ["anything"]
        for name in names:
            for label, value, strict in FORM_VALUES:
                filled = [(n, value if n == name else v) for n, v in fields if n != "csrfmiddlewaretoken"]
                if name == "anything":
                    filled.append((name, value))
                if method == "post":
                    walk.send(
                        f"{name}={label}",
                        strict,
                        "POST",
                        action,
                        _form_body(filled),
                        "application/x-www-form-urlencoded",
                    )
                else:
                    walk.send(
                        f"?{name}={label}", strict, "GET", action + "?" + _form_body(filled).decode(), b"", ""
                    )
        if method == "post":
            walk.bombs("POST", action, "application/x-www-form-urlencoded")


# --- the test ----------------------------------------------------------------------------------

WALKED = [route for route, _ in ROUTES if route not in UNEXERCISED]


def _walked_param(route: str):
    reason = KNOWN_FAILING.get(route)
    return pytest.param(
        route, id=route, marks=[pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    )


def test_unexercised_routes_exist_and_are_few():
    routes = {route for route, _ in ROUTES}
    # admin entries apply when the admin site is on (MEMORYHUB_ADMIN_SITE); otherwise it has no routes
    listed = {
        r for r in UNEXERCISED if not r.startswith("admin/") or any(x.startswith("admin/") for x in routes)
    }
    assert listed <= routes, listed - routes  # a stale entry
    assert len(WALKED) > 100, len(WALKED)


@pytest.fixture(scope="module")
def page_forms(world, django_db_blocker):
    """Forms of every reachable page and admin page (GETs write nothing), by target route."""
    with django_db_blocker.unblock():
        world.refresh()
        alice = world.parties["alice"].user
        alice.is_staff = alice.is_superuser = True
        alice.save()
        client = Client()
        client.force_login(alice)
        urls = {}
        for route, _ in ROUTES:
            if _kind(route) in ("page", "admin") and route not in UNEXERCISED:
                url = _fill(world, route)
                if url:
                    urls[route] = url
        found = _forms_by_route(client, urls)
    yield client, urls, found
    with django_db_blocker.unblock():
        alice.is_staff = alice.is_superuser = False
        alice.save()


@pytest.mark.impossible_state(
    "the admin pages are walked as a staff user (is_staff is set by createsuperuser, no service)"
)
@pytest.mark.parametrize("route", [_walked_param(r) for r in WALKED])
def test_every_route_answers_hostile_input_with_a_4xx_and_writes_nothing(route, w, page_forms):
    client, urls, forms = page_forms
    kind = _kind(route)
    url = _fill(w, route)
    assert url, (
        f"{route}: a path parameter has no value: add it to _kwarg_values or list the route in UNEXERCISED"
    )
    walk = Walk(client if kind in ("page", "admin") else Client(), kind)
    if kind == "api":
        _walk_api(w, route, url, walk)
    elif kind == "otlp":
        _walk_otlp(w, route, url, walk)
    else:
        route_key = resolve(url).route
        # a route no form points to (POST-only, or a form on a page the walker cannot reach) still
        # gets a hostile form body
        targets = forms.get(route_key) or [("post", url, [])]
        # every page also gets hostile query parameters and path ids
        for label, value, strict in FORM_VALUES[:2]:
            walk.send(
                f"?q={label}",
                strict,
                "GET",
                url + "?q=" + quote(value.encode("utf-8", "surrogatepass"), safe=""),
                b"",
                "",
            )
        _walk_forms(route, url, targets, walk)
    walk.verdict(route)
