"""The overview reads whole hours and days from MetricHour, the rollup's own sums of its 5-minute
samples. Every hour row must be exactly the sum of the samples in it, whatever order and
concurrency the rollups ran in, and reading hours must give what adding up the samples gives."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.db.models import Max
from django.utils import timezone

from memoryhub.models import MetricHour, MetricSample
from memoryhub.observe import metrics, reports
from tests.helpers import race
from tests.memoryhub.test_pages import build_story

backdated = pytest.mark.impossible_state("a tenant's creation date moved back behind the tenancy service")


def hour_of(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def sums_of_samples(tenant) -> dict[tuple[str, datetime], tuple[float, int]]:
    """What every hour row must hold, added up here in Python from the tenant-wide samples."""
    found: dict[tuple[str, datetime], list[float]] = defaultdict(list)
    for name, start, value in MetricSample.objects.filter(tenant=tenant, workflow__isnull=True).values_list(
        "metric", "bucket_start", "value"
    ):
        found[(name, hour_of(start.astimezone(UTC)))].append(value)
    return {key: (pytest.approx(sum(values)), len(values)) for key, values in found.items()}


def hour_rows(tenant) -> dict[tuple[str, datetime], tuple[float, int]]:
    return {
        (name, start.astimezone(UTC)): (total, samples)
        for name, start, total, samples in MetricHour.objects.filter(tenant=tenant).values_list(
            "metric", "hour_start", "total", "samples"
        )
    }


def story_tenant(tenant, hours_back: int = 5):
    tenant.created_at = timezone.now() - timedelta(days=3)
    tenant.save(update_fields=["created_at"])
    with time_machine.travel(timezone.now() - timedelta(hours=hours_back), tick=False):
        build_story(tenant)
    return tenant


@pytest.mark.django_db
@backdated
def test_every_hour_row_is_the_sum_of_its_samples_as_rollups_come_in(tenant):
    """Beat's runs (each the last bucket and the few it missed), then a backfill over the top:
    after each, every hour with samples has its row, and every row is the sum of its samples."""
    story_tenant(tenant)
    now = timezone.now()
    for step in range(4):  # four beats 5 minutes apart, an hour and a half ago
        metrics.rollup(tenant, now=now - timedelta(minutes=90 - 5 * step), gauges=False)
        assert hour_rows(tenant) == sums_of_samples(tenant)
    metrics.rollup(tenant, now=now, backfill=timedelta(hours=7), gauges=False)
    expected = sums_of_samples(tenant)
    assert hour_rows(tenant) == expected
    assert len({hour for _name, hour in expected}) >= 7  # the backfill's hours, not just one
    assert any(n == metrics.unit_samples("hour") for _total, n in expected.values())  # whole hours


@pytest.mark.django_db
@backdated
@pytest.mark.parametrize("unit", ["hour", "day"])
def test_whole_hours_and_days_read_from_the_hours_equal_the_samples_added_up(tenant, unit):
    story_tenant(tenant, hours_back=30)
    now = timezone.now()
    metrics.rollup(tenant, now=now, backfill=timedelta(hours=40), gauges=False)
    names = list(metrics.METRICS)
    floor = hour_of(now.astimezone(UTC))
    since = floor - timedelta(days=2)
    if unit == "day":
        since, floor = since.replace(hour=0), floor.replace(hour=0)
    got = metrics.rolled_up(tenant, names, since, floor, unit)
    # The same from the samples: one second off the hour sends rolled_up to its sample path.
    from_samples = metrics.rolled_up(tenant, names, since + timedelta(seconds=1), floor, unit)
    assert MetricHour.objects.filter(tenant=tenant).exists()
    assert sum(len(v) for v in got.values()) > 10
    for name in names:
        assert set(got[name]) == set(from_samples[name]), name
        for start, (total, samples, mean) in got[name].items():
            assert (total, samples, mean) == pytest.approx(from_samples[name][start]), (name, start)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@backdated
def test_concurrent_rollups_of_a_tenant_leave_every_hour_whole(tenant):
    """Six rollups at once, each a different 'now' (so each adds buckets the others do not):
    the hours are added up after every concurrent run's samples landed, never from part of them."""
    story_tenant(tenant)
    base = timezone.now()
    nows = itertools.count()

    def roll() -> int:
        return metrics.rollup(
            tenant, now=base - timedelta(minutes=5 * next(nows)), backfill=timedelta(hours=2)
        )

    written = race(6, roll)
    assert sum(written) > MetricSample.objects.filter(tenant=tenant).count()  # they overlapped
    assert hour_rows(tenant) == sums_of_samples(tenant)


@pytest.mark.django_db
@backdated
def test_the_overview_reads_the_hours_not_the_samples(tenant):
    """With the hours in place the 7-day overview's whole hours come from them: a sample that
    vanished behind the rollup's back (never happens: samples are only added) changes nothing."""
    story_tenant(tenant, hours_back=10)
    now = timezone.now()
    metrics.rollup(tenant, now=now, backfill=timedelta(hours=12), gauges=False)
    window = reports.WINDOWS["7d"]
    before = reports.overview_series(tenant, window, now)
    latest = MetricSample.objects.filter(tenant=tenant).aggregate(m=Max("bucket_start"))["m"]
    MetricSample.objects.filter(tenant=tenant, bucket_start__lt=hour_of(latest) - timedelta(hours=1)).delete()
    after = reports.overview_series(tenant, window, now)
    assert after.counts == before.counts and sum(after.counts["compaction"]) >= 1
