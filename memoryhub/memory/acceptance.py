"""Whether a compaction's summary was accepted, kept on the job as it changes (``CompactionJob.accepted``).

The acceptance rate is a share of a window's finished jobs. Asked live of a busy week (100k jobs)
it had to look at each job's summary, or at each rejected summary's jobs; kept on the job, the
jobs that are *not* accepted are one partial index in the window (``memoryhub_job_unaccepted``).

``accepted_q`` is the definition. Every write that can change it refreshes the jobs it touches:
a summary's status moving into or out of ``ACCEPTED_STATUSES`` and a new validation record
(``lifecycle._apply``), a job getting its summary (the job services, imports). A test fixture
(tests/conftest.py) compares the column with the definition after every test of the suite, so a
new write path that forgets is caught the day it is added.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, Q, QuerySet

from memoryhub.models import CompactionJob, SummaryStatus, ValidationRecord

ACCEPTED_STATUSES = (SummaryStatus.VALIDATED, SummaryStatus.ACTIVE, SummaryStatus.SUPERSEDED)


def accepted_q() -> Q:
    """A job whose summary was accepted: validated, active or superseded, except a framework's
    summary that failed its validator run and is active only by the observer's waiver
    (memoryhub.memory.observed: "its failed checks stay on the record"). Counted as accepted, it
    read "acceptance 100%" beside the same window's validation failures."""
    failed_run = ValidationRecord.objects.filter(summary=OuterRef("summary"), passed=False, waived_by="")
    observed = Q(idempotency_key__startswith="observed/")
    return Q(summary__status__in=ACCEPTED_STATUSES) & ~(observed & Q(Exists(failed_run)))


def stale(jobs: QuerySet[CompactionJob]) -> QuerySet[CompactionJob]:
    """The jobs among ``jobs`` whose ``accepted`` column disagrees with ``accepted_q``."""
    accepted = jobs.filter(accepted_q()).values("pk")
    return jobs.filter(Q(accepted=True) & ~Q(pk__in=accepted) | Q(accepted=False, pk__in=accepted))


def refresh(jobs: QuerySet[CompactionJob]) -> int:
    """Bring ``accepted`` of ``jobs`` in line with ``accepted_q``; how many changed."""
    accepted = jobs.filter(accepted_q()).values("pk")  # the same jobs: never a scan of the table
    return jobs.filter(accepted=False, pk__in=accepted).update(accepted=True) + jobs.filter(
        accepted=True
    ).exclude(pk__in=accepted).update(accepted=False)


def refresh_summary_jobs(summary_id: int) -> int:
    return refresh(CompactionJob.objects.filter(summary_id=summary_id))


def changes_acceptance(before: str, after: str) -> bool:
    return (before in ACCEPTED_STATUSES) != (after in ACCEPTED_STATUSES)
