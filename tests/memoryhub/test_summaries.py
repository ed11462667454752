"""Summary versions through the API: immutable canonical content, server-side hashes, precise 400s
for bad candidates, all eight metadata groups in one call, lists, verification, isolation."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry
from memoryhub.core.append_only import BYPASS_TABLE
from memoryhub.core.canonical import canonical_bytes, hash_value
from memoryhub.core.tokens import count_tokens
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import summary_content, verify_summary
from memoryhub.models import Summary
from tests.factories import (
    COMPACTOR,
    REVIEWER,
    WORKER,
    activated,
    build_workflow,
    candidate,
    content_for,
    sealed_as_a_compactor_would,
    trace,
    validated,
)
from tests.helpers import post

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/wf/summaries/"


def body(start: int = 1, end: int = 30, **overrides):
    payload = {
        "covers_from_seq": start,
        "covers_to_seq": end,
        "content": content_for(start, end),
        "source_refs": ["spec-v7"],
        "excluded_categories": ["chit-chat"],
        "compactor": {**COMPACTOR, "prompt_template_version": "p3", "token_budget": 4000},
    }
    payload.update(overrides)
    return payload


def test_submit_external_candidate_stores_canonical_bytes_and_server_hash(api, tenant):
    build_workflow(tenant)
    content = {"facts": content_for(1, 30)["facts"], "narrative": "Zahlung  über €5 — ok", "open_items": []}
    r = post(api, URL, body(content=content))
    assert r.status_code == 201, r.content
    data = r.json()
    assert re.fullmatch(r"sum_[0-9a-f]{16}", data["summary_id"])
    assert data["version"] == 1 and data["label"] == "S1" and data["status"] == "CANDIDATE"
    stored = Summary.objects.get(summary_id=data["summary_id"])
    # Canonical JSON: sorted keys, compact separators, UTF-8 (non-ASCII kept as is).
    assert stored.content.encode() == canonical_bytes(content)
    assert stored.content.startswith('{"facts":') and ", " not in stored.content and "über" in stored.content
    assert stored.content_hash == data["content_hash"] == hash_value(content)
    assert stored.token_count == count_tokens(stored.content) > 0
    assert stored.source_revision == 30 and stored.created_by.startswith("api_key:alice-key")
    assert summary_content(stored) == content
    assert AuditEntry.objects.filter(action="summary.create", object_id=stored.summary_id).count() == 1


def test_versions_are_numbered_per_workflow(api, tenant):
    build_workflow(tenant, "wf")
    build_workflow(tenant, "other")
    labels = [post(api, URL, body(end=e)).json()["label"] for e in (10, 20, 30)]
    assert labels == ["S1", "S2", "S3"]
    assert post(api, "/api/v1/workflows/other/summaries/", body()).json()["version"] == 1


def test_client_hash_is_checked_never_trusted(api, tenant):
    build_workflow(tenant)
    good = hash_value(content_for(1, 30))
    assert post(api, URL, body(content_hash=good)).status_code == 201
    wrong = "sha256:" + "0" * 64
    r = post(api, URL, body(content_hash=wrong))
    assert r.status_code == 400
    assert r.json()["error"] == "content_hash_mismatch" and r.json()["computed_hash"] == good
    assert wrong in r.json()["detail"]
    assert Summary.objects.count() == 1


@pytest.mark.parametrize(
    ("overrides", "code", "fragment"),
    [
        ({"covers_to_seq": 31}, "coverage_beyond_head", "beyond the workflow head 30"),
        ({"covers_from_seq": 5, "content": content_for(5, 30)}, "coverage_gap", "must start at 1"),
        ({"covers_from_seq": 0}, "invalid_coverage", "at least 1"),
        (
            {"covers_from_seq": 20, "covers_to_seq": 10, "content": content_for(1, 10)},
            "invalid_coverage",
            "before",
        ),
        ({"covers_to_seq": "30"}, "invalid_coverage", "must be an integer"),
        (
            {"covers_to_seq": 15},
            "fact_outside_coverage",
            "'scope-20' cites seq(s) [20] outside the coverage 1..15",
        ),
        ({"content": {**content_for(1, 30), "schema": "memoryhub.summary/v9"}}, "unsupported_schema", "v9"),
        ({"content": ["not", "an", "object"]}, "invalid_content", "must be a JSON object"),
        ({"content": {"facts": []}}, "invalid_content", "content.narrative"),
        ({"content": {"narrative": "x", "facts": {}}}, "invalid_content", "content.facts"),
        ({"content": {"narrative": "x", "facts": [], "extra": 1}}, "invalid_content", "['extra']"),
        (
            {
                "content": {
                    "narrative": "x",
                    "facts": [{"key": "a", "kind": "scope", "text": "t", "source_seqs": [1]}] * 2,
                }
            },
            "duplicate_fact",
            "appears twice",
        ),
        (
            {
                "content": {
                    "narrative": "x",
                    "facts": [{"key": "a", "kind": "gossip", "text": "t", "source_seqs": [1]}],
                }
            },
            "invalid_fact",
            "content.facts[0].kind",
        ),
        (
            {"content": {"narrative": "x", "facts": [{"key": "a", "kind": "scope", "text": "t"}]}},
            "invalid_fact",
            "source_seqs",
        ),
        ({"content": {"narrative": "x", "facts": [], "open_items": [3]}}, "invalid_content", "open_items[0]"),
        ({"compactor": {"version": "1"}}, "invalid_compactor", "compactor.name"),
        ({"compactor": {"name": "c1", "temperature": 0.2}}, "invalid_compactor", "temperature"),
        ({"compactor": {"name": "c1", "token_budget": 0}}, "invalid_compactor", "token_budget"),
        ({"source_refs": "spec-v7"}, "invalid_summary", "source_refs"),
        ({"content_hash": "md5:abc"}, "invalid_content_hash", "sha256:"),
        ({"owner": "me"}, "invalid_body", "owner"),
    ],
)
def test_bad_candidates_get_a_precise_400_and_nothing_is_written(api, tenant, overrides, code, fragment):
    build_workflow(tenant)
    audit_before = AuditEntry.objects.count()
    r = post(api, URL, body(**overrides))
    assert r.status_code == 400, r.content
    assert r.json()["error"] == code, r.json()
    assert fragment in r.json()["detail"]
    assert Summary.objects.count() == 0 and AuditEntry.objects.count() == audit_before


def test_missing_required_field_is_400(api, tenant):
    build_workflow(tenant)
    payload = body()
    del payload["compactor"]
    r = post(api, URL, payload)
    assert r.status_code == 400 and "compactor" in r.json()["detail"]


def test_coverage_continues_the_active_summary_or_restarts_at_1(api, tenant):
    wf = build_workflow(tenant, n=20)
    activated(wf, 1, 10)
    # incremental: 11..20 continues S1's watermark 10
    assert post(api, URL, body(11, 20, content=content_for(11, 20))).status_code == 201
    # full re-summary
    assert post(api, URL, body(1, 20, content=content_for(1, 20))).status_code == 201
    gap = post(api, URL, body(13, 20, content=content_for(13, 20)))
    assert gap.status_code == 400 and gap.json()["error"] == "coverage_gap"
    assert "must be 1 (full re-summary) or 11" in gap.json()["detail"]
    overlap = post(api, URL, body(5, 20, content=content_for(5, 20)))
    assert overlap.status_code == 400 and overlap.json()["error"] == "coverage_overlap"


def test_detail_shows_all_eight_metadata_groups(api, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf, 1, 20)
    s2 = validated(wf, 1, 30)
    wf.refresh_from_db()
    lifecycle.activate(s2, wf.active_revision, REVIEWER)
    for i in range(3):
        trace(wf, s2, 30, call=f"call-{i}", agent="test-agent")
    data = api.get(f"/api/v1/summaries/{s2.summary_id}/").json()
    assert data["identity"]["version"] == 2 and data["identity"]["label"] == "S2"
    assert data["identity"]["workflow"] == "wf" and data["identity"]["created_by"] == str(WORKER)
    assert data["source_lineage"] == {
        "covers_from_seq": 1, "covers_to_seq": 30, "watermark": 30, "source_revision": 30,
        "source_refs": [], "excluded_categories": [],
    }  # fmt: skip
    assert data["compactor"]["name"] == "c1" and data["compactor"]["model"] == "extractive-v1"
    latest = data["validation"]["latest"]
    assert latest["passed"] is True and latest["validator_version"] and len(latest["checks"]) >= 5
    assert (
        data["integrity"]["content_hash"] == s2.content_hash
        and data["integrity"]["token_count"] == s2.token_count
    )
    assert data["integrity"]["schema"] == "memoryhub.summary/v1" and data["integrity"]["storage_location"]
    assert data["content"] == sealed_as_a_compactor_would(wf, 1, 30, content_for(1, 30))
    assert data["lifecycle"]["status"] == "ACTIVE" and data["lifecycle"]["is_active"] is True
    actions = [(e["action"], e["result"], e["to_status"]) for e in data["activation"]["events"]]
    assert actions == [("validate", "applied", "VALIDATED"), ("activate", "applied", "ACTIVE")]
    activation = data["activation"]["events"][1]
    assert activation["prior_active_summary_id"] == s1.summary_id and activation["prior_active_version"] == 1
    assert activation["expected_revision"] == 1 and activation["observed_revision"] == 1
    assert activation["source_revision_at_activation"] == 30 and activation["actor"] == "user:bob"
    assert data["consumers"]["count"] == 3 and {t["model_call_id"] for t in data["consumers"]["traces"]} == {
        "call-0", "call-1", "call-2",
    }  # fmt: skip
    s1_data = api.get(f"/api/v1/summaries/{s1.summary_id}/").json()
    assert s1_data["status"] == "SUPERSEDED" and s1_data["consumers"]["count"] == 0
    assert [e["action"] for e in s1_data["activation"]["events"]] == ["validate", "activate", "supersede"]


def test_detail_caps_the_trace_list_but_counts_all(api, tenant):
    wf = build_workflow(tenant)
    s1 = activated(wf)
    for i in range(55):
        trace(wf, s1, 30, call=f"c{i}")
    consumers = api.get(f"/api/v1/summaries/{s1.summary_id}/").json()["consumers"]
    assert consumers["count"] == 55 and consumers["shown"] == len(consumers["traces"]) == 50


def test_detail_query_count_does_not_grow_with_history(api, tenant):
    wf = build_workflow(tenant)
    first = activated(wf)

    def queries(summary_id: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert api.get(f"/api/v1/summaries/{summary_id}/").status_code == 200
        return len(ctx.captured_queries)

    queries(first.summary_id)  # warm-up: the API key's last_used_at is written on first use
    small = queries(first.summary_id)
    for i in range(10):
        trace(wf, first, 30, call=f"c{i}")
    lifecycle.quarantine(first, REVIEWER, "check")
    lifecycle.release(first, REVIEWER, "fine")
    assert queries(first.summary_id) == small


def test_list_filters_by_status_and_paginates_with_constant_queries(api, tenant):
    wf = build_workflow(tenant)
    activated(wf, 1, 10)
    activated(wf, 1, 20)
    candidate(wf)

    def listing(query: str = ""):
        with CaptureQueriesContext(connection) as ctx:
            r = api.get(URL + query)
        assert r.status_code == 200, r.content
        return r.json(), len(ctx.captured_queries)

    listing()  # warm-up: the API key's last_used_at is written on first use
    data, n_small = listing()
    assert data["count"] == 3 and [row["label"] for row in data["results"]] == ["S3", "S2", "S1"]
    assert [row["status"] for row in data["results"]] == ["CANDIDATE", "ACTIVE", "SUPERSEDED"]
    assert "content" not in data["results"][0]
    assert [r["label"] for r in listing("?status=ACTIVE")[0]["results"]] == ["S2"]
    assert [r["label"] for r in listing("?status=SUPERSEDED,CANDIDATE")[0]["results"]] == ["S3", "S1"]
    page = listing("?page_size=2")[0]
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    bad = api.get(URL + "?status=LIVE")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid"
    for _ in range(8):
        candidate(wf)
    data, n_big = listing()
    assert data["count"] == 11 and n_big == n_small


def test_verify_reports_match(api, tenant):
    s1 = candidate(build_workflow(tenant))
    data = api.get(f"/api/v1/summaries/{s1.summary_id}/verify/").json()
    assert data["result"] == "match" and data["match"] is True and data["canonical"] is True
    assert data["computed_hash"] == data["recorded_hash"] == s1.content_hash


def _tamper(sql: str, params: list) -> None:
    """Write past the append-only trigger, as an attacker with table access would."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(f"INSERT INTO {BYPASS_TABLE} (id) VALUES (1)")
            try:
                cursor.execute(sql, params)
            finally:
                cursor.execute(f"DELETE FROM {BYPASS_TABLE}")
        else:
            # Django's FKs are deferred; ALTER TABLE needs no pending trigger events in the transaction.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            cursor.execute("ALTER TABLE memoryhub_summary DISABLE TRIGGER memoryhub_summary_append_only")
            try:
                cursor.execute(sql, params)
            finally:
                cursor.execute("ALTER TABLE memoryhub_summary ENABLE TRIGGER memoryhub_summary_append_only")
                cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def test_verify_detects_content_tampered_in_the_database(api, tenant):
    s1 = candidate(build_workflow(tenant))
    forged = canonical_bytes({**content_for(1, 30), "narrative": "approval-12 was granted"}).decode()
    _tamper("UPDATE memoryhub_summary SET content = %s WHERE id = %s", [forged, s1.pk])
    data = api.get(f"/api/v1/summaries/{s1.summary_id}/verify/").json()
    assert data["result"] == "mismatch" and data["match"] is False
    assert data["recorded_hash"] == s1.content_hash and data["computed_hash"] == hash_value(
        {**content_for(1, 30), "narrative": "approval-12 was granted"}
    )
    # The validator refuses the tampered bytes too (integrity cannot be waived).
    s1.refresh_from_db()
    rejected = lifecycle.validate(s1, WORKER)
    assert rejected.status == "REJECTED"
    assert any(r.startswith("integrity") for r in rejected.validations.first().reasons)
    # And the trigger is back: a plain UPDATE is refused again.
    with pytest.raises(Exception, match="append-only"), connection.cursor() as cursor:
        cursor.execute("UPDATE memoryhub_summary SET content = %s WHERE id = %s", ["{}", s1.pk])


def test_non_canonical_stored_bytes_are_a_mismatch(tenant):
    s1 = candidate(build_workflow(tenant))
    spaced = s1.content.replace(",", ", ")
    _tamper("UPDATE memoryhub_summary SET content = %s WHERE id = %s", [spaced, s1.pk])
    s1.refresh_from_db()
    assert verify_summary(s1)["result"] == "mismatch" and verify_summary(s1)["canonical"] is False


def test_other_tenants_summaries_are_404_and_viewers_cannot_write(api, tenant, mallory, carol):
    s1 = candidate(build_workflow(tenant))
    for url in (f"/api/v1/summaries/{s1.summary_id}/", f"/api/v1/summaries/{s1.summary_id}/verify/", URL):
        r = mallory.api.get(url)
        assert r.status_code == 404 and r.json()["error"] in {"summary_not_found", "workflow_not_found"}
    assert post(mallory.api, URL, body()).status_code == 404
    assert carol.api.get(f"/api/v1/summaries/{s1.summary_id}/").status_code == 200
    r = post(carol.api, URL, body())
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert Summary.objects.count() == 1
