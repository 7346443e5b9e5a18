"""A throw-away PostgreSQL cluster for tests and benchmarks: ``with throwaway_cluster() as pg:``.

``initdb`` refuses to run as root, so as root the cluster is created and run as the ``postgres``
user (``runuser``) in a fresh directory under /tmp owned by it. The server listens on 127.0.0.1 on a
free port, with its unix socket in that directory, and is stopped and deleted on exit (the
deletion runs in the background: removing a used cluster's files can take seconds).
``postgres_binaries()`` is ``None`` when PostgreSQL is not installed (callers skip with a reason).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Cluster", "postgres_binaries", "throwaway_cluster", "why_no_postgres"]


def postgres_binaries() -> Path | None:
    """The ``bin`` directory of the newest installed PostgreSQL, or ``None``."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def why_no_postgres() -> str | None:
    """Why a cluster cannot be started here (``None``: it can)."""
    if postgres_binaries() is None:
        return "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run initdb as"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(slots=True)
class Cluster:
    """A running throw-away cluster."""

    directory: Path
    port: int
    bin: Path
    prefix: list[str]

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def run(self, *args: str) -> None:
        subprocess.run([*self.prefix, *args], check=True, capture_output=True, timeout=60)

    def psql(self, sql: str) -> None:
        self.run(
            str(self.bin / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-v",
            "ON_ERROR_STOP=1",
            "-q",
            "-c",
            sql,
        )

    def create_database(self, name: str) -> str:
        """Create database ``name``; its URL."""
        self.psql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def disk_usage(self) -> int:
        """Bytes under the data directory."""
        return sum(f.stat().st_size for f in (self.directory / "data").rglob("*") if f.is_file())


@contextlib.contextmanager
def throwaway_cluster(*, durable: bool = False) -> Iterator[Cluster]:
    """Start a cluster; ``durable=False`` turns fsync off (tests), ``True`` keeps the defaults."""
    bindir = postgres_binaries()
    reason = why_no_postgres()
    if bindir is None or reason:
        raise RuntimeError(reason)
    directory = Path(tempfile.mkdtemp(prefix="agentica-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(directory, account.pw_uid, account.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    cluster = Cluster(directory=directory, port=_free_port(), bin=bindir, prefix=prefix)
    data = directory / "data"
    options = (
        f"-p {cluster.port} -k {directory} -c listen_addresses=127.0.0.1 -c max_connections=200"
    )
    if not durable:
        options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    try:
        cluster.run(
            str(bindir / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        cluster.run(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(directory / "log"),
            "-w",
            "start",
        )
        yield cluster
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            cluster.run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        _remove_in_background(directory)


def _remove_in_background(directory: Path) -> None:
    """``rm -rf`` that the caller does not wait for (deleting a used cluster can take seconds)."""
    if shutil.which("rm") and shutil.which("sh"):
        subprocess.run(["sh", "-c", f"rm -rf {shlex.quote(str(directory))} >/dev/null 2>&1 &"],
                       check=False, timeout=10)  # fmt: skip
    else:
        shutil.rmtree(directory, ignore_errors=True)
