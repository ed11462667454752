"""The Celery app. Tasks live in memoryhub/tasks/ and audit/tasks.py (delivery, autodiscovered);
every periodic schedule is in memoryhub/schedules.py."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from django.conf import settings

from memoryhub.schedules import BEAT_SCHEDULE

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["memoryhub", "audit", "triggers"])

DEFAULT_PUBLISH_TIMEOUT = 0.5


@app.on_after_configure.connect
def _install_schedule(sender, **kwargs):
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


def publish_timeout() -> float:
    return float(getattr(settings, "MEMORYHUB_BROKER_PUBLISH_TIMEOUT", DEFAULT_PUBLISH_TIMEOUT))


def publish_transport_options(url: str, timeout: float) -> dict[str, Any]:
    """Transport options that bound every socket operation of one publish by ``timeout`` and
    forbid reconnect loops: a broker that is down *or hung* (accepts connections, never answers)
    fails the publish quickly instead of holding the web request."""
    scheme = url.split("://", 1)[0].lower()
    if scheme in ("redis", "rediss", "sentinel"):
        return {"socket_connect_timeout": timeout, "socket_timeout": timeout, "max_retries": 0}
    if scheme in ("amqp", "amqps", "pyamqp"):
        return {"read_timeout": timeout, "write_timeout": timeout, "max_retries": 0}
    return {"max_retries": 0}


def task_named(name: str) -> Any:
    """The registered task ``name``: publishers name tasks instead of importing their modules, so
    the code that requests work never imports the Celery task wrappers that run it."""
    task = app.tasks.get(name)
    if task is None:  # this process has not imported the tasks modules yet (autodiscovery)
        app.loader.import_default_modules()
        task = app.tasks[name]
    return task


def publish(task: Any, **options: Any) -> Any:
    """``task.apply_async(**options)`` from a web request: on a dedicated connection whose every
    step (connect, handshake, send) is bounded by MEMORYHUB_BROKER_PUBLISH_TIMEOUT, without
    retries. Raises on any failure; callers keep the work in an outbox for the sweeper.

    The worker's own connections keep the broker settings (they may wait; requests may not)."""
    timeout = publish_timeout()
    url = app.conf.broker_write_url or app.conf.broker_url or ""
    with app.connection_for_write(
        connect_timeout=timeout, transport_options=publish_transport_options(str(url), timeout)
    ) as connection:
        return task.apply_async(connection=connection, retry=False, **options)
