"""Hostile inputs, races and deep trees: ``uv run python benchmarks/hostile_races.py``.

Another process swaps parts of the file area for symbolic links to outside and back, in a loop,
as fast as it can, while the agent's file tools run again and again on the same paths:

- grep-swap-race: ``FilesystemBackend.grep`` (with ripgrep when installed) over a tree of 160
  files while a folder of it and a file of it are swapped for links to an outside folder and an
  outside file. Failure: a line of an outside file in the results, or an untyped exception.
- read-swap-race: ``FilesystemBackend.read`` of files in the swapped folder and of the swapped
  file. Failure: outside text returned, or an exception other than ``BackendError``.
- memory-swap-race: workspace memory of two users (``daily_notes``, ``user_file``,
  ``context_prompt``, ``write_note``, ``save_memory``) while mallory's ``memory`` folder and
  eve's whole folder are swapped for links to bob's. Failure: bob's notes read, anything written
  into bob's folder, or an exception other than ``WorkspaceError``.
- deep-tree: ``glob`` and ``grep`` (Python and ripgrep) on a chain of folders 1,100 deep, twice
  each. Failure: an exception or a wrong result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.deep.backends import BackendError, FilesystemBackend  # noqa: E402
from agentica.memory import Workspace, WorkspaceError  # noqa: E402

SECONDS = 5.0
SECRET = "OUTSIDE-SECRET"
DEPTH = 1100

# Runs in another process (no shared GIL): swaps each ``path`` for a link to its ``target`` and
# back until the time is up, then prints how many swaps it made.
SWAPPER = """
import os, sys, threading, time

def swap(path, target, end, counts):
    real, spare = path + ".real", 0
    while time.monotonic() < end:
        try:
            os.rename(path, real)
            os.symlink(target, path)
            counts.append(1)
            os.unlink(path)
        except OSError:
            pass
        try:
            os.rename(real, path)
        except FileNotFoundError:
            pass
        except OSError:  # something made a new path meanwhile: put it aside
            spare += 1
            try:
                os.rename(path, path + ".made%d" % spare)
                os.rename(real, path)
            except OSError:
                pass

end = time.monotonic() + float(sys.argv[1])
counts = []
pairs = sys.argv[2:]
threads = [
    threading.Thread(target=swap, args=(pairs[i], pairs[i + 1], end, counts))
    for i in range(0, len(pairs), 2)
]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(len(counts))
"""


async def start_swapping(
    seconds: float, pairs: list[tuple[Path, Path]]
) -> asyncio.subprocess.Process:
    """Start ``SWAPPER`` on the (path, target) pairs for ``seconds``; its stdout is the count."""
    args = [str(p) for pair in pairs for p in pair]
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", SWAPPER, str(seconds), *args, stdout=asyncio.subprocess.PIPE
    )


def files(folder: Path) -> dict[str, str]:
    """Every file below ``folder`` and its text, by relative path."""
    return {str(p.relative_to(folder)): p.read_text() for p in folder.rglob("*") if p.is_file()}


def make_tree(root: Path, outside: Path) -> None:
    """8 folders of 20 files (and ``d3/x.txt``, ``f.txt``) under ``root``, each line with "needle";
    20 files and ``x.txt`` under ``outside`` whose lines hold ``SECRET``."""
    outside.mkdir(parents=True)
    for i in range(20):
        (outside / f"o{i}.txt").write_text(f"needle {SECRET} {i}\n")
    (outside / "x.txt").write_text(f"needle {SECRET}\n")
    for d in range(8):
        folder = root / f"d{d}"
        folder.mkdir(parents=True)
        for i in range(20):
            (folder / f"f{i}.txt").write_text(f"needle inside {d} {i}\n")
    (root / "d3" / "x.txt").write_text("needle inside x\n")
    (root / "f.txt").write_text("needle inside f\n")


async def make_workspace(ws_root: Path) -> tuple[Workspace, Path]:
    """A workspace where bob's notes and memory hold ``SECRET`` and mallory and eve have notes of
    their own; returns it and bob's folder."""
    ws = Workspace(ws_root, today=lambda: date(2024, 5, 1))
    await ws.write_note("bob", f"bob {SECRET}")
    await ws.save_memory("bob", f"bob {SECRET}")
    await ws.write_note("mallory", "mallory's own note")
    await ws.write_note("eve", "eve's own note")
    return ws, ws_root / "users" / "bob"


async def race(
    pairs: list[tuple[Path, Path]], attempt: Callable[[], Awaitable[int]], seconds: float
) -> tuple[int, int, int]:
    """Run ``attempt`` (returning its failures) again and again while the pairs are swapped:
    (attempts, failures, swaps)."""
    swapper = await start_swapping(seconds, pairs)
    deadline = time.monotonic() + seconds
    attempts = failures = 0
    while time.monotonic() < deadline:
        failures += await attempt()
        attempts += 1
    out, _ = await swapper.communicate()
    return attempts, failures, int(out or 0)


async def grep_race(tmp: Path, seconds: float) -> dict[str, Any]:
    root, outside = tmp / "g" / "root", tmp / "g" / "outside"
    await asyncio.to_thread(make_tree, root, outside)
    rg = shutil.which("rg") is not None
    fs = FilesystemBackend(root, ripgrep=True)

    async def attempt() -> int:
        try:
            lines = await fs.grep("needle")
        except BackendError:
            return 0
        except Exception:  # an untyped error
            return 1
        return sum(SECRET in line.text for line in lines)

    pairs = [(root / "d3", outside), (root / "f.txt", outside / "x.txt")]
    attempts, failures, swaps = await race(pairs, attempt, seconds)
    return {
        "family": "grep-swap-race",
        "attempts": attempts,
        "failures": failures,
        "seconds": seconds,
        "what": f"grep ({'ripgrep' if rg else 'Python, rg not installed'}) over 161 files for "
        f"{seconds:.0f} s while a folder and a file were swapped for links to outside "
        f"{swaps:,} times; failure = an outside line returned or an untyped error",
    }


async def read_race(tmp: Path, seconds: float) -> dict[str, Any]:
    root, outside = tmp / "r" / "root", tmp / "r" / "outside"
    await asyncio.to_thread(make_tree, root, outside)
    fs = FilesystemBackend(root)

    async def attempt() -> int:
        failed = 0
        for path in ("/f.txt", "/d3/x.txt", "/d3/f1.txt"):
            try:
                failed += SECRET in await fs.read(path)
            except BackendError:
                pass
            except Exception:
                failed += 1
        return failed

    pairs = [(root / "d3", outside), (root / "f.txt", outside / "x.txt")]
    attempts, failures, swaps = await race(pairs, attempt, seconds)
    return {
        "family": "read-swap-race",
        "attempts": attempts * 3,
        "failures": failures,
        "seconds": seconds,
        "what": f"read_file of 3 paths for {seconds:.0f} s while their folder or file was swapped "
        f"for links to outside {swaps:,} times; failure = outside text or an untyped error",
    }


async def memory_race(tmp: Path, seconds: float) -> dict[str, Any]:
    ws_root = tmp / "m" / "ws"
    ws, bob = await make_workspace(ws_root)
    before = await asyncio.to_thread(files, bob)

    async def attempt() -> int:
        failed = 0
        for user in ("mallory", "eve"):
            for read in (
                ws.daily_notes(user),
                ws.user_file(user, "MEMORY.md"),
                ws.context_prompt(user, budget_tokens=500),
            ):
                try:
                    failed += SECRET in await read
                except WorkspaceError:
                    pass
                except Exception:
                    failed += 1
            for write in (ws.write_note(user, "they wrote"), ws.save_memory(user, "x")):
                try:
                    await write
                except WorkspaceError:
                    pass
                except Exception:
                    failed += 1
        return failed

    pairs = [
        (ws_root / "users" / "mallory" / "memory", bob / "memory"),
        (ws_root / "users" / "eve", bob),
    ]
    attempts, failures, swaps = await race(pairs, attempt, seconds)
    written = int(await asyncio.to_thread(files, bob) != before)
    return {
        "family": "memory-swap-race",
        "attempts": attempts * 10,
        "failures": failures + written,
        "seconds": seconds,
        "what": f"workspace memory reads and writes of 2 users for {seconds:.0f} s while a notes "
        f"folder and a user's folder were swapped for links to another user's {swaps:,} times; "
        "failure = the other user's notes read, anything written into their folder, or an "
        "untyped error",
    }


def make_chain(root: Path) -> None:
    """``root/a/a/.../a`` ``DEPTH`` folders deep with ``leaf.txt`` at the bottom, made through
    descriptors (the whole path would be long for some tools)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(DEPTH):
            os.mkdir("a", dir_fd=fd)
            sub = os.open("a", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(leaf, b"deep needle\n")
        os.close(leaf)
    finally:
        os.close(fd)


def remove_chain(root: Path) -> None:
    """Remove the chain from the bottom up (a recursive clean-up would fail on it)."""
    (root.joinpath(*["a"] * DEPTH) / "leaf.txt").unlink(missing_ok=True)
    for depth in range(DEPTH, 0, -1):
        with contextlib.suppress(FileNotFoundError):
            os.rmdir(root.joinpath(*["a"] * depth))


async def deep_tree(tmp: Path) -> dict[str, Any]:
    root = tmp / "deep"
    root.mkdir()
    await asyncio.to_thread(make_chain, root)
    leaf = "/" + "/".join(["a"] * DEPTH) + "/leaf.txt"
    attempts = failures = 0
    try:
        for ripgrep in (False, True):
            fs = FilesystemBackend(root, ripgrep=ripgrep)
            for _ in range(2):
                for call in ("glob", "grep"):
                    attempts += 1
                    try:
                        if call == "glob":
                            ok = [f.path for f in await fs.glob("**/*.txt")] == [leaf]
                        else:
                            ok = [g.path for g in await fs.grep("needle")] == [leaf]
                    except Exception:
                        ok = False
                    failures += not ok
    finally:
        await asyncio.to_thread(remove_chain, root)
    return {
        "family": "deep-tree",
        "attempts": attempts,
        "failures": failures,
        "depth": DEPTH,
        "what": f"glob and grep (Python and ripgrep), twice each, on a chain of folders {DEPTH:,} "
        "deep; failure = an exception (RecursionError) or a wrong result",
    }


async def main(seconds: float) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        return [
            await grep_race(tmp, seconds),
            await read_race(tmp, seconds),
            await memory_race(tmp, seconds),
            await deep_tree(tmp),
        ]


def run() -> list[dict[str, Any]]:
    if sys.platform == "win32":
        return []
    return asyncio.run(main(SECONDS))


if __name__ == "__main__":
    for row in run():
        print(row)
