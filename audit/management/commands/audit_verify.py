"""Verify the hash-chained audit log: ``manage.py audit_verify [--tenant slug] [--checkpoint FILE]
[--export-checkpoint FILE]``. Exits non-zero when any tenant's chain fails verification. Pending
entries are sequenced first; any still pending (and the age of the oldest) are reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from audit.verify import export_checkpoint, verify_chain
from memoryhub.core.errors import InvalidInput
from memoryhub.models import Tenant


def _load_checkpoints(path: str) -> dict[str, dict[str, Any]]:
    """A checkpoint file holds one ``{tenant, seq, entry_hash}`` object or a list of them."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read checkpoint file {path}: {exc}")
    items = raw if isinstance(raw, list) else [raw]
    checkpoints: dict[str, dict[str, Any]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("tenant"), str):
            raise CommandError(f"{path}: every checkpoint needs a 'tenant' slug, 'seq' and 'entry_hash'")
        checkpoints[item["tenant"]] = item
    return checkpoints


def _pending(result: dict[str, Any]) -> str:
    """Entries committed but not in the chain yet (the sequencer was busy or is down)."""
    if not result["pending"]:
        return "; 0 pending"
    return f"; {result['pending']} pending, the oldest written {result['pending_oldest_age_s']:.1f} s ago"


class Command(BaseCommand):
    help = "Recompute the audit hash chain(s) and report the first bad entry; non-zero exit on failure."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", help="Tenant slug (default: every tenant).")
        parser.add_argument(
            "--checkpoint", help="JSON checkpoint file exported earlier (catches truncation)."
        )
        parser.add_argument(
            "--export-checkpoint", help="After a successful verification, write the current head(s) here."
        )

    def handle(self, *args, **options):
        tenant, checkpoint, export_path = (
            options["tenant"],
            options["checkpoint"],
            options["export_checkpoint"],
        )
        tenants = Tenant.objects.order_by("slug")
        if tenant:
            tenants = tenants.filter(slug=tenant)
            if not tenants.exists():
                raise CommandError(f"no tenant {tenant!r}")
        checkpoints = _load_checkpoints(checkpoint) if checkpoint else {}
        unknown = set(checkpoints) - set(tenants.values_list("slug", flat=True))
        if tenant and unknown:
            raise CommandError(f"checkpoint file is for {sorted(unknown)}, not {tenant!r}")
        failures = 0
        exported = []
        for t in tenants:
            try:
                result = verify_chain(t, checkpoints.get(t.slug))
            except InvalidInput as exc:
                raise CommandError(f"{t.slug}: {exc.detail}")
            if result["ok"]:
                self.stdout.write(
                    f"{t.slug}: OK — {result['detail']} (head seq {result['head_seq']}){_pending(result)}"
                )
                exported.append(export_checkpoint(t))
            else:
                failures += 1
                where = f" at seq {result['first_bad_seq']}" if result["first_bad_seq"] is not None else ""
                self.stderr.write(
                    f"{t.slug}: FAILED — {result['problem']}{where}: {result['detail']}{_pending(result)}"
                )
        if failures:
            raise CommandError(f"audit chain verification failed for {failures} tenant(s)", returncode=2)
        if export_path:
            payload: Any = exported[0] if tenant else exported
            Path(export_path).write_text(json.dumps(payload, indent=2) + "\n")
            self.stdout.write(f"checkpoint written to {export_path}")
