"""``CompositeBackend``: routes path prefixes to backends, the longest prefix first."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import TypeVar

from agentica.deep.backends.paths import (
    FileFilter,
    check_limit,
    child_path,
    compile_glob,
    compile_regex,
    dir_prefix,
    join_path,
    normalize_path,
    sort_key,
)
from agentica.errors import UsageError
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine

__all__ = ["CompositeBackend"]

_T = TypeVar("_T")


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
        prefix = dir_prefix(p)
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
            return FileInfo(join_path(prefix, info.path), info.is_dir, info.size, info.modified)
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
            outer = join_path(prefix, info.path)
            if self._owner(outer) == prefix:
                entries[outer] = FileInfo(outer, info.is_dir, info.size, info.modified)
        start = len(dir_prefix(p))
        for route, _backend in below:
            folder = child_path(p, route[start:].split("/", 1)[0])
            entries[folder] = FileInfo(folder, True, 0, 0.0)
        return [entries[key] for key in sorted(entries, key=sort_key)]

    async def read(self, path: str) -> str:
        backend, inner, prefix = self._route(normalize_path(path))
        text: str = await self._call(prefix, backend.read(inner))
        return text

    async def write(self, path: str, content: str) -> FileInfo:
        backend, inner, prefix = self._route(normalize_path(path))
        info: FileInfo = await self._call(prefix, backend.write(inner, content))
        return FileInfo(join_path(prefix, info.path), info.is_dir, info.size, info.modified)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        regex = compile_glob(pattern)
        check_limit(limit)
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
            self._mount(prefix, f)
            for f in listed
            if self._owner(join_path(prefix, f.path)) == prefix
        ]
        start = len(dir_prefix(p))
        for route, sub in below:
            everything = await self._call(route, sub.glob("**", "/", limit=10**6))
            for f in everything:
                outer = join_path(route, f.path)
                if self._owner(outer) == route and regex.fullmatch(outer[start:]):
                    found.append(self._mount(route, f))
        found.sort(key=lambda f: sort_key(f.path))
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
        compile_regex(pattern)
        wanted = FileFilter(glob)
        check_limit(limit)
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
            GrepLine(join_path(prefix, g.path), g.line, g.text, g.match)
            for g in lines
            if self._owner(join_path(prefix, g.path)) == prefix
        ]
        start = len(dir_prefix(p))
        sub_glob = None if wanted.anchored else glob
        for route, sub in below:
            sub_lines = await self._call(
                route, sub.grep(pattern, "/", glob=sub_glob, context=context, limit=limit)
            )
            for g in sub_lines:
                outer = join_path(route, g.path)
                if self._owner(outer) == route and (not wanted.anchored or wanted(outer[start:])):
                    found.append(GrepLine(outer, g.line, g.text, g.match))
        found.sort(key=lambda g: (sort_key(g.path), g.line))
        return found[:limit]

    @staticmethod
    def _mount(prefix: str, info: FileInfo) -> FileInfo:
        return FileInfo(join_path(prefix, info.path), info.is_dir, info.size, info.modified)
