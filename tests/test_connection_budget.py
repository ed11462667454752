"""The test processes' PostgreSQL connections stay within their share of the server's
max_connections (tests/connection_budget.py): threads beyond it wait instead of being refused."""

from __future__ import annotations

import gc
import threading
import time

import pytest
from django.db import connection

from tests import connection_budget

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_threads_beyond_the_share_wait_for_a_slot_and_all_finish():
    share = connection_budget.size()
    assert share is not None and share >= 4
    lock = threading.Lock()
    open_now, most, finished, errors = [0], [0], [], []

    def worker() -> None:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            with lock:
                open_now[0] += 1
                most[0] = max(most[0], open_now[0])
            time.sleep(0.05)
            with lock:
                open_now[0] -= 1
            finished.append(1)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(share + 10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert len(finished) == share + 10
    # this test's own connection holds one slot, so the threads had at most share - 1 at once
    assert 1 < most[0] <= share - 1


def test_a_thread_that_never_closes_its_connection_gives_its_slot_back_when_collected():
    before = connection_budget._slots._value  # type: ignore[union-attr]

    def leaky() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    t = threading.Thread(target=leaky)
    t.start()
    t.join(10)
    gc.collect()
    deadline = time.monotonic() + 10
    while connection_budget._slots._value != before and time.monotonic() < deadline:  # type: ignore[union-attr]
        gc.collect()
        time.sleep(0.05)
    assert connection_budget._slots._value == before  # type: ignore[union-attr]


def test_the_share_leaves_room_for_other_processes_and_never_drops_below_a_race():
    assert connection_budget.share(100, 3, 2) == (100 - 3 - connection_budget.OTHER_PROCESSES) // 2
    assert connection_budget.share(100, 3, 1) == 100 - 3 - connection_budget.OTHER_PROCESSES
    assert connection_budget.share(20, 3, 8) == 4
