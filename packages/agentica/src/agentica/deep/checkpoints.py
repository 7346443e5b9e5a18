"""``Checkpoints``: undo for the files an agent writes, turn by turn (``agentica code``'s undo).

A checkpoint is what a path held before a turn first wrote it (``begin_turn``: one per user
prompt): its text, its bytes when it is not text, or that it did not exist. ``Checkpoints`` is a
``FileBackend`` around another one that keeps them; ``undo`` puts back the paths of the latest
turn and forgets it (repeated undos walk back turn by turn), ``diff`` shows what the session
changed, ``snapshot``/``restore`` carry them across processes. Originals are kept in memory: a
file over ``max_file_bytes`` (2 MB), or one past ``max_total_bytes`` (50 MB) in all, is recorded
as unrestorable and undo says so. Only writes through this backend are seen (not a command's).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import difflib
import os
import stat
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentica.deep.backends.composite import CompositeBackend
from agentica.deep.backends.filesystem import FilesystemBackend
from agentica.deep.backends.paths import NotFound, normalize_path, parent_path, split_path
from agentica.errors import UsageError
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine

__all__ = ["Checkpoints", "UndoReport"]

MAX_FILE_BYTES = 2_000_000
MAX_TOTAL_BYTES = 50_000_000
MAX_DIFF_LINES = 400
_SNAPSHOT_VERSION = 1

_Kind = Literal["text", "bytes", "absent", "unrestorable"]
_KINDS: tuple[_Kind, ...] = ("text", "bytes", "absent", "unrestorable")


@dataclass(slots=True)
class _Before:
    """What a path held: ``text``, ``bytes`` (a file that is not UTF-8 text), ``absent`` (with
    the folders its first write created, outermost first) or ``unrestorable`` (``reason``)."""

    kind: _Kind
    text: str = ""
    data: bytes = b""
    reason: str = ""
    made_dirs: tuple[str, ...] = ()

    def cost(self) -> int:
        """The bytes it holds in memory (counted against ``max_total_bytes``)."""
        return len(self.text.encode("utf-8", "replace")) + len(self.data)


@dataclass(slots=True)
class _Turn:
    number: int
    label: str
    files: dict[str, _Before] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UndoReport:
    """What ``Checkpoints.undo`` did.

    Attributes:
        turn: the turn undone; ``None`` when there was nothing to undo.
        label: its label (``begin_turn``).
        restored: the paths given back their content from before the turn.
        deleted: the paths deleted (they did not exist before the turn).
        problems: one sentence per path that could not be put back as it was.
    """

    turn: int | None
    label: str = ""
    restored: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.turn is None:
            return "nothing to undo"
        lines = [f"undid turn {self.turn}" + (f" ({self.label})" if self.label else "")]
        if self.restored:
            lines.append("restored: " + ", ".join(self.restored))
        if self.deleted:
            lines.append("deleted: " + ", ".join(self.deleted))
        lines += [f"problem: {problem}" for problem in self.problems]
        return "\n".join(lines)


class Checkpoints:
    """A ``FileBackend`` that forwards every call to ``inner`` and keeps, for each turn, what the
    paths it writes held before, so that the turn can be undone.

    ``write`` is the only mutating method of the protocol (and of the built-in backends). Before
    the first write of a path in a turn, the path's state is recorded: its text; for a file that
    is not text its bytes, when the backend can read and write bytes (a method ``read_bytes`` /
    ``write_bytes``, or a ``FilesystemBackend``, directly or under a ``CompositeBackend`` route,
    through its own guarded descriptors), else it is recorded as unrestorable; or that it was
    absent. A write the inner backend refuses records nothing. Writes through one
    ``Checkpoints`` run one at a time (the file tools' writes are exclusive anyway).

    Undoing a file that did not exist deletes it (the backend's ``delete`` method, or an unlink
    beneath a ``FilesystemBackend``'s root found as it finds paths, never through a link out of
    it) and removes the folders its write created if they are empty; a backend that cannot
    delete gets the file emptied instead, and the report says so.

    Args:
        inner: the backend the files are in.
        max_file_bytes: a file larger than this is recorded as unrestorable.
        max_total_bytes: the most bytes of originals kept in memory in all; once full, further
            files are recorded as unrestorable (undo frees what it gives back).
        max_diff_lines: the most lines ``diff`` shows per file.
    """

    def __init__(
        self,
        inner: FileBackend,
        *,
        max_file_bytes: int = MAX_FILE_BYTES,
        max_total_bytes: int = MAX_TOTAL_BYTES,
        max_diff_lines: int = MAX_DIFF_LINES,
    ) -> None:
        self.inner = inner
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.max_diff_lines = max_diff_lines
        self._turns: list[_Turn] = [_Turn(0, "")]
        self._next = 1
        self._held = 0
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"Checkpoints({self.inner!r})"

    # -- turns --------------------------------------------------------------------------------

    @property
    def turn(self) -> int:
        """The number of the current turn (0 before the first ``begin_turn``)."""
        return self._turns[-1].number

    def begin_turn(self, label: str) -> int:
        """Start a new turn (before each user prompt) labelled ``label``; its number."""
        number = self._next
        self._next += 1
        if not self._lock.locked():  # (a write in progress may be recording into an empty turn)
            self._turns = [turn for turn in self._turns if turn.files]
        self._turns.append(_Turn(number, label))
        return number

    def changed(self, since: int = 0) -> list[str]:
        """The paths written in the session (turns not undone), in the order first written;
        with ``since`` only those of turns numbered ``since`` or later."""
        seen: dict[str, None] = {}
        for turn in self._turns:
            for path in turn.files if turn.number >= since else ():
                seen.setdefault(path)
        return list(seen)

    # -- the protocol ---------------------------------------------------------------------------

    async def ls(self, path: str = "/") -> list[FileInfo]:
        return await self.inner.ls(path)

    async def stat(self, path: str) -> FileInfo | None:
        return await self.inner.stat(path)

    async def read(self, path: str) -> str:
        return await self.inner.read(path)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        return await self.inner.glob(pattern, path, limit=limit)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        return await self.inner.grep(pattern, path, glob=glob, context=context, limit=limit)

    async def write(self, path: str, content: str) -> FileInfo:
        """Write through to ``inner``, first recording what ``path`` held if this turn has not
        written it yet."""
        try:
            p = normalize_path(path)
        except BackendError:
            return await self.inner.write(path, content)  # refused there, with its message
        async with self._lock:
            turn = self._turns[-1]
            if p in turn.files:
                return await self.inner.write(path, content)
            before: _Before | None = None
            unreadable = ""
            try:
                before = await self._capture(p, folders=True)
            except BackendError as exc:
                unreadable = str(exc)
            if before is None:  # the write is refused too, as a rule
                info = await self.inner.write(path, content)
                reason = f"what it held before could not be read ({unreadable})"
                self._keep(turn, p, _Before("unrestorable", reason=reason))
                return info
            self._keep(turn, p, before)
            try:
                return await self.inner.write(path, content)
            except BackendError:  # refused: nothing changed
                self._held -= turn.files.pop(p).cost()
                raise

    # -- recording ------------------------------------------------------------------------------

    async def _capture(self, p: str, *, folders: bool) -> _Before:
        """The state of ``p`` now (``folders``: for a missing file, find the folders missing on
        its way, which a write would create)."""
        info = await self.inner.stat(p)
        if info is None:
            return _Before("absent", made_dirs=await self._missing_folders(p) if folders else ())
        if info.is_dir:
            return _Before("unrestorable", reason="it is a directory")
        if info.size > self.max_file_bytes:
            return self._too_large(info.size)
        try:
            text = await self.inner.read(p)
        except BackendError as exc:
            unreadable = str(exc)
        else:
            return _Before("text", text=text)
        data = await _read_bytes(self.inner, p, self.max_file_bytes)
        if data is None:
            reason = f"it is not text ({unreadable}) and the backend cannot read bytes"
            return _Before("unrestorable", reason=reason)
        if len(data) > self.max_file_bytes:
            return self._too_large(len(data))
        return _Before("bytes", data=data)

    def _too_large(self, size: int) -> _Before:
        reason = f"it is {size} bytes, over the {self.max_file_bytes}-byte limit of what undo keeps"
        return _Before("unrestorable", reason=reason)

    async def _missing_folders(self, p: str) -> tuple[str, ...]:
        made: list[str] = []
        folder = parent_path(p)
        while folder != "/" and await self.inner.stat(folder) is None:
            made.append(folder)
            folder = parent_path(folder)
        return tuple(reversed(made))

    def _keep(self, turn: _Turn, p: str, before: _Before) -> None:
        cost = before.cost()
        if cost and self._held + cost > self.max_total_bytes:
            reason = f"undo's memory for this session ({self.max_total_bytes} bytes) was full"
            before, cost = _Before("unrestorable", reason=reason), 0
        turn.files[p] = before
        self._held += cost

    # -- undo -----------------------------------------------------------------------------------

    async def undo(self) -> UndoReport:
        """Put every path the most recent turn that wrote something changed back as it was
        before that turn, then forget the turn. With nothing to undo, a report saying so."""
        async with self._lock:
            turn = next((t for t in reversed(self._turns) if t.files), None)
            if turn is None:
                return UndoReport(None)
            done: dict[str, list[str]] = {"restored": [], "deleted": [], "problem": [], "": []}
            for p, before in reversed(turn.files.items()):
                outcome, text = await self._put_back(p, before)
                done[outcome].append(text)
            made = {folder for before in turn.files.values() for folder in before.made_dirs}
            for folder in sorted(made, key=lambda f: len(split_path(f)), reverse=True):
                await _remove_empty_folder(self.inner, folder)
            self._held -= sum(before.cost() for before in turn.files.values())
            turn.files.clear()
            self._turns = [t for t in self._turns if t.files or t is self._turns[-1]]
            return UndoReport(
                turn.number,
                turn.label,
                tuple(reversed(done["restored"])),
                tuple(reversed(done["deleted"])),
                tuple(reversed(done["problem"])),
            )

    async def _put_back(self, p: str, before: _Before) -> tuple[str, str]:
        """Restore ``p``: (``"restored"``, ``"deleted"``, ``"problem"`` or ``""`` for nothing to
        do, the path or the problem)."""
        try:
            if before.kind == "text":
                await self.inner.write(p, before.text)
                return "restored", p
            if before.kind == "bytes":
                if await _write_bytes(self.inner, p, before.data):
                    return "restored", p
                return "problem", f"{p} held bytes that are not text and the backend cannot " + (
                    "write bytes; it was left as it is"
                )
            if before.kind == "absent":
                return await self._remove(p)
            return "problem", f"{p} was not restored: {before.reason}"
        except (BackendError, OSError) as exc:
            return "problem", f"{p} could not be restored: {exc}"

    async def _remove(self, p: str) -> tuple[str, str]:
        if await self.inner.stat(p) is None:
            return "", p
        if await _delete(self.inner, p):
            return "deleted", p
        await self.inner.write(p, "")
        return "problem", (
            f"{p} did not exist before the turn, but the backend cannot delete files: it was "
            "emptied instead"
        )

    # -- diff -----------------------------------------------------------------------------------

    async def diff(self) -> str:
        """A unified diff (``a/path``, ``b/path``, 3 lines of context) of every path the session
        changed: its content before its first write against its content now (``/dev/null`` for
        a file that did not exist), in path order, each file's diff cut at ``max_diff_lines``."""
        async with self._lock:
            originals: dict[str, _Before] = {}
            for turn in self._turns:
                for p, before in turn.files.items():
                    originals.setdefault(p, before)
            parts: list[str] = []
            for p in sorted(originals, key=lambda p: tuple(p.split("/"))):
                try:
                    now = await self._capture(p, folders=False)
                except BackendError as exc:
                    now = _Before("unrestorable", reason=f"it cannot be read ({exc})")
                parts.append(
                    await asyncio.to_thread(_file_diff, p, originals[p], now, self.max_diff_lines)
                )
        return "".join(parts)

    # -- state ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The recorded turns as JSON-serialisable data (texts as str, bytes in base64), for
        ``Checkpoints.restore`` in another process."""
        current = self._turns[-1]
        return {
            "version": _SNAPSHOT_VERSION,
            "next": self._next,
            "turns": [
                {
                    "number": turn.number,
                    "label": turn.label,
                    "files": [_dump(p, before) for p, before in turn.files.items()],
                }
                for turn in self._turns
                if turn.files or turn is current
            ],
        }

    @classmethod
    def restore(cls, inner: FileBackend, data: Mapping[str, Any], **limits: int) -> Checkpoints:
        """A ``Checkpoints`` over ``inner`` holding the turns of ``snapshot()`` data; ``limits``
        as for the constructor. ``UsageError`` if ``data`` is not such a snapshot."""
        made = cls(inner, **limits)
        try:
            if data["version"] != _SNAPSHOT_VERSION:
                raise ValueError(f"version {data['version']!r}, expected {_SNAPSHOT_VERSION}")
            turns = [
                _Turn(
                    int(turn["number"]),
                    str(turn["label"]),
                    {str(file["path"]): _load(file) for file in turn["files"]},
                )
                for turn in data["turns"]
            ]
            next_number = int(data["next"])
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise UsageError(f"not a Checkpoints snapshot: {type(exc).__name__}: {exc}") from None
        made._turns = turns or [_Turn(0, "")]
        made._next = max([next_number, *(turn.number + 1 for turn in made._turns)])
        made._held = sum(b.cost() for turn in made._turns for b in turn.files.values())
        return made


# -- snapshot data ------------------------------------------------------------------------------


def _dump(p: str, before: _Before) -> dict[str, Any]:
    out: dict[str, Any] = {"path": p, "kind": before.kind}
    if before.kind == "text":
        out["text"] = before.text
    elif before.kind == "bytes":
        out["base64"] = base64.b64encode(before.data).decode("ascii")
    elif before.kind == "absent":
        out["made_dirs"] = list(before.made_dirs)
    else:
        out["reason"] = before.reason
    return out


def _load(file: Mapping[str, Any]) -> _Before:
    kind = file["kind"]
    if kind not in _KINDS:
        raise ValueError(f"unknown kind {kind!r}")
    if kind == "text":
        if not isinstance(file["text"], str):
            raise TypeError("text is not a string")
        return _Before("text", text=file["text"])
    if kind == "bytes":
        return _Before("bytes", data=base64.b64decode(file["base64"], validate=True))
    if kind == "absent":
        return _Before("absent", made_dirs=tuple(str(d) for d in file.get("made_dirs", ())))
    return _Before("unrestorable", reason=str(file.get("reason", "")))


# -- diff ---------------------------------------------------------------------------------------


def _lines(text: str) -> list[str]:
    """``text`` split after each ``\\n`` (only there; the last line may lack it)."""
    parts = text.split("\n")
    return [line + "\n" for line in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _file_diff(p: str, old: _Before, new: _Before, max_lines: int) -> str:
    """The diff of ``p`` from ``old`` to ``new`` ("" if they are the same)."""
    plain = ("text", "absent")
    old_name = "/dev/null" if old.kind == "absent" else "a" + p
    new_name = "/dev/null" if new.kind == "absent" else "b" + p
    if old.kind not in plain or new.kind not in plain:
        if old.kind == new.kind == "bytes" and old.data == new.data:
            return ""
        if old.kind == "unrestorable":
            return f"# {p}: changed; its content before was not kept: {old.reason}\n"
        if new.kind == "unrestorable":
            return f"# {p}: changed; its content now is not shown: {new.reason}\n"
        return f"Binary files {old_name} and {new_name} differ\n"
    if old.kind == new.kind and old.text == new.text:
        return ""
    found = difflib.unified_diff(_lines(old.text), _lines(new.text), old_name, new_name, n=3)
    out: list[str] = []
    for line in found:
        if line.endswith("\n"):
            out.append(line)
        else:
            out += [line + "\n", "\\ No newline at end of file\n"]
    if not out:
        what = "an empty file created" if old.kind == "absent" else "an empty file deleted"
        return f"# {p}: {what}\n"
    if len(out) > max_lines:
        left = len(out) - max_lines
        out = [*out[:max_lines], f"# ... {left} more lines of the diff of {p} not shown\n"]
    return "".join(out)


# -- beyond the protocol: bytes, deleting -------------------------------------------------------


def _find(
    backend: FileBackend, p: str, method: str | None
) -> tuple[Callable[..., Awaitable[Any]] | None, FilesystemBackend | None, str]:
    """Where ``method`` is for the path ``p``: the backend's own method, or the
    ``FilesystemBackend`` holding ``p`` (following ``CompositeBackend`` routes), with the path
    there; (None, None, p) if neither."""
    while True:
        own = getattr(backend, method, None) if method else None
        if callable(own):
            return own, None, p
        if isinstance(backend, FilesystemBackend):
            return None, backend, p
        if not isinstance(backend, CompositeBackend):
            return None, None, p
        backend, p, _prefix = backend._route(p)


async def _read_bytes(backend: FileBackend, p: str, limit: int) -> bytes | None:
    """The bytes of the file ``p`` (at most ``limit + 1``), or ``None`` if the backend cannot
    read bytes."""
    own, fs, q = _find(backend, p, "read_bytes")
    if own is not None:
        return bytes(await own(q))
    if fs is None:
        return None
    return await asyncio.to_thread(_fs_read_bytes, fs, fs._normalize(q), limit)


async def _write_bytes(backend: FileBackend, p: str, data: bytes) -> bool:
    """Write ``data`` to ``p`` atomically; ``False`` if the backend cannot write bytes."""
    own, fs, q = _find(backend, p, "write_bytes")
    if own is not None:
        await own(q, data)
        return True
    if fs is None:
        return False
    await asyncio.to_thread(fs._write_sync, fs._normalize(q), data)
    return True


async def _delete(backend: FileBackend, p: str) -> bool:
    """Delete the file ``p``; ``False`` if the backend cannot delete files."""
    own, fs, q = _find(backend, p, "delete")
    if own is not None:
        await own(q)
        return True
    if fs is None:
        return False
    await asyncio.to_thread(_fs_delete, fs, fs._normalize(q))
    return True


async def _remove_empty_folder(backend: FileBackend, p: str) -> None:
    """Remove the folder ``p`` if it is empty and the backend is a ``FilesystemBackend`` (other
    backends have no empty folders); anything else leaves it."""
    _own, fs, q = _find(backend, p, None)
    if fs is not None:
        with contextlib.suppress(BackendError, OSError):
            await asyncio.to_thread(_fs_remove_empty_folder, fs, fs._normalize(q))


def _fs_read_bytes(fs: FilesystemBackend, p: str, limit: int) -> bytes:
    """The file ``p`` read as ``FilesystemBackend.read`` opens it (no link out of the root)."""
    target = fs._locate(split_path(p), p)
    try:
        fd, _info = fs._open_file(target, p)
    finally:
        target.close()
    try:
        return fs._read_bytes(fd, limit)
    finally:
        os.close(fd)


def _fs_delete(fs: FilesystemBackend, p: str) -> None:
    """Unlink the regular file ``p``, found as ``FilesystemBackend.write`` finds it (a link on
    the way is followed only inside the root); nothing there is fine."""
    try:
        target = fs._locate(split_path(p), p)
    except NotFound:
        return
    try:
        if target.name is None:
            raise BackendError("{path} is a directory now; it was left as it is", path=p)
        try:
            info = os.stat(target.name, dir_fd=target.fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(info.st_mode):
            raise BackendError("{path} is not a regular file now; it was left as it is", path=p)
        os.unlink(target.name, dir_fd=target.fd)
    finally:
        target.close()


def _fs_remove_empty_folder(fs: FilesystemBackend, p: str) -> None:
    """Remove the folder ``p`` if it is empty and no link was followed to find it."""
    target = fs._locate(split_path(p), p)
    try:
        if target.name is not None and target.parts == split_path(p):
            os.rmdir(target.name, dir_fd=target.fd)
    finally:
        target.close()
