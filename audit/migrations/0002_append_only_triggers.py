from django.db import migrations

from memoryhub.core.append_only import AUDIT_RULES, migration_operation


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migration_operation(AUDIT_RULES)]
