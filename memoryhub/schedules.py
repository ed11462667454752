"""Every periodic schedule, in one place. Task names are the contract with their modules."""

from celery.schedules import crontab

BEAT_SCHEDULE = {
    # Outbox: compaction jobs written while the broker was unreachable get enqueued once it is back.
    "compaction-outbox-sweep": {"task": "memoryhub.compaction.sweep_outbox", "schedule": 30.0},
    # Task outbox: test-sends (and other request-side messages) the broker did not take in time.
    "task-outbox-sweep": {"task": "memoryhub.sweep_task_outbox", "schedule": 30.0},
    # Alerts: evaluate due rules (claimed by compare-and-set) and deliver unprocessed flips.
    "alerts-evaluate": {"task": "memoryhub.alerting.evaluate_due_rules", "schedule": 60.0},
    "alerts-deliver": {"task": "memoryhub.alerting.deliver_pending", "schedule": 30.0},
    # Metric rollups for the charts.
    "metrics-rollup": {"task": "memoryhub.alerting.rollup_metrics", "schedule": 300.0},
    # Audit: sequence entries the after-commit sequencer missed (a crash between commit and hook).
    "audit-sequence-sweep": {"task": "audit.sequence_pending", "schedule": 10.0},
    # Retention: tombstone expired content daily.
    "retention-sweep": {"task": "audit.retention_sweep", "schedule": crontab(hour=3, minute=17)},
}
