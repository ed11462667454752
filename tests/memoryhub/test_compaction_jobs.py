"""Compaction jobs through the real services and database (the task body is called directly;
real-worker deliveries are in test_worker_compaction.py)."""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import pytest
from django.db import connection

from audit.models import AuditEntry
from memoryhub.compaction.samples import payments_workflow
from memoryhub.core.actors import Actor
from memoryhub.models import (
    CompactionJob,
    JobStatus,
    LifecycleEvent,
    Summary,
    SummaryStatus,
)
from memoryhub.pipeline import jobs
from tests.factories import append, judged_by, make_workflow, payments, require_approval
from tests.helpers import post
from tests.memoryhub.llm_endpoint import fake_llm

# Messages published by on_commit hooks must not leak into a later real-worker test.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("empty_broker")]
ACTOR = Actor.system("tests")


@pytest.fixture
def wf(tenant):
    return payments(tenant, rounds=6)


def request(wf, **kwargs):
    job, created = jobs.request_compaction(wf, actor=ACTOR, **kwargs)
    return job


def run(job, task_id="task-1", **kwargs) -> str:
    outcome = jobs.run_job(job.pk, task_id, **kwargs)
    job.refresh_from_db()
    return outcome


# -- requesting ----------------------------------------------------------------------------------


def test_post_returns_202_and_the_same_job_for_the_same_key(api, wf, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        first = post(api, "/api/v1/workflows/api-tests-42/compactions/", {})
    assert first.status_code == 202, first.content
    body = first.json()
    assert body["created"] is True
    assert body["source_revision"] == wf.head_seq
    assert body["compactor"] == "extractive-v3"
    assert body["idempotency_key"] == f"{wf.tenant_id}/{wf.pk}/{wf.head_seq}/extractive-v3"
    assert len(callbacks) == 1  # enqueued only once the job row committed
    job = CompactionJob.objects.get()
    assert job.status == JobStatus.QUEUED and job.enqueued_at is not None and job.enqueue_attempts == 1

    again = post(
        api,
        "/api/v1/workflows/api-tests-42/compactions/",
        {"source_revision": wf.head_seq, "compactor": "extractive-v3"},
    )
    assert again.status_code == 202
    assert again.json()["job_id"] == body["job_id"] and again.json()["created"] is False
    assert CompactionJob.objects.count() == 1
    assert AuditEntry.objects.filter(action="compaction.request").count() == 1


def test_a_different_revision_is_a_different_job(wf):
    a, b = request(wf, source_revision=10), request(wf, source_revision=11)
    assert a.pk != b.pk and request(wf, source_revision=10).pk == a.pk


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"compactor": "nope"}, "unknown_compactor"),
        ({"compactor": "openai-chat-v1"}, "compactor_unavailable"),
        ({"source_revision": 0}, "invalid_source_revision"),
        ({"source_revision": 10_000}, "invalid_source_revision"),
        ({"source_revision": True}, "invalid_source_revision"),
        ({"source_revision": "5"}, "invalid_source_revision"),
        ({"priority": 1}, "invalid_body"),
    ],
)
def test_bad_requests_are_clear_400s_and_write_nothing(api, wf, settings, body, code):
    settings.MEMORYHUB_LLM_BASE_URL = ""
    r = post(api, "/api/v1/workflows/api-tests-42/compactions/", body)
    assert r.status_code == 400, r.content
    assert r.json()["error"] == code
    if code == "compactor_unavailable":
        assert "MEMORYHUB_LLM_BASE_URL" in r.json()["detail"]
    assert CompactionJob.objects.count() == 0
    assert not AuditEntry.objects.filter(action="compaction.request").exists()


def test_empty_workflow_has_nothing_to_compact(api, tenant):
    make_workflow(tenant, "empty")
    r = post(api, "/api/v1/workflows/empty/compactions/", {})
    assert r.status_code == 400 and r.json()["error"] == "nothing_to_compact"


def test_jobs_are_tenant_scoped_and_viewers_cannot_request(api, carol, mallory, wf):
    job = request(wf)
    assert mallory.api.get(f"/api/v1/compactions/{job.pk}/").status_code == 404
    assert mallory.api.get(f"/api/v1/compactions/{job.pk}/").json()["error"] == "job_not_found"
    assert post(mallory.api, "/api/v1/workflows/api-tests-42/compactions/", {}).status_code == 404
    assert carol.api.get(f"/api/v1/compactions/{job.pk}/").status_code == 200
    assert post(carol.api, "/api/v1/workflows/api-tests-42/compactions/", {}).status_code == 403
    listed = api.get("/api/v1/workflows/api-tests-42/compactions/").json()
    assert [j["job_id"] for j in listed["results"]] == [job.pk]


# -- running -------------------------------------------------------------------------------------


def test_a_job_compacts_validates_and_activates(api, wf):
    job = request(wf)
    assert run(job) == "activated"
    assert job.status == JobStatus.SUCCEEDED and job.outcome == "activated"

    summary = Summary.objects.get(job=job)
    assert summary.status == SummaryStatus.ACTIVE
    assert (summary.covers_from_seq, summary.covers_to_seq) == (1, wf.head_seq)
    assert summary.compactor_name == "extractive-v3" and summary.model == "none"
    assert summary.token_budget == 4000  # half the seed policy's 8,000-token target
    wf.refresh_from_db()
    assert wf.active_summary_id == summary.pk and wf.active_revision == 1
    assert job.expected_revision == 0

    (attempt,) = job.attempts
    assert attempt["outcome"] == "activated" and attempt["task_id"] == "task-1"
    assert attempt["finished_at"] is not None
    # every lifecycle step names the task attempt that caused it
    steps = LifecycleEvent.objects.filter(summary=summary).order_by("id")
    assert [e.action for e in steps] == ["validate", "activate"]
    assert {e.task_attempt_id for e in steps} == {attempt["attempt_id"]}
    assert job.tokens_in == wf.total_tokens  # every covered event, as counted at ingest
    assert job.tokens_out == summary.token_count
    assert job.cost_usd == Decimal("0") and job.latency_ms is not None

    shown = api.get(f"/api/v1/compactions/{job.pk}/").json()
    assert shown["summary_id"] == summary.summary_id
    assert shown["attempts"][0]["attempt_id"] == attempt["attempt_id"]
    assert shown["estimated_cost_usd"] == "0.000000"
    assert shown["tokens_in"] == job.tokens_in and shown["latency_ms"] == job.latency_ms


def test_redelivery_of_a_finished_job_is_recorded_and_writes_nothing(wf):
    job = request(wf)
    run(job, "task-1")
    assert run(job, "task-1") == "skipped"
    assert run(job, "task-2") == "skipped"
    assert Summary.objects.filter(job=job).count() == 1
    assert [a["outcome"] for a in job.attempts] == ["activated", "skipped", "skipped"]
    assert job.attempts[1]["error"] == "job already SUCCEEDED"


def test_the_next_job_builds_on_the_active_summary(wf):
    first = request(wf, source_revision=30)
    run(first)
    s1 = Summary.objects.get(job=first)
    append(wf, payments_workflow(rounds=2)[8:])
    wf.refresh_from_db()
    second = request(wf)
    assert run(second) == "activated"
    s2 = Summary.objects.get(job=second)
    assert (s2.covers_from_seq, s2.covers_to_seq) == (1, wf.head_seq)
    s1.refresh_from_db()
    assert s1.status == SummaryStatus.SUPERSEDED
    facts_1 = {f["key"]: f for f in json.loads(s1.content)["facts"]}
    facts_2 = {f["key"]: f for f in json.loads(s2.content)["facts"]}
    assert set(facts_1) <= set(facts_2)
    assert facts_2["approval-12"]["source_seqs"] == facts_1["approval-12"]["source_seqs"]


@pytest.mark.django_db(transaction=True)
def test_a_job_that_finishes_after_a_newer_activation_is_a_stale_attempt(settings, tenant):
    """Job A reads active_revision 0 and calls a slow LLM; job B activates meanwhile; A lands stale."""
    wf = make_workflow(tenant, "race")
    append(wf, payments_workflow(rounds=3))
    # The fake LLM writes prose that names none of the units it leaves out: rules-7 rejects that
    # (openai-chat-v2 declares no drops). This test is about delivery, so the workflow validates
    # with rules-6, under which the outcome depends on the race alone.
    judged_by(wf, "rules-6")
    with fake_llm() as llm:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        llm.gate = threading.Event()
        slow = request(wf, compactor="openai-chat-v2")
        outcome: list[str] = []

        def deliver():
            try:
                outcome.append(jobs.run_job(slow.pk, "task-slow"))
            finally:
                connection.close()

        thread = threading.Thread(target=deliver)
        thread.start()
        assert llm.received.wait(30)  # job A is running, its expected revision read
        fast = request(wf)
        assert run(fast, "task-fast") == "activated"
        llm.gate.set()
        thread.join(60)
    assert outcome == ["stale"]
    slow.refresh_from_db()
    assert slow.status == JobStatus.SUCCEEDED and slow.outcome == "stale" and slow.expected_revision == 0
    late = Summary.objects.get(job=slow)
    assert late.status == SummaryStatus.VALIDATED  # kept, never activated, history intact
    assert late.model == "gpt-test-2026-01-15"  # the model the endpoint reported
    stale = LifecycleEvent.objects.get(summary=late, action="activate")
    assert (stale.result, stale.expected_revision, stale.observed_revision) == ("stale", 0, 1)
    assert stale.task_attempt_id == slow.attempts[0]["attempt_id"]
    wf.refresh_from_db()
    assert wf.active_summary == Summary.objects.get(job=fast)


def test_transient_errors_retry_then_fail_with_every_attempt(settings, wf):
    with fake_llm() as llm:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        llm.status = 503
        job = request(wf, compactor="openai-chat-v1")
        with pytest.raises(jobs.RetryLater) as retry:
            run(job, "task-1", retries_left=1)
        job.refresh_from_db()
        assert retry.value.countdown == jobs.retry_countdown(jobs.max_retries() - 1)
        assert job.status == JobStatus.QUEUED and job.attempts[0]["outcome"] == "retry"
        assert "HTTP 503" in job.attempts[0]["error"]
        assert run(job, "task-1", retries_left=0) == "failed"
    assert job.status == JobStatus.FAILED
    assert job.error.startswith("retries exhausted: LLM endpoint answered HTTP 503")
    assert [a["outcome"] for a in job.attempts] == ["retry", "failed"]
    assert not Summary.objects.filter(job=job).exists()


def test_a_transient_error_then_success_activates(settings, wf):
    # The fake LLM writes prose that names none of the units it leaves out: rules-7 rejects that
    # (openai-chat-v2 declares no drops). This test is about delivery, so the workflow validates
    # with rules-6, under which the outcome depends on the retries alone.
    judged_by(wf, "rules-6")
    with fake_llm() as llm:
        settings.MEMORYHUB_LLM_BASE_URL, settings.MEMORYHUB_LLM_MODEL = llm.url, "gpt-test"
        llm.statuses = [429]
        job = request(wf, compactor="openai-chat-v2")
        with pytest.raises(jobs.RetryLater):
            run(job, "task-1", retries_left=3)
        assert run(job, "task-1", retries_left=2) == "activated"
    assert [a["outcome"] for a in job.attempts] == ["retry", "activated"]
    assert (job.tokens_in, job.tokens_out) == (321, 45)
    assert job.cost_usd == Decimal("0.000000")  # gpt-test has no configured price
    settings.MEMORYHUB_MODEL_PRICES = {"gpt-test": (1.0, 2.0)}
    assert jobs.estimate_cost("gpt-test-2026-01-15", "openai-chat-v1", 321, 45) == Decimal("0.000411")


def test_a_compactor_unconfigured_at_run_time_fails_clearly(settings, wf):
    settings.MEMORYHUB_LLM_BASE_URL = "http://127.0.0.1:9/v1"
    job = request(wf, compactor="openai-chat-v1")
    settings.MEMORYHUB_LLM_BASE_URL = ""
    assert run(job) == "failed"
    assert job.status == JobStatus.FAILED and "MEMORYHUB_LLM_BASE_URL" in job.error


def test_deliveries_are_bounded_when_workers_keep_dying(settings, wf):
    settings.MEMORYHUB_COMPACTION_LEASE_SECONDS = 0  # every redelivery finds the previous lease expired
    settings.MEMORYHUB_COMPACTION_MAX_DELIVERIES = 3
    job = request(wf)
    for n in range(3):
        # A delivery whose worker is killed right after claiming: claimed, never finished.
        assert jobs._claim(job.pk, f"task-{n}") is not None
    assert run(job, "task-3") == "skipped"
    assert job.status == JobStatus.FAILED
    assert job.error == "gave up after 3 deliveries without a result"
    assert [a["outcome"] for a in job.attempts] == ["lost", "lost", "lost", "failed"]
    assert not Summary.objects.filter(job=job).exists()


def test_a_running_attempt_holds_the_job_until_its_lease_expires(settings, wf):
    job = request(wf)
    assert jobs._claim(job.pk, "task-a") is not None
    assert run(job, "task-b") == "skipped"
    assert job.attempts[1]["error"] == f"attempt {job.attempts[0]['attempt_id']} holds the job"
    settings.MEMORYHUB_COMPACTION_LEASE_SECONDS = 0
    assert run(job, "task-c") == "activated"
    assert [a["outcome"] for a in job.attempts] == ["lost", "skipped", "activated"]
    assert Summary.objects.filter(job=job).count() == 1


def test_nothing_to_compact_before_an_unanswered_tool_call(tenant):
    wf = make_workflow(tenant, "tools")
    append(wf, [{"kind": "tool_call", "content": "search()", "tool_call_id": "c1", "agent": "a"}])
    job = request(wf)
    assert run(job) == "nothing_to_compact"
    assert job.status == JobStatus.SUCCEEDED and job.summary is None


def test_a_summary_that_fails_validation_is_rejected(settings, wf):
    settings.MEMORYHUB_SUMMARY_TOKEN_BUDGET = 300  # the facts alone are larger
    # extractive-v2 keeps every fact and overflows (extractive-v3 would declare drops instead).
    job = request(wf, compactor="extractive-v2")
    assert run(job) == "rejected"
    summary = Summary.objects.get(job=job)
    assert summary.status == SummaryStatus.REJECTED
    record = summary.validations.get()
    failed = [c["name"] for c in record.checks if not c["passed"]]
    # rules-7 also reports what v2's budget-blind salient block cannot hold; the budget is one reason.
    assert failed[0] == "token_budget", failed
    assert record.mandatory_coverage == 1.0


def test_policy_requiring_approval_leaves_the_summary_validated(tenant, wf):
    require_approval(tenant, wf)
    job = request(wf)
    assert run(job) == "awaiting_approval"
    summary = Summary.objects.get(job=job)
    assert summary.status == SummaryStatus.VALIDATED
    wf.refresh_from_db()
    assert wf.active_summary is None


def test_a_retried_job_resumes_from_the_summary_it_already_wrote(settings, wf):
    """An attempt that died after writing the candidate: the next one validates and activates it."""
    settings.MEMORYHUB_COMPACTION_LEASE_SECONDS = 0
    job = request(wf)
    claim = jobs._claim(job.pk, "task-a")
    written = jobs._compact_and_store(claim, ACTOR)  # the dead attempt got this far
    assert run(job, "task-b") == "activated"
    assert Summary.objects.filter(job=job).count() == 1
    assert Summary.objects.get(job=job).pk == written.pk


# -- outbox --------------------------------------------------------------------------------------


def test_sweeper_enqueues_pending_and_orphaned_jobs(settings, wf):
    pending = request(wf, source_revision=5)  # on_commit never ran in this test transaction: PENDING
    assert pending.status == JobStatus.PENDING
    orphan = request(wf, source_revision=6)
    jobs._claim(orphan.pk, "task-dead")
    assert jobs.sweep_outbox(grace_seconds=0) == {
        "pending": 1,
        "queued": 0,
        "running": 0,
        "failed_to_enqueue": 0,
    }
    pending.refresh_from_db()
    assert pending.status == JobStatus.QUEUED and pending.enqueue_attempts == 1

    settings.MEMORYHUB_COMPACTION_LEASE_SECONDS = 0
    counts = jobs.sweep_outbox(grace_seconds=0)
    assert counts["running"] == 1 and counts["queued"] == 1  # orphan re-sent; queued one presumed lost
    orphan.refresh_from_db()
    assert orphan.status == JobStatus.RUNNING and orphan.enqueue_attempts == 1


def test_listing_jobs_costs_the_same_queries_for_one_or_many(api, wf):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    run(request(wf, source_revision=3))

    def list_queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert api.get("/api/v1/workflows/api-tests-42/compactions/").status_code == 200
        return len(captured.captured_queries)

    list_queries()  # warm up per-key bookkeeping (last_used_at) so only the listing is compared
    one = list_queries()
    for revision in range(4, 9):
        run(request(wf, source_revision=revision), f"task-{revision}")
    assert list_queries() == one
    assert len(api.get("/api/v1/workflows/api-tests-42/compactions/?status=SUCCEEDED").json()["results"]) == 6
