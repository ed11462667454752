"""Reinstall the append-only triggers with two holes closed: a summary's purged_by is set once
(never cleared or re-pointed), and an event tombstone must empty the content."""

from django.db import migrations

from memoryhub.core.append_only import UPDATE_RULES, create_sql


def reinstall(apps, schema_editor):
    # CREATE OR REPLACE FUNCTION / DROP TRIGGER IF EXISTS + CREATE TRIGGER: idempotent on both databases.
    with schema_editor.connection.cursor() as cursor:
        for sql in create_sql(schema_editor.connection.vendor, UPDATE_RULES):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0006_alert_evaluation_sample")]
    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop)]
