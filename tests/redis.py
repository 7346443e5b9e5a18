"""A throw-away Redis server for tests: ``with throwaway_redis() as redis: redis.url``.

``redis-server`` (Debian's ``redis-server`` package) runs on a free port on 127.0.0.1 with no
persistence, in a temporary directory; leaving the block stops it. ``why_no_redis()`` says why
it cannot run (for a skip with the reason).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


def why_no_redis() -> str | None:
    """Why a Redis server cannot be started here, or ``None``."""
    if shutil.which("redis-server") is None:
        return "Redis is not installed (no redis-server; apt-get install redis-server)"
    return None


@dataclass(slots=True)
class RedisServer:
    """A running throw-away Redis server."""

    port: int
    directory: Path

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def throwaway_redis() -> Iterator[RedisServer]:
    """Start ``redis-server`` on a free port; stop it and remove its directory afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="agentica-redis-"))
    port = _free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(directory), "--protected-mode", "no"]  # fmt: skip
    log = (directory / "redis.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"redis-server did not start: {(directory / 'redis.log').read_text()}"
                )
            time.sleep(0.02)
        yield RedisServer(port, directory)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(directory, ignore_errors=True)
