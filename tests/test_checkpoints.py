"""Checkpoints: the undo layer of ``agentica code`` over real files (``FilesystemBackend``), with
a scripted deep agent, concurrent writes, a property test, snapshots and the escape guarantees."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentica.deep import Checkpoints, DeepAgent, UndoReport
from agentica.deep.backends import CompositeBackend, FilesystemBackend, StateBackend
from agentica.deep.backends.paths import normalize_path
from agentica.errors import UsageError
from agentica.testing import ScriptedModel, call, tool_calls
from agentica.testing.conformance import (
    FILE_BACKEND_CHECKS,
    OUTSIDE_TEXT,
    FileBackendCase,
    FileBackendCheck,
    NotApplicable,
    Symlinks,
)
from agentica.tools.files import BackendError, FileBackend

needs_symlinks = pytest.mark.skipif(sys.platform == "win32", reason="no symbolic links")


def tree(root: Path) -> dict[str, bytes | None]:
    """Every folder (``None``) and file (its bytes) under ``root``, by relative path."""
    out: dict[str, bytes | None] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = Path(path).read_bytes()
    return out


def checkpoints(root: Path, **limits: int) -> Checkpoints:
    root.mkdir(exist_ok=True)
    return Checkpoints(FilesystemBackend(root), **limits)


# ------------------------------------------------------------------------------ end to end


async def test_a_deep_agent_s_turns_are_undone_one_by_one(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("keep\nold value\nkeep\n")
    backend = Checkpoints(FilesystemBackend(tmp_path))
    model = ScriptedModel([
        tool_calls(call("write_file", path="a.txt", content="one\n")),
        tool_calls(call("edit_file", path="b.txt", old_string="old value", new_string="new")),
        "Created a.txt and edited b.txt.",
        tool_calls(call("edit_file", path="a.txt", old_string="one", new_string="two")),
        tool_calls(call("edit_file", path="a.txt", old_string="two", new_string="three")),
        "a.txt now says three.",
    ])  # fmt: skip
    agent = DeepAgent(
        model=model, workspace=tmp_path, backend=backend, shell=False, todos=False,
        subagents=False, answer_check=False, heartbeat=False,
    )  # fmt: skip
    assert backend.begin_turn("create a, edit b") == 1
    await agent.run("Create a.txt and change the value in b.txt")
    assert backend.begin_turn("count up") == 2
    await agent.run("Make a.txt say three")
    assert (tmp_path / "a.txt").read_text() == "three\n"
    assert backend.changed() == ["/a.txt", "/b.txt"]
    assert await backend.diff() == (
        "--- /dev/null\n"
        "+++ b/a.txt\n"
        "@@ -0,0 +1 @@\n"
        "+three\n"
        "--- a/b.txt\n"
        "+++ b/b.txt\n"
        "@@ -1,3 +1,3 @@\n"
        " keep\n"
        "-old value\n"
        "+new\n"
        " keep\n"
    )

    report = await backend.undo()
    assert report == UndoReport(2, "count up", restored=("/a.txt",))
    assert (tmp_path / "a.txt").read_text() == "one\n"

    report = await backend.undo()
    assert report == UndoReport(1, "create a, edit b", ("/b.txt",), deleted=("/a.txt",))
    assert str(report) == "undid turn 1 (create a, edit b)\nrestored: /b.txt\ndeleted: /a.txt"
    assert sorted(os.listdir(tmp_path)) == ["b.txt"]
    assert (tmp_path / "b.txt").read_text() == "keep\nold value\nkeep\n"
    assert backend.changed() == []
    assert await backend.diff() == ""

    nothing = await backend.undo()
    assert nothing.turn is None
    assert str(nothing) == "nothing to undo"


# ------------------------------------------------------------------------------ recording


async def test_writes_before_the_first_turn_are_turn_zero_and_the_first_write_keeps_the_original(
    tmp_path: Path,
) -> None:
    cp = checkpoints(tmp_path)
    (tmp_path / "x.txt").write_text("original")
    assert cp.turn == 0
    await cp.write("x.txt", "first")
    await cp.write("/x.txt", "second")
    assert cp.begin_turn("later") == 1 and cp.turn == 1
    await cp.write("/x.txt", "third")
    assert (await cp.undo()).turn == 1
    assert (tmp_path / "x.txt").read_text() == "second"
    report = await cp.undo()
    assert (report.turn, report.label, report.restored) == (0, "", ("/x.txt",))
    assert (tmp_path / "x.txt").read_text() == "original"


async def test_concurrent_writes_of_one_turn_are_recorded_once(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    (tmp_path / "shared.txt").write_text("before\n")
    cp.begin_turn("many at once")
    await asyncio.gather(
        *(cp.write("shared.txt", f"version {i}\n") for i in range(20)),
        *(cp.write(f"new/f{i}.txt", f"{i}\n") for i in range(10)),
    )
    changed = cp.changed()
    assert changed[0] == "/shared.txt" and len(changed) == 11 and len(set(changed)) == 11
    assert (tmp_path / "shared.txt").read_text() == "version 19\n"
    report = await cp.undo()
    assert report.restored == ("/shared.txt",) and len(report.deleted) == 10
    assert tree(tmp_path) == {"shared.txt": b"before\n"}


async def test_undo_and_recording_share_the_lock(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    cp.begin_turn("one")
    await cp.write("a.txt", "a")
    cp.begin_turn("two")
    # a write started while undo runs waits for it, and lands in the current turn
    undo, write = await asyncio.gather(cp.undo(), cp.write("b.txt", "b"))
    assert undo.turn == 1 and undo.deleted == ("/a.txt",) and write.path == "/b.txt"
    assert cp.changed() == ["/b.txt"]


async def test_a_refused_write_records_nothing(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for path, content in [("folder", "x"), ("file.txt/inside", "x"), ("/", "x"), ("b", "\x00")]:
        with pytest.raises(BackendError):
            await cp.write(path, content)
    assert cp.changed() == []
    assert (await cp.undo()).turn is None


@needs_symlinks
async def test_escapes_are_refused_by_the_inner_backend_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    cp = checkpoints(root)
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "dir").symlink_to(outside, target_is_directory=True)
    for path in ["../x", "../outside/secret.txt", "link.txt", "dir/secret.txt", str(root / "a")]:
        with pytest.raises(BackendError):
            await cp.write(path, "overwritten\n")
    assert cp.changed() == []
    assert tree(outside) == {"secret.txt": b"secret\n"}
    assert not (tmp_path / "x").exists()
    assert (await cp.undo()).turn is None


@needs_symlinks
async def test_undo_deletes_through_links_only_inside_the_root(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path / "root")
    (tmp_path / "root" / "real").mkdir()
    (tmp_path / "root" / "alias").symlink_to("real", target_is_directory=True)
    cp.begin_turn("through a link")
    await cp.write("alias/new.txt", "x")
    assert (tmp_path / "root" / "real" / "new.txt").read_text() == "x"
    assert (await cp.undo()).deleted == ("/alias/new.txt",)
    assert os.listdir(tmp_path / "root" / "real") == []


# ------------------------------------------------------------------------------ undo


async def test_undo_removes_the_folders_a_new_file_made_and_only_those(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    (tmp_path / "src").mkdir()
    cp.begin_turn("deep")
    await cp.write("src/pkg/sub/mod.py", "x = 1\n")
    await cp.write("src/pkg/other.py", "y = 2\n")
    await cp.write("docs/a.md", "# A\n")
    (tmp_path / "docs" / "made-by-a-command.txt").write_text("stay\n")
    report = await cp.undo()
    assert report.deleted == ("/src/pkg/sub/mod.py", "/src/pkg/other.py", "/docs/a.md")
    assert tree(tmp_path) == {
        "src": None, "docs": None, "docs/made-by-a-command.txt": b"stay\n",
    }  # fmt: skip


async def test_a_binary_file_written_over_is_given_back_its_bytes(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    blob = bytes(range(256)) * 4
    (tmp_path / "image.bin").write_bytes(blob)
    (tmp_path / "latin1.txt").write_bytes("café\n".encode("latin-1"))
    cp.begin_turn("clobber")
    await cp.write("image.bin", "text now\n")
    await cp.write("latin1.txt", "cafe\n")
    diff = await cp.diff()
    assert diff.splitlines() == [
        "Binary files a/image.bin and b/image.bin differ",
        "Binary files a/latin1.txt and b/latin1.txt differ",
    ]
    report = await cp.undo()
    assert report.restored == ("/image.bin", "/latin1.txt") and report.problems == ()
    assert (tmp_path / "image.bin").read_bytes() == blob
    assert (tmp_path / "latin1.txt").read_bytes() == "café\n".encode("latin-1")


async def test_a_backend_that_cannot_delete_gets_new_files_emptied_and_says_so() -> None:
    files: dict[str, Any] = {"/kept.md": {"content": "kept\n", "modified": 1.0}}
    cp = Checkpoints(StateBackend(files))
    cp.begin_turn("state")
    await cp.write("/new.md", "new\n")
    await cp.write("/kept.md", "changed\n")
    report = await cp.undo()
    assert report.restored == ("/kept.md",) and report.deleted == ()
    assert report.problems == (
        "/new.md did not exist before the turn, but the backend cannot delete files: it was "
        "emptied instead",
    )
    assert files["/new.md"]["content"] == "" and files["/kept.md"]["content"] == "kept\n"


class DeletingState(StateBackend):
    """A backend with the optional ``delete`` and bytes methods (text stands in for bytes)."""

    async def delete(self, path: str) -> None:
        del self.files[normalize_path(path)]

    async def read_bytes(self, path: str) -> bytes:
        return (await self.read(path)).encode()

    async def write_bytes(self, path: str, data: bytes) -> None:
        await self.write(path, data.decode())


async def test_the_backend_s_own_delete_is_used_also_behind_a_composite_route() -> None:
    inner = DeletingState({})
    cp = Checkpoints(CompositeBackend(StateBackend({}), {"/mem": inner}))
    cp.begin_turn("routed")
    await cp.write("/mem/notes.md", "note\n")
    assert inner.files
    assert (await cp.undo()).deleted == ("/mem/notes.md",)
    assert inner.files == {}


async def test_large_files_and_a_full_memory_are_unrestorable_and_undo_says_why(
    tmp_path: Path,
) -> None:
    cp = checkpoints(tmp_path, max_file_bytes=100, max_total_bytes=150)
    (tmp_path / "big.txt").write_text("b" * 101)
    (tmp_path / "m1.txt").write_text("1" * 100)
    (tmp_path / "m2.txt").write_text("2" * 100)
    cp.begin_turn("limits")
    for name in ("big.txt", "m1.txt", "m2.txt"):
        await cp.write(name, "small\n")
    assert "/big.txt: changed; its content before was not kept: it is 101 bytes" in (
        await cp.diff()
    )
    report = await cp.undo()
    assert report.restored == ("/m1.txt",)
    assert report.problems == (
        "/big.txt was not restored: it is 101 bytes, over the 100-byte limit of what undo keeps",
        "/m2.txt was not restored: undo's memory for this session (150 bytes) was full",
    )
    assert (tmp_path / "m1.txt").read_text() == "1" * 100
    assert (tmp_path / "m2.txt").read_text() == "small\n"
    cp.begin_turn("memory is free again")
    await cp.write("m2.txt", "again\n")
    assert (await cp.undo()).restored == ("/m2.txt",)


async def test_a_restore_refused_by_the_backend_is_a_problem_not_an_exception(
    tmp_path: Path,
) -> None:
    cp = checkpoints(tmp_path)
    cp.begin_turn("then a command replaced the file by a folder")
    await cp.write("a.txt", "x")
    (tmp_path / "b.txt").write_text("b")
    await cp.write("b.txt", "changed")
    (tmp_path / "b.txt").unlink()
    (tmp_path / "b.txt").mkdir()
    report = await cp.undo()
    assert report.deleted == ("/a.txt",)
    assert len(report.problems) == 1 and report.problems[0].startswith(
        "/b.txt could not be restored: /b.txt is a directory"
    )


# ------------------------------------------------------------------------------ diff


async def test_diff_shows_new_changed_and_deleted_files_in_path_order_and_cuts_long_ones(
    tmp_path: Path,
) -> None:
    cp = checkpoints(tmp_path, max_diff_lines=10)
    (tmp_path / "z.txt").write_text("no newline")
    (tmp_path / "gone.txt").write_text("bye\n")
    (tmp_path / "same.txt").write_text("same\n")
    await cp.write("z.txt", "no newline\nmore")
    await cp.write("long/a.txt", "".join(f"{i}\n" for i in range(50)))
    await cp.write("gone.txt", "bye\n")
    await cp.write("same.txt", "other\n")
    await cp.write("same.txt", "same\n")
    (tmp_path / "gone.txt").unlink()
    diff = await cp.diff()
    assert diff == await cp.diff()
    assert diff.split("\n") == [
        "--- a/gone.txt",
        "+++ /dev/null",
        "@@ -1 +0,0 @@",
        "-bye",
        "--- /dev/null",
        "+++ b/long/a.txt",
        "@@ -0,0 +1,50 @@",
        "+0",
        "+1",
        "+2",
        "+3",
        "+4",
        "+5",
        "+6",
        "# ... 43 more lines of the diff of /long/a.txt not shown",
        "--- a/z.txt",
        "+++ b/z.txt",
        "@@ -1 +1,2 @@",
        "-no newline",
        "\\ No newline at end of file",
        "+no newline",
        "+more",
        "\\ No newline at end of file",
        "",
    ]


async def test_diff_of_an_empty_new_file_says_so(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    await cp.write("empty.txt", "")
    assert await cp.diff() == "# /empty.txt: an empty file created\n"


# ------------------------------------------------------------------------------ snapshots


async def test_a_snapshot_keeps_undo_across_processes(tmp_path: Path) -> None:
    cp = checkpoints(tmp_path)
    (tmp_path / "text.txt").write_text("text\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff")
    await cp.write("text.txt", "zero\n")
    cp.begin_turn("first")
    await cp.write("text.txt", "one\n")
    await cp.write("blob.bin", "one\n")
    await cp.write("dir/new.txt", "one\n")
    cp.begin_turn("empty")
    data = json.loads(json.dumps(cp.snapshot()))
    again = Checkpoints.restore(FilesystemBackend(tmp_path), data)
    assert again.snapshot() == data
    assert again.changed() == cp.changed() == ["/text.txt", "/blob.bin", "/dir/new.txt"]
    assert again.turn == 2 and again.begin_turn("next") == 3
    assert await again.diff() == await cp.diff()
    assert (await again.undo()).label == "first"
    assert (await again.undo()).turn == 0
    assert tree(tmp_path) == {"text.txt": b"text\n", "blob.bin": b"\x00\xff"}
    for bad in [{}, {"version": 2, "next": 1, "turns": []}, {**data, "turns": [{"number": 1}]}]:
        with pytest.raises(UsageError, match="not a Checkpoints snapshot"):
            Checkpoints.restore(FilesystemBackend(tmp_path), bad)


# ------------------------------------------------------------------------------ property

NAMES = ["a.txt", "b.txt", "d/c.txt", "d/e/f.txt", "n/m/new.txt", "bin.dat", "d"]
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
TEXT = st.text(CHARS, max_size=30)
TURNS = st.lists(st.lists(st.tuples(st.sampled_from(NAMES), TEXT), max_size=5), max_size=4)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(turns=TURNS, before_first_turn=st.lists(st.tuples(st.sampled_from(NAMES), TEXT)))
async def test_undoing_every_turn_restores_the_initial_tree_exactly(
    turns: list[list[tuple[str, str]]], before_first_turn: list[tuple[str, str]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "d" / "e").mkdir(parents=True)
        (root / "a.txt").write_text("a\r\nno newline")
        (root / "d" / "c.txt").write_text("c\n")
        (root / "bin.dat").write_bytes(b"\x00\x01\xfe\xff")
        initial = tree(root)
        cp = Checkpoints(FilesystemBackend(root))
        for number, writes in enumerate([before_first_turn, *turns]):
            if number:
                cp.begin_turn(f"turn {number}")
            for name, text in writes:
                try:
                    await cp.write(name, text)
                except BackendError:
                    assert name == "d"  # a folder
        undone = 0
        while (await cp.undo()).turn is not None:
            undone += 1
        assert undone <= len(turns) + 1
        assert cp.changed() == []
        assert tree(root) == initial


# ------------------------------------------------------------------------------ conformance


class Outside:
    """Links from the root to files and folders next to it (``Symlinks`` hooks)."""

    def __init__(self, root: Path, outside: Path) -> None:
        self.root, self.outside, self.count = root, outside, 0

    async def link_outside(self, link: str, directory: bool) -> None:
        self.count += 1
        target = self.outside / f"target-{self.count}"
        target.parent.mkdir(parents=True, exist_ok=True)
        if directory:
            target.mkdir()
            (target / "secret.txt").write_text(OUTSIDE_TEXT)
        else:
            target.write_text(OUTSIDE_TEXT)
        path = self.root / link.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target, target_is_directory=directory)

    async def outside_files(self) -> dict[str, str]:
        return {
            p.relative_to(self.outside).as_posix(): p.read_text()
            for p in sorted(self.outside.rglob("*"))
            if p.is_file()
        }

    async def put_bytes(self, virtual: str, data: bytes) -> None:
        path = self.root / virtual.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_bytes, data)


@pytest.mark.parametrize("check", FILE_BACKEND_CHECKS, ids=lambda check: check.__name__)
async def test_checkpoints_over_a_filesystem_backend_conforms(
    tmp_path: Path, check: FileBackendCheck
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    hooks = Outside(root, tmp_path / "outside")
    inner = FilesystemBackend(root, ripgrep=False)
    backend: FileBackend = Checkpoints(inner)
    links = Symlinks(hooks.link_outside, hooks.outside_files)
    backend_case = FileBackendCase(
        backend,
        inner.max_write_bytes,
        max_read_bytes=inner.max_read_bytes,
        put_bytes=hooks.put_bytes,
        symlinks=None if sys.platform == "win32" else links,
    )
    try:
        await check(backend_case)
    except NotApplicable as exc:
        pytest.skip(str(exc))
