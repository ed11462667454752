"""Database triggers that make the record append-only, on PostgreSQL and SQLite.

- events: no DELETE; the only UPDATE allowed is the purge tombstone (purged_at set once, with the
  row's identity, hash and token count unchanged);
- summaries: no DELETE; content/lineage/config/hash columns never change, except the purge
  tombstone of content (purged_by set once, content_hash kept as provenance);
- validation records, lifecycle events, audit entries: no UPDATE, no DELETE.

SQLite only: a row in ``memoryhub_append_only_bypass`` lets Django's test ``flush`` (DELETE FROM)
clear tables; production code never writes it. PostgreSQL's flush uses TRUNCATE, which row
triggers do not see; the non-owner application role is refused TRUNCATE by privileges (README).
"""

from __future__ import annotations

BYPASS_TABLE = "memoryhub_append_only_bypass"

EVENT_IMMUTABLE = [
    "id",
    "workflow_id",
    "seq",
    "client_event_id",
    "kind",
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

# table -> condition (in terms of OLD/NEW) under which an UPDATE is allowed; None = never.
UPDATE_RULES: dict[str, str | None] = {
    # The tombstone empties the content (it cannot smuggle new text in) and happens once.
    "memoryhub_event": "OLD.purged_at IS NULL AND NEW.purged_at IS NOT NULL AND NEW.content = '' AND "
    + " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in EVENT_IMMUTABLE),
    # purged_by is set once (never cleared or re-pointed); content changes only in that same update.
    "memoryhub_summary": " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in SUMMARY_IMMUTABLE)
    + " AND (OLD.purged_by_id IS NULL OR NEW.purged_by_id IS NOT DISTINCT FROM OLD.purged_by_id)"
    + " AND (NEW.content IS NOT DISTINCT FROM OLD.content"
    " OR (OLD.purged_by_id IS NULL AND NEW.purged_by_id IS NOT NULL))",
    "memoryhub_validationrecord": None,
    "memoryhub_lifecycleevent": None,
}
AUDIT_RULES: dict[str, str | None] = {"audit_auditentry": None}


def _sqlite_cond(cond: str) -> str:
    return cond.replace("IS NOT DISTINCT FROM", "IS")


def create_sql(vendor: str, rules: dict[str, str | None]) -> list[str]:
    statements: list[str] = []
    if vendor == "postgresql":
        for table, cond in rules.items():
            allow = f"IF TG_OP = 'UPDATE' AND ({cond}) THEN RETURN NEW; END IF;" if cond else ""
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
    elif vendor == "sqlite":
        statements.append(f"CREATE TABLE IF NOT EXISTS {BYPASS_TABLE} (id integer primary key)")
        no_bypass = f"NOT EXISTS (SELECT 1 FROM {BYPASS_TABLE})"
        for table, cond in rules.items():
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
    from django.db import migrations

    # A raw cursor without params: the trigger bodies contain '%' placeholders of RAISE.
    def forwards(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            for sql in create_sql(schema_editor.connection.vendor, rules):
                cursor.execute(sql)

    def backwards(apps, schema_editor):
        with schema_editor.connection.cursor() as cursor:
            for sql in drop_sql(schema_editor.connection.vendor, rules):
                cursor.execute(sql)

    return migrations.RunPython(forwards, backwards)
