"""Audit entries are inserted pending and sequenced after commit (audit.log.sequence_pending):
seq and the hashes may be empty until then, sequenced_at says when the chain took the entry, and
the append-only trigger allows exactly that one UPDATE."""

from django.db import migrations, models

from memoryhub.core.append_only import AUDIT_RULES, migration_operation


class Migration(migrations.Migration):
    dependencies = [
        ("audit", "0005_review_summary_comments"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="auditentry",
            options={
                "ordering": [
                    "tenant",
                    models.OrderBy(models.F("seq"), descending=True, nulls_first=True),
                    "-id",
                ],
                "verbose_name_plural": "audit entries",
            },
        ),
        migrations.AddField(
            model_name="auditentry",
            name="sequenced_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="entry_hash",
            field=models.CharField(blank=True, max_length=71),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="prev_hash",
            field=models.CharField(blank=True, max_length=71),
        ),
        migrations.AlterField(
            model_name="auditentry",
            name="seq",
            field=models.PositiveBigIntegerField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="auditentry",
            index=models.Index(
                condition=models.Q(("seq__isnull", True)), fields=["tenant", "id"], name="audit_entry_pending"
            ),
        ),
        # The sequencing UPDATE allowed; SQLite rebuilt the table for the altered columns (no triggers).
        migration_operation(AUDIT_RULES),
    ]
