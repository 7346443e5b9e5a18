"""In-memory tree backends: ``StateBackend`` (a JSON-able dict the caller owns) and
``StoreBackend`` (variables of an ``agentica.storage.Storage``), over a flat map of file paths
to texts in which directories are implied by paths."""

from __future__ import annotations

import asyncio
import re
import time
import unicodedata
from collections.abc import MutableMapping
from typing import Any

from agentica.deep.backends.paths import (
    REFUSED_CATEGORIES,
    FileFilter,
    check_content,
    check_limit,
    compile_glob,
    compile_regex,
    dir_prefix,
    grep_many,
    is_a_dir,
    no_dir,
    no_file,
    normalize_path,
    not_a_dir,
    sort_key,
    split_path,
)
from agentica.errors import StorageError, UsageError
from agentica.storage.base import MAX_KEY_LENGTH, MAX_VARIABLE_BYTES, Storage
from agentica.tools.files import BackendError, FileInfo, GrepLine

__all__ = ["StateBackend", "StoreBackend"]


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
        return path == "/" or bool(await self._list(dir_prefix(path), 1))

    async def stat(self, path: str) -> FileInfo | None:
        p = normalize_path(path)
        if p == "/":
            return FileInfo("/", True, 0, 0.0)
        info = await self._file(p)
        if info is not None:
            return info
        below = await self._list(dir_prefix(p))
        if not below:
            return None
        return FileInfo(p, True, 0, max(f.modified for f in below))

    async def ls(self, path: str = "/") -> list[FileInfo]:
        p = normalize_path(path)
        prefix = dir_prefix(p)
        files = await self._list(prefix)
        if not files:
            if p == "/":
                return []
            info = await self._file(p)
            if info is not None:
                return [info]
            raise no_dir(p)
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
            raise is_a_dir(p)
        content = await self._load(p)
        if content is None:
            raise is_a_dir(p) if await self._is_dir(p) else no_file(p)
        if "\x00" in content:  # put in the store directly: binary, as grep also skips it
            raise BackendError(
                f"{{path}} is a binary file ({len(content)} characters); only text files can "
                "be read",
                path=p,
            )
        return content

    async def write(self, path: str, content: str) -> FileInfo:
        p = normalize_path(path)
        if p == "/":
            raise is_a_dir(p)
        size = check_content(p, content, self.max_file_bytes)
        parts = split_path(p)
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
        regex = compile_glob(pattern)
        check_limit(limit)
        p = normalize_path(path)
        prefix = dir_prefix(p)
        files = await self._list(prefix)
        if not files and p != "/":
            raise not_a_dir(p) if await self._file(p) is not None else no_dir(p)
        found = [f for f in files if regex.fullmatch(f.path[len(prefix) :])]
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
        regex = compile_regex(pattern)
        wanted = FileFilter(glob)
        check_limit(limit)
        p = normalize_path(path)
        if p != "/" and await self._file(p) is not None:
            targets = [p]
        else:
            prefix = dir_prefix(p)
            files = await self._list(prefix)
            if not files and p != "/":
                raise no_dir(p)
            targets = sorted((f.path for f in files if wanted(f.path[len(prefix) :])), key=sort_key)
        items: list[tuple[str, str]] = []
        for target in targets:
            content = await self._load(target)
            if content is not None:
                items.append((target, content))
        return await asyncio.to_thread(grep_many, items, regex, max(0, context), limit)


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
            if any(unicodedata.category(ch) in REFUSED_CATEGORIES for ch in value):
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
