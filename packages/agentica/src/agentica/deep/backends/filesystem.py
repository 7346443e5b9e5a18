"""``FilesystemBackend``: a real directory seen as ``/``, opened through directory descriptors
so that no symbolic link leads out of it, with ``grep`` by ripgrep when installed."""

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
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentica import _beneath
from agentica.deep.backends.paths import (
    MAX_GREP_LINE_CHARS,
    SKIP_DIRS,
    FileFilter,
    NotFound,
    check_content,
    check_limit,
    child_path,
    compile_glob,
    compile_regex,
    glob_depth,
    grep_text,
    is_a_dir,
    join_path,
    missing,
    no_dir,
    no_file,
    normalize_path,
    not_a_dir,
    split_path,
)
from agentica.tools.files import BackendError, FileInfo, GrepLine

__all__ = ["FilesystemBackend"]


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

    Every path is resolved from the root one part at a time through directory descriptors
    (``openat`` with ``O_NOFOLLOW``, ``agentica._beneath``): a symbolic link is followed only if
    it points inside the root, never out of it (for the last part, for folders on the way, and
    in walks, which do not enter links at all), and nothing swapped for a link while a path is
    opened can lead out. A host path naming the root (``/home/me/ws/a.py``) is refused with the
    virtual path to use instead. Binary files are not read; writes go to a temporary file
    replaced atomically, keeping the file's mode. Walks (``glob``, ``grep``) are iterative, keep
    few descriptors open (any depth works) and skip ``.git``. ``grep`` uses ripgrep (``rg``)
    when it is installed, else a pure-Python search giving the same result; as rg opens files
    by path, every line it finds is checked against the file opened here through descriptors,
    so a link swapped in while it runs cannot show outside text.

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
            raise no_dir("/" + "/".join(exc.parts)) from None
        except _beneath.NotADir as exc:
            raise not_a_dir("/" + "/".join(exc.parts)) from None
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
            raise missing(shown) from None
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
            raise is_a_dir(shown)
        try:
            fd = os.open(target.name, _beneath.READ_FLAGS, dir_fd=target.fd)
        except FileNotFoundError:
            raise no_file(shown) from None
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
                raise is_a_dir(shown)
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
                if name in SKIP_DIRS or (max_depth is not None and len(frame.rel) + 1 >= max_depth):
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
            target = self._locate(split_path(p), p)
        except NotFound:
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
        target = self._locate(split_path(p), p)
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
                shown = child_path(p, entry.name)
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
        target = self._locate(split_path(p), p)
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
            raise is_a_dir(p)
        target = self._locate(split_path(p), p, make_parents=True)
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
        regex = compile_glob(pattern)
        target = self._locate(split_path(p), p)
        try:
            dfd = self._open_dir(target, p)
        finally:
            target.close()
        if dfd is None:
            raise not_a_dir(p)
        out: list[FileInfo] = []
        try:
            for rel, _fd, _name, info in self._walk(dfd, glob_depth(pattern)):
                if regex.fullmatch("/".join(rel)):
                    out.append(
                        FileInfo(
                            join_path(p, "/" + "/".join(rel)), False, info.st_size, info.st_mtime
                        )
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
        return grep_text(shown, data.decode("utf-8", "replace"), regex, context)

    def _grep_sync(
        self, regex: re.Pattern[str], p: str, wanted: FileFilter, context: int, limit: int
    ) -> list[GrepLine]:
        target = self._locate(split_path(p), p)
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
                out.extend(self._grep_file(fd, name, join_path(p, "/" + relative), regex, context))
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
        target = self._locate(split_path(p), p)
        try:
            dfd = self._open_dir(target, p)
        finally:
            target.close()
        if dfd is None:
            return None
        # the child starts in the directory through its descriptor: no path to swap for a link
        if os.path.isdir("/proc/self/fd"):
            return executable, dfd, f"/proc/self/fd/{dfd}"
        return executable, dfd, self._real() + join_path("", p)

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
                out.extend(grep_text(lines[0].path, text, regex, context))
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
                shown = join_path(p, "/" + path)
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
        check_content(p, content, self.max_write_bytes)
        return await asyncio.to_thread(self._write_sync, p, content.encode("utf-8"))

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        compile_glob(pattern)
        return await asyncio.to_thread(
            self._glob_sync, pattern, self._normalize(path), check_limit(limit)
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
        regex = compile_regex(pattern)
        wanted = FileFilter(glob)
        check_limit(limit)
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
