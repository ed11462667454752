"""GET /api/v1/workflows/{wf}/context/: active summary + the whole tail, read-after-write, manifest."""

from __future__ import annotations

import pytest

from memoryhub.context.assembly import (
    CONTEXT_ID_PREFIX,
    ReadCoordinates,
    manifest_hash,
    parse_context_id,
    recompute_manifest_hash,
)
from memoryhub.core.errors import InvalidInput
from memoryhub.models import Event, Workflow
from memoryhub.models.workflows import EVENT_API_FIELDS
from tests.factories import (
    activated,
    add_events,
    append,
    append_n,
    build_workflow,
    content_for,
    event,
    make_workflow,
)

pytestmark = pytest.mark.django_db

URL = "/api/v1/workflows/{}/context/"


def read(client, wf: str = "wf", **params):
    return client.get(URL.format(wf), params)


def test_without_a_summary_the_whole_history_is_the_tail(api, tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(i) for i in range(1, 6)])
    r = read(api)
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["summary"] is None
    assert [e["seq"] for e in body["tail"]] == [1, 2, 3, 4, 5]
    assert body["head_seq"] == 5 and body["tail_from_seq"] == 1 and body["tail_to_seq"] == 5
    workflow.refresh_from_db()
    assert body["tokens"] == {"summary": 0, "tail": workflow.total_tokens, "total": workflow.total_tokens}
    assert body["tail"][0]["content"] == event(1)["content"]
    assert body["tail"][0]["content_hash"].startswith("sha256:")


def test_tail_events_have_the_events_api_shape(api, tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(1), event(2, kind="tool_call", tool_call_id="call-1", refs=["spec-v7"])])
    tail = read(api).json()["tail"]
    listed = api.get("/api/v1/workflows/wf/events/").json()["events"]
    assert [list(e) for e in tail] == [list(EVENT_API_FIELDS)] * 2
    assert tail == listed


def test_active_summary_plus_every_event_after_its_watermark(api, tenant):
    workflow = build_workflow(tenant, "wf", n=30)
    summary = activated(workflow, 1, 22)
    add_events(workflow, 31, 34)
    body = read(api).json()
    assert body["summary"]["summary_id"] == summary.summary_id
    assert body["summary"]["status"] == "ACTIVE"
    assert body["summary"]["covers_to_seq"] == 22
    assert body["summary"]["content"]["facts"][0]["key"] == "scope-10"
    assert body["summary"]["content_hash"] == summary.content_hash
    assert [e["seq"] for e in body["tail"]] == list(range(23, 35))
    workflow.refresh_from_db()
    # The served totals agree with the running totals maintained at append/activation.
    assert body["tokens"]["summary"] == summary.token_count == workflow.summary_tokens
    assert body["tokens"]["tail"] == workflow.tail_tokens
    assert body["tokens"]["total"] == workflow.history_tokens
    assert body["active_revision"] == workflow.active_revision


def test_the_tail_is_never_truncated(api, tenant):
    workflow = make_workflow(tenant, "wf")
    append_n(workflow, 1200)
    body = read(api).json()
    assert len(body["tail"]) == 1200
    assert [e["seq"] for e in body["tail"]] == list(range(1, 1201))


def test_min_seq_guards_read_after_write(api, tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(i) for i in range(1, 4)])
    assert read(api, min_seq=3).status_code == 200
    r = read(api, min_seq=4)
    assert r.status_code == 409
    assert r.json() == {
        "error": "stale_context",
        "detail": "workflow head is 3, below min_seq 4: refusing to serve stale context",
        "head_seq": 3,
        "min_seq": 4,
        "retry_after": 1,
    }
    assert r["Retry-After"] == "1"  # a replica behind min_seq catches up: the client retries
    bad = read(api, min_seq="three")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_parameter"


def test_other_tenants_workflow_is_404_and_viewers_may_read(api, carol, mallory, tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(1)])
    assert read(mallory.api).status_code == 404
    assert read(carol.api).status_code == 200
    assert read(api, wf="nope").json()["error"] == "workflow_not_found"


def test_manifest_names_exactly_what_was_returned_and_can_be_recomputed(api, tenant):
    workflow = build_workflow(tenant, "wf", n=20)
    summary = activated(workflow, 1, 15)
    body = read(api).json()
    workflow.refresh_from_db()
    tail = [(e["seq"], e["content_hash"], e["token_count"]) for e in body["tail"]]
    assert body["manifest_hash"] == manifest_hash(workflow, summary, tail, 20)

    coords = parse_context_id(body["context_id"])
    assert coords == ReadCoordinates(workflow.pk, summary.pk, "ACTIVE", 15, 20)
    # Later appends do not change what that read was.
    add_events(workflow, 21, 25)
    assert recompute_manifest_hash(workflow, coords) == body["manifest_hash"]
    assert read(api).json()["manifest_hash"] != body["manifest_hash"]


def test_reads_of_the_same_state_get_the_same_ids(api, tenant):
    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(1)])
    first, second = read(api).json(), read(api).json()
    assert first["manifest_hash"] == second["manifest_hash"]
    assert first["context_id"] == second["context_id"]
    assert first["context_id"].startswith(CONTEXT_ID_PREFIX)
    append(workflow, [event(2)])
    third = read(api).json()
    assert third["context_id"] != first["context_id"] and third["manifest_hash"] != first["manifest_hash"]


def test_a_tampered_context_id_is_refused():
    forged = CONTEXT_ID_PREFIX + "1.0.-.0.99:not-a-signature"
    with pytest.raises(InvalidInput) as caught:
        parse_context_id(forged)
    assert caught.value.code == "invalid_context_id"
    assert parse_context_id("langgraph-run-7") is None  # a foreign id is not ours to check


def test_query_count_does_not_grow_with_history(api, tenant, django_assert_num_queries):
    small = build_workflow(tenant, "small", n=20)
    activated(small, 1, 10)
    big = build_workflow(tenant, "big", n=600)
    activated(big, 1, 590)
    read(api, wf="small")  # warm up the key's last_used_at update

    with django_assert_num_queries(3) as small_ctx:
        assert read(api, wf="small").status_code == 200
    with django_assert_num_queries(3):
        assert read(api, wf="big").status_code == 200
    # auth key lookup, workflow (+ active summary), tail, nothing else
    assert any("memoryhub_event" in q["sql"] for q in small_ctx.captured_queries)


def test_a_concurrent_append_cannot_slip_into_a_read(tenant):
    """The tail is bounded by the head of the snapshot the read started from."""
    from memoryhub.context.assembly import assemble_context
    from memoryhub.memory.workflows import get_workflow

    workflow = make_workflow(tenant, "wf")
    append(workflow, [event(i) for i in range(1, 4)])
    snapshot = get_workflow(tenant, "wf")  # loaded before the append below commits
    append(workflow, [event(4)])
    body = assemble_context(snapshot)
    assert body["head_seq"] == 3 and [e["seq"] for e in body["tail"]] == [1, 2, 3]
    assert Event.objects.filter(workflow=workflow).count() == 4
    assert Workflow.objects.get(pk=workflow.pk).head_seq == 4


# -- include_dropped: the events the active summary's manifest declares left out -------------------


def _with_manifest(workflow, end: int, manifest: list[dict]):
    from tests.factories import content_for

    content = content_for(1, end)
    content["dropped"] = manifest
    # The read is under test, not the verdict: rules-5 (structured facts) validates the fixture.
    return activated(workflow, 1, end, content=content, validator="rules-5")


def test_include_dropped_returns_the_events_the_manifest_names_in_pages(api, tenant):
    workflow = build_workflow(tenant, "wf", n=30)
    summary = _with_manifest(
        workflow,
        22,
        [
            {"seq": 3, "kind": "unit", "text": "", "units": ["4471-2290-18"]},
            {"seq": 5, "kind": "narrative", "text": "seqs 5-9", "units": []},
            {"seq": 12, "kind": "obligation", "text": "", "units": ["401"]},
        ],
    )
    assert "dropped" not in read(api).json()  # only on request
    body = read(api, include_dropped="true").json()
    page = body["dropped"]
    assert page["summary_id"] == summary.summary_id and page["declared_seqs"] == 7
    assert [e["seq"] for e in page["events"]] == [3, 5, 6, 7, 8, 9, 12]
    assert page["next_from_seq"] is None
    listed = {e["seq"]: e for e in api.get("/api/v1/workflows/wf/events/").json()["events"]}
    assert all(e == listed[e["seq"]] for e in page["events"])  # the events API's shape
    # Paged: nothing is cut without a cursor to the rest.
    first = read(api, include_dropped="1", dropped_limit=4).json()["dropped"]
    assert [e["seq"] for e in first["events"]] == [3, 5, 6, 7] and first["next_from_seq"] == 7
    rest = read(api, include_dropped="1", dropped_limit=4, dropped_from_seq=7).json()["dropped"]
    assert [e["seq"] for e in rest["events"]] == [8, 9, 12] and rest["next_from_seq"] is None


def test_include_dropped_without_a_manifest_or_summary_is_empty(api, tenant):
    workflow = build_workflow(tenant, "wf", n=10)
    assert read(api, include_dropped="true").json()["dropped"] == {
        "summary_id": None,
        "declared_seqs": 0,
        "events": [],
        "next_from_seq": None,
    }
    no_manifest = {k: v for k, v in content_for(1, 8).items() if k != "dropped"}
    activated(workflow, 1, 8, validator="rules-5", content=no_manifest, declare_drops=False)
    assert read(api, include_dropped="true").json()["dropped"]["declared_seqs"] == 0


@pytest.mark.parametrize(
    "params",
    [
        {"include_dropped": "maybe"},
        {"include_dropped": "true", "dropped_limit": "0"},
        {"include_dropped": "true", "dropped_limit": "1001"},
        {"include_dropped": "true", "dropped_from_seq": "-1"},
        {"include_dropped": "true", "dropped_from_seq": "x"},
    ],
)
def test_bad_dropped_parameters_are_a_400(api, tenant, params):
    build_workflow(tenant, "wf", n=5)
    r = read(api, **params)
    assert r.status_code == 400 and r.json()["error"] == "invalid_parameter", r.content


def test_a_manifest_outside_the_coverage_is_refused_at_creation(api, tenant):
    from memoryhub.core.errors import InvalidInput as Bad
    from tests.factories import candidate, content_for

    workflow = build_workflow(tenant, "wf", n=10)
    content = content_for(1, 8)
    content["dropped"] = [{"seq": 9, "kind": "unit", "text": "", "units": ["x"]}]
    with pytest.raises(Bad, match="outside the coverage"):
        candidate(workflow, 1, 8, content=content)
    content["dropped"] = [{"seq": 2, "kind": "guess", "text": "", "units": []}]
    with pytest.raises(Bad, match="must be one of"):
        candidate(workflow, 1, 8, content=content)
