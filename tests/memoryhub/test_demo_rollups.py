"""`load_demo` carries the metric rollups of its back-dated story, so every overview time series
(counters and gauges alike) has its shape on first load rather than one point at "now"."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from memoryhub.models import Tenant
from memoryhub.observe.reports import WINDOWS, gauge_series, overview_series

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_load_demo_backfills_rollups_with_history(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    out = StringIO()
    call_command("load_demo", stdout=out)
    assert "metric rollups backfilled" in out.getvalue()
    acme = Tenant.objects.get(slug="acme")
    window, now = WINDOWS["7d"], timezone.now()
    for metric in ("tail_tokens", "active_summary_age_seconds"):
        _, values = gauge_series(acme, metric, window, now)
        measured = [v for v in values if v is not None]
        # The story is measured while it happens (back-dated), not only at the end.
        assert len(measured) >= 4, (metric, values)
        assert len(set(measured)) >= 2, (metric, values)  # a shape, not a flat line
    series = overview_series(acme, window, now)
    assert sum(series.counts["compaction"]) >= 3
    assert sum(1 for v in series.acceptance if v is not None) >= 1
