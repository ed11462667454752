"""The task outbox's sweep (the outbox itself: memoryhub/outbox.py)."""

from __future__ import annotations

from memoryhub import outbox
from memoryhub.celery import app


@app.task(name="memoryhub.sweep_task_outbox", ignore_result=True, expires=25)
def sweep_task_outbox() -> dict[str, int]:
    """Beat, every 30 s: publish task messages a request could not hand to the broker."""

    return outbox.sweep()
