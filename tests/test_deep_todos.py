"""Todos: the to-do list kept in the session state and shown to the model every turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentica import Agent, tool
from agentica.deep.todos import Todos
from agentica.errors import UsageError
from agentica.messages import SystemMessage, ToolMessage, UserMessage
from agentica.models import ModelRequest
from agentica.storage.jsonfile import JSONFileStorage
from agentica.testing import ScriptedModel, call, tool_calls

PLAN = [
    {"content": "Read the spec", "status": "completed"},
    {"content": "Write the code", "status": "in_progress"},
    {"content": "Run the tests", "status": "pending"},
]
SLOT = "Todos: [x] Read the spec  [>] Write the code  [ ] Run the tests"


@tool
def build() -> str:
    """Build the thing."""
    return "built"


def todo_slots(request: ModelRequest) -> list[str]:
    return [
        m.content
        for m in request.messages
        if isinstance(m, SystemMessage) and m.content.startswith("Todos:")
    ]


def tool_results(request: ModelRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


async def test_written_todos_are_in_the_session_state_and_in_the_next_requests_slot() -> None:
    model = ScriptedModel([tool_calls(call("write_todos", todos=PLAN)), "Planned.", "Working."])
    agent = Agent(model=model, instructions="Be brief.", capabilities=[Todos(max_nudges=0)])
    await agent.run("Build the feature")
    assert agent.memory.state["todos"] == PLAN
    assert todo_slots(model.requests[0]) == []  # nothing shown while the list is empty
    assert todo_slots(model.requests[1]) == [SLOT]
    # the slot comes last (the prompt before it stays cacheable) and is not kept in the history
    assert model.requests[1].messages[-1] == SystemMessage(content=SLOT)
    assert SystemMessage(content=SLOT) not in agent.memory.messages
    assert tool_results(model.requests[1])[0].content == (
        f"Todos saved: {SLOT[7:]}\nNext: do the step 'Write the code' now with a tool call; "
        "when it is done, mark it completed with write_todos."
    )
    await agent.run("Go on")
    assert todo_slots(model.requests[2]) == [SLOT]  # the next run sees it too, once


async def test_the_list_survives_a_restart_with_the_session(tmp_path: Path) -> None:
    storage = JSONFileStorage(tmp_path / "sessions")
    first = Agent(
        model=ScriptedModel([tool_calls(call("write_todos", todos=PLAN)), "Planned."]),
        capabilities=[Todos(max_nudges=0)],
        storage=storage,
        user_id="u",
        session_id="s",
    )
    await first.run("Plan the work")
    model = ScriptedModel([tool_calls("read_todos"), "Resumed."])
    second = Agent(
        model=model,
        capabilities=[Todos(max_nudges=0)],
        storage=JSONFileStorage(tmp_path / "sessions"),
        user_id="u",
        session_id="s",
    )
    await second.run("Where were we?")
    assert second.memory.state["todos"] == PLAN
    assert todo_slots(model.requests[0]) == [SLOT]
    assert json.loads(tool_results(model.requests[1])[-1].content) == PLAN


async def test_invalid_lists_are_refused_with_errors_naming_the_item_and_the_list_is_kept() -> None:
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=PLAN)),
        tool_calls(call("write_todos", todos=[{"content": "a", "status": "blocked"}])),
        tool_calls(call("write_todos", todos=[{"content": "a"}, {"status": "pending"}])),
        tool_calls(call("write_todos", todos=[{"content": "  ", "status": "pending"}])),
        tool_calls(call("write_todos", todos={"content": "a"})),
        "Gave up.",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[Todos(max_nudges=0)])
    await agent.run("Plan")
    errors = [tool_results(r)[-1] for r in model.requests[2:6]]
    assert all(e.is_error for e in errors)
    assert "todos.0.status" in errors[0].content
    assert "'pending', 'in_progress' or 'completed'" in errors[0].content
    assert "'blocked'" in errors[0].content
    assert "todos.1.content: this required argument is missing" in errors[1].content
    assert "todos.0.content" in errors[2].content and "content is empty" in errors[2].content
    assert "- todos: Input should be a valid array" in errors[3].content
    assert agent.memory.state["todos"] == PLAN  # the bad calls changed nothing


async def test_too_many_or_too_long_items_are_refused() -> None:
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=["a", "b", "c"])),
        tool_calls(call("write_todos", todos=["a", "x" * 50])),
        "ok",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[Todos(max_items=2, max_chars=40, max_nudges=0)])
    await agent.run("Plan")
    too_many = tool_results(model.requests[1])[-1]
    too_long = tool_results(model.requests[2])[-1]
    assert too_many.is_error and "Too many todos (3): keep at most 2" in too_many.content
    assert too_long.is_error and "Todo 2 is too long (50 characters, at most 40)" in (
        too_long.content
    )
    assert "todos" not in agent.memory.state


async def test_small_model_slips_are_accepted() -> None:
    slips = [{"content": "a", "status": "Done"}, {"content": "b", "status": "in progress"}]
    sent = json.dumps(slips)
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=sent)),  # the list as a JSON string
        tool_calls(call("write_todos", todos=["first", {"content": "second", "status": "todo"}])),
        "ok",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[Todos(max_nudges=0)])
    await agent.run("Plan")
    assert todo_slots(model.requests[1]) == ["Todos: [x] a  [>] b"]
    assert agent.memory.state["todos"] == [
        {"content": "first", "status": "pending"},
        {"content": "second", "status": "pending"},
    ]


async def test_an_empty_list_clears_the_slot_and_read_todos_says_so() -> None:
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=PLAN)),
        tool_calls(call("write_todos", todos=[])),
        tool_calls("read_todos"),
        "ok",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[Todos(max_nudges=0)])
    await agent.run("Plan")
    assert todo_slots(model.requests[1]) == [SLOT]
    assert tool_results(model.requests[2])[-1].content == "Todo list cleared."
    assert todo_slots(model.requests[2]) == todo_slots(model.requests[3]) == []
    assert tool_results(model.requests[3])[-1].content == "The todo list is empty."
    assert agent.memory.state["todos"] == []


def test_the_tools_are_short_and_their_schema_has_no_references() -> None:
    functions = Agent(model=ScriptedModel([]), capabilities=[Todos(max_nudges=0)]).functions
    write = functions["write_todos"].definition
    assert len(write.description) < 100 and len(functions["read_todos"].description) < 40
    assert "$ref" not in json.dumps(write.parameters)
    item = write.parameters["properties"]["todos"]["items"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert item["required"] == ["content"]


async def test_an_answer_with_open_steps_is_sent_back_a_bounded_number_of_times() -> None:
    plan = [{"content": "read", "status": "completed"}, {"content": "write", "status": "pending"}]
    model = ScriptedModel([tool_calls(call("write_todos", todos=plan)), "read", "read", "read"])
    agent = Agent(model=model, capabilities=[Todos(max_nudges=2)])
    response = await agent.run("do it")
    assert response.content == "read" and model.remaining == 0  # two nudges, then it ends
    nudge = model.requests[2].messages[-2]  # then the todo slot
    assert isinstance(nudge, UserMessage) and nudge.text.startswith(
        "Your todo list still has open steps: [ ] write."
    )
    done = [{"content": "read", "status": "completed"}, {"content": "write", "status": "completed"}]
    model = ScriptedModel(
        [tool_calls(call("build")), tool_calls(call("write_todos", todos=done)), "all done"]
    )
    agent = Agent(model=model, tools=[build], capabilities=[Todos()])
    assert (await agent.run("do it")).content == "all done" and model.remaining == 0


async def test_a_list_closed_with_no_work_done_is_not_closed() -> None:
    """As measured on the 1.5B model: its first call saved one step, already "completed", and
    it answered "Yes, the task is done." with nothing done."""
    step = [{"content": "Update the version in setup.cfg", "status": "completed"}]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=step)),
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=step)),
        "Updated.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[build], capabilities=[Todos()])
    assert (await agent.run("Bump the version in setup.cfg")).content == "Updated."
    refused, saved = tool_results(model.requests[1])[0], tool_results(model.requests[3])[-1]
    assert refused.content.startswith("Todos saved: [>] Update the version in setup.cfg")
    assert (
        "Not marked completed: 'Update the version in setup.cfg'. No tool call" in refused.content
    )
    assert "Next: do the step 'Update the version in setup.cfg' now" in refused.content
    assert saved.content.startswith("Todos saved: [x] Update")  # after the work: accepted
    assert agent.memory.state["todos"] == step
    # right after the refusal the model must do a step: no todo tools, a call required
    assert [t.name for t in model.requests[1].tools] == ["build"]
    assert model.requests[1].settings.tool_choice == "required"
    assert model.requests[2].settings.tool_choice is None


async def test_a_step_that_changes_a_file_is_not_completed_by_reading_it(
    tmp_path: Path,
) -> None:
    """As measured on the deep agent: "Add a repeat setting to config.json, set to 3, and make
    app.py print the greeting that many times" saved as one step, marked completed after
    reading config.json; both files as they were. (One-step lists, which ``DeepAgent`` no
    longer keeps by default: a ``Todos()`` given.)"""
    from agentica.deep import DeepAgent

    (tmp_path / "config.json").write_text('{"greeting": "Hello"}\n')
    task = "Add a repeat setting to config.json, set to 3"
    edit = call("edit_file", path="config.json", old_string="}", new_string=', "repeat": 3}')
    model = ScriptedModel([
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        tool_calls(call("run_python", code="print(open('config.json').read())")),
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        tool_calls(edit),
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        *["Added repeat: 3."] * 4,
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=False, todos=Todos())
    await agent.run(task + ".")
    saved = [r.content for r in tool_results(model.requests[-1]) if r.name == "write_todos"]
    first, second, third = saved
    assert "Not marked completed: 'Add a repeat setting to config.json, set to 3'" in first
    assert "No tool call has done that step's work yet" in first
    assert second.startswith("Todos saved: [x] Add a repeat")  # (refused once: seen, a loop)
    assert third.startswith("Todos saved: [x] Add a repeat setting")
    assert '"repeat": 3' in (tmp_path / "config.json").read_text()
    # refused first as saved with no work at all: the change rule still refuses it once more
    # after a read (seen: config-repeat closed its one step after reading config.json)
    (tmp_path / "config.json").write_text('{"greeting": "Hello"}\n')
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        tool_calls(edit),
        tool_calls(call("write_todos", todos=[{"content": task, "status": "completed"}])),
        *["Added repeat: 3."] * 4,
    ])  # fmt: skip
    await DeepAgent(model=model, workspace=tmp_path, subagents=False, todos=Todos()).run(task + ".")
    saved = [r.content for r in tool_results(model.requests[-1]) if r.name == "write_todos"]
    assert "No tool call has done any work since" in saved[0]
    assert "No tool call has done that step's work yet" in saved[1]
    assert saved[2].startswith("Todos saved: [x] Add a repeat setting")
    # work done first, then the steps ticked one save at a time (review finding)
    steps = [{"content": "Change a.json", "status": "pending"}, {"content": "Change b.py"}]
    done_a = [{**steps[0], "status": "completed"}, steps[1]]
    done_b = [{**s, "status": "completed"} for s in steps]
    model = ScriptedModel([
        tool_calls(call("write_file", path="a.json", content="{}")),
        tool_calls(call("write_file", path="b.py", content="print(2)\n")),
        tool_calls(call("write_todos", todos=done_a)),
        tool_calls(call("write_todos", todos=done_b)),
        *["Changed both."] * 4,
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=False, todos=Todos())
    await agent.run("Change a.json, b.py")
    saved = [r.content for r in tool_results(model.requests[-1]) if r.name == "write_todos"]
    assert saved[-1].startswith("Todos saved: [x] Change a.json  [x] Change b.py")
    # a step that says to write its result to a file is one too (seen: csv-totals closed
    # "Compute the total ... and write the totals to totals.json" after reading sales.csv)
    from agentica.deep.todos import _changes_a_file

    assert _changes_a_file("Compute the totals and write the totals to totals.json")
    assert _changes_a_file("Sum the numbers and save the total in total.txt")
    assert not _changes_a_file("Compute totals from sales.csv")
    # code that failed before it wrote the file changed nothing (seen: csv-totals' NameError,
    # then "... write the totals to totals.json" closed)
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,3\n")
    step = "Compute the totals and write the totals to totals.json"
    failing = "import json\njson.dump(totals, open('totals.json', 'w'))"
    model = ScriptedModel([
        tool_calls(call("read_file", path="sales.csv")),
        tool_calls(call("run_python", code=failing)),
        tool_calls(call("write_todos", todos=[{"content": step, "status": "completed"}])),
        *["Done."] * 4,
    ])  # fmt: skip
    await DeepAgent(model=model, workspace=tmp_path, subagents=False, todos=Todos()).run(step + ".")
    saved = [r.content for r in tool_results(model.requests[3]) if r.name == "write_todos"]
    assert saved and "Not marked completed: 'Compute the totals" in saved[0]
    # a step that changes no file it names is completed by any work, as before
    model = ScriptedModel([
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=[{"content": "Compute the total", "status": "done"}])),
        "42",
    ])  # fmt: skip
    await Agent(model=model, tools=[build], capabilities=[Todos()]).run("Compute the total")
    assert tool_results(model.requests[2])[-1].content.startswith("Todos saved: [x] Compute")


async def test_saving_a_finished_list_says_to_check_and_answer() -> None:
    done = [{"content": step["content"], "status": "completed"} for step in PLAN]
    first_open = [{"content": "a", "status": "pending"}, {"content": "b", "status": "pending"}]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=first_open)),
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=done)),
        "Done.",
    ])  # fmt: skip
    await Agent(model=model, tools=[build], capabilities=[Todos()]).run("Build it")
    assert "Next: do the step 'a' now" in tool_results(model.requests[1])[0].content
    # open steps: the next call must call a tool (seen: the step's text copied as the answer),
    # with every tool still offered (a changed list costs a local model its prompt cache)
    assert model.requests[1].settings.tool_choice == "required"
    assert [t.name for t in model.requests[1].tools] == [t.name for t in model.requests[0].tools]
    assert tool_results(model.requests[3])[-1].content.endswith(
        "Every step is completed: check the result, then give your final answer."
    )


async def test_work_in_the_same_reply_as_the_closing_list_counts() -> None:
    """Review finding: [build(), write_todos(all completed)] in one reply was refused."""
    step = [{"content": "build it", "status": "completed"}]
    model = ScriptedModel(
        [tool_calls(call("build"), call("write_todos", todos=step)), "Built.", "Built."]
    )
    agent = Agent(model=model, tools=[build], capabilities=[Todos()])
    await agent.run("Build it")
    assert agent.memory.state["todos"] == step


async def test_a_list_saved_again_with_nothing_done_makes_the_next_call_do_work() -> None:
    """As measured on the deep agent: the call required after a saved list with open steps was
    spent on write_todos again ([ ] then [>], over and over). The second save with nothing done
    in between takes the todo tools away for one call."""
    first = [{"content": "Write primes.txt", "status": "pending"}]
    again = [{"content": "Write primes.txt", "status": "in_progress"}]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=first)),
        tool_calls(call("write_todos", todos=again)),
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=again)),  # after work: offered as usual
        tool_calls(call("build")),
        *["Done."] * 4,  # (the open step is reminded of)
    ])  # fmt: skip
    await Agent(model=model, tools=[build], capabilities=[Todos()]).run("Write primes.txt")
    all_tools = [t.name for t in model.requests[0].tools]
    assert [t.name for t in model.requests[1].tools] == all_tools  # the first save
    assert [t.name for t in model.requests[2].tools] == ["build"]  # saved again, nothing done
    assert model.requests[2].settings.tool_choice == "required"
    assert [t.name for t in model.requests[4].tools] == all_tools  # saved after work


async def test_an_answer_after_enough_work_closes_the_open_steps() -> None:
    """As measured on the demo: the report edited, then answered with 'edit report' and 'check
    report' open; sent back twice, the model redid the edit and read the report three times.
    Work since the last save, a call per open step not yet counted, closes them; too little
    work still sends the model back."""
    plan = [{"content": "compute totals"}, {"content": "edit report"}, {"content": "check it"}]
    rest = plan[1:]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=plan)),
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=rest)),  # (the done step dropped, not ticked)
        tool_calls(call("build")),
        "The report is filled in.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[build], capabilities=[Todos()])
    assert (await agent.run("Fill in the report")).content == "The report is filled in."
    assert model.remaining == 0 and agent.memory.state["todos"] == [
        {"content": "edit report", "status": "completed"},
        {"content": "check it", "status": "completed"},
    ]
    # one call for three open steps: sent back
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=plan)),
        tool_calls(call("build")),
        "Done.",
        "Done.",
        "Done.",
    ])  # fmt: skip
    await Agent(model=model, tools=[build], capabilities=[Todos()]).run("Fill in the report")
    assert model.remaining == 0
    nudge = model.requests[3].messages[-2]
    assert isinstance(nudge, UserMessage) and nudge.text.startswith("Your todo list still has open")


async def test_the_same_list_saved_again_is_refused_and_the_next_call_does_work() -> None:
    """As measured on config-repeat: its one-step list, closed, saved 20 times over."""
    done = [{"content": "build it", "status": "completed"}]
    model = ScriptedModel([
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=done)),
        tool_calls(call("write_todos", todos=done)),
        tool_calls(call("build")),
        "Built.",
    ])  # fmt: skip
    await Agent(model=model, tools=[build], capabilities=[Todos()]).run("Build it")
    refused = tool_results(model.requests[3])[-1]
    assert refused.content.startswith("Nothing saved: this is your todo list as it already is")
    assert [t.name for t in model.requests[3].tools] == ["build"]
    assert model.requests[3].settings.tool_choice == "required"


async def test_the_deep_agent_leaves_the_one_step_of_a_list_to_the_answers_checks(
    tmp_path: Path,
) -> None:
    """As measured on config-repeat and fix-mean: the task copied as a list's one step, ticked
    after a read, refused, read again, saved again (10-20 calls). Refused outright, the list
    cost pending-orders its cue to answer ("Every step is completed") and the run its 40
    calls. ``DeepAgent``'s one-step list is closed by any work; the answer's checks see to the
    rest. A list of two steps is checked step by step as before."""
    from agentica.deep import DeepAgent

    (tmp_path / "buggy.py").write_text("def add(a, b):\n    return a - b\n")
    task = "buggy.py has a bug: add(2, 3) should return 5. Fix the file."
    step = [{"content": "Fix add in buggy.py", "status": "completed"}]
    fix = call("edit_file", path="buggy.py", old_string="a - b", new_string="a + b")
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=step)),  # (nothing done: refused)
        tool_calls(call("read_file", path="buggy.py")),
        tool_calls(call("write_todos", todos=step)),  # (after a read: closed)
        "Fixed.",
        tool_calls(fix),
        *["Fixed: add returns a + b."] * 4,
    ])  # fmt: skip
    agent = DeepAgent(model=model, workspace=tmp_path, subagents=False)
    await agent.run(task)
    saved = [r.content for r in tool_results(model.requests[-1]) if r.name == "write_todos"]
    assert "No tool call has done any work since" in saved[0]
    assert saved[1].startswith("Todos saved: [x] Fix add in buggy.py\nEvery step is completed")
    sent_back = [m for m in model.requests[4].messages if isinstance(m, UserMessage)][-1]
    assert "changed" in sent_back.text  # (the answer's checks: nothing was changed)
    assert "a + b" in (tmp_path / "buggy.py").read_text()
    # two steps: a change step is not closed by a read
    (tmp_path / "buggy.py").write_text("def add(a, b):\n    return a - b\n")
    plan = [
        {"content": "Read buggy.py", "status": "completed"},
        {"content": "Fix add in buggy.py", "status": "completed"},
    ]
    model = ScriptedModel([
        tool_calls(call("read_file", path="buggy.py")),
        tool_calls(call("grep", pattern="add", path="/")),
        tool_calls(call("write_todos", todos=plan)),
        *["Planned."] * 6,
    ])  # fmt: skip
    await DeepAgent(model=model, workspace=tmp_path, subagents=False).run(task)
    saved = [r.content for r in tool_results(model.requests[-1]) if r.name == "write_todos"]
    assert "Not marked completed: 'Fix add in buggy.py'" in saved[0]
    with pytest.raises(UsageError, match="check_steps_from must be at least 1"):
        Todos(check_steps_from=0)


async def test_the_same_list_after_work_is_refused_with_the_call_that_ticks_its_step() -> None:
    """As measured on primes: "[ ] Read primes.txt  [ ] Write primes.txt" saved again after
    each read, ten times over. Saved as it is after work, the list is refused with the call
    that marks its next step completed, which the model then copies."""
    plan = [{"content": "Read the spec"}, {"content": "Build it"}]
    ticked = [{"content": "Read the spec", "status": "completed"}, plan[1]]
    model = ScriptedModel([
        tool_calls(call("write_todos", todos=plan)),
        tool_calls(call("build")),
        tool_calls(call("write_todos", todos=plan)),
        tool_calls(call("write_todos", todos=ticked)),
        *["Done."] * 4,
    ])  # fmt: skip
    agent = Agent(model=model, tools=[build], capabilities=[Todos(max_nudges=0)])
    await agent.run("Build it")
    refused, saved = tool_results(model.requests[3])[-1], tool_results(model.requests[4])[-1]
    assert refused.content == (
        "Nothing saved: this is your todo list as it already is ([ ] Read the spec  [ ] Build "
        "it). If your calls since did the step 'Read the spec', mark it completed: write_todos("
        + json.dumps({"todos": [{"content": "Read the spec", "status": "completed"},
                                {"content": "Build it", "status": "pending"}]})
        + "). If not, do it now with a tool call."
    )  # fmt: skip
    assert saved.content.startswith("Todos saved: [x] Read the spec  [ ] Build it")
    assert agent.memory.state["todos"][0]["status"] == "completed"
