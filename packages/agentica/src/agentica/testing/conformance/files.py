"""Conformance checks for ``FileBackend`` implementations (``agentica.tools.files``).

Each check is an async function of a ``FileBackendCase`` (a fresh backend and what the checks
may know about it) that raises ``AssertionError`` saying what is wrong; ``FILE_BACKEND_CHECKS``
lists them all and ``check_file_backend`` runs them against a factory of cases.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from agentica.testing.conformance._asserts import NotApplicable, equal, require, shown
from agentica.testing.conformance._asserts import check as _check
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine

__all__ = [
    "FILE_BACKEND_CHECKS",
    "OUTSIDE_TEXT",
    "FileBackendCase",
    "FileBackendCheck",
    "FileBackendFactory",
    "NotApplicable",
    "Symlinks",
    "check_file_backend",
]

OUTSIDE_TEXT = "conformance: this text is outside the file area\n"
"""What ``Symlinks.link_outside`` puts in the files outside the root."""

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Symlinks:
    """Hooks for backends that have symbolic links (a real or remote file system).

    Attributes:
        link_outside: ``await link_outside(link, directory)`` makes the virtual path ``link``
            (its folder exists) a symbolic link to a place outside the backend's root: a file
            holding ``OUTSIDE_TEXT``, or with ``directory=True`` a folder holding the file
            ``secret.txt`` with that text.
        outside_files: ``await outside_files()`` is every file outside the root that
            ``link_outside`` made, as ``{relative path: text}`` (to check nothing changed).
    """

    link_outside: Callable[[str, bool], Awaitable[None]]
    outside_files: Callable[[], Awaitable[dict[str, str]]]


@dataclass(slots=True)
class FileBackendCase:
    """A fresh, empty backend for one check, and what the checks may know or do beside it.

    Attributes:
        backend: the backend under test; nothing is in ``workdir`` yet.
        max_write_bytes: its write limit in UTF-8 bytes (content of exactly this size is
            written, one byte more is refused).
        workdir: the folder the checks work in: ``/`` (the default), or for a
            ``CompositeBackend`` a route such as ``/workspace``. It lists as empty.
        max_read_bytes: its read limit, if files larger than it can exist (made by
            ``put_bytes``); ``None`` skips the check of reading such a file.
        put_bytes: ``await put_bytes(path, data)`` places raw bytes at a virtual path behind the
            backend's back (a binary or too large file made by someone else); ``None`` when the
            backend cannot hold such files (text-only stores).
        symlinks: hooks to make symbolic links, for backends that have them.
        close: called after the check (close a storage, remove a folder).
    """

    backend: FileBackend
    max_write_bytes: int
    workdir: str = "/"
    max_read_bytes: int | None = None
    put_bytes: Callable[[str, bytes], Awaitable[None]] | None = None
    symlinks: Symlinks | None = None
    close: Callable[[], Awaitable[None]] | None = None

    def path(self, relative: str = "") -> str:
        """The virtual path of ``relative`` inside ``workdir``."""
        relative = relative.strip("/")
        if not relative:
            return self.workdir
        return ("" if self.workdir == "/" else self.workdir) + "/" + relative


FileBackendCheck = Callable[[FileBackendCase], Awaitable[None]]
FileBackendFactory = Callable[[], FileBackendCase | Awaitable[FileBackendCase]]


# ---------------------------------------------------------------------------------- helpers


async def _refused(what: str, pending: Awaitable[object]) -> BackendError:
    """The ``BackendError`` that ``pending`` must raise."""
    try:
        result = await pending
    except BackendError as exc:
        require(bool(str(exc).strip()), f"{what}: BackendError without a message")
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected BackendError, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{what}: expected BackendError, but it returned {shown(result)}")


async def _ok(what: str, pending: Awaitable[_T]) -> _T:
    """The result of ``pending``, which must not fail."""
    try:
        return await pending
    except Exception as exc:
        raise AssertionError(f"{what}: failed with {type(exc).__name__}: {exc}") from exc


def _paths(found: Sequence[FileInfo | GrepLine]) -> list[str]:
    return [item.path for item in found]


def _sort_key(path: str) -> tuple[str, ...]:
    return tuple(path.split("/"))


async def _write_all(case: FileBackendCase, files: dict[str, str]) -> None:
    for relative, text in files.items():
        await _ok(f"write({case.path(relative)!r})", case.backend.write(case.path(relative), text))


# ---------------------------------------------------------------------------------- paths

_BAD_PATHS: tuple[tuple[str, str], ...] = (
    ("../x.txt", "'..' above the root, relative"),
    ("/../x.txt", "'..' above the root"),
    ("/a/../../x.txt", "'..' above the root after a folder"),
    ("//../x.txt", "'..' above the root after '//'"),
    ("/./../x.txt", "'..' above the root after '.'"),
    ("..\\x.txt", "a backslash"),
    ("\\x.txt", "a leading backslash"),
    ("a\\..\\..\\x.txt", "backslashes with '..'"),
    ("a\x00b.txt", "NUL"),
    ("/x\x00/../../y.txt", "NUL before '..'"),
    ("a\nb.txt", "a line break"),
    ("C:/x.txt", "a drive letter"),
    ("C:\\x.txt", "a drive letter and backslash"),
    ("~/x.txt", "'~'"),
    ("/\uff0e\uff0e/x.txt", "fullwidth full stops (look like '..')"),
    ("/a\uff0f..\uff0f..\uff0fx.txt", "fullwidth solidus (looks like '/')"),
    ("/a\u2215..\u2215x.txt", "division slash (looks like '/')"),
    ("/\u2024\u2024/x.txt", "one dot leaders (NFKC: '.')"),
    ("/a\u200bb.txt", "a zero-width space"),
    ("/a\u202etxt.exe", "a right-to-left override"),
)


def _escapes(case: FileBackendCase) -> list[tuple[str, str]]:
    """The bad paths, plus one climbing out of ``workdir`` with one ``..`` too many."""
    depth = len([part for part in case.workdir.split("/") if part])
    deep = case.path("sub") + "/.." * (depth + 2) + "/x.txt"
    return [*_BAD_PATHS, (deep, "'..' out of the work folder and above the root")]


@_check
async def check_refuses_path_escapes(case: FileBackendCase) -> None:
    """``..`` above the root, backslashes, NUL and control characters, drive letters, ``~`` and
    Unicode look-alikes are refused with ``BackendError`` by every method; nothing is
    written."""
    b = case.backend
    for path, why in _escapes(case):
        await _refused(f"write({path!r}) ({why})", b.write(path, "x"))
        await _refused(f"read({path!r}) ({why})", b.read(path))
        await _refused(f"ls({path!r}) ({why})", b.ls(path))
        await _refused(f"stat({path!r}) ({why}) must raise, not return", b.stat(path))
        await _refused(f"glob('*', {path!r}) ({why})", b.glob("*", path))
        await _refused(f"grep('x', {path!r}) ({why})", b.grep("x", path))
    equal(f"ls({case.workdir!r}) after refused writes", await b.ls(case.workdir), [])


@_check
async def check_normalizes_paths(case: FileBackendCase) -> None:
    """``.``, ``..`` inside the root, repeated and trailing ``/`` and surrounding whitespace are
    resolved; results carry the normalised path; ``%2e%2e`` is a plain name."""
    b = case.backend
    messy = f"  {case.path('a')}//b/./c/../d.txt  "
    info = await _ok(f"write({messy!r})", b.write(messy, "text"))
    equal(f"path returned by write({messy!r})", info.path, case.path("a/b/d.txt"))
    equal("read of the normalised path", await b.read(case.path("a/b/d.txt")), "text")
    equal("read with a trailing '/'", await b.read(case.path("a/b/d.txt") + "/"), "text")
    literal = await _ok("write of '%2e%2e/x.txt'", b.write(case.path("%2e%2e/x.txt"), "y"))
    equal("'%2e%2e' is a plain name", literal.path, case.path("%2e%2e/x.txt"))
    if case.workdir == "/":
        rel = await _ok("write('rel/x.txt') (relative)", b.write("rel/x.txt", "r"))
        equal("a relative path is taken from '/'", rel.path, "/rel/x.txt")


@_check
async def check_host_paths_are_virtual(case: FileBackendCase) -> None:
    """``/etc/hosts`` names a file inside the area, not the host's: it is not there until
    written, and writing it stays inside."""
    b = case.backend
    hosts = case.path("etc/hosts")
    equal(f"stat({hosts!r}) in an empty area", await b.stat(hosts), None)
    await _refused(f"read({hosts!r}) in an empty area", b.read(hosts))
    await _ok(f"write({hosts!r})", b.write(hosts, "inside\n"))
    equal(f"read({hosts!r})", await b.read(hosts), "inside\n")
    equal("glob('**') after writing /etc/hosts", _paths(await b.glob("**", case.workdir)), [hosts])


# ---------------------------------------------------------------------------------- links


async def _links_refused(case: FileBackendCase, file_link: str, dir_link: str) -> None:
    b = case.backend
    through = f"{dir_link}/secret.txt"
    await _refused(f"read({file_link!r}) (a link out)", b.read(file_link))
    await _refused(f"read({through!r}) (through a link out)", b.read(through))
    await _refused(f"write({file_link!r}) (a link out)", b.write(file_link, "overwritten"))
    await _refused(f"write through {dir_link!r}", b.write(f"{dir_link}/planted.txt", "x"))
    await _refused(f"ls({dir_link!r}) (a link out)", b.ls(dir_link))
    for path in (file_link, through):
        try:
            info = await b.stat(path)
        except BackendError:
            continue
        equal(f"stat({path!r}) (through a link out) is refused or None", info, None)


@_check
async def check_symlinks_out_are_not_followed(case: FileBackendCase) -> None:
    """A symbolic link to a file or folder outside the root is never followed: using it raises
    ``BackendError``, listings, ``glob`` and ``grep`` leave it out, and nothing outside
    changes."""
    if case.symlinks is None:
        raise NotApplicable("the backend has no symbolic links (no `symlinks` hooks)")
    b = case.backend
    file_link, dir_link, inside = case.path("out_file"), case.path("out_dir"), case.path("in.txt")
    await case.symlinks.link_outside(file_link, False)
    await case.symlinks.link_outside(dir_link, True)
    before = await case.symlinks.outside_files()
    await _ok(f"write({inside!r})", b.write(inside, "inside text\n"))
    await _links_refused(case, file_link, dir_link)
    listed = _paths(await _ok(f"ls({case.workdir!r})", b.ls(case.workdir)))
    require(
        file_link not in listed and dir_link not in listed,
        f"ls({case.workdir!r}) lists links that point outside: {listed}",
    )
    equal("glob('**') with links out", _paths(await b.glob("**", case.workdir)), [inside])
    secret = OUTSIDE_TEXT.strip()
    equal("grep for the outside text", await b.grep(secret, case.workdir), [])
    equal("the files outside the root", await case.symlinks.outside_files(), before)


# ---------------------------------------------------------------------------------- text


@_check
async def check_binary_files_are_not_read(case: FileBackendCase) -> None:
    """A file with NUL bytes or that is not UTF-8 is refused by ``read``; ``grep`` skips a file
    with NUL bytes; both still show in ``ls`` and ``stat``."""
    if case.put_bytes is None:
        raise NotApplicable("the case cannot place raw bytes (no `put_bytes` hook)")
    b = case.backend
    png, latin = case.path("image.png"), case.path("latin1.txt")
    png_bytes = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR needle\n"
    await case.put_bytes(png, png_bytes)
    await case.put_bytes(latin, "caf\xe9\n".encode("latin-1"))
    await _refused(f"read({png!r}) (binary, NUL bytes)", b.read(png))
    await _refused(f"read({latin!r}) (not UTF-8)", b.read(latin))
    info = await _ok(f"stat({png!r})", b.stat(png))
    require(info is not None and info.size == len(png_bytes), f"stat({png!r}) gave {info}")
    equal("grep finds nothing in a binary file", await b.grep("needle", case.workdir), [])
    equal("ls shows binary files", _paths(await b.ls(case.workdir)), [png, latin])


@_check
async def check_write_refuses_non_text(case: FileBackendCase) -> None:
    """``write`` refuses content with NUL characters, lone surrogates or of another type than
    ``str``; nothing is written."""
    b = case.backend
    path = case.path("bad.txt")
    await _refused("write of content with NUL", b.write(path, "a\x00b"))
    await _refused("write of content with a lone surrogate", b.write(path, "a\ud800b"))
    not_text: Any = b"bytes"
    await _refused("write of bytes instead of str", b.write(path, not_text))
    equal(f"stat({path!r}) after refused writes", await b.stat(path), None)


@_check
async def check_text_round_trips(case: FileBackendCase) -> None:
    """What is written is read back exactly: line ends, tabs, no final newline, any
    Unicode."""
    b = case.backend
    texts = {
        "crlf.txt": "one\r\ntwo\r\n",
        "tabs.txt": "\tindented\n  spaces  \n",
        "no-newline.txt": "no final newline",
        "unicode.txt": "héllo wörld — 日本語 🙂\n",
        "blank-lines.txt": "\n\n\nx\n\n",
    }
    await _write_all(case, texts)
    for name, text in texts.items():
        equal(f"read({case.path(name)!r})", await b.read(case.path(name)), text)
        info = await b.stat(case.path(name))
        require(
            info is not None and info.size == len(text.encode("utf-8")),
            f"stat({case.path(name)!r}) size: expected {len(text.encode())} bytes, got {info}",
        )


@_check
async def check_empty_files(case: FileBackendCase) -> None:
    """An empty file is written, read, listed and found with size 0."""
    b = case.backend
    path = case.path("empty.txt")
    info = await _ok(f"write({path!r}, '')", b.write(path, ""))
    equal("size of an empty file from write", info.size, 0)
    equal(f"read({path!r})", await b.read(path), "")
    equal(
        f"ls({case.workdir!r})", [(e.path, e.size) for e in await b.ls(case.workdir)], [(path, 0)]
    )
    equal("glob('*') finds the empty file", _paths(await b.glob("*", case.workdir)), [path])
    equal("grep('^') in an empty file", await b.grep("^", case.workdir), [])


@_check
async def check_overwrite(case: FileBackendCase) -> None:
    """Writing a file again replaces it whole (a shorter text leaves nothing of the longer)."""
    b = case.backend
    path = case.path("f.txt")
    await _ok(f"write({path!r})", b.write(path, "long original text\n" * 100))
    info = await _ok(f"write({path!r}) again", b.write(path, "short\n"))
    equal(f"size after overwriting {path!r}", info.size, 6)
    equal(f"read({path!r}) after overwriting", await b.read(path), "short\n")
    equal("ls after overwriting", [(e.path, e.size) for e in await b.ls(case.workdir)], [(path, 6)])


@_check
async def check_unicode_names(case: FileBackendCase) -> None:
    """Names in any script (NFC), with spaces, dots or emoji, are written, listed in code point
    order and found."""
    b = case.backend
    names = ["données/été.txt", "日本語.md", "emoji 🙂.txt", ".hidden", "ñ.txt", "space name.txt"]
    await _write_all(case, {name: f"content of {name}\n" for name in names})
    for name in names:
        equal(f"read({case.path(name)!r})", await b.read(case.path(name)), f"content of {name}\n")
    tops = sorted({name.split("/")[0] for name in names})
    equal("ls names (sorted by code point)", [e.name for e in await b.ls(case.workdir)], tops)
    found = _paths(await b.glob("**", case.workdir))
    equal("glob('**') of unicode names", found, sorted(map(case.path, names), key=_sort_key))
    lines = await b.grep("content of", case.workdir)
    equal("grep over unicode names", _paths(lines), found)


# ---------------------------------------------------------------------------------- sizes


def _text_of(size: int) -> str:
    """Text of exactly ``size`` UTF-8 bytes, mixing one- and two-byte characters and lines."""
    unit = "é" * 30 + "x" * 38 + "\n"  # 99 bytes
    text = unit * (size // len(unit.encode()))
    rest = size - len(text.encode())
    return text + "é" * (rest // 2) + "y" * (rest % 2)


@_check
async def check_write_size_limit(case: FileBackendCase) -> None:
    """Content of exactly ``max_write_bytes`` (counted in UTF-8 bytes) is written and read back
    whole; one byte more is refused and changes nothing."""
    b = case.backend
    limit = case.max_write_bytes
    path, other = case.path("big.txt"), case.path("too-big.txt")
    text = _text_of(limit)
    info = await _ok(f"write of exactly {limit} bytes", b.write(path, text))
    equal("size of a file at the write limit", info.size, limit)
    back = await _ok("read of a file at the write limit", b.read(path))
    require(back == text, f"read of a {limit}-byte file gave {len(back)} characters, not all")
    await _refused(f"write of {limit + 1} bytes", b.write(path, text + "z"))
    await _refused(f"write of {limit + 1} bytes to a new path", b.write(other, text + "z"))
    require(await b.read(path) == text, "a refused write over the limit changed the file")
    equal(f"stat({other!r}) after a refused write", await b.stat(other), None)


@_check
async def check_read_size_limit(case: FileBackendCase) -> None:
    """A file over ``max_read_bytes`` made outside the backend is refused by ``read`` and
    skipped by ``grep`` without an error."""
    if case.put_bytes is None or case.max_read_bytes is None:
        raise NotApplicable("needs `put_bytes` and `max_read_bytes`")
    b = case.backend
    path = case.path("huge.log")
    line = b"needle in a large file\n"
    data = line * (case.max_read_bytes // len(line) + 1)
    await case.put_bytes(path, data)
    await _refused(
        f"read of a {len(data)}-byte file (read limit {case.max_read_bytes})", b.read(path)
    )
    equal("grep in a file over the read limit", await b.grep("needle", case.workdir), [])
    info = await b.stat(path)
    require(info is not None and info.size == len(data), f"stat of the large file gave {info}")


@_check
async def check_many_lines(case: FileBackendCase) -> None:
    """A file of many lines is read whole and searched with the right line numbers; long
    lines are cut at 2000 characters in ``grep``."""
    b = case.backend
    count = 20_000  # as many as fit in the backend's write limit (a line is about 11 bytes)
    while count > 100 and count * 11 + 3100 > case.max_write_bytes:
        count //= 2
    text = "".join(f"line {i}\n" for i in range(1, count + 1)) + "needle " + "x" * 3000 + "\n"
    path = case.path("lines.txt")
    await _ok("write of a file of many lines", b.write(path, text))
    equal("read of a file of many lines", await b.read(path), text)
    target = count * 5 // 8  # 12345 of 20,000
    equal("grep line number", [g.line for g in await b.grep(f"^line {target}$", path)], [target])
    long = await b.grep("needle", path)
    equal(
        "grep of a 3007-character line", [(g.line, len(g.text)) for g in long], [(count + 1, 2000)]
    )
    equal("grep limit", len(await b.grep("^line", path, limit=7)), 7)


# ---------------------------------------------------------------------------------- concurrency


def _version(i: int) -> str:
    """A distinct 32 KB text whose every line names its version (a mix would show)."""
    return "".join(f"version {i:03d} line {n:04d}\n" for n in range(1400))


async def _reader(case: FileBackendCase, path: str, allowed: set[str], stop: asyncio.Event) -> int:
    """Read ``path`` until ``stop``; every read must be one whole version."""
    reads = 0
    while not stop.is_set() or reads == 0:
        text = await _ok(f"read({path!r}) during concurrent writes", case.backend.read(path))
        require(
            text in allowed,
            "a read during concurrent writes saw a torn or mixed file "
            f"({len(text)} characters, starting {text[:40]!r})",
        )
        reads += 1
        await asyncio.sleep(0)
    return reads


@_check
async def check_concurrent_writes_to_one_file(case: FileBackendCase) -> None:
    """Many concurrent writes to one path: the file ends as exactly one of them, and reads
    meanwhile see whole versions only."""
    b = case.backend
    path = case.path("shared.txt")
    await _ok(f"write({path!r})", b.write(path, _version(0)))
    versions = [_version(i) for i in range(1, 41)]
    stop = asyncio.Event()
    readers = [
        asyncio.ensure_future(_reader(case, path, {_version(0), *versions}, stop)) for _ in range(3)
    ]
    try:
        await asyncio.gather(*(_ok("a concurrent write", b.write(path, v)) for v in versions))
    finally:
        stop.set()
        await asyncio.gather(*readers, return_exceptions=True)
    for reader in readers:
        reader.result()  # a torn read raises here
    final = await b.read(path)
    require(
        final in versions,
        f"after concurrent writes {path!r} holds none of the writes "
        f"({len(final)} characters, starting {final[:40]!r})",
    )
    info = await b.stat(path)
    require(info is not None and info.size == len(final.encode()), f"stat after writes: {info}")
    equal("ls after concurrent writes", _paths(await b.ls(case.workdir)), [path])


@_check
async def check_concurrent_writes_in_a_new_folder(case: FileBackendCase) -> None:
    """Concurrent writes of different files into the same new folders all succeed."""
    b = case.backend
    paths = [case.path(f"new/deeper/f{i:02d}.txt") for i in range(30)]
    await asyncio.gather(*(_ok(f"write({p!r})", b.write(p, p)) for p in paths))
    for p in paths:
        equal(f"read({p!r}) after concurrent writes", await b.read(p), p)
    equal("ls of the new folder", _paths(await b.ls(case.path("new/deeper"))), paths)


# ---------------------------------------------------------------------------------- ls, stat


_TREE = {
    "b.py": "import os\nprint(os.sep)\n",
    "a/z.py": "def main():\n    return 1\n",
    "a/notes.md": "main idea\n",
    "a-b.py": "main = 2\n",
}


@_check
async def check_ls(case: FileBackendCase) -> None:
    """``ls`` sorts by name, shows folders with size 0 and files with their size; a file lists
    as itself; a missing path raises ``BackendError``; an empty area lists as ``[]``."""
    b = case.backend
    equal(f"ls({case.workdir!r}) of an empty area", await b.ls(case.workdir), [])
    await _write_all(case, _TREE)
    entries = await b.ls(case.workdir)
    size = {name: len(text.encode()) for name, text in _TREE.items()}
    want = [("a", True, 0), ("a-b.py", False, size["a-b.py"]), ("b.py", False, size["b.py"])]
    equal("ls (name, is_dir, size)", [(e.name, e.is_dir, e.size) for e in entries], want)
    equal("ls paths", _paths(entries), [case.path(name) for name, _, _ in want])
    equal(
        "ls of a folder",
        _paths(await b.ls(case.path("a") + "/")),
        [case.path("a/notes.md"), case.path("a/z.py")],
    )
    only = await b.ls(case.path("b.py"))
    equal(
        "ls of a file",
        [(e.path, e.is_dir, e.size) for e in only],
        [(case.path("b.py"), False, size["b.py"])],
    )
    await _refused("ls of a missing folder", b.ls(case.path("missing")))


@_check
async def check_stat(case: FileBackendCase) -> None:
    """``stat`` gives files (size in bytes) and folders (size 0), ``None`` for nothing, also
    below a file."""
    b = case.backend
    root = await b.stat(case.workdir)
    require(root is not None and root.is_dir, f"stat({case.workdir!r}) must be a folder: {root}")
    await _write_all(case, {"d/é.txt": "é\n"})
    f = await b.stat(case.path("d/é.txt"))
    equal("stat of a file", f and (f.path, f.is_dir, f.size), (case.path("d/é.txt"), False, 3))
    require(f is not None and f.modified >= 0, f"stat modified must be >= 0: {f}")
    d = await b.stat(case.path("d/"))
    equal("stat of a folder", d and (d.path, d.is_dir, d.size), (case.path("d"), True, 0))
    equal("stat of nothing", await b.stat(case.path("nothing.txt")), None)
    equal("stat below a file", await b.stat(case.path("d/é.txt/x")), None)


@_check
async def check_read_and_write_errors(case: FileBackendCase) -> None:
    """Missing files and wrong kinds raise ``BackendError`` naming the path: reading a folder or
    nothing, writing a folder or below a file."""
    b = case.backend
    await _write_all(case, {"src/a.py": "x = 1\n"})
    missing = case.path("src/b.py")
    error = await _refused("read of a missing file", b.read(missing))
    require(missing in str(error), f"the error for a missing file should name {missing}: {error}")
    await _refused("read of a folder", b.read(case.path("src")))
    await _refused(f"read of the work folder {case.workdir!r}", b.read(case.workdir))
    await _refused("write to a folder", b.write(case.path("src"), "text"))
    await _refused(f"write to the work folder {case.workdir!r}", b.write(case.workdir, "text"))
    await _refused("write below a file", b.write(case.path("src/a.py/inner.txt"), "text"))
    equal("the file after refused writes", await b.read(case.path("src/a.py")), "x = 1\n")


# ---------------------------------------------------------------------------------- glob


@_check
async def check_glob(case: FileBackendCase) -> None:
    """``glob`` returns files only, sorted folder by folder, with ``*``, ``?``, ``[...]``,
    ``{a,b}`` and ``**`` as documented, and at most ``limit``."""
    b = case.backend
    await _write_all(case, {**_TREE, ".hidden.py": "", "a/deep/er/x.py": ""})
    p = case.path

    async def names(pattern: str, where: str = "", limit: int = 1000) -> list[str]:
        return _paths(await b.glob(pattern, p(where), limit=limit))

    every = [p(".hidden.py"), p("a/deep/er/x.py"), p("a/z.py"), p("a-b.py"), p("b.py")]
    equal("glob('**/*.py')", await names("**/*.py"), every)
    equal("glob('*.py') (top only)", await names("*.py"), [p(".hidden.py"), p("a-b.py"), p("b.py")])
    equal("glob('*.{md,py}', 'a')", await names("*.{md,py}", "a"), [p("a/notes.md"), p("a/z.py")])
    equal("glob('?.py')", await names("?.py"), [p("b.py")])
    equal("glob('[ab]*.py')", await names("[ab]*.py"), [p("a-b.py"), p("b.py")])
    equal("glob('[!a]*.py')", await names("[!a]*.py"), [p(".hidden.py"), p("b.py")])
    equal("glob('a/**/x.py')", await names("a/**/x.py"), [p("a/deep/er/x.py")])
    equal("glob('*') lists no folders", await names("*", "a"), [p("a/notes.md"), p("a/z.py")])
    equal("glob limit", await names("**", limit=2), [p(".hidden.py"), p("a/deep/er/x.py")])
    await _refused("glob of an empty pattern", b.glob("", p()))
    await _refused("glob with limit=0", b.glob("*", p(), limit=0))
    await _refused("glob in a file", b.glob("*", p("b.py")))
    await _refused("glob in a missing folder", b.glob("*", p("missing")))


# ---------------------------------------------------------------------------------- grep


@_check
async def check_grep_matches(case: FileBackendCase) -> None:
    """``grep`` gives matching lines with 1-based numbers sorted by path then line, CR dropped,
    in a folder or one file, at most ``limit``."""
    b = case.backend
    await _write_all(case, {**_TREE, "crlf.txt": "one\r\nmain\r\n"})
    p = case.path
    want = [
        GrepLine(p("a/notes.md"), 1, "main idea"),
        GrepLine(p("a/z.py"), 1, "def main():"),
        GrepLine(p("a-b.py"), 1, "main = 2"),
        GrepLine(p("crlf.txt"), 2, "main"),
    ]
    equal("grep('main')", await b.grep("main", p()), want)
    equal("grep('main', limit=2)", await b.grep("main", p(), limit=2), want[:2])
    equal("grep in one file", await b.grep("main", p("a/z.py")), [want[1]])
    equal("grep in a folder", await b.grep("main", p("a")), want[:2])
    equal("grep with no match", await b.grep("nothing-like-this", p()), [])
    equal("grep('^import')", await b.grep("^import", p()), [GrepLine(p("b.py"), 1, "import os")])
    await _refused("grep with an invalid regex", b.grep("print(", p()))
    await _refused("grep with an empty pattern", b.grep("", p()))
    await _refused("grep with limit=0", b.grep("x", p(), limit=0))
    await _refused("grep in a missing folder", b.grep("x", p("missing")))


@_check
async def check_grep_context(case: FileBackendCase) -> None:
    """``context`` adds lines around each match as ``match=False``; overlapping windows merge
    and each line appears once."""
    b = case.backend
    text = "".join(f"{'hit' if n in (3, 5, 12) else 'other'} {n}\n" for n in range(1, 16))
    path = case.path("c.txt")
    await _ok(f"write({path!r})", b.write(path, text))
    found = await b.grep("^hit", path, context=1)
    got = [(g.line, g.match) for g in found]
    want = [(2, False), (3, True), (4, False), (5, True), (6, False)]
    equal("grep context=1", got, [*want, (11, False), (12, True), (13, False)])
    edge = await b.grep("other 1$|other 15", path, context=2)
    equal("grep context at the file's edges", [g.line for g in edge], [1, 2, 3, 13, 14, 15])
    equal("grep context texts", found[0], GrepLine(path, 2, "other 2", match=False))


@_check
async def check_grep_glob_filter(case: FileBackendCase) -> None:
    """The ``glob`` of ``grep``: without ``/`` it matches file names at any depth, with ``/``
    the path relative to the searched folder; ``!`` excludes."""
    b = case.backend
    await _write_all(case, _TREE)
    p = case.path

    async def where(glob: str, folder: str = "") -> list[str]:
        return _paths(await b.grep("main", p(folder), glob=glob))

    equal("grep glob='*.py'", await where("*.py"), [p("a/z.py"), p("a-b.py")])
    equal("grep glob='!*.py'", await where("!*.py"), [p("a/notes.md")])
    equal("grep glob='a/*.py'", await where("a/*.py"), [p("a/z.py")])
    equal("grep glob='*.md' in a folder", await where("*.md", "a"), [p("a/notes.md")])
    equal("grep glob='z.py' (a name at any depth)", await where("z.py"), [p("a/z.py")])


# ---------------------------------------------------------------------------------- all


@_check
async def check_is_a_file_backend(case: FileBackendCase) -> None:
    """The backend has every method of the protocol (``isinstance(b, FileBackend)``), and
    ``write`` returns a ``FileInfo`` for the normalised path."""
    b = case.backend
    require(isinstance(b, FileBackend), f"{b!r} lacks methods of FileBackend")
    info = await _ok("write", b.write(case.path("x.txt"), "x"))
    equal("write returns a FileInfo", info, FileInfo(case.path("x.txt"), False, 1, info.modified))


FILE_BACKEND_CHECKS: tuple[FileBackendCheck, ...] = (
    check_is_a_file_backend,
    check_refuses_path_escapes,
    check_normalizes_paths,
    check_host_paths_are_virtual,
    check_symlinks_out_are_not_followed,
    check_binary_files_are_not_read,
    check_write_refuses_non_text,
    check_text_round_trips,
    check_empty_files,
    check_overwrite,
    check_unicode_names,
    check_write_size_limit,
    check_read_size_limit,
    check_many_lines,
    check_concurrent_writes_to_one_file,
    check_concurrent_writes_in_a_new_folder,
    check_ls,
    check_stat,
    check_read_and_write_errors,
    check_glob,
    check_grep_matches,
    check_grep_context,
    check_grep_glob_filter,
)
"""Every check, in a stable order; parametrize a test over them (``ids=lambda c: c.__name__``)."""


async def check_file_backend(
    factory: FileBackendFactory, checks: Sequence[FileBackendCheck] = FILE_BACKEND_CHECKS
) -> list[str]:
    """Run ``checks``, each on a fresh case from ``factory``; raise ``AssertionError`` listing
    every failure, else return the names of the checks that did not apply.

    In a pytest suite, parametrize over the checks instead, to see each one::

        @pytest.mark.parametrize("check", FILE_BACKEND_CHECKS, ids=lambda c: c.__name__)
        async def test_my_backend(check: FileBackendCheck) -> None:
            try:
                await check(FileBackendCase(MyBackend(...), max_write_bytes=1_000_000))
            except NotApplicable as exc:
                pytest.skip(str(exc))
    """
    failures: list[str] = []
    skipped: list[str] = []
    for check in checks:
        made = factory()
        case = made if isinstance(made, FileBackendCase) else await made
        try:
            await check(case)
        except NotApplicable:
            skipped.append(check.__name__)
        except AssertionError as exc:
            failures.append(f"{check.__name__}: {exc}")
        finally:
            if case.close is not None:
                await case.close()
    if failures:
        raise AssertionError(
            f"{len(failures)} of {len(checks)} checks failed:\n" + "\n".join(failures)
        )
    return skipped
