"""The per-process buffer that writes plain "continue" decision rows in batches.

A "continue" that asks for no job, carries no token estimate, stays within the hard limit and is
made outside a caller's transaction is the check an agent runs before every step; one INSERT and
commit per call cost more than the decision itself. Its row is appended here and written with
others in one short, synchronously committed transaction (COPY on PostgreSQL, multi-row INSERT on
SQLite):

* by the call that fills the buffer to ``MEMORYHUB_DECISION_BUFFER_ROWS`` rows;
* by a daemon flusher thread once the oldest row is ``MEMORYHUB_DECISION_BUFFER_MS`` old;
* before this process reads the log (``TriggerDecision.objects`` flushes first, outside a
  transaction); another process sees the rows within ``MEMORYHUB_DECISION_BUFFER_MS``;
* on clean shutdown: ``atexit`` (gunicorn workers, management commands) and Celery's worker and
  worker-process shutdown signals (prefork children leave through ``os._exit``, past ``atexit``).

A crash (SIGKILL, OOM) loses the rows of the last ``MEMORYHUB_DECISION_BUFFER_MS`` at most, never
a state change or a decision that acted: those are written before their call returns
(``triggers.services.decide``). Batches are written one at a time, in the order they were
buffered; a row whose workflow was deleted meanwhile is dropped, as the cascade would have.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from celery.signals import worker_process_shutdown, worker_shutdown
from django.apps import apps
from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, IntegrityError, connection, connections, transaction
from django.db.models import Field

from memoryhub.core.rows import PLAIN_COLUMN_TYPES

if TYPE_CHECKING:  # by name at run time (see _model): triggers.apps and triggers.models import this module
    from memoryhub.models import Workflow
    from triggers.models import TriggerDecision

logger = logging.getLogger(__name__)

# The flusher lets go of its database connection after this long without rows.
IDLE_CLOSE_SECONDS = 5.0


def _model() -> type[TriggerDecision]:
    # By name: triggers.models imports this module (its manager flushes the buffer before reads).
    return apps.get_model("triggers", "TriggerDecision")


@cache
def _fields() -> list[Field]:
    return [f for f in _model()._meta.concrete_fields if not f.primary_key]


@cache
def _copy_plan() -> list[tuple[Field, bool, Any]]:
    """Per field: (field, is it JSON, its encoder), for COPY on PostgreSQL, which takes plain
    columns as the attributes hold them (``get_db_prep_save`` cost a tenth of a buffered decision's
    CPU). A type not known to copy as it is fails here, at the first decision, rather than writing
    a value the ORM would have converted."""
    plan = []
    for field in _fields():
        kind = field.get_internal_type()
        if kind not in PLAIN_COLUMN_TYPES and kind != "JSONField":
            raise TypeError(f"TriggerDecision.{field.name} ({kind}): add its conversion to decision_log")
        plan.append((field, kind == "JSONField", getattr(field, "encoder", None)))
    return plan


def _write(batch: list[list[Any]]) -> int:
    """One transaction for the batch; a row whose workflow is gone fails it and is dropped.
    Returns the number of rows written."""
    try:
        _insert(batch)
    except IntegrityError:
        workflows = cast("type[Workflow]", _model()._meta.get_field("workflow").related_model)
        index = [f.attname for f in _fields()].index("workflow_id")
        ids = {row[index] for row in batch}
        alive = set(workflows.objects.filter(pk__in=ids).values_list("pk", flat=True))
        kept = [row for row in batch if row[index] in alive]
        if len(kept) == len(batch):
            raise
        logger.info("dropped %d buffered decision rows of deleted workflows", len(batch) - len(kept))
        if kept:
            _insert(kept)
        return len(kept)
    return len(batch)


def _insert(batch: list[list[Any]]) -> None:
    qn = connection.ops.quote_name
    fields = _fields()
    table = qn(_model()._meta.db_table)
    columns = ", ".join(qn(f.column) for f in fields)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in batch:
                    copy.write_row(row)
            return
        per_statement = max(1, (connection.features.max_query_params or 999) // len(fields))
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        for lo in range(0, len(batch), per_statement):
            chunk = batch[lo : lo + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES {', '.join([one] * len(chunk))}",
                [value for row in chunk for value in row],
            )


class DecisionBuffer:
    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards everything below
        self._wake = threading.Condition(self._lock)
        self._writing = threading.Lock()  # one batch at a time, so batches land in buffer order
        self._rows: list[list[Any]] = []
        self._oldest = 0.0  # monotonic time the oldest buffered row arrived
        self._thread: threading.Thread | None = None
        self._stopping = False

    def __len__(self) -> int:
        return len(self._rows)

    def append(self, row: TriggerDecision) -> None:
        """Buffer ``row`` (a TriggerDecision not saved yet); ``at`` is stamped now, not at the flush."""
        # The wrapper itself, not the thread-local proxy each field would look it up through.
        db = connections[DEFAULT_DB_ALIAS]
        if db.vendor == "postgresql":  # COPY adapts the values itself; JSON needs its wrapper
            values = [
                db.ops.adapt_json_value(f.pre_save(row, True), encoder) if is_json else f.pre_save(row, True)
                for f, is_json, encoder in _copy_plan()
            ]
        else:
            values = [f.get_db_prep_save(f.pre_save(row, True), db) for f in _fields()]
        with self._lock:
            if not self._rows:
                self._oldest = time.monotonic()
                self._wake.notify()
            self._rows.append(values)
            full = len(self._rows) >= settings.MEMORYHUB_DECISION_BUFFER_ROWS
            if self._thread is None:
                self._start()
        # Another thread already writing: its batch is taken, these rows go with the next one.
        if full and self._writing.acquire(blocking=False):
            try:
                self._write_pending()
            except DatabaseError:
                # The decision stands; the flusher retries the rows.
                logger.exception("writing buffered trigger decisions failed; retrying in the flusher")
            finally:
                self._writing.release()

    def flush(self) -> int:
        """Write every buffered row now on this thread's connection; the number written.

        Inside a transaction it writes nothing (the rows would share the caller's fate); the
        flusher writes them within ``MEMORYHUB_DECISION_BUFFER_MS``. A batch another thread is
        writing is waited for, so every row buffered before the call is committed after it."""
        # Rows first: a writer takes the batch while holding _writing, so empty + unlocked means
        # nothing is buffered or in flight.
        if (not self._rows and not self._writing.locked()) or connection.in_atomic_block:
            return 0
        with self._writing:
            return self._write_pending()

    def shutdown(self) -> int:
        """Stop the flusher, which writes what is buffered; the number of rows left unwritten."""
        with self._lock:
            thread, self._stopping = self._thread, True
            self._wake.notify()
        if thread is not None:
            thread.join(timeout=30)
        with self._lock:
            self._stopping = False
            self._thread = None
        self.flush()
        return len(self._rows)

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="decision-log-flusher", daemon=True)
        self._thread.start()

    def _write_pending(self) -> int:
        with self._lock:
            batch, self._rows = self._rows, []
        if not batch:
            return 0
        try:
            return _write(batch)
        except BaseException:
            with self._lock:
                self._rows[:0] = batch
                self._oldest = time.monotonic()  # retried one interval from now
            raise

    def _run(self) -> None:
        """The flusher: writes rows once the oldest is MEMORYHUB_DECISION_BUFFER_MS old, on its own
        connection, which it closes when idle (and on exit) so no session lingers."""
        connected = False
        try:
            while True:
                with self._lock:
                    if not self._rows and not self._stopping:
                        self._wake.wait(timeout=IDLE_CLOSE_SECONDS if connected else None)
                    if not self._rows:
                        if self._stopping:
                            return
                        idle = True
                    else:
                        idle = False
                        delay = self._oldest + settings.MEMORYHUB_DECISION_BUFFER_MS / 1000 - time.monotonic()
                        if delay > 0 and not self._stopping:
                            self._wake.wait(timeout=delay)
                            continue
                if idle:
                    connection.close()
                    connected = False
                    continue
                connected = True
                with self._writing:
                    try:
                        self._write_pending()
                    except Exception:
                        logger.exception("writing buffered trigger decisions failed; retrying")
                        connection.close()  # a broken session is replaced on the next attempt
                        if self._stopping:
                            return
        finally:
            connection.close()


buffer = DecisionBuffer()


def flush_decision_buffer() -> int:
    """Write this process's buffered decision rows now (see ``DecisionBuffer.flush``)."""
    return buffer.flush()


def _after_fork() -> None:
    # A forked child (gunicorn --preload, Celery prefork) starts empty; the parent keeps its rows.
    global buffer
    buffer = DecisionBuffer()


def _at_exit(*_args: Any, **_kwargs: Any) -> None:
    try:
        left = buffer.shutdown()
    except DatabaseError:
        logger.exception("writing buffered trigger decisions at shutdown failed")
        left = len(buffer)
    if left:
        logger.error("%d buffered trigger decision rows were not written at shutdown", left)


os.register_at_fork(after_in_child=_after_fork)
atexit.register(_at_exit)


def connect_worker_signals() -> None:
    worker_shutdown.connect(_at_exit, weak=False)
    worker_process_shutdown.connect(_at_exit, weak=False)
