"""The talk's scenario on the embedded model: ``uv run python demos/team_lanes.py`` (or
``make demo-lanes``).

The team service runs in this process on a temporary SQLite database with the ``lanes`` runtime
and the course's default model, the embedded local one. An ``agentica connect`` executor (in
bubblewrap when it is installed) serves a temporary workspace. A student asks for a sort
implementation tested by a long command. While the lane's command runs, the student writes
"wait, use merge sort instead", then asks an unrelated question. The demo prints what the agent
does as it happens, then the workspace. It needs no network: the model is on this machine, so a
run takes a few minutes on 2 cores. A small model does not always route or interrupt as a large
one would; what it did is printed, not assumed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica_team.connect import Executor  # noqa: E402
from agentica_team.principal import Principal  # noqa: E402
from tests.team.server import client, serve_team, sqlite_settings  # noqa: E402
from tests.team.test_sessions import new_session, send, sse  # noqa: E402

ASK = (
    "Write a function sort_numbers(xs) in sort.py that returns the list sorted, then test it "
    "by running the command: sleep 40 && python3 -c 'from sort import sort_numbers; "
    "print(sort_numbers([3, 1, 2]))'"
)
CHANGE = "wait, use merge sort instead"
QUESTION = "what does `git status` do?"


def _line(event: dict[str, Any]) -> str | None:
    """One readable line for the events worth showing."""
    data, kind = event["data"], event["kind"]
    if kind == "message":
        return f"student: {data.get('text')}"
    if kind == "status":
        return f"  [{data.get('event')} message {data.get('message_seq')}: {data.get('state')}]"
    if kind != "lane":
        return None
    what = data.get("kind")
    if what == "event":
        inner = data["event"]
        if inner["type"] in ("routed", "operation_started", "operation_completed",
                             "operation_failed", "interruption_handled"):  # fmt: skip
            detail = {k: v for k, v in inner.items() if k != "type" and v not in ("", [], None)}
            return f"  {inner['type']}: {json.dumps(detail)[:200]}"
        return None
    if what == "answer":
        return f"agent: {str(data.get('text', ''))[:400]}"
    if what in ("lane_ended", "lane_failed", "operation_ended"):
        return f"  {what}: {json.dumps({k: v for k, v in data.items() if k != 'kind'})[:200]}"
    return None


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="agentica-lanes-demo-") as tmp:
        home = Path(tmp)
        workspace = home / "laptop"
        workspace.mkdir()
        settings = sqlite_settings(home / "server", agent_runtime="lanes")
        async with serve_team(settings) as (url, team):
            course, token = await _classroom(team)
            executor = Executor(url, token, workspace, name="laptop",
                                sandbox=shutil.which("bwrap") is not None,
                                on_status=lambda _: None)  # fmt: skip
            connected = asyncio.create_task(executor.run())
            try:
                async with client(url, token) as ann:
                    return await _scenario(ann, course, workspace)
            finally:
                connected.cancel()
                await asyncio.gather(connected, return_exceptions=True)


async def _classroom(team: Any) -> tuple[str, str]:
    """A teacher's course on the server's model (the embedded one) and a student's token."""
    accounts = team.accounts
    teacher = await accounts.create_user("t@school.edu", role="teacher")
    owner = Principal(teacher.id, teacher.email, teacher.name, "teacher", "token")
    course = await accounts.create_course(owner, "demo")
    (ann,) = await accounts.add_students(course, [("ann@school.edu", "Ann")], actor=teacher.id)
    return course.id, ann.token


async def _scenario(ann: aiohttp.ClientSession, course: str, workspace: Path) -> int:
    session_id = await new_session(ann, course, "lanes demo")
    started = time.monotonic()
    first = await send(ann, session_id, ASK)
    asked = {first["seq"]}
    ended: set[int] = set()
    async with ann.get(f"/api/sessions/{session_id}/events", timeout=None) as r:
        async for event in sse(r.content):
            line = _line(event)
            if line:
                print(f"{time.monotonic() - started:6.1f}s {line}", flush=True)
            data = event["data"]
            if (
                event["kind"] == "lane"
                and data.get("kind") == "operation_started"
                and (len(asked) == 1)
            ):
                asked.add((await send(ann, session_id, CHANGE))["seq"])
                asked.add((await send(ann, session_id, QUESTION))["seq"])
            if event["kind"] == "status" and data.get("event") in ("run_ended", "run_interrupted"):
                ended.add(int(data["message_seq"]))
                if len(asked) == 1 and data["message_seq"] == first["seq"]:
                    print("(the lane ended before any command ran: sending the rest anyway)")
                    asked.add((await send(ann, session_id, CHANGE))["seq"])
                    asked.add((await send(ann, session_id, QUESTION))["seq"])
            if len(asked) == 3 and asked <= ended:
                break
            if time.monotonic() - started > 1200:
                print("(stopped after 20 minutes)")
                break
    print("\nThe workspace now:")
    print(await asyncio.to_thread(_files, workspace) or "(empty)")
    return 0


def _files(workspace: Path) -> str:
    return "\n".join(
        f"--- {path.relative_to(workspace)}\n{path.read_text(errors='replace')[:1500]}"
        for path in sorted(workspace.rglob("*"))
        if path.is_file()
    )


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
