"""Start a real HTTP server (gunicorn) on a free loopback port for benchmarks and live tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.conf import settings

from memoryhub.pipeline.worker import database_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(workers: int = 2, env: dict[str, str] | None = None):
    """Yield the base URL of a gunicorn serving this project with the current database settings."""
    port = free_port()
    gunicorn = Path(sys.executable).with_name("gunicorn")

    child_env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "MEMORYHUB_VAR_DIR": str(settings.VAR_DIR),
        **(env or {}),
    }
    proc = subprocess.Popen(
        [
            str(gunicorn),
            "memoryhub.wsgi:application",
            "-w",
            str(workers),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--timeout",
            "120",
        ],
        cwd=settings.BASE_DIR,
        env=child_env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/accounts/login/", timeout=1)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the benchmark server did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
