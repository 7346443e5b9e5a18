"""Races and deep trees: links swapped in while files are searched, read and written; deep chains.

Another process swaps folders and files for symbolic links to outside (or to another user's
folder) and back, in a loop, while ``grep`` (with ripgrep), ``read`` and workspace memory run
again and again: no outside content may ever come back and nothing may be written outside.
A folder chain 1,100 deep is globbed and searched without ``RecursionError``.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from agentica.deep.backends import BackendError, FilesystemBackend
from agentica.memory import Workspace, WorkspaceError
from benchmarks.hostile_races import (
    DEPTH,
    SECRET,
    files,
    make_chain,
    make_tree,
    make_workspace,
    remove_chain,
    start_swapping,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and openat")

RACE_SECONDS = 3.0


@dataclass
class Findings:
    """What the loops saw: outside content or untyped errors (``seen``), and rounds per loop."""

    seen: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"grep": 0, "read": 0, "memory": 0})


async def grep_loop(fs: FilesystemBackend, deadline: float, found: Findings) -> None:
    while time.monotonic() < deadline:
        for line in await fs.grep("needle"):
            if SECRET in line.text:
                found.seen.append(f"grep {line.path}: {line.text}")
        found.counts["grep"] += 1


async def read_loop(fs: FilesystemBackend, deadline: float, found: Findings) -> None:
    while time.monotonic() < deadline:
        for path in ("/f.txt", "/d3/x.txt", "/d3/f1.txt"):
            try:
                text = await fs.read(path)
            except BackendError:
                continue
            except Exception as exc:  # an untyped error is a finding too
                found.seen.append(f"read {path}: {exc!r}")
                continue
            if SECRET in text:
                found.seen.append(f"read {path}: {text}")
        found.counts["read"] += 1


async def memory_loop(ws: Workspace, deadline: float, user: str, found: Findings) -> None:
    while time.monotonic() < deadline:
        for read in (
            ws.daily_notes(user),
            ws.user_file(user, "MEMORY.md"),
            ws.context_prompt(user, budget_tokens=500),
        ):
            try:
                text = await read
            except WorkspaceError:
                continue
            except Exception as exc:
                found.seen.append(f"memory read: {exc!r}")
                continue
            if SECRET in text:
                found.seen.append(f"memory: {text}")
        for write in (ws.write_note(user, "they wrote"), ws.save_memory(user, "x")):
            try:
                await write
            except WorkspaceError:
                pass
            except Exception as exc:
                found.seen.append(f"memory write: {exc!r}")
        found.counts["memory"] += 1


async def test_links_swapped_in_a_loop_never_show_outside_content(tmp_path: Path) -> None:
    if shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed: the race is about its path")
    root, outside = tmp_path / "root", tmp_path / "outside"
    await asyncio.to_thread(make_tree, root, outside)
    fs = FilesystemBackend(root, ripgrep=True)
    # workspace memory: mallory's notes folder swapped for bob's, and eve's whole folder
    ws_root = tmp_path / "ws"
    ws, bob = await make_workspace(ws_root)
    bob_before = await asyncio.to_thread(files, bob)
    outside_before = await asyncio.to_thread(files, outside)
    found = Findings()
    pairs = [
        (root / "d3", outside),
        (root / "f.txt", outside / "x.txt"),
        (ws_root / "users" / "mallory" / "memory", bob / "memory"),
        (ws_root / "users" / "eve", bob),
    ]
    swapper = await start_swapping(RACE_SECONDS, pairs)
    deadline = time.monotonic() + RACE_SECONDS
    await asyncio.gather(
        grep_loop(fs, deadline, found),
        read_loop(fs, deadline, found),
        memory_loop(ws, deadline, "mallory", found),
        memory_loop(ws, deadline, "eve", found),
    )
    out, _ = await swapper.communicate()
    swaps = int(out)
    assert swaps > 100 and min(found.counts.values()) > 5, (swaps, found.counts)
    assert found.seen == [], (
        f"{len(found.seen)} outside reads or untyped errors, such as "
        f"{sorted(set(s[:60] for s in found.seen))}"
    )
    assert await asyncio.to_thread(files, bob) == bob_before  # nothing written into bob's
    assert await asyncio.to_thread(files, outside) == outside_before


@pytest.fixture
async def chain(tmp_path: Path) -> AsyncIterator[Path]:
    root = tmp_path / "root"
    root.mkdir()
    try:
        await asyncio.to_thread(make_chain, root)
        yield root
    finally:
        await asyncio.to_thread(remove_chain, root)


async def test_a_folder_chain_1100_deep_is_globbed_and_searched(chain: Path) -> None:
    root = chain
    (root / "top.txt").write_text("top needle\n")
    leaf = "/" + "/".join(["a"] * DEPTH) + "/leaf.txt"
    assert len(leaf) < 4096  # a valid path: under PATH_MAX
    for ripgrep in (False, True):
        fs = FilesystemBackend(root, ripgrep=ripgrep)
        for _ in range(2):  # and again: nothing is broken after the first walk
            found = await fs.glob("**/*.txt")
            assert [f.path for f in found] == [leaf, "/top.txt"]
            lines = await fs.grep("needle")
            assert [(g.path, g.text) for g in lines] == [
                (leaf, "deep needle"),
                ("/top.txt", "top needle"),
            ]
        assert await fs.read(leaf) == "deep needle\n"
        assert [f.path for f in await fs.glob("a/*")] == []
    # the walk keeps few descriptors open however deep the tree is: it works with 200
    script = (
        "import asyncio, resource, sys\n"
        "from agentica.deep.backends import FilesystemBackend\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
        "fs = FilesystemBackend(sys.argv[1], ripgrep=False)\n"
        "found = asyncio.run(fs.glob('**/*.txt'))\n"
        "lines = asyncio.run(fs.grep('needle'))\n"
        "print(len(found), len(lines))\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(root), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0 and out.split() == [b"2", b"2"]
