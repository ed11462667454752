"""Whole-database snapshots of the test database, for state that is expensive to build and read by
many tests (the demo: ``load_demo`` takes half a minute or more). Built once per session, each test
that wants it gets a fresh copy: SQLite copies the file through SQLite's backup API, PostgreSQL
clones a database with ``CREATE DATABASE … TEMPLATE``. Tests that take a copy are transactional
(pytest-django flushes the database after them), so the next test starts empty as usual.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from django.db import connection, connections


def _quiet_threads() -> None:
    """Close the connections the background writers (decision log, audit sequencer) hold."""
    from audit import log
    from triggers import decision_log

    decision_log.buffer.shutdown()
    log.background.shutdown()
    connections.close_all()


class Snapshot:
    """A copy of the test database as it is now; ``restore()`` puts it back."""

    def __init__(self, label: str, directory: Path) -> None:
        _quiet_threads()
        self.vendor = connection.vendor
        self.live = connection.settings_dict["NAME"]
        if self.vendor == "sqlite":
            self.copy = str(directory / f"{label}.sqlite3")
            _sqlite_copy(self.live, self.copy)
        elif self.vendor == "postgresql":
            self.copy = f"{self.live}_{label}"[:63]
            _pg_clone(self.live, self.copy)
        else:  # pragma: no cover - the project runs on these two
            raise RuntimeError(f"no snapshot for {self.vendor}")

    def restore(self) -> None:
        _quiet_threads()
        if self.vendor == "sqlite":
            _sqlite_copy(self.copy, self.live)
        else:
            _pg_clone(self.copy, self.live)

    def drop(self) -> None:
        if self.vendor == "sqlite":
            Path(self.copy).unlink(missing_ok=True)
        else:
            with connection._nodb_cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{self.copy}" WITH (FORCE)')


def _sqlite_copy(source: str, target: str) -> None:
    with closing(sqlite3.connect(source)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)


def _pg_clone(source: str, target: str) -> None:
    # CREATE DATABASE … TEMPLATE needs the source unused: end any session still on it.
    with connection._nodb_cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname IN (%s, %s) AND pid <> pg_backend_pid()",
            [source, target],
        )
        cursor.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        cursor.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')
