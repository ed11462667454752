"""Delivery: a real local HTTP server receives signed webhooks; resolve on recovery; permanent
errors disable the channel (with an audit entry); transient ones are retried, bounded; email
through Django's outbox; Slack-compatible bodies; muted rules notify nobody."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail

from audit.models import AuditEntry
from memoryhub.models import AlertEvent, AlertRule, Channel, Notification
from memoryhub.observe.alerting import deliver
from memoryhub.observe.alerting.deliver import MAX_ATTEMPTS, deliver_pending, send_test
from memoryhub.observe.alerting.evaluate import evaluate_due_rules
from memoryhub.observe.alerting.services import update_channel
from memoryhub.observe.alerting.transports import webhook
from memoryhub.observe.alerting.transports.base import Message
from tests.factories import ADMIN, activated, alert_channel, build_workflow, only_rule, stale_activation
from tests.helpers import T0, frozen

pytestmark = pytest.mark.django_db


def make_channel(tenant, receiver, path="/ok", *, kind="webhook", secret=None, **fields) -> Channel:
    values = {"url": receiver.url(path), "secret": receiver.secret if secret is None else secret, **fields}
    return alert_channel(tenant, kind=kind, name=f"{kind}{path}", **values)


def stale_rule(tenant, *channels, **fields) -> AlertRule:
    with frozen(T0):  # due at T0
        return only_rule(tenant, *channels, **fields)


def go_critical(tenant) -> AlertEvent:
    """One stale activation, one evaluation: an ok → critical flip."""
    summary = activated(build_workflow(tenant, "wf", n=10))
    with frozen(T0):
        stale_activation(summary)
        (outcome,) = evaluate_due_rules()
    assert outcome.flip is not None
    return outcome.flip


def test_webhook_is_signed_and_resolves_on_recovery(tenant, receiver):
    channel = make_channel(tenant, receiver)
    rule = stale_rule(tenant, channel)
    flip = go_critical(tenant)
    assert receiver.requests == []  # evaluation never sends

    (notification,) = deliver_pending()
    assert notification.ok and notification.status_code == 200 and notification.kind == "alert"
    (request,) = receiver.requests
    assert request["verified"] is True
    assert request["signature"].startswith("sha256=")
    assert request["headers"]["Content-Type"] == "application/json"
    body = request["json"]
    assert body["event"] == "alert"
    assert (body["from_state"], body["to_state"], body["value"]) == ("ok", "critical", 1)
    assert body["tenant"] == "acme" and body["alert_id"] == flip.pk
    assert body["rule"] == {"id": rule.pk, **rule.definition(), "url": f"/alerts/rules/{rule.pk}/"}
    assert body["rule"]["metric"] == "stale_activation_attempts"
    flip.refresh_from_db()
    assert flip.processed_at is not None
    assert deliver_pending() == []  # processed flips are never sent twice

    with frozen(T0 + timedelta(minutes=16)):  # the stale attempt left the 15-minute window
        (outcome,) = evaluate_due_rules()
    assert (outcome.flip.from_state, outcome.flip.to_state) == ("critical", "ok")
    (resolved,) = deliver_pending()
    assert resolved.ok and resolved.kind == "resolve"
    assert receiver.requests[-1]["json"]["event"] == "resolve"
    assert receiver.requests[-1]["verified"] is True
    channel.refresh_from_db()
    assert channel.last_delivery_at is not None and channel.last_error == ""


def test_a_tampered_body_or_wrong_secret_fails_verification(tenant, receiver):
    channel = make_channel(tenant, receiver, secret="another-secret")
    message = Message(kind="test", subject="s", text="t", payload={"a": 1})
    assert webhook.send(channel, message).ok
    assert receiver.requests[-1]["verified"] is False  # the receiver's key differs
    body = webhook.body_bytes(message)
    assert webhook.sign("k", body) != webhook.sign("k", body + b" ")


def test_unsigned_webhook_when_no_secret(tenant, receiver):
    channel = make_channel(tenant, receiver, secret="")
    assert webhook.send(channel, Message(kind="test", subject="s", text="t", payload={})).ok
    assert receiver.requests[-1]["signature"] is None


@pytest.mark.parametrize("code", [400, 401, 403, 404, 410])
def test_permanent_error_disables_the_channel_with_an_audit_entry(tenant, receiver, code):
    broken = make_channel(tenant, receiver, f"/status/{code}")
    healthy = make_channel(tenant, receiver, "/ok")
    stale_rule(tenant, broken, healthy)
    go_critical(tenant)

    notifications = deliver_pending()
    assert [(n.channel_id, n.ok, n.status_code) for n in notifications] == [
        (broken.pk, False, code),
        (healthy.pk, True, 200),
    ]
    broken.refresh_from_db()
    assert broken.disabled_at is not None
    assert f"HTTP {code}" in broken.disabled_reason and f"HTTP {code}" in broken.last_error
    entry = AuditEntry.objects.get(tenant=tenant, action="channel.disable")
    assert entry.object_id == str(broken.pk) and f"HTTP {code}" in entry.data["reason"]
    assert AlertEvent.objects.filter(processed_at__isnull=True).count() == 0  # no retry of a permanent error

    # A later flip skips the disabled channel.
    with frozen(T0 + timedelta(minutes=16)):
        evaluate_due_rules()
    (resolved,) = deliver_pending()
    assert resolved.channel_id == healthy.pk
    assert Notification.objects.filter(channel=broken).count() == 1


@pytest.mark.impossible_state(
    "the channel services refuse a non-http(s) URL; a row from before that check must still fail once"
)
def test_invalid_url_is_permanent(tenant, receiver):
    channel = Channel.objects.create(
        tenant=tenant, kind="webhook", name="ftp", url="ftp://example.invalid/hook"
    )
    stale_rule(tenant, channel)
    go_critical(tenant)
    (notification,) = deliver_pending()
    assert not notification.ok and "must be an http(s) URL" in notification.error
    channel.refresh_from_db()
    assert channel.disabled_at is not None


@pytest.mark.parametrize("path", ["/status/503", "/status/429", "/status/500"])
def test_transient_errors_are_retried_on_later_runs_and_bounded(tenant, receiver, path):
    flaky = make_channel(tenant, receiver, path)
    healthy = make_channel(tenant, receiver, "/ok")
    stale_rule(tenant, flaky, healthy)
    flip = go_critical(tenant)

    first = deliver_pending()
    assert [(n.channel_id, n.ok) for n in first] == [(flaky.pk, False), (healthy.pk, True)]
    flip.refresh_from_db()
    assert flip.processed_at is None  # released for a retry
    for _ in range(MAX_ATTEMPTS - 1):
        (retry,) = deliver_pending()  # only the channel that has not succeeded is retried
        assert retry.channel_id == flaky.pk and not retry.ok
    flip.refresh_from_db()
    assert flip.processed_at is not None  # attempts exhausted
    assert deliver_pending() == []
    assert Notification.objects.filter(alert_event=flip, channel=flaky).count() == MAX_ATTEMPTS
    assert Notification.objects.filter(alert_event=flip, channel=healthy).count() == 1
    flaky.refresh_from_db()
    assert flaky.disabled_at is None and path.split("/")[-1] in flaky.last_error


def test_a_retry_that_succeeds_stops_retrying(tenant, receiver):
    channel = make_channel(tenant, receiver, "/status/503")
    stale_rule(tenant, channel)
    flip = go_critical(tenant)
    assert not deliver_pending()[0].ok
    update_channel(channel, {"url": receiver.url("/ok")}, ADMIN)  # the receiver recovered
    assert deliver_pending()[0].ok
    flip.refresh_from_db()
    assert flip.processed_at is not None
    channel.refresh_from_db()
    assert channel.last_error == ""


def test_timeout_is_transient(tenant, receiver):
    channel = make_channel(tenant, receiver, "/sleep/2", timeout_seconds=0.5)
    stale_rule(tenant, channel)
    go_critical(tenant)
    (notification,) = deliver_pending()
    assert not notification.ok and "timed out" in notification.error
    channel.refresh_from_db()
    assert channel.disabled_at is None


def test_connection_refused_is_transient(tenant, receiver):
    channel = make_channel(tenant, receiver, url="http://127.0.0.1:9/hook")
    stale_rule(tenant, channel)
    go_critical(tenant)
    (notification,) = deliver_pending()
    assert not notification.ok and notification.error
    channel.refresh_from_db()
    assert channel.disabled_at is None


def test_email_channel_uses_the_django_email_backend(tenant, receiver):
    channel = alert_channel(tenant, kind="email", name="on-call", email="oncall@example.com")
    stale_rule(tenant, channel)
    go_critical(tenant)
    (notification,) = deliver_pending()
    assert notification.ok
    (message,) = mail.outbox
    assert message.to == ["oncall@example.com"]
    assert message.subject == "[MemoryHub] CRITICAL: Stale activations"
    assert "stale_activation_attempts is 1" in message.body and "ok → critical" in message.body


def test_slack_channel_posts_a_text_body(tenant, receiver):
    channel = make_channel(tenant, receiver, "/slack", kind="slack", secret="")
    stale_rule(tenant, channel)
    go_critical(tenant)
    (notification,) = deliver_pending()
    assert notification.ok
    body = receiver.requests[-1]["json"]
    assert set(body) == {"text"}
    assert "CRITICAL: Stale activations" in body["text"]


def test_muted_rules_are_evaluated_but_nobody_is_notified(tenant, receiver):
    channel = make_channel(tenant, receiver)
    stale_rule(tenant, channel, muted_until=T0 + timedelta(hours=1))
    flip = go_critical(tenant)
    assert deliver_pending() == []
    flip.refresh_from_db()
    assert flip.processed_at is not None
    assert receiver.requests == [] and Notification.objects.count() == 0


def test_two_deliverers_never_send_a_flip_twice(tenant, receiver):
    channel = make_channel(tenant, receiver)
    stale_rule(tenant, channel)
    flip = go_critical(tenant)
    assert len(deliver.deliver_flip(flip.pk)) == 1
    assert deliver.deliver_flip(flip.pk) == []  # the compare-and-set claim is gone
    assert len(receiver.requests) == 1


def test_send_test_to_a_channel_and_to_a_rules_channels(tenant, receiver):
    a = make_channel(tenant, receiver, "/a")
    b = make_channel(tenant, receiver, "/b")
    rule = stale_rule(tenant, a, b)
    (only,) = send_test(channel_id=a.pk)
    assert only.ok and only.kind == "test" and only.alert_event is None
    assert receiver.requests[-1]["json"]["event"] == "test" and receiver.requests[-1]["verified"]
    both = send_test(rule_id=rule.pk)
    assert sorted(n.channel_id for n in both) == [a.pk, b.pk]
    assert all(json.loads(r["body"])["rule"]["id"] == rule.pk for r in receiver.requests[1:])
