"""Reinstall the append-only triggers: on SQLite, 0010's AlterField rebuilt memoryhub_event (SQLite
alters a table by copying it), and a rebuilt table has no triggers. Idempotent on PostgreSQL."""

from django.db import migrations

from memoryhub.core.append_only import UPDATE_RULES, create_sql


def reinstall(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for sql in create_sql(schema_editor.connection.vendor, UPDATE_RULES):
            cursor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0010_event_drop_workflow_index")]
    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop)]
