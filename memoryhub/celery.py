"""The Celery app. Tasks live in <package>/tasks.py; every periodic schedule is in memoryhub/schedules.py."""

import os
from pathlib import Path

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["memoryhub.compaction", "memoryhub.alerting", "audit", "triggers"])


@app.on_after_configure.connect
def _install_schedule(sender, **kwargs):
    from memoryhub.schedules import BEAT_SCHEDULE

    sender.conf.beat_schedule = BEAT_SCHEDULE


@app.on_after_configure.connect
def _create_broker_folders(sender, **kwargs):
    """The filesystem broker's folders exist before anything publishes or consumes (settings create none)."""
    ensure_broker_folders(sender.conf)


def ensure_broker_folders(conf) -> None:
    if not str(conf.broker_url or "").startswith("filesystem://"):
        return
    options = conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder"):
        if options.get(key):
            Path(options[key]).mkdir(parents=True, exist_ok=True)
