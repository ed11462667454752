"""Full-text index for the tenant-wide event search (PostgreSQL only; memoryhub/memory/search.py
search_events() queries the same expression, on unpurged events)."""

from django.db import migrations

from memoryhub.memory.search import FTS_EXPRESSION


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS memoryhub_event_fts ON memoryhub_event "
            f"USING gin ({FTS_EXPRESSION}) WHERE purged_at IS NULL"
        )


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        with schema_editor.connection.cursor() as cursor:
            cursor.execute("DROP INDEX IF EXISTS memoryhub_event_fts")


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0024_merge_span_rejected")]
    operations = [migrations.RunPython(forwards, backwards)]
