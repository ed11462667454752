"""Purgeable payloads: the text of append-only rows moves to a row a purge can empty (digest kept)."""

import django.db.models.deletion
from django.db import migrations, models

from memoryhub.core.append_only import UPDATE_RULES, migration_operation


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0004_purge_payloads"),
        ("memoryhub", "0015_purge_source_epoch_and_guards"),
    ]

    operations = [
        migrations.AlterField(
            model_name="lifecycleevent",
            name="reason",
            field=models.TextField(blank=True, db_column="reason"),
        ),
        migrations.RenameField(
            model_name="lifecycleevent",
            old_name="reason",
            new_name="stored_reason",
        ),
        migrations.AlterField(
            model_name="validationrecord",
            name="checks",
            field=models.JSONField(db_column="checks", default=list),
        ),
        migrations.RenameField(
            model_name="validationrecord",
            old_name="checks",
            new_name="check_shapes",
        ),
        migrations.AlterField(
            model_name="validationrecord",
            name="reasons",
            field=models.JSONField(blank=True, db_column="reasons", default=list),
        ),
        migrations.RenameField(
            model_name="validationrecord",
            old_name="reasons",
            new_name="stored_reasons",
        ),
        migrations.AddField(
            model_name="lifecycleevent",
            name="payload",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="audit.payload",
            ),
        ),
        migrations.AddField(
            model_name="lifecycleevent",
            name="payload_digest",
            field=models.CharField(blank=True, max_length=71),
        ),
        migrations.AddField(
            model_name="validationrecord",
            name="payload",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="audit.payload",
            ),
        ),
        migrations.AddField(
            model_name="validationrecord",
            name="payload_digest",
            field=models.CharField(blank=True, max_length=71),
        ),
        # SQLite rebuilt the tables for the altered columns: a rebuilt table has no triggers.
        migration_operation(UPDATE_RULES),
    ]
