"""PostgreSQL: hash-partition the event table by workflow (memoryhub/core/partitioning.py).

``MEMORYHUB_EVENT_PARTITIONS`` (default 16; 0 keeps the plain table) is read when this runs.
Reversible; SQLite is untouched.
"""

from django.conf import settings
from django.db import migrations

from memoryhub.core.partitioning import partition_events, unpartition_events


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        partition_events(cursor, settings.MEMORYHUB_EVENT_PARTITIONS)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    with schema_editor.connection.cursor() as cursor:
        unpartition_events(cursor)


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0016_purge_payloads")]
    operations = [migrations.RunPython(forwards, backwards)]
