"""``FileBackend``: where the deep agent's files live, behind one async protocol.

Every file tool talks to a ``FileBackend``. Paths are virtual POSIX paths from ``/`` (a relative
path is taken from ``/``); ``normalize_path`` gives every backend the same rules: ``.`` and ``..``
are resolved but may not go above ``/``, and control or invisible characters, ``\\``, drive
letters, ``~`` and Unicode look-alikes or characters that change under NFKC normalisation (such
as the fullwidth solidus U+FF0F) are refused, so two different accepted paths never name the same
file.

- ``StateBackend``: files in a plain JSON-able dict (path -> ``{"content", "modified"}``) that the
  caller owns; bound to ``agent.memory.state["files"]`` they are saved with the session.
- ``FilesystemBackend``: a real directory with ``/`` as its root. Every path is resolved from the
  root one part at a time through directory descriptors (``openat`` with ``O_NOFOLLOW``,
  ``agentica._beneath``): a symbolic link is followed only if it points inside the root, never
  out of it (for the last part, for folders on the way, and in walks, which do not enter links at
  all), and nothing swapped for a link while a path is opened can lead out. Reads and writes
  have size limits; binary files are not read; writes replace the file atomically. Walks
  (``glob``, ``grep``) are iterative and keep few descriptors open, so any depth works. ``grep``
  uses ripgrep (``rg``) when it is installed, else a pure-Python search giving the same result;
  as rg opens files by path, every line it finds is checked against the file opened here
  through descriptors, so a link swapped in while it runs cannot show outside text.
- ``StoreBackend``: files kept in an ``agentica.storage.Storage`` as variables of a pseudo session
  ``"~files~" + namespace`` of one user, so they outlive sessions.
- ``CompositeBackend``: routes path prefixes (``/memories/``, ``/workspace/``) to backends, the
  longest prefix first, stripping the prefix for the backend and adding it back in results.

Errors are ``BackendError`` (a ``ToolError``): their message is written for the model and says
what to do instead.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import secrets
import shutil
import stat
import time
import unicodedata
from collections.abc import Awaitable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from agentica import _beneath
from agentica.errors import StorageError, ToolError, UsageError
from agentica.storage.base import MAX_KEY_LENGTH, MAX_VARIABLE_BYTES, Storage

__all__ = [
    "BackendError",
    "CompositeBackend",
    "FileBackend",
    "FileInfo",
    "FilesystemBackend",
    "GrepLine",
    "StateBackend",
    "StoreBackend",
    "normalize_path",
]

MAX_PATH_CHARS = 4096
MAX_NAME_BYTES = 255
MAX_GREP_LINE_CHARS = 2000  # a matching line longer than this is cut (minified files)
_SKIP_DIRS = frozenset({".git"})  # never walked by glob and grep (noise for the model)

_SLASH_LOOKALIKES = frozenset("\u2044\u2215\u29f8\u2571\u27cb\u29f5\u29f9\u2216")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_DRIVE = re.compile(r"^[A-Za-z]:")
_T = TypeVar("_T")


# ---------------------------------------------------------------------------------- results


class BackendError(ToolError):
    """A file operation failed; the message says what was wrong and what to do instead.

    The message may name paths through ``{name}`` fields (``BackendError("no file {path}",
    path="/a.py")``) so that a ``CompositeBackend`` can show them with their route prefix.
    """

    def __init__(self, message: str, **paths: str) -> None:
        self.template = message
        self.paths = paths
        text = message
        for key, value in paths.items():
            text = text.replace("{" + key + "}", value)
        super().__init__(text)

    def mounted(self, prefix: str) -> BackendError:
        """The same error with its paths shown under ``prefix`` (a route of a composite)."""
        if not self.paths:
            return self
        return BackendError(
            self.template, **{key: _join(prefix, value) for key, value in self.paths.items()}
        )


@dataclass(frozen=True, slots=True)
class FileInfo:
    """A file or directory: its virtual path, kind, size in bytes and modification time
    (seconds since the epoch, 0.0 when unknown; directories have size 0)."""

    path: str
    is_dir: bool
    size: int
    modified: float

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1] or "/"


@dataclass(frozen=True, slots=True)
class GrepLine:
    """A line found by ``grep``: 1-based line number, its text (without the line break), and
    whether it matched (``False``: a context line around a match)."""

    path: str
    line: int
    text: str
    match: bool = True


@runtime_checkable
class FileBackend(Protocol):
    """Where files live. Every method takes virtual paths (``/src/a.py``); errors are
    ``BackendError``. ``glob`` returns files only, ``grep`` skips binary files; both sort by
    path and stop after ``limit`` results."""

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The entries of a directory sorted by name (a file: the file itself)."""
        ...

    async def stat(self, path: str) -> FileInfo | None:
        """The file or directory at ``path``, or ``None`` if nothing is there."""
        ...

    async def read(self, path: str) -> str:
        """The text of a file."""
        ...

    async def write(self, path: str, content: str) -> FileInfo:
        """Create or replace a text file, creating its parent directories."""
        ...

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        """Files under ``path`` whose path relative to it matches ``pattern`` (``**/*.py``)."""
        ...

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        """Lines matching the regular expression ``pattern`` in the file or under the directory
        ``path``, in files whose name (or relative path, if it has a ``/``) matches ``glob``,
        with ``context`` lines around each match."""
        ...


# ---------------------------------------------------------------------------------- paths


def _join(prefix: str, path: str) -> str:
    """``path`` (from ``/``) seen under the directory ``prefix``."""
    if not prefix or prefix == "/":
        return path
    return prefix if path == "/" else prefix + path


def _child(directory: str, name: str) -> str:
    return f"/{name}" if directory == "/" else f"{directory}/{name}"


def _sort_key(path: str) -> tuple[str, ...]:
    """Order paths folder by folder (``/a/b`` before ``/a-b``), as a depth-first walk does."""
    return tuple(path.split("/"))


def _char_name(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed character')}"


def normalize_path(path: str) -> str:
    """The canonical form of a virtual path (``/a/b``), or ``BackendError`` saying why not.

    ``a/./b/../c`` -> ``/a/c``; surrounding whitespace, repeated and trailing ``/`` are dropped;
    an empty path is ``/``.
    """
    if not isinstance(path, str):
        raise BackendError(f"a path must be a string like '/notes.md', not {type(path).__name__}")
    text = path.strip()
    if not text:
        return "/"
    shown = repr(text[:200])
    if len(text) > MAX_PATH_CHARS:
        raise BackendError(
            f"the path is too long ({len(text)} characters, at most {MAX_PATH_CHARS})"
        )
    for ch in text:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            raise BackendError(
                f"path {shown} contains the control or invisible character {_char_name(ch)}; "
                "type the path with visible characters only"
            )
    if "\\" in text:
        raise BackendError(
            f"path {shown} contains '\\'; separate folders with '/', e.g. '/src/main.py'"
        )
    if _DRIVE.match(text):
        raise BackendError(
            f"path {shown} looks like a Windows drive path; paths here start at '/', "
            "e.g. '/notes.md'"
        )
    if text == "~" or text.startswith("~/"):
        raise BackendError(
            f"path {shown} uses '~', which is not expanded here; paths start at '/', "
            "e.g. '/notes.md'"
        )
    if unicodedata.normalize("NFKC", text) != text:
        for ch in text:
            folded = unicodedata.normalize("NFKC", ch)
            if ch in _SLASH_LOOKALIKES or (folded != ch and any(c in "/\\." for c in folded)):
                raise BackendError(
                    f"path {shown} contains {_char_name(ch)}, which looks like "
                    f"'{folded if folded != ch else '/'}' but is not; use the plain ASCII "
                    "character ('/' to separate folders, '.' in names)"
                )
        suggestion = unicodedata.normalize("NFKC", text)
        raise BackendError(
            f"path {shown} has characters that Unicode normalisation (NFKC) changes; "
            f"use {suggestion!r} instead"
        )
    for ch in text:
        if ch in _SLASH_LOOKALIKES:
            raise BackendError(
                f"path {shown} contains {_char_name(ch)}, which looks like '/' but is not; "
                "separate folders with the plain '/'"
            )
    parts: list[str] = []
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise BackendError(
                    f"path {shown} goes above the root '/' with '..'; every path starts at '/': "
                    "call ls('/') to see what exists"
                )
            parts.pop()
            continue
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            raise BackendError(
                f"the name {part[:40]!r}... in the path is too long (at most {MAX_NAME_BYTES} "
                "bytes per name)"
            )
        parts.append(part)
    return "/" + "/".join(parts)


def _split(path: str) -> tuple[str, ...]:
    """The parts of a normalised path (``()`` for ``/``)."""
    return tuple(part for part in path.split("/") if part)


def _dir_prefix(path: str) -> str:
    return "/" if path == "/" else path + "/"


# ---------------------------------------------------------------------------------- patterns


def _translate_part(part: str) -> str:
    """A regex for one path part of a glob: ``*``, ``?``, ``[...]``, ``{a,b}``."""
    out: list[str] = []
    i, n = 0, len(part)
    while i < n:
        ch = part[i]
        if ch == "*":
            while i + 1 < n and part[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = part.find("]", i + 2 if i + 1 < n and part[i + 1] in "!^" else i + 1)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = part[i + 1 : end]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                body = "".join(c if c == "-" else re.escape(c) for c in body)
                out.append(f"[{'^/' if negate else ''}{body}]")
                i = end
        elif ch == "{":
            end = part.find("}", i)
            if end < 0:
                out.append(re.escape(ch))
            else:
                options = part[i + 1 : end].split(",")
                out.append("(?:" + "|".join(_translate_part(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _compile_glob(pattern: str) -> re.Pattern[str]:
    """A regex matching relative paths (``a/b.py``) against a glob: ``*`` and ``?`` stay in one
    folder, ``**`` spans folders (``**/*.py`` also matches ``b.py``)."""
    if not isinstance(pattern, str) or not pattern.strip().strip("/"):
        raise BackendError("the glob pattern is empty; use e.g. '**/*.py' (all .py files)")
    if "\x00" in pattern or "\\" in pattern:
        raise BackendError(
            f"glob pattern {pattern[:100]!r} contains '\\' or NUL; use '/' between folders"
        )
    parts = pattern.strip().strip("/").split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:[^/]+/)*")
        else:
            out.append(_translate_part(part) + ("" if last else "/"))
    try:
        return re.compile("".join(out), re.S)
    except re.error as exc:
        raise BackendError(f"invalid glob pattern {pattern[:100]!r}: {exc}") from None


def _glob_depth(pattern: str) -> int | None:
    """How many folders deep a glob can match (``None``: any depth, it has ``**``)."""
    if "**" in pattern:
        return None
    return len(pattern.strip().strip("/").split("/"))


class _FileFilter:
    """The ``glob`` filter of ``grep``, as ripgrep's ``--glob``: a pattern without ``/`` matches
    a file's name at any depth, one with ``/`` the path relative to the searched directory; a
    leading ``!`` excludes."""

    def __init__(self, glob: str | None) -> None:
        self.text = glob.strip() if glob else ""
        self.negate = self.text.startswith("!")
        body = self.text[1:] if self.negate else self.text
        self.anchored = "/" in body.strip("/")
        self.regex = _compile_glob(body) if self.text else None

    def __call__(self, relative: str) -> bool:
        if self.regex is None:
            return True
        subject = relative if self.anchored else relative.rsplit("/", 1)[-1]
        return bool(self.regex.fullmatch(subject)) != self.negate


def _compile_regex(pattern: str) -> re.Pattern[str]:
    if not isinstance(pattern, str) or not pattern:
        raise BackendError("the search pattern is empty; give a regular expression like 'def \\w+'")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise BackendError(
            f"invalid regular expression {pattern[:200]!r}: {exc}. Put a backslash before "
            "special characters to match them literally, e.g. 'print\\(' for 'print('"
        ) from None
    except RecursionError:
        raise BackendError("the regular expression is nested too deeply") from None


def _grep_text(path: str, text: str, regex: re.Pattern[str], context: int) -> list[GrepLine]:
    """The matching lines of ``text`` (split at ``\\n`` only) with ``context`` lines around."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    matched = [i for i, line in enumerate(lines) if regex.search(line)]
    if not matched:
        return []
    if context <= 0:
        wanted: Sequence[int] = matched
    else:
        keep: set[int] = set()
        for i in matched:
            keep.update(range(max(0, i - context), min(len(lines), i + context + 1)))
        wanted = sorted(keep)
    hits = set(matched)
    return [
        GrepLine(path, i + 1, lines[i].removesuffix("\r")[:MAX_GREP_LINE_CHARS], i in hits)
        for i in wanted
    ]


def _grep_many(
    items: Sequence[tuple[str, str]], regex: re.Pattern[str], context: int, limit: int
) -> list[GrepLine]:
    out: list[GrepLine] = []
    for path, text in items:
        if "\x00" in text:
            continue
        out.extend(_grep_text(path, text, regex, context))
        if len(out) >= limit:
            return out[:limit]
    return out


def _encode(path: str, content: str, limit: int) -> int:
    """The UTF-8 size of ``content``, checked against ``limit`` bytes."""
    if not isinstance(content, str):
        raise BackendError(
            f"the content for {{path}} must be text, not {type(content).__name__}", path=path
        )
    if "\x00" in content:
        raise BackendError(
            "the content for {path} contains NUL characters; only text files can be written",
            path=path,
        )
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise BackendError(
            f"the content for {{path}} is not valid Unicode text ({exc.reason} at position "
            f"{exc.start}); remove that character",
            path=path,
        ) from None
    if size > limit:
        raise BackendError(
            f"the content for {{path}} is {size} bytes; the limit is {limit} bytes. Write a "
            "shorter file, or split the content into several files",
            path=path,
        )
    return size


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise BackendError(f"limit must be a positive integer, got {limit!r}")
    return limit


class _NotFound(BackendError):
    """Nothing is at the path (``stat`` answers ``None`` instead)."""


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def _no_file(path: str) -> BackendError:
    return _NotFound(
        "no file {path}; call ls('{parent}') to see what exists", path=path, parent=_parent(path)
    )


def _no_dir(path: str) -> BackendError:
    return _NotFound(
        "no directory {path}; call ls('{parent}') to see what exists",
        path=path,
        parent=_parent(path),
    )


def _missing(path: str) -> BackendError:
    return _NotFound(
        "nothing is at {path}; call ls('{parent}') to see what exists",
        path=path,
        parent=_parent(path),
    )


def _is_a_dir(path: str) -> BackendError:
    return BackendError(
        "{path} is a directory, not a file; call ls('{path}') to see its files", path=path
    )


def _not_a_dir(path: str) -> BackendError:
    return _NotFound(
        "{path} is a file, not a directory; use read_file('{path}') to read it", path=path
    )


# ---------------------------------------------------------------------------------- flat trees


class _TreeBackend:
    """A backend over a flat map of file paths to texts (directories are implied by paths).

    Subclasses give ``_list`` (the files under a prefix), ``_file``, ``_load`` and ``_save``.
    """

    max_file_bytes: int

    async def _list(self, prefix: str, limit: int | None = None) -> list[FileInfo]:
        raise NotImplementedError

    async def _file(self, path: str) -> FileInfo | None:
        raise NotImplementedError

    async def _load(self, path: str) -> str | None:
        raise NotImplementedError

    async def _save(self, path: str, content: str, size: int) -> FileInfo:
        raise NotImplementedError

    async def _is_dir(self, path: str) -> bool:
        return path == "/" or bool(await self._list(_dir_prefix(path), 1))

    async def stat(self, path: str) -> FileInfo | None:
        p = normalize_path(path)
        if p == "/":
            return FileInfo("/", True, 0, 0.0)
        info = await self._file(p)
        if info is not None:
            return info
        below = await self._list(_dir_prefix(p))
        if not below:
            return None
        return FileInfo(p, True, 0, max(f.modified for f in below))

    async def ls(self, path: str = "/") -> list[FileInfo]:
        p = normalize_path(path)
        prefix = _dir_prefix(p)
        files = await self._list(prefix)
        if not files:
            if p == "/":
                return []
            info = await self._file(p)
            if info is not None:
                return [info]
            raise _no_dir(p)
        children: dict[str, FileInfo] = {}
        for f in files:
            name, sep, _ = f.path[len(prefix) :].partition("/")
            if sep:
                known = children.get(name)
                modified = max(f.modified, known.modified if known else 0.0)
                children[name] = FileInfo(prefix + name, True, 0, modified)
            elif name not in children:
                children[name] = f
        return [children[name] for name in sorted(children)]

    async def read(self, path: str) -> str:
        p = normalize_path(path)
        if p == "/":
            raise _is_a_dir(p)
        content = await self._load(p)
        if content is None:
            raise _is_a_dir(p) if await self._is_dir(p) else _no_file(p)
        return content

    async def write(self, path: str, content: str) -> FileInfo:
        p = normalize_path(path)
        if p == "/":
            raise _is_a_dir(p)
        size = _encode(p, content, self.max_file_bytes)
        parts = _split(p)
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            if await self._file(ancestor) is not None:
                raise BackendError(
                    "{ancestor} is a file, so {path} cannot be created inside it; choose "
                    "another path",
                    ancestor=ancestor,
                    path=p,
                )
        if await self._is_dir(p):
            raise BackendError(
                "{path} is a directory; write to a file inside it, e.g. {path}/notes.md", path=p
            )
        return await self._save(p, content, size)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        regex = _compile_glob(pattern)
        _check_limit(limit)
        p = normalize_path(path)
        prefix = _dir_prefix(p)
        files = await self._list(prefix)
        if not files and p != "/":
            raise _not_a_dir(p) if await self._file(p) is not None else _no_dir(p)
        found = [f for f in files if regex.fullmatch(f.path[len(prefix) :])]
        found.sort(key=lambda f: _sort_key(f.path))
        return found[:limit]

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        regex = _compile_regex(pattern)
        wanted = _FileFilter(glob)
        _check_limit(limit)
        p = normalize_path(path)
        if p != "/" and await self._file(p) is not None:
            targets = [p]
        else:
            prefix = _dir_prefix(p)
            files = await self._list(prefix)
            if not files and p != "/":
                raise _no_dir(p)
            targets = sorted(
                (f.path for f in files if wanted(f.path[len(prefix) :])), key=_sort_key
            )
        items: list[tuple[str, str]] = []
        for target in targets:
            content = await self._load(target)
            if content is not None:
                items.append((target, content))
        return await asyncio.to_thread(_grep_many, items, regex, max(0, context), limit)


class StateBackend(_TreeBackend):
    """Files in a dict the caller owns: ``{path: {"content": str, "modified": float}}``.

    Pass ``agent.memory.state.setdefault("files", {})`` to keep the files with the agent's
    session (they are saved after every run). Keys are normalised paths; entries of another shape
    are ignored.

    Args:
        files: the dict holding the files (a new one if omitted).
        max_file_bytes: the largest file that can be written, in UTF-8 bytes.
    """

    def __init__(
        self, files: MutableMapping[str, Any] | None = None, *, max_file_bytes: int = 1_000_000
    ) -> None:
        self.files: MutableMapping[str, Any] = files if files is not None else {}
        self.max_file_bytes = max_file_bytes

    def __repr__(self) -> str:
        return f"<StateBackend {len(self.files)} files>"

    @staticmethod
    def _info(path: str, entry: Any) -> FileInfo | None:
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            return None
        modified = entry.get("modified")
        size = len(entry["content"].encode("utf-8", "surrogatepass"))
        return FileInfo(
            path, False, size, float(modified) if isinstance(modified, int | float) else 0.0
        )

    async def _list(self, prefix: str, limit: int | None = None) -> list[FileInfo]:
        out: list[FileInfo] = []
        for key, entry in list(self.files.items()):
            if isinstance(key, str) and key.startswith(prefix) and key != prefix:
                info = self._info(key, entry)
                if info is not None:
                    out.append(info)
                    if limit is not None and len(out) >= limit:
                        break
        return out

    async def _file(self, path: str) -> FileInfo | None:
        return self._info(path, self.files.get(path))

    async def _load(self, path: str) -> str | None:
        entry = self.files.get(path)
        if self._info(path, entry) is None:
            return None
        return str(entry["content"]) if isinstance(entry, dict) else None

    async def _save(self, path: str, content: str, size: int) -> FileInfo:
        modified = time.time()
        self.files[path] = {"content": content, "modified": modified}
        return FileInfo(path, False, size, modified)


class StoreBackend(_TreeBackend):
    """Files kept in a ``Storage``, per user and namespace, across sessions.

    Each file is a variable ``"file:" + path`` of the user's pseudo session
    ``"~files~" + namespace``: the storage keeps users apart, and the namespace (an agent's name)
    keeps agents apart. Paths are limited to what a variable key can hold.

    Args:
        storage: the storage (``agentica.storage.open_storage(...)``).
        user_id: whose files these are.
        namespace: which set of files of the user (e.g. the agent's name).
        max_file_bytes: the largest file that can be written, in UTF-8 bytes.
        max_files: the most files a listing, ``glob`` or ``grep`` looks at.
    """

    KEY_PREFIX = "file:"
    SESSION_PREFIX = "~files~"

    def __init__(
        self,
        storage: Storage,
        user_id: str,
        namespace: str = "default",
        *,
        max_file_bytes: int = 1_000_000,
        max_files: int = 10_000,
    ) -> None:
        for name, value in (("user_id", user_id), ("namespace", namespace)):
            if not isinstance(value, str) or not value or len(value) > 200:
                raise UsageError(f"StoreBackend {name} must be a string of 1-200 characters")
            if any(unicodedata.category(ch) in _REFUSED_CATEGORIES for ch in value):
                raise UsageError(f"StoreBackend {name} {value!r} contains a control character")
        self.storage = storage
        self.user_id = user_id
        self.namespace = namespace
        self.session_id = self.SESSION_PREFIX + namespace
        # the stored value is the text as JSON: leave room for quotes and escapes
        self.max_file_bytes = min(max_file_bytes, MAX_VARIABLE_BYTES // 2)
        self.max_files = max_files

    def __repr__(self) -> str:
        return f"<StoreBackend user={self.user_id!r} namespace={self.namespace!r}>"

    def _key(self, path: str) -> str:
        key = self.KEY_PREFIX + path
        if len(key) > MAX_KEY_LENGTH:
            raise BackendError(
                f"the path is too long for the persistent store ({len(path)} characters, at "
                f"most {MAX_KEY_LENGTH - len(self.KEY_PREFIX)}); use a shorter path"
            )
        return key

    def _from_variable(self, key: str, summary: str | None, size: int, updated: float) -> FileInfo:
        match = re.fullmatch(r"(\d+) bytes", summary or "")
        return FileInfo(
            key[len(self.KEY_PREFIX) :], False, int(match[1]) if match else size, updated
        )

    async def _list(self, prefix: str, limit: int | None = None) -> list[FileInfo]:
        infos = await self.storage.list_variables(
            self.user_id,
            self.session_id,
            prefix=self._key(prefix),
            limit=min(limit, self.max_files) if limit is not None else self.max_files,
        )
        return [self._from_variable(i.key, i.summary, i.size, i.updated_at) for i in infos]

    async def _file(self, path: str) -> FileInfo | None:
        variable = await self.storage.get_variable(self.user_id, self.session_id, self._key(path))
        if variable is None:
            return None
        i = variable.info
        return self._from_variable(i.key, i.summary, i.size, i.updated_at)

    async def _load(self, path: str) -> str | None:
        variable = await self.storage.get_variable(self.user_id, self.session_id, self._key(path))
        if variable is None:
            return None
        if not isinstance(variable.value, str):
            raise BackendError(
                "{path} in the persistent store is not a text file (it holds "
                f"{type(variable.value).__name__}); overwrite it with write_file",
                path=path,
            )
        return variable.value

    async def _save(self, path: str, content: str, size: int) -> FileInfo:
        try:
            info = await self.storage.set_variable(
                self.user_id, self.session_id, self._key(path), content, summary=f"{size} bytes"
            )
        except StorageError as exc:
            raise BackendError(
                f"could not save {{path}} in the persistent store: {exc}", path=path
            ) from exc
        return FileInfo(path, False, size, info.updated_at)


# ---------------------------------------------------------------------------------- filesystem

_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _beneath.O_NOFOLLOW | _beneath.O_CLOEXEC
_KEEP_OPEN = 32  # a walk keeps the descriptors of this many folders on its way open, at most


@dataclass(slots=True)
class _Frame:
    """A folder being walked: its descriptor (-1 while closed), its path from the top of the
    walk, its entries (name, status) and the next one to look at, and its own status."""

    fd: int
    rel: tuple[str, ...]
    entries: list[tuple[str, os.stat_result]]
    info: os.stat_result
    index: int = 0


def _entries(fd: int) -> list[tuple[str, os.stat_result]]:
    """The folders and regular files in the folder ``fd`` by name (no links, no names that are
    not UTF-8)."""
    out: list[tuple[str, os.stat_result]] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            try:
                entry.name.encode("utf-8")
                if entry.is_symlink():
                    continue
                info = entry.stat(follow_symlinks=False)
            except (OSError, UnicodeEncodeError):
                continue
            if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                out.append((entry.name, info))
    out.sort(key=lambda item: item[0])
    return out


class FilesystemBackend:
    """A real directory seen as ``/``: nothing outside it can be read, written or listed.

    Args:
        root: the directory (created on first use).
        max_read_bytes: the largest file ``read`` and ``grep`` look at.
        max_write_bytes: the largest content ``write`` accepts.
        ripgrep: ``True`` to use ``rg`` for ``grep`` when it is on the PATH, ``False`` for the
            pure-Python search, or the path of an ``rg`` executable.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_read_bytes: int = 5_000_000,
        max_write_bytes: int = 5_000_000,
        ripgrep: bool | str = True,
    ) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.max_read_bytes = max_read_bytes
        self.max_write_bytes = max_write_bytes
        self.ripgrep = ripgrep
        self._real_root: str | None = None

    def __repr__(self) -> str:
        return f"FilesystemBackend({self.root!r})"

    # -- paths ----------------------------------------------------------------------------------

    def _normalize(self, path: str) -> str:
        p = normalize_path(path)
        for root in {self.root, self._real_root or self.root}:
            if root != "/" and (p == root or p.startswith(root + "/")):
                virtual = p[len(root) :] or "/"
                raise BackendError(
                    f"{p!r} is a path of the host machine; paths here start at the root of the "
                    f"file area: use {virtual!r}"
                )
        return p

    def _open_root(self) -> int:
        try:
            return os.open(self.root, _beneath.DIR_FLAGS)
        except FileNotFoundError:
            os.makedirs(self.root, exist_ok=True)
            return os.open(self.root, _beneath.DIR_FLAGS)

    def _real(self) -> str:
        if self._real_root is None:
            self._real_root = os.path.realpath(self.root)
        return self._real_root

    def _locate(
        self, parts: Sequence[str], shown: str, *, make_parents: bool = False
    ) -> _beneath.Located:
        """Walk ``parts`` from the root without following links out of it (``_beneath.locate``):
        each folder is opened relative to the previous one with ``O_NOFOLLOW``; a symbolic link
        on the way (or as the last part) is replaced by what it points to, if that is inside the
        root. The last part need not exist."""
        root = self._open_root()
        try:
            return _beneath.locate(
                root, parts, tops=(self._real(), self.root), make_parents=make_parents
            )
        except _beneath.Escape:
            raise BackendError(
                "{path} leads through a symbolic link that points outside the file area; links "
                "out of it are never followed. Use files inside it: call ls('/') to see them",
                path=shown,
            ) from None
        except _beneath.Missing as exc:
            raise _no_dir("/" + "/".join(exc.parts)) from None
        except _beneath.NotADir as exc:
            raise _not_a_dir("/" + "/".join(exc.parts)) from None
        except _beneath.TooManyLinks:
            raise BackendError(
                "{path} has too many levels of symbolic links (a loop?)", path=shown
            ) from None
        except _beneath.Changed:
            raise BackendError(
                "{path} kept changing while it was opened (something is replacing it); try again",
                path=shown,
            ) from None
        finally:
            os.close(root)

    def _open_dir(self, target: _beneath.Located, shown: str) -> int | None:
        """A descriptor of the located directory; ``None`` if it is a file."""
        if target.name is None:
            return os.dup(target.fd)
        try:
            return os.open(target.name, _beneath.SUBDIR_FLAGS, dir_fd=target.fd)
        except FileNotFoundError:
            raise _missing(shown) from None
        except NotADirectoryError:
            return None
        except OSError as exc:
            if _beneath.is_link_error(exc):
                raise BackendError(
                    "{path} changed while it was opened (it became a symbolic link); try again",
                    path=shown,
                ) from None
            raise

    def _open_file(self, target: _beneath.Located, shown: str) -> tuple[int, os.stat_result]:
        """A read descriptor of the located regular file, with its status."""
        if target.name is None:
            raise _is_a_dir(shown)
        try:
            fd = os.open(target.name, _beneath.READ_FLAGS, dir_fd=target.fd)
        except FileNotFoundError:
            raise _no_file(shown) from None
        except OSError as exc:
            if _beneath.is_link_error(exc):
                raise BackendError(
                    "{path} is a symbolic link that changed while it was opened; try again",
                    path=shown,
                ) from None
            raise
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise _is_a_dir(shown)
            if not stat.S_ISREG(info.st_mode):
                raise BackendError(
                    "{path} is not a regular file (a device, pipe or socket); it cannot be read",
                    path=shown,
                )
        except BaseException:
            os.close(fd)
            raise
        return fd, info

    def _read_bytes(self, fd: int, limit: int) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)

    def _walk(
        self, fd: int, max_depth: int | None
    ) -> Iterator[tuple[tuple[str, ...], int, str, os.stat_result]]:
        """Regular files under the directory ``fd``, depth first in name order, as (relative
        parts, directory descriptor, name, status). Links are never entered or reported.

        Iterative, so any depth works; folders are opened relative to their parent with
        ``O_NOFOLLOW``. Below ``_KEEP_OPEN`` levels a folder's descriptor is closed while its
        subfolders are walked and opened again through ``..`` afterwards, checked to be the
        same folder (device and inode): a deep chain does not run out of descriptors. If it is
        not the same folder (the tree was moved meanwhile), the rest of it is skipped.
        """
        stack = [_Frame(fd, (), _entries(fd), os.fstat(fd))]
        try:
            while stack:
                frame = stack[-1]
                if frame.index >= len(frame.entries):
                    stack.pop()
                    if stack and stack[-1].fd < 0:
                        self._reenter(stack, frame.fd)
                    if frame.fd != fd:
                        os.close(frame.fd)
                    continue
                name, info = frame.entries[frame.index]
                frame.index += 1
                if stat.S_ISREG(info.st_mode):
                    yield (*frame.rel, name), frame.fd, name, info
                    continue
                if name in _SKIP_DIRS or (
                    max_depth is not None and len(frame.rel) + 1 >= max_depth
                ):
                    continue
                try:
                    sub = os.open(name, _beneath.SUBDIR_FLAGS, dir_fd=frame.fd)
                except OSError:
                    continue
                try:
                    child = _Frame(sub, (*frame.rel, name), _entries(sub), os.fstat(sub))
                except OSError:
                    os.close(sub)
                    continue
                if len(stack) > _KEEP_OPEN and frame.fd != fd:
                    os.close(frame.fd)
                    frame.fd = -1
                stack.append(child)
        finally:
            for frame in stack:
                if frame.fd >= 0 and frame.fd != fd:
                    os.close(frame.fd)

    @staticmethod
    def _reenter(stack: list[_Frame], child: int) -> None:
        """Open the folder on top of ``stack`` again through ``..`` of ``child``; if that is not
        the same folder, drop the closed folders from the stack (their rest is not walked)."""
        parent = stack[-1]
        try:
            up = os.open("..", _beneath.SUBDIR_FLAGS, dir_fd=child)
        except OSError:
            up = -1
        if up >= 0:
            info = os.fstat(up)
            if (info.st_dev, info.st_ino) == (parent.info.st_dev, parent.info.st_ino):
                parent.fd = up
                return
            os.close(up)
        while stack and stack[-1].fd < 0:
            stack.pop()

    # -- operations (in a worker thread) -----------------------------------------------------

    def _stat_sync(self, p: str) -> FileInfo | None:
        try:
            target = self._locate(_split(p), p)
        except _NotFound:
            return None
        try:
            if target.name is None:
                info = os.fstat(target.fd)
            else:
                try:
                    info = os.stat(target.name, dir_fd=target.fd, follow_symlinks=False)
                except FileNotFoundError:
                    return None
            is_dir = stat.S_ISDIR(info.st_mode)
            return FileInfo(p, is_dir, 0 if is_dir else info.st_size, info.st_mtime)
        finally:
            target.close()

    def _ls_sync(self, p: str) -> list[FileInfo]:
        target = self._locate(_split(p), p)
        try:
            dfd = self._open_dir(target, p)
            if dfd is None:
                assert target.name is not None
                info = os.stat(target.name, dir_fd=target.fd, follow_symlinks=False)
                return [FileInfo(p, False, info.st_size, info.st_mtime)]
            folder = target.parts
        finally:
            target.close()
        out: list[FileInfo] = []
        try:
            with os.scandir(dfd) as entries:
                listed = sorted(entries, key=lambda e: e.name)
            for entry in listed:
                shown = _child(p, entry.name)
                try:
                    entry.name.encode("utf-8")
                    if entry.is_symlink():
                        linked = self._stat_link(folder, entry.name, shown)
                        if linked is not None:
                            out.append(linked)
                        continue
                    info = entry.stat(follow_symlinks=False)
                except (OSError, UnicodeEncodeError):
                    continue
                if stat.S_ISDIR(info.st_mode):
                    out.append(FileInfo(shown, True, 0, info.st_mtime))
                elif stat.S_ISREG(info.st_mode):
                    out.append(FileInfo(shown, False, info.st_size, info.st_mtime))
        finally:
            os.close(dfd)
        return out

    def _stat_link(self, folder: tuple[str, ...], name: str, shown: str) -> FileInfo | None:
        """What a link in a listing points to, if that is inside the root (else ``None``)."""
        try:
            target = self._locate((*folder, name), shown)
        except BackendError:
            return None
        try:
            if target.name is None:
                info = os.fstat(target.fd)
            else:
                info = os.stat(target.name, dir_fd=target.fd, follow_symlinks=False)
        except OSError:
            return None
        finally:
            target.close()
        if stat.S_ISDIR(info.st_mode):
            return FileInfo(shown, True, 0, info.st_mtime)
        if stat.S_ISREG(info.st_mode):
            return FileInfo(shown, False, info.st_size, info.st_mtime)
        return None

    def _read_sync(self, p: str) -> str:
        target = self._locate(_split(p), p)
        try:
            fd, info = self._open_file(target, p)
        finally:
            target.close()
        try:
            if info.st_size > self.max_read_bytes:
                raise BackendError(
                    f"{{path}} is {info.st_size} bytes, more than the {self.max_read_bytes}-byte "
                    "read limit; use grep to find the lines you need in it",
                    path=p,
                )
            data = self._read_bytes(fd, self.max_read_bytes)
        finally:
            os.close(fd)
        if len(data) > self.max_read_bytes:
            raise BackendError(
                f"{{path}} is larger than the {self.max_read_bytes}-byte read limit; use grep "
                "to find the lines you need in it",
                path=p,
            )
        if b"\x00" in data:
            raise BackendError(
                f"{{path}} is a binary file ({len(data)} bytes); only text files can be read",
                path=p,
            )
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise BackendError(
                f"{{path}} is not UTF-8 text (binary or another encoding, {len(data)} bytes); "
                "only UTF-8 text files can be read",
                path=p,
            ) from None

    def _write_sync(self, p: str, data: bytes) -> FileInfo:
        if p == "/":
            raise _is_a_dir(p)
        target = self._locate(_split(p), p, make_parents=True)
        try:
            assert target.name is not None
            name = target.name
            mode = 0o644
            try:
                old = os.stat(name, dir_fd=target.fd, follow_symlinks=False)
            except FileNotFoundError:
                pass
            else:
                if stat.S_ISDIR(old.st_mode):
                    raise BackendError(
                        "{path} is a directory; write to a file inside it, e.g. {path}/notes.md",
                        path=p,
                    )
                if not stat.S_ISREG(old.st_mode):
                    raise BackendError(
                        "{path} is not a regular file (a device, pipe or socket); it cannot be "
                        "written",
                        path=p,
                    )
                mode = stat.S_IMODE(old.st_mode)
            temp = f".{secrets.token_hex(8)}.tmp"
            fd = os.open(temp, _TEMP_FLAGS, 0o600, dir_fd=target.fd)
            try:
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view) :]
                    os.fchmod(fd, mode)
                    info = os.fstat(fd)
                finally:
                    os.close(fd)
                os.replace(temp, name, src_dir_fd=target.fd, dst_dir_fd=target.fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=target.fd)
                raise
            return FileInfo(p, False, info.st_size, info.st_mtime)
        finally:
            target.close()

    def _glob_sync(self, pattern: str, p: str, limit: int) -> list[FileInfo]:
        regex = _compile_glob(pattern)
        target = self._locate(_split(p), p)
        try:
            dfd = self._open_dir(target, p)
        finally:
            target.close()
        if dfd is None:
            raise _not_a_dir(p)
        out: list[FileInfo] = []
        try:
            for rel, _fd, _name, info in self._walk(dfd, _glob_depth(pattern)):
                if regex.fullmatch("/".join(rel)):
                    out.append(
                        FileInfo(_join(p, "/" + "/".join(rel)), False, info.st_size, info.st_mtime)
                    )
                    if len(out) >= limit:
                        break
        finally:
            os.close(dfd)
        return out

    def _grep_file(
        self, fd: int, name: str, shown: str, regex: re.Pattern[str], context: int
    ) -> list[GrepLine]:
        try:
            file = os.open(name, _beneath.READ_FLAGS, dir_fd=fd)
        except OSError:
            return []
        try:
            info = os.fstat(file)
            if not stat.S_ISREG(info.st_mode) or info.st_size > self.max_read_bytes:
                return []
            data = self._read_bytes(file, self.max_read_bytes)
        finally:
            os.close(file)
        if len(data) > self.max_read_bytes or b"\x00" in data:
            return []
        return _grep_text(shown, data.decode("utf-8", "replace"), regex, context)

    def _grep_sync(
        self, regex: re.Pattern[str], p: str, wanted: _FileFilter, context: int, limit: int
    ) -> list[GrepLine]:
        target = self._locate(_split(p), p)
        try:
            dfd = self._open_dir(target, p)
            if dfd is None:
                assert target.name is not None
                return self._grep_file(target.fd, target.name, p, regex, context)[:limit]
        finally:
            target.close()
        out: list[GrepLine] = []
        try:
            for rel, fd, name, _info in self._walk(dfd, None):
                relative = "/".join(rel)
                if not wanted(relative):
                    continue
                out.extend(self._grep_file(fd, name, _join(p, "/" + relative), regex, context))
                if len(out) >= limit:
                    return out[:limit]
        finally:
            os.close(dfd)
        return out

    def _rg_prepare(self, p: str) -> tuple[str, int, str] | None:
        """The ``rg`` executable, a descriptor of the directory to search and the directory to
        start it in, or ``None`` when ``rg`` is not used (not installed, disabled, or ``p`` is a
        file)."""
        if self.ripgrep is False:
            return None
        executable = self.ripgrep if isinstance(self.ripgrep, str) else shutil.which("rg")
        if not executable:
            return None
        target = self._locate(_split(p), p)
        try:
            dfd = self._open_dir(target, p)
        finally:
            target.close()
        if dfd is None:
            return None
        # the child starts in the directory through its descriptor: no path to swap for a link
        if os.path.isdir("/proc/self/fd"):
            return executable, dfd, f"/proc/self/fd/{dfd}"
        return executable, dfd, self._real() + _join("", p)

    def _read_beneath(self, dfd: int, relative: str) -> str | None:
        """The text of the file ``relative`` under the folder ``dfd``, opened with
        ``O_NOFOLLOW`` on every part; ``None`` if that fails or it is not a text file that
        ``grep`` searches (not regular, too large, binary)."""
        parts = relative.split("/")
        if any(part in ("", ".", "..") for part in parts):
            return None
        try:
            file = _beneath.open_strict(dfd, parts)
        except OSError:
            return None
        try:
            info = os.fstat(file)
            if not stat.S_ISREG(info.st_mode) or info.st_size > self.max_read_bytes:
                return None
            data = self._read_bytes(file, self.max_read_bytes)
        except OSError:
            return None
        finally:
            os.close(file)
        if len(data) > self.max_read_bytes or b"\x00" in data:
            return None
        return data.decode("utf-8", "replace")

    def _checked_rg(
        self,
        dfd: int,
        found: list[tuple[str, GrepLine]],
        regex: re.Pattern[str],
        context: int,
        limit: int,
    ) -> list[GrepLine]:
        """ripgrep's lines, each checked against the file as opened here (``_read_beneath``).

        rg opens files by path, so a folder or file swapped for a link while it runs can make
        it read outside the root. Every file it names is opened again without following any
        link and every line must be in it, the same, at the same number: a file whose lines
        differ is searched here instead (the Python search of its safely read text), one that
        cannot be opened that way is left out. Only text read through descriptors from the
        root is ever returned.
        """
        out: list[GrepLine] = []
        for relative, group in itertools.groupby(found, key=lambda item: item[0]):
            lines = [line for _, line in group]
            text = self._read_beneath(dfd, relative)
            if text is None:
                continue
            have = text.split("\n")
            if all(
                0 < g.line <= len(have)
                and have[g.line - 1].removesuffix("\r")[:MAX_GREP_LINE_CHARS] == g.text
                for g in lines
            ):
                out.extend(lines)
            else:
                out.extend(_grep_text(lines[0].path, text, regex, context))
            if len(out) >= limit:
                break
        return out[:limit]

    async def _rg(
        self,
        executable: str,
        dfd: int,
        cwd: str,
        pattern: str,
        p: str,
        glob: str | None,
        context: int,
        limit: int,
    ) -> list[tuple[str, GrepLine]] | None:
        """Search with ripgrep in the directory ``dfd``: (path relative to it, line) pairs,
        unchecked (``_checked_rg`` checks them); ``None`` if rg failed (the caller falls back to
        the Python search, which reports the error if there is one)."""
        args = [
            executable, "--json", "--no-config", "--hidden", "--no-ignore", "--no-follow",
            "--sort", "path", "--max-filesize", str(self.max_read_bytes), "-g", "!.git",
        ]  # fmt: skip
        if glob:
            args += ["-g", glob.strip()]
        if context > 0:
            args += ["-C", str(context)]
        args += ["-e", pattern, "--", "."]
        try:
            process = await asyncio.create_subprocess_exec(
                *args,
                cwd=cwd,
                pass_fds=(dfd,),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                limit=self.max_read_bytes * 6 + (1 << 16),  # one JSON line holds a whole line
            )
        except OSError:  # rg cannot be started (removed, not executable): search in Python
            return None
        assert process.stdout is not None
        out: list[tuple[str, GrepLine]] = []
        stopped = False
        try:
            async for raw in process.stdout:
                message = json.loads(raw)
                kind = message.get("type")
                if kind not in ("match", "context"):
                    continue
                data = message["data"]
                path = _rg_text(data["path"]).removeprefix("./")
                line = _rg_text(data["lines"])
                line = line.removesuffix("\n").removesuffix("\r")
                shown = _join(p, "/" + path)
                number = int(data["line_number"])
                out.append(
                    (path, GrepLine(shown, number, line[:MAX_GREP_LINE_CHARS], kind == "match"))
                )
                if len(out) >= limit:
                    stopped = True
                    break
            if stopped:
                process.kill()
            code = await process.wait()
        except (ValueError, KeyError, TypeError):  # output rg should not give: search in Python
            return None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if not stopped and code not in (0, 1) and not out:
            return None
        return out

    # -- the protocol -------------------------------------------------------------------------

    async def stat(self, path: str) -> FileInfo | None:
        return await asyncio.to_thread(self._stat_sync, self._normalize(path))

    async def ls(self, path: str = "/") -> list[FileInfo]:
        return await asyncio.to_thread(self._ls_sync, self._normalize(path))

    async def read(self, path: str) -> str:
        return await asyncio.to_thread(self._read_sync, self._normalize(path))

    async def write(self, path: str, content: str) -> FileInfo:
        p = self._normalize(path)
        _encode(p, content, self.max_write_bytes)
        return await asyncio.to_thread(self._write_sync, p, content.encode("utf-8"))

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        _compile_glob(pattern)
        return await asyncio.to_thread(
            self._glob_sync, pattern, self._normalize(path), _check_limit(limit)
        )

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        regex = _compile_regex(pattern)
        wanted = _FileFilter(glob)
        _check_limit(limit)
        context = max(0, context)
        p = self._normalize(path)
        prepared = await asyncio.to_thread(self._rg_prepare, p)
        if prepared is not None:
            executable, dfd, cwd = prepared
            try:
                found = await self._rg(executable, dfd, cwd, pattern, p, glob, context, limit)
                if found is not None:
                    # the thread owns its own descriptor: if this call is cancelled, the
                    # ``finally`` below must not close one the thread is still using
                    mine = os.dup(dfd)

                    def check() -> list[GrepLine]:
                        try:
                            return self._checked_rg(mine, found, regex, context, limit)
                        finally:
                            os.close(mine)

                    return await asyncio.to_thread(check)
            finally:
                os.close(dfd)
        return await asyncio.to_thread(self._grep_sync, regex, p, wanted, context, limit)


def _rg_text(field: Mapping[str, Any]) -> str:
    """A ripgrep JSON text field: ``{"text": ...}`` or ``{"bytes": base64}`` (not UTF-8)."""
    if "text" in field:
        return str(field["text"])
    return base64.b64decode(field.get("bytes", "")).decode("utf-8", "replace")


# ---------------------------------------------------------------------------------- composite


class CompositeBackend:
    """Routes path prefixes to backends: ``CompositeBackend(StateBackend(...), {"/memories/":
    store, "/workspace/": fs})``.

    The longest matching prefix wins; the backend sees the path without it (``/workspace/a.py``
    is ``/a.py`` to ``fs``) and results and errors show it with the prefix again. Other paths go
    to ``default``. Route folders appear in listings of their parent folders.
    """

    def __init__(self, default: FileBackend, routes: Mapping[str, FileBackend]) -> None:
        table: dict[str, FileBackend] = {}
        for prefix, backend in routes.items():
            try:
                p = normalize_path(prefix)
            except BackendError as exc:
                raise UsageError(f"route {prefix!r} is not a valid path: {exc}") from None
            if p == "/":
                raise UsageError("a route cannot be '/': pass that backend as the default")
            table[p] = backend
        self.default = default
        self.routes: tuple[tuple[str, FileBackend], ...] = tuple(
            sorted(table.items(), key=lambda item: len(item[0]), reverse=True)
        )

    def __repr__(self) -> str:
        return f"<CompositeBackend {', '.join(p + '/' for p, _ in self.routes)}>"

    def _route(self, p: str) -> tuple[FileBackend, str, str]:
        """(backend, its path, route prefix or ``""``) for the normalised path ``p``."""
        for prefix, backend in self.routes:
            if p == prefix or p.startswith(prefix + "/"):
                return backend, p[len(prefix) :] or "/", prefix
        return self.default, p, ""

    def _owner(self, p: str) -> str:
        return self._route(p)[2]

    def _routes_below(self, p: str) -> list[tuple[str, FileBackend]]:
        """Routes strictly inside the folder ``p``."""
        prefix = _dir_prefix(p)
        return [(r, b) for r, b in self.routes if r.startswith(prefix) and r != p]

    async def _call(self, prefix: str, pending: Awaitable[_T]) -> _T:
        try:
            return await pending
        except BackendError as exc:
            raise exc.mounted(prefix) from None

    async def stat(self, path: str) -> FileInfo | None:
        p = normalize_path(path)
        backend, inner, prefix = self._route(p)
        info: FileInfo | None = await self._call(prefix, backend.stat(inner))
        if info is not None:
            return FileInfo(_join(prefix, info.path), info.is_dir, info.size, info.modified)
        if (prefix and inner == "/") or self._routes_below(p):
            return FileInfo(p, True, 0, 0.0)
        return None

    async def ls(self, path: str = "/") -> list[FileInfo]:
        p = normalize_path(path)
        backend, inner, prefix = self._route(p)
        below = self._routes_below(p)
        entries: dict[str, FileInfo] = {}
        try:
            listed: list[FileInfo] = await self._call(prefix, backend.ls(inner))
        except BackendError:
            if not below and not (prefix and inner == "/"):
                raise
            listed = []
        for info in listed:
            outer = _join(prefix, info.path)
            if self._owner(outer) == prefix:
                entries[outer] = FileInfo(outer, info.is_dir, info.size, info.modified)
        start = len(_dir_prefix(p))
        for route, _backend in below:
            folder = _child(p, route[start:].split("/", 1)[0])
            entries[folder] = FileInfo(folder, True, 0, 0.0)
        return [entries[key] for key in sorted(entries, key=_sort_key)]

    async def read(self, path: str) -> str:
        backend, inner, prefix = self._route(normalize_path(path))
        text: str = await self._call(prefix, backend.read(inner))
        return text

    async def write(self, path: str, content: str) -> FileInfo:
        backend, inner, prefix = self._route(normalize_path(path))
        info: FileInfo = await self._call(prefix, backend.write(inner, content))
        return FileInfo(_join(prefix, info.path), info.is_dir, info.size, info.modified)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        regex = _compile_glob(pattern)
        _check_limit(limit)
        p = normalize_path(path)
        backend, inner, prefix = self._route(p)
        found: list[FileInfo] = []
        below = self._routes_below(p)
        try:
            listed = await self._call(prefix, backend.glob(pattern, inner, limit=limit))
        except BackendError:
            if not below:
                raise
            listed = []
        found += [
            self._mount(prefix, f) for f in listed if self._owner(_join(prefix, f.path)) == prefix
        ]
        start = len(_dir_prefix(p))
        for route, sub in below:
            everything = await self._call(route, sub.glob("**", "/", limit=10**6))
            for f in everything:
                outer = _join(route, f.path)
                if self._owner(outer) == route and regex.fullmatch(outer[start:]):
                    found.append(self._mount(route, f))
        found.sort(key=lambda f: _sort_key(f.path))
        return found[:limit]

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        _compile_regex(pattern)
        wanted = _FileFilter(glob)
        _check_limit(limit)
        p = normalize_path(path)
        backend, inner, prefix = self._route(p)
        below = self._routes_below(p)
        found: list[GrepLine] = []
        try:
            lines = await self._call(
                prefix, backend.grep(pattern, inner, glob=glob, context=context, limit=limit)
            )
        except BackendError:
            if not below:
                raise
            lines = []
        found += [
            GrepLine(_join(prefix, g.path), g.line, g.text, g.match)
            for g in lines
            if self._owner(_join(prefix, g.path)) == prefix
        ]
        start = len(_dir_prefix(p))
        sub_glob = None if wanted.anchored else glob
        for route, sub in below:
            sub_lines = await self._call(
                route, sub.grep(pattern, "/", glob=sub_glob, context=context, limit=limit)
            )
            for g in sub_lines:
                outer = _join(route, g.path)
                if self._owner(outer) == route and (not wanted.anchored or wanted(outer[start:])):
                    found.append(GrepLine(outer, g.line, g.text, g.match))
        found.sort(key=lambda g: (_sort_key(g.path), g.line))
        return found[:limit]

    @staticmethod
    def _mount(prefix: str, info: FileInfo) -> FileInfo:
        return FileInfo(_join(prefix, info.path), info.is_dir, info.size, info.modified)
