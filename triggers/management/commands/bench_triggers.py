"""`manage.py bench_triggers`: decision latency vs LangChain's approximate recount and an exact
tiktoken recount at 1k / 10k / 100k messages; prints the table and writes var/bench/triggers-*.json."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from triggers import bench


class Command(BaseCommand):
    help = "Benchmark trigger decisions (O(1) running totals) against whole-history recounts."

    def add_arguments(self, parser):
        parser.add_argument("--sizes", default="1000,10000,100000", help="comma-separated message counts")
        parser.add_argument("--decisions", type=int, default=200, help="stateful decisions timed per size")

    def handle(self, *args, sizes: str, decisions: int, **opts):
        chosen = tuple(int(s) for s in sizes.split(",") if s.strip())
        self.stdout.write(
            self.style.MIGRATE_HEADING(f"== trigger decisions at {', '.join(f'{s:,}' for s in chosen)}")
        )
        result = bench.run(chosen, decisions=decisions, log=self.stdout.write)
        self.stdout.write(bench.table(result))
        out_dir = Path(settings.VAR_DIR) / "bench"
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"triggers-{time.strftime('%Y%m%d-%H%M%S')}.json"
        report = {"machine": {"platform": platform.platform(), "python": platform.python_version()}, **result}
        path.write_text(json.dumps(report, indent=2))
        self.stdout.write(f"written {path}")
