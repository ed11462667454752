"""Alert rules / channels / alerts / metrics API: shapes, admin-only writes, tenant isolation,
precise 400s that write nothing, secrets never returned, test-sends queued for the worker."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEntry
from memoryhub.accounts.alerts_defaults import DEFAULT_RULES
from memoryhub.celery import app as celery_app
from memoryhub.models import AlertEvaluation, AlertEvent, AlertRule, Channel, Notification
from memoryhub.models.alerts import RULE_DEFINITION_FIELDS
from tests.factories import activated, build_workflow, only_rule, stale_activation
from tests.helpers import T0, frozen

pytestmark = pytest.mark.django_db

RULES = "/api/v1/alert-rules/"
CHANNELS = "/api/v1/channels/"


def create_channel(api, **body):
    payload = {
        "kind": "webhook",
        "name": "ops hook",
        "url": "https://hooks.example.com/mh",
        "secret": "topsecret",
    }
    payload.update(body)
    return api.post(CHANNELS, payload, format="json")


def rule_body(**overrides):
    body = {
        "name": "Stale activations",
        "metric": "stale_activation_attempts",
        "comparator": "gt",
        "warning_threshold": 0,
        "critical_threshold": 5,
        "window_minutes": 15,
        "interval_seconds": 60,
    }
    body.update(overrides)
    return body


def test_channel_crud_never_returns_the_secret(api, tenant):
    response = create_channel(api)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["secret_set"] is True and "secret" not in body
    assert body["enabled"] is True and body["kind"] == "webhook"
    assert "topsecret" not in response.content.decode()
    cid = body["id"]

    listed = api.get(CHANNELS).json()
    assert [c["id"] for c in listed["results"]] == [cid]
    assert "topsecret" not in str(listed)

    patched = api.patch(f"{CHANNELS}{cid}/", {"name": "renamed"}, format="json").json()
    assert patched["name"] == "renamed" and patched["secret_set"] is True  # omitted secret is kept
    cleared = api.patch(f"{CHANNELS}{cid}/", {"secret": ""}, format="json").json()
    assert cleared["secret_set"] is False

    entries = AuditEntry.objects.filter(tenant=tenant, action__startswith="channel.")
    assert list(entries.order_by("seq").values_list("action", flat=True)) == [
        "channel.create",
        "channel.update",
        "channel.update",
    ]
    assert all("topsecret" not in str(e.data) for e in entries)

    assert api.delete(f"{CHANNELS}{cid}/").status_code == 204
    assert not Channel.objects.filter(pk=cid).exists()


def test_slack_url_is_treated_as_a_credential(api):
    body = create_channel(
        api, kind="slack", url="https://hooks.slack.com/services/T000/B000/XXXXSECRET", secret=None
    ).json()
    assert body["url"] == "https://hooks.slack.com/…"
    assert "XXXXSECRET" not in str(api.get(CHANNELS).json())


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"kind": "pager"}, "invalid_kind", "kind"),
        ({"url": "not a url"}, "invalid_url", "url"),
        ({"url": "ftp://x.example/"}, "invalid_url", "url"),
        ({"url": ""}, "missing_field", "url"),
        ({"name": ""}, "missing_field", "name"),
        ({"timeout_seconds": 0}, "invalid_field", "timeout_seconds"),
        ({"kind": "email", "url": "", "secret": None, "email": "nope"}, "invalid_email", "email"),
        ({"kind": "email", "url": "", "email": "a@example.com"}, "invalid_field", "secret"),
        ({"bogus": 1}, "unknown_field", "bogus"),
    ],
)
def test_bad_channel_input_is_a_precise_400_and_writes_nothing(api, tenant, body, code, field):
    body = {k: v for k, v in body.items()}
    payload = {"kind": "webhook", "name": "x", "url": "https://hooks.example.com/x", "secret": "s"}
    payload.update(body)
    payload = {k: v for k, v in payload.items() if v is not None}
    before = AuditEntry.objects.count()
    response = api.post(CHANNELS, payload, format="json")
    assert response.status_code == 400
    assert response.json()["error"] == code and response.json()["field"] == field
    assert Channel.objects.count() == 0 and AuditEntry.objects.count() == before


def test_rule_crud_with_channels(api, tenant):
    cid = create_channel(api).json()["id"]
    response = api.post(RULES, rule_body(channels=[cid], workflow_filter="pay-"), format="json")
    assert response.status_code == 201, response.json()
    rule = response.json()
    assert rule["channels"] == [cid] and rule["aggregation"] == "sum"  # the metric's default
    assert rule["state"] == "ok" and rule["muted"] is False and rule["next_eval_at"] is not None
    rid = rule["id"]
    stored = AlertRule.objects.get(pk=rid)
    assert {k: rule[k] for k in RULE_DEFINITION_FIELDS} == stored.definition()
    created = AuditEntry.objects.get(tenant=tenant, action="alert_rule.create")
    assert created.data == {**stored.definition(), "enabled": True, "channels": [cid]}

    patched = api.patch(f"{RULES}{rid}/", {"critical_threshold": 3, "channels": []}, format="json")
    assert patched.status_code == 200, patched.json()
    assert patched.json()["critical_threshold"] == 3 and patched.json()["channels"] == []
    assert api.get(f"{RULES}{rid}/").json()["workflow_filter"] == "pay-"

    listed = api.get(RULES, {"metric": "stale_activation_attempts"}).json()["results"]
    assert {r["name"] for r in listed} == {"Stale activations", "Stale activation attempts (15 min)"}

    assert api.delete(f"{RULES}{rid}/").status_code == 204
    assert api.get(f"{RULES}{rid}/").status_code == 404
    actions = set(AuditEntry.objects.filter(tenant=tenant).values_list("action", flat=True))
    assert {"alert_rule.create", "alert_rule.update", "alert_rule.delete"} <= actions


@pytest.mark.parametrize(
    ("overrides", "code", "field"),
    [
        ({"metric": "bogus"}, "unknown_metric", "metric"),
        ({"aggregation": "max"}, "invalid_aggregation", "aggregation"),  # max of a counter
        ({"comparator": "eq"}, "invalid_field", "comparator"),
        ({"warning_threshold": None, "critical_threshold": None}, "missing_threshold", "critical_threshold"),
        ({"warning_threshold": 10, "critical_threshold": 5}, "threshold_order", "critical_threshold"),
        ({"critical_threshold": "5"}, "invalid_field", "critical_threshold"),
        ({"window_minutes": 0}, "invalid_field", "window_minutes"),
        ({"interval_seconds": 10}, "invalid_field", "interval_seconds"),
        ({"channels": [999999]}, "unknown_channel", "channels"),
        ({"channels": "1"}, "invalid_field", "channels"),
        ({"enabled": "yes"}, "invalid_field", "enabled"),
        ({"muted_until": "soon"}, "invalid_field", "muted_until"),
        ({"name": "x" * 201}, "invalid_field", "name"),
        ({"source_filter": "langchain-v2"}, "invalid_field", "source_filter"),
        ({"source_filter": 3}, "invalid_field", "source_filter"),
        ({"colour": "red"}, "unknown_field", "colour"),
    ],
)
def test_bad_rule_input_is_a_precise_400_and_writes_nothing(api, tenant, overrides, code, field):
    before = (AlertRule.objects.count(), AuditEntry.objects.count())
    response = api.post(RULES, rule_body(**overrides), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["error"] == code and response.json()["field"] == field
    assert (AlertRule.objects.count(), AuditEntry.objects.count()) == before


def test_lower_is_worse_rules_order_thresholds_the_other_way(api):
    ok = api.post(
        RULES,
        rule_body(
            metric="audit_trace_completeness", comparator="lt", warning_threshold=0.9, critical_threshold=0.5
        ),
        format="json",
    )
    assert ok.status_code == 201 and ok.json()["aggregation"] == "last"
    bad = api.post(
        RULES,
        rule_body(
            metric="audit_trace_completeness", comparator="lt", warning_threshold=0.5, critical_threshold=0.9
        ),
        format="json",
    )
    assert bad.json()["error"] == "threshold_order"


def test_body_must_be_an_object(api):
    response = api.post(RULES, [1, 2], format="json")
    assert response.status_code == 400 and response.json()["error"] == "invalid_body"


def test_only_admins_write_viewers_and_reviewers_read(alice, bob, carol, tenant):
    cid = create_channel(alice.api).json()["id"]
    rid = alice.api.post(RULES, rule_body(), format="json").json()["id"]
    for party in (bob, carol):
        assert party.api.get(RULES).status_code == 200
        assert party.api.get(f"{CHANNELS}{cid}/").status_code == 200
        assert party.api.get("/api/v1/alerts/").status_code == 200
        assert party.api.get("/api/v1/metrics/").status_code == 200
        assert party.api.post(RULES, rule_body(), format="json").status_code == 403
        assert party.api.patch(f"{RULES}{rid}/", {"name": "x"}, format="json").status_code == 403
        assert party.api.delete(f"{CHANNELS}{cid}/").status_code == 403
        assert party.api.post(f"{CHANNELS}{cid}/test/").status_code == 403
        assert party.api.post(f"{RULES}{rid}/mute/", {"minutes": 5}, format="json").status_code == 403
        assert party.api.post(f"{CHANNELS}{cid}/enable/").status_code == 403
    assert AlertRule.objects.filter(tenant=tenant, name="x").count() == 0


def test_other_tenants_objects_are_404_and_never_listed(alice, mallory):
    cid = create_channel(alice.api).json()["id"]
    rid = alice.api.post(RULES, rule_body(channels=[cid]), format="json").json()["id"]
    assert mallory.api.get(f"{RULES}{rid}/").status_code == 404
    assert mallory.api.get(f"{CHANNELS}{cid}/").status_code == 404
    assert mallory.api.patch(f"{RULES}{rid}/", {"name": "pwned"}, format="json").status_code == 404
    assert mallory.api.post(f"{CHANNELS}{cid}/test/").status_code == 404
    assert cid not in [c["id"] for c in mallory.api.get(CHANNELS).json()["results"]]
    assert rid not in [r["id"] for r in mallory.api.get(RULES).json()["results"]]
    # Another tenant's channel cannot be attached to one's own rule.
    response = mallory.api.post(RULES, rule_body(channels=[cid]), format="json")
    assert response.status_code == 400 and response.json()["error"] == "unknown_channel"


def test_test_send_is_queued_for_the_worker_not_sent_by_the_request(
    api, tenant, receiver, django_capture_on_commit_callbacks
):
    channel = create_channel(api, url=receiver.url("/hook"), secret=receiver.secret).json()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = api.post(f"{CHANNELS}{channel['id']}/test/")
    assert response.status_code == 202 and response.json()["queued"] is True
    assert receiver.requests == [] and Notification.objects.count() == 0  # nothing sent in the request
    assert len(callbacks) == 1
    # What the worker would do with the queued task (run in-process, Celery's eager mode).
    celery_app.conf.task_always_eager = True
    try:
        callbacks[0]()
    finally:
        celery_app.conf.task_always_eager = False
    (request,) = receiver.requests
    assert request["json"]["event"] == "test" and request["verified"]
    (notification,) = Notification.objects.all()
    assert notification.kind == "test" and notification.ok
    assert AuditEntry.objects.filter(tenant=tenant, action="channel.test").count() == 1


def test_rule_test_send_needs_an_enabled_channel(api, django_capture_on_commit_callbacks):
    rid = api.post(RULES, rule_body(), format="json").json()["id"]
    response = api.post(f"{RULES}{rid}/test/")
    assert response.status_code == 400 and response.json()["error"] == "no_channels"
    cid = create_channel(api).json()["id"]
    api.patch(f"{RULES}{rid}/", {"channels": [cid]}, format="json")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert api.post(f"{RULES}{rid}/test/").status_code == 202
    assert len(callbacks) == 1


def test_mute_and_unmute(api, tenant):
    rid = api.post(RULES, rule_body(), format="json").json()["id"]
    with frozen(T0):
        muted = api.post(f"{RULES}{rid}/mute/", {"minutes": 60}, format="json").json()
    assert muted["muted_until"].startswith("2030-01-15T13:00")
    unmuted = api.post(f"{RULES}{rid}/mute/", {"minutes": 0}, format="json").json()
    assert unmuted["muted_until"] is None and unmuted["muted"] is False
    until = api.post(f"{RULES}{rid}/mute/", {"until": "2099-01-01T00:00:00Z"}, format="json")
    assert until.status_code == 400  # more than 30 days ahead
    assert api.post(f"{RULES}{rid}/mute/", {}, format="json").json()["error"] == "missing_field"
    actions = list(
        AuditEntry.objects.filter(tenant=tenant, action__startswith="alert_rule.").values_list(
            "action", flat=True
        )
    )
    assert "alert_rule.mute" in actions and "alert_rule.unmute" in actions


def test_enable_clears_a_disabled_channel(api, tenant, receiver):
    from memoryhub.observe.alerting.deliver import send_test

    cid = create_channel(api, url=receiver.url("/status/410")).json()["id"]
    (failed,) = send_test(channel_id=cid)  # a permanent error disables the channel
    assert not failed.ok
    disabled = api.get(f"{CHANNELS}{cid}/").json()
    assert disabled["enabled"] is False and "HTTP 410" in disabled["disabled_reason"]
    body = api.post(f"{CHANNELS}{cid}/enable/").json()
    assert body["enabled"] is True and body["disabled_reason"] == "" and body["last_error"] == ""
    assert AuditEntry.objects.filter(tenant=tenant, action="channel.enable").count() == 1


def test_alerts_list_shows_flips_newest_first_and_filters(api, tenant):
    from memoryhub.observe.alerting.evaluate import evaluate_due_rules

    summary = activated(build_workflow(tenant, "wf", n=10))
    with frozen(T0):
        rule = only_rule(tenant, name="r")
        stale_activation(summary)
        evaluate_due_rules()
    with frozen(T0 + timedelta(minutes=20)):
        evaluate_due_rules()
    body = api.get("/api/v1/alerts/").json()
    assert [(a["from_state"], a["to_state"], a["kind"]) for a in body["results"]] == [
        ("critical", "ok", "resolve"),
        ("ok", "critical", "alert"),
    ]
    assert (
        body["results"][0]["rule_id"] == rule.pk
        and body["results"][0]["metric"] == "stale_activation_attempts"
    )
    assert len(api.get("/api/v1/alerts/", {"to_state": "critical"}).json()["results"]) == 1
    evaluations = api.get(f"{RULES}{rule.pk}/evaluations/").json()["evaluations"]
    assert [e["state"] for e in evaluations] == ["ok", "critical"]
    assert AlertEvent.objects.count() == 2 and AlertEvaluation.objects.filter(rule=rule).count() == 2


def test_rule_list_query_count_does_not_grow_with_rules(api, tenant):
    cid = create_channel(api).json()["id"]
    with CaptureQueriesContext(connection) as few:
        assert api.get(RULES).status_code == 200
    for i in range(10):
        api.post(RULES, rule_body(name=f"r{i}", channels=[cid]), format="json")
    with CaptureQueriesContext(connection) as many:
        assert len(api.get(RULES).json()["results"]) == len(DEFAULT_RULES) + 10
    assert len(many.captured_queries) == len(few.captured_queries)


def test_metrics_snapshot_and_series(api, tenant):
    summary = activated(build_workflow(tenant, "pay-1", n=10))
    with frozen(T0 - timedelta(minutes=3)):
        stale_activation(summary)
    with frozen(T0):
        snap = api.get("/api/v1/metrics/", {"window_minutes": 10}).json()
        assert snap["metrics"]["stale_activation_attempts"] == 1
        assert snap["definitions"]["tail_tokens"]["kind"] == "gauge"
        assert (
            api.get("/api/v1/metrics/", {"workflow_prefix": "ship"}).json()["metrics"][
                "stale_activation_attempts"
            ]
            == 0
        )
        body = api.get(
            "/api/v1/metrics/", {"metric": "stale_activation_attempts", "since": "2030-01-15T11:00:00Z"}
        ).json()
    assert body["metric"] == "stale_activation_attempts" and body["bucket_minutes"] == 5
    assert body["series"][-1] == {"t": "2030-01-15T12:00:00+00:00", "value": 0.0}  # live current bucket
    for params, code in [
        ({"metric": "nope"}, "unknown_metric"),
        ({"metric": "tail_tokens", "bucket_minutes": 7}, "invalid_parameter"),
        ({"metric": "tail_tokens", "since": "yesterday"}, "invalid_field"),
        ({"window_minutes": "abc"}, "invalid_parameter"),
    ]:
        response = api.get("/api/v1/metrics/", params)
        assert response.status_code == 400 and response.json()["error"] == code, params


def test_schema_documents_the_alert_endpoints(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    for path in [
        "/api/v1/alert-rules/",
        "/api/v1/channels/{id}/test/",
        "/api/v1/alerts/",
        "/api/v1/metrics/",
    ]:
        assert path in schema["paths"], path
