"""Start a real Celery worker process on this project's current database and broker.

Used by the real-worker tests and the compaction benchmark: the child gets the same settings
through the environment (``DATABASE_URL`` names the database this process is connected to, so a
test database is shared), runs in its own process group (so it can be SIGKILLed as a whole), and
is only handed over once it logged that it is ready.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection


def database_url() -> str:
    """A DATABASE_URL for the database this process uses right now (the test database in tests)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(db['NAME']).resolve()}"
    if connection.vendor == "postgresql":
        auth = quote(db.get("USER") or "postgres")
        if db.get("PASSWORD"):
            auth += ":" + quote(db["PASSWORD"])
        return f"postgres://{auth}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    raise RuntimeError(f"no DATABASE_URL form for {connection.vendor}")


class WorkerProcess:
    """A running ``celery worker``; ``kill()`` sends a signal to its whole process group."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path) -> None:
        self.proc = proc
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.alive():
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 15) -> None:
        """Warm shutdown (SIGTERM), then SIGKILL if it does not exit in time."""
        if not self.alive():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()


@contextmanager
def running_worker(
    *,
    pool: str = "solo",
    concurrency: int = 1,
    beat: bool = False,
    env: dict[str, str] | None = None,
    broker_url: str | None = None,
    log_dir: Path | None = None,
    name: str = "worker",
    ready_timeout: float = 60,
    queues: Sequence[str] = (),
) -> Iterator[WorkerProcess]:
    """Yield a ready worker consuming ``queues`` (default: all of this project's); stop it on exit."""
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="mh-worker-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}-{time.monotonic_ns()}.log"
    child_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MEMORYHUB_VAR_DIR": str(settings.VAR_DIR),
        "CELERY_BROKER_URL": broker_url or settings.CELERY_BROKER_URL,
        **(env or {}),
    }
    command = [
        str(Path(sys.executable).with_name("celery")),
        "-A",
        "memoryhub.celery",
        "worker",
        "--pool",
        pool,
        "--concurrency",
        str(concurrency),
        "--hostname",
        f"{name}-{os.getpid()}-{time.monotonic_ns()}@%h",
        "--loglevel",
        "info",
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
    ]
    if queues:
        command += ["--queues", ",".join(queues)]
    if beat:
        command += ["--beat", "--schedule", str(log_dir / f"{name}-beat-schedule")]
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=settings.BASE_DIR,
            env=child_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    worker = WorkerProcess(proc, log_path)
    try:
        deadline = time.monotonic() + ready_timeout
        while " ready." not in worker.log():
            if not worker.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"celery worker did not start; log:\n{worker.log()[-3000:]}")
            time.sleep(0.1)
        yield worker
    finally:
        worker.stop()
