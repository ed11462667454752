"""Trigram index for investigations (PostgreSQL only; memoryhub/memory/search.py uses the same expression)."""

from django.db import migrations

from memoryhub.memory.search import SEARCH_EXPRESSION


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        # Query: candidate_seqs() — ILIKE / ~* over content, facts and refs of one workflow's events.
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS memoryhub_event_search_trgm ON memoryhub_event "
            f"USING gin ({SEARCH_EXPRESSION} gin_trgm_ops)"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS memoryhub_event_search_trgm")


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0007_append_only_purge_marker")]
    operations = [migrations.RunPython(forwards, backwards)]
