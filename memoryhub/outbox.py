"""Transactional outbox for task messages sent on behalf of a web request (test-sends today).

``send_after_commit`` writes an OutboxMessage in the caller's transaction and, after commit,
publishes it through :func:`memoryhub.celery.publish` (every broker operation bounded by
MEMORYHUB_BROKER_PUBLISH_TIMEOUT, no retries). A broker that is down or hung costs the request
at most that bound: the row stays unpublished and ``sweep`` (beat, memoryhub.sweep_task_outbox)
publishes it once the broker answers. The task calls ``claim`` first, so a message that was
published twice (a slow publish that did arrive, then the sweeper) runs once.

Compaction jobs have their own outbox (the job row, memoryhub.pipeline.jobs).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memoryhub.celery import publish as bounded_publish
from memoryhub.celery import task_named
from memoryhub.models import OutboxMessage, Tenant

logger = logging.getLogger(__name__)

SWEEP_BATCH = 500
DEFAULT_GRACE_SECONDS = 5.0


def send_after_commit(
    task_name: str, kwargs: dict[str, Any], *, tenant: Tenant | None = None
) -> OutboxMessage:
    """Write the message now (inside the caller's transaction); publish it after commit."""
    message = OutboxMessage.objects.create(tenant=tenant, task=task_name, kwargs=kwargs)
    transaction.on_commit(lambda: publish(message.pk))
    return message


def publish(message_id: int) -> bool:
    """Try to hand the message to the broker once; never raises (False = left for the sweeper)."""

    message = OutboxMessage.objects.filter(pk=message_id).first()
    if message is None:
        return False
    try:
        bounded_publish(task_named(message.task), kwargs={**message.kwargs, "outbox_id": message.pk})
    except Exception as exc:  # broker down or hung, unknown task: the row is the durable record
        logger.warning("outbox message %s (%s) not published: %s", message.pk, message.task, exc)
        OutboxMessage.objects.filter(pk=message.pk).update(publish_attempts=F("publish_attempts") + 1)
        return False
    OutboxMessage.objects.filter(pk=message.pk).update(
        published_at=timezone.now(), publish_attempts=F("publish_attempts") + 1
    )
    return True


def sweep(*, grace_seconds: float | None = None) -> dict[str, int]:
    """Publish the messages a request could not (oldest first; uses memoryhub_outbox_unsent)."""
    grace = getattr(settings, "MEMORYHUB_OUTBOX_GRACE_SECONDS", DEFAULT_GRACE_SECONDS)
    cutoff = timezone.now() - timedelta(seconds=grace if grace_seconds is None else grace_seconds)
    ids = list(
        OutboxMessage.objects.filter(published_at__isnull=True, created_at__lte=cutoff)
        .order_by("created_at", "pk")
        .values_list("pk", flat=True)[:SWEEP_BATCH]
    )
    counts = {"published": 0, "failed": 0}
    for message_id in ids:
        counts["published" if publish(message_id) else "failed"] += 1
    if ids:
        logger.info("task outbox sweep: %s", counts)
    return counts


def claim(outbox_id: int | None) -> bool:
    """The task's first step: True for the first delivery of the message (or no message)."""
    if outbox_id is None:
        return True
    return bool(
        OutboxMessage.objects.filter(pk=outbox_id, consumed_at__isnull=True).update(
            consumed_at=timezone.now()
        )
    )
