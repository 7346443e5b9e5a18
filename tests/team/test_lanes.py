"""The lanes runtime end to end over real HTTP (``agent_runtime = "lanes"``, commands on the
server in bubblewrap): the talk's scenario. A student asks for a sort; while its lane runs a
long command the student writes "wait, use merge sort instead": the lane is interrupted, its
command stopped, its intent changed, and it finishes with merge sort; a question in between is
answered at once. The course's model is a scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agentica.messages import AssistantMessage
from agentica.testing import FakeOpenAIServer, call, tool_calls
from tests.team.server import client, serve_team, sqlite_settings
from tests.team.server import message_text as _text
from tests.team.test_sessions import ended, make_class, new_session, read_events, send

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"
)

MERGE_SORT = "def merge_sort(xs):\n    return sorted(xs)  # the scripted model's merge sort\n"


def _route(said: str) -> dict[str, Any]:
    if "merge sort instead" in said:
        return {"to": "interrupt", "lane": "L1", "intent": "", "answer": ""}
    if "git status" in said:
        return {"to": "answer", "lane": "", "intent": "", "answer": "It lists changed files."}
    return {"to": "new_lane", "lane": "", "intent": "implement a sort", "answer": ""}


def _lane(messages: list[dict[str, Any]]) -> AssistantMessage | str:
    last = messages[-1]
    if last["role"] == "tool":
        done = {"start_command": "Started; I wait for it.", "lane_done": "Finished."}
        for message in reversed(messages):
            for tool_call in message.get("tool_calls") or ():
                if tool_call["id"] == last.get("tool_call_id"):
                    name = tool_call["function"]["name"]
                    if name == "write_file":
                        return tool_calls(call("lane_done", summary="wrote /merge_sort.py"))
                    return done.get(name, "ok")
        return "ok"
    said = _text(last)
    if "merge sort" in said:
        return tool_calls(call("write_file", path="/merge_sort.py", content=MERGE_SORT))
    return tool_calls(call("start_command", command="sleep 60; echo slow sort done"))


def scripted(body: dict[str, Any]) -> AssistantMessage | str:
    """Router, interruption handler and lane, told apart by their instructions."""
    messages = body["messages"]
    system = _text(messages[0])
    if "route a student's messages" in system:
        return json.dumps(_route(_text(messages[-1])))
    if "was interrupted" in system:
        return json.dumps({"intent": "implement merge sort", "cancel": ["op1"], "terminate": ""})
    return _lane(messages)


def _operation_started(event: dict[str, Any]) -> bool:
    return bool(event["data"].get("kind") == "operation_started")


def _lane_events(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == "lane" and e["data"].get("kind") == kind]


async def test_the_talks_scenario_over_http(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, agent_runtime="lanes", server_commands=True)
    async with FakeOpenAIServer(scripted) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            ask = await send(ann, session_id, "implement a sort for the numbers in data.txt")
            await read_events(ann, session_id, until=_operation_started)
            change = await send(ann, session_id, "wait, use merge sort instead")
            question = await send(ann, session_id, "what does git status do?")
            seqs = {ask["seq"], change["seq"], question["seq"]}
            finished: dict[int, str] = {}

            def all_ended(event: dict[str, Any]) -> bool:
                data = event["data"]
                if event["kind"] == "status" and data.get("event") == "run_ended":
                    finished[data["message_seq"]] = data["state"]
                return seqs <= finished.keys()

            events = await read_events(ann, session_id, until=all_ended, timeout=50)
        workspace = tmp_path / "workspaces" / session_id
        assert (await asyncio.to_thread((workspace / "merge_sort.py").read_text)) == MERGE_SORT
        records = await team.audit.search(course_id=c.course, kind="operation_ended")

    assert finished == {ask["seq"]: "done", change["seq"]: "done", question["seq"]: "done"}
    (answer,) = _lane_events(events, "answer")
    assert answer == {"kind": "answer", "message_seq": question["seq"],
                      "text": "It lists changed files."}  # fmt: skip
    (op_started,) = _lane_events(events, "operation_started")
    (op_ended,) = _lane_events(events, "operation_ended")
    assert op_started["command"].startswith("sleep 60")
    assert op_ended["status"] == "stopped"  # cancelled by the interruption, not waited for
    (ended,) = _lane_events(events, "lane_ended")
    assert (ended["lane"], ended["reason"]) == ("L1", "done")
    assert ended["summary"] == "wrote /merge_sort.py"
    moves = [e["event"]["type"] for e in _lane_events(events, "event")]
    interrupted = moves.index("interruption_handled")
    assert moves.index("operation_failed") > interrupted  # stopped after the decision
    assert [r.data["op"] for r in records] == ["op1"]


def _run_started(event: dict[str, Any]) -> bool:
    return bool(event["data"].get("event") == "run_started")


def _echo(body: dict[str, Any]) -> str:
    return "noted: " + _text(body["messages"][-1])[:80]


@pytest.mark.parametrize(
    ("server", "session", "runs"),
    [("serial", "", 3), ("batch", "", 2), ("serial", "batch", 2), ("batch", "serial", 3)],
)
async def test_serial_and_batch_runtimes(
    tmp_path: Path, server: str, session: str, runs: int
) -> None:
    """Three messages, the last two sent while the first runs (the model takes 0.5 s): serial
    runs the agent three times, batch twice, the last two messages together; a session's own
    choice of runtime wins over the server's."""
    runtime = session or server
    settings = sqlite_settings(tmp_path, agent_runtime=server)
    async with FakeOpenAIServer(_echo, latency=0.5) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            body = {"course_id": c.course, "runtime": session}
            async with ann.post("/api/sessions", json=body) as r:
                assert r.status == 201, await r.text()
                created = await r.json()
            assert created["runtime"] == session
            session_id = created["id"]
            await send(ann, session_id, "first")
            await read_events(ann, session_id, until=_run_started)
            await send(ann, session_id, "second")
            await send(ann, session_id, "third")
            ended: dict[int, str] = {}

            def all_ended(event: dict[str, Any]) -> bool:
                if event["data"].get("event") == "run_ended":
                    ended[event["data"]["message_seq"]] = event["data"]["state"]
                return len(ended) == 3

            await read_events(ann, session_id, until=all_ended)
    assert sorted(ended.values()) == ["done"] * 3
    asked = [_text(body["messages"][-1]) for body in model.requests]
    assert len(asked) == runs
    if runtime == "batch":
        assert asked == ["first", "second\n\nthird"]
    else:
        assert asked == ["first", "second", "third"]


async def test_a_teacher_guides_a_students_agent(tmp_path: Path) -> None:
    """A teacher of the course sends the agent a message in a student's session: queued like
    the student's, the agent told who speaks, audited with the teacher as the actor; nobody
    else may."""
    async with (
        FakeOpenAIServer(_echo) as model,
        serve_team(sqlite_settings(tmp_path)) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
        path = f"/api/sessions/{session_id}/teacher-messages"
        body = {"text": "try writing a test first"}
        for who, status in ((c.ann, 403), (c.bob, 404), (c.other_teacher, 404)):
            async with client(url, who) as other, other.post(path, json=body) as r:
                assert r.status == status, (who, await r.text())
        async with client(url, c.teacher) as teacher, teacher.post(path, json=body) as r:
            assert r.status == 202, await r.text()
            seq = (await r.json())["seq"]
        async with client(url, c.ann) as ann:
            await read_events(ann, session_id, until=ended(seq))
        records = await team.audit.search(course_id=c.course, kind="instruction")
    assert _text(model.requests[-1]["messages"][-1]) == (
        "The student's teacher says: try writing a test first"
    )
    (record,) = records
    assert record.data["role"] == "teacher" and record.actor_id != c.ann_id


def _failing_lane(body: dict[str, Any]) -> Any:
    """Routes to a new lane whose model then fails (HTTP 400: not retried)."""
    from agentica.testing import HTTPFault

    system = _text(body["messages"][0])
    if "route a student's messages" in system:
        return json.dumps({"to": "new_lane", "lane": "", "intent": "build", "answer": ""})
    return HTTPFault(400, {"error": {"message": "the model refuses this request"}})


async def test_a_failing_lane_ends_failed_and_the_session_goes_on(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, agent_runtime="lanes")
    async with (
        FakeOpenAIServer(_failing_lane) as model,
        serve_team(settings) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            states = []
            for text in ("build it", "and again"):  # the loop is free after a failure
                seq = (await send(ann, session_id, text))["seq"]
                events = await read_events(ann, session_id, until=ended(seq))
                states.append(events[-1]["data"]["state"])
    assert states == ["failed", "failed"]
    failed = [e["data"] for e in events if e["data"].get("kind") == "lane_ended"]
    assert failed and failed[-1]["reason"].startswith("failed:")
    assert "refuses" in failed[-1]["reason"]


async def _slow_essay(body: dict[str, Any]) -> Any:
    """A lane whose first step hangs in its model call (an essay that takes 60 s), unless
    its task became a haiku."""
    messages = body["messages"]
    system = _text(messages[0])
    said = _text(messages[-1])
    if "route a student's messages" in system:
        if "haiku" in said:
            return json.dumps({"to": "interrupt", "lane": "L1", "intent": "", "answer": ""})
        return json.dumps({"to": "new_lane", "lane": "", "intent": "an essay", "answer": ""})
    if "was interrupted" in system:
        return json.dumps({"intent": "write a haiku", "cancel": [], "terminate": ""})
    if messages[-1]["role"] == "tool":
        return "Finished."
    if "haiku" in said:
        return tool_calls(call("lane_done", summary="a haiku about sorting"))
    await asyncio.sleep(60)
    return "an essay"


async def test_an_interruption_stops_the_step_in_progress(tmp_path: Path) -> None:
    """The lane's model call hangs; the student's interruption stops that step at once, the
    lane takes the new intent and finishes."""
    settings = sqlite_settings(tmp_path, agent_runtime="lanes")
    async with FakeOpenAIServer(_slow_essay) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            first = (await send(ann, session_id, "write me a long essay"))["seq"]
            await read_events(ann, session_id, until=_routed_new)  # the step begins
            second = (await send(ann, session_id, "stop, a haiku instead"))["seq"]
            ended: dict[int, str] = {}

            def both(event: dict[str, Any]) -> bool:
                if event["data"].get("event") == "run_ended":
                    ended[event["data"]["message_seq"]] = event["data"]["state"]
                return {first, second} <= ended.keys()

            events = await read_events(ann, session_id, until=both, timeout=30)
    assert ended == {first: "done", second: "done"}
    moves = [e["data"]["event"]["type"] for e in events if e["data"].get("kind") == "event"]
    assert moves.index("interruption_handled") > moves.index("lane_step_done")
    (lane_end,) = [e["data"] for e in events if e["data"].get("kind") == "lane_ended"]
    assert lane_end["summary"] == "a haiku about sorting"


def _routed_new(event: dict[str, Any]) -> bool:
    data = event["data"]
    return bool(data.get("kind") == "event" and data["event"].get("type") == "routed")


def _empty_answer(body: dict[str, Any]) -> Any:
    """A router that says "answer" but gives no answer (a small model's slip); the lane
    answers."""
    messages = body["messages"]
    if "route a student's messages" in _text(messages[0]):
        return json.dumps({"to": "answer", "lane": "", "intent": "", "answer": " "})
    if messages[-1]["role"] == "tool":
        return "Finished."
    return tool_calls(call("lane_done", summary="git status lists the changed files"))


async def test_a_routers_empty_answer_goes_to_a_lane(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path, agent_runtime="lanes")
    async with (
        FakeOpenAIServer(_empty_answer) as model,
        serve_team(settings) as (url, team),
    ):
        c = await make_class(team, model.base_url)
        async with client(url, c.ann) as ann:
            session_id = await new_session(ann, c.course)
            seq = (await send(ann, session_id, "what does git status do?"))["seq"]
            events = await read_events(ann, session_id, until=ended(seq))
    assert not _lane_events(events, "answer")
    ended_lanes = _lane_events(events, "lane_ended")
    assert ended_lanes and "changed files" in ended_lanes[0]["summary"]
    assert events[-1]["data"]["state"] == "done"


def _two_commands(body: dict[str, Any]) -> Any:
    """A lane that starts a long command; told that op1 did not finish, it starts another;
    told that op2 did not finish, it is done."""
    messages = body["messages"]
    system = _text(messages[0])
    if "route a student's messages" in system:
        return json.dumps({"to": "new_lane", "lane": "", "intent": "run the tests", "answer": ""})
    last = messages[-1]
    if last["role"] == "tool":
        return "waiting for the command"
    said = _text(last)
    if "op2 did not finish" in said:
        return tool_calls(call("lane_done", summary="both commands were stopped"))
    if "op1 did not finish" in said:
        return tool_calls(call("start_command", command="sleep 61"))
    return tool_calls(call("start_command", command="sleep 60"))


def _snapshots(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [e["data"]["lanes"] for e in events if e["kind"] == "lane" and "lanes" in e["data"]]


def _running(op: str) -> Any:
    """Until a lanes snapshot shows ``op`` running."""

    def check(event: dict[str, Any]) -> bool:
        lanes = event["data"].get("lanes") or []
        return any(o["id"] == op and o["status"] == "running"
                   for lane in lanes for o in lane["operations"])  # fmt: skip

    return check


async def test_a_course_in_lanes_and_one_command_stopped_while_the_lane_goes_on(
    tmp_path: Path,
) -> None:
    """The teacher sets the course's runtime to lanes, so a new session is in lanes (the server
    runs serial). Its lane runs a long command: the teacher stops it, the lane hears and starts
    another, the student stops that one and the lane finishes. Each lane event carries the
    lanes' snapshot when they changed; the events read as JSON; stopping is audited, refused
    with 409 for an operation that is not running or a session not in lanes."""
    settings = sqlite_settings(tmp_path, server_commands=True)
    async with FakeOpenAIServer(_two_commands) as model, serve_team(settings) as (url, team):
        c = await make_class(team, model.base_url)
        course = f"/api/courses/{c.course}"
        async with client(url, c.teacher) as teacher, client(url, c.ann) as ann:
            for body, status in (({"runtime": "fast"}, 422), ({"runtime": None}, 400)):
                async with teacher.patch(course, json=body) as r:
                    assert r.status == status, await r.text()
            async with ann.patch(course, json={"runtime": "lanes"}) as r:
                assert r.status == 403
            async with teacher.patch(course, json={"runtime": "lanes"}) as r:
                assert r.status == 200 and (await r.json())["runtime"] == "lanes"
            async with ann.get(course) as r:
                assert (await r.json())["runtime"] == "lanes"
            async with ann.post("/api/sessions", json={"course_id": c.course}) as r:
                created = await r.json()
            assert created["runtime"] == "lanes"
            session_id = created["id"]
            serial = {"course_id": c.course, "runtime": "serial"}
            async with ann.post("/api/sessions", json=serial) as r:
                serial_id = (await r.json())["id"]

            ask = await send(ann, session_id, "run the tests")
            await read_events(ann, session_id, until=_running("op1"))
            ops = f"/api/sessions/{session_id}/operations"
            for who, status in ((c.bob, 404), (c.other_teacher, 404)):
                async with client(url, who) as caller, caller.post(f"{ops}/op1/cancel") as r:
                    assert r.status == status, await r.text()
            async with ann.post(f"{ops}/op9/cancel") as r:
                assert r.status == 409 and "op9" in (await r.json())["error"]["message"]
            async with ann.post(f"/api/sessions/{serial_id}/operations/op1/cancel") as r:
                assert r.status == 409 and "serial" in (await r.json())["error"]["message"]
            async with teacher.post(f"{ops}/op1/cancel") as r:
                assert r.status == 202, await r.text()
                assert await r.json() == {"session_id": session_id, "op_id": "op1",
                                          "cancelled": True}  # fmt: skip
            await read_events(ann, session_id, until=_running("op2"))
            async with ann.post(f"{ops}/op1/cancel") as r:
                assert r.status == 409 and "failed" in (await r.json())["error"]["message"]
            async with ann.post(f"{ops}/op2/cancel") as r:
                assert r.status == 202, await r.text()
            events = await read_events(ann, session_id, until=ended(ask["seq"]), timeout=50)
            log = f"/api/sessions/{session_id}/events/log"
            async with ann.get(log, params={"limit": 500}) as r:  # the same events as JSON
                assert r.status == 200, await r.text()
                logged = await r.json()
        cancels = await team.audit.search(course_id=c.course, kind="operation_cancel_requested")
        changes = await team.audit.search(course_id=c.course, kind="course_changed")
        teacher_id = (await team.accounts.principal_for_token(c.teacher)).user_id

    assert events[-1]["data"]["state"] == "done"
    assert [e["seq"] for e in logged] == [e["seq"] for e in events]
    assert {e["kind"] for e in logged} == {"message", "status", "lane"}
    stopped = _lane_events(events, "operation_ended")
    assert [(e["op"], e["status"]) for e in stopped] == [("op1", "stopped"), ("op2", "stopped")]
    asked = _lane_events(events, "operation_cancel_requested")
    assert [(e["op"], e["reason"]) for e in asked] == [
        ("op1", "cancelled by the teacher"), ("op2", "cancelled by the student")
    ]  # fmt: skip
    (lane_end,) = _lane_events(events, "lane_ended")
    assert (lane_end["reason"], lane_end["summary"]) == ("done", "both commands were stopped")
    told = [_text(b["messages"][-1]) for b in model.requests if b["messages"][-1]["role"] == "user"]
    assert any("op1 did not finish: stopped: cancelled by the teacher" in t for t in told), told

    snapshots = _snapshots(events)
    assert snapshots[0] == [{"id": "L1", "intent": "run the tests", "status": "working",
                             "active": True, "created": ask["seq"], "termination": "",
                             "operations": []}]  # fmt: skip
    first_op = next(s[0]["operations"][0] for s in snapshots if s[0]["operations"])
    assert first_op == {"id": "op1", "what": "sleep 60", "executor": "server",
                        "status": "running", "progress": ""}  # fmt: skip
    assert all(a != b for a, b in itertools.pairwise(snapshots))  # changes only
    (last,) = snapshots[-1]
    assert (last["status"], last["active"], last["termination"]) == ("ended", False, "done")
    assert [(o["id"], o["status"]) for o in last["operations"]] == [
        ("op1", "failed"), ("op2", "failed")
    ]  # fmt: skip

    assert [(r.actor_id, r.data["op"]) for r in cancels] == [
        (teacher_id, "op1"), (c.ann_id, "op2")
    ]  # fmt: skip
    assert [r.data.get("runtime") for r in changes if "runtime" in r.data["fields"]] == ["lanes"]
