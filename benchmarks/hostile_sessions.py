"""Hostile probe: several agents writing one stored session at once (issue 16, lost state).

``uv run python benchmarks/hostile_sessions.py`` (offline; PostgreSQL only where installed).

Per store (memory, SQLite, JSON files, PostgreSQL): WRITERS agents, each with its own storage
object (its own connections; in-memory: one shared object), run ROUNDS runs on the same
``(user, session)`` at the same time. Each run writes a file of its own into the session state
(``state["files"]``, the state backend's files: mergeable) and every second run also appends an
entry to a shared list (``state["log"]``, a value both sides change: a conflict). A run whose save
raises ``SessionConflictError`` is retried (the agent reloads the session first).

Counted per store: saves attempted, conflicts raised (typed, carrying the run), and failures:
a save reported successful whose run, file or list entry is missing from the session afterwards
(a silent loss), or any other exception. The probe also repeats SQLite with the revision check
switched off (every save unconditional, how sessions were saved before) and names, in the
SQLite row's text, the losses the check prevents (not counted as failures: it is the baseline).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, RunContext, tool  # noqa: E402
from agentica.errors import SessionConflictError  # noqa: E402
from agentica.storage import (  # noqa: E402
    InMemoryStorage,
    JSONFileStorage,
    RunRecord,
    SQLiteStorage,
    SQLStorage,
    Storage,
    open_storage,
)
from agentica.testing import ScriptedModel, call, tool_calls  # noqa: E402
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres  # noqa: E402

WRITERS = 4
ROUNDS = 6
MAX_RETRIES = 20
USER, SESSION = "probe-user", "shared-session"


@tool
async def note(ctx: RunContext[Any], path: str, entry: str = "") -> str:
    """Write a file into the session state and optionally append an entry to the shared log.

    Args:
        path: the file.
        entry: a log entry ("" for none).
    """
    state = ctx.agent.memory.state  # type: ignore[union-attr]
    await asyncio.sleep(random.uniform(0, 0.01))  # let the writers interleave
    state.setdefault("files", {})[path] = {"content": f"by {path}", "modified": 0.0}
    if entry:
        state["log"] = [*state.get("log", []), entry]
    return "noted"


class UncheckedSQLite(SQLiteStorage):
    """SQLite with the revision check switched off: every save is unconditional (as before)."""

    async def append_run(
        self,
        user_id: str,
        session_id: str,
        run: RunRecord,
        *,
        title: str | None = None,
        summary: str | None = None,
        state: Mapping[str, Any] | None = None,
        expected_revision: int | None = None,
    ) -> int:
        return await super().append_run(
            user_id, session_id, run, title=title, summary=summary, state=state
        )


async def _writer(
    number: int, storage: Storage, saved: list[tuple[str, str, str]]
) -> dict[str, int]:
    counts = {"attempts": 0, "conflicts": 0, "errors": 0}
    agent = Agent(model=ScriptedModel([]), tools=[note], storage=storage, user_id=USER,
                  session_id=SESSION)  # fmt: skip
    for round_ in range(ROUNDS):
        path = f"/w{number}-r{round_}.md"
        entry = f"w{number}-r{round_}" if round_ % 2 else ""
        for _ in range(MAX_RETRIES):
            agent.model = ScriptedModel([tool_calls(call("note", path=path, entry=entry)), "ok"])
            counts["attempts"] += 1
            try:
                response = await agent.run(f"round {round_}")
            except SessionConflictError:
                counts["conflicts"] += 1
                continue
            except Exception:  # an untyped failure is a finding
                counts["errors"] += 1
                break
            saved.append((response.run_id, path, entry))
            break
    return counts


async def _probe(name: str, make: Callable[[], Storage], shared: bool) -> dict[str, Any]:
    stores = [make()] if shared else [make() for _ in range(WRITERS)]
    saved: list[tuple[str, str, str]] = []
    try:
        counts = await asyncio.gather(
            *(_writer(n, stores[n % len(stores)], saved) for n in range(WRITERS))
        )
        data = await stores[0].load_session(USER, SESSION)
    finally:
        for store in stores:
            await store.aclose()
    return _row(name, data, saved, counts, 0, processes=False)


def _row(
    name: str,
    data: Any,
    saved: list[tuple[str, str, str]],
    counts: list[dict[str, int]],
    crashed: int,
    *,
    processes: bool,
) -> dict[str, Any]:
    """The probe's row: saves attempted, silent losses and untyped failures, conflicts."""
    run_ids = {run.run_id for run in data.runs} if data else set()
    files = data.state.get("files", {}) if data else {}
    log = data.state.get("log", []) if data else []
    lost = sum(
        run_id not in run_ids or path not in files or (entry != "" and entry not in log)
        for run_id, path, entry in saved
    )
    attempts = sum(c["attempts"] for c in counts)
    conflicts = sum(c["conflicts"] for c in counts)
    errors = sum(c["errors"] for c in counts) + crashed
    who = "processes" if processes else "agents"
    return {
        "family": f"sessions: {name}",
        "attempts": attempts,
        "failures": lost + errors,
        "conflicts": conflicts,
        "lost": lost,
        "saved": len(saved),
        "what": (
            f"{WRITERS} {who} x {ROUNDS} runs on one session at once, each writing its own file "
            "into the session state, every 2nd also appending to a shared list; failure = a "
            "save reported successful whose run, file or entry is missing afterwards, or an "
            f"untyped exception; {conflicts} typed conflicts raised (and retried), "
            f"{len(saved)} runs saved"
        ),
    }


CHILD = """
import asyncio, json, pathlib, sys
sys.path.insert(0, sys.argv[3])
from agentica.storage import open_storage
from benchmarks.hostile_sessions import WRITERS, _writer

async def main(number, location, barrier):
    saved = []
    storage = open_storage(location)
    await storage.list_sessions("warm-up")  # opened (schema checked) before the start
    pathlib.Path(barrier, str(number)).touch()
    for _ in range(1200):  # start together (at most 60 s of waiting)
        if len(list(pathlib.Path(barrier).iterdir())) == WRITERS:
            break
        await asyncio.sleep(0.05)
    try:
        counts = await _writer(number, storage, saved)
    finally:
        await storage.aclose()
    print(json.dumps({"counts": counts, "saved": saved}))

asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[4]))
"""


async def _probe_processes(name: str, location: str) -> dict[str, Any]:
    """The probe with each writer in a process of its own (SQLite file, JSON directory)."""
    barrier = tempfile.mkdtemp(prefix="barrier-", dir=Path(location).parent)
    children = []
    for n in range(WRITERS):
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CHILD, str(n), location, str(ROOT), barrier,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        children.append(child)
    saved: list[tuple[str, str, str]] = []
    counts = []
    crashed = 0
    for child in children:
        out, err = await child.communicate()
        if child.returncode != 0:
            crashed += 1
            print(err.decode()[-2000:], file=sys.stderr)
            continue
        result = json.loads(out)
        counts.append(result["counts"])
        saved.extend(tuple(item) for item in result["saved"])
    storage = open_storage(location)
    try:
        data = await storage.load_session(USER, SESSION)
    finally:
        await storage.aclose()
    return _row(name, data, saved, counts, crashed, processes=True)


@contextlib.contextmanager
def _postgres() -> Iterator[Cluster | None]:
    if why_no_postgres():
        yield None
        return
    with throwaway_cluster() as cluster:
        cluster.create_database("probe")
        yield cluster


async def _run_all(tmp: Path, cluster: Cluster | None) -> list[dict[str, Any]]:
    probes: list[tuple[str, Callable[[], Storage], bool]] = [
        ("in-memory", InMemoryStorage, True),
        ("SQLite", lambda: SQLiteStorage(tmp / "probe.db"), False),
        ("JSON files", lambda: JSONFileStorage(tmp / "files"), False),
    ]
    if cluster is not None:
        probes.append(("PostgreSQL", lambda: SQLStorage(cluster.url("probe")), False))
    rows = [await _probe(name, make, shared) for name, make, shared in probes]
    rows.append(await _probe_processes("SQLite, 4 processes", str(tmp / "processes.db")))
    rows.append(await _probe_processes("JSON files, 4 processes", str(tmp / "process-files")))
    before = await _probe("before", lambda: UncheckedSQLite(tmp / "before.db"), False)
    rows[1]["what"] += (
        f"; the same with the revision check off (unconditional saves, as before): "
        f"{before['lost']} of {before['saved']} saved runs lost something"
    )
    for row in rows:
        del row["lost"], row["saved"]
    return rows


def run() -> list[dict[str, Any]]:
    random.seed(16)
    with tempfile.TemporaryDirectory(prefix="agentica-sessions-") as tmp, _postgres() as cluster:
        return asyncio.run(_run_all(Path(tmp), cluster))


if __name__ == "__main__":
    for row in run():
        print(row)
