"""The sandbox escape suite: every probe of ``benchmarks/hostile_sandbox.py`` (remount, writes
outside the workspace, secrets, host unix sockets, network, ptrace, devices, setuid, fork bomb,
memory hog) run through ``Shell(sandbox="bwrap")``'s public tools, each a bounded command that
must be refused. CI runs it as root, where the sandbox matters most. Skipped, with the reason,
where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentica.deep.shell import Shell
from agentica.errors import UsageError
from benchmarks.hostile_sandbox import PROBES, Bait, Probe, attempt, shell_for

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux only"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]


@pytest.fixture(scope="module")
def bait() -> Iterator[Bait]:
    host = Bait()
    try:
        yield host
    finally:
        host.close()


@pytest.fixture
async def shell(bait: Bait) -> AsyncIterator[Shell]:
    shell = shell_for(bait)
    try:
        await shell.sandboxed()
    except UsageError as exc:
        pytest.skip(str(exc))
    yield shell
    await shell.aclose()


@pytest.mark.parametrize("probe", PROBES, ids=[f"{p.family}: {p.name}" for p in PROBES])
async def test_the_sandbox_refuses(shell: Shell, bait: Bait, probe: Probe) -> None:
    escaped, output = await attempt(shell, bait, probe)
    assert not escaped, output


async def test_commands_still_work_in_the_sandbox(shell: Shell, bait: Bait) -> None:
    """What a command needs is there: the workspace (writable), a private /tmp, the system's
    programs, the interpreter with its standard library, and the limits as configured."""
    private = f"/tmp/agentica-{bait.id}-private"
    result = await shell.execute(
        f"echo data > in.txt && echo t > {private} && cat {private} && ls /usr/bin | grep -c . && "
        "grep -E 'CapEff|NoNewPrivs' /proc/self/status && "
        "grep -E 'processes|data' /proc/self/limits"
    )
    assert result.startswith("exit code 0"), result
    assert (bait.workspace / "in.txt").read_text() == "data\n"
    assert "\nt\n" in result and not await asyncio.to_thread(os.path.exists, private)
    assert "CapEff:\t0000000000000000" in result and "NoNewPrivs:\t1" in result
    assert "Max processes             64" in result
    assert f"Max data size             {256 * 2**20}" in result
    out = await shell.run_python(
        "import csv, json, os, sqlite3\nprint(json.dumps(sorted(os.listdir('.'))))"
    )
    assert out.startswith("exit code 0") and '"in.txt"' in out, out


async def test_the_interpreter_and_agentica_stay_read_only_inside_the_workspace(
    tmp_path: Path,
) -> None:
    """A project's .venv (or an editable agentica) inside the workspace: the host runs it for
    the next command, so the sandbox must not be able to change it although the workspace is
    writable."""
    from agentica.deep.shell.sandbox import AGENTICA_DIR, sandbox_mounts

    venv = tmp_path / ".venv"
    venv.mkdir()
    (venv / "python").write_text("the host runs this\n")
    mounts = sandbox_mounts(tmp_path, False, protected=[str(venv)])
    assert mounts.index(str(venv)) > mounts.index("--bind")  # mounted over the workspace
    command = "echo changed > .venv/python; echo x > .venv/planted; echo ok > note.txt"
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    process = await asyncio.create_subprocess_exec(
        bwrap, "--unshare-all", "--die-with-parent", *mounts, "/bin/sh", "-c", command,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    output, _ = await process.communicate()
    if (tmp_path / "note.txt").exists() is False and b"Operation not permitted" in output:
        pytest.skip(f"bubblewrap cannot create namespaces here: {output.decode()[:200]}")
    assert (tmp_path / "note.txt").read_text() == "ok\n"  # the workspace is writable
    assert (venv / "python").read_text() == "the host runs this\n", output
    assert not (venv / "planted").exists(), output
    # by default the interpreter's directories and agentica's package are the protected ones
    default = sandbox_mounts(Path(AGENTICA_DIR).parent, False)
    assert default.count(AGENTICA_DIR) == 2  # --ro-bind SRC DEST, after the workspace
