"""`manage.py load_demo`: the seed scenario loaded through the real services into the database."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import CommandError, call_command
from django.utils import timezone

from memoryhub.accounts.tenancy import verify_api_key
from memoryhub.demo import scenario
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    Event,
    LifecycleEvent,
    Membership,
    Summary,
    ValidationRecord,
    Workflow,
)

pytestmark = pytest.mark.django_db


def _wf(external_id: str = scenario.WORKFLOW_ID) -> Workflow:
    return Workflow.objects.get(external_id=external_id)


def test_loads_the_240_events_of_the_seed_workflow(loaded):
    wf = _wf()
    assert wf.tenant.slug == "acme" and wf.tenant.name == "Acme Payments"
    assert wf.head_seq == 240
    seqs = list(Event.objects.filter(workflow=wf).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 241))
    stored = Event.objects.get(workflow=wf, seq=scenario.INCIDENT_SOURCE_SEQ)
    assert scenario.INCIDENT_FACT in stored.content and stored.facts == []
    assert wf.total_tokens == sum(Event.objects.filter(workflow=wf).values_list("token_count", flat=True))
    assert wf.open_tool_calls == [] and wf.pending_side_effects == []
    assert "events 1–59 appended" in loaded


def test_s3_active_s1_s2_superseded_with_one_stale_attempt(loaded):
    wf = _wf()
    summaries = {s.version: s for s in Summary.objects.filter(workflow=wf)}
    assert {v: s.status for v, s in summaries.items()} == {1: "SUPERSEDED", 2: "SUPERSEDED", 3: "ACTIVE"}
    assert wf.active_summary_id == summaries[3].pk and wf.active_revision == 3
    assert [(s.covers_from_seq, s.covers_to_seq) for s in (summaries[1], summaries[2], summaries[3])] == [
        (1, 100),
        (1, 180),
        (1, 220),
    ]
    assert [summaries[v].compactor_version for v in (1, 2, 3)] == ["c1", "c2", "c2"]
    for s in summaries.values():
        record = ValidationRecord.objects.get(summary=s)
        assert record.passed and record.mandatory_coverage == 1.0
        assert s.job is not None and s.job.status == "SUCCEEDED"
    assert scenario.INCIDENT_FACT in summaries[1].content
    assert scenario.INCIDENT_FACT not in summaries[3].content
    stale = LifecycleEvent.objects.filter(summary__workflow=wf, result="stale")
    assert stale.count() == 1
    assert stale.get().summary_id == summaries[2].pk
    assert any(a["outcome"] == "stale" for a in summaries[2].job.attempts)
    assert wf.tail_events == 20


def test_traces_and_t57_lineage(loaded):
    wf = _wf()
    traces = {t.model_call_id: t for t in ConsumerTrace.objects.filter(workflow=wf)}
    assert len(traces) == len(scenario.trace_specs()) == 7
    assert all(t.flags == [] for t in traces.values()), {k: t.flags for k, t in traces.items()}
    t57 = Artifact.objects.get(workflow=wf, artifact_id="T57")
    (producer,) = t57.produced_by.all()
    assert producer.agent == "publisher"
    assert producer.summary.version == 3 and producer.summary_watermark == 220
    assert producer.tail_to_seq == 240 and producer.head_seq_at_read == 240
    assert t57.content_hash == {a["artifact_id"]: a for a in scenario.artifact_specs()}["T57"]["content_hash"]
    reviewer = next(t for t in traces.values() if t.agent == "security-reviewer" and t.summary.version == 2)
    assert reviewer.summary_status_at_read == "ACTIVE"


def test_the_investigation_finds_a_compaction_omission(loaded):
    from audit.models import Investigation

    inv = Investigation.objects.get(artifact__artifact_id="T57")
    assert inv.fact == scenario.INCIDENT_FACT
    assert inv.verdict == "compaction_omission"
    assert "compaction_omission" in loaded


def test_tenants_users_and_api_key(loaded, settings):
    assert authenticate(username=scenario.DEMO_USERNAME, password=scenario.DEMO_PASSWORD)
    roles = dict(Membership.objects.filter(tenant__slug="acme").values_list("user__username", "role"))
    assert roles == {
        scenario.DEMO_USERNAME: "admin",
        scenario.REVIEWER_USERNAME: "reviewer",
        scenario.VIEWER_USERNAME: "viewer",
    }
    assert Membership.objects.filter(user__username=scenario.DEMO_USERNAME, tenant__slug="globex").exists()
    secret = (settings.VAR_DIR / "demo-api-key.txt").read_text().splitlines()[-1]
    key = verify_api_key(secret)
    assert key is not None and key.tenant.slug == "acme"
    assert _wf("refunds-api-9").head_seq == 120 and _wf("refunds-api-9").active_summary is None
    assert _wf("onboarding-7").tenant.slug == "globex" and _wf("onboarding-7").head_seq == 30


def test_story_is_backdated_three_days(loaded):
    wf = _wf()
    last = Event.objects.get(workflow=wf, seq=240).created_at
    first = Event.objects.get(workflow=wf, seq=1).created_at
    assert timedelta(days=2, hours=23) < timezone.now() - last < timedelta(days=3, hours=1)
    assert last - first > timedelta(hours=10)
    activations = LifecycleEvent.objects.filter(summary__workflow=wf, action="activate").order_by("at")
    assert [e.summary.version for e in activations] == [1, 2, 3, 2]  # the last is the stale attempt


def test_second_load_refuses_and_skip_if_loaded_is_quiet(loaded):
    with pytest.raises(CommandError, match="already exists"):
        call_command("load_demo", stdout=StringIO())
    out = StringIO()
    call_command("load_demo", "--skip-if-loaded", stdout=out)
    assert "already exists" in out.getvalue()
    assert Workflow.objects.filter(external_id=scenario.WORKFLOW_ID).count() == 1


def test_live_steps_request_one_compaction_of_refunds(loaded):
    from memoryhub.pipeline.jobs import run_job

    out = StringIO()
    call_command("load_demo", "--live-steps", "--wait", "0", stdout=out)
    call_command("load_demo", "--live-steps", "--wait", "0", stdout=out)
    wf = _wf("refunds-api-9")
    job = CompactionJob.objects.get(workflow=wf)
    assert "already requested" in out.getvalue()
    # What the worker does with it (the plain function behind the Celery task).
    run_job(job.pk, "test-attempt-1")
    job.refresh_from_db()
    wf.refresh_from_db()
    assert job.status == "SUCCEEDED" and job.summary is not None
    assert wf.active_summary_id == job.summary_id


def test_live_steps_before_load_is_an_error(db):
    with pytest.raises(CommandError, match="not loaded"):
        call_command("load_demo", "--live-steps", stdout=StringIO())
