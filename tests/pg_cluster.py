"""A private PostgreSQL server for tests that stop, restart and kill the database under running processes.

The shared server (``ORCHESTRATOR_TEST_PG_URL``) serves every engineer's tests at once and must not be
restarted; this one is ours alone: ``initdb`` into a temporary directory, a free port on 127.0.0.1,
its socket in the data directory, ``fsync=off`` (nothing here must survive a power cut). PostgreSQL
refuses to run as root, so as root the server runs as the ``postgres`` user (``runuser``).
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
from collections.abc import Iterator
from pathlib import Path

import pytest


def postgres_bin() -> Path | None:
    """The newest installed server's ``bin`` directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateCluster:
    """One server in a temporary data directory; :meth:`stop` and :meth:`start` as often as a test likes."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="orchestrator-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.user: str | None = "postgres" if os.geteuid() == 0 else None
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        self.command("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-N", "-E", "UTF8")

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def command(self, program: str, *args: str) -> None:
        argv = [str(self.bin / program), *args]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=120, cwd=self.dir)

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=60 -c shared_buffers=16MB")
        self.command("pg_ctl", "start", "-D", str(self.data), "-w", "-t", "60", "-l", str(self.log), "-o", options)

    def stop(self) -> None:
        """A fast shutdown: every session is terminated, open transactions roll back."""
        self.command("pg_ctl", "stop", "-D", str(self.data), "-m", "fast", "-w", "-t", "60")

    def terminate_backends(self, application_name: str) -> int:
        """``pg_terminate_backend`` on every session of one application; how many there were."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE application_name = %s", (application_name,)).fetchone()
        return int(row[0]) if row else 0

    def remove(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self.command("pg_ctl", "stop", "-D", str(self.data), "-m", "immediate", "-w", "-t", "30")
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for(condition, what: str, timeout: float = 60.0, every: float = 0.05):  # type: ignore[no-untyped-def]
    """Poll ``condition()`` until it returns something truthy (returned); fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every)


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[PrivateCluster]:
    """A started private server, removed after the module's tests (skipped where PostgreSQL is not installed)."""
    bin_dir = postgres_bin()
    if bin_dir is None:
        pytest.skip("no PostgreSQL server installed (/usr/lib/postgresql/*/bin/initdb)")
    cluster = PrivateCluster(bin_dir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.remove()
