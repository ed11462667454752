"""Workflows and events through the REST API: idempotency, gapless seqs, clear errors, isolation."""

from __future__ import annotations

import pytest
from django.test import override_settings

from memoryhub.models import Event, Workflow
from tests.factories import event, make_workflow
from tests.helpers import post

pytestmark = pytest.mark.django_db


def test_create_workflow_is_idempotent_on_external_id(api):
    first = post(api, "/api/v1/workflows/", {"external_id": "api-tests-42", "name": "Payments"})
    again = post(api, "/api/v1/workflows/", {"external_id": "api-tests-42"})
    assert first.status_code == 201 and again.status_code == 200
    assert first.json()["external_id"] == again.json()["external_id"] == "api-tests-42"
    assert Workflow.objects.filter(external_id="api-tests-42").count() == 1
    body = first.json()
    for field in (
        "head_seq",
        "total_tokens",
        "active_summary_id",
        "active_revision",
        "tail_events",
        "tail_tokens",
    ):
        assert field in body


def test_append_assigns_gapless_seqs_and_counts_tokens(api, tenant):
    make_workflow(tenant, "wf")
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(1), event(2, content="")]})
    assert r.status_code == 201, r.content
    data = r.json()
    assert [e["seq"] for e in data["events"]] == [1, 2]
    assert data["events"][0]["token_count"] > 0 and data["events"][1]["token_count"] == 0
    assert data["events"][0]["content_hash"].startswith("sha256:")
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(3)], "expected_head": 2})
    assert r.json()["head_seq"] == 3
    wf = Workflow.objects.get(external_id="wf")
    assert wf.total_tokens == sum(Event.objects.filter(workflow=wf).values_list("token_count", flat=True))
    assert wf.tail_events == 3 and wf.tail_tokens == wf.total_tokens


def test_resend_same_client_event_id_returns_original_seq_and_writes_nothing(api, tenant):
    make_workflow(tenant, "wf")
    post(api, "/api/v1/workflows/wf/events/", {"events": [event(1), event(2)]})
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(1), event(2)], "expected_head": 0})
    assert r.status_code == 200
    assert [e["seq"] for e in r.json()["events"]] == [1, 2]
    assert Event.objects.count() == 2
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(2, content="different")]})
    assert r.status_code == 409 and r.json()["error"] == "client_event_id_conflict"
    assert Event.objects.count() == 2


def test_expected_head_mismatch_is_409_with_current_head(api, tenant):
    make_workflow(tenant, "wf")
    post(api, "/api/v1/workflows/wf/events/", {"events": [event(1)]})
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(2)], "expected_head": 0})
    assert r.status_code == 409
    assert r.json() == {
        "error": "head_mismatch",
        "detail": "expected_head 0 but the workflow head is 1",
        "current_head": 1,
    }
    assert Event.objects.count() == 1


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({"events": []}, 400, "empty_batch"),
        ({"events": [{"kind": "shout", "content": "x"}]}, 400, "invalid_event"),
        ({"events": [{"kind": "message", "content": 5}]}, 400, "invalid_event"),
        ({"events": "nope"}, 400, "invalid_body"),
        ({"events": [event(1)], "expected_head": "abc"}, 400, "invalid_expected_head"),
        ({"events": [event(1)], "expected_head": 1.5}, 400, "invalid_expected_head"),
        ({"events": [{"kind": "tool_call", "content": "run"}]}, 400, "invalid_event"),
        ({"events": [event(1, facts=[{"key": "a", "kind": "nonsense"}])]}, 400, "invalid_event"),
        ([1, 2], 400, "invalid_body"),
    ],
)
def test_bad_batches_get_clear_json_errors_and_write_nothing(api, tenant, body, status, code):
    make_workflow(tenant, "wf")
    r = post(api, "/api/v1/workflows/wf/events/", body)
    assert r.status_code == status, r.content
    assert r.json()["error"] == code and r.json()["detail"]
    assert Event.objects.count() == 0


def test_malformed_json_and_unknown_workflow(api, tenant):
    make_workflow(tenant, "wf")
    r = api.post("/api/v1/workflows/wf/events/", data="{not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["error"] == "malformed_json"
    r = post(api, "/api/v1/workflows/nope/events/", {"events": [event(1)]})
    assert r.status_code == 404 and r.json()["error"] == "workflow_not_found"
    assert Event.objects.count() == 0


@override_settings(MEMORYHUB_MAX_BATCH_EVENTS=3)
def test_batch_over_maximum_is_413(api, tenant):
    make_workflow(tenant, "wf")
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(i) for i in range(1, 5)]})
    assert r.status_code == 413 and r.json()["error"] == "batch_too_large"
    assert Event.objects.count() == 0


@override_settings(MEMORYHUB_MAX_BODY_BYTES=2000)
def test_body_over_byte_limit_is_413(api, tenant):
    make_workflow(tenant, "wf")
    r = post(api, "/api/v1/workflows/wf/events/", {"events": [event(1, content="x" * 5000)]})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    assert Event.objects.count() == 0


def test_events_paging_with_after_and_until(api, tenant):
    make_workflow(tenant, "wf")
    post(api, "/api/v1/workflows/wf/events/", {"events": [event(i) for i in range(1, 11)]})
    r = api.get("/api/v1/workflows/wf/events/?after=2&until=8&limit=3")
    body = r.json()
    assert [e["seq"] for e in body["events"]] == [3, 4, 5] and body["next_after"] == 5
    r = api.get("/api/v1/workflows/wf/events/?after=5&until=8&limit=3")
    assert [e["seq"] for e in r.json()["events"]] == [6, 7, 8] and r.json()["next_after"] is None
    assert api.get("/api/v1/workflows/wf/events/?after=x").status_code == 400


def test_tenant_isolation(api, mallory, tenant):
    make_workflow(tenant, "secret-wf")
    assert mallory.api.get("/api/v1/workflows/secret-wf/").status_code == 404
    assert mallory.api.get("/api/v1/workflows/").json()["count"] == 0
    assert post(mallory.api, "/api/v1/workflows/secret-wf/events/", {"events": [event(1)]}).status_code == 404
    assert api.get("/api/v1/workflows/").json()["count"] == 1


def test_auth_required_and_viewer_cannot_write(carol, tenant, client):
    make_workflow(tenant, "wf")
    r = client.get("/api/v1/workflows/")
    assert r.status_code == 401 and r.json()["error"] == "unauthorized"
    r = post(carol.api, "/api/v1/workflows/wf/events/", {"events": [event(1)]})
    assert r.status_code == 403 and r.json()["error"] == "forbidden"
    assert carol.api.get("/api/v1/workflows/wf/").status_code == 200


def test_list_search_and_pagination(api, tenant):
    for i in range(7):
        make_workflow(tenant, f"refunds-{i}" if i % 2 else f"payments-{i}")
    r = api.get("/api/v1/workflows/?search=refunds&page_size=2")
    body = r.json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
