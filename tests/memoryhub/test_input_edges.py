"""Every malformed input named in the hardening issue is a 4xx with the JSON error shape (or a
styled 400 page) and writes nothing — on SQLite and on PostgreSQL (which refuses NUL in text,
32-bit overflows and time-zone offsets beyond ±15:59 where SQLite stores anything).

The property-based sweep over every field of every endpoint is tests/hardening/test_hostile_input.py;
these are the named cases, deterministic, so a regression names itself.
"""

from __future__ import annotations

import json

import pytest
from django.apps import apps
from django.db import DatabaseError, transaction

from tests.factories import alert_channel, alert_rule, append, candidate, event, make_workflow

pytestmark = pytest.mark.django_db

WF = "edge-wf"


def fingerprint() -> dict[str, int]:
    return {
        model._meta.db_table: model._default_manager.count()
        for label in ("memoryhub", "audit", "triggers")
        for model in apps.get_app_config(label).get_models()
    }


@pytest.fixture
def world(tenant, alice):
    wf = make_workflow(tenant, WF)
    append(wf, [event(i) for i in range(1, 6)])
    rule = alert_rule(tenant, name="r")
    channel = alert_channel(tenant, name="c", url="https://hooks.example.com/c")
    return {"wf": wf, "rule": rule, "channel": channel, "summary": candidate(wf, 1, 5)}


def deep(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def cases(world) -> list[tuple[str, str, str, object]]:
    """(label, method, url, raw JSON body or None)."""
    rule, sid = world["rule"].pk, world["summary"].summary_id
    ev = f"/api/v1/workflows/{WF}/events/"
    out: list[tuple[str, str, str, object]] = [
        ("NUL in a path id", "get", "/api/v1/workflows/edge%00wf/", None),
        ("NUL in a summary id", "get", "/api/v1/summaries/sum%00x/", None),
        ("NUL in alerts query", "get", "/api/v1/alerts/?since=%00", None),
        ("NUL in alerts filter", "get", "/api/v1/alerts/?to_state=%00", None),
        ("NUL in audit query", "get", "/api/v1/audit/?action=%00", None),
        ("NUL in audit workflow filter", "get", "/api/v1/audit/?workflow=a%00", None),
        ("NUL in search", "get", "/api/v1/workflows/?search=%00", None),
        ("offset +17:18 in a filter", "get", "/api/v1/alerts/?since=2026-01-01T00:00:00%2B17:18", None),
        ("offset +99:00 in a filter", "get", "/api/v1/alerts/?since=2026-01-01T00:00:00%2B99:00", None),
        ("NUL in event content", "post", ev, {"events": [{"kind": "message", "content": "a\u0000b"}]}),
        ("NUL in a key", "post", ev, {"events": [{"kind": "message", "content": "x", "\u0000": 1}]}),
        ("lone surrogate", "post", ev, '{"events": [{"kind": "message", "content": "\\ud800"}]}'),
        ("10,000-deep JSON", "post", ev, '{"events": ' + deep(10_000) + "}"),
        ("70-deep JSON", "post", ev, '{"events": ' + deep(70) + "}"),
        ("event without content", "post", ev, {"events": [{"kind": "message", "agent": "a"}]}),
        ("1e400", "post", ev, '{"events": [], "expected_head": 1e400}'),
        (
            "2**63 expected head",
            "post",
            ev,
            {"events": [{"kind": "message", "content": "x"}], "expected_head": 2**63},
        ),
        (
            "2**63 tokens",
            "post",
            "/api/v1/triggers/evaluate/",
            {"workflow": WF, "current_tokens": 2**63, "expected_next_step_tokens": 1},
        ),
        (
            "int64-max tokens that overflow when added",
            "post",
            "/api/v1/triggers/evaluate/",
            {"workflow": WF, "current_tokens": 2**63 - 1, "expected_next_step_tokens": 2**63 - 1},
        ),
        (
            "2**31 step tokens on a decision that is stored",
            "post",
            f"/api/v1/workflows/{WF}/trigger/",
            {"expected_next_step_tokens": 2**63 - 1},
        ),
        ("2**31 budget", "put", "/api/v1/triggers/policy/", {"target_tokens": 2**31}),
        ("2**31 reserve", "put", "/api/v1/triggers/policy/", {"reserve_system": 2**31}),
        ("2**31 minutes", "post", f"/api/v1/alert-rules/{rule}/mute/", {"minutes": 2**31}),
        ("int64-max minutes", "post", f"/api/v1/alert-rules/{rule}/mute/", {"minutes": 2**63 - 1}),
        ("2**31 window", "patch", f"/api/v1/alert-rules/{rule}/", {"window_minutes": 2**31}),
        (
            "offset +17:18",
            "patch",
            f"/api/v1/alert-rules/{rule}/",
            {"muted_until": "2026-12-01T12:00:00+17:18"},
        ),
        (
            "offset +99:00",
            "patch",
            f"/api/v1/alert-rules/{rule}/",
            {"muted_until": "2026-12-01T12:00:00+99:00"},
        ),
        (
            "mute until +17:18",
            "post",
            f"/api/v1/alert-rules/{rule}/mute/",
            {"until": "2026-12-01T12:00:00+17:18"},
        ),
        (
            "year 9999 mute",
            "post",
            f"/api/v1/alert-rules/{rule}/mute/",
            {"until": "9999-12-31T23:59:59-14:00"},
        ),
        ("non-string reason", "post", f"/api/v1/summaries/{sid}/approve/", {"reason": 5}),
        ("list reason", "post", f"/api/v1/summaries/{sid}/reject/", {"reason": ["x"]}),
        (
            "non-string purge reason",
            "post",
            f"/api/v1/workflows/{WF}/purge/",
            {"reason": {"a": 1}, "seqs": [1]},
        ),
        (
            "2**31 trace tokens",
            "post",
            f"/api/v1/workflows/{WF}/traces/",
            {
                "agent": "a",
                "model_call_id": "m",
                "tail_to_seq": 5,
                "input_tokens": 2**31,
            },
        ),
        ("2**31 purge seq", "post", f"/api/v1/workflows/{WF}/purge/", {"reason": "r", "seqs": [2**31]}),
        ("2**31 source revision", "post", f"/api/v1/workflows/{WF}/compactions/", {"source_revision": 2**31}),
        ("2**63-1 limit", "get", "/api/v1/alerts/?limit=9223372036854775807", None),
        ("huge page", "get", "/api/v1/workflows/?page=99999999999999999999", None),
    ]
    return out


def test_every_named_malformed_input_is_a_4xx_and_writes_nothing(alice, world):
    failures = []
    alice.api.raise_request_exception = False  # a 500 is a finding to list, not a crash
    for label, method, url, body in cases(world):
        raw = body if isinstance(body, str) or body is None else json.dumps(body)
        before = fingerprint()
        try:
            with transaction.atomic():  # a database error must not poison the next case
                response = alice.api.generic(
                    method.upper(), url, (raw or "").encode(), content_type="application/json"
                )
        except DatabaseError as exc:
            failures.append(f"{label}: database error {exc!r:.200}")
            continue
        status = response.status_code
        if status >= 500 or (status >= 400 and set(response.json()) < {"error", "detail"}):
            failures.append(f"{label}: {status} {response.content[:200]!r}")
        elif status >= 400 and response.json()["error"] == "invalid_value":
            # The database refused it (the error handler's safety net): the edge missed it.
            failures.append(f"{label}: reached the database unvalidated")
        elif status >= 400 and fingerprint() != before:
            failures.append(f"{label}: {status} but wrote something")
        elif status < 400 and label not in ("2**63-1 limit",):
            failures.append(f"{label}: accepted with {status} {response.content[:200]!r}")
    assert not failures, "\n".join(failures)


def test_pages_answer_nul_with_a_styled_400(alice, world):
    for url in ("/workflows/edge%00wf/", "/alerts/?hours=%00", f"/workflows/{WF}/?q=a%00"):
        response = alice.web.get(url)
        assert response.status_code == 400, (url, response.status_code)
        assert b"Bad request" in response.content and b"<html" in response.content.lower()


def test_nul_in_a_header_or_cookie_is_a_400_before_any_lookup(world, client):
    response = client.get("/api/v1/workflows/", HTTP_AUTHORIZATION="Bearer mh_\x00x")
    assert response.status_code == 400 and response.json()["error"] == "invalid_text"
    response = client.get("/overview/", HTTP_COOKIE="sessionid=abc\x00def")
    assert response.status_code == 400 and b"Bad request" in response.content


def test_every_number_filter_is_bounded_to_what_the_database_holds():
    """The class behind ``?rule=-7.7e+49`` answering 500 on SQLite: a plain NumberFilter hands any
    decimal to the driver. Every filter set of the API uses the bounded integer filter instead."""
    import django_filters

    from memoryhub.web.api import urls  # noqa: F401  (imports every API module and its filter sets)
    from memoryhub.web.api.fields import SafeIntegerFilter

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    ours = [
        fs
        for fs in subclasses(django_filters.FilterSet)
        if fs.__module__.split(".")[0] in {"memoryhub", "audit", "triggers"}
    ]
    assert ours
    loose = [
        f"{fs.__module__}.{fs.__name__}.{name}"
        for fs in ours
        for name, flt in fs.base_filters.items()
        if isinstance(flt, django_filters.NumberFilter) and not isinstance(flt, SafeIntegerFilter)
    ]
    assert loose == []


@pytest.mark.django_db
def test_huge_or_fractional_filter_numbers_are_a_400(api):
    for query in ("rule=-7.693180041825766e%2B49", "rule=9223372036854775808", "rule=1.5"):
        r = api.get(f"/api/v1/alerts/?{query}")
        assert r.status_code == 400, (query, r.status_code)
    assert api.get("/api/v1/workflows/?min_tail_tokens=1e400").status_code == 400
    assert api.get("/api/v1/alerts/?rule=3").status_code == 200
