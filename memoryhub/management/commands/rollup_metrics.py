"""`manage.py rollup_metrics`: write the 5-minute MetricSample rollups for a stretch of the past.

Beat rolls up every 5 minutes and catches up an hour by itself. After a longer outage, or after
importing history, this fills the gap so the overview reads rollups instead of counting rows.
Idempotent: buckets that already have samples are kept.
"""

from __future__ import annotations

import time
from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memoryhub.models import Tenant
from memoryhub.observe import metrics


class Command(BaseCommand):
    help = "Backfill MetricSample rollups (5-minute buckets) for the last N hours."

    def add_arguments(self, parser):
        parser.add_argument("--hours", type=int, default=24 * 7, help="how far back (default: 168 = 7 days)")
        parser.add_argument(
            "--tenant", action="append", default=[], help="tenant slug (repeatable; default: all)"
        )

    def handle(self, *args, hours: int, tenant: list[str], **opts):
        if hours < 1:
            raise CommandError("--hours must be at least 1")
        tenants = Tenant.objects.filter(slug__in=tenant) if tenant else Tenant.objects.all()
        missing = set(tenant) - set(tenants.values_list("slug", flat=True))
        if missing:
            raise CommandError(f"unknown tenant(s): {', '.join(sorted(missing))}")
        now = timezone.now()
        for row in tenants.order_by("slug"):
            started, written = time.perf_counter(), 0
            # One day per step, oldest first, so progress shows and memory stays small; gauges
            # can only be measured now, so only the last step writes them.
            days = -(-hours // 24)
            for step in range(days):
                step_now = now - timedelta(days=days - step - 1)
                reach = timedelta(hours=min(24, hours - 24 * (days - step - 1))) - metrics.ROLLUP_BUCKET
                written += metrics.rollup(row, now=step_now, backfill=reach, gauges=step == days - 1)
                self.stdout.write(f"  {row.slug}: day {step + 1}/{days}, {written:,} samples")
            self.stdout.write(
                self.style.SUCCESS(f"{row.slug}: {written:,} samples in {time.perf_counter() - started:.1f}s")
            )
