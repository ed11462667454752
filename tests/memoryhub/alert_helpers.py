"""Builders for metrics/alerting tests: the rows each metric reads, written at frozen times, and a
real local HTTP server that receives webhooks and checks their HMAC signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from datetime import UTC, datetime
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any

import time_machine

from audit.models import Investigation
from memoryhub.models import (
    Artifact,
    CompactionJob,
    ConsumerTrace,
    LifecycleEvent,
    Summary,
    ValidationRecord,
    Workflow,
)
from triggers.models import TriggerDecision

T0 = datetime(2030, 1, 15, 12, 0, tzinfo=UTC)
_ids = count(1)


def frozen(moment: datetime):
    """Freeze time (auto_now_add columns take this moment)."""
    return time_machine.travel(moment, tick=False)


def summary(workflow: Workflow, version: int, *, status: str = "VALIDATED", covers_to: int = 10) -> Summary:
    return Summary.objects.create(
        summary_id=f"sum-{workflow.pk}-{version}-{next(_ids)}",
        tenant=workflow.tenant,
        workflow=workflow,
        version=version,
        covers_from_seq=1,
        covers_to_seq=covers_to,
        source_revision=covers_to,
        compactor_name="test",
        content="{}",
        content_hash="sha256:" + "0" * 64,
        token_count=10,
        status=status,
    )


def lifecycle(summary_row: Summary, result: str, action: str = "activate") -> LifecycleEvent:
    return LifecycleEvent.objects.create(
        tenant=summary_row.tenant,
        workflow=summary_row.workflow,
        summary=summary_row,
        action=action,
        result=result,
        actor="system:tests",
    )


def validation(summary_row: Summary, passed: bool) -> ValidationRecord:
    return ValidationRecord.objects.create(summary=summary_row, validator_version="v1", passed=passed)


def trace(
    workflow: Workflow,
    *,
    summary_row: Summary | None = None,
    flags: tuple[str, ...] = (),
    manifest: str = "sha256:" + "1" * 64,
    context_id: str = "ctx-1",
    tail_to: int = 10,
    head: int = 10,
) -> ConsumerTrace:
    n = next(_ids)
    return ConsumerTrace.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        agent="publisher",
        agent_run_id=f"run-{n}",
        model_call_id=f"call-{n}",
        summary=summary_row,
        tail_to_seq=tail_to,
        head_seq_at_read=head,
        manifest_hash=manifest,
        context_id=context_id,
        flags=list(flags),
    )


def artifact(
    workflow: Workflow, *, traces: tuple[ConsumerTrace, ...] = (), score: float | None = None
) -> Artifact:
    row = Artifact.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        artifact_id=f"T{next(_ids)}",
        kind="test-suite",
        quality_score=score,
    )
    row.produced_by.set(traces)
    return row


def job(
    workflow: Workflow,
    *,
    status: str = "SUCCEEDED",
    tokens_in: int = 1000,
    tokens_out: int = 100,
    cost: str = "0.01",
    latency_ms: int | None = 200,
    finished_at: datetime | None = None,
    summary_row: Summary | None = None,
) -> CompactionJob:
    n = next(_ids)
    return CompactionJob.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        source_revision=n,
        compactor="test",
        idempotency_key=f"{workflow.tenant_id}/{workflow.pk}/{n}/test",
        status=status,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        cost_usd=Decimal(cost),
        latency_ms=latency_ms,
        finished_at=finished_at,
        summary=summary_row,
    )


def decision(workflow: Workflow, action: str, *, projected: int, hard_limit: int = 25_000) -> TriggerDecision:
    return TriggerDecision.objects.create(
        tenant=workflow.tenant,
        workflow=workflow,
        action=action,
        current_tokens=projected - 1000,
        expected_next_step_tokens=1000,
        projected_tokens=projected,
        safe_budget=18_000,
        target_tokens=8_000,
        hard_limit=hard_limit,
    )


def investigation(artifact_row: Artifact, elapsed_ms: float) -> Investigation:
    return Investigation.objects.create(
        tenant=artifact_row.tenant,
        artifact=artifact_row,
        fact="401 Unauthorized",
        verdict="compaction_omission",
        evidence={},
        elapsed_ms=elapsed_ms,
    )


def set_totals(workflow: Workflow, **values: Any) -> Workflow:
    Workflow.objects.filter(pk=workflow.pk).update(**values)
    workflow.refresh_from_db()
    return workflow


# --- a real webhook receiver ------------------------------------------------------------------


class Receiver:
    """A local HTTP server in a thread. Paths choose the answer: /ok → 200, /status/<code> →
    that code, /sleep/<seconds> → 200 after a delay. Every request is recorded with whether its
    X-MemoryHub-Signature matches HMAC-SHA256(secret, raw body)."""

    def __init__(self, secret: str = "s3cret-webhook-key") -> None:
        self.secret = secret
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                expected = "sha256=" + hmac.new(receiver.secret.encode(), body, hashlib.sha256).hexdigest()
                signature = self.headers.get("X-MemoryHub-Signature")
                with receiver.lock:
                    receiver.requests.append(
                        {
                            "path": self.path,
                            "headers": dict(self.headers),
                            "body": body,
                            "json": json.loads(body or b"null"),
                            "signature": signature,
                            "verified": signature is not None and hmac.compare_digest(signature, expected),
                        }
                    )
                status = 200
                parts = self.path.strip("/").split("/")
                if parts[0] == "status":
                    status = int(parts[1])
                elif parts[0] == "sleep":
                    time.sleep(float(parts[1]))
                payload = b'{"ok": true}' if status < 400 else b'{"error": "nope"}'
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def url(self, path: str = "/ok") -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}{path}"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
