"""`manage.py bench [name …]`: run benchmarks side by side, print a table, write JSON under var/bench/."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from memoryhub.bench import ingest, scale


def _triggers(opts, log):
    from triggers import bench as trigger_bench

    return trigger_bench.run(log=log)


def _compaction(opts, log):
    from memoryhub.compaction import bench as compaction_bench

    return compaction_bench.run(log=log)


def _otel(opts, log):
    from memoryhub.bench import otel

    return otel.run(spans=opts["spans"], log=log)


def _context(opts, log):
    from memoryhub.bench import context_read

    return context_read.run(log=log)


BENCHMARKS = {
    "ingest": lambda opts, log: ingest.run(
        events=opts["events"], batch=opts["batch"], clients=opts["clients"], log=log
    ),
    "scale": lambda opts, log: scale.run(workflows=opts["workflows"], big_events=opts["big_events"], log=log),
    "triggers": _triggers,
    "compaction": _compaction,
    "context": _context,
    "otel": _otel,
}


class Command(BaseCommand):
    help = "Run MemoryHub benchmarks (PostgreSQL). Names: " + ", ".join(BENCHMARKS)

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
        parser.add_argument("--events", type=int, default=100_000)
        parser.add_argument("--batch", type=int, default=1_000)
        parser.add_argument("--clients", type=int, default=2)
        parser.add_argument("--workflows", type=int, default=10_000, help="scale: bulk workflows")
        parser.add_argument("--spans", type=int, default=2_000, help="otel: spans sent over OTLP/HTTP")
        parser.add_argument(
            "--big-events", dest="big_events", type=int, default=1_000_000, help="scale: big history"
        )

    def handle(self, *args, names, **opts):
        unknown = set(names) - set(BENCHMARKS)
        if unknown:
            raise CommandError(f"unknown benchmark(s) {sorted(unknown)}; choose from {sorted(BENCHMARKS)}")
        if not settings.IS_POSTGRES:
            raise CommandError("benchmarks run on PostgreSQL: set DATABASE_URL=postgres://…")
        out_dir = Path(settings.VAR_DIR) / "bench"
        out_dir.mkdir(parents=True, exist_ok=True)
        results = {}
        for name in names or list(BENCHMARKS):
            self.stdout.write(self.style.MIGRATE_HEADING(f"== {name}"))
            results[name] = BENCHMARKS[name](opts, lambda msg: self.stdout.write(msg))
            for key, value in results[name].items():
                if not isinstance(value, dict):
                    self.stdout.write(f"  {key:<28} {value}")
        report = {
            "machine": {"platform": platform.platform(), "python": platform.python_version()},
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "results": results,
        }
        path = out_dir / f"bench-{time.strftime('%Y%m%d-%H%M%S')}.json"
        path.write_text(json.dumps(report, indent=2))
        self.stdout.write(f"written {path}")
