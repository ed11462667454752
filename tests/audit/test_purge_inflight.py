"""A purge wins over compaction work already in flight: a job that read the source before the purge
never stores, validates or activates a summary with the purged content; it ends visibly as
``discarded_purged`` and a fresh compaction (at the new purge epoch) is requested."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from audit.models import AuditEntry
from audit.purge import purge_events
from memoryhub.compaction.base import register
from memoryhub.compaction.extractive import ExtractiveCompactor
from memoryhub.core.actors import Actor
from memoryhub.core.errors import Conflict
from memoryhub.memory import lifecycle
from memoryhub.memory.summaries import create_summary
from memoryhub.models import CompactionJob, JobStatus, Summary
from memoryhub.pipeline import jobs
from tests.factories import (
    append,
    event,
    judged_by,
    make_workflow,
    sealed_as_a_compactor_would,
    units_left_out,
)

SECRET = "Customer Jane Roe card 4111-1111-1111-1111 disputes charge ch_8812"
ADMIN = Actor.user("alice")


def secret_workflow(tenant, external_id: str = "refunds-9", n: int = 40):
    wf = make_workflow(tenant, external_id)
    append(
        wf,
        [
            event(
                1,
                content=SECRET + ".",
                facts=[{"key": "customer:jane-roe", "kind": "issue", "text": SECRET, "state": "open"}],
            )
        ],
    )
    for lo in range(2, n + 1, 500):
        append(wf, [event(i) for i in range(lo, min(lo + 500, n + 1))])
    return wf


# -- in process (SQLite and PostgreSQL): the purge lands while the compactor runs ------------------


_midway_hooks: list[Any] = []


@register
class PurgeMidwayCompactor(ExtractiveCompactor):
    """Test-only: runs the queued hook (a purge) after the source was read, before the result is stored."""

    name = "test-purge-midway"

    def compact(self, previous, events):
        result = super().compact(previous, events)
        while _midway_hooks:
            _midway_hooks.pop(0)()
        return result


@pytest.mark.django_db
def test_a_purge_landing_mid_job_discards_the_result_and_requests_a_fresh_compaction(tenant, alice):
    wf = secret_workflow(tenant)
    job, _ = jobs.request_compaction(wf, compactor="test-purge-midway", actor=ADMIN)
    purges = []
    _midway_hooks.append(lambda: purges.append(purge_events(wf, {"seqs": [1]}, ADMIN, "GDPR erasure")))

    assert jobs.run_job(job.pk, "t-1") == jobs.DISCARDED_PURGED
    job.refresh_from_db()
    assert purges and purges[0].scrubbed == []  # the purge saw nothing derived yet (the case)
    assert (job.status, job.outcome, job.summary_id) == (JobStatus.SUCCEEDED, "discarded_purged", None)
    assert "purge" in job.error and "fresh compaction job" in job.error
    assert job.attempts[-1]["outcome"] == "discarded_purged"
    assert not Summary.objects.filter(workflow=wf).exists()  # never stored, so never served
    wf.refresh_from_db()
    assert wf.active_summary_id is None and wf.purge_epoch == 1
    fresh = CompactionJob.objects.exclude(pk=job.pk).get(workflow=wf)
    assert fresh.idempotency_key.endswith("/e1") and fresh.status in (JobStatus.PENDING, JobStatus.QUEUED)
    entry = AuditEntry.objects.get(tenant=tenant, action="compaction.discard")
    assert entry.object_id == str(job.pk) and entry.data["fresh_job"] == fresh.pk
    # The fresh job reads what remains and is served; the purged text is nowhere.
    assert jobs.run_job(fresh.pk, "t-2") == "activated"
    wf.refresh_from_db()
    assert "Jane Roe" not in wf.active_summary.content
    r = alice.api.get(f"/api/v1/workflows/{wf.external_id}/context/")
    assert r.status_code == 200 and "Jane Roe" not in r.content.decode()


@pytest.mark.django_db
def test_storing_content_read_before_a_purge_is_refused(tenant):
    wf = secret_workflow(tenant, n=5)
    content = {"schema": "memoryhub.summary/v1", "narrative": SECRET, "facts": []}
    purge_events(wf, {"seqs": [1]}, ADMIN, "erasure")
    with pytest.raises(Conflict) as err:
        create_summary(
            wf,
            content=content,
            covers_from_seq=1,
            covers_to_seq=5,
            compactor={"name": "manual"},
            source_purge_epoch=0,
            actor=ADMIN,
        )
    assert err.value.code == "purged_since_read"
    assert not Summary.objects.filter(workflow=wf).exists()


@pytest.mark.django_db
def test_activation_re_checks_purges_since_the_source_was_read(tenant):
    """A candidate stored at epoch 0 whose range a later purge touched (below its covers_from, so
    the purge did not scrub it) is refused at activation, with the refusal recorded."""
    wf = make_workflow(tenant, "plain-1")
    append(wf, [event(i) for i in range(1, 13)])
    s1 = create_summary(
        wf,
        content={
            "schema": "memoryhub.summary/v1",
            "narrative": "clean early part about POST /payments",
            "facts": [],
        },
        covers_from_seq=1,
        covers_to_seq=4,
        compactor={"name": "manual"},
        actor=ADMIN,
    )
    lifecycle.validate(s1, ADMIN)
    s1.refresh_from_db()
    assert s1.status == "VALIDATED", s1.validations.last().reasons
    assert lifecycle.activate(s1, 0, ADMIN).applied
    s2 = create_summary(
        wf,
        content=sealed_as_a_compactor_would(
            wf,
            5,
            12,
            {
                "schema": "memoryhub.summary/v1",
                "narrative": "the later part about POST /payments",
                "facts": [],
                "dropped": units_left_out(5, 12),
            },
        ),
        covers_from_seq=5,
        covers_to_seq=12,
        compactor={"name": "manual"},
        actor=ADMIN,
    )
    assert s2.source_purge_epoch == 0
    lifecycle.validate(s2, ADMIN)
    wf.refresh_from_db()
    purge_events(wf, {"seqs": [2]}, ADMIN, "erasure")
    s2.refresh_from_db()
    wf.refresh_from_db()
    with pytest.raises(Conflict) as refused:
        lifecycle.activate(s2, wf.active_revision, ADMIN)
    assert refused.value.code == "purged_since_read"
    wf.refresh_from_db()
    assert wf.active_summary_id != s2.pk


# -- a real worker process on PostgreSQL, the purge landing while the job is RUNNING ---------------


@pytest.mark.postgres
@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_mid_job_loses_to_the_purge(tenant, alice, tmp_path, settings):
    from memoryhub.celery import app
    from memoryhub.pipeline.worker import running_worker
    from tests.memoryhub.llm_endpoint import fake_llm
    from tests.memoryhub.test_worker_compaction import finished, llm_env, wait_for

    app.control.purge()
    wf = secret_workflow(tenant, n=3000)
    judged_by(wf, "rules-6")  # the fake LLM's prose declares no drops (rules-7 rejects it): a purge-race test
    with fake_llm() as llm:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        plain = llm.body

        def body(status: int) -> bytes:
            # The model quotes whatever secret it was shown (as the summary did).
            if SECRET in json.dumps(llm.requests[-1]["json"]):
                llm.narrative = f"The agents handled a dispute: {SECRET}."
            else:
                llm.narrative = "The agents handled a dispute; the customer's details were erased."
            return plain(status)

        llm.body = body  # type: ignore[method-assign]
        llm.gate = threading.Event()  # the barrier: the job holds at the model call until released
        with running_worker(env=llm_env(llm), log_dir=tmp_path):
            job, _ = jobs.request_compaction(wf, compactor="openai-chat-v2", actor=ADMIN)
            assert llm.received.wait(60), "the worker never reached the model call"
            assert CompactionJob.objects.get(pk=job.pk).status == JobStatus.RUNNING
            r = alice.api.post(
                f"/api/v1/workflows/{wf.external_id}/purge/", {"seqs": [1], "reason": "GDPR"}, format="json"
            )
            assert r.status_code == 201 and r.json()["affected_summaries"] == []
            gate, llm.gate = llm.gate, None
            gate.set()  # release: the job now tries to store what it computed before the purge
            wait_for(lambda: finished(job.pk), what="the in-flight job")
            fresh = CompactionJob.objects.exclude(pk=job.pk).filter(workflow=wf).first()
            assert fresh is not None, "no fresh compaction was requested"
            wait_for(lambda: finished(fresh.pk), what="the fresh compaction")
        job.refresh_from_db()
        fresh.refresh_from_db()
    assert job.outcome == "discarded_purged" and job.summary_id is None, (job.outcome, job.error)
    assert fresh.outcome == "activated", (fresh.outcome, fresh.error)
    assert all("Jane Roe" not in s.content for s in Summary.objects.filter(workflow=wf))
    context = alice.api.get(f"/api/v1/workflows/{wf.external_id}/context/")
    assert context.status_code == 200 and "Jane Roe" not in context.content.decode()
    shown = alice.api.get(f"/api/v1/compactions/{job.pk}/")  # the recorded, visible end state
    assert shown.status_code == 200 and shown.json()["outcome"] == "discarded_purged"
