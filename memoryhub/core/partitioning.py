"""PostgreSQL: the event table as ``PARTITION BY HASH (workflow_id)``, and back.

Every hot event query is per workflow (appends lock one workflow row, tails are ``(workflow,
seq)`` range scans, investigations search one workflow's trigram index), so hash partitions keep
each index small without changing a single query. The conversion copies the rows into a new
partitioned table that carries everything the plain table had — check constraints, the unique
constraints (all of which include ``workflow_id``), foreign keys, every index (as partitioned
indexes, so each partition gets its own) and every trigger (the append-only rule and the purge
tombstone rule fire on every partition; statement-level triggers such as a TRUNCATE refusal are
installed on the parent and on each partition). The primary key becomes ``(id, workflow_id)``:
PostgreSQL requires the partition key in it; ids stay unique through their sequence.

SQLite is untouched. ``MEMORYHUB_EVENT_PARTITIONS`` (default 16; 0 = keep the plain table) is
read when the migration runs.
"""

from __future__ import annotations

from typing import Any

TABLE = "memoryhub_event"
OLD = "memoryhub_event_unpartitioned"
SEQUENCE = "memoryhub_event_id_seq"


def _rows(cursor: Any, sql: str, params: tuple = ()) -> list[tuple]:
    cursor.execute(sql, params)
    return list(cursor.fetchall())


def is_partitioned(cursor: Any) -> bool:
    return bool(
        _rows(
            cursor,
            "SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
            "WHERE c.relname = %s AND c.relnamespace = 'public'::regnamespace",
            (TABLE,),
        )
    )


def partition_names(cursor: Any) -> list[str]:
    return [
        name
        for (name,) in _rows(
            cursor,
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass ORDER BY c.relname",
            (TABLE,),
        )
    ]


def _definitions(cursor: Any, table: str) -> dict[str, list[tuple[str, str]]]:
    """Constraints (other than checks and NOT NULL), stand-alone indexes and user triggers of ``table``."""
    constraints = _rows(
        cursor,
        "SELECT conname, contype, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f') AND conparentid = 0 ORDER BY conname",
        (table,),
    )
    indexes = _rows(
        cursor,
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = %s::regclass AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) ORDER BY i.relname",
        (table,),
    )
    triggers = _rows(
        cursor,
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger "
        "WHERE tgrelid = %s::regclass AND NOT tgisinternal AND tgparentid = 0 ORDER BY tgname",
        (table,),
    )
    return {
        "constraints": [(name, f"{kind}:{definition}") for name, kind, definition in constraints],
        "indexes": list(indexes),
        "triggers": list(triggers),
    }


def _move_aside(cursor: Any, defs: dict[str, list[tuple[str, str]]]) -> None:
    """Rename the plain table and its named objects so the new table can take the names."""
    cursor.execute(f"ALTER TABLE {TABLE} RENAME TO {OLD}")
    for name, _ in defs["constraints"]:
        cursor.execute(f'ALTER TABLE {OLD} RENAME CONSTRAINT "{name}" TO "{name[:50]}_old"')
    for name, _ in defs["indexes"]:
        cursor.execute(f'ALTER INDEX "{name}" RENAME TO "{name[:50]}_old"')
    for name, _ in defs["triggers"]:
        cursor.execute(f'DROP TRIGGER "{name}" ON {OLD}')  # it moves to the new table


def _replay(cursor: Any, defs: dict[str, list[tuple[str, str]]], *, partitioned: bool) -> None:
    for name, tagged in defs["constraints"]:
        kind, definition = tagged.split(":", 1)
        if kind == "p":
            definition = "PRIMARY KEY (id, workflow_id)" if partitioned else "PRIMARY KEY (id)"
        cursor.execute(f'ALTER TABLE {TABLE} ADD CONSTRAINT "{name}" {definition}')
    for _, definition in defs["indexes"]:
        # A partitioned index reads "ON ONLY": the new table gets a plain (or partitioned) index.
        cursor.execute(definition.replace(f"ON ONLY public.{TABLE} ", f"ON public.{TABLE} ", 1))
    for _, definition in defs["triggers"]:
        cursor.execute(definition)


def _statement_triggers_on_partitions(cursor: Any, defs: dict[str, list[tuple[str, str]]]) -> None:
    """Row triggers are cloned to partitions by PostgreSQL; statement triggers are not."""
    for partition in partition_names(cursor):
        for _, definition in defs["triggers"]:
            if "FOR EACH STATEMENT" in definition:
                cursor.execute(definition.replace(f" ON public.{TABLE} ", f" ON public.{partition} ", 1))


def _rebuild(cursor: Any, *, partitions: int) -> None:
    # Deferred foreign-key checks of rows written earlier in this transaction must run first:
    # PostgreSQL refuses to ALTER a table with pending trigger events.
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    defs = _definitions(cursor, TABLE)
    (next_id,) = _rows(cursor, f"SELECT COALESCE(MAX(id), 0) + 1 FROM {TABLE}")[0]
    # The new table's id comes from a plain sequence: PostgreSQL < 17 has no identity columns on
    # partitioned tables. The old column's identity/sequence goes with the old table.
    (identity,) = _rows(
        cursor,
        "SELECT attidentity FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'id'",
        (TABLE,),
    )[0]
    if identity:
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id DROP IDENTITY")
    else:
        cursor.execute(f"ALTER SEQUENCE IF EXISTS {SEQUENCE} OWNED BY NONE")
        cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id DROP DEFAULT")
    _move_aside(cursor, defs)
    like = f"(LIKE {OLD} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)"
    if partitions:
        cursor.execute(f"CREATE TABLE {TABLE} {like} PARTITION BY HASH (workflow_id)")
        for remainder in range(partitions):
            cursor.execute(
                f"CREATE TABLE {TABLE}_p{remainder:02d} PARTITION OF {TABLE} "
                f"FOR VALUES WITH (MODULUS {partitions}, REMAINDER {remainder})"
            )
    else:
        cursor.execute(f"CREATE TABLE {TABLE} {like}")
    cursor.execute(f"CREATE SEQUENCE IF NOT EXISTS {SEQUENCE}")
    cursor.execute(f"SELECT setval('{SEQUENCE}', %s, false)", (next_id,))
    cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN id SET DEFAULT nextval('{SEQUENCE}')")
    cursor.execute(f"ALTER SEQUENCE {SEQUENCE} OWNED BY {TABLE}.id")
    cursor.execute(f"INSERT INTO {TABLE} SELECT * FROM {OLD}")
    cursor.execute(f"DROP TABLE {OLD}")
    _replay(cursor, defs, partitioned=bool(partitions))
    if partitions:
        _statement_triggers_on_partitions(cursor, defs)
    cursor.execute(f"ANALYZE {TABLE}")


def partition_events(cursor: Any, partitions: int) -> None:
    """Turn the plain event table into ``partitions`` hash partitions (no-op if already done or 0)."""
    if partitions <= 0 or is_partitioned(cursor):
        return
    _rebuild(cursor, partitions=partitions)


def unpartition_events(cursor: Any) -> None:
    """Back to one plain table (no-op if it is not partitioned)."""
    if not is_partitioned(cursor):
        return
    _rebuild(cursor, partitions=0)
