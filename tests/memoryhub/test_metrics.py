"""Metrics: each registered metric computed from the rows it reads, windows, workflow prefixes,
snapshot query counts, rollups + live series, and the Prometheus endpoint."""

from __future__ import annotations

import re
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from audit.investigate import investigate
from audit.models import Investigation
from memoryhub.core.errors import Conflict
from memoryhub.memory import lifecycle
from memoryhub.models import MetricSample
from memoryhub.observe import metrics
from memoryhub.observe.metrics import METRICS, compute, rollup, rollup_all, series, snapshot
from tests import factories as f
from tests.factories import REVIEWER, add_tokens, build_workflow, make_workflow
from tests.helpers import T0, frozen
from triggers.services import decide

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


def filler(start: int, end: int):
    """Content for events of ``add_tokens`` (they state nothing a summary must keep)."""
    return f.summary_content(f"{f.events_named(start, end)} are filler.")


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
    wf = build_workflow(tenant, "pay-1", n=20)
    foreign = f.activated(build_workflow(other_tenant, "pay-1", n=10))
    with frozen(T0 - timedelta(minutes=90)):  # outside a 60-minute window
        old = f.activated(wf, 1, 10)  # S1: a passed validation
        f.stale_activation(old)
    with frozen(T0 - timedelta(minutes=10)):
        s2 = f.rejected(wf, 1, 20)  # one failed validation ...
        s3, _s4, _s5 = (f.validated(wf, 1, 20) for _ in range(3))  # ... and three passed
        f.stale_activation(s2)
        f.refused_activation(s2)  # REJECTED cannot be activated
        f.activate(s3)  # applied is not stale
        lifecycle.quarantine(s2, REVIEWER, "drops every scope fact")
        with pytest.raises(Conflict):
            lifecycle.quarantine(s2, REVIEWER, "again")  # refused, but not an activation attempt
        f.stale_activation(foreign)  # another tenant
    with frozen(T0):
        assert value(tenant, "stale_activation_attempts") == 2
        assert value(tenant, "stale_activation_attempts", minutes=120) == 3
        assert value(tenant, "validation_failures") == 1
        assert value(tenant, "validation_failure_rate") == pytest.approx(0.25)
        assert value(tenant, "summary_versions") == 4
        assert compute(tenant, "summary_versions", since=None) == 5
        assert value(other_tenant, "stale_activation_attempts") == 1
        # A ratio over no rows is "no data", not zero.
        assert value(tenant, "validation_failure_rate", minutes=1) is None


def test_gauges_read_running_totals_and_respect_the_workflow_prefix(tenant):
    a = make_workflow(tenant, "pay-a")
    b = make_workflow(tenant, "ship-b")
    add_tokens(a, 100, events=10)
    with frozen(T0 - timedelta(hours=2)):
        f.activated(a, 1, 10, content=filler(1, 10))
    add_tokens(a, 9_000, events=30)  # the tail after the active summary
    add_tokens(b, 4_000, events=500)  # no active summary: its whole history is tail
    with frozen(T0):
        assert value(tenant, "tail_events") == 500
        assert value(tenant, "tail_tokens") == 9_000
        assert value(tenant, "tail_events", prefix="pay-") == 30
        assert value(tenant, "active_summary_age_events") == 30  # only workflows with an active summary
        assert value(tenant, "active_summary_age_seconds") == 7200
        assert value(tenant, "active_summary_age_seconds", prefix="ship") is None
        # Seed budget 18,000 tokens: 9,000 tail tokens is half of it.
        assert value(tenant, "tail_budget_fraction") == pytest.approx(0.5)
        # The overview reads all four at once (one query): the same values as one by one.
        together = metrics.workflow_gauges(tenant, metrics.WORKFLOW_GAUGES, T0)
        assert together == {name: value(tenant, name) for name in metrics.WORKFLOW_GAUGES}
        assert together["active_summary_age_seconds"] == 7200


def test_tail_budget_fraction_uses_the_workflow_override_then_the_tenant_default(tenant):
    a, b = make_workflow(tenant, "a"), make_workflow(tenant, "b")
    add_tokens(a, 9_000)
    add_tokens(b, 6_000)
    # Tenant default: 20,000 window − 6,000 reserves − 2,000 safety margin = 12,000.
    f.policy(
        tenant, context_window=20_000, reserve_system=2_000, reserve_retrieval=2_000, reserve_output=2_000
    )
    f.policy(  # b: 10,000 − 3,000 − 1,000 = 6,000
        tenant,
        b,
        context_window=10_000,
        reserve_system=1_000,
        reserve_retrieval=1_000,
        reserve_output=1_000,
        safety_margin=1_000,
        target_tokens=2_000,
    )
    assert compute(tenant, "tail_budget_fraction", since=None) == pytest.approx(1.0)  # b: 6,000 / 6,000
    assert compute(tenant, "tail_budget_fraction", since=None, workflow_prefix="a") == pytest.approx(0.75)


@pytest.mark.impossible_state(
    "record_artifact requires a producer; an artifact imported or recorded before that rule has none"
)
def test_trace_and_artifact_provenance_metrics(tenant):
    wf = build_workflow(tenant, "wf", n=40)
    s = f.validated(wf, 1, 30)
    unchecked = f.candidate(wf, 1, 30)
    with frozen(T0 - timedelta(minutes=5)):
        good = f.trace(wf, s, 40)
        unvalidated = f.trace(wf, unchecked, 40)  # flagged unvalidated_summary
        tail_loss = f.trace(wf, unchecked, 35)  # flagged tail_loss and unvalidated_summary
        no_manifest = f.trace(wf, s, 40, manifest_hash="", context_id="")
        f.trace(wf, None, 0)  # read nothing it can name (and lost the whole tail)
        f.trace(wf, s, 40, manifest_hash="")  # flagged missing_provenance
        f.artifact(wf, "A1", [good])
        f.artifact(wf, "A2", [good, unvalidated, tail_loss])  # flags other than provenance keep the chain
        f.artifact(wf, "A3", [no_manifest])
        f.orphan_artifact_bypassing_services(wf, "A4")  # produced by nothing we know
    with frozen(T0):
        assert value(tenant, "unvalidated_consumptions") == 2
        assert value(tenant, "unexplained_source_gaps") == 2  # tail_loss and the read of nothing
        # traces: no_manifest, the read of nothing, the flagged one (3) + artifacts without a full chain (2)
        assert value(tenant, "missing_provenance") == 5
        assert value(tenant, "audit_trace_completeness") == pytest.approx(0.5)
        assert value(tenant, "unvalidated_consumptions", minutes=1) == 0


def test_compaction_metrics(tenant):
    wf = build_workflow(tenant, "wf", n=20)
    with frozen(T0 - timedelta(minutes=30)):
        accepted = f.activated(wf, 1, 10)
        rejected = f.rejected(wf, 1, 20)
    finished = T0 - timedelta(minutes=20)
    job = partial(f.imported_job, wf, compactor="test")
    job(
        1,
        tokens_in=12_000,
        tokens_out=1_500,
        cost="0.0125",
        latency_ms=300,
        finished_at=finished,
        summary=accepted,
    )
    job(
        2,
        tokens_in=8_000,
        tokens_out=500,
        cost="0.0075",
        latency_ms=100,
        finished_at=finished,
        summary=rejected,
    )
    job(3, status="FAILED", cost="0.0050", finished_at=finished)
    job(4, status="RUNNING")  # not finished: counts nowhere
    job(5, tokens_in=99, finished_at=T0 - timedelta(hours=3), summary=accepted)  # outside the window
    with frozen(T0):
        assert value(tenant, "compactions") == 2
        assert value(tenant, "tokens_before") == 20_000
        assert value(tenant, "tokens_after") == 2_000
        assert value(tenant, "generation_cost") == pytest.approx(0.025)
        assert value(tenant, "compaction_latency_ms") == pytest.approx(200)
        assert value(tenant, "acceptance_rate") == pytest.approx(1 / 3)
        assert compute(tenant, "compactions", since=None) == 3


def test_overflow_and_fallback_metrics_read_the_decisions_and_traces(tenant):
    wf = make_workflow(tenant, "wf")
    with frozen(T0 - timedelta(minutes=10)):
        # An empty history over the limits cannot be compacted: the guard retrieves instead.
        over = decide(wf, {"expected_next_step_tokens": 30_000}, f.TEST_ACTOR)  # overflow and a fallback
        within = decide(wf, {"expected_next_step_tokens": 19_000}, f.TEST_ACTOR)  # fallback, within the limit
        calm = decide(wf, {"expected_next_step_tokens": 1_000}, f.TEST_ACTOR)
        f.trace(wf, None, 0, fallback_retrieval=True, fallback_reason="searched the spec")
    assert (over.action, over.projected_tokens, over.hard_limit) == ("retrieve_or_block", 30_000, 25_000)
    assert (within.action, calm.action) == ("retrieve_or_block", "continue")
    with frozen(T0):
        assert value(tenant, "overflow_incidents") == 1
        assert value(tenant, "fallback_retrievals") == 3


@pytest.mark.impossible_state(
    "decisions logged before the hard limit was recorded carry hard_limit=0, and a continue over the "
    "limit comes only from an engine without the emergency guard; the metric must read both rightly"
)
def test_overflow_ignores_an_unknown_hard_limit_and_counts_a_continue_over_it(tenant):
    wf = make_workflow(tenant, "wf")
    with frozen(T0 - timedelta(minutes=10)):
        f.decision_row_bypassing_services(wf, "continue", projected=26_000)  # over 25,000: overflow
        f.decision_row_bypassing_services(
            wf, "continue", projected=26_000, hard_limit=0
        )  # unknown: not counted
    with frozen(T0):
        assert value(tenant, "overflow_incidents") == 1
        assert value(tenant, "fallback_retrievals") == 0


def test_investigation_and_quality_metrics(tenant):
    wf, other = build_workflow(tenant, "wf", n=5), build_workflow(tenant, "other", n=5)
    call, other_call = f.trace(wf, None, 5, call="call-wf"), f.trace(other, None, 5, call="call-other")
    with frozen(T0 - timedelta(minutes=9)):
        first = f.artifact(wf, "W1", [call], score=0.9)
        f.artifact(other, "O1", [other_call], score=0.3)  # below the 0.5 floor
    with frozen(T0 - timedelta(minutes=8)):
        f.artifact(wf, "W2", [call], score=0.8)  # below the workflow's previous 0.9
        f.artifact(other, "O2", [other_call], score=0.7)  # better than before, above the floor
        investigate(first, "POST /payments", f.ADMIN)
        investigate(first, "message number 3", f.ADMIN)
    elapsed = list(Investigation.objects.values_list("elapsed_ms", flat=True))
    with frozen(T0):
        assert value(tenant, "quality_regressions") == 2
        assert value(tenant, "quality_regressions", prefix="other") == 1
        assert value(tenant, "time_to_reconstruct_ms") == pytest.approx(sum(elapsed) / 2)
        assert value(tenant, "time_to_reconstruct_ms", minutes=5) is None
        with override_settings(MEMORYHUB_QUALITY_FLOOR=0.95):
            assert value(tenant, "quality_regressions") == 4


def _populate(tenant, n: int) -> None:
    for i in range(n):
        wf = make_workflow(tenant, f"wf-{i}")
        add_tokens(wf, 10)
        s = f.activated(wf, 1, 1, content=filler(1, 1))
        f.stale_activation(s)
        read = f.trace(wf, f.candidate(wf, 1, 1), 1)  # flagged unvalidated_summary
        f.artifact(wf, f"T-{i}", [read], score=0.4)
        f.imported_job(wf, 1, finished_at=T0 - timedelta(minutes=1), summary=s)
        decide(wf, {"expected_next_step_tokens": 30_000}, f.TEST_ACTOR)  # retrieve_or_block
        if i:
            add_tokens(wf, 100 * i, events=i)


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
    summary = f.activated(build_workflow(tenant, "wf", n=10))
    with frozen(T0 - timedelta(days=3)):
        f.stale_activation(summary)
    with frozen(T0):
        assert snapshot(tenant)["stale_activation_attempts"] == 0
        assert snapshot(tenant, totals=True)["stale_activation_attempts"] == 1


def test_rollup_writes_completed_buckets_once_and_series_adds_the_live_bucket(tenant):
    wf = make_workflow(tenant, "wf")
    add_tokens(wf, 10)
    s = f.activated(wf, 1, 1, content=filler(1, 1))
    add_tokens(wf, 700)  # the tail
    with frozen(T0 - timedelta(minutes=12)):  # bucket 11:45
        f.stale_activation(s)
        f.stale_activation(s)
    with frozen(T0 - timedelta(minutes=7)):  # bucket 11:50
        f.stale_activation(s)
    with frozen(T0 + timedelta(minutes=1)):  # bucket 12:00, still open
        f.stale_activation(s)
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
    add_tokens(wf, 10)
    f.stale_activation(f.activated(wf, 1, 1, content=filler(1, 1)))
    add_tokens(wf, 1234)  # the tail
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


def test_a_waiver_is_not_a_validation_run(tenant):
    """An observed compaction that failed validation is waived (the framework already reads it):
    the failure counts, the waiver record does not dilute the rate (it was 1 of 2 before)."""
    wf = build_workflow(tenant, "pay-w", n=20)
    with frozen(T0 - timedelta(minutes=10)):
        rejected = f.rejected(wf, 1, 20)
        record = rejected.validations.get()
        failed = [c["name"] for c in record.checks if not c["passed"]]
        lifecycle.waive(rejected, failed, REVIEWER, "the framework already reads this summary")
    assert rejected.validations.count() == 2  # the run and the waiver
    with frozen(T0):
        assert value(tenant, "validation_failures") == 1
        assert value(tenant, "validation_failure_rate") == 1.0


def test_a_framework_summary_that_failed_validation_is_not_accepted(tenant):
    """The observer waives a framework summary's failed checks so the pointer shows what the
    framework reads; that is not acceptance: the overview said "acceptance 100%" beside the same
    window's validation failures."""
    with frozen(T0 - timedelta(minutes=10)):
        kept, lost = f.observed_kept_and_lost(tenant, "sess-a")
    assert kept.validation == "passed" and lost.validation == "failed"
    assert lost.summary.status == "ACTIVE"  # the framework reads it: active by the observer's waiver
    with frozen(T0):
        assert value(tenant, "compactions") == 2
        assert value(tenant, "acceptance_rate") == 0.5
        assert value(tenant, "validation_failures") == 1
        assert value(tenant, "validation_failure_rate") == 0.5  # the waiver is not a run
