"""The per-process background sequencer: audit entries join the chain right after their commit,
without the writer waiting for it.

``audit.log.record`` inserts an entry pending; after the writer's commit, ``request()`` names the
tenant to this process's sequencer thread and returns. The thread runs ``sequence_pending`` for
every tenant named since its last pass, so the entries of many writers go into the chain in one
short transaction (one lock of the chain head, one batch) instead of one sequencing transaction
per write. On PostgreSQL this takes a second commit and the hashing off the write path; an
activation returns as soon as its own transaction commits.

Nothing is lost when the thread is not there to do it (the process was killed, a pass failed):
the entries are committed, and the next pass or the beat sweep (``audit.sequence_pending``, every
few seconds) sequences them. ``drain()`` runs the pending passes on the calling thread: at exit,
and wherever a caller must see the chain complete (tests, the benchmark's checks).

``MEMORYHUB_AUDIT_SEQUENCER = "inline"`` (SQLite's default: it has one writer at a time, so a
thread gains nothing and would wait on the file lock) sequences on the writer's thread after its
commit instead. The instance lives in ``audit.log`` (``audit.log.background``), which gives it
``sequence_pending``.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.signals import worker_process_shutdown, worker_shutdown
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)

# The thread lets go of its database connection after this long without work.
IDLE_CLOSE_SECONDS = 5.0
# A pass starts this long after the commit that asked for it, so the entries of the writers that
# commit meanwhile go into the chain with it: one chain lock and one batch for all of them. At
# 20 ms, four writer processes on two cores spent enough on passes (every process runs its own)
# to cost 3 % of their activations (bench activation, 3 runs each: 1.53× vs 1.58× one process).
COALESCE_SECONDS = 0.05


class BackgroundSequencer:
    """One daemon thread per process that runs ``sequence(tenant_id)`` for the tenants it is given."""

    def __init__(self, sequence: Callable[[int], Any]) -> None:
        self._sequence = sequence
        self.reset()

    def reset(self) -> None:
        """Start empty, with no thread (a forked child: the parent keeps its queue and thread)."""
        self._lock = threading.Lock()  # guards everything below
        self._wake = threading.Condition(self._lock)
        self._tenants: set[int] = set()  # named since the last pass
        self._busy = False  # a pass is running
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self, tenant_id: int) -> None:
        """Sequence ``tenant_id``'s pending entries soon (called after the writer's commit)."""
        if settings.MEMORYHUB_AUDIT_SEQUENCER == "inline":
            self._sequence(tenant_id)
            return
        with self._lock:
            self._tenants.add(tenant_id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="audit-sequencer", daemon=True)
                self._thread.start()
            self._wake.notify_all()

    def drain(self, timeout: float = 30.0) -> None:
        """Return once every tenant named before the call has been through a pass: the thread's
        current pass is waited for, what is still queued is sequenced here."""
        with self._lock:
            self._wake.wait_for(lambda: not self._busy, timeout=timeout)
            tenants, self._tenants = self._tenants, set()
        self._pass(tenants)

    def shutdown(self) -> None:
        """Sequence what is queued, stop the thread and close its connection (a later request
        starts a new one): at exit, and between tests so no session keeps the database open."""
        with self._lock:
            thread, self._stopping = self._thread, True
            self._wake.notify_all()
        if thread is not None:
            thread.join(timeout=30)
        with self._lock:
            self._stopping, self._thread = False, None
        self.drain()

    def install(self) -> None:
        """Reset in forked children; drain at exit and at Celery worker shutdown (prefork children
        leave through ``os._exit``, past ``atexit``)."""
        os.register_at_fork(after_in_child=self.reset)
        atexit.register(self._at_exit)
        worker_shutdown.connect(self._at_exit, weak=False)
        worker_process_shutdown.connect(self._at_exit, weak=False)

    def _pass(self, tenants: set[int]) -> None:
        for tenant_id in sorted(tenants):
            self._sequence(tenant_id)

    def _run(self) -> None:
        connected = False
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        return  # what is queued: shutdown() drains it
                    if not self._tenants:
                        woke = self._wake.wait(timeout=IDLE_CLOSE_SECONDS if connected else None)
                        if not woke and not self._tenants:
                            connection.close()
                            connected = False
                        continue
                    self._busy = True
                # Let the commits of the next few milliseconds join this pass.
                time.sleep(COALESCE_SECONDS)
                with self._lock:
                    tenants, self._tenants = self._tenants, set()
                try:
                    connected = True
                    self._pass(tenants)
                except Exception:  # the entries stay pending: the next pass or the sweep takes them
                    logger.exception("audit sequencer pass failed; the beat sweep will retry")
                    connection.close()  # a broken session is replaced on the next pass
                    connected = False
                finally:
                    with self._lock:
                        self._busy = False
                        self._wake.notify_all()
        finally:
            connection.close()

    def _at_exit(self, *_args: Any, **_kwargs: Any) -> None:
        try:
            self.shutdown()
        except Exception:  # committed and pending: the beat sweep sequences them
            logger.exception("sequencing audit entries at shutdown failed")
