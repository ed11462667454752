"""The review inbox's "failed checks" reason is the newest validation record's verdict, kept on
the summary (``checks_failed``) so the inbox counts it from an index: it must follow every record
a validation or a waiver appends, and a reviewer's own rejection is not a failed check."""

from __future__ import annotations

import pytest

from audit.review import inbox_counts, inbox_queryset, review_inbox
from memoryhub.memory import lifecycle
from memoryhub.models import Summary
from tests.audit.test_review_actions import over_budget
from tests.factories import REVIEWER, candidate

pytestmark = pytest.mark.django_db


def reasons(tenant) -> dict[str, int]:
    """The inbox's counts as its rows say them (review_inbox gives each row its reason)."""
    rows = review_inbox(tenant.pk)
    named = {"awaiting_approval": "awaiting_approval", "candidates": "candidate"}
    named |= {"failed_checks": "failed_checks", "quarantined": "quarantined"}
    return {"total": len(rows)} | {key: sum(1 for r in rows if r.why == why) for key, why in named.items()}


def test_failed_checks_follow_the_newest_record_through_waivers_and_a_rejection(incident):
    wf = incident.workflow
    summary = over_budget(wf)  # its one failed check: the token budget
    assert (summary.status, summary.checks_failed) == ("REJECTED", True)
    assert inbox_counts(wf.tenant_id)["failed_checks"] == 1 == reasons(wf.tenant)["failed_checks"]

    lifecycle.waive(summary, ["token_budget"], REVIEWER, "the budget was set too tight")
    summary.refresh_from_db()
    assert (summary.status, summary.checks_failed) == ("VALIDATED", False)
    assert inbox_counts(wf.tenant_id)["failed_checks"] == 0

    lifecycle.reject(summary, REVIEWER, "reads badly")  # rejected by a person: no failed check
    summary.refresh_from_db()
    assert (summary.status, summary.checks_failed) == ("REJECTED", False)
    assert summary not in inbox_queryset(wf.tenant_id)
    assert inbox_counts(wf.tenant_id) == reasons(wf.tenant)
    assert not lifecycle.checks_failed_stale(Summary.objects.all()).exists()


@pytest.mark.impossible_state("a kept column set wrong behind the lifecycle's back")
def test_a_summary_whose_kept_verdict_went_wrong_is_found(incident):
    """The guard tests/conftest.py runs after every test can fail, both ways."""
    wf = incident.workflow
    failed = over_budget(wf)
    Summary.objects.filter(pk=failed.pk).update(checks_failed=False)
    never_validated = candidate(wf, 1, 10)
    Summary.objects.filter(pk__in=[incident.s1.pk, never_validated.pk]).update(checks_failed=True)
    stale = set(lifecycle.checks_failed_stale(Summary.objects.all()).values_list("pk", flat=True))
    assert stale == {failed.pk, incident.s1.pk, never_validated.pk}
