"""load_demo: load the seed scenario (acme/api-tests-42 and friends) through the real services.

`load_demo` loads everything (refuses when the demo tenant exists) and backfills the metric rollups
so the overview's time series have their shape at once (`--no-rollups` skips that), `--skip-if-loaded`
makes that a no-op, `--live-steps` asks the running Celery worker to compact the second workflow.
"""

from django.core.management.base import BaseCommand, CommandError

from memoryhub.demo import loader, scenario


class Command(BaseCommand):
    help = "Load the demo data: the seed scenario (240 events, S1–S3, traces, T57, the 401 incident)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--skip-if-loaded", action="store_true", help="Do nothing when the demo tenant already exists."
        )
        parser.add_argument(
            "--live-steps",
            action="store_true",
            help="Only run the live steps: request a compaction of refunds-api-9 from the worker.",
        )
        parser.add_argument(
            "--no-backdate", action="store_true", help="Record the scenario at the current time."
        )
        parser.add_argument(
            "--no-rollups",
            action="store_true",
            help="Skip backfilling the metric rollups (the overview's charts then fill in as beat runs).",
        )
        parser.add_argument(
            "--wait", type=float, default=60.0, help="Seconds --live-steps waits for the job (default 60)."
        )

    def handle(self, *args, skip_if_loaded, live_steps, no_backdate, no_rollups, wait, **options):
        out = self.stdout.write
        if live_steps:
            try:
                loader.live_steps(out, wait_s=wait)
            except loader.DemoStateError as exc:
                raise CommandError(str(exc)) from exc
            return
        if loader.is_loaded():
            message = (
                f"demo tenant {scenario.TENANT_SLUG!r} already exists; nothing loaded "
                "(`make reset-demo` starts over)"
            )
            if skip_if_loaded:
                out(message)
                return
            raise CommandError(message)
        report = loader.load(out, backdate=not no_backdate, rollups=not no_rollups)
        out(
            self.style.SUCCESS(
                f"Demo loaded: {len(report.summaries)} summaries, {len(report.traces)} traces, "
                f"artifacts {', '.join(report.artifacts)}. Log in as {scenario.DEMO_USERNAME} / "
                f"{scenario.DEMO_PASSWORD}."
            )
        )
