"""Tampering as a table owner could: the append-only triggers switched off (test transaction only).

No service can produce these states; tests that use this carry ``impossible_state``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection


@contextmanager
def append_only_off() -> Iterator[None]:
    """Every table's user triggers off (PostgreSQL) or the bypass row set (SQLite), then back on."""
    tables = [connection.ops.quote_name(t) for t in connection.introspection.table_names()]
    with connection.cursor() as cur:
        if connection.vendor == "sqlite":
            cur.execute("INSERT INTO memoryhub_append_only_bypass (id) VALUES (1)")
        else:
            # Deferred FK checks queued by this test's inserts would block ALTER TABLE: run them now.
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
            for table in tables:
                cur.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    try:
        yield
    finally:
        with connection.cursor() as cur:
            if connection.vendor == "sqlite":
                cur.execute("DELETE FROM memoryhub_append_only_bypass")
            else:
                cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
                for table in tables:
                    cur.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
                cur.execute("SET CONSTRAINTS ALL DEFERRED")
