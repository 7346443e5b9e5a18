"""Every built-in file backend passes the shipped conformance suite
(``agentica.testing.conformance.files``), and the suite itself catches broken backends."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from agentica.deep.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from agentica.storage import InMemoryStorage, Storage, open_storage
from agentica.testing.conformance import (
    FILE_BACKEND_CHECKS,
    OUTSIDE_TEXT,
    FileBackendCase,
    FileBackendCheck,
    NotApplicable,
    Symlinks,
    check_file_backend,
)
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine


class RealFolder:
    """Hooks over the real folder behind a ``FilesystemBackend`` seen at ``mount`` (``/`` or a
    route of a composite): raw bytes, and links to a folder next to it."""

    def __init__(self, root: Path, outside: Path, mount: str = "/") -> None:
        self.root = root
        self.outside = outside
        self.mount = mount
        self.links = 0

    def real(self, virtual: str) -> Path:
        relative = virtual.removeprefix(self.mount.rstrip("/")).lstrip("/")
        return self.root / relative

    async def put_bytes(self, virtual: str, data: bytes) -> None:
        path = self.real(virtual)
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_bytes, data)

    async def link_outside(self, link: str, directory: bool) -> None:
        self.links += 1
        target = self.outside / f"target-{self.links}"
        if directory:
            target.mkdir(parents=True)
            (target / "secret.txt").write_text(OUTSIDE_TEXT)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(OUTSIDE_TEXT)
        path = self.real(link)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target, target_is_directory=directory)

    async def outside_files(self) -> dict[str, str]:
        return {
            p.relative_to(self.outside).as_posix(): p.read_text()
            for p in sorted(self.outside.rglob("*"))
            if p.is_file()
        }

    def symlinks(self) -> Symlinks | None:
        if sys.platform == "win32":
            return None
        return Symlinks(self.link_outside, self.outside_files)


CaseMaker = Callable[[Path], Awaitable[FileBackendCase]]


async def state_case(tmp: Path) -> FileBackendCase:
    backend = StateBackend({})
    return FileBackendCase(backend, backend.max_file_bytes)


async def store_memory_case(tmp: Path) -> FileBackendCase:
    backend = StoreBackend(InMemoryStorage(), "alice", "agent")
    return FileBackendCase(backend, backend.max_file_bytes)


async def store_sqlite_case(tmp: Path) -> FileBackendCase:
    storage = open_storage(str(tmp / "files.db"))
    backend = StoreBackend(storage, "alice", "agent")
    return FileBackendCase(backend, backend.max_file_bytes, close=storage.aclose)


def filesystem_case(ripgrep: bool) -> CaseMaker:
    async def make(tmp: Path) -> FileBackendCase:
        folder = RealFolder(tmp / "root", tmp / "outside")
        backend = FilesystemBackend(folder.root, ripgrep=ripgrep)
        return FileBackendCase(
            backend,
            backend.max_write_bytes,
            max_read_bytes=backend.max_read_bytes,
            put_bytes=folder.put_bytes,
            symlinks=folder.symlinks(),
        )

    return make


def composite(tmp: Path, storage: Storage) -> tuple[CompositeBackend, RealFolder]:
    folder = RealFolder(tmp / "ws", tmp / "outside", "/workspace")
    fs = FilesystemBackend(folder.root)
    routes: dict[str, FileBackend] = {"/memories": StoreBackend(storage, "alice"), "/workspace": fs}
    return CompositeBackend(StateBackend({}), routes), folder


async def composite_fs_case(tmp: Path) -> FileBackendCase:
    backend, folder = composite(tmp, InMemoryStorage())
    return FileBackendCase(
        backend,
        5_000_000,
        workdir="/workspace",
        max_read_bytes=5_000_000,
        put_bytes=folder.put_bytes,
        symlinks=folder.symlinks(),
    )


async def composite_store_case(tmp: Path) -> FileBackendCase:
    storage = open_storage(str(tmp / "files.db"))
    backend, _ = composite(tmp, storage)
    return FileBackendCase(backend, 1_000_000, workdir="/memories", close=storage.aclose)


CASES: dict[str, CaseMaker] = {
    "state": state_case,
    "store-memory": store_memory_case,
    "store-sqlite": store_sqlite_case,
    "fs": filesystem_case(ripgrep=True),
    "fs-python-grep": filesystem_case(ripgrep=False),
    "composite-fs": composite_fs_case,
    "composite-store-sqlite": composite_store_case,
}


@pytest.fixture(params=sorted(CASES))
async def case(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[FileBackendCase]:
    if request.param == "fs" and shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed; fs-python-grep covers the Python search")
    made = await CASES[request.param](tmp_path)
    yield made
    if made.close is not None:
        await made.close()


@pytest.mark.parametrize("check", FILE_BACKEND_CHECKS, ids=lambda check: check.__name__)
async def test_builtin_backend_conforms(case: FileBackendCase, check: FileBackendCheck) -> None:
    try:
        await check(case)
    except NotApplicable as exc:
        pytest.skip(str(exc))


async def test_the_cases_cover_every_builtin_backend_and_their_hooks(tmp_path: Path) -> None:
    made = {name: await maker(tmp_path / name) for name, maker in CASES.items()}
    kinds = {type(c.backend) for c in made.values()}
    assert kinds == {StateBackend, StoreBackend, FilesystemBackend, CompositeBackend}
    with_links = [name for name, c in made.items() if c.symlinks is not None]
    with_bytes = [name for name, c in made.items() if c.put_bytes is not None]
    assert sorted(with_bytes) == ["composite-fs", "fs", "fs-python-grep"]
    if sys.platform != "win32":
        assert with_links == with_bytes
    for c in made.values():
        if c.close is not None:
            await c.close()


# ------------------------------------------------------------------------------ the suite


class LeakyBackend(StateBackend):
    """A broken backend: it reads host paths that look absolute (``/etc/...``) from the real
    disk, and its writes go in two halves with a pause between."""

    def __init__(self, host: Path) -> None:
        super().__init__({})
        self.host = host

    async def read(self, path: str) -> str:
        leaked = self.host / path.lstrip("/")
        if leaked.is_file():
            return leaked.read_text()
        return await super().read(path)

    async def write(self, path: str, content: str) -> FileInfo:
        half = len(content) // 2
        await super().write(path, content[:half])
        await asyncio.sleep(0)
        return await super().write(path, content)


async def test_the_suite_reports_what_a_broken_backend_gets_wrong(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "hosts").write_text("127.0.0.1 host file\n")

    def factory() -> FileBackendCase:
        return FileBackendCase(LeakyBackend(tmp_path), 1_000_000)

    with pytest.raises(AssertionError) as caught:
        await check_file_backend(factory)
    report = str(caught.value).splitlines()
    assert report[0] == f"4 of {len(FILE_BACKEND_CHECKS)} checks failed:"
    assert [line.split(":")[0] for line in report[1:]] == [
        "check_host_paths_are_virtual",  # it read the host's /etc/hosts
        "check_write_refuses_non_text",  # the first half of a refused write stays
        "check_write_size_limit",  # the same, over the limit
        "check_concurrent_writes_to_one_file",  # readers see half-written files
    ]
    assert "read('/etc/hosts') in an empty area: expected BackendError" in report[1]
    assert "a read during concurrent writes saw a torn or mixed file" in report[4]


async def test_the_suite_passes_a_conforming_backend_and_names_what_did_not_apply() -> None:
    skipped = await check_file_backend(lambda: FileBackendCase(StateBackend({}), 1_000_000))
    assert skipped == [
        "check_symlinks_out_are_not_followed",
        "check_binary_files_are_not_read",
        "check_read_size_limit",
    ]


class Unnormalised(StateBackend):
    """A broken backend: it takes paths as given (``..`` and look-alikes go through)."""

    async def write(self, path: str, content: str) -> FileInfo:
        self.files[path] = {"content": content, "modified": 1.0}
        return FileInfo(path, False, len(content.encode()), 1.0)


async def test_escape_check_names_the_path_and_what_was_expected() -> None:
    with pytest.raises(AssertionError, match=r"write\('\.\./x\.txt'\).*expected BackendError"):
        await check_file_backend(
            lambda: FileBackendCase(Unnormalised({}), 1_000_000),
            [FILE_BACKEND_CHECKS[1]],
        )


async def test_a_failing_check_raises_assertion_errors_not_backend_errors() -> None:
    class NoGrep(StateBackend):
        async def grep(
            self,
            pattern: str,
            path: str = "/",
            *,
            glob: str | None = None,
            context: int = 0,
            limit: int = 1000,
        ) -> list[GrepLine]:
            raise BackendError("grep is not available here")

    from agentica.testing.conformance.files import check_grep_matches

    with pytest.raises(AssertionError, match="grep is not available here"):
        await check_grep_matches(FileBackendCase(NoGrep({}), 1_000_000))
