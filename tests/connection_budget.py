"""Every PostgreSQL connection a test process opens takes a slot from this process's share of the
server's ``max_connections``, and gives it back when the connection closes.

Without it the concurrency proofs of two xdist workers could together open more connections than
the server allows (100 appending threads on one worker and 50 activating threads on the other),
and whichever test happened to connect next failed with "too many clients" although nothing was
wrong with it. With it, a thread beyond the share waits for a slot: the proof stays concurrent
(dozens of connections at once) and no other worker's test can be refused. The budget is applied
to the backend class, so every thread of every test is covered, including the next one written.
"""

from __future__ import annotations

import gc
import os
import threading
import time
import warnings
import weakref

from django.db.backends.postgresql.base import DatabaseWrapper

# Connections left for what the tests start in other processes: gunicorn and Celery workers,
# `manage.py` subprocesses, each holding a persistent connection while it runs.
OTHER_PROCESSES = 24
# A slot that does not come back within this long was leaked (a thread that never closed its
# connection): say so instead of hanging.
WAIT_SECONDS = 120

_slots: threading.BoundedSemaphore | None = None
_original_connect = DatabaseWrapper.get_new_connection
_original_close = DatabaseWrapper._close


class ConnectionBudgetExhausted(RuntimeError):
    pass


def share(max_connections: int, reserved: int, workers: int) -> int:
    """This process's share: what the server grants ordinary users, less what other processes
    need, divided among the test processes (never below 4: a two-thread race must still run)."""
    return max(4, (max_connections - reserved - OTHER_PROCESSES) // max(1, workers))


def _free(key: int) -> None:
    _holders.pop(key, None)
    if _slots is not None:
        _slots.release()


def _release(wrapper: DatabaseWrapper) -> None:
    finalizer = wrapper.__dict__.pop("_budget_slot", None)
    if finalizer is not None and finalizer.alive:
        finalizer()


# Who holds each slot: the thread that opened the connection and the test running then.
_holders: dict[int, tuple[threading.Thread, str]] = {}
_reported: set[str] = set()


def _report_leaks() -> None:
    """Name the tests whose threads ended with their connection open (once per test)."""
    leaks = {test for thread, test in list(_holders.values()) if not thread.is_alive()} - _reported
    if leaks:
        _reported.update(leaks)
        warnings.warn(
            f"threads ended without closing their database connection in: {sorted(leaks)}", stacklevel=2
        )


def _acquire(slots: threading.BoundedSemaphore) -> bool:
    """A slot, waiting up to WAIT_SECONDS. A connection whose thread ended without closing it is
    freed only when its wrapper is collected, and a wrapper sits in reference cycles (its
    operations, features and client point back at it), which only the cyclic collector frees:
    collect while waiting, or the slot comes back whenever the collector happens to run."""
    if slots.acquire(blocking=False):
        return True
    _report_leaks()
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        gc.collect()
        if slots.acquire(timeout=0.5):
            return True
    return False


def _connect(self, conn_params):
    if _slots is None:
        return _original_connect(self, conn_params)
    if not _acquire(_slots):
        raise ConnectionBudgetExhausted(
            f"no PostgreSQL connection slot freed in {WAIT_SECONDS} s: a test thread keeps its "
            "connection open (close it with django.db.connection.close() in the thread's finally)"
        )
    try:
        connection = _original_connect(self, conn_params)
    except BaseException:
        _slots.release()
        raise
    # A wrapper dropped without close() (its thread ended) gives its slot back when collected.
    key = id(self)
    _holders[key] = (threading.current_thread(), os.environ.get("PYTEST_CURRENT_TEST", "?"))
    self.__dict__["_budget_slot"] = weakref.finalize(self, _free, key)
    return connection


def _close(self):
    try:
        return _original_close(self)
    finally:
        _release(self)


def install(max_connections: int, reserved: int, workers: int) -> int:
    """Apply the budget to every PostgreSQL connection this process opens; returns its size."""
    global _slots
    size = share(max_connections, reserved, workers)
    _slots = threading.BoundedSemaphore(size)
    DatabaseWrapper.get_new_connection = _connect  # type: ignore[method-assign]
    DatabaseWrapper._close = _close  # type: ignore[method-assign]
    return size


def size() -> int | None:
    return None if _slots is None else _slots._initial_value  # type: ignore[attr-defined]


def xdist_workers() -> int:
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
