"""`manage.py bench [name …]`: run benchmarks side by side, print a table, write JSON under var/bench/."""

from __future__ import annotations

import io
import json
import platform
import subprocess
import time
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from memoryhub.bench import (
    audit_chain,
    context_read,
    http,
    ingest,
    langchain_step,
    otel,
    pages,
    partitions,
    quality,
    scale,
)
from memoryhub.bench import compaction as compaction_bench
from memoryhub.management.commands.bench_activation import Command as BenchActivation
from triggers import bench as trigger_bench

# The benchmarks that time an optional extra (LangChain, the OpenTelemetry protobuf messages)
# import it only when they run, so a production install can list and run the others.


def _triggers(opts, log):
    return trigger_bench.run(log=log)


def _compaction(opts, log):
    return compaction_bench.run(log=log)


def _otel(opts, log):
    return otel.run(spans=opts["spans"], log=log)


def _context(opts, log):
    return context_read.run(log=log)


def _audit(opts, log):
    return audit_chain.run(writers=opts["writers"], seconds=opts["audit_seconds"], log=log)


def _activation(opts, log):
    """Both of ``bench_activation``'s measurements in one go: 1 vs N client processes racing on
    64 workflows, then the cost per activation of this tree beside the baseline revision (the
    tree before the write-path work), each in its own process, phases alternating."""
    out = io.StringIO()
    race, cost = BenchActivation(stdout=out), BenchActivation(stdout=out)
    n = opts["activation_processes"]
    log(f"activation: 1 vs {n} processes on 64 workflows, {opts['activation_seconds']:g}s phases")
    call_command(race, processes=n, workflows=64, seconds=opts["activation_seconds"], rounds=2)
    baseline = opts["activation_baseline"] or None
    if baseline and not _git_has(baseline):
        log(f"activation: revision {baseline} is not in this checkout (not a git clone?): no before/after")
        baseline = None
    log(f"activation: cost per applied activation, this tree vs {baseline or '(no baseline)'}")
    call_command(cost, workflows=64, cost=True, against=baseline, cost_rounds=4)
    return {**race.results, **cost.results}


def _git_has(revision: str) -> bool:
    probe = subprocess.run(
        ["git", "-C", str(settings.BASE_DIR), "rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"],
        capture_output=True,
    )
    return probe.returncode == 0


def _langchain(opts, log):
    return langchain_step.run(
        opts["lc_sizes"], calls=opts["lc_calls"], log=log, repair_rounds=opts.get("lc_repair_rounds", 20)
    )


def _quality(opts, log):
    return quality.run(opts["quality_sizes"], log=log)


def _pages(opts, log):
    return pages.run(
        rounds=opts["page_rounds"], load_rounds=opts["page_load_rounds"], warmup=opts["page_warmup"], log=log
    )


BENCHMARKS = {
    # First: what clients feel (through gunicorn), beside CONN_MAX_AGE=0 and in process.
    "http": lambda opts, log: http.run(log=log),
    "ingest": lambda opts, log: ingest.run(
        events=opts["events"], batch=opts["batch"], clients=opts["clients"], log=log
    ),
    "scale": lambda opts, log: scale.run(workflows=opts["workflows"], big_events=opts["big_events"], log=log),
    "scale-pages": lambda opts, log: scale.pages_again(log=log),
    "partitions": lambda opts, log: partitions.run(big_events=opts["big_events"], log=log),
    "triggers": _triggers,
    "compaction": _compaction,
    "context": _context,
    "quality": _quality,
    "otel": _otel,
    "audit": _audit,
    "activation": _activation,
    "langchain": _langchain,
    "pages": _pages,
}
# The tree `bench activation` compares against: main before the write-path work (one round-trip
# activation, sequenced audit entries).
ACTIVATION_BASELINE = "c6dff78"
# Run only when named: quality (minutes at 100k events; pure Python, no database); pages (loads
# the demo into the database and drives Chromium); scale-pages (needs the dataset `scale` left).
EXPLICIT_ONLY = {"quality", "pages", "scale-pages"}
NO_DATABASE = {"quality"}


def _sizes(value: str) -> list[int]:
    try:
        sizes = [int(v) for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise CommandError(f"--quality-sizes: {exc}") from exc
    if not sizes or any(s < 1 for s in sizes):
        raise CommandError("sizes: comma-separated positive counts, e.g. 1000,10000")
    return sizes


class Command(BaseCommand):
    help = "Run MemoryHub benchmarks (PostgreSQL). Names: " + ", ".join(BENCHMARKS)

    def add_arguments(self, parser):
        parser.add_argument("names", nargs="*", help="benchmarks to run (default: all)")
        parser.add_argument("--events", type=int, default=100_000)
        parser.add_argument("--batch", type=int, default=1_000)
        parser.add_argument("--clients", type=int, default=2)
        parser.add_argument("--workflows", type=int, default=10_000, help="scale: bulk workflows")
        parser.add_argument("--spans", type=int, default=10_000, help="otel: spans sent over OTLP/HTTP")
        parser.add_argument(
            "--big-events", dest="big_events", type=int, default=1_000_000, help="scale: big history"
        )
        parser.add_argument("--writers", type=int, default=4, help="audit: concurrent writer processes")
        parser.add_argument(
            "--audit-seconds", dest="audit_seconds", type=float, default=3.0, help="audit: seconds per phase"
        )
        parser.add_argument(
            "--activation-processes",
            dest="activation_processes",
            type=int,
            default=4,
            help="activation: client processes raced against one",
        )
        parser.add_argument(
            "--activation-seconds",
            dest="activation_seconds",
            type=float,
            default=5.0,
            help="activation: seconds per race phase",
        )
        parser.add_argument(
            "--activation-baseline",
            dest="activation_baseline",
            default=ACTIVATION_BASELINE,
            help="activation: git revision to measure beside this tree ('' for none)",
        )
        parser.add_argument(
            "--lc-sizes",
            dest="lc_sizes",
            type=_sizes,
            default=[1_000, 10_000, 100_000],
            help="langchain: history sizes in messages (comma-separated)",
        )
        parser.add_argument(
            "--lc-calls", dest="lc_calls", type=int, default=30, help="langchain: calls per size"
        )
        parser.add_argument(
            "--lc-repair-rounds",
            dest="lc_repair_rounds",
            type=int,
            default=20,
            help="langchain: compaction turns timed with and without repair (0: skip)",
        )
        parser.add_argument(
            "--quality-sizes",
            dest="quality_sizes",
            type=_sizes,
            default=list(quality.DEFAULT_SIZES),
            help="quality: corpus sizes in events (comma-separated)",
        )
        parser.add_argument(
            "--page-rounds", dest="page_rounds", type=int, default=20, help="pages: server-time rounds"
        )
        parser.add_argument(
            "--page-load-rounds",
            dest="page_load_rounds",
            type=int,
            default=5,
            help="pages: Chromium load rounds",
        )
        parser.add_argument(
            "--page-warmup", dest="page_warmup", type=int, default=2, help="pages: server warm-up rounds"
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="quality: exit non-zero when a target (memoryhub.bench.quality.TARGETS) is missed",
        )

    def handle(self, *args, names, **opts):
        unknown = set(names) - set(BENCHMARKS)
        if unknown:
            raise CommandError(f"unknown benchmark(s) {sorted(unknown)}; choose from {sorted(BENCHMARKS)}")
        selected = names or [n for n in BENCHMARKS if n not in EXPLICIT_ONLY]
        if not settings.IS_POSTGRES and set(selected) - NO_DATABASE:
            raise CommandError("benchmarks run on PostgreSQL: set DATABASE_URL=postgres://…")
        out_dir = Path(settings.VAR_DIR) / "bench"
        out_dir.mkdir(parents=True, exist_ok=True)
        results = {}
        for name in selected:
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
        missed = results.get("quality", {}).get("missed", [])
        if opts.get("check") and missed:
            raise CommandError("quality targets missed:\n  " + "\n  ".join(missed))
        self.last_report_path = path
