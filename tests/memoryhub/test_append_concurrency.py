"""100 concurrent appends (threads, separate connections, PostgreSQL): gapless, no duplicates."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from memoryhub.models import Event, Workflow
from tests.factories import append, event, make_workflow

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_one_hundred_concurrent_appends_are_gapless(tenant):
    assert connection.vendor == "postgresql", "this proof must run on PostgreSQL"
    wf = make_workflow(tenant, "race")
    barrier = threading.Barrier(100)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            # More threads than this process's connection share wait for a slot
            # (tests/connection_budget.py): the appends still run dozens at a time.
            append(
                Workflow.objects.get(pk=wf.pk),
                [event(i, content=f"concurrent event {i} " * (i % 7 + 1))],
            )
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(1, 101)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[:3]
    seqs = sorted(Event.objects.filter(workflow=wf).values_list("seq", flat=True))
    assert seqs == list(range(1, 101))
    assert sorted(Event.objects.filter(workflow=wf).values_list("client_event_id", flat=True)) == sorted(
        f"ev-{i}" for i in range(1, 101)
    )
    wf.refresh_from_db()
    rows = list(Event.objects.filter(workflow=wf).order_by("seq").values_list("token_count", "cum_tokens"))
    assert wf.head_seq == 100 and wf.total_tokens == sum(t for t, _ in rows)
    running = 0
    for tokens, cum in rows:
        running += tokens
        assert cum == running
