"""The overview's acceptance rate counts only the jobs that are not accepted
(metrics.acceptance_given_succeeded) and takes the succeeded ones from the rollups. Every kind of
finished job — accepted or not, in the window or not, this tenant's or another's — must leave it
equal to the metric, alone and all together."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import models

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.memory import acceptance, lifecycle
from memoryhub.models import CompactionJob, Tenant, Workflow
from memoryhub.observe import metrics
from memoryhub.observe.metrics import compute
from tests import factories as f
from tests.factories import REVIEWER, build_workflow
from tests.helpers import T0, frozen

pytestmark = pytest.mark.django_db

IN_WINDOW = T0 - timedelta(minutes=20)
SINCE, UNTIL = T0 - timedelta(hours=1), T0


def _job(wf: Workflow, revision: int, **kwargs) -> None:
    f.imported_job(wf, revision, compactor=f"c-{revision}", finished_at=kwargs.pop("at", IN_WINDOW), **kwargs)


def accepted(wf: Workflow) -> None:
    _job(wf, 1, summary=f.activated(wf, 1, 10))


def rejected(wf: Workflow) -> None:
    _job(wf, 2, summary=f.rejected(wf, 1, 20))


def quarantined_after_acceptance(wf: Workflow) -> None:
    summary = f.activated(wf, 1, 12)
    _job(wf, 3, summary=summary)
    lifecycle.quarantine(summary, REVIEWER, "drops the 401 requirement")


def failed_without_summary(wf: Workflow) -> None:
    _job(wf, 4, status="FAILED")


def failed_with_an_accepted_summary(wf: Workflow) -> None:
    _job(wf, 5, status="FAILED", summary=f.validated(wf, 1, 14))


def succeeded_without_summary(wf: Workflow) -> None:
    _job(wf, 6)


def outside_the_window(wf: Workflow) -> None:
    _job(wf, 7, status="FAILED", at=SINCE - timedelta(minutes=1))
    _job(wf, 8, summary=f.rejected(wf, 1, 16), at=UNTIL + timedelta(minutes=1))


def observed(wf: Workflow) -> None:
    """A framework's compactions: one kept what it covers, one did not (not accepted)."""
    f.observed_kept_and_lost(wf.tenant, f"{wf.external_id}-session")


KINDS: dict[str, Callable[[Workflow], None]] = {
    kind.__name__: kind
    for kind in (
        accepted,
        rejected,
        quarantined_after_acceptance,
        failed_without_summary,
        failed_with_an_accepted_summary,
        succeeded_without_summary,
        outside_the_window,
        observed,
    )
}


def both(tenant: Tenant) -> tuple[float | None, float | None]:
    """The overview's count and the metric; both must also be the definition itself, asked of
    every finished job in the window (acceptance.accepted_q, not the kept column)."""
    with frozen(T0):
        succeeded = metrics.COMPACTIONS.between(tenant, SINCE, UNTIL).count()
        fast = metrics.acceptance_given_succeeded(tenant, SINCE, UNTIL, succeeded)
        metric = compute(tenant, "acceptance_rate", since=SINCE, until=UNTIL)
    finished = metrics.ACCEPTANCE.rows.between(tenant, SINCE, UNTIL)
    assert metric == metrics.ratio(finished.filter(acceptance.accepted_q()).count(), finished.count())
    assert not acceptance.stale(CompactionJob.objects.all()).exists()
    return fast, metric


def build(tenant: Tenant, kinds: list[str]) -> None:
    for kind in kinds:
        wf = build_workflow(tenant, kind.replace("_", "-"), n=20)
        with frozen(IN_WINDOW):
            KINDS[kind](wf)


@pytest.mark.impossible_state(
    "jobs imported as history with the outcome each kind needs (factories.imported_job)"
)
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_kind_of_job_alone_beside_an_accepted_one(tenant, kind):
    build(tenant, sorted({"accepted", kind}))
    fast, metric = both(tenant)
    assert fast == metric


@pytest.mark.impossible_state(
    "jobs imported as history with the outcome each kind needs (factories.imported_job)"
)
def test_every_kind_together_and_another_tenants_jobs_beside_them(tenant):
    other = create_tenant("acceptance-other", "Other")
    build(other, ["rejected", "failed_without_summary", "observed"])
    build(tenant, list(KINDS))
    fast, metric = both(tenant)
    assert fast == metric
    # in the window: accepted, observed-kept, failed-with-accepted-summary accepted; rejected,
    # quarantined, failed-without-summary, succeeded-without-summary, observed-lost not
    assert metric == pytest.approx(3 / 8)
    assert both(other)[0] == both(other)[1]


def test_a_job_whose_kept_column_went_wrong_is_found_and_set_right(tenant):
    """The guard tests/conftest.py runs after every test can fail: a job marked the wrong way is
    found, and a refresh sets it right (both ways)."""
    wf = build_workflow(tenant, "kept-column", n=20)
    with frozen(IN_WINDOW):
        accepted(wf)
        rejected(wf)
    jobs = CompactionJob.objects.filter(workflow=wf)
    assert not acceptance.stale(jobs).exists()
    assert sorted(jobs.values_list("accepted", flat=True)) == [False, True]
    jobs.update(accepted=models.Case(models.When(accepted=True, then=False), default=True))
    assert acceptance.stale(jobs).count() == 2
    assert acceptance.refresh(jobs) == 2
    assert not acceptance.stale(jobs).exists()


def test_a_quarantine_and_a_release_move_the_jobs_of_the_summary(tenant):
    wf = build_workflow(tenant, "moves", n=20)
    with frozen(IN_WINDOW):
        quarantined_after_acceptance(wf)
    job = CompactionJob.objects.get(workflow=wf)
    assert job.accepted is False  # quarantined: not accepted any more
    summary = job.summary
    lifecycle.release(summary, REVIEWER, "the 401 test is in the tail after all")
    job.refresh_from_db()
    summary.refresh_from_db()
    assert job.accepted is (summary.status in acceptance.ACCEPTED_STATUSES)
