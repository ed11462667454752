"""Celery tasks of the memoryhub package itself (the others live in their feature packages)."""

from __future__ import annotations

from memoryhub import outbox
from memoryhub.celery import app


@app.task(name="memoryhub.sweep_task_outbox", ignore_result=True, expires=25)
def sweep_task_outbox() -> dict[str, int]:
    """Beat, every 30 s: publish task messages a request could not hand to the broker."""

    return outbox.sweep()
