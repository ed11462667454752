"""The overview reads MetricSample rollups where beat wrote them and counts rows live elsewhere;
either way it must show exactly what counting every row would."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.utils import timezone

from memoryhub.models import CompactionJob, MetricHour, MetricSample, Workflow, WorkflowSource
from memoryhub.observe import metrics, reports
from tests.memoryhub.test_pages import build_story

pytestmark = pytest.mark.django_db
# Tenancy stamps a tenant's creation now; these windows must reach back before its first rows.
backdated = pytest.mark.impossible_state("a tenant's creation date moved back behind the tenancy service")


SOURCES = (WorkflowSource.LANGGRAPH, WorkflowSource.LANGCHAIN, WorkflowSource.CLAUDE_CODE)


def live_only(tenant, window, now):
    """The same series with every rollup removed (all counted from the rows), then restored."""
    saved = list(MetricSample.objects.filter(tenant=tenant)), list(MetricHour.objects.filter(tenant=tenant))
    MetricSample.objects.filter(tenant=tenant).delete()
    MetricHour.objects.filter(tenant=tenant).delete()
    try:
        return reports.overview_series(tenant, window, now)
    finally:
        MetricSample.objects.bulk_create(saved[0])
        MetricHour.objects.bulk_create(saved[1])


def beat_was_down(tenant, since, until):
    """The rollups of [since, until) were never written: neither the samples nor their part of
    the hours' sums."""
    MetricSample.objects.filter(tenant=tenant, bucket_start__gte=since, bucket_start__lt=until).delete()
    first_hour = since.replace(minute=0, second=0, microsecond=0)
    MetricHour.objects.filter(tenant=tenant, hour_start__gte=first_hour, hour_start__lt=until).delete()
    metrics.add_up_hours(
        tenant,
        [
            first_hour + timedelta(minutes=5 * i)
            for i in range(int((until - first_hour).total_seconds() // 300) + 1)
        ],
    )


def rolled_up_since(tenant, now, backfill):
    """Beat rolled up the tenant's last ``backfill`` (the tenant dates back 40 days)."""
    tenant.created_at = now - timedelta(days=40)
    tenant.save(update_fields=["created_at"])
    metrics.rollup(tenant, now=now, backfill=backfill, gauges=False)


@pytest.fixture
def busy_tenant(tenant):
    """Three stories an hour and a half apart (5 to 2 hours ago), in different buckets."""
    start = timezone.now() - timedelta(hours=5)
    for n, source in enumerate(SOURCES):
        with time_machine.travel(start + timedelta(minutes=90 * n), tick=False):
            build_story(tenant, external_id=f"wf-{n}")
        Workflow.objects.filter(tenant=tenant, external_id=f"wf-{n}").update(source=source)
    return tenant


@pytest.mark.parametrize("window_key", ["1h", "24h", "7d", "30d"])
@backdated
def test_rollups_and_live_counts_agree_with_counting_every_row(busy_tenant, window_key):
    tenant = busy_tenant
    tenant.created_at = timezone.now() - timedelta(days=40)
    tenant.save(update_fields=["created_at"])
    window = reports.WINDOWS[window_key]
    now = timezone.now()
    # Beat rolled up the day of the stories, then was down for a stretch in the middle.
    written = metrics.rollup(tenant, now=now, backfill=timedelta(hours=6), gauges=False)
    assert written > 0
    outage = now - timedelta(hours=4)
    beat_was_down(tenant, outage, outage + timedelta(minutes=45))
    expected = live_only(tenant, window, now)
    assert MetricSample.objects.filter(tenant=tenant).exists()  # the hybrid really reads rollups
    got = reports.overview_series(tenant, window, now)
    assert got.counts == expected.counts
    assert got.acceptance_total == expected.acceptance_total
    assert got.per_source == expected.per_source
    if window_key != "1h":  # the stories lie 2-5 hours back
        assert sum(got.counts["compaction"]) == 3 and sum(got.counts["stale"]) == 3
        assert {s: p["compactions"] for s, p in got.per_source.items()} == dict.fromkeys(SOURCES, 1)


@backdated
def test_a_fully_rolled_up_window_reads_no_rows_but_the_current_bucket(busy_tenant):
    tenant, now = busy_tenant, timezone.now()
    rolled_up_since(tenant, now, timedelta(hours=2))
    window = reports.WINDOWS["1h"]
    slots = reports.Slots(window, window.starts(now)[0], now)
    rolled = metrics.rolled_up(tenant, ["compactions"], slots.since, slots.unit_floor, window.trunc)
    recent = metrics.rolled_up(tenant, ["compactions"], slots.unit_floor, slots.bucket_floor, "minute")
    _covered, ranges = slots.split(rolled["compactions"] | recent["compactions"])
    assert ranges == [(slots.bucket_floor, None)]  # only the current 5 minutes are live
    assert reports.overview_series(tenant, window, now).counts == live_only(tenant, window, now).counts


@backdated
def test_the_per_source_card_reads_the_rollups_where_they_cover_and_counts_the_rest(busy_tenant):
    tenant, now = busy_tenant, timezone.now()
    rolled_up_since(tenant, now, timedelta(hours=6))
    window = reports.WINDOWS["24h"]
    before = reports.overview_series(tenant, window, now).per_source
    assert before == live_only(tenant, window, now).per_source
    # A row changed behind the rollups' back shows only where the card counts rows: a covered
    # bucket keeps what was rolled up, so the card did not count the week's jobs again.
    CompactionJob.objects.filter(workflow__tenant=tenant, workflow__source=WorkflowSource.LANGCHAIN).update(
        idempotency_key="observed/changed-after-its-rollup"
    )
    assert reports.overview_series(tenant, window, now).per_source == before
    assert live_only(tenant, window, now).per_source[WorkflowSource.LANGCHAIN]["observed"] == 1


@backdated
def test_rollup_metrics_command_backfills_once_and_refuses_unknown_tenants(tenant):
    tenant.created_at = timezone.now() - timedelta(days=2)
    tenant.save(update_fields=["created_at"])
    out = StringIO()
    call_command("rollup_metrics", hours=2, tenant=[tenant.slug], stdout=out)
    first = MetricSample.objects.filter(tenant=tenant).count()
    assert first >= 2 * 12 * 10 and "day 1/1" in out.getvalue()  # ≥ 10 window metrics × 24 buckets
    call_command("rollup_metrics", hours=2, tenant=[tenant.slug], stdout=StringIO())
    assert MetricSample.objects.filter(tenant=tenant).count() == first  # idempotent
    with pytest.raises(CommandError, match="unknown tenant"):
        call_command("rollup_metrics", hours=2, tenant=["nope"], stdout=StringIO())


@backdated
def test_every_rolled_up_sample_is_its_metric_over_its_bucket(busy_tenant):
    """A backfill counts rows and shares of rows for all its buckets in one query per metric: each
    sample must still be exactly what computing the metric over its bucket gives, for every
    metric (the next one too) and every bucket, empty ones included."""
    tenant, now = busy_tenant, timezone.now()
    rolled_up_since(tenant, now, timedelta(hours=6))
    stored = {
        (s.metric, s.bucket_start): s.value for s in MetricSample.objects.filter(tenant=tenant, workflow=None)
    }
    last = metrics.bucket_floor(now, metrics.ROLLUP_BUCKET) - metrics.ROLLUP_BUCKET
    buckets = [last - metrics.ROLLUP_BUCKET * i for i in range(6 * 12)]
    busy = 0
    for name, definition in metrics.METRICS.items():
        if definition.kind == metrics.GAUGE:
            continue
        for start in buckets:
            value = metrics.compute(tenant, name, since=start, until=start + metrics.ROLLUP_BUCKET)
            assert stored.get((name, start)) == value, (name, start)
            busy += bool(value)
    for start in buckets:
        jobs = metrics.COMPACTIONS.between(tenant, start, start + metrics.ROLLUP_BUCKET)
        expected = metrics.compactions_per_source(jobs)
        assert stored[(metrics.SOURCE_MARK, start)] == sum(p["compactions"] for p in expected.values())
        for source in WorkflowSource.values:
            for part in metrics.SOURCE_PARTS:
                n = expected.get(source, {}).get(part, 0)
                assert stored.get((metrics.source_metric(source, part), start)) == (n or None)
    assert busy > 20  # the stories' buckets are among them, not only empty ones
