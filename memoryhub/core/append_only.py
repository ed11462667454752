"""Database triggers that make the record append-only, on PostgreSQL and SQLite.

- events: no DELETE; the only UPDATE allowed is the purge tombstone (purged_at and purge set once,
  content, facts and refs emptied; identity, agent, role, kind, tool_call_id, side_effect, hashes
  and token counts unchanged);
- summaries: no DELETE; content/lineage/config/hash columns never change, except the purge
  tombstone of content (purged_by set once, content_hash kept as provenance);
- validation records, lifecycle events: no UPDATE, no DELETE;
- audit entries: no DELETE; the only UPDATE is the sequencing of a pending entry (seq, prev_hash,
  entry_hash and sequenced_at set once, every other column unchanged);
- payloads (the purgeable text of those rows): no DELETE; the only UPDATE is the purge tombstone
  (body emptied, purged_by/purged_at set once, digest unchanged);
- every one of them: no TRUNCATE (a statement-level trigger, PostgreSQL).

SQLite only: a row in ``memoryhub_append_only_bypass`` lets Django's test ``flush`` (DELETE FROM)
clear tables; production code never writes it. PostgreSQL's flush uses TRUNCATE, which the
statement triggers refuse: the flush command runs it with ``session_replication_role = replica``,
which only a superuser may set. The non-owner application role is refused TRUNCATE by privileges
as well (README).
"""

from __future__ import annotations

import re
from typing import Any

from django.db import connection as default_connection
from django.db import migrations

BYPASS_TABLE = "memoryhub_append_only_bypass"

EVENT_IMMUTABLE = [
    "id",
    "workflow_id",
    "seq",
    "client_event_id",
    "kind",
    "agent",
    "role",
    "tool_call_id",
    "side_effect",
    "content_hash",
    "token_count",
    "cum_tokens",
    "created_at",
]
SUMMARY_IMMUTABLE = [
    "id",
    "summary_id",
    "tenant_id",
    "workflow_id",
    "version",
    "created_at",
    "job_id",
    "created_by",
    "covers_from_seq",
    "covers_to_seq",
    "source_revision",
    "source_refs",
    "source_purge_epoch",
    "excluded_categories",
    "compactor_name",
    "compactor_version",
    "model",
    "prompt_template_version",
    "algorithm_version",
    "token_budget",
    "tool_schema_version",
    "content_schema",
    "content_hash",
    "storage_location",
    "token_count",
]

# The one UPDATE an event may get is the purge tombstone: content, facts and refs emptied, the purge
# recorded (purged_at and the purge reference set, once), every other column exactly as it was.
EVENT_TOMBSTONE = [
    "OLD.purged_at IS NULL",
    "NEW.purged_at IS NOT NULL",
    "NEW.purge_id IS NOT NULL",
    "NEW.content = ''",
    "NEW.facts = '[]'::jsonb",
    "NEW.refs = '[]'::jsonb",
]


def _unchanged(columns: list[str]) -> list[str]:
    return [f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in columns]


# table -> condition (in terms of OLD/NEW) under which an UPDATE is allowed; None = never.
UPDATE_RULES: dict[str, str | None] = {
    # The tombstone empties the content (it cannot smuggle new text in) and happens once.
    "memoryhub_event": " AND ".join(EVENT_TOMBSTONE + _unchanged(EVENT_IMMUTABLE)),
    # purged_by is set once (never cleared or re-pointed); content changes only in that same update.
    "memoryhub_summary": " AND ".join(_unchanged(SUMMARY_IMMUTABLE))
    + " AND (OLD.purged_by_id IS NULL OR NEW.purged_by_id IS NOT DISTINCT FROM OLD.purged_by_id)"
    + " AND (NEW.content IS NOT DISTINCT FROM OLD.content"
    " OR (OLD.purged_by_id IS NULL AND NEW.purged_by_id IS NOT NULL))",
    "memoryhub_validationrecord": None,
    "memoryhub_lifecycleevent": None,
}
PAYLOAD_TOMBSTONE = " AND ".join(
    [
        "OLD.purged_at IS NULL",
        "NEW.purged_at IS NOT NULL",
        "NEW.purged_by_id IS NOT NULL",
        "NEW.body = '{}'::jsonb",
        *_unchanged(["id", "tenant_id", "workflow_id", "digest", "created_at"]),
    ]
)
# An audit entry is inserted pending (no seq, no hashes); its one UPDATE is the sequencer's, once.
AUDIT_ENTRY_SEQUENCING = " AND ".join(
    [
        "OLD.seq IS NULL",
        "OLD.prev_hash = ''",
        "OLD.entry_hash = ''",
        "OLD.sequenced_at IS NULL",
        "NEW.seq IS NOT NULL",
        "NEW.prev_hash <> ''",
        "NEW.entry_hash <> ''",
        "NEW.sequenced_at IS NOT NULL",
        *_unchanged(
            [
                "id",
                "tenant_id",
                "at",
                "actor",
                "action",
                "object_type",
                "object_id",
                "data",
                "payload_id",
                "payload_digest",
            ]
        ),
    ]
)
AUDIT_RULES: dict[str, str | None] = {
    # Before the sequencing columns existed (migrations up to audit 0005) seq was never NULL, so
    # the rule those migrations install refuses every UPDATE, as it did.
    "audit_auditentry": AUDIT_ENTRY_SEQUENCING,
    # A payload's one UPDATE is its purge tombstone: body emptied, digest kept, purge named.
    "audit_payload": PAYLOAD_TOMBSTONE,
    # The chain head only moves forward: a wiped or rewound log cannot take its witness with it.
    "audit_auditchainhead": "NEW.tenant_id IS NOT DISTINCT FROM OLD.tenant_id AND NEW.seq > OLD.seq",
}


def _sqlite_cond(cond: str) -> str:
    return cond.replace("IS NOT DISTINCT FROM", "IS").replace("::jsonb", "")


def _present(cond: str, columns: set[str] | None) -> str:
    """``cond`` without the clauses naming columns the table does not have (yet): migrations that
    ran before a column was added install the rule as it applied then."""
    if columns is None:
        return cond
    kept = []
    for clause in _top_level_clauses(cond):
        names = set(re.findall(r"(?:NEW|OLD)\.(\w+)", clause))
        if names <= columns:
            kept.append(clause)
    return " AND ".join(kept)


def _top_level_clauses(cond: str) -> list[str]:
    """``cond`` split at the ANDs outside parentheses."""
    clauses, depth, start, i = [], 0, 0, 0
    while i < len(cond):
        if cond[i] == "(":
            depth += 1
        elif cond[i] == ")":
            depth -= 1
        elif depth == 0 and cond.startswith(" AND ", i):
            clauses.append(cond[start:i])
            start = i = i + len(" AND ")
            continue
        i += 1
    return [*clauses, cond[start:]]


def _columns(connection: Any, table: str) -> set[str] | None:
    if connection is None:
        return None
    with connection.cursor() as cursor:
        return {c.name for c in connection.introspection.get_table_description(cursor, table)}


def _partitions(connection: Any, table: str) -> list[str]:
    """The partitions of ``table`` (PostgreSQL; none for a plain table)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s)",
            [table],
        )
        return [name for (name,) in cursor.fetchall()]


def create_sql(vendor: str, rules: dict[str, str | None], connection: Any = None) -> list[str]:
    """Trigger DDL for ``rules``. With ``connection`` the rules are fitted to the tables' columns.

    Every table also refuses TRUNCATE (PostgreSQL; SQLite has none, its DELETE FROM fires the row
    triggers). Only a superuser session with ``session_replication_role = replica`` (tests' flush)
    skips them, and a table owner who drops a trigger is still caught by ``audit_verify``.
    """
    if connection is None:
        connection = default_connection
    existing = set(connection.introspection.table_names())
    rules = {t: r for t, r in rules.items() if t in existing}  # a later migration creates the rest
    statements: list[str] = []
    if vendor == "postgresql":
        for table, rule in rules.items():
            cond = _present(rule, _columns(connection, table)) if rule else None
            allow = f"IF TG_OP = 'UPDATE' THEN IF ({cond}) THEN RETURN NEW; END IF; END IF;" if cond else ""
            statements += [
                f"""CREATE OR REPLACE FUNCTION {table}_append_only() RETURNS trigger AS $$
                BEGIN
                  {allow}
                  RAISE EXCEPTION '% of % is refused: the table is append-only', TG_OP, TG_TABLE_NAME
                    USING ERRCODE = 'insufficient_privilege';
                END; $$ LANGUAGE plpgsql;""",
                f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};",
                f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
                    FOR EACH ROW EXECUTE FUNCTION {table}_append_only();""",
            ]
            # Row triggers are cloned onto a partitioned table's partitions; statement triggers are
            # not, so each partition refuses TRUNCATE by itself too (memoryhub/core/partitioning.py).
            for target in [table, *_partitions(connection, table)]:
                statements += [
                    f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {target};",
                    f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {target}
                        FOR EACH STATEMENT EXECUTE FUNCTION {table}_append_only();""",
                ]
    elif vendor == "sqlite":
        statements.append(f"CREATE TABLE IF NOT EXISTS {BYPASS_TABLE} (id integer primary key)")
        no_bypass = f"NOT EXISTS (SELECT 1 FROM {BYPASS_TABLE})"
        for table, rule in rules.items():
            cond = _present(rule, _columns(connection, table)) if rule else None
            update_when = f"{no_bypass} AND NOT ({_sqlite_cond(cond)})" if cond else no_bypass
            statements += [
                f"DROP TRIGGER IF EXISTS {table}_no_update",
                f"""CREATE TRIGGER {table}_no_update BEFORE UPDATE ON {table} WHEN {update_when}
                    BEGIN SELECT RAISE(ABORT, 'UPDATE of {table} is refused: the table is append-only'); END""",
                f"DROP TRIGGER IF EXISTS {table}_no_delete",
                f"""CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} WHEN {no_bypass}
                    BEGIN SELECT RAISE(ABORT, 'DELETE of {table} is refused: the table is append-only'); END""",
            ]
    return statements


def drop_sql(vendor: str, rules: dict[str, str | None]) -> list[str]:
    statements: list[str] = []
    for table in rules:
        if vendor == "postgresql":
            statements += [
                f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table};",
                f"DROP TRIGGER IF EXISTS {table}_append_only ON {table};",
                f"DROP FUNCTION IF EXISTS {table}_append_only();",
            ]
        elif vendor == "sqlite":
            statements += [
                f"DROP TRIGGER IF EXISTS {table}_no_update",
                f"DROP TRIGGER IF EXISTS {table}_no_delete",
            ]
    return statements


def migration_operation(rules: dict[str, str | None]):
    """A RunPython operation installing the triggers for whichever database runs the migration."""

    # A raw cursor without params: the trigger bodies contain '%' placeholders of RAISE.
    def forwards(apps, schema_editor):
        connection = schema_editor.connection
        with connection.cursor() as cursor:
            for sql in create_sql(connection.vendor, rules, connection):
                cursor.execute(sql)

    def backwards(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            for sql in drop_sql(schema_editor.connection.vendor, rules):
                cursor.execute(sql)

    return migrations.RunPython(forwards, backwards)
