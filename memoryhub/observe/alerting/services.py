"""Alert rules and channels: validation and every state change (with its audit entry).

The REST API and the pages both call these; neither re-implements them. Test-sends are only
enqueued here (after commit) — the worker sends, never the web request.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.utils import timezone

from audit.log import record
from memoryhub import outbox
from memoryhub.core.actors import Actor
from memoryhub.core.errors import InvalidInput
from memoryhub.core.moments import BadMoment, check_moment, parse_moment_text
from memoryhub.models import (
    AlertEvaluation,
    AlertRule,
    Channel,
    ChannelKind,
    Comparator,
    Tenant,
    WorkflowSource,
)
from memoryhub.models.alerts import RULE_DEFINITION_FIELDS, RULE_RANGES, rule_default, rule_max_length
from memoryhub.observe.alerting.transports.guard import UnsafeURL, check_url
from memoryhub.observe.metrics import METRICS

RULE_FIELDS = {*RULE_DEFINITION_FIELDS, "channels", "enabled", "muted_until"}
RULE_READ_ONLY = {
    "id",
    "state",
    "last_value",
    "last_evaluated_at",
    "next_eval_at",
    "created_at",
    "is_default",
    "muted",
}
CHANNEL_FIELDS = {"kind", "name", "url", "secret", "email", "timeout_seconds"}
CHANNEL_READ_ONLY = {
    "id",
    "secret_set",
    "disabled_at",
    "disabled_reason",
    "last_error",
    "last_delivery_at",
    "created_at",
    "rules",
    "enabled",
}
MAX_MUTE = timedelta(days=30)


def _bad(field: str, detail: str, code: str = "invalid_field") -> InvalidInput:
    return InvalidInput(f"{field}: {detail}", code=code, field=field)


def _check_fields(data: dict[str, Any], allowed: set[str], read_only: set[str]) -> dict[str, Any]:
    unknown = sorted(set(data) - allowed - read_only)
    if unknown:
        raise _bad(unknown[0], f"unknown field (allowed: {', '.join(sorted(allowed))})", "unknown_field")
    return {k: v for k, v in data.items() if k in allowed}


def _text(data: dict, field: str, max_len: int, *, required: bool = False) -> str:
    value = data.get(field, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise _bad(field, "must be a string")
    value = value.strip()
    if required and not value:
        raise _bad(field, "is required", "missing_field")
    if len(value) > max_len:
        raise _bad(field, f"must be at most {max_len} characters")
    return value


def _number(data: dict, field: str) -> float | None:
    value = data.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _bad(field, "must be a finite number or null")
    return float(value)


def _integer(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(field, f"must be an integer between {lo} and {hi}")
    if not lo <= value <= hi:
        raise _bad(field, f"must be between {lo} and {hi}")
    return value


def _boolean(data: dict, field: str) -> bool:
    value = data.get(field)
    if not isinstance(value, bool):
        raise _bad(field, "must be true or false")
    return value


def parse_moment(value: Any, field: str = "muted_until") -> datetime | None:
    """An ISO 8601 date-time the database can store (memoryhub.core.moments), in UTC; None for
    null/empty. Raises InvalidInput."""
    if value is None or value == "":
        return None
    try:
        if isinstance(value, datetime):
            return check_moment(value)
        if isinstance(value, str):
            return parse_moment_text(value)
    except BadMoment as exc:
        raise _bad(field, str(exc))
    raise _bad(field, "must be an ISO 8601 date-time or null")


def mute_until_minutes(minutes: Any, now: datetime | None = None) -> datetime | None:
    """``now`` + minutes (0 = unmute), at most MAX_MUTE ahead. Raises InvalidInput."""
    limit = int(MAX_MUTE.total_seconds() // 60)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or not 0 <= minutes <= limit:
        raise _bad("minutes", f"must be an integer from 0 to {limit} (30 days)")
    return (now or timezone.now()) + timedelta(minutes=minutes) if minutes else None


# --- rules ----------------------------------------------------------------------------------


def clean_rule(tenant: Tenant, data: dict[str, Any], rule: AlertRule | None = None) -> dict[str, Any]:
    """Validate a create (rule None) or a partial update; returns model field values plus
    ``channels`` as a list of the tenant's Channel objects. Raises InvalidInput (400)."""
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    data = _check_fields(data, RULE_FIELDS, RULE_READ_ONLY)
    creating = rule is None
    out: dict[str, Any] = {}
    if creating or "name" in data:
        out["name"] = _text(data, "name", rule_max_length("name"), required=True)
    if creating or "metric" in data:
        metric = data.get("metric")
        if not isinstance(metric, str) or metric not in METRICS:
            raise _bad(
                "metric", f"unknown metric {metric!r} (one of: {', '.join(METRICS)})", "unknown_metric"
            )
        out["metric"] = metric
    metric = rule.metric if rule is not None and "metric" not in out else out["metric"]
    definition = METRICS[metric]
    if creating or "aggregation" in data or "metric" in data:
        aggregation = data.get("aggregation")
        if aggregation is None:
            # Keep the current aggregation while it still applies, else the metric's default.
            current = rule.aggregation if rule is not None else None
            aggregation = current if current in definition.aggregations else definition.default_aggregation
        if aggregation not in definition.aggregations:
            raise _bad(
                "aggregation",
                f"{aggregation!r} does not apply to {definition.kind} metric {metric!r} "
                f"(use one of: {', '.join(definition.aggregations)})",
                "invalid_aggregation",
            )
        out["aggregation"] = aggregation
    if creating or "comparator" in data:
        comparator = data.get("comparator", Comparator.GT) if creating else data.get("comparator")
        if comparator not in Comparator.values:
            raise _bad("comparator", f"must be one of {', '.join(Comparator.values)}")
        out["comparator"] = comparator
    for field in ("warning_threshold", "critical_threshold"):
        if creating or field in data:
            out[field] = _number(data, field)
    warning = out.get("warning_threshold", rule.warning_threshold if rule else None)
    critical = out.get("critical_threshold", rule.critical_threshold if rule else None)
    comparator = out.get("comparator", rule.comparator if rule else Comparator.GT)
    if warning is None and critical is None:
        raise _bad(
            "critical_threshold", "set a warning or a critical threshold (or both)", "missing_threshold"
        )
    if warning is not None and critical is not None:
        upward = comparator in (Comparator.GT, Comparator.GTE)
        if (upward and critical < warning) or (not upward and critical > warning):
            direction = "at or above" if upward else "at or below"
            raise _bad("critical_threshold", f"must be {direction} the warning threshold", "threshold_order")
    for field in RULE_RANGES:
        if creating or field in data:
            out[field] = _integer(data.get(field, rule_default(field)), field, *RULE_RANGES[field])
    if creating or "workflow_filter" in data:
        out["workflow_filter"] = _text(data, "workflow_filter", rule_max_length("workflow_filter"))
    if creating or "source_filter" in data:
        source = _text(data, "source_filter", rule_max_length("source_filter"))
        if source and source not in WorkflowSource.values:
            raise _bad("source_filter", f"must be blank or one of {', '.join(WorkflowSource.values)}")
        out["source_filter"] = source
    if "enabled" in data:
        out["enabled"] = _boolean(data, "enabled")
    if "muted_until" in data:
        out["muted_until"] = parse_moment(data.get("muted_until"))
    if "channels" in data:
        out["channels"] = _tenant_channels(tenant, data.get("channels"))
    return out


def tenant_rule(tenant: Tenant, pk: int) -> AlertRule | None:
    """The tenant's rule ``pk`` with its channels, or None (another tenant's rule is none)."""
    return AlertRule.objects.filter(tenant=tenant, pk=pk).prefetch_related("channels").first()


def tenant_channel(tenant: Tenant, pk: int) -> Channel | None:
    """The tenant's channel ``pk``, or None (another tenant's channel is none)."""
    return Channel.objects.filter(tenant=tenant, pk=pk).first()


def channels_by_name(tenant: Tenant) -> list[Channel]:
    """The tenant's channels, by name (the choices a rule's form offers)."""
    return list(Channel.objects.filter(tenant=tenant).order_by("name"))


def _tenant_channels(tenant: Tenant, ids: Any) -> list[Channel]:
    if ids is None:
        return []
    if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, int) for i in ids):
        raise _bad("channels", "must be a list of channel ids")
    channels = list(Channel.objects.filter(tenant=tenant, pk__in=ids))
    missing = sorted(set(ids) - {c.pk for c in channels})
    if missing:
        # Another tenant's channel is indistinguishable from none.
        raise _bad("channels", f"no channel with id {missing[0]} in this tenant", "unknown_channel")
    return channels


def _rule_audit(rule: AlertRule) -> dict[str, Any]:
    return {
        **rule.definition(),
        "enabled": rule.enabled,
        "channels": sorted(c.pk for c in rule.channels.all()),
    }


def create_rule(tenant: Tenant, data: dict[str, Any], actor: Actor) -> AlertRule:
    """Create a rule; it is due for evaluation at once."""

    values = clean_rule(tenant, data)
    channels = values.pop("channels", [])
    with transaction.atomic():
        rule = AlertRule.objects.create(tenant=tenant, next_eval_at=timezone.now(), **values)
        rule.channels.set(channels)
        record(tenant, actor, "alert_rule.create", ("alert_rule", rule.pk), _rule_audit(rule))
    return rule


def update_rule(rule: AlertRule, data: dict[str, Any], actor: Actor) -> AlertRule:
    """Apply a partial update; a changed definition is re-evaluated at the next beat."""

    values = clean_rule(rule.tenant, data, rule)
    channels = values.pop("channels", None)
    measures_something_else = any(
        field in values and values[field] != getattr(rule, field)
        for field in ("metric", "workflow_filter", "source_filter")
    )
    with transaction.atomic():
        for field, value in values.items():
            setattr(rule, field, value)
        definition_changed = bool(set(values) - {"name", "muted_until", "enabled"})
        if definition_changed or "enabled" in values:
            rule.next_eval_at = timezone.now()
        rule.save()
        if measures_something_else:
            # Old raw samples measured another metric or scope: keep them on the chart, but out
            # of the window's max/min/avg.
            AlertEvaluation.objects.filter(rule=rule).update(sample=None)
        if channels is not None:
            rule.channels.set(channels)
        record(
            rule.tenant,
            actor,
            "alert_rule.update",
            ("alert_rule", rule.pk),
            {**_rule_audit(rule), "changed": sorted(data)},
        )
    return rule


def delete_rule(rule: AlertRule, actor: Actor) -> None:
    with transaction.atomic():
        record(rule.tenant, actor, "alert_rule.delete", ("alert_rule", rule.pk), {"name": rule.name})
        rule.delete()


def mute_rule(rule: AlertRule, until: datetime | None, actor: Actor) -> AlertRule:
    """Mute until a moment (None = unmute). Muted rules keep evaluating; flips are not notified."""

    if until is not None and until > timezone.now() + MAX_MUTE:
        raise _bad("muted_until", "can be at most 30 days ahead")
    with transaction.atomic():
        rule.muted_until = until
        rule.save(update_fields=["muted_until"])
        action = "alert_rule.mute" if until else "alert_rule.unmute"
        record(rule.tenant, actor, action, ("alert_rule", rule.pk), {"name": rule.name, "muted_until": until})
    return rule


def is_muted(rule: AlertRule, now: datetime | None = None) -> bool:
    return rule.muted_until is not None and rule.muted_until > (now or timezone.now())


# --- channels -------------------------------------------------------------------------------


def _clean_url(value: str, field: str = "url") -> str:
    """An http(s) URL that reaches only public addresses (see transports.guard; re-checked at
    every send, after resolving the name again)."""
    try:
        return check_url(value)
    except UnsafeURL as exc:
        raise _bad(field, str(exc), "unsafe_url" if "must be an http" not in str(exc) else "invalid_url")


def clean_channel(data: dict[str, Any], channel: Channel | None = None) -> dict[str, Any]:
    """Validate a channel create (channel None) or partial update. Raises InvalidInput (400)."""
    if not isinstance(data, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_body")
    data = _check_fields(data, CHANNEL_FIELDS, CHANNEL_READ_ONLY)
    out: dict[str, Any] = {}
    if channel is None:
        kind = data.get("kind")
        if kind not in ChannelKind.values:
            raise _bad("kind", f"must be one of {', '.join(ChannelKind.values)}", "invalid_kind")
        out["kind"] = kind
    else:
        kind = channel.kind
        if "kind" in data and data["kind"] != kind:
            raise _bad("kind", "cannot be changed; create a new channel", "kind_immutable")
    creating = channel is None
    if creating or "name" in data:
        out["name"] = _text(data, "name", 100, required=True)
    if kind in (ChannelKind.WEBHOOK, ChannelKind.SLACK):
        if creating or "url" in data:
            out["url"] = _clean_url(_text(data, "url", 500, required=True))
        if "email" in data and data["email"]:
            raise _bad("email", f"does not apply to {kind} channels")
    else:
        if creating or "email" in data:
            email = _text(data, "email", 254, required=True)
            try:
                validate_email(email)
            except ValidationError:
                raise _bad("email", "must be a valid email address", "invalid_email")
            out["email"] = email
        if "url" in data and data["url"]:
            raise _bad("url", "does not apply to email channels")
    if "secret" in data:
        secret = data.get("secret")
        if secret is None:
            secret = ""
        if not isinstance(secret, str) or len(secret) > 200:
            raise _bad("secret", "must be a string of at most 200 characters")
        if secret and kind != ChannelKind.WEBHOOK:
            raise _bad("secret", "only webhook channels sign their payloads")
        out["secret"] = secret
    if creating or "timeout_seconds" in data:
        timeout = data.get("timeout_seconds", 5.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0.5 <= timeout <= 30:
            raise _bad("timeout_seconds", "must be a number between 0.5 and 30")
        out["timeout_seconds"] = float(timeout)
    return out


def _channel_audit(channel: Channel) -> dict[str, Any]:
    # Never the secret (nor a Slack URL's token path): only whether one is set.
    return {
        "name": channel.name,
        "kind": channel.kind,
        "host": urlsplit(channel.url).netloc if channel.url else "",
        "email": channel.email,
        "secret_set": bool(channel.secret),
        "timeout_seconds": channel.timeout_seconds,
    }


def create_channel(tenant: Tenant, data: dict[str, Any], actor: Actor) -> Channel:
    values = clean_channel(data)
    with transaction.atomic():
        channel = Channel.objects.create(tenant=tenant, **values)
        record(tenant, actor, "channel.create", ("channel", channel.pk), _channel_audit(channel))
    return channel


def update_channel(channel: Channel, data: dict[str, Any], actor: Actor) -> Channel:
    values = clean_channel(data, channel)
    with transaction.atomic():
        for field, value in values.items():
            setattr(channel, field, value)
        channel.save()
        record(
            channel.tenant,
            actor,
            "channel.update",
            ("channel", channel.pk),
            {**_channel_audit(channel), "changed": sorted(values)},
        )
    return channel


def delete_channel(channel: Channel, actor: Actor) -> None:
    with transaction.atomic():
        record(channel.tenant, actor, "channel.delete", ("channel", channel.pk), {"name": channel.name})
        channel.delete()


def enable_channel(channel: Channel, actor: Actor) -> Channel:
    """Re-enable a channel a permanent error disabled (clears the reason and the last error)."""

    with transaction.atomic():
        if Channel.objects.filter(pk=channel.pk, disabled_at__isnull=False).update(
            disabled_at=None, disabled_reason="", last_error=""
        ):
            record(channel.tenant, actor, "channel.enable", ("channel", channel.pk), {"name": channel.name})
    channel.refresh_from_db()
    return channel


def request_test_send(*, actor: Actor, channel: Channel | None = None, rule: AlertRule | None = None) -> None:
    """Queue a test-send through the task outbox; the worker delivers and records it."""

    target = channel or rule
    if target is None:
        raise ValueError("a channel or a rule is required")
    kind = "channel" if channel is not None else "alert_rule"
    with transaction.atomic():
        record(target.tenant, actor, f"{kind}.test", (kind, target.pk), {"name": target.name})
        channel_id = channel.pk if channel is not None else None
        rule_id = rule.pk if rule is not None else None
        # Written with the audit entry; published after commit within a bounded wait, or by the
        # outbox sweeper when the broker is down or hung (the request answers 202 either way).
        outbox.send_after_commit(
            "memoryhub.alerting.send_test",
            {"channel_id": channel_id, "rule_id": rule_id, "requested_by": str(actor)},
            tenant=target.tenant,
        )
