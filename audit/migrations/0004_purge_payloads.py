"""Purgeable payloads: the text of append-only rows moves to a row a purge can empty (digest kept)."""

import django.db.models.deletion
from django.db import migrations, models

from memoryhub.core.append_only import AUDIT_RULES, migration_operation


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0003_purge_epoch_and_guards"),
        ("memoryhub", "0015_purge_source_epoch_and_guards"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditentry",
            name="data",
            field=models.JSONField(blank=True, db_column="data", default=dict),
        ),
        migrations.RenameField(
            model_name="auditentry",
            old_name="data",
            new_name="chained_data",
        ),
        migrations.AddField(
            model_name="auditentry",
            name="payload_digest",
            field=models.CharField(blank=True, max_length=71),
        ),
        migrations.CreateModel(
            name="Payload",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("digest", models.CharField(max_length=71)),
                ("body", models.JSONField(blank=True, default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("purged_at", models.DateTimeField(blank=True, null=True)),
                (
                    "purged_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="audit.purge",
                    ),
                ),
                (
                    "tenant",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="+", to="memoryhub.tenant"
                    ),
                ),
                (
                    "workflow",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="memoryhub.workflow",
                    ),
                ),
            ],
        ),
        migrations.AddField(
            model_name="auditentry",
            name="payload",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="audit.payload",
            ),
        ),
        migrations.AddIndex(
            model_name="payload",
            index=models.Index(fields=["tenant", "created_at"], name="audit_payload_tenant_at"),
        ),
        # SQLite rebuilt the tables for the altered columns: a rebuilt table has no triggers.
        migration_operation(AUDIT_RULES),
    ]
