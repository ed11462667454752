"""The overview's acceptance rate counts only the jobs that are not accepted
(metrics.acceptance_given_succeeded) and takes the succeeded ones from the rollups. Every kind of
finished job — accepted or not, in the window or not, this tenant's or another's — must leave it
equal to the metric, alone and all together."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from memoryhub.accounts.tenancy import create_tenant
from memoryhub.memory import lifecycle
from memoryhub.models import Tenant, Workflow
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
    with frozen(T0):
        succeeded = metrics.COMPACTIONS.between(tenant, SINCE, UNTIL).count()
        return (
            metrics.acceptance_given_succeeded(tenant, SINCE, UNTIL, succeeded),
            compute(tenant, "acceptance_rate", since=SINCE, until=UNTIL),
        )


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
