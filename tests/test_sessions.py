"""Durable sessions through storage, capabilities' hooks, and the variable space."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from agentica import Agent, RunContext, tool
from agentica.deep import FileTools, StateBackend
from agentica.errors import SessionConflictError, StorageError, UsageError
from agentica.memory.variables import VariableSpace
from agentica.messages import Message, SystemMessage, ToolMessage, UserMessage
from agentica.models import ModelRequest
from agentica.run.approval import Decision, HumanApproval
from agentica.run.capability import Capability
from agentica.storage import InMemoryStorage, RunRecord, Variable, VariableInfo
from agentica.testing import FunctionModel, ScriptedModel, call, model_error, tool_calls


def user_texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


async def test_a_new_agent_with_the_same_ids_continues_the_conversation() -> None:
    storage = InMemoryStorage()
    first = Agent(model=ScriptedModel(["Hi Ada.", "Noted."]), storage=storage,
                  user_id="ada", session_id="chat-1")  # fmt: skip
    await first.run("I am Ada.")
    await first.run("I like tea.")
    model = ScriptedModel(["You are Ada and you like tea."])
    second = Agent(model=model, storage=storage, user_id="ada", session_id="chat-1")
    response = await second.run("Who am I?")
    assert response.content == "You are Ada and you like tea."
    assert user_texts(model.requests[0].messages) == ["I am Ada.", "I like tea.", "Who am I?"]
    data = await storage.load_session("ada", "chat-1")
    assert data is not None and [r.input for r in data.runs] == [
        "I am Ada.", "I like tea.", "Who am I?",
    ]  # fmt: skip
    assert data.info.title == "I am Ada."
    assert data.runs[-1].output == "You are Ada and you like tea."


async def test_runs_are_stored_with_tool_calls_and_failed_runs_too() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    storage = InMemoryStorage()
    model = ScriptedModel([tool_calls(call("add", a=2, b=3)), "5", model_error("down")])
    agent = Agent(model=model, tools=[add], storage=storage, session_id="s")
    await agent.run("2+3?")
    with pytest.raises(Exception, match="down"):
        await agent.run("again")
    data = await storage.load_session("default", "s")
    assert data is not None
    done, failed = data.runs
    assert done.status == "completed" and done.tool_calls[0].name == "add"
    assert done.tool_calls[0].content == "5" and done.tool_calls[0].status == "success"
    assert done.usage.requests == 2 and done.model == "scripted"
    assert failed.status == "failed" and "down" in (failed.error or "")


async def test_users_never_see_each_others_sessions() -> None:
    storage = InMemoryStorage()
    alice = Agent(model=ScriptedModel(["a"]), storage=storage, user_id="alice", session_id="s")
    await alice.run("alice's secret")
    model = ScriptedModel(["b"])
    bob = Agent(model=model, storage=storage, user_id="bob", session_id="s")
    await bob.run("hello")
    assert user_texts(model.requests[0].messages) == ["hello"]
    assert [s.session_id for s in await storage.list_sessions("bob")] == ["s"]
    assert (await storage.load_session("bob", "s")).runs[0].input == "hello"  # type: ignore[union-attr]


class Clock(Capability):
    """Shows the turn number in a per-turn slot and counts the hooks it saw."""

    name = "clock"

    def __init__(self) -> None:
        self.after_tools_calls: list[str] = []
        self.ended: list[str] = []

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        return "Keep time."

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        turn = ctx.state.get("turn", 0) + 1
        ctx.state["turn"] = turn
        return f"It is turn {turn}."

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[Any]) -> None:
        self.after_tools_calls.extend(c.name for c in calls)

    async def after_run(self, ctx: RunContext[Any], record: Any) -> None:
        self.ended.append(record.status)


async def test_capability_slots_are_replaced_each_turn_not_appended() -> None:
    @tool
    def ping() -> str:
        return "pong"

    clock = Clock()
    model = ScriptedModel([tool_calls("ping"), tool_calls("ping"), "done"])
    agent = Agent(model=model, tools=[ping], instructions="Be brief.", capabilities=[clock])
    await agent.run("go")
    for number, request in enumerate(model.requests, 1):
        systems = [m.content for m in request.messages if isinstance(m, SystemMessage)]
        assert systems == ["Be brief.\n\nKeep time.", f"It is turn {number}."]
    assert clock.after_tools_calls == ["ping", "ping"]
    assert clock.ended == ["completed"]
    stored = agent.memory.runs[0].messages
    assert not any(isinstance(m, SystemMessage) for m in stored)  # slots never enter history


# ----------------------------------------------------------------------------- variables


@tool
def read_report() -> str:
    """Read the quarterly report."""
    return "Q3 revenue was 4.2 M (up 12%)."


def refs(messages: Sequence[Message]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m, ToolMessage) and "[__ref: " in m.content:
            out.append(m.content.rsplit("[__ref: ", 1)[1].rstrip("]"))
    return out


async def test_tool_outputs_are_archived_and_cited_by_reference() -> None:
    def script(messages: list[Message], request: ModelRequest) -> Any:
        found = refs(messages)
        tools_seen = sum(isinstance(m, ToolMessage) for m in messages)
        if tools_seen == 0:
            return tool_calls("read_report")
        if tools_seen == 1:
            return tool_calls(call("var_get", key=found[0]))
        return f"Revenue grew 12% [{found[0]}]."

    storage = InMemoryStorage()
    model = FunctionModel(script)
    agent = Agent(model=model, tools=[read_report], capabilities=[VariableSpace()],
                  storage=storage, user_id="u", session_id="s")  # fmt: skip
    response = await agent.run("How did revenue do?")
    ref = refs(model.requests[1].messages)[0]
    assert ref.startswith("evidence.tool_call.")
    assert response.content == f"Revenue grew 12% [{ref}]."
    evidence = await storage.get_variable("u", "s", ref)
    assert evidence is not None
    assert evidence.value["tool"] == "read_report" and evidence.value["success"] is True
    assert evidence.value["output"] == "Q3 revenue was 4.2 M (up 12%)."
    # var_get(ref) gave the model the original output
    got = json.loads(response.tool_calls[1].content.rsplit("\n[__ref:", 1)[0])
    assert got["output"] == "Q3 revenue was 4.2 M (up 12%)."
    # the stored run remembers which evidence each call produced
    data = await storage.load_session("u", "s")
    assert data is not None and data.runs[0].tool_calls[0].ref == ref
    # the directory slot appears once evidence exists, and says how much there is
    slot = [m.content for m in model.requests[1].messages if isinstance(m, SystemMessage)][-1]
    assert "1 archived tool outputs under evidence.*" in slot


async def test_variables_tools_and_directory() -> None:
    model = ScriptedModel([
        tool_calls(call("var_set", key="totals", value={"north": 165}, summary="sales per region")),
        tool_calls(call("var_set", key="evidence.fake", value=1)),
        tool_calls(call("var_get", key="missing")),
        tool_calls(call("var_list")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[VariableSpace(archive=False)])
    response = await agent.run("go")
    outcomes = [(c.status, c.content) for c in response.tool_calls]
    assert outcomes[0][0] == "success"
    assert outcomes[1][0] == "error" and "cannot be changed" in outcomes[1][1]
    assert outcomes[2][0] == "error" and "var_list" in outcomes[2][1]
    assert outcomes[3] == ("success", "totals: sales per region (14 bytes)")
    slot = [m.content for m in model.requests[-1].messages if isinstance(m, SystemMessage)][-1]
    assert slot == "Variables (read with var_get):\n- totals: sales per region (14 bytes)"


class BrokenStorage(InMemoryStorage):
    """A storage whose variable writes fail (a full disk, an unreachable database)."""

    async def set_variable(self, *args: Any, **kwargs: Any) -> VariableInfo:
        raise StorageError("database unreachable")

    async def get_variable(self, *args: Any, **kwargs: Any) -> Variable | None:
        return None


@pytest.mark.parametrize("required", [True, False])
async def test_required_archiving_fails_unarchivable_calls(required: bool) -> None:
    model = ScriptedModel([tool_calls("read_report"), "done"])
    space = VariableSpace(storage=BrokenStorage(), require_archive=required)
    await Agent(model=model, tools=[read_report], capabilities=[space]).run("go")
    (result,) = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    if required:
        assert result.is_error and "could not be archived" in result.content
    else:
        assert result.content == "Q3 revenue was 4.2 M (up 12%)."  # unarchived, no ref


CRASHING_AGENT = """
import asyncio, sys
from agentica import Agent, tool
from agentica.storage import SQLiteStorage
from agentica.testing import ScriptedModel, tool_calls

@tool
async def slow() -> str:
    print("in tool", flush=True)
    await asyncio.sleep(60)
    return "never"

async def main():
    storage = SQLiteStorage(sys.argv[1])
    model = ScriptedModel(["first answer", tool_calls("slow"), "never"])
    agent = Agent(model=model, tools=[slow], storage=storage, user_id="u", session_id="s")
    await agent.run("first")
    print("first saved", flush=True)
    await agent.run("second, killed mid-run")

asyncio.run(main())
"""


async def test_killing_a_process_mid_run_leaves_the_session_consistent(tmp_path: Any) -> None:
    import asyncio
    import sys

    from agentica.storage import SQLiteStorage

    db = tmp_path / "crash.db"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHING_AGENT, str(db), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    lines = [await asyncio.wait_for(process.stdout.readline(), 60) for _ in range(2)]
    assert lines == [b"first saved\n", b"in tool\n"]
    process.kill()  # SIGKILL in the middle of the second run
    await process.wait()

    storage = SQLiteStorage(db)
    try:
        data = await storage.load_session("u", "s")
        assert data is not None
        assert [r.input for r in data.runs] == ["first"]  # the half-done run left no trace
        assert data.runs[0].status == "completed" and data.runs[0].output == "first answer"
        model = ScriptedModel(["resumed"])
        agent = Agent(model=model, storage=storage, user_id="u", session_id="s")
        assert (await agent.run("third")).content == "resumed"
        assert user_texts(model.requests[0].messages) == ["first", "third"]
    finally:
        await storage.aclose()


# ------------------------------------------------------ two writers of one stored session


def file_writer(content: dict[str, str], answer: str) -> ScriptedModel:
    """A model that writes each ``path: text`` of ``content`` with the file tools, then answers."""
    writes = [call("write_file", path=path, content=text) for path, text in content.items()]
    return ScriptedModel([tool_calls(*writes), answer])


def file_agent(storage: InMemoryStorage, content: dict[str, str], answer: str) -> Agent:
    """An agent of session ("u", "s") whose model writes ``content`` with the file tools, then
    answers ``answer``."""
    model = file_writer(content, answer)
    return Agent(model=model, tools=[FileTools()], storage=storage, user_id="u", session_id="s")


def stored_files(data: Any) -> dict[str, str]:
    return {path: entry["content"] for path, entry in data.state.get("files", {}).items()}


async def test_two_agents_writing_different_files_to_one_session_keep_both() -> None:
    """Both loaded the session before either saved: the second save merges (both runs, both
    files) instead of overwriting the first agent's files with its own copy of the state."""
    storage = InMemoryStorage()
    setup = file_agent(storage, {"/plan.md": "plan"}, "set up")
    await setup.run("set up")
    first = file_agent(storage, {"/a.md": "from A"}, "A done")
    second = file_agent(storage, {"/b.md": "from B"}, "B done")
    await first.load()
    await second.load()
    assert (await first.run("write a")).content == "A done"
    assert (await second.run("write b")).content == "B done"
    data = await storage.load_session("u", "s")
    assert data is not None
    assert stored_files(data) == {"/plan.md": "plan", "/a.md": "from A", "/b.md": "from B"}
    assert [r.input for r in data.runs] == ["set up", "write a", "write b"]
    # the second agent now holds the merged session and saves on top of it
    assert [r.input for r in second.memory.runs] == ["set up", "write a", "write b"]
    assert set(second.memory.state["files"]) == {"/plan.md", "/a.md", "/b.md"}
    second.model = ScriptedModel(["still here"])
    await second.run("again")
    again = await storage.load_session("u", "s")
    assert again is not None and len(again.runs) == 4 and len(stored_files(again)) == 3


async def test_a_backend_holding_the_state_dict_stays_saved_across_load_and_merge() -> None:
    """The documented ``StateBackend(agent.memory.state.setdefault("files", {}))``: loading the
    session and merging another writer's save update that dict in place, so the backend's later
    writes are still the session's (not a detached copy's, silently never saved)."""
    storage = InMemoryStorage()
    await file_agent(storage, {"/plan.md": "plan"}, "set up").run("set up")
    held: dict[str, Any] = {}
    agent = Agent(model=ScriptedModel([]), tools=[FileTools(backend=StateBackend(held))],
                  storage=storage, user_id="u", session_id="s")  # fmt: skip
    assert agent.memory.state.setdefault("files", held) is held  # before the load
    await agent.load()
    assert agent.memory.state["files"] is held and set(held) == {"/plan.md"}
    await file_agent(storage, {"/other.md": "other"}, "other done").run("other")  # concurrent
    agent.model = file_writer({"/a.md": "from A"}, "A done")
    await agent.run("write a")  # its save conflicts and merges
    assert agent.memory.state["files"] is held
    assert set(held) == {"/plan.md", "/other.md", "/a.md"}
    agent.model = file_writer({"/later.md": "later"}, "later done")
    await agent.run("write later")  # through the held backend, after the merge
    data = await storage.load_session("u", "s")
    assert data is not None
    assert stored_files(data) == {
        "/plan.md": "plan", "/other.md": "other", "/a.md": "from A", "/later.md": "later",
    }  # fmt: skip


async def test_two_agents_changing_the_same_file_get_a_typed_error_carrying_the_run() -> None:
    storage = InMemoryStorage()
    first = file_agent(storage, {"/notes.md": "A's notes"}, "A done")
    second = file_agent(storage, {"/notes.md": "B's notes"}, "B done")
    await first.load()
    await second.load()
    await first.run("write notes")
    with pytest.raises(SessionConflictError) as refused:
        await second.run("write other notes")
    error = refused.value
    assert (error.user_id, error.session_id) == ("u", "s")
    assert "/files//notes.md" in str(error) and "another agent or process" in str(error)
    assert "run() again" in str(error) and "session_id" in str(error)
    assert isinstance(error.run, RunRecord) and error.run.output == "B done"  # nothing is lost
    data = await storage.load_session("u", "s")
    assert data is not None and stored_files(data) == {"/notes.md": "A's notes"}
    assert [r.input for r in data.runs] == ["write notes"]
    # the agent reloads the stored session before its next run: a retry sees A's notes
    second.model = ScriptedModel([
        tool_calls(call("read_file", path="/notes.md")),  # (read before it is replaced)
        tool_calls(call("write_file", path="/notes.md", content="A's notes + B's")),
        "merged by hand",
    ])  # fmt: skip
    await second.run("write other notes")
    data = await storage.load_session("u", "s")
    assert data is not None and stored_files(data) == {"/notes.md": "A's notes + B's"}
    assert [r.input for r in data.runs] == ["write notes", "write other notes"]


async def test_a_paused_run_resumed_by_two_agents_is_saved_once() -> None:
    """Resuming is not mergeable: the second resume of the same paused run is refused."""
    storage = InMemoryStorage()

    @tool
    def deploy() -> str:
        return "deployed"

    def agent(answer: str) -> Agent:
        return Agent(model=ScriptedModel([tool_calls("deploy"), answer]), tools=[deploy],
                     capabilities=[HumanApproval({"deploy": True})], storage=storage, user_id="u",
                     session_id="s")  # fmt: skip

    paused = await agent("unused").run("deploy it")
    assert paused.stop_reason == "paused"
    first, second = agent("unused"), agent("unused")
    first.model = ScriptedModel(["first resumed"])
    second.model = ScriptedModel(["second resumed"])
    decisions = {c.call_id: Decision.approve() for c in await first.pending()}
    await second.load()
    await first.resume(decisions)
    with pytest.raises(SessionConflictError) as refused:
        await second.resume(decisions)
    assert isinstance(refused.value.run, RunRecord)
    assert refused.value.run.output == "second resumed"
    data = await storage.load_session("u", "s")
    assert data is not None and [r.output for r in data.runs][-1] == "first resumed"
    assert len(data.runs) == 2


TWO_PROCESS_WRITER = """
import asyncio, json, pathlib, sys
from agentica import Agent, tool
from agentica.deep import FileTools
from agentica.errors import SessionConflictError
from agentica.storage import open_storage
from agentica.testing import ScriptedModel, call, tool_calls

me, peer, location, path, content, barrier = sys.argv[1:]

@tool
async def wait_for_peer() -> str:
    \"\"\"Wait until the other process is in its run too.\"\"\"
    pathlib.Path(barrier, me).touch()
    for _ in range(600):
        if pathlib.Path(barrier, peer).exists():
            return "both running"
        await asyncio.sleep(0.05)
    return "alone"

async def main():
    storage = open_storage(location)
    model = ScriptedModel([tool_calls(call("write_file", path=path, content=content)),
                           tool_calls("wait_for_peer"), "done by " + me])
    agent = Agent(model=model, tools=[FileTools(), wait_for_peer], storage=storage,
                  user_id="u", session_id="shared")
    try:
        response = await agent.run("write " + path)
        outcome = {"saved": response.content}
    except SessionConflictError as error:
        outcome = {"conflict": str(error), "output": error.run.output}
    await storage.aclose()
    print(json.dumps(outcome), flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("kind", "same_file"),
    [("sqlite", False), ("sqlite", True), ("jsonfiles", False)],
    ids=["sqlite-different-files", "sqlite-same-file", "jsonfiles-different-files"],
)
async def test_two_processes_on_one_session_merge_or_get_a_typed_error(
    tmp_path: Any, kind: str, same_file: bool
) -> None:
    """Two processes run an agent on the same stored session at the same time (both are inside
    their run, having loaded the session, before either saves), each writing a file."""
    import asyncio
    import sys

    from agentica.storage import open_storage

    location = str(tmp_path / ("shared.db" if kind == "sqlite" else "shared-files"))
    (tmp_path / "barrier").mkdir()
    paths = {"A": "/notes.md" if same_file else "/a.md", "B": "/notes.md" if same_file else "/b.md"}
    processes = []
    for me, peer in (("A", "B"), ("B", "A")):
        arguments = [me, peer, location, paths[me], f"written by {me}", str(tmp_path / "barrier")]
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", TWO_PROCESS_WRITER, *arguments,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        processes.append(process)
    outcomes = {}
    for me, process in zip("AB", processes, strict=True):
        out, err = await asyncio.wait_for(process.communicate(), 120)
        assert process.returncode == 0, err.decode()
        outcomes[me] = json.loads(out)
    storage = open_storage(location)
    try:
        data = await storage.load_session("u", "shared")
    finally:
        await storage.aclose()
    assert data is not None
    files = stored_files(data)
    saved = sorted(me for me in "AB" if "saved" in outcomes[me])
    if not same_file:  # merged: both runs, both files
        assert saved == ["A", "B"], outcomes
        assert files == {"/a.md": "written by A", "/b.md": "written by B"}
        assert sorted(r.output or "" for r in data.runs) == ["done by A", "done by B"]
        return
    (winner,) = saved  # the other one was told, with its run
    (loser,) = set("AB") - set(saved)
    assert "/files//notes.md" in outcomes[loser]["conflict"], outcomes
    assert outcomes[loser]["output"] == f"done by {loser}"
    assert files == {"/notes.md": f"written by {winner}"}
    assert [r.output for r in data.runs] == [f"done by {winner}"]


# -- branching: fork at a turn, rewind -------------------------------------------------------


def files_of(state: dict[str, Any]) -> dict[str, str]:
    return {path: entry["content"] for path, entry in state.get("files", {}).items()}


async def test_an_agent_forks_at_a_turn_and_both_branches_go_on() -> None:
    storage = InMemoryStorage()
    agent = file_agent(storage, {"/paris.md": "Paris"}, "planned Paris")
    await agent.run("plan Paris")
    agent.model = file_writer({"/rome.md": "Rome"}, "planned Rome")
    await agent.run("make it Rome")
    twin = await agent.fork(at=1, session_id="s-paris")
    assert twin.session_id == "s-paris" and twin.tools == agent.tools
    assert [r.input for r in twin.memory.runs] == ["plan Paris"]
    assert files_of(twin.memory.state) == {"/paris.md": "Paris"}  # as it was after run 1
    twin.model = model = file_writer({"/days.md": "3 days"}, "three days")
    await twin.run("three days in Paris")
    assert user_texts(model.requests[0].messages) == ["plan Paris", "three days in Paris"]
    agent.model = ScriptedModel(["still Rome"])
    await agent.run("and?")
    rome = await storage.load_session("u", "s")
    paris = await storage.load_session("u", "s-paris")
    assert rome is not None and paris is not None
    assert [r.input for r in rome.runs] == ["plan Paris", "make it Rome", "and?"]
    assert [r.input for r in paris.runs] == ["plan Paris", "three days in Paris"]
    assert stored_files(rome) == {"/paris.md": "Paris", "/rome.md": "Rome"}
    assert stored_files(paris) == {"/paris.md": "Paris", "/days.md": "3 days"}
    whole = await agent.fork()  # all runs, a new id
    assert [r.input for r in whole.memory.runs] == [r.input for r in rome.runs]
    tree = await storage.branches("u", "s-paris")
    assert {b.session_id: (b.info.parent_id, b.info.forked_at) for _, b in tree.walk()} == {
        "s": (None, None), "s-paris": ("s", 1), whole.session_id: ("s", 3),
    }  # fmt: skip


async def test_an_agent_rewinds_and_keeps_the_dropped_turns_in_a_branch() -> None:
    storage = InMemoryStorage()
    agent = file_agent(storage, {"/paris.md": "Paris"}, "Paris")
    await agent.run("plan Paris")
    agent.model = file_writer({"/rome.md": "Rome"}, "Rome")
    await agent.run("make it Rome")
    other = file_agent(storage, {"/notes.md": "from the other agent"}, "noted")
    await other.load()  # it holds the session as it was before the rewind
    branch = await agent.rewind(to=1)
    assert (branch.session_id, branch.parent_id, branch.forked_at, branch.runs) == (
        "s.2", "s", 1, 2,
    )  # fmt: skip
    assert [r.input for r in agent.memory.runs] == ["plan Paris"]
    assert files_of(agent.memory.state) == {"/paris.md": "Paris"}
    agent.model = model = ScriptedModel(["Paris it is"])
    await agent.run("so?")
    assert user_texts(model.requests[0].messages) == ["plan Paris", "so?"]
    # the other agent's save is refused (the rewind bumped the revision) and merges
    await other.run("take notes")
    assert [r.input for r in other.memory.runs] == ["plan Paris", "so?", "take notes"]
    data = await storage.load_session("u", "s")
    assert data is not None and [r.input for r in data.runs] == [r.input for r in other.memory.runs]
    assert stored_files(data) == {"/paris.md": "Paris", "/notes.md": "from the other agent"}
    kept = await storage.load_session("u", "s.2")
    assert kept is not None and [r.input for r in kept.runs] == ["plan Paris", "make it Rome"]
    assert stored_files(kept) == {"/paris.md": "Paris", "/rome.md": "Rome"}


async def test_fork_and_rewind_say_what_was_wrong() -> None:
    with pytest.raises(UsageError, match=r"agent.fork\(\) works on a stored session"):
        await Agent(model=ScriptedModel([])).fork(at=0)
    storage = InMemoryStorage()
    agent = file_agent(storage, {"/a.md": "a"}, "done")
    await agent.run("write a")
    with pytest.raises(UsageError, match=r"to=1 keeps all 1 runs of session 's'"):
        await agent.rewind(to=1)
    with pytest.raises(UsageError, match=r"at=2 is not a run of session 's': it has 1 runs"):
        await agent.fork(at=2)
    # another writer saved since this agent loaded: nothing is rewound, the agent reloads
    await Agent(model=ScriptedModel(["hi"]), storage=storage, user_id="u", session_id="s").run(
        "meanwhile"
    )
    with pytest.raises(SessionConflictError):
        await agent.rewind(to=0)
    assert [r.input for r in agent.memory.runs] == ["write a", "meanwhile"]
    branch = await agent.rewind(to=0)
    assert branch.runs == 2 and agent.memory.runs == [] and agent.memory.state == {}
