from django.db import migrations

from memoryhub.core.append_only import UPDATE_RULES, migration_operation


class Migration(migrations.Migration):
    dependencies = [("memoryhub", "0002_initial"), ("audit", "0001_initial")]
    operations = [migration_operation(UPDATE_RULES)]
