"""Throw-away PostgreSQL servers for scale-out tests: a primary and a streaming replica.

Built with PostgreSQL's own tools (initdb, pg_basebackup -R, pg_ctl) on free loopback ports, in a
temporary directory, run as the ``postgres`` user when the tests run as root (initdb refuses
root). Nothing here touches the machine's own cluster.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


def pg_bin_dir() -> Path | None:
    """The newest PostgreSQL server binaries on this machine, or None."""
    for candidate in sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[4]), reverse=True
    ):
        if Path(candidate, "initdb").exists() and Path(candidate, "pg_basebackup").exists():
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_basebackup") else None


def missing_reason() -> str | None:
    """Why a cluster cannot be built here (None when it can)."""
    if pg_bin_dir() is None:
        return "PostgreSQL server binaries (initdb, pg_basebackup, pg_ctl) are not installed"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run initdb as"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Server:
    data_dir: Path
    port: int
    log: Path

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"


@dataclass
class Cluster:
    root: Path
    bin: Path
    servers: list[Server] = field(default_factory=list)

    def _run(self, *args: str, as_postgres: bool = True) -> str:
        command = [str(self.bin / args[0]), *args[1:]]
        if as_postgres and os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def _start(self, server: Server) -> None:
        self._run("pg_ctl", "-D", str(server.data_dir), "-l", str(server.log), "-w", "-t", "60", "start")
        self.servers.append(server)

    def primary(self) -> Server:
        server = Server(self.root / "primary", free_port(), self.root / "primary.log")
        self._run("initdb", "-D", str(server.data_dir), "-A", "trust", "-U", "postgres", "--no-sync")
        with open(server.data_dir / "postgresql.conf", "a") as conf:
            conf.write(
                f"\nport = {server.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nwal_level = replica\nmax_wal_senders = 4\n"
                "hot_standby = on\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            )
        self._start(server)
        return server

    def replica_of(self, primary: Server) -> Server:
        server = Server(self.root / "replica", free_port(), self.root / "replica.log")
        self._run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
            "-D", str(server.data_dir), "-R", "-X", "stream", "--no-sync",
        )  # fmt: skip
        with open(server.data_dir / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {server.port}\n")
        self._start(server)
        return server

    def sql(self, server: Server, statement: str, database: str = "postgres") -> str:
        return self._run(
            "psql", "-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres", "-d", database,
            "-At", "-v", "ON_ERROR_STOP=1", "-c", statement, as_postgres=False,
        ).strip()  # fmt: skip

    def wait_caught_up(self, primary: Server, replica: Server, timeout: float = 30) -> None:
        # The insert position, not pg_current_wal_lsn() (the write position): the cluster runs with
        # synchronous_commit = off, so a commit just acknowledged may not be written out yet.
        target = self.sql(primary, "SELECT pg_current_wal_insert_lsn()")
        deadline = time.monotonic() + timeout
        while self.sql(replica, f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn") != "t":
            if time.monotonic() > deadline:
                raise AssertionError(f"replica did not replay up to {target} in {timeout}s")
            time.sleep(0.1)

    def stop(self) -> None:
        for server in reversed(self.servers):
            with contextlib.suppress(RuntimeError):  # already stopped
                self._run("pg_ctl", "-D", str(server.data_dir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)


def new_cluster() -> Cluster:
    bin_dir = pg_bin_dir()
    assert bin_dir is not None, missing_reason()
    root = Path(tempfile.mkdtemp(prefix="mh-pg-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
    return Cluster(root, bin_dir)
