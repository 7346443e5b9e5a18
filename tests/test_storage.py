"""The storage backends: one conformance suite over memory, SQLite, JSON files and PostgreSQL.

PostgreSQL is a real throw-away cluster started by this test run (``tests/postgres.py``); its
tests are skipped, with the reason, only where PostgreSQL is not installed. Damage is done for
real: garbage written into a run row with SQL or into a run file, a process killed with SIGKILL
in the middle of appending runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from agentica.errors import SessionConflictError, SessionFormatError, StorageError, UsageError
from agentica.messages import RunUsage, UserMessage
from agentica.storage import (
    MAX_VARIABLE_BYTES,
    InMemoryStorage,
    JSONFileStorage,
    RunRecord,
    SessionNotFound,
    SQLiteStorage,
    SQLStorage,
    Storage,
    default_sqlite_path,
    open_storage,
)
from agentica.storage._sqlschema import VERSION_TABLE, metadata
from agentica.storage.base import merge_state
from agentica.storage.jsonfile import file_name
from tests.postgres import Cluster
from tests.records import every_kind_run, realistic_run

ROOT = Path(__file__).resolve().parent.parent
MIGRATIONS = ROOT / "packages" / "agentica" / "src" / "agentica" / "storage" / "migrations"
BACKENDS = ["memory", "sqlite", "jsonfiles", "postgresql"]


# -- fixtures --------------------------------------------------------------------------------


async def execute(url: str, statement: str, **params: Any) -> list[Any]:
    """Run one SQL statement on the database behind a storage, as a separate client would."""
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(sa.text(statement), params)
            return list(result) if result.returns_rows else []
    finally:
        await engine.dispose()


@dataclass
class Backend:
    """A backend under test, and how to damage what it stored."""

    kind: str
    make: Callable[[], Storage]
    root: Path | None = None  # JSON files
    cluster: Cluster | None = None

    async def corrupt_run(
        self, storage: Storage, user: str, session: str, seq: int, text: str
    ) -> None:
        if isinstance(storage, SQLStorage):
            await execute(
                storage.url,
                "UPDATE runs SET record = :text WHERE user_id = :u AND "
                "session_id = :s AND seq = :seq",
                text=text,
                u=user,
                s=session,
                seq=seq,
            )
        elif isinstance(storage, JSONFileStorage):
            path = (
                storage.directory
                / file_name(user)
                / file_name(session)
                / "runs"
                / f"{seq:08d}.json"
            )
            await asyncio.to_thread(path.write_text, text)
        else:
            assert isinstance(storage, InMemoryStorage)
            storage._sessions[(user, session)].runs[seq - 1] = text

    async def drop_run(self, storage: Storage, user: str, session: str, seq: int) -> bool:
        """Remove one stored run behind the storage's back (``False``: not possible)."""
        if isinstance(storage, SQLStorage):
            await execute(
                storage.url,
                "DELETE FROM runs WHERE user_id = :u AND session_id = :s AND seq = :seq",
                u=user,
                s=session,
                seq=seq,
            )
            return True
        if isinstance(storage, JSONFileStorage):
            path = (
                storage.directory
                / file_name(user)
                / file_name(session)
                / "runs"
                / f"{seq:08d}.json"
            )
            await asyncio.to_thread(path.unlink)
            return True
        return False

    async def blob_count(self, storage: Storage) -> int | None:
        """How many distinct values are stored (``None``: the backend does not share values)."""
        if isinstance(storage, SQLStorage):
            return int((await execute(storage.url, "SELECT COUNT(*) FROM blobs"))[0][0])
        if isinstance(storage, JSONFileStorage):
            files = await asyncio.to_thread(lambda: list(storage.directory.rglob("values/*.json")))
            return len({os.stat(f).st_ino for f in files})  # hard links are one file
        return None


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    kind = request.param
    if kind == "memory":
        return Backend(kind, InMemoryStorage)
    if kind == "sqlite":
        return Backend(kind, lambda: SQLiteStorage(tmp_path / "agentica.db"))
    if kind == "jsonfiles":
        return Backend(kind, lambda: JSONFileStorage(tmp_path / "files"), root=tmp_path / "files")
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    return Backend(kind, lambda: SQLStorage(cluster.url("conformance")), cluster=cluster)


@pytest.fixture
async def storage(backend: Backend) -> AsyncIterator[Storage]:
    store = backend.make()
    if backend.kind == "postgresql":
        assert isinstance(store, SQLStorage)
        await store.list_sessions("setup")  # creates the schema on first use
        await execute(store.url, "TRUNCATE sessions, runs, variables, blobs")
    try:
        yield store
    finally:
        await store.aclose()


def ids(runs: list[Any]) -> list[str]:
    return [run.run_id for run in runs]


# -- the protocol ----------------------------------------------------------------------------


async def test_runs_round_trip_exactly(storage: Storage) -> None:
    runs = [
        realistic_run(1),
        every_kind_run(2),
        every_kind_run(3),
        realistic_run(4),
        every_kind_run(5),
    ]
    assert runs[0].usage.cost is None
    for run in runs:
        await storage.append_run("alice", "s1", run)
    data = await storage.load_session("alice", "s1")
    assert data is not None
    assert data.runs == runs
    assert data.info.runs == 5
    assert data.info.title == runs[0].input[:80]
    assert data.info.user_id == "alice" and data.info.session_id == "s1"
    assert data.info.created_at <= data.info.updated_at
    assert data.summary is None and data.state == {}


async def test_unknown_session_is_none_and_runs_keep_their_order(storage: Storage) -> None:
    assert await storage.load_session("alice", "nothing") is None
    for i in range(30):
        await storage.append_run("alice", "s1", realistic_run(i, result_size=10))
    data = await storage.load_session("alice", "s1")
    assert data is not None
    assert ids(data.runs) == [f"run-{i}" for i in range(30)]


async def test_title_summary_and_state(storage: Storage) -> None:
    await storage.append_run(
        "alice",
        "s1",
        realistic_run(1),
        title="My research",
        summary="first",
        state={"todo": ["a"], "n": 1},
    )
    await storage.append_run("alice", "s1", realistic_run(2), title="ignored: not new")
    data = await storage.load_session("alice", "s1")
    assert data is not None
    assert data.info.title == "My research"
    assert data.summary == "first" and data.state == {"todo": ["a"], "n": 1}  # kept when None
    await storage.append_run("alice", "s1", realistic_run(3), summary="second", state={})
    data = await storage.load_session("alice", "s1")
    assert data is not None
    assert data.summary == "second" and data.state == {}
    await storage.append_run(
        "alice",
        "untitled",
        realistic_run(4).__class__(
            run_id="x",
            messages=[],
            usage=realistic_run(4).usage,
            status="completed",
            started_at=0.0,
            duration=0.0,
        ),
    )
    untitled = await storage.load_session("alice", "untitled")
    assert untitled is not None and untitled.info.title == "untitled"


async def test_list_sessions_most_recent_first_and_only_the_users(storage: Storage) -> None:
    for name in ("a", "b", "c"):
        await storage.append_run("alice", name, realistic_run(1, result_size=10))
    await storage.append_run("bob", "b-only", realistic_run(1, result_size=10))
    await storage.append_run("alice", "a", realistic_run(2, result_size=10))  # a is newest now
    listed = await storage.list_sessions("alice")
    assert [info.session_id for info in listed] == ["a", "c", "b"]
    assert [info.runs for info in listed] == [2, 1, 1]
    assert {info.user_id for info in listed} == {"alice"}
    assert [info.session_id for info in await storage.list_sessions("alice", limit=2)] == ["a", "c"]
    assert [info.session_id for info in await storage.list_sessions("bob")] == ["b-only"]
    assert await storage.list_sessions("carol") == []


async def test_rename(storage: Storage) -> None:
    await storage.append_run("alice", "s1", realistic_run(1))
    await storage.rename_session("alice", "s1", "Renamed ✓")
    data = await storage.load_session("alice", "s1")
    assert data is not None and data.info.title == "Renamed ✓"
    with pytest.raises(SessionNotFound):
        await storage.rename_session("alice", "missing", "x")


async def test_delete_removes_runs_and_variables(storage: Storage, backend: Backend) -> None:
    await storage.append_run("alice", "s1", realistic_run(1))
    await storage.set_variable("alice", "s1", "k", {"big": "v" * 5000})
    await storage.append_run("alice", "s2", realistic_run(2))
    assert await storage.delete_session("alice", "s1") is True
    assert await storage.delete_session("alice", "s1") is False
    assert await storage.load_session("alice", "s1") is None
    assert await storage.get_variable("alice", "s1", "k") is None
    assert await storage.list_variables("alice", "s1") == []
    assert [i.session_id for i in await storage.list_sessions("alice")] == ["s2"]
    assert await backend.blob_count(storage) in (0, None)
    await storage.append_run("alice", "s1", realistic_run(3))  # the id can be used again
    data = await storage.load_session("alice", "s1")
    assert data is not None and ids(data.runs) == ["run-3"]


async def test_fork_copies_everything_and_is_independent(storage: Storage) -> None:
    await storage.append_run("alice", "s1", realistic_run(1), summary="sum", state={"k": 1})
    await storage.append_run("alice", "s1", realistic_run(2))
    await storage.set_variable("alice", "s1", "shared", ["x" * 3000], summary="big list")
    info = await storage.fork_session("alice", "s1", "s1-fork")
    assert info.session_id == "s1-fork" and info.runs == 2 and info.title.endswith("(fork)")
    named = await storage.fork_session("alice", "s1", "s1-named", title="Named")
    assert named.title == "Named"
    fork = await storage.load_session("alice", "s1-fork")
    assert fork is not None
    assert ids(fork.runs) == ["run-1", "run-2"] and fork.summary == "sum" and fork.state == {"k": 1}
    copied = await storage.get_variable("alice", "s1-fork", "shared")
    assert copied is not None and copied.value == ["x" * 3000]
    assert copied.info.summary == "big list"
    # independent afterwards, in both directions
    await storage.append_run("alice", "s1-fork", realistic_run(3), state={"k": 2})
    await storage.set_variable("alice", "s1-fork", "shared", "changed")
    await storage.set_variable("alice", "s1", "only-source", 1)
    source = await storage.load_session("alice", "s1")
    assert source is not None and ids(source.runs) == ["run-1", "run-2"]
    assert source.state == {"k": 1}
    original = await storage.get_variable("alice", "s1", "shared")
    assert original is not None and original.value == ["x" * 3000]
    assert await storage.get_variable("alice", "s1-fork", "only-source") is None
    assert await storage.delete_session("alice", "s1")
    kept = await storage.get_variable("alice", "s1-named", "shared")
    assert kept is not None and kept.value == ["x" * 3000]
    with pytest.raises(SessionNotFound):
        await storage.fork_session("alice", "missing", "new")
    with pytest.raises(StorageError):
        await storage.fork_session("alice", "s1-fork", "s1-named")


async def test_variables_set_get_list_delete(storage: Storage) -> None:
    values: dict[str, Any] = {
        "a": 1,
        "a/b": 2.5,
        "a_c": None,
        "a%d": "ünïcødé 🚀",
        "aa": [1, "two", {"3": [4]}],
        "A": {"nested": {"deep": [True, False]}},
        "b": "",
        "é": "accent",
        "a\\x": 0,
    }
    for key, value in values.items():
        info = await storage.set_variable("alice", "s1", key, value, summary=f"about {key}")
        assert info.key == key and info.size == len(json.dumps(value, ensure_ascii=False).encode())
    for key, value in values.items():
        got = await storage.get_variable("alice", "s1", key)
        assert got is not None and got.value == value and got.info.summary == f"about {key}"
    listed = await storage.list_variables("alice", "s1")
    assert [v.key for v in listed] == sorted(values)  # code-point order
    assert [v.key for v in await storage.list_variables("alice", "s1", prefix="a")] == [
        "a",
        "a%d",
        "a/b",
        "a\\x",
        "a_c",
        "aa",
    ]
    assert [v.key for v in await storage.list_variables("alice", "s1", prefix="a_")] == ["a_c"]
    assert [v.key for v in await storage.list_variables("alice", "s1", prefix="a%")] == ["a%d"]
    assert [v.key for v in await storage.list_variables("alice", "s1", prefix="A")] == ["A"]
    assert [v.key for v in await storage.list_variables("alice", "s1", prefix="a", limit=2)] == [
        "a",
        "a%d",
    ]
    assert await storage.list_variables("alice", "s1", prefix="zz") == []
    replaced = await storage.set_variable("alice", "s1", "a", {"now": "an object"})
    assert replaced.summary is None
    got = await storage.get_variable("alice", "s1", "a")
    assert got is not None and got.value == {"now": "an object"} and got.info.summary is None
    assert await storage.delete_variable("alice", "s1", "a") is True
    assert await storage.delete_variable("alice", "s1", "a") is False
    assert await storage.get_variable("alice", "s1", "a") is None
    assert await storage.get_variable("alice", "other", "b") is None


async def test_variable_limits_are_clear_errors(storage: Storage) -> None:
    too_big = "x" * MAX_VARIABLE_BYTES
    with pytest.raises(StorageError, match=r"limit is \d+ bytes"):
        await storage.set_variable("alice", "s1", "huge", too_big)
    assert await storage.get_variable("alice", "s1", "huge") is None
    for key in ("", "k" * 257, "a\x00b"):
        with pytest.raises(StorageError, match="variable keys"):
            await storage.set_variable("alice", "s1", key, 1)


async def test_identical_values_are_stored_once(storage: Storage, backend: Backend) -> None:
    value = {"document": "lorem ipsum " * 20_000}  # ~240 KB
    await storage.set_variable("alice", "s1", "copy-1", value)
    await storage.set_variable("alice", "s1", "copy-2", value)
    await storage.fork_session("alice", "s1", "s2")
    await storage.set_variable("alice", "s2", "copy-3", value)
    expected_once = backend.kind in ("sqlite", "postgresql", "jsonfiles")
    if expected_once:
        assert await backend.blob_count(storage) == 1
    if backend.kind in ("sqlite", "postgresql"):  # stored once across users too
        await storage.set_variable("bob", "b1", "copy", value)
        assert await backend.blob_count(storage) == 1
        await storage.delete_session("bob", "b1")
    await storage.set_variable("alice", "s1", "copy-1", "replaced")
    await storage.delete_variable("alice", "s1", "copy-2")
    if expected_once:
        assert await backend.blob_count(storage) == 2  # the value (still in s2) and "replaced"
    await storage.delete_session("alice", "s2")
    if expected_once:
        assert await backend.blob_count(storage) == 1  # only "replaced" is left
    got = await storage.get_variable("alice", "s1", "copy-1")
    assert got is not None and got.value == "replaced"


async def test_users_never_see_each_other(storage: Storage) -> None:
    await storage.append_run("alice", "same-id", realistic_run(1))
    await storage.set_variable("alice", "same-id", "secret", "alice's")
    assert await storage.load_session("bob", "same-id") is None
    assert await storage.list_sessions("bob") == []
    assert await storage.get_variable("bob", "same-id", "secret") is None
    assert await storage.list_variables("bob", "same-id") == []
    assert await storage.delete_variable("bob", "same-id", "secret") is False
    assert await storage.delete_session("bob", "same-id") is False
    with pytest.raises(SessionNotFound):
        await storage.rename_session("bob", "same-id", "stolen")
    with pytest.raises(SessionNotFound):
        await storage.fork_session("bob", "same-id", "copy")
    await storage.append_run("bob", "same-id", realistic_run(2))
    await storage.set_variable("bob", "same-id", "secret", "bob's")
    alice = await storage.load_session("alice", "same-id")
    bob = await storage.load_session("bob", "same-id")
    assert alice is not None and bob is not None
    assert ids(alice.runs) == ["run-1"] and ids(bob.runs) == ["run-2"]
    assert alice.info.title != "stolen"
    secret = await storage.get_variable("alice", "same-id", "secret")
    assert secret is not None and secret.value == "alice's"


async def test_parallel_users_and_sessions_see_only_their_own_runs(storage: Storage) -> None:
    async def writer(user: str, session: str) -> None:
        for i in range(20):
            run = realistic_run(i, result_size=200)
            run.run_id = f"{user}/{session}/{i}"
            await storage.append_run(user, session, run, state={"last": i})
            if i % 4 == 3:
                owner = {"owner": f"{user}/{session}"}
                await storage.set_variable(user, session, f"v{i:02d}", owner)

    pairs = [(user, session) for user in ("alice", "bob") for session in ("s1", "s2")]
    await asyncio.gather(*(writer(user, session) for user, session in pairs))
    for user, session in pairs:
        data = await storage.load_session(user, session)
        assert data is not None
        assert ids(data.runs) == [f"{user}/{session}/{i}" for i in range(20)]
        assert data.state == {"last": 19}
        listed = await storage.list_variables(user, session)
        assert [v.key for v in listed] == [f"v{i:02d}" for i in range(3, 20, 4)]
        got = await storage.get_variable(user, session, "v07")
        assert got is not None and got.value == {"owner": f"{user}/{session}"}
    for user in ("alice", "bob"):
        assert {i.session_id for i in await storage.list_sessions(user)} == {"s1", "s2"}


# -- concurrent writers: a save states the revision it was based on ----------------------------


async def test_a_stale_save_is_refused_and_changes_nothing(storage: Storage) -> None:
    """Two writers loaded revision 1; the second to save gets the typed error, the first's
    state survives whole, and the refused run is not half-stored."""
    assert await storage.append_run("alice", "s1", realistic_run(1), state={"files": {}}) == 1
    loaded = await storage.load_session("alice", "s1")
    assert loaded is not None and loaded.revision == 1
    first = await storage.append_run(
        "alice", "s1", realistic_run(2), state={"files": {"a": "A"}}, expected_revision=1
    )
    assert first == 2
    with pytest.raises(SessionConflictError) as refused:
        await storage.append_run(
            "alice", "s1", realistic_run(3), summary="B's", state={"files": {"b": "B"}},
            expected_revision=1,
        )  # fmt: skip
    error = refused.value
    assert (error.user_id, error.session_id, error.expected, error.found) == ("alice", "s1", 1, 2)
    assert "another agent or process" in str(error) and "session_id" in str(error)
    data = await storage.load_session("alice", "s1")
    assert data is not None and data.revision == 2
    assert ids(data.runs) == ["run-1", "run-2"] and data.info.runs == 2
    assert data.state == {"files": {"a": "A"}} and data.summary is None
    # the current revision is accepted; a new session is revision 0 (variables do not count)
    assert await storage.append_run("alice", "s1", realistic_run(3), expected_revision=2) == 3
    await storage.set_variable("alice", "fresh", "k", 1)
    fresh = await storage.load_session("alice", "fresh")
    assert fresh is not None and fresh.revision == 0
    assert await storage.append_run("alice", "fresh", realistic_run(1), expected_revision=0) == 1
    with pytest.raises(SessionConflictError):  # "new" was expected, but it exists
        await storage.append_run("alice", "fresh", realistic_run(2), expected_revision=0)
    # a session deleted by someone else is not silently re-created by a stale writer
    assert await storage.delete_session("alice", "s1")
    with pytest.raises(SessionConflictError, match="deleted") as gone:
        await storage.append_run("alice", "s1", realistic_run(4), expected_revision=3)
    assert gone.value.found is None
    assert await storage.load_session("alice", "s1") is None
    # without expected_revision a save is unconditional, as before
    assert await storage.append_run("alice", "fresh", realistic_run(3)) == 2
    fork = await storage.fork_session("alice", "fresh", "fresh-fork")
    forked = await storage.load_session("alice", fork.session_id)
    assert forked is not None and forked.revision == 1 and len(forked.runs) == 2


async def test_a_save_based_on_never_saved_is_refused_on_a_fork(storage: Storage) -> None:
    """A writer loaded an id before a fork was created under it (nothing there: revision 0);
    its save must not silently replace the fork's runs and state."""
    await storage.append_run("alice", "s1", realistic_run(1), state={"todos": ["keep me"]})
    assert await storage.load_session("alice", "s1-fork") is None  # the writer's load
    await storage.fork_session("alice", "s1", "s1-fork")
    with pytest.raises(SessionConflictError) as refused:
        await storage.append_run(
            "alice", "s1-fork", realistic_run(2), state={}, expected_revision=0
        )
    assert refused.value.expected == 0 and refused.value.found == 1
    data = await storage.load_session("alice", "s1-fork")
    assert data is not None and data.revision == 1
    assert ids(data.runs) == ["run-1"] and data.state == {"todos": ["keep me"]}
    # a writer that loaded the fork saves on top of it
    assert await storage.append_run("alice", "s1-fork", realistic_run(2), expected_revision=1) == 2


async def test_concurrent_writers_never_lose_a_save(storage: Storage, backend: Backend) -> None:
    """Writers (each its own storage object where the backend allows) load, change the whole
    state and save with the revision they loaded; on a conflict they reload and retry. Every
    save that succeeded is in the final session."""
    stores = [storage] if backend.kind == "memory" else [backend.make() for _ in range(3)]
    saved: list[str] = []

    async def writer(number: int) -> int:
        conflicts = 0
        store = stores[number % len(stores)]
        for round_ in range(4):
            run = realistic_run(round_, result_size=50)
            run.run_id = f"w{number}-r{round_}"
            while True:
                data = await store.load_session("alice", "shared")
                state = data.state if data else {}
                log = [*state.get("log", []), run.run_id]
                try:
                    await store.append_run(
                        "alice", "shared", run, state={"log": log},
                        expected_revision=data.revision if data else 0,
                    )  # fmt: skip
                except SessionConflictError:
                    conflicts += 1
                    continue
                saved.append(run.run_id)
                break
        return conflicts

    try:
        await asyncio.gather(*(writer(n) for n in range(4)))
    finally:
        for store in stores:
            if store is not storage:
                await store.aclose()
    data = await storage.load_session("alice", "shared")
    assert data is not None
    assert ids(data.runs) == saved and data.state["log"] == saved and data.revision == 16


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ('{"format": "agentica.run", "version": 1, "run": {"run_id": "x"', "not valid JSON"),
        ("garbage \x01\x02", "not valid JSON"),
        ('{"format": "agentica.run", "version": 1, "run": {"run_id": 3}}', "is damaged"),
        ('{"something": "else"}', "not an agentica run record"),
        ('{"format": "agentica.run", "version": 99, "run": {}}', "newer agentica"),
    ],
    ids=["truncated", "garbage", "wrong-fields", "foreign", "newer-version"],
)
async def test_damaged_runs_raise_a_clear_error(
    storage: Storage, backend: Backend, damage: str, message: str
) -> None:
    for i in range(3):
        await storage.append_run("alice", "s1", realistic_run(i))
    await storage.append_run("bob", "s1", realistic_run(9))
    await backend.corrupt_run(storage, "alice", "s1", 2, damage)
    with pytest.raises(SessionFormatError, match=message) as caught:
        await storage.load_session("alice", "s1")
    assert "run 2" in str(caught.value)
    assert "'s1'" in str(caught.value) and "'alice'" in str(caught.value)
    bob = await storage.load_session("bob", "s1")  # other users' sessions are unaffected
    assert bob is not None and ids(bob.runs) == ["run-9"]


async def test_a_missing_run_is_reported(storage: Storage, backend: Backend) -> None:
    for i in range(3):
        await storage.append_run("alice", "s1", realistic_run(i))
    if not await backend.drop_run(storage, "alice", "s1", 2):
        pytest.skip("the in-memory backend has no rows to lose")
    with pytest.raises(SessionFormatError, match=r"session 's1' of user 'alice' is damaged"):
        await storage.load_session("alice", "s1")


@pytest.mark.parametrize("bad", ["", "x" * 257, "nul\x00byte"], ids=["empty", "long", "nul"])
async def test_bad_ids_are_refused(storage: Storage, bad: str) -> None:
    run = realistic_run(1)
    await storage.append_run("u", "s", run)
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: storage.load_session(bad, "s"),
        lambda: storage.load_session("u", bad),
        lambda: storage.append_run(bad, "s", run),
        lambda: storage.append_run("u", bad, run),
        lambda: storage.list_sessions(bad),
        lambda: storage.rename_session("u", bad, "t"),
        lambda: storage.delete_session(bad, "s"),
        lambda: storage.fork_session("u", "s", bad),
        lambda: storage.fork_session("u", bad, "new", at=0),
        lambda: storage.rewind_session("u", bad, 0),
        lambda: storage.rewind_session("u", "s", 0, branch_id=bad),
        lambda: storage.branches(bad, "s"),
        lambda: storage.set_variable("u", bad, "k", 1),
        lambda: storage.get_variable(bad, "s", "k"),
        lambda: storage.list_variables("u", bad),
        lambda: storage.delete_variable(bad, "s", "k"),
    ]
    for call in calls:
        with pytest.raises(StorageError, match="non-empty string"):
            await call()


UNUSUAL_IDS = [
    "../../escape",
    "/",
    "a/b",
    ".",
    "..",
    "~",
    "%2F",
    "ünï 🚀",
    "x" * 256,
    "é" * 256,
    "back\\slash",
    " spaced ",
]


async def test_unusual_ids_are_distinct_and_round_trip(storage: Storage, backend: Backend) -> None:
    for number, name in enumerate(UNUSUAL_IDS):
        await storage.append_run(name, name, realistic_run(number, result_size=10))
        await storage.set_variable(name, name, name, number)
    for number, name in enumerate(UNUSUAL_IDS):
        data = await storage.load_session(name, name)
        assert data is not None and ids(data.runs) == [f"run-{number}"]
        assert [i.session_id for i in await storage.list_sessions(name)] == [name]
        got = await storage.get_variable(name, name, name)
        assert got is not None and got.value == number
        assert [v.key for v in await storage.list_variables(name, name)] == [name]
    if backend.root is not None:  # every file stayed inside the storage directory
        parent = backend.root.parent
        assert sorted(p.name for p in parent.iterdir()) == [backend.root.name]
        for path in backend.root.rglob("*"):
            assert path.resolve().is_relative_to(backend.root.resolve())
            assert len(path.name) <= 255


async def test_nul_characters_never_break_a_write(storage: Storage) -> None:
    run = realistic_run(1)
    run.messages[0] = UserMessage(content="nul \x00 inside the input (the default title)")
    await storage.append_run("alice", "s1", run, summary="a \x00 summary")
    await storage.set_variable("alice", "s1", "k", "value \x00", summary="about \x00")
    data = await storage.load_session("alice", "s1")
    assert data is not None
    assert data.runs == [run]  # records are exact; titles and summaries may lose the NUL
    assert data.summary is not None and data.summary.startswith("a ")
    got = await storage.get_variable("alice", "s1", "k")
    assert got is not None and got.value == "value \x00"


# -- branches: forks at a turn, rewinds, the tree -------------------------------------------


def files_state(i: int) -> dict[str, Any]:
    """The state after run ``i`` of ``three_runs``: a counter, files added and removed."""
    files = {f"/f{j}.md": f"written by run {j}" for j in range(1, i + 1) if j != 2 or i < 3}
    return {"n": i, "files": files, **({"todos": ["t"]} if i == 2 else {})}


async def three_runs(storage: Storage, user: str = "alice", session: str = "s1") -> None:
    for i in (1, 2, 3):
        await storage.append_run(user, session, realistic_run(i), summary=f"up to {i}" if i > 1
                                 else None, state=files_state(i))  # fmt: skip


async def test_a_fork_at_a_turn_has_the_runs_and_state_as_they_were(storage: Storage) -> None:
    await three_runs(storage)
    await storage.set_variable("alice", "s1", "note", {"v": 3})
    for at, summary in ((0, None), (1, None), (2, "up to 2"), (3, "up to 3")):
        info = await storage.fork_session("alice", "s1", f"at-{at}", at=at)
        assert (info.parent_id, info.forked_at, info.runs) == ("s1", at, at)
        data = await storage.load_session("alice", f"at-{at}")
        assert data is not None and data.revision == 1
        assert ids(data.runs) == [f"run-{i}" for i in range(1, at + 1)]
        assert data.state == (files_state(at) if at else {}) and data.summary == summary
        assert data.info.parent_id == "s1" and data.info.forked_at == at
        variable = await storage.get_variable("alice", f"at-{at}", "note")  # as it is now
        assert variable is not None and variable.value == {"v": 3}
    whole = await storage.fork_session("alice", "s1", "whole")
    assert (whole.parent_id, whole.forked_at, whole.runs) == ("s1", 3, 3)
    # both branches go on; each keeps its own history of states
    await storage.append_run("alice", "at-1", realistic_run(9), state={"n": 9})
    again = await storage.fork_session("alice", "at-1", "at-1-1", at=1)
    data = await storage.load_session("alice", again.session_id)
    assert data is not None and data.state == files_state(1) and ids(data.runs) == ["run-1"]
    source = await storage.load_session("alice", "s1")
    assert source is not None and source.revision == 3 and source.state == files_state(3)
    assert source.info.parent_id is None and source.info.forked_at is None


async def test_a_rewind_keeps_the_dropped_runs_in_a_branch(storage: Storage) -> None:
    await three_runs(storage)
    await storage.set_variable("alice", "s1", "note", 1)
    branch = await storage.rewind_session("alice", "s1", 1)
    assert branch.session_id == "s1.3"  # the session as it was at revision 3
    assert (branch.parent_id, branch.forked_at, branch.runs) == ("s1", 1, 3)
    data = await storage.load_session("alice", "s1")
    assert data is not None and ids(data.runs) == ["run-1"] and data.info.runs == 1
    assert data.state == files_state(1) and data.summary is None and data.revision == 4
    kept = await storage.load_session("alice", "s1.3")
    assert kept is not None and ids(kept.runs) == ["run-1", "run-2", "run-3"]
    assert kept.state == files_state(3) and kept.summary == "up to 3" and kept.revision == 1
    for session in ("s1", "s1.3"):
        variable = await storage.get_variable("alice", session, "note")
        assert variable is not None and variable.value == 1
    # a writer holding the copy of before the rewind is refused, not applied over it
    with pytest.raises(SessionConflictError) as stale:
        await storage.append_run("alice", "s1", realistic_run(4), expected_revision=3)
    assert (stale.value.expected, stale.value.found) == (3, 4)
    assert await storage.append_run("alice", "s1", realistic_run(5), state={"n": 5},
                                    expected_revision=4) == 5  # fmt: skip
    # the branch can be rewound too, to a chosen id; rewinding to 0 keeps no run
    again = await storage.rewind_session("alice", "s1.3", 2, branch_id="third")
    assert (again.session_id, again.parent_id, again.forked_at) == ("third", "s1.3", 2)
    assert await storage.rewind_session("alice", "s1", 0, expected_revision=5)
    emptied = await storage.load_session("alice", "s1")
    assert emptied is not None and emptied.runs == [] and emptied.state == {}
    branched = await storage.load_session("alice", "s1.3")
    assert branched is not None and branched.state == files_state(2)
    assert ids(branched.runs) == ["run-1", "run-2"] and branched.summary == "up to 2"


async def test_bad_turns_and_stale_rewinds_change_nothing(storage: Storage) -> None:
    await three_runs(storage)
    for bad in (-1, 4, True):
        with pytest.raises(UsageError, match=r"at=.* is not a run of session 's1': it has 3 runs"):
            await storage.fork_session("alice", "s1", "bad", at=bad)
    with pytest.raises(UsageError, match=r"to=3 keeps all 3 runs .* nothing to rewind"):
        await storage.rewind_session("alice", "s1", 3)
    with pytest.raises(UsageError, match=r"between 0 and 2"):
        await storage.rewind_session("alice", "s1", -1)
    with pytest.raises(SessionConflictError):
        await storage.rewind_session("alice", "s1", 1, expected_revision=2)
    await storage.fork_session("alice", "s1", "taken")
    with pytest.raises(StorageError, match="already exists"):
        await storage.rewind_session("alice", "s1", 1, branch_id="taken")
    with pytest.raises(SessionNotFound):
        await storage.rewind_session("alice", "missing", 0)
    with pytest.raises(SessionNotFound):
        await storage.branches("alice", "missing")
    data = await storage.load_session("alice", "s1")
    assert data is not None and ids(data.runs) == ["run-1", "run-2", "run-3"]
    assert data.revision == 3 and data.state == files_state(3)
    assert {i.session_id for i in await storage.list_sessions("alice")} == {"s1", "taken"}
    await storage.append_run("alice", "empty", realistic_run(1))
    await storage.rewind_session("alice", "empty", 0)
    with pytest.raises(UsageError, match="has no runs: there is nothing to rewind"):
        await storage.rewind_session("alice", "empty", 0)
    # the default branch id is taken: another one is chosen
    await storage.fork_session("alice", "s1", "s1.3")
    branch = await storage.rewind_session("alice", "s1", 2)
    assert branch.session_id.startswith("s1.3-") and branch.runs == 3


async def test_branches_are_one_tree_from_any_of_them(storage: Storage) -> None:
    await three_runs(storage)
    await storage.fork_session("alice", "s1", "early", at=1)
    await storage.fork_session("alice", "s1", "late", at=3)
    await storage.fork_session("alice", "early", "early-child", at=1)
    await three_runs(storage, session="other")  # another lineage of the same user
    await three_runs(storage, user="bob")  # another user's session of the same id
    # rewinding s1 to run 2: "late" (forked after run 2) now parts from the branch holding
    # the runs it shares; "early" (forked at run 1) still parts from s1
    branch = await storage.rewind_session("alice", "s1", 2)
    for member in ("s1", "early-child", branch.session_id, "late"):
        tree = await storage.branches("alice", member)
        assert len(tree) == 5 and [root.session_id for root in tree.roots] == ["s1"]
        found = {b.session_id: (b.info.parent_id, b.info.forked_at) for _, b in tree.walk()}
        assert found == {
            "s1": (None, None), "early": ("s1", 1), "early-child": ("early", 1),
            branch.session_id: ("s1", 2), "late": (branch.session_id, 3),
        }  # fmt: skip
        node = tree.find(branch.session_id)
        assert node is not None and [c.session_id for c in node.children] == ["late"]
    late = await storage.load_session("alice", "late")
    kept = await storage.load_session("alice", branch.session_id)
    assert late is not None and kept is not None and ids(late.runs) == ids(kept.runs)
    assert len(await storage.branches("alice", "other")) == 1
    assert len(await storage.branches("bob", "s1")) == 1
    # a deleted parent leaves its children as roots that still name it
    assert await storage.delete_session("alice", "s1")
    tree = await storage.branches("alice", "late")
    assert {root.session_id for root in tree.roots} == {"early", branch.session_id}
    assert all(root.info.parent_id == "s1" for root in tree.roots)


# -- the property: forks and rewinds never lose or duplicate a run ---------------------------


def tiny_run(number: int) -> RunRecord:
    return RunRecord(run_id=f"r{number}", messages=[UserMessage(content=f"input {number}")],
                     usage=RunUsage(), status="completed", started_at=float(number),
                     duration=0.0)  # fmt: skip


def state_after(runs: list[str]) -> tuple[dict[str, Any], str | None]:
    """The state and summary a branch holds after ``runs`` (files come and go)."""
    if not runs:
        return {}, None
    files = {f"/{run}.md": f"by {run}" for run in runs[-3:]}
    return {"last": runs[-1], "count": len(runs), "files": files}, f"summary up to {runs[-1]}"


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("fork"), st.integers(0, 30), st.integers(0, 30)),
        st.tuples(st.just("rewind"), st.integers(0, 30), st.integers(0, 30)),
    ),
    max_size=24,
)


async def check_branching(storage: Storage, operations: list[tuple[str, int, int]]) -> None:
    """Run ``operations`` on a storage and on a model of the tree; every branch must hold
    exactly the model's runs (none lost, none twice), state and parent after each one."""
    user = f"u{uuid.uuid4().hex[:8]}"
    runs: dict[str, list[str]] = {"root": []}
    parents: dict[str, tuple[str | None, int | None]] = {"root": (None, None)}
    appended: list[str] = []

    async def append(session: str) -> None:
        run = tiny_run(len(appended))
        state, summary = state_after([*runs[session], run.run_id])
        await storage.append_run(user, session, run, state=state, summary=summary)
        runs[session].append(run.run_id)
        appended.append(run.run_id)

    await append("root")
    for kind, which, turn in operations:
        session = list(runs)[which % len(runs)]
        if kind == "append":
            await append(session)
        elif kind == "fork":
            at, new = turn % (len(runs[session]) + 1), f"fork{len(runs)}"
            info = await storage.fork_session(user, session, new, at=at)
            assert (info.parent_id, info.forked_at, info.runs) == (session, at, at)
            runs[new], parents[new] = runs[session][:at], (session, at)
        elif not runs[session]:
            with pytest.raises(UsageError):
                await storage.rewind_session(user, session, 0)
        else:
            to = turn % len(runs[session])
            branch = (await storage.rewind_session(user, session, to)).session_id
            assert branch not in runs
            runs[branch], parents[branch] = list(runs[session]), (session, to)
            for child, (parent, at) in parents.items():
                if parent == session and child != branch and (at or 0) > to:
                    parents[child] = (branch, at)
            parent, at = parents[session]
            if at is not None and at > to:  # it shares no more than it keeps
                parents[session] = (parent, to)
            runs[session] = runs[session][:to]
    for session, expected in runs.items():
        data = await storage.load_session(user, session)
        assert data is not None and ids(data.runs) == expected, session
        assert len(set(expected)) == len(expected)
        assert (data.info.parent_id, data.info.forked_at) == parents[session]
        assert (data.state, data.summary) == state_after(expected), session
        parent, at = parents[session]
        if parent is not None and at is not None:  # it shares its first runs with its parent
            assert runs[parent][:at] == expected[:at]
    assert {run for kept in runs.values() for run in kept} == set(appended)  # none lost
    tree = await storage.branches(user, "root")
    assert {b.session_id: (b.info.parent_id, b.info.forked_at) for _, b in tree.walk()} == parents


@settings(max_examples=150, deadline=None)
@given(operations=OPERATIONS)
async def test_forks_and_rewinds_never_lose_or_duplicate_a_run(
    operations: list[tuple[str, int, int]],
) -> None:
    await check_branching(InMemoryStorage(), operations)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
async def test_forks_and_rewinds_never_lose_a_run_in_any_backend(
    storage: Storage, operations: list[tuple[str, int, int]]
) -> None:
    await check_branching(storage, operations)


# -- SQL: schema, migrations, damage ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The URL of an empty database."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database(f"fresh_{os.getpid()}_{random.randrange(10**9)}")


async def test_a_fresh_database_gets_the_schema_of_the_code(fresh_sql_url: str) -> None:
    storage = SQLStorage(fresh_sql_url)
    try:
        assert await storage.list_sessions("u") == []
    finally:
        await storage.aclose()
    version = await execute(fresh_sql_url, f"SELECT version_num FROM {VERSION_TABLE}")
    assert [row[0] for row in version] == ["0003"]
    engine = create_async_engine(fresh_sql_url)
    try:
        async with engine.connect() as conn:
            differences = await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"version_table": VERSION_TABLE}),
                    metadata,
                )
            )
    finally:
        await engine.dispose()
    assert differences == []
    again = SQLStorage(fresh_sql_url, create=False)  # up to date: no upgrade needed
    try:
        assert await again.list_sessions("u") == []
    finally:
        await again.aclose()


async def test_a_database_from_a_newer_agentica_is_refused(fresh_sql_url: str) -> None:
    storage = SQLStorage(fresh_sql_url)
    await storage.append_run("u", "s", realistic_run(1))
    await storage.aclose()
    await execute(fresh_sql_url, f"UPDATE {VERSION_TABLE} SET version_num = '0042_future'")
    newer = SQLStorage(fresh_sql_url)
    try:
        with pytest.raises(StorageError, match=r"0042_future.*newer agentica; upgrade agentica"):
            await newer.load_session("u", "s")
    finally:
        await newer.aclose()


async def test_a_database_of_the_previous_schema_is_upgraded(fresh_sql_url: str) -> None:
    """A database at revision 0001 (no session revision) is upgraded in place on first use:
    its sessions keep their runs and start at their run count."""
    storage = SQLStorage(fresh_sql_url)
    for i in (1, 2):
        await storage.append_run("u", "s", realistic_run(i), state={"n": i})
    await storage.aclose()

    def downgrade(connection: Any) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.downgrade(config, "0001")

    engine = create_async_engine(fresh_sql_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(downgrade)
    finally:
        await engine.dispose()
    version = await execute(fresh_sql_url, f"SELECT version_num FROM {VERSION_TABLE}")
    assert [row[0] for row in version] == ["0001"]
    with pytest.raises(Exception, match="revision"):
        await execute(fresh_sql_url, "SELECT revision FROM sessions")
    upgraded = SQLStorage(fresh_sql_url)
    try:
        data = await upgraded.load_session("u", "s")
        assert data is not None and data.revision == 2 and ids(data.runs) == ["run-1", "run-2"]
        with pytest.raises(SessionConflictError):
            await upgraded.append_run("u", "s", realistic_run(3), expected_revision=1)
        assert await upgraded.append_run("u", "s", realistic_run(3), expected_revision=2) == 3
    finally:
        await upgraded.aclose()


async def downgrade_to(url: str, revision: str) -> None:
    """Take the database's schema down to ``revision`` with the migrations' own downgrades."""

    def downgrade(connection: Any) -> None:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = connection
        command.downgrade(config, revision)

    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(downgrade)
    finally:
        await engine.dispose()


async def test_sessions_saved_before_branching_load_fork_and_rewind(fresh_sql_url: str) -> None:
    """A database at revision 0002 (no lineage, runs without undo patches) is upgraded on first
    use: its sessions are roots of their own lineage; a fork before an old run gets the state
    of the oldest point with a recorded history (the old runs kept none)."""
    storage = SQLStorage(fresh_sql_url)
    for i in (1, 2):
        await storage.append_run("u", "s", realistic_run(i), state={"n": i})
    await storage.aclose()
    await downgrade_to(fresh_sql_url, "0002")
    with pytest.raises(Exception, match="undo"):
        await execute(fresh_sql_url, "SELECT undo FROM runs")
    upgraded = SQLStorage(fresh_sql_url)
    try:
        data = await upgraded.load_session("u", "s")
        assert data is not None and ids(data.runs) == ["run-1", "run-2"] and data.revision == 2
        assert (data.info.parent_id, data.info.forked_at) == (None, None)
        tree = await upgraded.branches("u", "s")
        assert [root.session_id for root in tree.roots] == ["s"] and len(tree) == 1
        await upgraded.append_run("u", "s", realistic_run(3), state={"n": 3})
        await upgraded.fork_session("u", "s", "at-2", at=2)
        await upgraded.fork_session("u", "s", "at-1", at=1)
        at_2 = await upgraded.load_session("u", "at-2")
        at_1 = await upgraded.load_session("u", "at-1")
        assert at_2 is not None and at_2.state == {"n": 2}  # run 3 recorded its change
        assert at_1 is not None and at_1.state == {"n": 2} and ids(at_1.runs) == ["run-1"]
        branch = await upgraded.rewind_session("u", "s", 1)
        kept = await upgraded.load_session("u", branch.session_id)
        assert kept is not None and ids(kept.runs) == ["run-1", "run-2", "run-3"]
        assert len(await upgraded.branches("u", "at-1")) == 4
    finally:
        await upgraded.aclose()
    await downgrade_to(fresh_sql_url, "0002")  # and back: the branches stay plain sessions
    version = await execute(fresh_sql_url, f"SELECT version_num FROM {VERSION_TABLE}")
    assert [row[0] for row in version] == ["0002"]


async def test_json_files_saved_before_branching_still_load(tmp_path: Path) -> None:
    storage = JSONFileStorage(tmp_path)
    for i in (1, 2):
        await storage.append_run("u", "s", realistic_run(i), state={"n": i})
    session_dir = tmp_path / "u" / "s"

    def strip() -> None:  # as an agentica without branches wrote them
        meta = json.loads((session_dir / "session.json").read_text())
        for key in ("parent_id", "forked_at", "root_id"):
            del meta[key]
        (session_dir / "session.json").write_text(json.dumps(meta))
        for path in (session_dir / "runs").iterdir():
            record = json.loads(path.read_text())
            del record["undo"]
            path.write_text(json.dumps(record))

    await asyncio.to_thread(strip)
    data = await storage.load_session("u", "s")
    assert data is not None and ids(data.runs) == ["run-1", "run-2"]
    assert data.info.parent_id is None and len(await storage.branches("u", "s")) == 1
    fork = await storage.fork_session("u", "s", "f", at=1)
    forked = await storage.load_session("u", "f")
    assert fork.forked_at == 1 and forked is not None and forked.state == {"n": 2}
    branch = await storage.rewind_session("u", "s", 1)
    assert [b.session_id for _, b in (await storage.branches("u", "f")).walk()] == [
        "s", "f", branch.session_id,
    ]  # fmt: skip


async def test_create_false_does_not_create_a_schema(fresh_sql_url: str) -> None:
    storage = SQLStorage(fresh_sql_url, create=False)
    try:
        with pytest.raises(StorageError, match=r"schema is missing.*create=True"):
            await storage.list_sessions("u")
    finally:
        await storage.aclose()


async def test_damaged_session_state_raises_a_clear_error(fresh_sql_url: str) -> None:
    url = fresh_sql_url
    storage = SQLStorage(url)
    try:
        await storage.append_run("alice", "s1", realistic_run(1), state={"ok": True})
        await execute(url, "UPDATE sessions SET state = '{\"trunc' WHERE user_id = 'alice'")
        with pytest.raises(SessionFormatError, match=r"state of session 's1' of user 'alice'"):
            await storage.load_session("alice", "s1")
    finally:
        await storage.aclose()


async def test_concurrent_variable_churn_keeps_blobs_consistent(fresh_sql_url: str) -> None:
    """Many writers setting, replacing and deleting variables that share values."""
    url = fresh_sql_url
    storage = SQLStorage(url)
    values = [{"shared": n, "pad": "p" * 2000} for n in range(3)]

    async def churn(worker: int) -> None:
        for step in range(12):
            key = f"k{step % 4}"
            await storage.set_variable(f"user{worker % 2}", f"s{worker}", key, values[step % 3])
            if step % 5 == 4:
                await storage.delete_variable(f"user{worker % 2}", f"s{worker}", "k0")
            if step == 10 and worker % 3 == 0:
                await storage.fork_session(f"user{worker % 2}", f"s{worker}", f"f{worker}")

    try:
        await asyncio.gather(*(churn(worker) for worker in range(8)))
    finally:
        await storage.aclose()
    referenced = await execute(url, "SELECT COUNT(DISTINCT blob_hash) FROM variables")
    stored = await execute(url, "SELECT COUNT(*) FROM blobs")
    dangling = await execute(
        url,
        "SELECT COUNT(*) FROM variables v WHERE NOT EXISTS "
        "(SELECT 1 FROM blobs b WHERE b.hash = v.blob_hash)",
    )
    assert dangling[0][0] == 0
    assert stored[0][0] == referenced[0][0] <= 3


async def test_unreachable_or_foreign_databases_are_clear_errors(tmp_path: Path) -> None:
    unreachable = SQLStorage("postgresql://postgres:pw@127.0.0.1:1/nothing")
    try:
        with pytest.raises(StorageError, match=r"PostgreSQL database 127.0.0.1:1/nothing: could"):
            await unreachable.list_sessions("u")
    finally:
        await unreachable.aclose()
    not_a_database = tmp_path / "garbage.db"
    not_a_database.write_bytes(b"this is not a database" * 100)
    garbage = SQLiteStorage(not_a_database)
    try:
        with pytest.raises(StorageError, match=r"garbage.db: could not open the database"):
            await garbage.load_session("u", "s")
    finally:
        await garbage.aclose()


# -- crashes ---------------------------------------------------------------------------------

CHILD = """
import asyncio, sys
sys.path.insert(0, sys.argv[3])
from agentica.storage import open_storage
from tests.records import realistic_run

async def main(location: str, start: int) -> None:
    storage = open_storage(location)
    i = start
    while True:
        run = realistic_run(i, result_size=40_000)
        await storage.append_run("crash-user", "crash-session", run, summary=f"after {i}",
                                 state={"last": i})
        print(i, flush=True)
        i += 1

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


@pytest.mark.parametrize("kind", ["sqlite", "jsonfiles"])
async def test_a_process_killed_mid_run_never_leaves_a_half_written_session(
    kind: str, tmp_path: Path
) -> None:
    location = str(tmp_path / ("crash.db" if kind == "sqlite" else "crash-files"))
    stored = 0
    for _ in range(4 if kind == "sqlite" else 3):
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD,
            location,
            str(stored + 1),
            str(ROOT),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert child.stdout is not None
        first = await asyncio.wait_for(child.stdout.readline(), 60)
        assert first.strip(), (await child.communicate())[1].decode()
        await asyncio.sleep(random.uniform(0.0, 0.25))
        child.kill()  # SIGKILL, wherever it is
        rest, _ = await child.communicate()
        printed = [int(n) for n in (first + rest).split()]
        storage = open_storage(location)
        try:
            data = await storage.load_session("crash-user", "crash-session")
        finally:
            await storage.aclose()
        assert data is not None
        count = len(data.runs)
        assert printed[-1] <= count <= printed[-1] + 1  # committed runs survive, at most one more
        assert ids(data.runs) == [f"run-{i}" for i in range(1, count + 1)]
        assert data.runs[-1] == realistic_run(count, result_size=40_000)
        assert data.summary == f"after {count}" and data.state == {"last": count}
        stored = count


async def test_a_sqlite_file_another_process_is_writing_opens_once_the_writer_is_done(
    tmp_path: Path,
) -> None:
    """The switch to WAL while another connection holds the write lock: SQLite reports "database
    is locked" at once (its busy handler is not asked, as when two processes create one file
    together, the race CI once hit); the storage waits for the writer instead of failing."""
    import sqlite3
    import threading

    path = tmp_path / "busy.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE someone_elses (x)")  # a file in rollback-journal mode
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO someone_elses VALUES (1)")
    done = threading.Timer(1.0, lambda: writer.execute("COMMIT"))
    done.start()
    storage = open_storage(str(path))
    try:
        await storage.set_variable("u", "s", "k", "written")
        stored = await storage.get_variable("u", "s", "k")
        assert stored is not None and stored.value == "written"
    finally:
        await storage.aclose()
        await asyncio.to_thread(done.join)
        writer.close()
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


# -- opening, paths, laziness ----------------------------------------------------------------


def test_open_storage_picks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTICA_HOME", str(tmp_path / "home"))
    default = open_storage(None)
    assert isinstance(default, SQLiteStorage) and default.path == tmp_path / "home/agentica.db"
    assert isinstance(open_storage("memory"), InMemoryStorage)
    db = open_storage(str(tmp_path / "x.db"))
    assert isinstance(db, SQLiteStorage) and db.path == tmp_path / "x.db"
    url = open_storage(f"sqlite:///{tmp_path / 'y.db'}")
    assert isinstance(url, SQLStorage) and url.url.startswith("sqlite+aiosqlite:///")
    pg = open_storage("postgresql://agent:secret@db.example:5432/agentica")
    assert isinstance(pg, SQLStorage) and pg.url.startswith("postgresql+asyncpg://")
    assert "secret" not in repr(pg)
    assert isinstance(open_storage("postgresql+asyncpg://h/db"), SQLStorage)
    files = open_storage(tmp_path / "debug")
    assert isinstance(files, JSONFileStorage) and files.directory == tmp_path / "debug"
    with pytest.raises(StorageError, match="unsupported database URL"):
        open_storage("mysql://h/db")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StorageError, match="not a SQLite database"):
        open_storage(tmp_path / "notes.txt")
    (tmp_path / "nosuffix").write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert isinstance(open_storage(tmp_path / "nosuffix"), SQLiteStorage)


def test_default_sqlite_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENTICA_HOME", str(tmp_path / "a"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert default_sqlite_path() == tmp_path / "a" / "agentica.db"
    monkeypatch.delenv("AGENTICA_HOME")
    assert default_sqlite_path() == tmp_path / "x" / "agentica" / "agentica.db"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    assert default_sqlite_path() == tmp_path / "h/.local/share/agentica/agentica.db"
    assert SQLiteStorage().path == default_sqlite_path()


def test_file_names_cannot_escape() -> None:
    for name in [*UNUSUAL_IDS, "a" * 500, "\udcff"]:
        encoded = file_name(name)
        assert "/" not in encoded and "\\" not in encoded and "." not in encoded
        assert encoded and len(encoded) <= 120 + 41
    assert len({file_name(name) for name in UNUSUAL_IDS}) == len(UNUSUAL_IDS)
    assert file_name("a/") != file_name("a%2F")


def test_importing_agentica_does_not_import_sqlalchemy() -> None:
    code = (
        "import sys, agentica, agentica.storage\n"
        "from agentica.storage import SQLStorage, SQLiteStorage, open_storage\n"
        "open_storage('x.db'); open_storage('postgresql://h/db')\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('sqlalchemy', 'alembic', "
        "'asyncpg', 'aiosqlite')]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr


FIRST_USE = """
import asyncio, logging, sys
sys.path.insert(0, sys.argv[2])
slow = []
class Catch(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Executing"):
            slow.append(record.getMessage())
logging.getLogger("asyncio").addHandler(Catch())
from agentica.storage import SQLiteStorage
from tests.records import realistic_run

async def main() -> None:
    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = 0.1
    await asyncio.sleep(0)  # the step that turned debug on is not timed: start a new one
    storage = SQLiteStorage(sys.argv[1])
    await storage.set_variable("u", "s", "k", 1)  # imports, engine, schema creation
    await storage.append_run("u", "s", realistic_run(1))
    await storage.load_session("u", "s")
    await storage.aclose()

asyncio.run(main())
assert "sqlalchemy" in sys.modules and "alembic" in sys.modules
assert not slow, slow
"""


def test_first_use_in_a_fresh_process_never_blocks_the_loop(tmp_path: Path) -> None:
    """SQLAlchemy and alembic (~0.5 s to import) are imported in a worker thread."""
    result = subprocess.run(
        [sys.executable, "-c", FIRST_USE, str(tmp_path / "fresh.db"), str(ROOT)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_one_storage_serves_several_event_loops(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "loops.db")

    async def use(i: int) -> int:
        try:
            await storage.append_run("u", "s", realistic_run(i))
            data = await storage.load_session("u", "s")
            assert data is not None
            return len(data.runs)
        finally:
            await storage.aclose()

    assert [asyncio.run(use(i)) for i in range(3)] == [1, 2, 3]


def test_merge_state_keeps_one_sided_changes_and_names_clashes() -> None:
    base = {"files": {"/a": "a", "/gone": "x"}, "todos": ["1"], "n": 1}
    mine = {"files": {"/a": "a", "/b": "b"}, "todos": ["1", "2"], "n": 1}
    theirs = {"files": {"/a": "a", "/gone": "x", "/c": "c"}, "todos": ["1", "3"], "n": 2}
    merged, clashes = merge_state(base, mine, theirs)
    assert merged == {"files": {"/a": "a", "/c": "c", "/b": "b"}, "todos": ["1", "2"], "n": 2}
    assert clashes == ["/todos"]
    assert merge_state({"k": 1}, {}, {"k": 2})[1] == ["/k"]  # deleted here, changed there
    assert merge_state({"k": 1}, {}, {"k": 1}) == ({}, [])  # deleted here only
    assert merge_state({}, {"f": {"/x": 1}}, {"f": {"/y": 2}}) == ({"f": {"/y": 2, "/x": 1}}, [])
    assert merge_state(None, "mine", "theirs") == ("mine", ["/"])
