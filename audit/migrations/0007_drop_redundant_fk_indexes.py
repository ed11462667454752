# The single-column tenant indexes that a composite index already leads with ((tenant, seq),
# (tenant, created_at)): one more index write per audit entry and payload. Only the indexes go:
# AlterField would rebuild the tables on SQLite (dropping their append-only triggers) and
# re-validate the foreign keys on PostgreSQL, for a change that is the index alone.

import django.db.models.deletion
from django.db import migrations, models

INDEXES = [  # (index, table, column): Django's names for them, the same on every database
    ("audit_auditentry_tenant_id_4f775df7", "audit_auditentry", "tenant_id"),
    ("audit_payload_tenant_id_8f5db31d", "audit_payload", "tenant_id"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0006_sequenced_entries"),
        ("memoryhub", "0021_drop_redundant_fk_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{index}"', f'CREATE INDEX "{index}" ON "{table}" ("{column}")'
                )
                for index, table, column in INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="auditentry",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="audit_entries",
                        to="memoryhub.tenant",
                    ),
                ),
                migrations.AlterField(
                    model_name="payload",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memoryhub.tenant",
                    ),
                ),
            ],
        ),
    ]
