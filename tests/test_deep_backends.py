"""File backends of the deep-agent harness: paths, escapes, limits, routing, persistence, grep."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agentica.deep.backends import (
    BackendError,
    CompositeBackend,
    FileBackend,
    FileInfo,
    FilesystemBackend,
    GrepLine,
    StateBackend,
    StoreBackend,
    normalize_path,
)
from agentica.errors import UsageError
from agentica.storage import MAX_VARIABLE_BYTES, Storage, open_storage

RG = shutil.which("rg")
needs_rg = pytest.mark.skipif(RG is None, reason="ripgrep (rg) is not installed")
posix_only = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and FIFOs")


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    store = open_storage(str(tmp_path / "s.db"))
    yield store
    await store.aclose()


BackendFactory = Callable[[Path, Storage], FileBackend]

KINDS: dict[str, BackendFactory] = {
    "state": lambda tmp, storage: StateBackend({}),
    "store": lambda tmp, storage: StoreBackend(storage, "alice", "agent"),
    "fs": lambda tmp, storage: FilesystemBackend(tmp / "root"),
    "composite": lambda tmp, storage: CompositeBackend(
        StateBackend({}), {"/mem/": StoreBackend(storage, "alice", "agent")}
    ),
}


@pytest.fixture(params=sorted(KINDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path, storage: Storage) -> FileBackend:
    return KINDS[request.param](tmp_path, storage)


# ------------------------------------------------------------------------------ every backend


async def test_every_backend_writes_reads_lists_and_stats(backend: FileBackend) -> None:
    assert isinstance(backend, FileBackend)
    info = await backend.write("notes/todo.md", "- one\n- two\n")  # relative: from "/"
    assert info == FileInfo("/notes/todo.md", False, 12, info.modified) and info.modified > 0
    await backend.write("/notes/deep/x.py", "print('x')\n")
    assert await backend.read("/notes/./deep/../todo.md") == "- one\n- two\n"
    listing = await backend.ls("/notes")
    assert [(e.path, e.is_dir) for e in listing] == [
        ("/notes/deep", True),
        ("/notes/todo.md", False),
    ]
    assert "notes" in [e.name for e in await backend.ls("/")]
    assert (await backend.ls("/notes/todo.md"))[0].size == 12  # ls of a file: the file
    stat_dir = await backend.stat("/notes/deep/")
    assert stat_dir is not None and stat_dir.is_dir and stat_dir.path == "/notes/deep"
    assert await backend.stat("/notes/missing.md") is None
    await backend.write("/notes/todo.md", "replaced")
    assert await backend.read("notes/todo.md") == "replaced"


async def test_every_backend_explains_missing_files_and_wrong_kinds(backend: FileBackend) -> None:
    await backend.write("/src/a.py", "x = 1\n")
    with pytest.raises(BackendError, match=r"no file /src/b\.py; call ls\('/src'\)"):
        await backend.read("/src/b.py")
    with pytest.raises(BackendError, match=r"/src is a directory.*ls\('/src'\)"):
        await backend.read("/src")
    with pytest.raises(BackendError, match="is a directory"):
        await backend.write("/src", "text")
    with pytest.raises(BackendError, match=r"/src/a\.py is a file"):
        await backend.write("/src/a.py/inner.txt", "text")
    with pytest.raises(BackendError, match=r"nothing is at|no directory"):
        await backend.ls("/nowhere")
    with pytest.raises(BackendError, match="NUL"):
        await backend.write("/bin.dat", "a\x00b")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("../etc/passwd", "goes above the root"),
        ("/a/../../x", "goes above the root"),
        ("a\x00b", "control or invisible character U\\+0000"),
        ("a\nb.txt", "control or invisible character U\\+000A"),
        ("/a\u202etxt.exe", "U\\+202E"),  # right-to-left override
        ("/a\u200bb", "U\\+200B"),  # zero-width space
        ("/x\uff0f..\uff0fy", "U\\+FF0F FULLWIDTH SOLIDUS, which looks like '/'"),
        ("/\uff0e\uff0e/x", "U\\+FF0E FULLWIDTH FULL STOP, which looks like '.'"),
        ("/a\u2215b", "U\\+2215 DIVISION SLASH"),
        ("/cafe\u0301.txt", "normalisation \\(NFKC\\).*'/café.txt'"),  # combining accent
        ("/\ufb01le.txt", "normalisation \\(NFKC\\).*'/file.txt'"),  # the ligature fi
        ("C:\\Windows\\x", "'\\\\'"),
        ("C:/Windows", "Windows drive"),
        ("~/secrets", "'~'"),
    ],
)
async def test_every_backend_refuses_escapes_and_unicode_tricks(
    backend: FileBackend, path: str, message: str
) -> None:
    with pytest.raises(BackendError, match=message):
        await backend.write(path, "x")
    with pytest.raises(BackendError, match=message):
        await backend.read(path)
    assert await backend.glob("**") == []  # nothing was written anywhere


def test_the_old_import_path_gives_the_same_objects() -> None:
    """``agentica.deep.backends`` became a package; its names and the interface moved to
    ``agentica.tools.files`` are the same objects."""
    import agentica.deep.backends as backends
    import agentica.tools.files as interface

    assert sorted(backends.__all__) == [
        "BackendError", "CompositeBackend", "FileBackend", "FileInfo", "FilesystemBackend",
        "GrepLine", "StateBackend", "StoreBackend", "normalize_path",
    ]  # fmt: skip
    for name in interface.__all__:
        assert getattr(backends, name) is getattr(interface, name)
    assert BackendError is interface.BackendError and FileBackend is interface.FileBackend


def test_normalize_path_gives_one_canonical_form() -> None:
    assert normalize_path("") == "/"
    assert normalize_path("  a//b/./c/  ") == "/a/b/c"
    assert normalize_path("/a/b/../../c") == "/c"
    assert normalize_path("/café/ünï.txt") == "/café/ünï.txt"  # NFC letters are fine
    assert normalize_path("/日本語/メモ.md") == "/日本語/メモ.md"
    with pytest.raises(BackendError, match="too long"):
        normalize_path("/" + "x" * 300)


async def test_every_backend_globs_and_greps_in_path_order(backend: FileBackend) -> None:
    await backend.write("/b.py", "import os\nprint(os.sep)\n")
    await backend.write("/a/z.py", "def main():\n    return 1\n")
    await backend.write("/a/notes.md", "main idea\n")
    await backend.write("/a-b.py", "main = 2\n")
    found = await backend.glob("**/*.py")
    assert [f.path for f in found] == ["/a/z.py", "/a-b.py", "/b.py"]
    assert [f.path for f in await backend.glob("*.py")] == ["/a-b.py", "/b.py"]
    assert [f.path for f in await backend.glob("*.{md,py}", "/a")] == ["/a/notes.md", "/a/z.py"]
    assert [f.path for f in await backend.glob("**", "/a", limit=1)] == ["/a/notes.md"]
    lines = await backend.grep("main")
    assert lines == [
        GrepLine("/a/notes.md", 1, "main idea"),
        GrepLine("/a/z.py", 1, "def main():"),
        GrepLine("/a-b.py", 1, "main = 2"),
    ]
    assert [g.path for g in await backend.grep("main", glob="*.py")] == ["/a/z.py", "/a-b.py"]
    assert [g.path for g in await backend.grep("main", glob="!*.py")] == ["/a/notes.md"]
    assert await backend.grep("main", "/a/z.py", context=1) == [
        GrepLine("/a/z.py", 1, "def main():"),
        GrepLine("/a/z.py", 2, "    return 1", match=False),
    ]
    assert await backend.grep("nothing-like-this") == []
    with pytest.raises(BackendError, match=r"invalid regular expression.*backslash"):
        await backend.grep("print(")
    with pytest.raises(BackendError, match="is a file, not a directory"):
        await backend.glob("*", "/b.py")


# ------------------------------------------------------------------------------ state


async def test_state_backend_keeps_files_in_the_callers_json_dict() -> None:
    files: dict[str, object] = {"/junk": 42, "/broken": {"content": 1}}  # ignored entries
    backend = StateBackend(files, max_file_bytes=100)
    await backend.write("/dir/../a.txt", "héllo")
    entry = files["/a.txt"]
    assert isinstance(entry, dict) and entry["content"] == "héllo"
    assert isinstance(entry["modified"], float)
    assert json.loads(json.dumps(files))["/a.txt"]["content"] == "héllo"  # JSON-able
    assert [e.path for e in await backend.ls("/")] == ["/a.txt"]
    assert (await backend.ls("/"))[0].size == 6  # bytes, not characters
    with pytest.raises(BackendError, match="101 bytes; the limit is 100 bytes"):
        await backend.write("/big.txt", "x" * 101)
    assert "/big.txt" not in files
    # another backend over the same dict sees the same files
    assert await StateBackend(files).read("a.txt") == "héllo"


# ------------------------------------------------------------------------------ store


async def test_store_backend_persists_across_objects_and_storage_reopens(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    first = open_storage(db)
    try:
        await StoreBackend(first, "alice", "agent").write("/memories/prefs.md", "likes tea\n")
    finally:
        await first.aclose()
    second = open_storage(db)
    try:
        again = StoreBackend(second, "alice", "agent")
        assert await again.read("/memories/prefs.md") == "likes tea\n"
        assert [(e.path, e.size) for e in await again.ls("/memories")] == [
            ("/memories/prefs.md", 10)
        ]
        assert [g.text for g in await again.grep("tea")] == ["likes tea"]
    finally:
        await second.aclose()


async def test_store_backend_isolates_users_and_namespaces(storage: Storage) -> None:
    alice = StoreBackend(storage, "alice", "agent")
    await alice.write("/secret.txt", "alice's")
    others = [
        StoreBackend(storage, "bob", "agent"),
        StoreBackend(storage, "alice", "other-agent"),
        StoreBackend(storage, "alice", "agent/.."),  # a namespace is a name, never a path
        StoreBackend(storage, "alice", "../agent"),
    ]
    for other in others:
        assert await other.ls("/") == []
        assert await other.stat("/secret.txt") is None
        with pytest.raises(BackendError, match=r"no file /secret\.txt"):
            await other.read("/secret.txt")
        for escape in ("/../alice/secret.txt", "../../agent/secret.txt"):
            with pytest.raises(BackendError, match="goes above the root"):
                await other.read(escape)
        assert await other.grep("alice") == []
    await StoreBackend(storage, "bob", "agent").write("/secret.txt", "bob's")
    assert await alice.read("/secret.txt") == "alice's"  # bob's write did not touch alice's


async def test_store_backend_respects_size_limits_with_clear_errors(storage: Storage) -> None:
    small = StoreBackend(storage, "alice", "agent", max_file_bytes=50)
    with pytest.raises(BackendError, match="51 bytes; the limit is 50 bytes"):
        await small.write("/a.txt", "y" * 51)
    huge = StoreBackend(storage, "alice", "agent", max_file_bytes=10**9)
    assert huge.max_file_bytes <= MAX_VARIABLE_BYTES // 2  # clamped to what storage holds
    # within the byte limit, but JSON escapes make it larger than a stored value may be
    escaped = "\x01" * 2_000_000
    with pytest.raises(BackendError, match=r"could not save /esc\.txt in the persistent store"):
        await huge.write("/esc.txt", escaped)
    with pytest.raises(BackendError, match="too long for the persistent store"):
        await huge.write("/" + "d/" * 130 + "x.txt", "x")
    assert await huge.ls("/") == []
    with pytest.raises(UsageError, match="namespace must be a string of 1-200 characters"):
        StoreBackend(storage, "alice", "")


# ------------------------------------------------------------------------------ filesystem


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A root and, next to it, an outside folder holding a secret."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    (outside / "deep").mkdir(parents=True)
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (outside / "deep" / "x.txt").write_text("TOP SECRET deep\n")
    (root / "sub" / "a.txt").write_text("hello\n")
    return root, outside


@posix_only
async def test_filesystem_refuses_links_out_of_the_root(tree: tuple[Path, Path]) -> None:
    root, outside = tree
    (root / "file_link").symlink_to(outside / "secret.txt")  # absolute, to a file
    (root / "dir_link").symlink_to(outside)  # absolute, to a folder
    (root / "sub" / "up").symlink_to(Path("..") / ".." / "outside")  # relative, climbing out
    (root / "sub" / "inner").symlink_to("../sub")  # stays inside: followed
    fs = FilesystemBackend(root)
    for path in ("/file_link", "/dir_link/secret.txt", "/sub/up/secret.txt",
                 "/dir_link/deep/x.txt", "/sub/inner/up/deep/x.txt"):  # fmt: skip
        with pytest.raises(BackendError, match="points outside the file area"):
            await fs.read(path)
    with pytest.raises(BackendError, match="points outside"):
        await fs.write("/file_link", "overwritten")
    with pytest.raises(BackendError, match="points outside"):
        await fs.write("/dir_link/new.txt", "planted")
    with pytest.raises(BackendError, match="points outside"):
        await fs.write("/sub/up/deep/new.txt", "planted")  # a link in an intermediate folder
    with pytest.raises(BackendError, match="points outside"):
        await fs.ls("/dir_link")
    with pytest.raises(BackendError, match="points outside"):
        await fs.stat("/sub/up/secret.txt")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(p.name for p in outside.rglob("*")) == ["deep", "secret.txt", "x.txt"]
    # a link that stays inside works, and listings show only what can be used
    assert await fs.read("/sub/inner/a.txt") == "hello\n"
    assert [e.name for e in await fs.ls("/")] == ["sub"]
    assert [e.name for e in await fs.ls("/sub")] == ["a.txt", "inner"]
    # walks never enter links: nothing of the outside folder is found
    assert [f.path for f in await fs.glob("**/*")] == ["/sub/a.txt"]
    for ripgrep in (False, True):
        searcher = FilesystemBackend(root, ripgrep=ripgrep)
        assert await searcher.grep("SECRET") == []
        assert [g.path for g in await searcher.grep("hello")] == ["/sub/a.txt"]


@posix_only
async def test_filesystem_link_loops_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    fs = FilesystemBackend(root)
    with pytest.raises(BackendError, match="too many levels of symbolic links"):
        await fs.read("/a")
    assert await fs.ls("/") == []


async def test_filesystem_maps_absolute_paths_into_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fs = FilesystemBackend(root)
    await fs.write("/etc/passwd", "inside only\n")  # a virtual path: lands inside the root
    assert (root / "etc" / "passwd").read_text() == "inside only\n"
    with pytest.raises(BackendError, match=r"path of the host machine.*use '/etc/passwd'"):
        await fs.read(str(root / "etc" / "passwd"))
    with pytest.raises(BackendError, match="path of the host machine"):
        await fs.write(str(root / "x.txt"), "x")
    assert not (root / "x.txt").exists()


async def test_filesystem_size_limits_and_binary_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "big.log").write_text("line\n" * 400)  # 2000 bytes
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (root / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    fs = FilesystemBackend(root, max_read_bytes=1000, max_write_bytes=1000)
    with pytest.raises(BackendError, match=r"2000 bytes, more than the 1000-byte read limit.*grep"):
        await fs.read("/big.log")
    with pytest.raises(BackendError, match="binary file"):
        await fs.read("/image.png")
    with pytest.raises(BackendError, match="not UTF-8 text"):
        await fs.read("/latin1.txt")
    with pytest.raises(BackendError, match="1001 bytes; the limit is 1000 bytes"):
        await fs.write("/new.txt", "z" * 1001)
    assert not (root / "new.txt").exists()
    assert (await fs.write("/ok.txt", "é" * 500)).size == 1000  # the limit counts bytes
    # grep skips binary files and files over the limit
    for ripgrep in (False, True):
        assert (
            await FilesystemBackend(root, max_read_bytes=1000, ripgrep=ripgrep).grep(
                "line|PNG|IHDR"
            )
            == []
        )


@posix_only
async def test_filesystem_refuses_special_files_without_hanging(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    os.mkfifo(root / "pipe")
    fs = FilesystemBackend(root)
    with pytest.raises(BackendError, match="not a regular file"):
        await fs.read("/pipe")
    with pytest.raises(BackendError, match="not a regular file"):
        await fs.write("/pipe", "x")
    assert await fs.ls("/") == []  # listings show files and folders only
    assert stat.S_ISFIFO(os.lstat(root / "pipe").st_mode)


async def test_filesystem_writes_replace_atomically_and_keep_the_mode(tmp_path: Path) -> None:
    root = tmp_path / "root"
    fs = FilesystemBackend(root)
    await fs.write("/run.sh", "echo one\n")
    os.chmod(root / "run.sh", 0o755)
    await fs.write("/run.sh", "echo two\n")
    assert (root / "run.sh").read_text() == "echo two\n"
    assert stat.S_IMODE(os.stat(root / "run.sh").st_mode) == 0o755
    assert sorted(p.name for p in root.iterdir()) == ["run.sh"]  # no temporary file left


def grep_tree(root: Path, outside: Path) -> None:
    files = {
        "a.py": "import os\ndef main():\n    print('hello')\n\nmain()\n",
        "b/c.py": "x = 1\n# hello again\ny = 2\nz = 3\nhello = 4\n",
        "b/notes.md": "Hello world\nhello there\n",
        "b/deeper/d.txt": "nothing\nhello\n",
        ".hidden/h.txt": "hello hidden\n",
        "crlf.txt": "hello\r\nworld\r\n",
        "b-c.txt": "hello dash\n",
        "unicode.txt": "héllo\nhello ünïcode\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text.encode())
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("hello git\n")
    (root / "bin.dat").write_bytes(b"hello\x00binary\n")
    (root / "out").symlink_to(outside)


SEARCHES: list[tuple[str, str, str | None, int]] = [
    ("hello", "/", None, 0),
    ("hello", "/", None, 2),
    ("^h", "/b", None, 0),
    ("hello", "/", "*.py", 0),
    ("hello", "/", "b/*.py", 0),
    ("hello", "/", "!*.md", 1),
    ("[Hh]ello\\s+\\w+", "/", "*.{md,txt}", 0),
    ("h.llo", "/", None, 0),
    ("world$", "/", None, 0),
    ("(?i)HELLO", "/b", None, 0),
    ("(?<=#) hello", "/", None, 0),  # lookbehind: rg refuses it, the Python search answers
]


@posix_only
@needs_rg
@pytest.mark.parametrize(("pattern", "path", "glob", "context"), SEARCHES)
async def test_grep_with_ripgrep_and_fallback_give_equal_results(
    tree: tuple[Path, Path], pattern: str, path: str, glob: str | None, context: int
) -> None:
    root, outside = tree
    grep_tree(root, outside)
    with_rg = await FilesystemBackend(root, ripgrep=True).grep(
        pattern, path, glob=glob, context=context
    )
    fallback = await FilesystemBackend(root, ripgrep=False).grep(
        pattern, path, glob=glob, context=context
    )
    assert with_rg == fallback
    assert with_rg  # every search finds something
    paths = {g.path for g in with_rg}
    assert not any("/.git/" in p or "bin.dat" in p or "/out/" in p for p in paths)
    # the same search over the same files in the state backend agrees too
    state = StateBackend({})
    for file in root.rglob("*"):
        relative = file.relative_to(root).as_posix()
        skipped = relative == "bin.dat" or relative.split("/")[0] in (".git", "out")
        if file.is_file() and not file.is_symlink() and not skipped:
            await state.write("/" + relative, file.read_bytes().decode())
    assert await state.grep(pattern, path, glob=glob, context=context) == fallback


@posix_only
@needs_rg
async def test_grep_really_runs_ripgrep_when_installed(
    tree: tuple[Path, Path], tmp_path: Path
) -> None:
    root, outside = tree
    grep_tree(root, outside)
    log = tmp_path / "rg.log"
    wrapper = tmp_path / "rg-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {RG} "$@"\n')
    wrapper.chmod(0o755)
    fs = FilesystemBackend(root, ripgrep=str(wrapper))
    found = await fs.grep("hello", "/b", context=1, limit=3)
    assert "--no-follow" in log.read_text() and "--json" in log.read_text()
    assert (
        found == (await FilesystemBackend(root, ripgrep=False).grep("hello", "/b", context=1))[:3]
    )
    assert len(found) == 3
    # an rg executable that cannot be started: the Python search answers
    missing = FilesystemBackend(root, ripgrep=str(tmp_path / "no-rg"))
    assert await missing.grep("hello") == await FilesystemBackend(root, ripgrep=False).grep("hello")


async def test_grep_fallback_respects_limit_and_context_without_rg(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "many.txt").write_text("".join(f"match {i}\nother {i}\n" for i in range(100)))
    fs = FilesystemBackend(root, ripgrep=False)
    found = await fs.grep("match", limit=10)
    assert [g.line for g in found] == list(range(1, 20, 2))
    with_context = await fs.grep("match 5$", context=1)
    assert [(g.line, g.match) for g in with_context] == [(10, False), (11, True), (12, False)]


# ------------------------------------------------------------------------------ composite


@pytest.fixture
def composite_parts(tmp_path: Path, storage: Storage) -> dict[str, FileBackend]:
    return {
        "default": StateBackend({}),
        "store": StoreBackend(storage, "alice", "agent"),
        "deep": StateBackend({}),
        "fs": FilesystemBackend(tmp_path / "ws", ripgrep=False),
    }


def make_composite(parts: dict[str, FileBackend]) -> CompositeBackend:
    return CompositeBackend(
        parts["default"],
        {"/memories/": parts["store"], "/memories/deep": parts["deep"], "/workspace": parts["fs"]},
    )


async def test_composite_routes_by_longest_prefix(
    composite_parts: dict[str, FileBackend], tmp_path: Path
) -> None:
    backend = make_composite(composite_parts)
    await backend.write("/workspace/src/a.py", "print('ws')\n")
    await backend.write("/memories/prefs.md", "tea\n")
    await backend.write("/memories/deep/x.md", "deep tea\n")
    await backend.write("/top.txt", "default\n")
    assert (tmp_path / "ws" / "src" / "a.py").read_text() == "print('ws')\n"
    assert await composite_parts["store"].read("/prefs.md") == "tea\n"
    assert await composite_parts["deep"].read("/x.md") == "deep tea\n"
    assert await composite_parts["default"].read("/top.txt") == "default\n"
    assert await composite_parts["store"].stat("/deep/x.md") is None  # the longer route won
    # ".." is resolved before routing, and cannot climb above "/"
    assert await backend.read("/workspace/../memories/prefs.md") == "tea\n"
    with pytest.raises(BackendError, match="goes above the root"):
        await backend.read("/workspace/../../memories/prefs.md")


async def test_composite_listings_show_routes_and_prefixed_results(
    composite_parts: dict[str, FileBackend],
) -> None:
    backend = make_composite(composite_parts)
    assert [(e.path, e.is_dir) for e in await backend.ls("/")] == [
        ("/memories", True),
        ("/workspace", True),
    ]
    # a file of the default backend under a route is hidden by the route
    await composite_parts["default"].write("/memories/shadowed.md", "hidden tea")
    await backend.write("/workspace/src/a.py", "tea = 1\n")
    await backend.write("/memories/prefs.md", "tea\n")
    await backend.write("/memories/deep/x.md", "deep tea\n")
    await backend.write("/top.md", "tea at the top\n")
    assert [e.path for e in await backend.ls("/")] == ["/memories", "/top.md", "/workspace"]
    assert [e.path for e in await backend.ls("/memories")] == [
        "/memories/deep",
        "/memories/prefs.md",
    ]
    assert [e.path for e in await backend.ls("/workspace/src")] == ["/workspace/src/a.py"]
    assert [f.path for f in await backend.glob("**/*.md")] == [
        "/memories/deep/x.md",
        "/memories/prefs.md",
        "/top.md",
    ]
    assert [f.path for f in await backend.glob("memories/*")] == ["/memories/prefs.md"]
    assert [(g.path, g.text) for g in await backend.grep("tea")] == [
        ("/memories/deep/x.md", "deep tea"),
        ("/memories/prefs.md", "tea"),
        ("/top.md", "tea at the top"),
        ("/workspace/src/a.py", "tea = 1"),
    ]
    assert [g.path for g in await backend.grep("tea", "/memories", glob="*.md")] == [
        "/memories/deep/x.md",
        "/memories/prefs.md",
    ]
    assert [g.path for g in await backend.grep("tea", glob="src/*.py")] == []
    assert [g.path for g in await backend.grep("tea", glob="workspace/src/*.py")] == [
        "/workspace/src/a.py"
    ]
    stat_route = await backend.stat("/memories")
    assert stat_route is not None and stat_route.is_dir


async def test_composite_errors_name_the_full_path(composite_parts: dict[str, FileBackend]) -> None:
    backend = make_composite(composite_parts)
    with pytest.raises(
        BackendError, match=r"^no directory /workspace/src; call ls\('/workspace'\)"
    ):
        await backend.read("/workspace/src/missing.py")
    await backend.write("/workspace/src/a.py", "x")
    with pytest.raises(
        BackendError, match=r"^no file /workspace/src/missing\.py; call ls\('/workspace/src'\)"
    ):
        await backend.read("/workspace/src/missing.py")
    with pytest.raises(BackendError, match=r"no file /memories/none\.md; call ls\('/memories'\)"):
        await backend.read("/memories/none.md")
    with pytest.raises(BackendError, match=r"/memories is a directory"):
        await backend.write("/memories", "x")
    with pytest.raises(UsageError, match="a route cannot be '/'"):
        CompositeBackend(StateBackend({}), {"/": StateBackend({})})
    with pytest.raises(UsageError, match=r"route '\.\./x' is not a valid path"):
        CompositeBackend(StateBackend({}), {"../x": StateBackend({})})


async def test_a_tree_backend_refuses_binary_content_put_in_its_store_directly() -> None:
    files: dict[str, Any] = {"/blob.bin": {"content": "a\x00b", "modified": 0.0}}
    backend = StateBackend(files)
    with pytest.raises(BackendError, match=r"/blob.bin is a binary file"):
        await backend.read("/blob.bin")
    assert await backend.grep("a", "/") == []  # and grep skips it, as before
