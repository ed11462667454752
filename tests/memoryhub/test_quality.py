"""Compaction quality (issue 19): salient-token retention, mandatory events, fabricated tokens,
rules-5 vs rules-6, decay across versions, token-estimate drift and missed compactions."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from memoryhub.compaction import get_compactor
from memoryhub.compaction.samples import as_source_events
from memoryhub.compaction.types import SourceEvent
from memoryhub.core import quality as q
from memoryhub.core.canonical import canonical_bytes, sha256_hex
from memoryhub.demo import scenario
from memoryhub.memory.validation import CHECKS_BY_VERSION, WaiverError, apply_waivers, validate_summary
from memoryhub.models import (
    AlertRule,
    ConsumerTrace,
    Event,
    Membership,
    Summary,
    TokenEstimate,
    Workflow,
)
from memoryhub.observe.metrics import compute
from memoryhub.pipeline.jobs import request_compaction
from tests.factories import TEST_ACTOR, append, event, make_workflow

# -- pure: extraction --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "cls", "token"),
    [
        ("see JIRA-4412 and bug-88", q.IDENTIFIERS, "JIRA-4412"),
        ("see JIRA-4412 and bug-88", q.IDENTIFIERS, "bug-88"),
        ("call createPayment first", q.IDENTIFIERS, "createPayment"),
        ("schema PaymentCreate is strict", q.IDENTIFIERS, "PaymentCreate"),
        ("error code insufficient_scope", q.IDENTIFIERS, "insufficient_scope"),
        ("raise ERR_TIMEOUT now", q.IDENTIFIERS, "ERR_TIMEOUT"),
        ("send an Idempotency-Key header", q.IDENTIFIERS, "Idempotency-Key"),
        ("edit src/app/main.py today", q.PATHS, "src/app/main.py"),
        ("open /etc/nginx/nginx.conf.", q.PATHS, "/etc/nginx/nginx.conf"),
        ("read payments-openapi.yaml", q.PATHS, "payments-openapi.yaml"),
        ("docs at https://example.com/a/b?x=1.", q.URLS, "https://example.com/a/b?x=1"),
        ("timeout after 30 s and 250 ms", q.NUMBERS, "250 ms"),
        ("metadata over 500 characters", q.NUMBERS, "500 characters"),
        ("must return 401 Unauthorized", q.STATUS_CODES, "401"),
        ("the API returns 409 on reuse", q.STATUS_CODES, "409"),
        ("run `pytest -k refunds -x` again", q.COMMANDS, "pytest -k refunds -x"),
    ],
)
def test_extract_finds_each_class(text, cls, token):
    assert token in q.extract(text)[cls]


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("we have 500 customers", q.STATUS_CODES),  # a bare number is not a status code
        ("version 3.14.0 shipped", q.NUMBERS),  # no unit
        ("plain words only here", q.IDENTIFIERS),
        ("#10 test-generator/message: x", q.NUMBERS),  # a narrative line prefix is no quantity
    ],
)
def test_extract_ignores_lookalikes(text, cls):
    assert q.extract(text)[cls] == set()


# -- pure: the validator ------------------------------------------------------------------------


def _events(specs):
    return [SourceEvent(seq=i, **spec) for i, spec in enumerate(specs, 1)]


def _validate(content, events, version="rules-6", quality=None, previous=None):
    data = canonical_bytes(content)
    n = max(e.seq for e in events)
    return validate_summary(
        data, sha256_hex(data), 1, n, events, None, None, n, version=version, quality=quality,
        previous_content=previous,
    )  # fmt: skip


def _content(narrative, facts=()):
    return {"schema": "memoryhub.summary/v1", "narrative": narrative, "facts": list(facts), "open_items": []}


def _demo_source():
    return as_source_events(scenario._acme_events())


def test_s3_passes_rules_5_and_fails_rules_6_on_the_401_requirement():
    source = _demo_source()
    s3 = next(s for s in scenario.summary_specs() if s["version"] == 3)
    data = canonical_bytes(s3["content"])
    args = (data, sha256_hex(data), 1, 220, source, None, s3["compactor"]["token_budget"], 220)
    old = validate_summary(*args, version="rules-5")
    assert old.passed and old.validator_version == "rules-5"
    new = validate_summary(*args, version="rules-6")
    assert not new.passed and new.validator_version == "rules-6"
    retention = new.check("salient_retention")
    assert not retention["passed"]
    assert "status_codes 8/9" in retention["detail"] and "lost 401" in retention["detail"]
    assert retention["retention"]["status_codes"]["missing"] == ["401"]
    # Only the free-text loss fails: the fact rules still hold and nothing was invented.
    assert all(c["passed"] for c in new.checks if c["name"] in CHECKS_BY_VERSION["rules-5"])
    assert new.check("fabricated")["passed"]
    # S1 still had it.
    s1 = next(s for s in scenario.summary_specs() if s["version"] == 1)
    assert q.measure(q.build_index(source[:100]), s1["content"]).retention["status_codes"].missing == []


def test_a_requirement_event_without_facts_is_mandatory_until_superseded():
    events = _events(
        [
            {"kind": "requirement", "content": "Requirement: refunds answer 401 without a token."},
            {"kind": "decision", "content": "Decision D9: retry uploads with exponential backoff."},
            {"kind": "approval", "content": "approval-3 pending", "facts": [{"key": "approval-3", "kind": "approval", "text": "release", "state": "pending"}]},
            {"kind": "approval", "content": "approval-3 approved", "facts": [{"key": "approval-3", "kind": "approval", "text": "release", "state": "approved"}]},
        ]
    )  # fmt: skip
    index = q.build_index(events)
    # The pending approval (seq 3) is superseded by seq 4; seqs 1, 2 and 4 stay mandatory.
    assert [m.seq for m in index.mandatory] == [1, 2, 4]
    facts = [
        {
            "key": "approval-3",
            "kind": "approval",
            "text": "release",
            "state": "approved",
            "source_seqs": [3, 4],
        }
    ]
    lost = _validate(_content("Refunds answer 401 without a token. approval-3 done.", facts), events)
    check = lost.check("mandatory_events")
    assert not check["passed"] and "seq 2 (decision)" in check["detail"] and "seq 1" not in check["detail"]
    kept = _validate(
        _content(
            "Refunds answer 401 without a token. Decision D9: retry uploads with exponential backoff.", facts
        ),
        events,
    )
    assert kept.check("mandatory_events")["passed"], kept.check("mandatory_events")
    assert kept.passed, kept.reasons


def test_fabricated_tokens_fail_above_the_policy_threshold():
    events = _events(
        [{"kind": "message", "content": "Fixed bug-88 in src/pay/api.py; createPayment returns 201 Created."}]
    )
    honest = _content("bug-88 fixed in src/pay/api.py; createPayment returns 201.")
    assert _validate(honest, events).passed
    invented = _content(
        "bug-88 fixed in src/pay/api.py and src/pay/retry.py; createPayment calls refundLedger; 201."
    )
    outcome = _validate(invented, events)
    check = outcome.check("fabricated")
    assert not check["passed"]
    assert {f["token"] for f in check["fabricated"]} == {"src/pay/retry.py", "refundLedger"}
    assert _validate(invented, events, quality={"max_fabricated": 2}).check("fabricated")["passed"]
    # What the prior summary said is not fabricated.
    assert _validate(invented, events, previous=_content("refundLedger in src/pay/retry.py")).check(
        "fabricated"
    )["passed"]


def test_floors_come_from_the_quality_settings():
    events = _events(
        [{"kind": "message", "content": "Touch a/b.py, c/d.py, e/f.py and g/h.py; 401 Unauthorized."}]
    )
    content = _content("Touched a/b.py, c/d.py and e/f.py; 401.")
    assert not _validate(content, events).passed  # default path floor 90%: 3/4 is too few
    assert _validate(content, events, quality={"floors": {"paths": 0.75}}).passed
    no_status = _content("Touched a/b.py, c/d.py, e/f.py and g/h.py.")
    assert not _validate(no_status, events).passed  # status codes: 100% by default
    assert _validate(no_status, events, quality={"floors": {"status_codes": 0.0}}).passed


def test_rules_6_checks_can_be_waived_by_name_and_rules_5_knows_only_its_own():
    events = _events([{"kind": "message", "content": "Returns 404 Not Found for /refunds/{id}."}])
    outcome = _validate(_content("Nothing specific."), events)
    assert not outcome.passed
    waived = apply_waivers(outcome, ["salient_retention"])
    assert waived.passed and waived.waived_checks == ["salient_retention"]
    old = _validate(_content("Nothing specific."), events, version="rules-5")
    with pytest.raises(WaiverError, match="unknown check 'salient_retention'"):
        apply_waivers(old, ["salient_retention"])


def test_extractive_v2_keeps_what_rules_6_checks_and_v1_does_not():
    source = _demo_source()[:220]
    v1 = get_compactor("extractive-v1", token_budget=8000).compact(None, source)
    v2 = get_compactor("extractive-v2", token_budget=8000).compact(None, source)
    assert not _validate(v1.content, source).passed
    outcome = _validate(v2.content, source)
    assert outcome.passed, outcome.reasons
    assert outcome.quality["fabricated_count"] == 0
    assert v2.token_count <= 8000


def test_quality_settings_are_checked():
    assert q.quality_errors(
        {"floors": {"paths": 1.5, "colours": 0.5}, "validator": "rules-9", "max_fabricated": -1}
    ) == [
        ("quality.validator", "must be one of rules-5, rules-6, rules-7, rules-8"),
        ("quality.floors.paths", "must be a number from 0 to 1"),
        ("quality.floors.colours", f"unknown class; known: {', '.join(q.RETENTION_CLASSES)}"),
        ("quality.max_fabricated", "must be a whole number ≥ 0"),
    ]


# -- decay across versions ----------------------------------------------------------------------


def test_decay_names_the_first_version_that_lost_a_token_and_what_restored_it():
    events = _events(
        [
            {"kind": "message", "content": "Plan: edit api/a.py and api/b.py."},
            {"kind": "message", "content": "Later: api/c.py too."},
            {"kind": "message", "content": "Tail mentions api/b.py again."},
        ]
    )
    index = q.build_index(events[:2])
    tail = q.build_index(events[2:])
    versions = [
        q.VersionContent(1, 1, _content("edit api/a.py and api/b.py")),
        q.VersionContent(2, 2, _content("edit api/c.py")),
        q.VersionContent(3, 2, _content("edit api/a.py, api/c.py")),
    ]
    result = q.decay(index, versions, tail)
    rows = {r["token"]: r for r in result["rows"]}
    assert rows["api/a.py"] == {
        "class": "paths",
        "token": "api/a.py",
        "first_seq": 1,
        "kept_in": [1, 3],
        "first_lost": 2,
        "restored_by": "S3",
    }
    assert rows["api/b.py"]["first_lost"] == 2 and rows["api/b.py"]["restored_by"] == "tail"
    assert rows["api/c.py"]["first_lost"] is None
    assert result["curve"]["paths"] == [1.0, 0.0, 0.5]


# -- the demo: rules-5 story kept, rules-7 visible on the pages ---------------------------------


@pytest.fixture
def loaded(demo_db):
    user = Membership.objects.get(tenant__slug="acme", user__username=scenario.DEMO_USERNAME).user
    web = Client()
    web.force_login(user)
    return web


def test_demo_s3_was_validated_by_rules_5_and_its_page_shows_the_retention_gap(loaded):
    from memoryhub.memory.lifecycle import run_validator

    s3 = Summary.objects.get(workflow__external_id=scenario.WORKFLOW_ID, version=3)
    assert s3.validations.latest("created_at").validator_version == "rules-5"
    assert run_validator(s3).validator_version == "rules-8"  # the default for anything new
    assert not run_validator(s3).passed
    html = loaded.get(f"/summaries/{s3.summary_id}/").content.decode()
    assert 'id="retention-table"' in html and "measured now with rules-8" in html
    row = html.split('data-class="obligations"')[1].split("</tr>")[0]
    assert "below floor" in row and "seq 7 (lost): Unauthenticated requests must return 401" in row
    wf_html = loaded.get(f"/workflows/{scenario.WORKFLOW_ID}/").content.decode()
    assert 'id="chart-decay"' in wf_html and 'id="decay-table"' in wf_html
    assert 'id="threshold-table"' in wf_html and "18,000 tokens" in wf_html
    # The refunds agents count tokens like LangChain's chars/4 approximation: its drift is shown.
    drift = TokenEstimate.objects.filter(workflow__external_id="refunds-api-9")
    assert drift.count() == 120 and {d.model for d in drift} == {"count_tokens_approximately"}
    refunds = loaded.get("/workflows/refunds-api-9/").content.decode()
    assert "count_tokens_approximately" in refunds.split('id="drift-table"')[1].split("</table>")[0]


# -- token estimate drift -----------------------------------------------------------------------


def test_event_estimates_record_drift_per_model(api, tenant):
    wf = make_workflow(tenant, "drift-1")
    url = f"/api/v1/workflows/{wf.external_id}/events/"
    body = {
        "events": [
            {**event(1, content="x " * 100), "token_estimate": 78},
            {**event(2, content="y " * 50), "token_estimate": 60, "token_estimate_model": "claude-x"},
            event(3),
        ]
    }
    r = api.post(url, body, format="json")
    assert r.status_code == 201, r.content
    exact = dict(Event.objects.filter(workflow=wf).values_list("seq", "token_count"))
    rows = {t.seq: t for t in TokenEstimate.objects.filter(workflow=wf)}
    assert set(rows) == {1, 2}
    assert rows[1].exact == exact[1] and rows[1].drift == pytest.approx((78 - exact[1]) / exact[1])
    assert rows[1].model == "gpt-4.1-mini" and rows[2].model == "claude-x"  # policy model by default
    expected = (abs(rows[1].drift) + abs(rows[2].drift)) / 2
    assert compute(tenant, "token_estimate_drift", since=None) == pytest.approx(expected)


@pytest.mark.parametrize("bad", [-1, 1.5, "12", True])
def test_a_bad_estimate_is_a_400_and_writes_nothing(api, tenant, bad):
    wf = make_workflow(tenant, "drift-2")
    r = api.post(
        f"/api/v1/workflows/{wf.external_id}/events/",
        {"events": [event(1), {**event(2), "token_estimate": bad}]},
        format="json",
    )
    assert r.status_code == 400 and r.json()["error"] == "invalid_event"
    assert "events[1].token_estimate" in r.json()["detail"]
    assert not Event.objects.filter(workflow=wf).exists() and not TokenEstimate.objects.exists()


def test_trigger_estimate_is_compared_with_the_running_total(api, tenant, alice):
    wf = make_workflow(tenant, "drift-3")
    append(wf, [event(i, content="word " * 40) for i in range(1, 6)])
    wf.refresh_from_db()
    exact = wf.history_tokens
    r = api.post(
        f"/api/v1/workflows/{wf.external_id}/trigger/",
        {"token_estimate": int(exact * 0.78), "token_estimate_model": "langchain-approx"},
        format="json",
    )
    assert r.status_code == 200, r.content
    row = TokenEstimate.objects.get(workflow=wf)
    assert (row.source, row.exact, row.model) == ("trigger", exact, "langchain-approx")
    assert row.drift == pytest.approx((int(exact * 0.78) - exact) / exact)
    bad = api.post(f"/api/v1/workflows/{wf.external_id}/trigger/", {"token_estimate": "many"}, format="json")
    assert bad.status_code == 400 and TokenEstimate.objects.count() == 1
    html = alice.web.get(f"/workflows/{wf.external_id}/").content.decode()
    table = html.split('id="drift-table"')[1].split("</table>")[0]
    assert "langchain-approx" in table and f"{row.drift * 100:.1f}%" in table


# -- missed compactions -------------------------------------------------------------------------


def _trace(api, wf, call_id):
    wf.refresh_from_db()
    return api.post(
        f"/api/v1/workflows/{wf.external_id}/traces/",
        {
            "agent": "a",
            "agent_run_id": "r",
            "model_call_id": call_id,
            "summary_id": None,
            "tail_to_seq": wf.head_seq,
        },
        format="json",
    )


def test_a_call_over_the_safe_budget_with_no_compaction_is_a_missed_compaction(api, tenant):
    assert AlertRule.objects.filter(tenant=tenant, metric="missed_compaction", is_default=True).exists()
    small = make_workflow(tenant, "small")
    append(small, [event(1)])
    assert "missed_compaction" not in _trace(api, small, "c-0").json()["flags"]

    big = make_workflow(tenant, "big")
    append(big, [event(i, content="token " * 1000) for i in range(1, 21)])  # ~20,000 > 18,000
    big.refresh_from_db()
    assert big.history_tokens > 18_000
    assert "missed_compaction" in _trace(api, big, "c-1").json()["flags"]
    request_compaction(big, compactor="extractive-v2", actor=TEST_ACTOR)  # requested, not run yet
    assert "missed_compaction" not in _trace(api, big, "c-2").json()["flags"]
    assert compute(tenant, "missed_compaction", since=None) == 1.0
    assert ConsumerTrace.objects.filter(workflow=big).count() == 2


# -- the policy carries the quality gate --------------------------------------------------------


def test_policy_quality_block_round_trips_and_rejects_bad_floors(api, tenant):
    wf = make_workflow(tenant, "policy-q")
    url = f"/api/v1/workflows/{wf.external_id}/policy/"
    assert api.get(url).json()["quality"] == q.default_quality()
    r = api.put(url, {"quality": {"validator": "rules-5", "floors": {"numbers": 0.5}}}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["quality"]["validator"] == "rules-5"
    assert r.json()["quality"]["floors"] == q.DEFAULT_FLOORS | {"numbers": 0.5}
    bad = api.put(url, {"quality": {"floors": {"numbers": 2}}}, format="json")
    assert bad.status_code == 400 and "quality.floors.numbers" in bad.json()["detail"]
    assert api.get(url).json()["quality"]["floors"]["numbers"] == 0.5
    from memoryhub.memory.lifecycle import run_validator
    from tests.factories import candidate

    append(wf, [event(1)])
    assert run_validator(candidate(Workflow.objects.get(pk=wf.pk))).validator_version == "rules-5"


def test_summary_json_accepts_a_salient_block_and_rejects_a_bad_one(api, tenant):
    wf = make_workflow(tenant, "salient")
    append(wf, [event(1)])
    url = f"/api/v1/workflows/{wf.external_id}/summaries/"
    base = {"covers_from_seq": 1, "covers_to_seq": 1, "compactor": {"name": "x", "version": "1"}}
    ok = api.post(
        url,
        {**base, "content": {**_content("POST /payments"), "salient": {"paths": ["/payments"]}}},
        format="json",
    )
    assert ok.status_code == 201, ok.content
    bad = api.post(
        url, {**base, "content": {**_content("x"), "salient": {"colours": ["red"]}}}, format="json"
    )
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_content"
    assert json.loads(Summary.objects.get(workflow=wf).content)["salient"] == {"paths": ["/payments"]}


def test_decay_chart_is_valid_plotly_with_one_line_per_class():
    import plotly.graph_objects as go

    from memoryhub.observe import figures

    fig = figures.decay_curve(
        [1, 2, 3], {"facts": [1.0, 1.0, 0.5], "paths": [1.0, 0.25, None]}, q.CLASS_LABELS
    )
    go.Figure(fig)  # attribute names checked by plotly itself
    assert [t["name"] for t in fig["data"]] == ["Structured facts", "File paths"]
    assert fig["data"][1]["y"] == [100.0, 25.0, None] and fig["data"][1]["x"] == ["S1", "S2", "S3"]
    empty = figures.decay_curve([1], {}, q.CLASS_LABELS)
    go.Figure(empty)
    assert empty["layout"]["annotations"][0]["text"].startswith("No summary versions")
