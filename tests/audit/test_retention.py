"""Retention policies (API, validation) and the daily sweep under a frozen clock."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from audit.models import AuditEntry, Purge
from audit.retention import sweep_all, sweep_tenant
from memoryhub.models import ConsumerTrace, Event, Summary
from tests import factories as f
from tests.factories import append, event, make_workflow
from tests.helpers import form_post

pytestmark = pytest.mark.django_db

T0 = dt.datetime(2026, 1, 10, 12, 0, tzinfo=dt.UTC)


def test_policies_api_round_trip_and_validation(alice, carol):
    r = alice.api.get("/api/v1/retention/")
    assert r.status_code == 200 and set(r.json()["policies"]) == {
        "raw_events",
        "tool_io",
        "summaries",
        "trace_detail",
        "provenance",
    }
    r = alice.api.put("/api/v1/retention/", {"policies": {"raw_events": 30, "tool_io": 7}}, format="json")
    assert r.status_code == 200 and r.json()["policies"]["raw_events"] == 30
    assert (
        carol.api.put("/api/v1/retention/", {"policies": {"raw_events": 1}}, format="json").status_code == 403
    )
    for bad in (
        {"policies": {"raw_events": -1}},
        {"policies": {"nope": 3}},
        {"policies": {"provenance": 5}},
        {"policies": []},
        {"policies": {"raw_events": "30"}},
    ):
        r = alice.api.put("/api/v1/retention/", bad, format="json")
        assert r.status_code == 400 and r.json()["error"] == "invalid_policies", bad
    assert alice.api.get("/api/v1/retention/").json()["policies"]["raw_events"] == 30
    assert AuditEntry.objects.filter(action="retention.update").count() == 1


def test_daily_sweep_tombstones_expired_content_and_records_it(tenant, alice):
    with time_machine.travel(T0, tick=False):
        wf = make_workflow(tenant, "old")
        append(
            wf,
            [
                event(1),
                event(2, kind="tool_call", tool_call_id="c1", content="GET /spec secret-payload"),
                event(3, kind="tool_result", tool_call_id="c1", content="tool output 42"),
            ],
        )
    with time_machine.travel(T0 + dt.timedelta(days=20), tick=False):
        append(wf, [event(4, content="recent message")])
        alice.api.put("/api/v1/retention/", {"policies": {"tool_io": 7, "trace_detail": 7}}, format="json")
    with time_machine.travel(T0 + dt.timedelta(days=21), tick=False):
        report = sweep_tenant(tenant)
    assert report.events_tombstoned == 2 and len(report.purges) == 1
    purged = dict(Event.objects.filter(workflow=wf).values_list("seq", "content"))
    assert purged[2] == purged[3] == "" and purged[1] and purged[4] == "recent message"
    assert Purge.objects.get().source == "retention"
    assert AuditEntry.objects.filter(action="retention.sweep").exists()
    # Idempotent: a second sweep finds nothing new.
    with time_machine.travel(T0 + dt.timedelta(days=22), tick=False):
        assert sweep_tenant(tenant).events_tombstoned == 0


def test_raw_events_and_trace_detail_expire_on_their_own_clocks(tenant, alice):
    with time_machine.travel(T0, tick=False):
        wf = make_workflow(tenant, "wf")
        append(wf, [event(1, content="an old requirement")])
        f.trace(wf, None, 1, call="m", source_refs=["spec-v7"], checkpoint_id="ck-1")
        alice.api.put(
            "/api/v1/retention/", {"policies": {"raw_events": 30, "trace_detail": 10}}, format="json"
        )
    with time_machine.travel(T0 + dt.timedelta(days=11), tick=False):
        sweep_all()
    trace = ConsumerTrace.objects.get()
    assert trace.source_refs == [] and trace.checkpoint_id == "" and trace.model_call_id == "m"
    assert Event.objects.get(seq=1).content == "an old requirement"
    with time_machine.travel(T0 + dt.timedelta(days=31), tick=False):
        sweep_all()
    assert Event.objects.get(seq=1).content == ""


def test_summary_retention_scrubs_content_and_moves_the_pointer(tenant, alice):
    from memoryhub.core.actors import Actor
    from memoryhub.pipeline.jobs import request_compaction, run_job

    with time_machine.travel(T0, tick=False):
        wf = make_workflow(tenant, "wf")
        append(wf, [event(i) for i in range(1, 6)])
        job, _ = request_compaction(wf, actor=Actor.system("t"))
        run_job(job.pk, "t-1")
        wf.refresh_from_db()
        assert wf.active_summary_id
        alice.api.put("/api/v1/retention/", {"policies": {"summaries": 5}}, format="json")
    with time_machine.travel(T0 + dt.timedelta(days=6), tick=False):
        report = sweep_tenant(tenant)
    assert report.summaries_scrubbed == 1
    summary = Summary.objects.get()
    assert summary.purged_by is not None and "message number" not in summary.content
    wf.refresh_from_db()
    assert wf.active_summary_id is None
    # The text of the records about the expired summary expired with it (payloads, digests kept).
    marker = f"unavailable: purged by {summary.purged_by.purge_id}"
    checks = summary.validations.get().checks
    assert checks and all(c["detail"].startswith(marker) for c in checks)
    created = AuditEntry.objects.get(action="summary.create", object_id=summary.summary_id)
    assert created.payload_id is None or created.payload.purged_by_id == summary.purged_by_id


def test_retention_sweep_task_is_registered():
    from memoryhub.celery import app

    app.loader.import_default_modules()
    assert "audit.retention_sweep" in app.tasks
    from memoryhub.schedules import BEAT_SCHEDULE

    assert any(entry["task"] == "audit.retention_sweep" for entry in BEAT_SCHEDULE.values())


def test_retention_and_purge_pages(tenant, alice, carol):
    wf = make_workflow(tenant, "wf")
    append(wf, [event(1, content="remove me please, this is personal"), event(2)])
    page = alice.web.get("/retention/")
    assert page.status_code == 200 and b'id="retention-form"' in page.content
    assert b"disabled" in carol.web.get("/retention/").content
    r = form_post(alice.web, "/retention/", {"raw_events": "90", "summaries": ""})
    assert r.status_code == 302
    assert alice.api.get("/api/v1/retention/").json()["policies"]["raw_events"] == 90
    assert carol.web.get("/workflows/wf/purge/").status_code == 403
    assert alice.web.get("/workflows/wf/purge/").status_code == 200
    r = form_post(alice.web, "/workflows/wf/purge/", {"mode": "seqs", "seqs": "1", "reason": "user asked"})
    assert r.status_code == 302
    assert Event.objects.get(workflow=wf, seq=1).content == ""
    listing = alice.web.get("/retention/")
    assert Purge.objects.get().purge_id.encode() in listing.content
    # without a CSRF token the session POST is refused
    assert (
        alice.web.post("/workflows/wf/purge/", {"mode": "seqs", "seqs": "2", "reason": "x"}).status_code
        == 403
    )
