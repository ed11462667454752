"""Metrics: each registered metric computed from the rows it reads, windows, workflow prefixes,
snapshot query counts, rollups + live series, and the Prometheus endpoint."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from memoryhub.models import MetricSample
from memoryhub.observe import metrics
from memoryhub.observe.metrics import METRICS, compute, rollup, rollup_all, series, snapshot
from tests.helpers import make_workflow

from .alert_helpers import (
    T0,
    artifact,
    decision,
    frozen,
    investigation,
    job,
    lifecycle,
    set_totals,
    summary,
    trace,
    validation,
)

pytestmark = pytest.mark.django_db

DESIGN_METRICS = [
    "summary_versions",
    "active_summary_age_seconds",
    "active_summary_age_events",
    "tail_events",
    "tail_tokens",
    "stale_activation_attempts",
    "validation_failures",
    "unexplained_source_gaps",
    "audit_trace_completeness",
    "time_to_reconstruct_ms",
    "compactions",
    "tokens_before",
    "tokens_after",
    "acceptance_rate",
    "generation_cost",
    "compaction_latency_ms",
    "overflow_incidents",
    "fallback_retrievals",
    "quality_regressions",
    "unvalidated_consumptions",
]


def value(tenant, metric, minutes=60, prefix=""):
    return compute(tenant, metric, since=T0 - timedelta(minutes=minutes), workflow_prefix=prefix)


def test_registry_has_every_design_metric_and_the_default_rule_metrics():
    for name in [*DESIGN_METRICS, "missing_provenance", "validation_failure_rate", "tail_budget_fraction"]:
        assert name in METRICS, name
        definition = METRICS[name]
        assert definition.description and definition.unit
        assert definition.kind in ("counter", "gauge", "ratio", "mean")


def test_unknown_metric_is_an_error(tenant):
    with pytest.raises(KeyError):
        compute(tenant, "nope", since=None)


def test_lifecycle_and_validation_metrics_count_only_their_window_and_tenant(tenant, other_tenant):
    wf = make_workflow(tenant, "pay-1")
    foreign = make_workflow(other_tenant, "pay-1")
    with frozen(T0 - timedelta(minutes=90)):
        old = summary(wf, 1)
        lifecycle(old, "stale")  # outside a 60-minute window
        validation(old, passed=False)
    with frozen(T0 - timedelta(minutes=10)):
        s2 = summary(wf, 2, status="REJECTED")
        lifecycle(s2, "stale")
        lifecycle(s2, "refused")
        lifecycle(s2, "applied")  # applied is not stale
        lifecycle(s2, "stale", action="quarantine")  # not an activation attempt
        validation(s2, passed=False)
        validation(s2, passed=True)
        validation(s2, passed=True)
        validation(s2, passed=True)
        lifecycle(summary(foreign, 1), "stale")  # another tenant
    with frozen(T0):
        assert value(tenant, "stale_activation_attempts") == 2
        assert value(tenant, "stale_activation_attempts", minutes=120) == 3
        assert value(tenant, "validation_failures") == 1
        assert value(tenant, "validation_failure_rate") == pytest.approx(0.25)
        assert value(tenant, "summary_versions") == 1
        assert compute(tenant, "summary_versions", since=None) == 2
        assert value(other_tenant, "stale_activation_attempts") == 1
        # A ratio over no rows is "no data", not zero.
        assert value(tenant, "validation_failure_rate", minutes=1) is None


def test_gauges_read_running_totals_and_respect_the_workflow_prefix(tenant):
    a = make_workflow(tenant, "pay-a")
    b = make_workflow(tenant, "ship-b")
    with frozen(T0 - timedelta(hours=2)):
        s = summary(a, 1, status="ACTIVE")
    set_totals(a, active_summary=s, activated_at=T0 - timedelta(hours=2), tail_events=30, tail_tokens=9_000)
    set_totals(b, tail_events=500, tail_tokens=4_000)  # no active summary: its whole history is tail
    with frozen(T0):
        assert value(tenant, "tail_events") == 500
        assert value(tenant, "tail_tokens") == 9_000
        assert value(tenant, "tail_events", prefix="pay-") == 30
        assert value(tenant, "active_summary_age_events") == 30  # only workflows with an active summary
        assert value(tenant, "active_summary_age_seconds") == 7200
        assert value(tenant, "active_summary_age_seconds", prefix="ship") is None
        # Seed budget 18,000 tokens: 9,000 tail tokens is half of it.
        assert value(tenant, "tail_budget_fraction") == pytest.approx(0.5)


def test_tail_budget_fraction_uses_the_workflow_override_then_the_tenant_default(tenant):
    from triggers.models import ContextPolicy

    a = set_totals(make_workflow(tenant, "a"), tail_tokens=9_000)
    b = set_totals(make_workflow(tenant, "b"), tail_tokens=6_000)
    # Tenant default budget: 20,000 − 0 reserves − 2,000 margin = 18,000 − … keep it simple: 12,000.
    ContextPolicy.objects.create(
        tenant=tenant,
        context_window=20_000,
        reserve_system=2_000,
        reserve_retrieval=2_000,
        reserve_output=2_000,
    )  # 20,000 − 6,000 − 2,000 = 12,000
    ContextPolicy.objects.create(
        tenant=tenant,
        workflow=b,
        context_window=10_000,
        reserve_system=1_000,
        reserve_retrieval=1_000,
        reserve_output=1_000,
        safety_margin=1_000,
    )  # 6,000
    assert a.tail_tokens / 12_000 == 0.75
    assert compute(tenant, "tail_budget_fraction", since=None) == pytest.approx(1.0)  # b: 6,000 / 6,000
    assert compute(tenant, "tail_budget_fraction", since=None, workflow_prefix="a") == pytest.approx(0.75)


def test_trace_and_artifact_provenance_metrics(tenant):
    wf = make_workflow(tenant, "wf")
    with frozen(T0 - timedelta(minutes=5)):
        s = summary(wf, 1)
        good = trace(wf, summary_row=s)
        unvalidated = trace(wf, summary_row=s, flags=("unvalidated_summary",))
        tail_loss = trace(wf, summary_row=s, flags=("tail_loss", "unvalidated_summary"))
        no_manifest = trace(wf, summary_row=s, manifest="", context_id="")
        no_reference = trace(wf, summary_row=None, tail_to=0, head=40)  # read nothing it can name
        flagged = trace(wf, summary_row=s, flags=("missing_provenance",))
        artifact(wf, traces=(good,))
        artifact(wf, traces=(good, unvalidated, tail_loss))  # flags other than provenance keep the chain
        artifact(wf, traces=(no_manifest,))
        artifact(wf)  # produced by nothing we know
    del no_reference, flagged
    with frozen(T0):
        assert value(tenant, "unvalidated_consumptions") == 2
        assert value(tenant, "unexplained_source_gaps") == 1
        # traces: no_manifest, no_reference, flagged (3) + artifacts without a full chain (2)
        assert value(tenant, "missing_provenance") == 5
        assert value(tenant, "audit_trace_completeness") == pytest.approx(0.5)
        assert value(tenant, "unvalidated_consumptions", minutes=1) == 0


def test_compaction_metrics(tenant):
    wf = make_workflow(tenant, "wf")
    with frozen(T0 - timedelta(minutes=30)):
        accepted = summary(wf, 1, status="ACTIVE")
        rejected = summary(wf, 2, status="REJECTED")
    finished = T0 - timedelta(minutes=20)
    job(
        wf,
        tokens_in=12_000,
        tokens_out=1_500,
        cost="0.0125",
        latency_ms=300,
        finished_at=finished,
        summary_row=accepted,
    )
    job(
        wf,
        tokens_in=8_000,
        tokens_out=500,
        cost="0.0075",
        latency_ms=100,
        finished_at=finished,
        summary_row=rejected,
    )
    job(wf, status="FAILED", tokens_in=0, tokens_out=0, cost="0.0050", latency_ms=None, finished_at=finished)
    job(wf, status="RUNNING", finished_at=None)  # not finished: counts nowhere
    job(wf, tokens_in=99, finished_at=T0 - timedelta(hours=3), summary_row=accepted)  # outside the window
    with frozen(T0):
        assert value(tenant, "compactions") == 2
        assert value(tenant, "tokens_before") == 20_000
        assert value(tenant, "tokens_after") == 2_000
        assert value(tenant, "generation_cost") == pytest.approx(0.025)
        assert value(tenant, "compaction_latency_ms") == pytest.approx(200)
        assert value(tenant, "acceptance_rate") == pytest.approx(1 / 3)
        assert compute(tenant, "compactions", since=None) == 3


def test_trigger_investigation_and_quality_metrics(tenant):
    wf = make_workflow(tenant, "wf")
    other = make_workflow(tenant, "other")
    with frozen(T0 - timedelta(minutes=10)):
        decision(wf, "continue", projected=26_000)  # over the 25,000 hard limit: overflow
        decision(wf, "retrieve_or_block", projected=30_000)  # overflow and a fallback retrieval
        decision(wf, "retrieve_or_block", projected=19_000)  # fallback, within the hard limit
        decision(wf, "compact", projected=20_000)
        decision(wf, "continue", projected=26_000, hard_limit=0)  # unknown hard limit: not counted
        trace(wf, flags=("fallback_retrieval",))  # a consumer call that retrieved instead
    with frozen(T0 - timedelta(minutes=9)):
        first = artifact(wf, score=0.9)
        artifact(other, score=0.3)  # below the 0.5 floor
    with frozen(T0 - timedelta(minutes=8)):
        artifact(wf, score=0.8)  # below the workflow's previous 0.9
        artifact(other, score=0.7)  # better than before, above the floor
        investigation(first, 120.0)
        investigation(first, 80.0)
    with frozen(T0):
        assert value(tenant, "overflow_incidents") == 2
        assert value(tenant, "fallback_retrievals") == 3
        assert value(tenant, "quality_regressions") == 2
        assert value(tenant, "quality_regressions", prefix="other") == 1
        assert value(tenant, "time_to_reconstruct_ms") == pytest.approx(100.0)
        with override_settings(MEMORYHUB_QUALITY_FLOOR=0.95):
            assert value(tenant, "quality_regressions") == 4


def _populate(tenant, n: int) -> None:
    for i in range(n):
        wf = make_workflow(tenant, f"wf-{i}")
        s = summary(wf, 1, status="ACTIVE")
        lifecycle(s, "stale")
        validation(s, passed=bool(i % 2))
        t = trace(wf, summary_row=s, flags=("unvalidated_summary",))
        artifact(wf, traces=(t,), score=0.4)
        job(wf, finished_at=T0 - timedelta(minutes=1), summary_row=s)
        decision(wf, "retrieve_or_block", projected=30_000)
        set_totals(
            wf, active_summary=s, activated_at=T0 - timedelta(minutes=5), tail_events=i, tail_tokens=100 * i
        )


def test_snapshot_query_count_does_not_grow_with_history(tenant, other_tenant):
    with frozen(T0 - timedelta(minutes=2)):
        _populate(tenant, 2)
        _populate(other_tenant, 12)
    with frozen(T0):
        with CaptureQueriesContext(connection) as few:
            small = snapshot(tenant)
        with CaptureQueriesContext(connection) as many:
            large = snapshot(other_tenant)
    assert len(few.captured_queries) == len(many.captured_queries)
    assert set(small) == set(METRICS)
    assert small["stale_activation_attempts"] == 2 and large["stale_activation_attempts"] == 12
    assert large["tail_events"] == 11
    assert large["quality_regressions"] == 12  # 0.4 is under the floor


def test_snapshot_totals_count_counters_from_the_beginning(tenant):
    wf = make_workflow(tenant, "wf")
    with frozen(T0 - timedelta(days=3)):
        lifecycle(summary(wf, 1), "stale")
    with frozen(T0):
        assert snapshot(tenant)["stale_activation_attempts"] == 0
        assert snapshot(tenant, totals=True)["stale_activation_attempts"] == 1


def test_rollup_writes_completed_buckets_once_and_series_adds_the_live_bucket(tenant):
    wf = make_workflow(tenant, "wf")
    s = summary(wf, 1)
    with frozen(T0 - timedelta(minutes=12)):  # bucket 11:45
        lifecycle(s, "stale")
        lifecycle(s, "stale")
    with frozen(T0 - timedelta(minutes=7)):  # bucket 11:50
        lifecycle(s, "stale")
    with frozen(T0 + timedelta(minutes=1)):  # bucket 12:00, still open
        lifecycle(s, "stale")
    set_totals(wf, tail_tokens=700)
    with frozen(T0 + timedelta(minutes=2)):
        written = rollup(tenant)
        assert written > 0
        assert rollup(tenant) == 0  # idempotent
        samples = dict(
            MetricSample.objects.filter(tenant=tenant, metric="stale_activation_attempts").values_list(
                "bucket_start", "value"
            )
        )
        assert samples[T0 - timedelta(minutes=15)] == 2
        assert samples[T0 - timedelta(minutes=10)] == 1
        assert samples[T0 - timedelta(minutes=5)] == 0
        assert T0 not in samples  # the open bucket is never rolled up
        # Gauges are measured now and fill only the last completed bucket.
        gauge = MetricSample.objects.get(tenant=tenant, metric="tail_tokens")
        assert (gauge.bucket_start, gauge.value) == (T0 - timedelta(minutes=5), 700)

        points = dict(series(tenant, "stale_activation_attempts", T0 - timedelta(minutes=15)))
        assert points[T0 - timedelta(minutes=15)] == 2
        assert points[T0 - timedelta(minutes=10)] == 1
        assert points[T0] == 1  # live
        wide = series(tenant, "stale_activation_attempts", T0 - timedelta(hours=1), timedelta(minutes=30))
        # Backfilled zeros from 11:00, the three stale attempts in 11:30-12:00, the live bucket.
        assert wide == [(T0 - timedelta(minutes=60), 0.0), (T0 - timedelta(minutes=30), 3.0), (T0, 1.0)]
        # A bucket the rollup never wrote is a gap, not a zero.
        MetricSample.objects.filter(bucket_start=T0 - timedelta(minutes=10)).delete()
        assert T0 - timedelta(minutes=10) not in dict(
            series(tenant, "stale_activation_attempts", T0 - timedelta(minutes=15))
        )
        with pytest.raises(ValueError):
            series(tenant, "stale_activation_attempts", T0, timedelta(minutes=7))


def test_rollup_all_covers_every_tenant_and_backfills_missed_buckets(tenant, other_tenant):
    with frozen(T0):
        rollup_all()
        assert MetricSample.objects.filter(tenant=other_tenant, metric="compactions").count() == (
            metrics.ROLLUP_BACKFILL_BUCKETS
        )
    with frozen(T0 + timedelta(minutes=21)):  # three beats were missed
        rollup_all()
        assert MetricSample.objects.filter(tenant=tenant, metric="compactions").count() == (
            metrics.ROLLUP_BACKFILL_BUCKETS + 4
        )


# --- Prometheus ------------------------------------------------------------------------------


LINE = re.compile(r'^memoryhub_([a-z_]+)\{tenant="([a-z0-9-]+)"\} (-?[0-9.e+-]+|NaN)$')


def _parse(text: str) -> dict[tuple[str, str], float]:
    values = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        match = LINE.match(line)
        assert match, line
        values[(match.group(1), match.group(2))] = float(match.group(3))
    return values


@override_settings(MEMORYHUB_METRICS_TOKEN="prom-token-123")
def test_prometheus_exports_every_tenant_with_the_metrics_token(client, tenant, other_tenant):
    wf = make_workflow(tenant, "wf")
    lifecycle(summary(wf, 1), "stale")
    set_totals(wf, tail_tokens=1234)
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer prom-token-123")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    text = response.content.decode()
    assert "# TYPE memoryhub_stale_activation_attempts counter" in text
    assert "# TYPE memoryhub_tail_tokens gauge" in text
    for name in METRICS:
        assert f"# HELP memoryhub_{name} " in text
    values = _parse(text)
    assert values[("stale_activation_attempts", "acme")] == 1
    assert values[("stale_activation_attempts", "globex")] == 0
    assert values[("tail_tokens", "acme")] == 1234
    assert ("acceptance_rate", "acme") not in values  # no data is left out, not reported as 0


@override_settings(MEMORYHUB_METRICS_TOKEN="prom-token-123")
def test_prometheus_with_an_api_key_exports_only_its_tenant(client, alice, mallory):
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {alice.key.secret}")
    assert response.status_code == 200
    tenants = {tenant for _, tenant in _parse(response.content.decode())}
    assert tenants == {"acme"}


@override_settings(MEMORYHUB_METRICS_TOKEN="")
@pytest.mark.parametrize("header", [None, "Bearer ", "Basic abc", "Bearer wrong", "Bearer mh_deadbeef_nope"])
def test_prometheus_refuses_missing_or_wrong_tokens(client, tenant, header):
    kwargs = {"HTTP_AUTHORIZATION": header} if header is not None else {}
    response = client.get("/metrics", **kwargs)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"memoryhub_" not in response.content


def test_prometheus_label_escaping():
    from memoryhub.observe.alerting.prometheus import escape_label, format_value

    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert format_value(3.0) == "3"
    assert format_value(0.25) == "0.25"
