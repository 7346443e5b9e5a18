"""Opening files beneath a directory so that no part of a path can be swapped for a link.

``locate`` walks a path from a directory descriptor one name at a time without ever following a
link out of it (see ``locate``); ``open_strict`` and ``enter`` follow no link at all. Used by
``FilesystemBackend`` and workspace memory. POSIX only (``dir_fd``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO planted in the tree must not hang a thread
DIR_FLAGS = os.O_RDONLY | O_DIRECTORY | O_CLOEXEC
SUBDIR_FLAGS = DIR_FLAGS | O_NOFOLLOW
READ_FLAGS = os.O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
MAX_LINK_HOPS = 40
_MAX_RETRIES = 100  # looks again after a change under the walk, at most this often


class WalkError(Exception):
    """Why a walk stopped; ``parts`` is where (from the top, links resolved)."""

    def __init__(self, parts: Sequence[str]) -> None:
        self.parts = tuple(parts)
        super().__init__("/" + "/".join(self.parts))


class Escape(WalkError):
    """A symbolic link at ``parts`` points to ``target``, outside the top."""

    def __init__(self, parts: Sequence[str], target: str) -> None:
        super().__init__(parts)
        self.target = target


class Missing(WalkError):
    """The folder ``parts`` on the way does not exist."""


class NotADir(WalkError):
    """``parts`` on the way is not a folder."""


class TooManyLinks(WalkError):
    """More than ``MAX_LINK_HOPS`` links on the way (a loop)."""


class Changed(WalkError):
    """The path kept changing under the walk (something is swapping it in a loop)."""


def is_link_error(error: OSError) -> bool:
    """``openat`` with ``O_NOFOLLOW`` met a link (Linux: ELOOP, FreeBSD: EMLINK; ENOTDIR: a
    folder became something else)."""
    return error.errno in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR)


@dataclass(slots=True)
class Located:
    """The end of a walk: ``fd`` is an open descriptor of the folder holding ``name`` (of the
    target itself when ``name`` is ``None``: the top); ``parts`` is its path without links."""

    fd: int
    name: str | None
    parts: tuple[str, ...]

    def close(self) -> None:
        os.close(self.fd)


def link_parts(
    where: Sequence[str], target: str, tops: Sequence[str], at: Sequence[str]
) -> list[str]:
    """The parts (from the top) that a link in the folder ``where`` pointing to ``target`` names;
    ``Escape`` if it leaves the top. An absolute target counts when it is one of the paths of
    the top (``tops``: how it is spelled, its real path) or under one."""
    if target.startswith("/"):
        norm = os.path.normpath(target)
        for top in tops:
            if norm == top:
                return []
            if norm.startswith(top.rstrip("/") + "/"):
                return [p for p in norm[len(top.rstrip("/")) :].split("/") if p]
        raise Escape(at, target)
    parts = list(where)
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise Escape(at, target)
            parts.pop()
        else:
            parts.append(part)
    return parts


def locate(
    top: int,
    parts: Sequence[str],
    *,
    follow_last: bool = True,
    tops: Sequence[str] = (),
    make_parents: bool = False,
) -> Located:
    """Walk ``parts`` from the open folder ``top`` (not closed, not returned: the result has
    its own descriptor) without ever leaving it.

    The last part need not exist; it is not opened, but a link there is resolved unless
    ``follow_last`` is false. ``make_parents`` creates missing folders on the way.

    ``locate`` walks a path from a directory descriptor one name at a time: every folder is opened
    relative to the previous one with ``openat(..., O_DIRECTORY | O_NOFOLLOW)``, so nothing that
    another process renames or replaces while the walk runs can lead it out of the directory. A
    symbolic link met on the way is never opened: its target is taken as a path inside the directory
    (from the link's folder when relative; an absolute target must name the directory or something
    in it) and the walk starts again from the top; a target outside raises ``Escape``. The last name
    is left to the caller, which opens it relative to the returned folder with ``O_NOFOLLOW``: a
    link put there after the walk is refused, never followed. ``open_strict`` and ``enter`` follow
    no link at all. Whatever changes during a walk (a folder replaced by a link, removed, renamed)
    makes it look again, a bounded number of times, then raise ``Changed``.
    """
    walk = _Walk(top, list(parts), tops, follow_last=follow_last, make_parents=make_parents)
    try:
        while walk.pending:
            found = walk.step()
            if found is not None:
                return found
        return Located(walk.fd, None, tuple(walk.done))
    except BaseException:
        walk.close()
        raise


class _Walk:
    """The state of one ``locate``: ``fd`` is open on the folder ``done`` (from the top, links
    resolved); ``pending`` are the names still to walk. ``fd`` is owned by the walk until a
    ``Located`` returned by ``step`` takes it."""

    __slots__ = (
        "done",
        "fd",
        "follow_last",
        "hops",
        "make_parents",
        "pending",
        "retries",
        "top",
        "tops",
    )

    def __init__(
        self,
        top: int,
        pending: list[str],
        tops: Sequence[str],
        *,
        follow_last: bool,
        make_parents: bool,
    ) -> None:
        self.top = top
        self.pending = pending
        self.tops = tops
        self.follow_last = follow_last
        self.make_parents = make_parents
        self.done: list[str] = []
        self.hops = 0
        self.retries = 0
        self.fd = os.dup(top)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def step(self) -> Located | None:
        """Take one name from ``pending``: the end of the walk, or ``None`` to go on."""
        name = self.pending[0]
        last = len(self.pending) == 1
        try:
            info: os.stat_result | None = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            info = None
        except NotADirectoryError:  # only through a race: fd is a folder
            raise NotADir(self.done) from None
        if info is None:
            if last:
                return Located(self.fd, name, (*self.done, name))
            self._make_missing(name)
            return None
        if stat.S_ISLNK(info.st_mode) and (self.follow_last or not last):
            self._restart_at_link(name)
            return None
        if last:
            return Located(self.fd, name, (*self.done, name))
        if not stat.S_ISDIR(info.st_mode):
            raise NotADir((*self.done, name))
        self._descend(name)
        return None

    def _again(self) -> None:
        """Something changed under the walk: look again, unless it keeps changing."""
        self.retries += 1
        if self.retries > _MAX_RETRIES:
            raise Changed((*self.done, *self.pending[:1]))

    def _make_missing(self, name: str) -> None:
        """A folder on the way is missing: make it (``make_parents``) and look again."""
        if not self.make_parents:
            raise Missing((*self.done, name))
        _mkdir(name, self.fd, (*self.done, name))
        self._again()

    def _restart_at_link(self, name: str) -> None:
        """The link ``name``: its target (inside the top, else ``Escape``) replaces it, and the
        walk starts again from the top."""
        self.hops += 1
        if self.hops > MAX_LINK_HOPS:
            raise TooManyLinks((*self.done, name))
        try:
            target = os.readlink(name, dir_fd=self.fd)
        except OSError:  # no longer a link (EINVAL) or gone: look again
            self._again()
            return
        at = (*self.done, name)
        self.pending = [*link_parts(self.done, target, self.tops, at), *self.pending[1:]]
        self.done = []
        self.close()
        self.fd = os.dup(self.top)

    def _descend(self, name: str) -> None:
        """Enter the folder ``name`` (never through a link put there since the ``stat``)."""
        try:
            sub = os.open(name, SUBDIR_FLAGS, dir_fd=self.fd)
        except OSError as exc:
            if is_link_error(exc) or exc.errno == errno.ENOENT:
                self._again()  # replaced by a link or removed since the stat: look again
                return
            raise
        os.close(self.fd)
        self.fd = sub
        self.done.append(name)
        self.pending.pop(0)


def _mkdir(name: str, fd: int, parts: Sequence[str]) -> None:
    try:
        os.mkdir(name, dir_fd=fd)
    except FileExistsError:
        pass
    except FileNotFoundError:  # the folder ``fd`` was removed under the walk
        raise Changed(parts) from None


def open_strict(top: int, parts: Sequence[str], flags: int = READ_FLAGS) -> int:
    """Open ``parts`` under the open folder ``top`` with ``O_NOFOLLOW`` on every part: any
    link on the way, or as the last part, raises ``OSError`` (ELOOP or ENOTDIR)."""
    if not parts:
        return os.dup(top)
    fd = top
    try:
        for name in parts[:-1]:
            sub = os.open(name, SUBDIR_FLAGS, dir_fd=fd)
            if fd != top:
                os.close(fd)
            fd = sub
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        if fd != top:
            os.close(fd)


def enter(top: int, parts: Sequence[str], *, create: bool = False) -> int:
    """A descriptor of the folder ``parts`` under the open folder ``top``, every part opened
    with ``O_NOFOLLOW`` (and made first if missing, with ``create``). A link on the way raises
    ``OSError`` (ELOOP, or ENOTDIR for something that is not a folder); a missing folder
    ``FileNotFoundError``."""
    fd = os.dup(top)
    try:
        for name in parts:
            for _ in range(_MAX_RETRIES):
                try:
                    sub = os.open(name, SUBDIR_FLAGS, dir_fd=fd)
                    break
                except FileNotFoundError:
                    if not create:
                        raise
                    _mkdir(name, fd, parts)
            else:
                raise Changed(parts)
            os.close(fd)
            fd = sub
        return fd
    except BaseException:
        os.close(fd)
        raise
