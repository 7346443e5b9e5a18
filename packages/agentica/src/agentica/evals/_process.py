"""Running a command for the evaluation tasks: a blocking subprocess with a time limit.

The command runs in its own process group, with stdout and stderr going to one temporary file
(a background process that keeps the output open cannot make the wait hang). When the command
ends or its time is up, whatever is left of its process group is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

__all__ = ["Completed", "run", "tail"]

KEEP = 20_000  # characters of output kept (the end of it)


@dataclass(frozen=True, slots=True)
class Completed:
    """How a command ended: its exit status (``None`` when it timed out) and its output's end."""

    returncode: int | None
    output: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    args: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    stdout_only: bool = False,
) -> Completed:
    """Run ``args`` in ``cwd`` for at most ``timeout`` seconds.

    The output is stdout and stderr together; with ``stdout_only`` it is stdout alone when the
    command succeeds (stderr is added after it when the command fails, to say why).

    Raises ``OSError`` when the command cannot be started (no such program, no such folder).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(
            list(args),
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err if stdout_only else subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            returncode: int | None = process.wait(timeout=max(timeout, 0.001))
        except subprocess.TimeoutExpired:
            returncode = None
        _kill_group(process.pid)
        process.wait()
        text = _read_tail(out)
        if stdout_only and returncode != 0:
            text = tail(text + _read_tail(err), KEEP)
        return Completed(returncode, text)


def tail(text: str, limit: int) -> str:
    """The last ``limit`` characters of ``text`` (with ``...`` in front when cut)."""
    return text if len(text) <= limit else "..." + text[-(limit - 3) :]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _read_tail(file: IO[bytes]) -> str:
    size = file.seek(0, os.SEEK_END)
    file.seek(max(0, size - 4 * KEEP))
    data = file.read()
    return tail(data.decode("utf-8", errors="replace"), KEEP)
