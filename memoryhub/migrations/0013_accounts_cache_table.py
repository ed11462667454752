"""The shared cache's table (settings.CACHES uses the database when no Redis is configured).

Throttles, login lockouts and the audit page's cache must be shared by every web process; the
database cache does that without another server. ``createcachetable`` is idempotent and creates
nothing when the cache is Redis.
"""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0012_workflow_source")]

    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop, elidable=False)]
