"""The Celery app. Tasks live in <package>/tasks.py; every periodic schedule is in memoryhub/schedules.py."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["memoryhub.compaction", "memoryhub.alerting", "audit", "triggers"])


@app.on_after_configure.connect
def _install_schedule(sender, **kwargs):
    from memoryhub.schedules import BEAT_SCHEDULE

    sender.conf.beat_schedule = BEAT_SCHEDULE
