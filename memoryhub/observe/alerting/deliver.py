"""Delivery of state flips (task memoryhub.alerting.deliver_pending) and test-sends.

A flip is claimed by compare-and-set on processed_at, so concurrent delivery runs never send it
twice. Each attempt to each channel is one Notification row with its error. A permanent error
disables the channel (disabled_at/disabled_reason + an audit entry); a transient one releases
the claim so the next run retries the channels that have not succeeded yet, up to MAX_ATTEMPTS
per channel. Muted rules are still evaluated, but their flips are consumed without sending.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from audit.log import record
from memoryhub.core.actors import Actor
from memoryhub.models import AlertEvent, AlertRule, AlertState, Channel, Notification
from memoryhub.observe.metrics import METRICS

from .transports import DeliveryResult, Message, send

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
DELIVERY_BATCH = 100
SYSTEM_ACTOR = Actor.system("alerting")


def _fmt(value: float | None) -> str:
    if value is None:
        return "no data"
    return f"{value:.4g}"


def rule_payload(rule: AlertRule) -> dict:
    return {"id": rule.pk, **rule.definition(), "url": f"/alerts/rules/{rule.pk}/"}


def flip_message(flip: AlertEvent) -> Message:
    rule = flip.rule
    kind = "resolve" if flip.to_state == AlertState.OK else "alert"
    unit = METRICS[rule.metric].unit if rule.metric in METRICS else ""
    scope = "".join(
        f" ({part})"
        for part in (
            f"workflows {rule.workflow_filter}*" if rule.workflow_filter else "",
            f"source {rule.get_source_filter_display()}" if rule.source_filter else "",
        )
        if part
    )
    subject = f"Resolved: {rule.name}" if kind == "resolve" else f"{flip.to_state.upper()}: {rule.name}"
    text = (
        f"{rule.metric}{scope} is {_fmt(flip.value)} {unit} "
        f"({flip.from_state} → {flip.to_state}; warning {_fmt(rule.warning_threshold)}, "
        f"critical {_fmt(rule.critical_threshold)}, {rule.get_comparator_display()} over {rule.window_minutes} min) "
        f"at {flip.at.isoformat()} in tenant {flip.tenant.slug}."
    )
    payload = {
        "event": kind,
        "tenant": flip.tenant.slug,
        "alert_id": flip.pk,
        "from_state": flip.from_state,
        "to_state": flip.to_state,
        "value": flip.value,
        "at": flip.at.isoformat(),
        "rule": rule_payload(rule),
        "text": text,
    }
    return Message(kind=kind, subject=subject, text=text, payload=payload)


def test_message(channel: Channel, rule: AlertRule | None = None) -> Message:
    now = timezone.now()
    about = f" for rule {rule.name!r}" if rule else ""
    text = f"Test notification{about} to channel {channel.name!r} at {now.isoformat()}. No action needed."
    payload: dict = {
        "event": "test",
        "tenant": channel.tenant.slug,
        "channel": channel.name,
        "at": now.isoformat(),
    }
    if rule is not None:
        payload["rule"] = rule_payload(rule)
    payload["text"] = text
    return Message(kind="test", subject=f"Test{about}", text=text, payload=payload)


def disable_channel(channel: Channel, reason: str, actor: Actor | str) -> bool:
    """Disable a channel once (compare-and-set on disabled_at), with an audit entry."""

    with transaction.atomic():
        now = timezone.now()
        changed = Channel.objects.filter(pk=channel.pk, disabled_at__isnull=True).update(
            disabled_at=now, disabled_reason=reason
        )
        if changed:
            record(
                channel.tenant, actor, "channel.disable", channel, {"name": channel.name, "reason": reason}
            )
            channel.disabled_at, channel.disabled_reason = now, reason
    return bool(changed)


def attempt(
    channel: Channel, message: Message, *, flip: AlertEvent | None = None, actor: Actor | str = SYSTEM_ACTOR
) -> Notification:
    """Send once, record the Notification and the channel's health; disable on a permanent error."""
    try:
        result = send(channel, message)
    except Exception as exc:  # a transport bug must not lose the attempt record
        logger.exception("transport %s crashed", channel.kind)
        result = DeliveryResult.failed(f"transport error ({type(exc).__name__})")
    now = timezone.now()
    notification = Notification.objects.create(
        alert_event=flip,
        channel=channel,
        kind=message.kind,
        ok=result.ok,
        status_code=result.status_code,
        error=result.error,
    )
    if result.ok:
        Channel.objects.filter(pk=channel.pk).update(last_delivery_at=now, last_error="")
    else:
        Channel.objects.filter(pk=channel.pk).update(last_error=result.error)
        if result.permanent:
            disable_channel(channel, f"permanent delivery error: {result.error}", actor)
    return notification


def deliver_flip(flip_id: int, *, actor: Actor | str = SYSTEM_ACTOR) -> list[Notification]:
    """Claim one unprocessed flip and deliver it to its rule's enabled channels."""
    claimed_at = timezone.now()
    if not AlertEvent.objects.filter(pk=flip_id, processed_at__isnull=True).update(processed_at=claimed_at):
        return []  # someone else has it
    flip = AlertEvent.objects.select_related("rule", "tenant").get(pk=flip_id)
    rule = flip.rule
    if rule.muted_until is not None and rule.muted_until > flip.at:
        return []  # muted: the flip is recorded, nobody is told
    message = flip_message(flip)
    tried = {
        row["channel_id"]: row
        for row in Notification.objects.filter(alert_event=flip)
        .values("channel_id")
        .annotate(n=Count("id"), ok=Count("id", filter=Q(ok=True)))
    }
    notifications: list[Notification] = []
    retry = False
    for channel in rule.channels.filter(disabled_at__isnull=True).select_related("tenant").order_by("pk"):
        history = tried.get(channel.pk, {"n": 0, "ok": 0})
        if history["ok"] or history["n"] >= MAX_ATTEMPTS:
            continue
        notification = attempt(channel, message, flip=flip, actor=actor)
        notifications.append(notification)
        channel.refresh_from_db(fields=["disabled_at"])
        if not notification.ok and channel.disabled_at is None and history["n"] + 1 < MAX_ATTEMPTS:
            retry = True
    if retry:
        # Release the claim: the next run retries the channels that have not succeeded.
        AlertEvent.objects.filter(pk=flip.pk, processed_at=claimed_at).update(processed_at=None)
    return notifications


def deliver_pending(*, limit: int = DELIVERY_BATCH, actor: Actor | str = SYSTEM_ACTOR) -> list[Notification]:
    """Deliver unprocessed flips, oldest first (served by the memoryhub_flip_unprocessed index)."""
    ids = list(
        AlertEvent.objects.filter(processed_at__isnull=True)
        .order_by("at", "pk")
        .values_list("pk", flat=True)[:limit]
    )
    sent: list[Notification] = []
    for flip_id in ids:
        try:
            sent += deliver_flip(flip_id, actor=actor)
        except Exception:
            logger.exception("alert flip %s failed to deliver", flip_id)
    return sent


def send_test(
    *, channel_id: int | None = None, rule_id: int | None = None, actor: Actor | str = SYSTEM_ACTOR
) -> list[Notification]:
    """Test-send (worker side of the API/page "test" buttons): one channel, or every enabled
    channel of a rule. Recorded as Notification(kind="test")."""
    rule = AlertRule.objects.select_related("tenant").filter(pk=rule_id).first() if rule_id else None
    if channel_id is not None:
        channels = list(Channel.objects.select_related("tenant").filter(pk=channel_id))
    elif rule is not None:
        channels = list(
            rule.channels.filter(disabled_at__isnull=True).select_related("tenant").order_by("pk")
        )
    else:
        channels = []
    return [attempt(channel, test_message(channel, rule), actor=actor) for channel in channels]
