"""``Workspace``: an agent's long-term memory as a folder of Markdown files.

```
workspace/
├── AGENTS.md              instructions for the agent (global)
├── PERSONA.md             the agent's persona (global)
├── TOOLS.md               notes on the tools (global)
└── users/
    ├── default/           the user of runs without a user id
    │   ├── USER.md        who the user is
    │   ├── MEMORY.md      long-term memory: one dated bullet per fact, appended
    │   └── memory/
    │       └── 2024-05-01.md  daily notes
    └── {user_id}/         one folder per user
```

Every file is optional, UTF-8 Markdown a person can read and keep in git; writes only append whole
lines. ``Workspace`` says how files are opened (never through a link out of a user's folder), how
user ids map to folders and how ``context_prompt`` keeps within its token budget.
"""

from __future__ import annotations

import asyncio
import codecs
import errno
import hashlib
import os
import re
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path, PurePosixPath, PureWindowsPath

from agentica import _beneath
from agentica.context.tokens import EstimateCounter, TokenCounter
from agentica.errors import UsageError

if sys.platform != "win32":
    import fcntl

__all__ = [
    "GLOBAL_FILES",
    "MEMORY_FILE",
    "NOTES_DIR",
    "USER_FILE",
    "Workspace",
    "WorkspaceError",
    "user_folder",
]

GLOBAL_FILES = ("AGENTS.md", "PERSONA.md", "TOOLS.md")
USER_FILE = "USER.md"
MEMORY_FILE = "MEMORY.md"
NOTES_DIR = "memory"
_AGENTS_FALLBACK = "AGENT.md"  # the name used in the paper
_GLOBAL_LABELS = {
    "AGENTS.md": "instructions",
    _AGENTS_FALLBACK: "instructions",
    "PERSONA.md": "persona",
    "TOOLS.md": "notes on tools",
}
_MAX_DAYS = 366
_SEPARATOR = "\n\n"

_SIMPLE_ID = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?")
_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(10)} | {f"lpt{i}" for i in range(10)}
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_NOISE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # control characters but tab and newline

_O_BINARY = getattr(os, "O_BINARY", 0)
_READ_FLAGS = _beneath.READ_FLAGS | _O_BINARY  # O_NONBLOCK: a FIFO planted there cannot hang us
_APPEND_FLAGS = (
    os.O_RDWR
    | os.O_APPEND
    | os.O_CREAT
    | _beneath.O_NOFOLLOW
    | _beneath.O_NONBLOCK
    | _beneath.O_CLOEXEC
    | _O_BINARY
)
_APPEND_LOCK = threading.Lock()  # used where flock is not available


class WorkspaceError(UsageError):
    """The workspace refused a user id or a path: it would leave its folder (``..``, an absolute
    path, a symbolic link pointing elsewhere), or it names something that is not a regular file."""


def user_folder(user_id: str) -> str:
    """The folder name of ``user_id`` under ``users/`` (no file system access).

    Simple ids are kept (``alice``, ``user-42``); others become ``<slug>~<hash>``. Raises
    ``WorkspaceError`` for ids that are empty, contain a path separator or a control character,
    or are ``.`` or ``..``.
    """
    if not isinstance(user_id, str):
        raise WorkspaceError(f"a user id must be a str, not {type(user_id).__name__}")
    if not user_id.strip():
        raise WorkspaceError("a user id cannot be empty")
    if "/" in user_id or "\\" in user_id:
        raise WorkspaceError(
            f"user id {user_id!r} is not allowed: it contains a path separator ('/' or '\\'); "
            "a user id names one folder under users/ and cannot point anywhere else"
        )
    if _CONTROL.search(user_id):
        raise WorkspaceError(f"user id {user_id!r} is not allowed: it contains a control character")
    if user_id in (".", ".."):
        raise WorkspaceError(f"user id {user_id!r} is not allowed: it names a relative folder")
    if _SIMPLE_ID.fullmatch(user_id) and user_id.split(".", 1)[0] not in _WINDOWS_RESERVED:
        return user_id
    slug = re.sub(r"[^a-z0-9]+", "-", user_id.lower()).strip("-")[:40].strip("-") or "user"
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"{slug}~{digest}"


def _relative_parts(name: str) -> tuple[str, ...]:
    """The parts of a file name relative to a folder; refuses anything that could leave it."""
    if not isinstance(name, str) or not name:
        raise WorkspaceError("a file name cannot be empty")
    if _CONTROL.search(name):
        raise WorkspaceError(f"file name {name!r} is not allowed: it contains a control character")
    if "\\" in name or PurePosixPath(name).is_absolute() or PureWindowsPath(name).drive:
        raise WorkspaceError(
            f"file name {name!r} is not allowed: use a relative path with '/' (like 'MEMORY.md' "
            "or 'memory/2024-05-01.md')"
        )
    parts = tuple(name.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise WorkspaceError(
            f"file name {name!r} is not allowed: it has an empty, '.' or '..' part"
        )
    return parts


def _global_parts(name: str) -> tuple[str, ...]:
    parts = _relative_parts(name)
    if parts[0] == "users":
        raise WorkspaceError(
            f"file name {name!r} is not a global file: users/ holds the users' files, read them "
            "with user_file(user_id, name)"
        )
    return parts


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop (RuntimeError before 3.13)
        raise WorkspaceError(f"cannot resolve {path}: {error}") from None


@dataclass(frozen=True, slots=True)
class _Location:
    """A file of the workspace: ``parts`` under the folder ``folder`` of the workspace ``root``
    (``()`` for global files, ``("users", <folder>)`` for a user's files, which are
    ``private``: no other hard links)."""

    root: Path
    folder: tuple[str, ...]
    parts: tuple[str, ...]
    private: bool

    @property
    def base(self) -> Path:
        return self.root.joinpath(*self.folder)

    @property
    def path(self) -> Path:
        return self.base.joinpath(*self.parts)


def _refused_link(location: _Location, at: Sequence[str], why: str) -> WorkspaceError:
    link = location.base.joinpath(*at)
    try:
        real = os.path.realpath(link)  # for the message only: nothing is opened through it
    except (OSError, ValueError):
        real = "?"
    return WorkspaceError(f"refusing to follow {link}: it is a symbolic link to {real}, {why}")


def _open_root(location: _Location, create: bool) -> int | None:
    try:
        return os.open(location.root, _beneath.DIR_FLAGS)
    except FileNotFoundError:
        if not create:
            return None
    except NotADirectoryError:
        raise WorkspaceError(f"the workspace {location.root} is not a folder") from None
    os.makedirs(location.root, exist_ok=True)
    return os.open(location.root, _beneath.DIR_FLAGS)


def _open(location: _Location, flags: int, *, write: bool) -> int | None:
    """A descriptor of the file (``None`` if it does not exist, when reading), opened through
    descriptors from the workspace folder with ``O_NOFOLLOW`` on every part
    (``agentica._beneath``): nothing renamed or swapped for a link meanwhile can lead out.

    The user's folder (``users/<folder>``) must be a real folder, no link anywhere on the way.
    Inside it (or inside the workspace, for global files), links on the way are followed only
    as paths inside it; the file itself is never written through a link.
    """
    root = _open_root(location, write)
    if root is None:
        return None
    try:
        try:
            base = _beneath.enter(root, location.folder, create=write)
        except FileNotFoundError:
            return None
        except OSError as error:
            if not _beneath.is_link_error(error):
                raise
            raise WorkspaceError(
                f"refusing to use {location.base}: it or a folder above it in the workspace is "
                "a symbolic link; replace the link with a real folder"
            ) from None
        except _beneath.Changed:
            raise WorkspaceError(f"{location.base} kept changing while it was opened") from None
        try:
            return _open_in(location, base, flags, write=write)
        finally:
            os.close(base)
    finally:
        os.close(root)


def _open_in(location: _Location, base: int, flags: int, *, write: bool) -> int | None:
    path = location.path
    for _ in range(3):  # a folder removed between the walk and the open: walk again
        found = _locate_in(location, base, write=write)
        if found is None:
            return None
        try:
            fd = _open_located(location, found, flags)
        finally:
            found.close()
        if fd is not None:
            return _checked_file(location, fd)
        if not write:
            return None
    raise WorkspaceError(f"refusing to open {path}: its folder kept disappearing; try again")


def _locate_in(location: _Location, base: int, *, write: bool) -> _beneath.Located | None:
    """The folder holding the file, walked from ``base`` (``None``: a folder on the way is
    missing, when reading); a link leading outside, or anything odd on the way, is refused."""
    tops = (os.fspath(location.base),)  # root resolved, and no link from it to the base
    path = location.path
    try:
        return _beneath.locate(
            base, location.parts, follow_last=not write, tops=tops, make_parents=write
        )
    except _beneath.Escape as error:
        raise _refused_link(location, error.parts, f"outside {location.base}") from None
    except _beneath.Missing:
        return None
    except _beneath.NotADir as error:
        raise WorkspaceError(
            f"refusing to open {path}: {location.base.joinpath(*error.parts)} is not a folder"
        ) from None
    except (_beneath.TooManyLinks, _beneath.Changed) as error:
        raise WorkspaceError(
            f"refusing to open {path}: too many symbolic links on the way, or it kept "
            f"changing ({type(error).__name__})"
        ) from None


def _open_located(location: _Location, found: _beneath.Located, flags: int) -> int | None:
    """The file opened in the folder ``found`` with ``flags`` (``None``: it is not there); a
    global file leading into ``users/``, or a link as the file itself, is refused."""
    if not location.private and found.parts[:1] == ("users",):
        raise _refused_link(location, location.parts, "a user's file")
    try:
        return os.open(found.name or ".", flags, 0o666, dir_fd=found.fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's answer
            raise WorkspaceError(
                f"refusing to open {location.path}: it is a symbolic link (files are never "
                "written through links, nor read through links that change)"
            ) from None
        raise


def _checked_file(location: _Location, fd: int) -> int:
    """``fd`` if it is a regular file (with one hard link, for a user's file); closed if not."""
    path = location.path
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"refusing to open {path}: it is not a regular file")
        if location.private and info.st_nlink > 1:
            raise WorkspaceError(
                f"refusing to open {path}: it has {info.st_nlink} hard links, and a user's "
                "file must have only one (a hard link could share it with another user or a "
                "file outside the workspace)"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "replace").removeprefix("\ufeff").replace("\r\n", "\n")


def _read_file(location: _Location, limit: int | None = None, *, tail: bool = False) -> _Text:
    """The text of a file (``None`` if it does not exist), at most about ``limit`` bytes of it:
    its beginning, or its end with ``tail``."""
    fd = _open(location, _READ_FLAGS, write=False)
    if fd is None:
        return _Text(None, True)
    with os.fdopen(fd, "rb") as file:
        size = os.fstat(fd).st_size
        if limit is None or size <= limit:
            return _Text(_decode(file.read()), True)
        if not tail:
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            text = decoder.decode(file.read(limit), final=False)  # drops a cut last character
            return _Text(text.removeprefix("\ufeff").replace("\r\n", "\n"), False)
        file.seek(size - limit)
        data = file.read()
        start = 0
        while start < min(4, len(data)) and data[start] & 0xC0 == 0x80:
            start += 1  # the middle of a character cut at the start
        return _Text(_decode(data[start:]), False)


@contextmanager
def _locked(fd: int) -> Iterator[None]:
    if sys.platform != "win32":
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        with _APPEND_LOCK:
            yield


def _append_file(location: _Location, text: str, header: str) -> None:
    """Append ``text`` (whole lines) to a file, creating it with ``header`` if it is new or
    empty; a missing final newline of the file is added first."""
    fd = _open(location, _APPEND_FLAGS, write=True)
    assert fd is not None  # writes create what is missing
    try:
        with _locked(fd):
            size = os.fstat(fd).st_size
            prefix = header
            if size:
                os.lseek(fd, -1, os.SEEK_END)
                prefix = "" if os.read(fd, 1) == b"\n" else "\n"
            data = (prefix + text).encode("utf-8")
            while data:  # O_APPEND: every write goes to the end, whatever the offset
                data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _bullet(text: str, prefix: str = "") -> str:
    """``text`` as one Markdown list item: ``- prefix text``, later lines indented."""
    if not isinstance(text, str):
        raise UsageError(f"a note must be a str, not {type(text).__name__}")
    text = _NOISE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    lines = [line.rstrip() for line in text.split("\n")]
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise UsageError("a note cannot be empty")
    first = lines[0].strip()
    rest = [f"  {line.strip()}" for line in lines[1:]]
    return "\n".join([f"- {prefix}{first}", *rest]) + "\n"


@dataclass(frozen=True, slots=True)
class _Text:
    text: str | None  # None: the file does not exist
    complete: bool


@dataclass(frozen=True, slots=True)
class _Section:
    name: str  # as shown: "AGENTS.md", "memory/2024-05-01.md"
    heading: str
    body: str
    complete: bool
    keep_tail: bool


def _note(section: _Section, left_out: Sequence[str], budget: int) -> str:
    where = "the earlier part" if section.keep_tail else "the rest"
    note = f"[{where} of {section.name} was cut to fit the {budget}-token memory budget"
    if left_out:
        note += f"; also left out: {', '.join(left_out)}"
    return note + "]"


def _render(section: _Section, kept: int, note: str) -> str:
    if section.keep_tail:
        body = section.body[len(section.body) - kept :] if kept else ""
        return f"{section.heading}{_SEPARATOR}{note}" + (f"\n{body}" if body else "")
    body = section.body[:kept]
    return f"{section.heading}{_SEPARATOR}" + (f"{body}\n" if body else "") + note


def _snap_to_line(section: _Section, kept: int) -> int:
    """``kept`` reduced so the cut falls at a line break, if that loses at most half of it."""
    body = section.body
    if section.keep_tail:
        text = body[len(body) - kept :]
        index = text.find("\n")
        return kept - index - 1 if 0 <= index < kept // 2 else kept
    index = body.rfind("\n", 0, kept)
    return index if index >= kept // 2 else kept


def _fit(sections: Sequence[_Section], budget: int, counter: TokenCounter) -> str:
    """The sections joined within ``budget``: the first ones whole, the next one cut with a note.

    If not even the note fits after the whole ones, the last whole one is cut instead, and so on:
    whatever is left out is named in the prompt whenever a note fits at all.
    """
    whole = [f"{s.heading}{_SEPARATOR}{s.body}" for s in sections]
    count = len(sections)
    included = 0
    while (
        included < count
        and sections[included].complete
        and counter.count_text(_SEPARATOR.join(whole[: included + 1])) <= budget
    ):
        included += 1
    if included == count:
        return _SEPARATOR.join(whole)
    for cut in range(included, -1, -1):
        fitted = _cut(sections, whole[:cut], cut, budget, counter)
        if fitted is not None:
            return fitted
    return ""


def _cut(
    sections: Sequence[_Section],
    parts: Sequence[str],
    cut: int,
    budget: int,
    counter: TokenCounter,
) -> str | None:
    """``parts`` and ``sections[cut]`` cut to fit with a note, or only a note naming what was
    left out; ``None`` if not even that fits."""

    def fits(candidate: str) -> bool:
        return counter.count_text(_SEPARATOR.join([*parts, candidate])) <= budget

    def joined(candidate: str) -> str:
        return _SEPARATOR.join([*parts, candidate])

    section = sections[cut]
    left_out = [s.name for s in sections[cut + 1 :]]
    note = _note(section, left_out, budget)
    size = len(section.body)
    if not section.complete and fits(_render(section, size, note)):  # read only in part
        return joined(_render(section, size, note))
    if fits(_render(section, 0, note)):
        low, high = 0, size  # low fits, high does not
        while high - low > 1:
            middle = (low + high) // 2
            if fits(_render(section, middle, note)):
                low = middle
            else:
                high = middle
        snapped = _snap_to_line(section, low)
        if snapped != low and fits(_render(section, snapped, note)):
            low = snapped
        return joined(_render(section, low, note))
    short = f"[not shown, to fit the {budget}-token memory budget: "
    short += ", ".join([section.name, *left_out]) + "]"
    return joined(short) if fits(short) else None


def _check_days(days: int) -> None:
    if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= _MAX_DAYS:
        raise UsageError(f"days must be an int from 1 to {_MAX_DAYS}, got {days!r}")


class Workspace:
    """A folder of Markdown files holding instructions, a persona and each user's memory.

    Every file is optional and UTF-8 Markdown a person can read, edit and keep in git: writes only
    append whole lines (a missing final newline is added first), so a diff shows exactly what the
    agent learnt. ``AGENT.md`` (the name in the paper) is read when ``AGENTS.md`` is missing.

    **No blocking.** Every file operation runs in a worker thread (``asyncio.to_thread``), so the
    event loop never waits for the disk. Appends hold an exclusive ``flock`` on the file (a
    process-wide lock on Windows), so concurrent saves from many tasks or processes never lose or
    interleave lines.

    **Isolation.** A user id becomes one folder name under ``users/`` (``user_folder``): simple ids
    (lowercase letters, digits, ``.``, ``_``, ``-``, at most 64 characters, such as ``alice`` or
    ``user-42``) are used as they are; any other id becomes a readable slug plus a hash of the exact
    id (``Bob Smith`` -> ``bob-smith~1f0c...``), which can never equal a simple id or another user's
    folder. Ids that are empty, contain ``/``, ``\\`` or control characters, or are ``.`` or ``..``
    are refused. Files are opened through directory descriptors from the workspace folder, one name
    at a time with ``O_NOFOLLOW`` (``agentica._beneath``, POSIX only), so nothing renamed or swapped
    for a symbolic link while a file is opened can lead anywhere else. The user's folder
    (``users/<folder>``) must be a real folder, with no link on the way to it; inside it (or inside
    the workspace, for global files) a link is followed only as a path inside it, and a link
    pointing elsewhere is refused with ``WorkspaceError``, and so is a global file leading into
    ``users/``. Nothing is ever written through a symbolic link. A user's file with more than one
    hard link is refused (a hard link could share it with a file outside the folder).

    **Runs without a user id.** ``users/default/`` belongs to the user id ``"default"``, and runs
    without a user id use it: an ``Agent`` made without ``user_id`` has the id ``"default"`` (for
    its stored sessions too), and ``WorkspaceMemory`` gives a run whose user id is empty its
    ``default_user``, ``"default"`` unless given. So ``None``, ``""`` and ``"default"`` are one user
    with one memory: never give a real person the id ``"default"``. ``Workspace`` itself takes no
    empty id.

    **Budget.** ``context_prompt`` puts the files in a fixed order of priority (global files, then
    ``USER.md``, ``MEMORY.md``, today's and yesterday's notes), each under a heading naming it, and
    counts the exact text with a ``TokenCounter``. When they do not all fit, it keeps the first ones
    whole, cuts the first one that does not fit (with a note saying so and naming the files left
    out) and stops: the result never exceeds the budget. Append-only files (``MEMORY.md``, daily
    notes) keep their end, where the newest entries are; the others keep their beginning.

    Dates come from ``today`` (``date.today``, the local date, unless another clock is given).

    Args:
        root: the workspace folder (created on the first write).
        today: the clock giving today's date (``date.today`` unless given; inject one in tests).
    """

    __slots__ = ("_today", "root")

    def __init__(
        self, root: str | os.PathLike[str], *, today: Callable[[], date] = date.today
    ) -> None:
        if not os.fspath(root):
            raise UsageError("a workspace needs a folder: Workspace('path/to/workspace')")
        self.root = Path(root)
        self._today = today

    def __repr__(self) -> str:
        return f"Workspace({os.fspath(self.root)!r})"

    def today(self) -> date:
        """Today's date by the workspace's clock."""
        return self._today()

    # ------------------------------------------------------------------------------ paths

    def _global(self, name: str) -> _Location:
        return _Location(_resolve(self.root), (), _global_parts(name), private=False)

    def _user(self, user_id: str, name: str) -> _Location:
        folder = ("users", user_folder(user_id))
        return _Location(_resolve(self.root), folder, _relative_parts(name), private=True)

    @staticmethod
    def note_name(day: date) -> str:
        """The file name of a day's notes, relative to the user's folder."""
        return f"{NOTES_DIR}/{day.isoformat()}.md"

    # ------------------------------------------------------------------------------ reading

    async def read(self, name: str) -> str:
        """The text of a global file (``"AGENTS.md"``), or ``""`` if it does not exist."""
        _global_parts(name)
        return await asyncio.to_thread(lambda: _read_file(self._global(name)).text or "")

    async def user_file(self, user_id: str, name: str) -> str:
        """The text of a file in the user's folder (``"MEMORY.md"``), or ``""`` if missing."""
        user_folder(user_id)
        _relative_parts(name)
        return await asyncio.to_thread(lambda: _read_file(self._user(user_id, name)).text or "")

    async def daily_notes(self, user_id: str, *, date: date | None = None, days: int = 1) -> str:
        """The daily notes of ``date`` (default: today) and the ``days - 1`` days before it, the
        newest first, each under a heading naming its file; ``""`` if there are none."""
        user_folder(user_id)
        _check_days(days)
        first = date if date is not None else self.today()

        def read() -> str:
            sections = []
            for offset in range(days):
                name = self.note_name(first - timedelta(days=offset))
                text = (_read_file(self._user(user_id, name)).text or "").strip()
                if text:
                    sections.append(f"## {name}{_SEPARATOR}{text}")
            return _SEPARATOR.join(sections)

        return await asyncio.to_thread(read)

    async def context_prompt(
        self,
        user_id: str,
        *,
        budget_tokens: int,
        counter: TokenCounter | None = None,
        recent_days: int = 2,
    ) -> str:
        """The workspace's files for the system prompt of a run for ``user_id``, within
        ``budget_tokens`` as counted by ``counter`` (default: the estimate).

        Order (highest priority first): AGENTS.md (or AGENT.md), PERSONA.md, TOOLS.md, then the
        user's USER.md, MEMORY.md and the daily notes of today and the ``recent_days - 1`` days
        before. Missing and empty files are skipped; an empty workspace gives ``""``.
        """
        user_folder(user_id)
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise UsageError(f"budget_tokens must be an int, got {budget_tokens!r}")
        if budget_tokens < 1:
            raise UsageError(f"budget_tokens must be at least 1, got {budget_tokens}")
        if isinstance(recent_days, bool) or not isinstance(recent_days, int) or recent_days < 0:
            raise UsageError(f"recent_days must be an int >= 0, got {recent_days!r}")
        counter = counter if counter is not None else EstimateCounter()
        today = self.today()
        # bytes worth reading: far more than the budget can hold (a token is ~4 bytes)
        limit = budget_tokens * 32 + 1024

        def build() -> str:
            sections: list[_Section] = []

            def add(label: str, location: _Location, name: str, *, tail: bool = False) -> bool:
                read = _read_file(location, limit, tail=tail)
                if read.text is None:
                    return False
                body = read.text.strip()
                if body:
                    heading = f"## {name} ({label})"
                    sections.append(_Section(name, heading, body, read.complete, tail))
                return True

            for name in GLOBAL_FILES:
                found = add(_GLOBAL_LABELS[name], self._global(name), name)
                if not found and name == "AGENTS.md":
                    add("instructions", self._global(_AGENTS_FALLBACK), _AGENTS_FALLBACK)
            add("about the user", self._user(user_id, USER_FILE), USER_FILE)
            add("long-term memory", self._user(user_id, MEMORY_FILE), MEMORY_FILE, tail=True)
            for offset in range(recent_days):
                name = self.note_name(today - timedelta(days=offset))
                label = {0: "today's notes", 1: "yesterday's notes"}.get(offset, "daily notes")
                add(label, self._user(user_id, name), name, tail=True)
            return _fit(sections, budget_tokens, counter)

        return await asyncio.to_thread(build)

    # ------------------------------------------------------------------------------ writing

    async def save_memory(self, user_id: str, text: str, *, category: str | None = None) -> str:
        """Remember ``text`` for the user: append a dated bullet (``- 2024-05-01: text``, or
        ``- 2024-05-01 (category): text``) to MEMORY.md and to today's daily note. Returns the
        bullet (without its final newline)."""
        user_folder(user_id)
        today = self.today()
        label = ""
        if category is not None:
            label = " ".join(_NOISE.sub("", str(category)).split())
            if not label:
                raise UsageError("a category cannot be empty (pass None for no category)")
            label = f" ({label})"
        entry = _bullet(text, f"{today.isoformat()}{label}: ")
        notes = self.note_name(today)

        def write() -> None:
            _append_file(self._user(user_id, MEMORY_FILE), entry, "# Memory\n\n")
            _append_file(self._user(user_id, notes), entry, f"# {today.isoformat()}\n\n")

        await asyncio.to_thread(write)
        return entry.rstrip("\n")

    async def write_note(self, user_id: str, text: str) -> None:
        """Append ``text`` as a bullet to the user's daily note of today (not to MEMORY.md)."""
        user_folder(user_id)
        today = self.today()
        entry = _bullet(text)
        name = self.note_name(today)
        await asyncio.to_thread(
            lambda: _append_file(self._user(user_id, name), entry, f"# {today.isoformat()}\n\n")
        )
