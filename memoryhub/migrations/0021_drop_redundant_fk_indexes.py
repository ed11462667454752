# The single-column foreign-key indexes that a composite index already leads with: each was one
# more index write per row on the write path (an activation updates two summaries and its
# workflow, and appends lifecycle events). Only the indexes go: AlterField would rebuild the
# tables on SQLite (dropping their append-only triggers) and re-validate the foreign keys on
# PostgreSQL, for a change that is the index alone.

import django.db.models.deletion
from django.db import migrations, models

INDEXES = [  # (index, table, column): Django's names for them, the same on every database
    ("memoryhub_lifecycleevent_tenant_id_cdd51353", "memoryhub_lifecycleevent", "tenant_id"),
    ("memoryhub_lifecycleevent_workflow_id_3834e830", "memoryhub_lifecycleevent", "workflow_id"),
    ("memoryhub_summary_tenant_id_95690be2", "memoryhub_summary", "tenant_id"),
    ("memoryhub_summary_workflow_id_4a93f7d4", "memoryhub_summary", "workflow_id"),
    ("memoryhub_workflow_tenant_id_13d3622a", "memoryhub_workflow", "tenant_id"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("memoryhub", "0020_input_task_outbox"),
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
                    model_name="lifecycleevent",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="memoryhub.tenant",
                    ),
                ),
                migrations.AlterField(
                    model_name="lifecycleevent",
                    name="workflow",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="lifecycle_events",
                        to="memoryhub.workflow",
                    ),
                ),
                migrations.AlterField(
                    model_name="summary",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="summaries",
                        to="memoryhub.tenant",
                    ),
                ),
                migrations.AlterField(
                    model_name="summary",
                    name="workflow",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="summaries",
                        to="memoryhub.workflow",
                    ),
                ),
                migrations.AlterField(
                    model_name="workflow",
                    name="tenant",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="workflows",
                        to="memoryhub.tenant",
                    ),
                ),
            ],
        ),
    ]
