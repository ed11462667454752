"""memoryhub.observe reports on their own, without a page: windows, rollup-gap counting, acceptance
rates, and every overview signal against the registry metric it is derived from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import time_machine
from django.utils import timezone

from memoryhub.memory.events import EVENTS_PER_PAGE
from memoryhub.models import Workflow
from memoryhub.observe import browse, detail, metrics, reports
from memoryhub.observe.reports import MAX_GAP_RANGES, WINDOWS, Slots
from tests.factories import failed_job
from tests.memoryhub.test_pages import build_story

NOW = datetime(2025, 3, 14, 12, 7, 30, tzinfo=UTC)
HOUR = timedelta(hours=1)
FIVE = metrics.ROLLUP_BUCKET


# --- windows -----------------------------------------------------------------------------------


def test_window_for_falls_back_to_the_default():
    assert reports.window_for("24h") is WINDOWS["24h"]
    for raw in (None, "", "2h", "7D"):
        assert reports.window_for(raw) is WINDOWS[reports.DEFAULT_WINDOW]


@pytest.mark.parametrize("key", list(WINDOWS))
def test_window_starts_are_aligned_and_cover_the_span(key):
    window = WINDOWS[key]
    for now in (NOW, datetime(2025, 3, 14, 0, 0, tzinfo=UTC)):  # also exactly on a boundary
        starts = window.starts(now)
        assert len(starts) == -(-window.span // window.bucket)
        assert starts[-1] <= now < starts[-1] + window.bucket
        assert starts[0] <= now - window.span + window.bucket
        assert [b - a for a, b in zip(starts, starts[1:], strict=False)] == [window.bucket] * (
            len(starts) - 1
        )
        assert all(int(s.timestamp()) % int(window.bucket.total_seconds()) == 0 for s in starts)


# --- rollup gaps -------------------------------------------------------------------------------


def slots_for(key: str) -> Slots:
    window = WINDOWS[key]
    return Slots(window, window.starts(NOW)[0], NOW)


def rolled_fully(slots: Slots, total: float = 1.0) -> dict[datetime, tuple[float, int, float]]:
    """Every slot rolled up completely: whole units with all their 5-minute samples."""
    need = metrics.unit_samples(slots.window.trunc)
    return {s: (total, need if s < slots.unit_floor else 1, total) for s in slots.slots}


def test_slots_are_whole_units_then_the_current_units_5_minute_buckets():
    slots = slots_for("24h")
    assert slots.unit == HOUR and slots.unit_floor == NOW.replace(minute=0, second=0)
    assert slots.bucket_floor == NOW.replace(minute=5, second=0)
    assert slots.slots[0] == slots.since and slots.slots[-1] == slots.unit_floor  # 12:00, the only bucket
    assert len(slots.slots) == 24  # 23 whole hours, then 12:00–12:05
    # The 1h window truncates to minutes: its units are the 5-minute buckets themselves.
    one = slots_for("1h")
    assert one.unit == FIVE and one.unit_floor == one.bucket_floor and len(one.slots) == 11


def test_without_rollups_the_whole_window_is_counted_live():
    slots = slots_for("24h")
    assert slots.split({}) == ({}, [(slots.since, None)])


def test_a_fully_rolled_up_window_leaves_only_the_current_bucket_live():
    slots = slots_for("24h")
    rolled = rolled_fully(slots, 2.0)
    covered, ranges = slots.split(rolled)
    assert ranges == [(slots.bucket_floor, None)]
    assert covered == {s: 2.0 for s in slots.slots}


def test_a_unit_missing_a_sample_is_a_gap_and_gaps_merge():
    slots = slots_for("24h")
    rolled = rolled_fully(slots)
    first, third, fourth = slots.slots[0], slots.slots[2], slots.slots[3]
    del rolled[first]  # a gap at the start
    rolled[third] = (1.0, 11, 1.0)  # beat missed one 5-minute bucket of this hour
    del rolled[fourth]  # next to it: one stretch
    covered, ranges = slots.split(rolled)
    assert ranges == [(first, first + HOUR), (third, fourth + HOUR), (slots.bucket_floor, None)]
    assert first not in covered and third not in covered and len(covered) == 24 - 3


def test_a_gap_in_the_current_unit_joins_the_live_current_bucket():
    slots = slots_for("24h")
    rolled = rolled_fully(slots)
    del rolled[slots.unit_floor]  # 12:00–12:05 not rolled up yet
    _covered, ranges = slots.split(rolled)
    assert ranges == [(slots.unit_floor, None)]


def test_past_max_gap_ranges_one_live_count_covers_the_window():
    slots = slots_for("7d")  # 168 hourly slots
    rolled = rolled_fully(slots)
    for start in slots.slots[: 2 * MAX_GAP_RANGES : 2]:
        del rolled[start]  # MAX_GAP_RANGES separate gaps + the current bucket
    assert slots.split(rolled) == ({}, [(slots.since, None)])
    rolled = rolled_fully(slots)
    for start in slots.slots[: 2 * (MAX_GAP_RANGES - 1) : 2]:
        del rolled[start]
    covered, ranges = slots.split(rolled)
    assert len(ranges) == MAX_GAP_RANGES and covered


def test_bins_fold_rows_into_buckets_and_drop_the_rest():
    window = WINDOWS["24h"]
    starts = window.starts(NOW)
    rows = [
        (starts[0], 1, 1),
        (starts[0] + timedelta(minutes=59), 2, 0),
        (starts[-1], 5, 4),
        (starts[0] - timedelta(seconds=1), 100, 100),  # before the window
        (starts[-1] + window.bucket, 100, 100),  # after it
        (None, 100, 100),  # no time (an empty Trunc group)
    ]
    folded = reports.bins(window, starts, rows)
    assert folded[0] == [3, 1] and folded[-1] == [5, 4] and sum(map(sum, folded)) == 13


# --- acceptance rate ---------------------------------------------------------------------------


def test_rates_with_zero_denominators_are_none_not_zero():
    assert reports.rates([]) == ([], None)
    assert reports.rates([[0, 0], [0, 0]]) == ([None, None], None)
    per_bucket, total = reports.rates([[0, 0], [4, 3], [1, 0], [0, 0]])
    assert per_bucket == [None, 0.75, 0.0, None] and total == 0.6
    # Rolled-up buckets are weighted (a mean rate times its compactions): still a share.
    assert reports.rates([[2.0, 1.0]]) == ([0.5], 0.5)


@pytest.mark.django_db
def test_acceptance_over_no_finished_compactions_is_none(tenant):
    series = reports.overview_series(tenant, WINDOWS["24h"], timezone.now())
    assert series.acceptance_total is None and set(series.acceptance) == {None}
    assert all(sum(counts) == 0 for counts in series.counts.values())


@pytest.mark.django_db
def test_acceptance_counts_failed_jobs_and_matches_the_registry(tenant):
    story = build_story(tenant)
    failed_job(story.workflow)
    window, now = WINDOWS["24h"], timezone.now()
    series = reports.overview_series(tenant, window, now)
    assert series.acceptance_total == 0.5  # the accepted S2 job and the failed one
    since = window.starts(now)[0]
    assert series.acceptance_total == metrics.compute(tenant, "acceptance_rate", since=since)
    assert [r for r in series.acceptance if r is not None] == [0.5]


# --- signals are the registry's metrics --------------------------------------------------------


def test_every_signal_is_a_registry_row_counter():
    for signal in reports.SIGNALS.values():
        assert signal.rows is metrics.counted_rows(signal.metric)
        assert metrics.METRICS[signal.metric].kind == metrics.COUNTER
    assert metrics.share(reports.ACCEPTANCE_METRIC) is metrics.ACCEPTANCE
    with pytest.raises(TypeError):
        metrics.counted_rows("tail_tokens")  # a gauge: nothing to count per bucket


@pytest.fixture
def two_stories(tenant):
    """One story four hours ago and one now, in other workflows."""
    with time_machine.travel(timezone.now() - timedelta(hours=4), tick=False):
        build_story(tenant, external_id="earlier")
    build_story(tenant, external_id="later")
    return tenant


@pytest.mark.django_db
@pytest.mark.parametrize("key", list(reports.SIGNALS))
def test_each_signal_counts_what_its_metric_computes(two_stories, key):
    tenant, signal, now = two_stories, reports.SIGNALS[key], timezone.now()
    for window_key, stories in (("1h", 1), ("24h", 2)):
        window = WINDOWS[window_key]
        since = window.starts(now)[0]
        counted = sum(reports.overview_series(tenant, window, now).counts[key])
        assert counted == metrics.compute(tenant, signal.metric, since=since) == stories
    # As a workflow filter (?has=<key>): exactly the workflows the metric finds rows for.
    recent = Workflow.objects.filter(signal.exists_for_workflow(now - HOUR, None))
    assert list(recent.values_list("external_id", flat=True)) == ["later"]
    for wf in ("earlier", "later"):
        assert metrics.compute(tenant, signal.metric, since=None, workflow_prefix=wf) == 1


@pytest.mark.django_db
def test_compactions_by_source_agree_with_the_compactions_metric(two_stories):
    now = timezone.now()
    window = WINDOWS["24h"]
    workflows = reports.workflow_state(two_stories, 0, now).per_source
    rows = reports.source_rows(workflows, reports.overview_series(two_stories, window, now).per_source)
    assert sum(r.compactions for r in rows) == metrics.compute(
        two_stories, "compactions", since=window.since(now)
    )
    assert sum(r.workflows for r in rows) == 2


# --- workflow pages ----------------------------------------------------------------------------


def change(at: datetime, seq: int | None) -> SimpleNamespace:
    return SimpleNamespace(at=at, source_revision_at_activation=seq)


def test_pointer_change_positions_never_go_back_and_stay_within_head():
    t = NOW
    changes = [
        change(t, 20),
        change(t + HOUR, 10),  # a rollback to an older head is drawn where the pointer already was
        change(t + 2 * HOUR, None),  # a quarantine: takes the fallback's position written with it
        change(t + 2 * HOUR + timedelta(seconds=1), 40),
        change(t + 3 * HOUR, 90),  # beyond head: clamped
        change(t + 4 * HOUR, None),  # the latest change clears the pointer: at head
    ]
    assert detail.change_positions(changes, 60) == [20, 20, 40, 40, 60, 60]
    assert detail.change_positions([change(t, None), change(t + HOUR, 30)], 50) == [0, 30]


def test_event_pages_by_seq():
    per = EVENTS_PER_PAGE
    assert [detail.page_of_seq(s) for s in (1, per, per + 1, 2 * per + 1)] == [1, 1, 2, 3]


def test_workflow_cursors_round_trip_and_reject_anything_else():
    by_time, by_tokens = browse.SORTS["recent"], browse.SORTS["tail_tokens"]
    token = browse.encode_cursor(NOW, 7, 3, "next")
    assert browse.decode_cursor(token, by_time) == (NOW, 7, 3, "next")
    assert browse.decode_cursor(browse.encode_cursor(120, 7, 0, "prev"), by_tokens) == (120, 7, 1, "prev")
    assert browse.decode_cursor(token, by_tokens) is None  # a time where a number belongs
    for bad in ("", "!!", "bm90IGpzb24", browse.encode_cursor(120, 7, 2, "sideways")):
        assert browse.decode_cursor(bad, by_tokens) is None
