"""The file-backend interface: ``FileBackend``, what it returns (``FileInfo``, ``GrepLine``) and
its error (``BackendError``).

The deep agent's file tools (``agentica.deep.FileTools``) depend on this protocol only; the
built-in implementations are in ``agentica.deep.backends`` and
``agentica.testing.conformance.files`` checks any implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agentica.errors import ToolError

__all__ = ["BackendError", "FileBackend", "FileInfo", "GrepLine"]


class BackendError(ToolError):
    """A file operation failed; the message says what was wrong and what to do instead.

    The message is shown to the model as the tool's result, so write it for the model: name
    the path, say why, and say what to call instead (``"no file /a.py; call ls('/') to see what
    exists"``). The message may name paths through ``{name}`` fields (``BackendError("no file
    {path}", path="/a.py")``) so that a ``CompositeBackend`` can show them with their route
    prefix.
    """

    def __init__(self, message: str, **paths: str) -> None:
        self.template = message
        self.paths = paths
        text = message
        for key, value in paths.items():
            text = text.replace("{" + key + "}", value)
        super().__init__(text)

    def mounted(self, prefix: str) -> BackendError:
        """The same error with its paths shown under the folder ``prefix`` (``/memories``)."""
        if not self.paths or not prefix or prefix == "/":
            return self
        shown = {
            key: prefix if value == "/" else prefix + value for key, value in self.paths.items()
        }
        return BackendError(self.template, **shown)


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
    """Where the deep agent's files live: six async methods over virtual paths.

    Implement this to put the file tools on another machine (over the network), a database or
    an archive; check the implementation with ``agentica.testing.conformance.files``.

    **Paths.** Every path is a virtual POSIX path from the root ``/`` of the backend's file
    area (``/src/main.py``); a relative path is taken from ``/``. Before using a path, a backend
    normalises it with the shared rules (``agentica.deep.backends.normalize_path`` implements
    them: use it): surrounding whitespace, repeated and trailing ``/`` and ``.`` parts are
    dropped, ``..`` is resolved but may never go above ``/``, and a path with control or
    invisible characters (NUL, line breaks, zero-width spaces, bidi overrides), ``\\``, a drive
    letter (``C:``), ``~``, a slash look-alike (U+2215, U+FF0F...) or characters that NFKC
    normalisation changes is refused with ``BackendError``, so two accepted paths never name
    the same file. Nothing outside the file area may be read, written, listed or searched: a
    path that looks like a host path (``/etc/passwd``) is a path inside the area (a backend may
    refuse one naming its own root on the host, saying which virtual path to use), and a
    symbolic link (or any other kind of redirection) that points outside it is never followed:
    using it raises ``BackendError``, and listings and walks leave it out. Returned paths are
    normalised and absolute (``/src/main.py``).

    **Errors.** Every failure the model could act on (no such file, a directory where a file
    was expected, a bad pattern, a path refused, a limit) raises ``BackendError`` with a
    message for the model, naming paths through ``{path}`` fields (see ``BackendError``). A
    failure of the backend itself that the model cannot fix (the remote machine is
    unreachable) should be a ``BackendError`` too, saying so; any other exception is reported
    to the model with its type name and counts as a bug.

    **Text only.** Files are UTF-8 text. ``write`` refuses content that is not ``str``, holds
    NUL characters or cannot be encoded (lone surrogates). ``read`` refuses a *binary* file (it
    holds a NUL byte, or is not valid UTF-8) with ``BackendError``; ``grep`` silently skips
    files holding a NUL byte (other text that is not UTF-8 may be searched with U+FFFD for the
    bytes it cannot decode).

    **Size limits.** A backend has a write limit in UTF-8 bytes (``max_write_bytes`` or
    ``max_file_bytes`` on the built-in ones): content up to it is written whole, larger content
    raises ``BackendError`` naming the size and the limit, and nothing is written. A file larger
    than the read limit (files made outside the backend can be) raises ``BackendError`` on
    ``read``, suggesting ``grep``; ``grep`` skips it. A file written at the limit reads back
    whole.

    **Order and limits.** ``ls`` sorts by name. ``glob`` and ``grep`` sort by path folder by
    folder, as a depth-first walk in name order finds them (``/a/z.py`` before ``/a-b.py``:
    sort by ``tuple(path.split("/"))``), ``grep`` then by line number; both return at most
    ``limit`` results (``limit`` is a positive integer, else ``BackendError``). Listings and
    walks show regular files and directories only.

    **Concurrency.** The tool engine runs a turn's calls concurrently, so every method may be
    called while others run, on the same backend object, from one event loop; methods must not
    block the event loop (run blocking I/O in a thread). Each ``write`` is atomic: a concurrent
    ``read`` or ``grep`` sees the old or the new content, never a part; of concurrent writes to
    one path the last one wins and the file holds exactly its content, never a torn or mixed
    file. Writes to different paths in a new folder all succeed (creating the folder is not a
    race). Nothing is atomic across calls (``edit_file`` is a read then a write; the file tools
    run it exclusively).
    """

    async def ls(self, path: str = "/") -> list[FileInfo]:
        """The entries of the directory ``path`` sorted by name (directories with size 0).

        The root of an empty backend lists as ``[]``; a file lists as ``[itself]``; a missing
        path raises ``BackendError``.
        """
        ...

    async def stat(self, path: str) -> FileInfo | None:
        """The file or directory at ``path``, or ``None`` if nothing is there.

        ``/`` is always a directory. A path refused by the path rules raises ``BackendError``
        (it is not ``None``).
        """
        ...

    async def read(self, path: str) -> str:
        """The whole text of the file ``path``.

        ``BackendError`` if nothing is there, it is a directory, it is binary or larger than
        the read limit.
        """
        ...

    async def write(self, path: str, content: str) -> FileInfo:
        """Create or replace the text file ``path`` with ``content``, atomically, creating its
        parent directories; return its ``FileInfo`` (normalised path, size in UTF-8 bytes).

        ``BackendError`` if ``path`` is ``/`` or a directory, if a parent on the way is a file,
        or if the content is not text or over the write limit; then nothing changes.
        """
        ...

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        """The files (never directories) under the directory ``path`` whose path relative to it
        matches ``pattern``.

        Patterns: ``*`` and ``?`` match within one folder (and match leading dots), ``[abc]``,
        ``[!abc]`` and ``{py,md}`` as in shells, and a ``**`` part spans any number of folders
        (``**/*.py`` is every ``.py`` file, also at the top; ``*.py`` only at the top).
        ``BackendError`` for an empty pattern or one holding ``\\`` or NUL, and if ``path`` is
        missing or a file.
        """
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
        """Lines matching the regular expression ``pattern`` (Python ``re`` syntax, searched in
        each line) in the file ``path`` or the files under the directory ``path``.

        Lines are split at ``\\n`` (a trailing ``\\r`` is dropped; a line longer than 2000
        characters is cut). ``glob`` keeps only some files, as ripgrep's ``--glob``: a pattern
        without ``/`` matches a file's name at any depth, one with ``/`` its path relative to
        ``path``; a leading ``!`` excludes. ``context`` adds that many lines before and after
        each match as ``GrepLine(match=False)``, overlapping windows merged, each line once.
        Binary files and files over the read limit are skipped. ``BackendError`` for an empty
        or invalid pattern (the message suggests escaping) and a missing ``path``.
        """
        ...
