"""``agentica serve`` as a process of its own for the team benchmarks: ``serve_process``, and the
process's CPU time (``cpu_seconds``) and a free port (``free_port``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp

__all__ = ["cpu_seconds", "free_port", "serve_process"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serve_process(
    database: str, home: Path, token: str, probe: str
) -> AsyncIterator[tuple[str, int]]:
    """Run ``agentica serve`` on ``database`` until ``probe`` answers 200 with ``token``; yield
    its URL and process id; stop it (SIGTERM, then SIGKILL after 30 s). Its log is
    ``home/server.log``."""
    port = free_port()
    log = (home / "server.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", "serve", "--host", "127.0.0.1",
        "--port", str(port), "--database-url", database, stdout=log, stderr=log,
        env={**os.environ, "AGENTICA_HOME": str(home), "AGENTICA_TEAM_DATA_DIR": str(home)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
            for _ in range(600):
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{url}{probe}") as r:
                        if r.status == 200:
                            break
                await asyncio.sleep(0.1)
        yield url, process.pid
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()
        log.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
