"""FileTools: ls, read_file, write_file, edit_file, glob and grep as an agent's tools."""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentica import Agent, Function, RunContext
from agentica.deep.backends import (
    CompositeBackend,
    FileBackend,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from agentica.deep.files import FileTools, session_state_backend
from agentica.errors import ToolError, UsageError
from agentica.messages import RunUsage, ToolMessage
from agentica.storage import Storage, open_storage
from agentica.testing import ScriptedModel, call, tool_calls


@pytest.fixture
async def storage(tmp_path: Path) -> AsyncIterator[Storage]:
    store = open_storage(str(tmp_path / "s.db"))
    yield store
    await store.aclose()


def context(agent: object | None = None) -> RunContext[Any]:
    return RunContext(run_id="r", deps=None, usage=RunUsage(), agent=agent)


CTX = context()


def tool_results(agent: Agent) -> list[ToolMessage]:
    return [m for m in agent.memory.messages if isinstance(m, ToolMessage)]


# ------------------------------------------------------------------------------ schemas


def test_the_tools_have_short_descriptions_and_hide_the_run_context() -> None:
    tools = FileTools(StateBackend())
    assert list(tools.functions) == ["ls", "read_file", "write_file", "edit_file", "glob", "grep"]
    for function in tools.functions.values():
        assert function.context_param == "ctx"
        assert "ctx" not in function.parameters["properties"]
        assert len(function.description) <= 100, function.description
        for name, schema in function.parameters["properties"].items():
            assert len(schema.get("description", "")) <= 80, (function.name, name)
    grep = tools.functions["grep"].parameters["properties"]
    assert grep["output_mode"]["enum"] == ["files_with_matches", "content", "count"]
    assert tools.functions["write_file"].exclusive and tools.functions["edit_file"].exclusive


# ------------------------------------------------------------------------------ read_file


async def test_read_file_numbers_lines_and_pages_with_offset_and_limit() -> None:
    backend = StateBackend()
    await backend.write("/a.txt", "".join(f"line {i}\n" for i in range(1, 11)))
    tools = FileTools(backend, line_numbers="all")
    out = await tools.read_file(CTX, "/a.txt", offset=2, limit=3)
    assert out.splitlines() == [
        "     3\tline 3",
        "     4\tline 4",
        "     5\tline 5",
        "... 5 more lines; call read_file with offset=5 to read on",
    ]
    assert (await tools.read_file(CTX, "/a.txt", offset=5)).splitlines()[0] == "     6\tline 6"
    assert "more lines" not in await tools.read_file(CTX, "/a.txt")
    # by default only code is numbered (a traceback names its lines); data and prose are shown
    # as they are, a part of one under a header saying which lines it is
    await backend.write("/a.py", "x = 1\ny = 2\n")
    tools = FileTools(backend)
    assert await tools.read_file(CTX, "/a.py") == "     1\tx = 1\n     2\ty = 2"
    assert await tools.read_file(CTX, "/a.txt", limit=2) == (
        "[/a.txt: lines 1-2 of 10]\nline 1\nline 2\n"
        "... 8 more lines; call read_file with offset=2 to read on"
    )
    assert await tools.read_file(CTX, "/a.txt", offset=8) == (
        "[/a.txt: lines 9-10 of 10]\nline 9\nline 10"
    )
    assert (await tools.read_file(CTX, "/a.txt")).startswith("line 1\nline 2\n")
    assert FileTools(backend, line_numbers="none").line_numbers == "none"
    assert await FileTools(backend, line_numbers="none").read_file(CTX, "/a.py") == "x = 1\ny = 2"
    with pytest.raises(ToolError, match=r"has 10 lines, so offset=10 is past its end.*0 to 9"):
        await tools.read_file(CTX, "/a.txt", offset=10)
    with pytest.raises(ToolError, match="offset must be 0 or more"):
        await tools.read_file(CTX, "/a.txt", offset=-1)
    await backend.write("/empty.txt", "")
    assert await tools.read_file(CTX, "/empty.txt") == "/empty.txt is empty (0 lines)."


async def test_read_file_output_fits_the_character_cap_and_says_how_to_go_on() -> None:
    backend = StateBackend()
    lines = [f"row {i:04d} " + "x" * 40 for i in range(1, 1001)]
    await backend.write("/big.txt", "\n".join(lines) + "\n")
    await backend.write("/wide.txt", "a" * 5000 + "\nshort\n")
    tools = FileTools(backend, max_output_chars=2000, max_line_chars=100, line_numbers="all")
    out = await tools.read_file(CTX, "/big.txt")
    assert len(out) <= 2000
    last = out.splitlines()[-1]
    shown = len(out.splitlines()) - 1
    assert last == f"... {1000 - shown} more lines; call read_file with offset={shown} to read on"
    follow = await tools.read_file(CTX, "/big.txt", offset=shown)
    assert follow.splitlines()[0] == f"{shown + 1:>6}\t{lines[shown]}"  # continues exactly
    wide = (await tools.read_file(CTX, "/wide.txt")).splitlines()
    assert wide[0] == "     1\t" + "a" * 100 + " [... line cut, 4900 more characters]"
    assert wide[1] == "     2\tshort"


async def test_read_file_reports_binary_and_oversized_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00data")
    (root / "huge.log").write_text("x\n" * 3000)
    tools = FileTools(FilesystemBackend(root, max_read_bytes=5000))
    with pytest.raises(ToolError, match=r"/logo\.png is a binary file"):
        await tools.read_file(CTX, "/logo.png")
    with pytest.raises(ToolError, match="6000 bytes, more than the 5000-byte read limit"):
        await tools.read_file(CTX, "huge.log")


# ------------------------------------------------------------------------------ edit_file


async def test_edit_file_replaces_a_unique_string() -> None:
    backend = StateBackend()
    await backend.write("/a.py", "def f():\n    return 1\n\nprint(f())\n")
    tools = FileTools(backend)
    out = await tools.edit_file(CTX, "/a.py", "return 1", "return 2")
    assert out == "edited /a.py: replaced 1 occurrence at line 2"
    assert await backend.read("/a.py") == "def f():\n    return 2\n\nprint(f())\n"


async def test_edit_file_leaves_out_the_lines_new_string_repeats_from_above() -> None:
    """Seen on the demo sampled at 0.3: TODO under a table's header replaced by that header
    (and the rows), so the table had two headers."""
    backend = StateBackend()
    report = "# Sales by region\n\n| region | total |\n|---|---|\nTODO\n"
    await backend.write("/report.md", report)
    tools = FileTools(backend)
    header = "| region | total |\n|---|---|\n"
    with pytest.raises(ToolError) as caught:  # only the header: nothing left to write
        await tools.edit_file(CTX, "/report.md", "TODO", header)
    assert "new_string is lines 3-4 of /report.md, which are already right above" in str(
        caught.value
    )
    assert str(caught.value).endswith(
        "is now: the table's rows, one per line, each with 2 cells written like its header: "
        "| region | total |"
    )
    # rows without cells under a table get a note
    unrows = await tools.edit_file(CTX, "/report.md", "TODO", "north 165\nsouth 180")
    assert "[note] The lines under the table of /report.md are not rows of it: write the " in (
        unrows
    )
    # a cell changed inside a row is no new line (seen: 120 -> 165 in "| north | 120 |")
    await backend.write("/report.md", report.replace("TODO", "| north | 120 |"))
    cell = await tools.edit_file(CTX, "/report.md", "120", "165")
    assert "not rows" not in cell and "| north | 165 |" in await backend.read("/report.md")
    await backend.write("/report.md", report)
    assert await backend.read("/report.md") == report
    out = await tools.edit_file(CTX, "/report.md", "TODO", header + "| north | 165 |\n")
    assert "new_string began with lines 3-4 of /report.md" in out and "left out" in out
    assert await backend.read("/report.md") == report.replace("TODO", "| north | 165 |\n")
    # code may repeat a line on purpose; a line only like the one above is left alone
    await backend.write("/a.py", "x = 1\nTODO\n")
    await tools.edit_file(CTX, "/a.py", "TODO", "x = 1")
    assert await backend.read("/a.py") == "x = 1\nx = 1\n"
    await backend.write("/b.md", "- a\nTODO\n")  # too short to be a repeated block
    await tools.edit_file(CTX, "/b.md", "TODO", "- a\n- b")
    assert await backend.read("/b.md") == "- a\n- a\n- b\n"


async def test_edit_file_names_the_line_to_fill_in_when_old_string_is_not_there() -> None:
    """Seen on the demo sampled at 0.3: the totals computed, the model sent the refusal it had
    just read as old_string, then the totals as both old_string and new_string."""
    backend = StateBackend()
    report = "# Sales by region\n\n| region | total |\n|---|---|\nTODO\n"
    await backend.write("/report.md", report)
    tools = FileTools(backend)
    rows = "| north | 165 |\n| south | 180 |"
    call = json.dumps({"path": "/report.md", "old_string": "TODO", "new_string": rows})
    for old in ("nothing was written: no tool output showed 165", rows):
        with pytest.raises(ToolError) as caught:
            await tools.edit_file(CTX, "/report.md", old, rows)
        assert "/report.md has one line to fill in, 'TODO' (line 5)" in str(caught.value)
        assert f"call edit_file({call})" in str(caught.value)
    assert await backend.read("/report.md") == report
    out = await tools.edit_file(CTX, **json.loads(call))  # the call given works
    assert out.startswith("edited /report.md") and rows in await backend.read("/report.md")
    # no placeholder (or two): the plain errors
    await backend.write("/b.md", "TODO\nTBD\n")
    with pytest.raises(ToolError) as caught:
        await tools.edit_file(CTX, "/b.md", "x", "x")
    assert str(caught.value) == "old_string and new_string are the same; there is nothing to change"


async def test_edit_file_explains_ambiguity_and_replace_all() -> None:
    backend = StateBackend()
    await backend.write("/a.py", "x = 1\ny = 1\nz = 1\n")
    tools = FileTools(backend)
    with pytest.raises(ToolError) as caught:
        await tools.edit_file(CTX, "/a.py", "= 1", "= 2")
    message = str(caught.value)
    assert "occurs 3 times in /a.py (lines 1, 2, 3)" in message
    assert "replace_all=true" in message and "Add nearby lines" in message
    assert await backend.read("/a.py") == "x = 1\ny = 1\nz = 1\n"  # unchanged
    out = await tools.edit_file(CTX, "/a.py", "= 1", "= 2", replace_all=True)
    assert out == "edited /a.py: replaced 3 occurrences"
    assert await backend.read("/a.py") == "x = 2\ny = 2\nz = 2\n"


async def test_edit_file_explains_missing_strings_and_files() -> None:
    backend = StateBackend()
    await backend.write("/a.py", "    value = compute()\n")
    tools = FileTools(backend)
    with pytest.raises(ToolError, match=r"not found in /a\.py; the closest line is '    value = c"):
        await tools.edit_file(CTX, "/a.py", "value = other()", "x")
    with pytest.raises(ToolError, match=r"not found in /a\.py\. Call read_file"):
        await tools.edit_file(CTX, "/a.py", "compute it twice, then the value", "x =")
    # seen: the 1.5B model passed the task's words ("British spelling") as old_string
    with pytest.raises(ToolError, match=r"none of its words are in the file.*not a description"):
        await tools.edit_file(CTX, "/a.py", "British spelling", "color")
    with pytest.raises(ToolError, match="without its leading or trailing spaces"):
        await tools.edit_file(CTX, "/a.py", "value = compute()  \n\n", "x")
    with pytest.raises(ToolError, match=r"no file /b\.py.*use write_file"):
        await tools.edit_file(CTX, "/b.py", "a", "b")
    with pytest.raises(ToolError, match="old_string is empty"):
        await tools.edit_file(CTX, "/a.py", "", "b")
    with pytest.raises(ToolError, match="the same"):
        await tools.edit_file(CTX, "/a.py", "value", "value")
    assert await backend.read("/a.py") == "    value = compute()\n"


async def test_edit_file_matches_windows_line_ends(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    tools = FileTools(FilesystemBackend(root))
    out = await tools.edit_file(CTX, "/w.txt", "one\ntwo\n", "1\n2\n")
    assert out == "edited /w.txt: replaced 1 occurrence at line 1"
    assert (root / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


# ------------------------------------------------------------------------------ ls, glob, grep


async def test_ls_glob_and_write_file_outputs() -> None:
    backend = StateBackend()
    tools = FileTools(backend)
    assert await tools.write_file(CTX, "/src/a.py", "a = 1\nb = 2\n") == (
        "wrote /src/a.py (2 lines, 12 B)"
    )
    await tools.write_file(CTX, "/README.md", "# Project\n" + "x" * 2000)
    listing = (await tools.ls(CTX, "/")).splitlines()
    assert listing[0].startswith("README.md  2.0 KB  ")  # name, size, modification time
    assert listing[1].startswith("src/  dir  ")
    assert await tools.ls(CTX, "/src/") != ""
    assert await tools.glob(CTX, "**/*.py") == "/src/a.py"
    assert await tools.glob(CTX, "/src/*.py") == "/src/a.py"  # an absolute pattern
    assert await tools.glob(CTX, "*.rs") == "no files match '*.rs' in /"
    with pytest.raises(ToolError, match=r"no directory /nope; call ls\('/'\)"):
        await tools.ls(CTX, "/nope")


async def test_long_listings_are_cut_with_a_note() -> None:
    backend = StateBackend()
    for i in range(300):
        await backend.write(f"/many/file_{i:03d}.txt", "x")
    tools = FileTools(backend, max_output_chars=1000)
    out = await tools.glob(CTX, "**/*.txt")
    assert len(out) <= 1000
    shown = out.count("\n")
    assert out.endswith(f"... {300 - shown} more files; use a narrower pattern or path")
    listing = await tools.ls(CTX, "/many")
    assert len(listing) <= 1000 and "more entries; call ls on a subfolder" in listing


async def test_grep_output_modes() -> None:
    backend = StateBackend()
    await backend.write("/a.py", "import os\n\ndef main():\n    os.exit(0)\n")
    await backend.write("/b.py", "def main():\n    pass\n\n\n\n\ndef main2():\n    pass\n")
    await backend.write("/c.md", "main ideas\n")
    tools = FileTools(backend)
    assert await tools.grep(CTX, "def main") == "/a.py\n/b.py"
    assert await tools.grep(CTX, "main", output_mode="count") == (
        "/a.py: 1 matching line\n/b.py: 2 matching lines\n/c.md: 1 matching line"
    )
    assert await tools.grep(CTX, "main", glob="*.md", output_mode="content") == "/c.md:1:main ideas"
    out = await tools.grep(CTX, "def main", "/b.py", output_mode="content", context=1)
    assert out.splitlines() == [
        "/b.py:1:def main():",
        "/b.py-2-    pass",
        "--",
        "/b.py-6-",
        "/b.py:7:def main2():",
        "/b.py-8-    pass",
    ]
    assert await tools.grep(CTX, "absent") == "no matches for 'absent' in /"
    with pytest.raises(ToolError, match="invalid regular expression"):
        await tools.grep(CTX, "main(")


async def test_a_short_file_grep_found_nothing_in_is_shown_whole() -> None:
    """As measured on the 1.5B model: it searched settings.ini six times for the line it
    guessed ("web_server_port = \\d+") and never read the file."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    await backend.write("/settings.ini", "[server]\nhost = 0.0.0.0\nport = 8080\n")
    await backend.write("/big.txt", "line\n" * 100)
    out = await tools.grep(ctx, r"web_server_port = \d+", "settings.ini")
    assert out == (
        "no matches for 'web_server_port = \\\\d+' in settings.ini; the pattern may not be "
        "worded as the file is. The whole file:\n[server]\nhost = 0.0.0.0\nport = 8080"
    )
    await tools.write_file(ctx, "/settings.ini", "[server]\nport = 9090\n")  # (it was shown)
    assert await tools.grep(ctx, "absent", "/big.txt") == "no matches for 'absent' in /big.txt"
    assert await tools.grep(ctx, "absent", "/") == "no matches for 'absent' in /"


async def test_grep_content_is_cut_with_a_hint() -> None:
    backend = StateBackend()
    await backend.write("/log.txt", "".join(f"error {i}\n" for i in range(500)))
    tools = FileTools(backend, max_output_chars=1000)
    out = await tools.grep(CTX, "error", output_mode="content")
    assert len(out) <= 1000
    assert "more lines; narrow the search with path= or glob=, or use output_mode='count'" in out


# ------------------------------------------------------------------------------ backends per run


async def test_a_backend_function_is_resolved_per_call() -> None:
    seen: list[RunContext[Any]] = []
    backends: dict[str, FileBackend] = {"r1": StateBackend(), "r2": StateBackend()}

    def pick(ctx: RunContext[Any]) -> FileBackend:
        seen.append(ctx)
        return backends[ctx.run_id]

    tools = FileTools(pick)
    first = RunContext(run_id="r1", deps=None, usage=RunUsage())
    second = RunContext(run_id="r2", deps=None, usage=RunUsage())
    await tools.write_file(first, "/x.txt", "one")
    await tools.write_file(second, "/x.txt", "two")
    assert await backends["r1"].read("/x.txt") == "one"
    assert await backends["r2"].read("/x.txt") == "two"
    assert seen == [first, second]
    alone = context(None)  # without a backend the files live in the context's session state
    await FileTools().write_file(alone, "/a.txt", "kept")
    assert alone.session_state["files"]["/a.txt"]["content"] == "kept"
    with pytest.raises(UsageError, match="max_output_chars must be at least 1000"):
        FileTools(max_output_chars=10)


async def test_agent_uses_the_tools_and_keeps_files_in_its_session_state(
    storage: Storage,
) -> None:
    model = ScriptedModel([
        tool_calls(call("write_file", path="/notes.md", content="alpha\nbeta\n")),
        tool_calls(call("edit_file", path="/notes.md", old_string="beta", new_string="gamma")),
        tool_calls(call("read_file", path="notes.md"), call("grep", pattern="gam+a")),
        "Saved.",
        tool_calls(call("read_file", path="/notes.md"), call("ls")),
        "Still there.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools()], storage=storage, user_id="u", session_id="s")
    response = await agent.run("Write notes")
    assert response.content == "Saved."
    assert [c.status for c in response.tool_calls] == ["success"] * 4
    assert [c.result for c in response.tool_calls[2:]] == [
        "alpha\ngamma",  # (prose: shown as it is)
        "/notes.md",
    ]
    entry = agent.memory.state["files"]["/notes.md"]
    assert entry["content"] == "alpha\ngamma\n" and isinstance(entry["modified"], float)
    # a new agent object on the same session finds the files in the stored session state
    resumed = Agent(model=model, tools=[FileTools()], storage=storage, user_id="u", session_id="s")
    again = await resumed.run("Read them")
    assert again.content == "Still there."
    assert again.tool_calls[0].result == "alpha\ngamma"
    assert again.tool_calls[1].result.startswith("notes.md  12 B  ")
    stored = await storage.load_session("u", "s")
    assert stored is not None and stored.state["files"]["/notes.md"]["content"] == "alpha\ngamma\n"
    assert json.loads(json.dumps(stored.state)) == stored.state


async def test_agent_sees_tool_errors_written_for_the_model(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    (root / "a.py").write_text("x = 1\nx = 1\n")
    model = ScriptedModel([
        tool_calls(
            call("read_file", path="/link"),
            call("read_file", path="../outside.txt"),
            call("edit_file", path="/a.py", old_string="x = 1", new_string="x = 2"),
            call("write_file", path="/out\uff0fx", content="x"),
        ),
        "I could not.",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(root))])
    response = await agent.run("try")
    assert [c.status for c in response.tool_calls] == ["error"] * 4
    results = [m.content for m in tool_results(agent)]
    assert "points outside the file area" in results[0]
    assert "goes above the root '/'" in results[1]
    assert "occurs 2 times in /a.py (lines 1, 2)" in results[2]
    assert "FULLWIDTH SOLIDUS" in results[3]
    assert all(m.is_error for m in tool_results(agent))
    assert outside.read_text() == "secret"
    assert sorted(p.name for p in root.iterdir()) == ["a.py", "link"]
    assert "secret" not in " ".join(results)


async def test_agent_with_composite_backend_keeps_memories_across_sessions(
    storage: Storage, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"

    def backend(ctx: RunContext[Any]) -> FileBackend:
        return CompositeBackend(
            session_state_backend(ctx),
            {
                "/memories/": StoreBackend(storage, ctx.agent.user_id, ctx.agent.name),
                "/workspace/": FilesystemBackend(workspace),
            },
        )

    tools = FileTools(backend)
    model = ScriptedModel([
        tool_calls(
            call("write_file", path="/memories/user.md", content="prefers tea\n"),
            call("write_file", path="/workspace/report.md", content="# Report\n"),
            call("write_file", path="/scratch.txt", content="temporary\n"),
        ),
        "done",
        tool_calls(call("ls", path="/"), call("grep", pattern="tea|Report|temporary")),
        "recalled",
    ])  # fmt: skip
    first = Agent(model=model, tools=[tools], storage=storage, user_id="ada", session_id="one")
    await first.run("remember")
    assert (workspace / "report.md").read_text() == "# Report\n"
    assert first.memory.state["files"] == {
        "/scratch.txt": {
            "content": "temporary\n",
            "modified": first.memory.state["files"]["/scratch.txt"]["modified"],
        }
    }
    # another session of the same user: the memories and the workspace are there, the
    # session's scratch file is not
    second = Agent(model=model, tools=[tools], storage=storage, user_id="ada", session_id="two")
    response = await second.run("recall")
    listing, found = (c.result for c in response.tool_calls)
    assert [line.split()[0] for line in listing.splitlines()] == ["memories/", "workspace/"]
    assert found == "/memories/user.md\n/workspace/report.md"
    # another user does not see ada's memories
    other = StoreBackend(storage, "bob", "agent")
    assert await other.ls("/") == []


async def test_a_capability_reaches_the_agents_files_through_the_run_context(
    tmp_path: Path,
) -> None:
    from agentica.run.capability import Capability

    (tmp_path / "plan.md").write_text("1. measure\n")
    seen: list[str] = []

    class Plan(Capability):
        name = "plan"

        async def system_slot(self, ctx: RunContext[Any]) -> str | None:
            assert ctx.files is not None
            text = await ctx.files.read("/plan.md")
            seen.append(text)
            return f"The plan:\n{text}"

    model = ScriptedModel([
        tool_calls(call("read_file", path="/plan.md")),
        tool_calls(call("write_file", path="/plan.md", content="1. measure\n2. fix\n")),
        "Planned.",
    ])  # fmt: skip
    tools = FileTools(FilesystemBackend(tmp_path))
    agent = Agent(model=model, tools=[tools], capabilities=[Plan()])
    assert (await agent.run("Plan")).content == "Planned."
    assert seen == ["1. measure\n"] * 2 + ["1. measure\n2. fix\n"]  # the slot reads the same files
    assert "2. fix" in str(model.requests[-1].messages[-1].content)
    # without file tools there are no files to reach
    bare = RunContext(run_id="r", deps=None, usage=RunUsage())
    assert bare.files is None


def test_a_backend_missing_a_method_is_named_when_the_tools_are_made() -> None:
    class Half:
        async def ls(self, path: str = "/") -> list[Any]:
            return []

        async def read(self, path: str) -> str:
            return ""

    with pytest.raises(UsageError, match="lacks stat, write, glob, grep"):
        FileTools(Half())  # type: ignore[arg-type]


async def test_line_numbers_copied_from_read_file_are_left_out_of_what_is_written() -> None:
    """As measured on the 1.5B model: it wrote config.ini back with read_file's line numbers
    (config files are shown as they are now; code, or any file with ``line_numbers="all"``,
    still has them)."""
    backend = StateBackend()
    tools = FileTools(backend, line_numbers="all")
    await backend.write("/config.ini", "[app]\ndebug = true\n\nname = shop\n")
    shown = await tools.read_file(CTX, "/config.ini")
    copied = shown.replace("debug = true", "debug = false")
    out = await tools.write_file(CTX, "/config.ini", copied)
    assert out.endswith("the line numbers read_file shows were left out (they are not in the file)")
    assert await backend.read("/config.ini") == "[app]\ndebug = false\n\nname = shop"
    await tools.edit_file(CTX, "/config.ini", "     2\tdebug = false", "     2\tdebug = off")
    assert "debug = off" in await backend.read("/config.ini")
    # a file's own numbers are data: a TSV with ids, a list of numbers, numbers in six columns
    for data in ("1\talice\n2\tbob\n", "1\n2\n3\n", "     1\n     2\n"):
        out = await tools.write_file(CTX, "/data.tsv", data)
        assert await backend.read("/data.tsv") == data and "left out" not in out


async def test_a_file_with_text_is_overwritten_only_after_this_run_read_it(tmp_path: Path) -> None:
    """As measured on the 1.5B model: asked to bump the version in setup.cfg, it wrote a whole
    setup.cfg from its head without reading it, and the file's own settings were lost."""
    for backend in (StateBackend(), FilesystemBackend(tmp_path)):
        tools, ctx = FileTools(backend), context()
        await backend.write("/setup.cfg", "[metadata]\nname = shop\nversion = 1.4.2\n")
        with pytest.raises(ToolError) as refused:
            await tools.write_file(ctx, "setup.cfg", "version = '1.5.0'\n")
        assert "/setup.cfg already exists (39 B) and you have not read it" in str(refused.value)
        assert "Call read_file('/setup.cfg') first" in str(refused.value)
        assert await backend.read("/setup.cfg") == "[metadata]\nname = shop\nversion = 1.4.2\n"
        await tools.read_file(ctx, "/setup.cfg")
        await tools.write_file(ctx, "/setup.cfg", "[metadata]\nname = shop\nversion = 1.5.0\n")
        assert "1.5.0" in await backend.read("/setup.cfg")
        # a new file, an empty one, one this run wrote or edited: all fine
        other = context()
        await backend.write("/empty.txt", "")
        for number, path in enumerate(("/new.txt", "/empty.txt", "/new.txt")):
            await tools.write_file(other, path, f"text {number}\n")
        await backend.write("/edited.md", "# Old\n")
        await tools.edit_file(other, "/edited.md", "Old", "New")
        await tools.write_file(other, "/edited.md", "# Newer\n")
        # what one run read does not let another run overwrite
        with pytest.raises(ToolError, match="you have not read it"):
            await tools.write_file(other, "/setup.cfg", "version = 2\n")
    # a file the run's own code wrote (modified since the run first used the files) is not
    # refused (seen on csv-totals: the code wrote totals.json, then write_file was refused)
    tools, ctx = FileTools(FilesystemBackend(tmp_path)), context()
    await tools.ls(ctx, "/")
    (tmp_path / "totals.json").write_text('{"north": 165}')
    later = ctx.state[f"{tools.name}.started"] + 1
    os.utime(tmp_path / "totals.json", (later, later))
    await tools.write_file(ctx, "totals.json", '{"north": 165, "south": 180}')
    assert "south" in (tmp_path / "totals.json").read_text()
    # a file read_file cannot show (binary) is not refused: reading it first is no remedy
    (tmp_path / "blob.bin").write_bytes(b"\x00\xff\x00binary")
    await FileTools(FilesystemBackend(tmp_path)).write_file(context(), "/blob.bin", "text\n")
    assert (tmp_path / "blob.bin").read_text() == "text\n"
    # the check can be turned off
    backend = StateBackend()
    await backend.write("/a.txt", "keep")
    await FileTools(backend, read_before_overwrite=False).write_file(context(), "/a.txt", "new")
    assert await backend.read("/a.txt") == "new"


async def test_quotes_added_around_a_value_and_a_file_rewritten_from_scratch() -> None:
    """As measured on the 1.5B model: after reading setup.cfg it called edit_file with
    old_string="version = '1.4.2'" (the file has no quotes), then wrote an invented file."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    original = "[metadata]\nname = weather-cli\nversion = 1.4.2\n"
    await backend.write("/setup.cfg", original)
    await tools.read_file(ctx, "/setup.cfg")
    out = await tools.edit_file(ctx, "/setup.cfg", "version = '1.4.2'", "version = '1.5.0'")
    assert out.startswith("edited /setup.cfg: replaced 1 occurrence at line 3; old_string matched")
    assert await backend.read("/setup.cfg") == original.replace("1.4.2", "1.5.0")
    # quotes the file has stay; a different number of quotes in new_string is not guessed at
    await backend.write("/a.py", "name = 'x'\n")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(ctx, "/a.py", "name = x", "name = y")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(ctx, "/setup.cfg", "name = 'weather-cli'", "name = cli")
    # text inside another string is no bare value (seen in a test: 'hello' in 'hello, world')
    await backend.write("/hello.py", "print('hello, world')\n")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(ctx, "/hello.py", "'hello'", "'hello, world'")
    # every line of the file replaced: the result says so (a note, the write is done)
    out = await tools.write_file(ctx, "/setup.cfg", "version = '1.5.0'\n[tool.poetry]\n")
    assert "[check] None of the 3 lines /setup.cfg had are in it now." in out
    kept = await tools.write_file(ctx, "/setup.cfg", "version = '1.5.0'\n[tool.poetry]\nx\n")
    assert "[check]" not in kept  # (two lines before: too few to say)
    # a file this run created is its own to replace (seen: 100 invented names written before
    # names.txt was read, then the right three; the note had the model put the 100 back)
    await tools.write_file(ctx, "/upper.txt", "".join(f"NAME{n}\n" for n in range(100)))
    assert "[check]" not in await tools.write_file(ctx, "/upper.txt", "ADA\nGRACE\nLINUS\n")


async def test_an_edit_typed_with_the_other_quotes_matches_the_files_own() -> None:
    """As measured on the 1.5B model (fix-slugify, fix-price): old_string
    ``return '_'.join(title.split())`` for the line ``return "_".join(title.split())``, sent
    again unchanged after "the closest line is ..."."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    source = 'def slugify(title):\n    """A slug."""\n    return "_".join(title.split())\n'
    await backend.write("/text.py", source)
    await tools.read_file(ctx, "/text.py")
    out = await tools.edit_file(
        ctx, "/text.py", "return '_'.join(title.split())", "return '-'.join(title.lower().split())"
    )
    assert out.startswith("edited /text.py: replaced 1 occurrence at line 3; old_string matched")
    assert await backend.read("/text.py") == source.replace(
        '"_".join(title.split())', '"-".join(title.lower().split())'
    )
    # JSON keeps its double quotes; new_string with both kinds is written as given
    await backend.write("/c.json", '{"debug": "on", "name": "it\'s"}\n')
    await tools.read_file(ctx, "/c.json")
    await tools.edit_file(ctx, "/c.json", "'debug': 'on'", "'debug': 'off'")
    assert await backend.read("/c.json") == '{"debug": "off", "name": "it\'s"}\n'
    await backend.write("/m.py", 'x = f("a")\n')
    await tools.read_file(ctx, "/m.py")
    await tools.edit_file(ctx, "/m.py", "f('a')", "f('a', \"b\")")
    assert await backend.read("/m.py") == "x = f('a', \"b\")\n"
    # twice in the file: which one is meant is not guessed (replace_all changes both)
    await backend.write("/two.py", 'a = "x"\nb = "x"\n')
    await tools.read_file(ctx, "/two.py")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(ctx, "/two.py", "'x'", "'y'")
    assert (await tools.edit_file(ctx, "/two.py", "'x'", "'y'", replace_all=True)).startswith(
        "edited /two.py: replaced 2 occurrences"
    )
    assert await backend.read("/two.py") == 'a = "y"\nb = "y"\n'
    # quotes of both kinds in the file where old_string has one: not one style for the other
    await backend.write("/mixed.py", 's = "it\'s"\n')
    await tools.read_file(ctx, "/mixed.py")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(ctx, "/mixed.py", "'it's'", "'its'")


async def test_an_edit_that_adds_again_the_lines_after_old_string_is_refused_with_them() -> None:
    """As measured on fix-mean: old_string ``def mean(values):`` and new_string that line with
    the function's body again; mean's body was then in stats.py twice."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    source = (
        'def mean(values):\n    """The mean."""\n    total = 0\n'
        "    for value in values[1:]:\n        total += value\n    return total / len(values)\n"
        "\n\ndef other():\n    return 1\n"
    )
    await backend.write("/stats.py", source)
    await tools.read_file(ctx, "/stats.py")
    rewrite = (
        "def mean(values):\n    total = 0\n    for value in values:\n        total += value\n"
        "    return total / len(values)"
    )
    with pytest.raises(ToolError) as refused:
        await tools.edit_file(ctx, "/stats.py", "def mean(values):", rewrite)
    assert str(refused.value) == (
        "nothing was changed: new_string is old_string followed by lines /stats.py already has "
        "after it (lines 1-6), so they would be there twice. To rewrite those lines, old_string "
        "is all of them, as the file has them:\n"
        + "\n".join(source.splitlines()[:6])
        + "\nand new_string is what replaces them"
    )
    assert await backend.read("/stats.py") == source
    # the block copied as told: the edit goes through
    block = "\n".join(source.splitlines()[:6])
    assert (await tools.edit_file(ctx, "/stats.py", block, rewrite)).startswith("edited")
    # one line added again is no rewrite (code may repeat a line: a note, as before)
    await backend.write("/a.py", "x = 1\ny = 2\nprint(x, 'total')\n")
    await tools.read_file(ctx, "/a.py")
    out = await tools.edit_file(ctx, "/a.py", "x = 1", "x = 1\nprint(x, 'total')")
    assert out.startswith("edited /a.py") and "[note] new_string adds" in out


async def test_an_edit_of_a_line_another_file_has_says_where_it_is() -> None:
    """As measured on rename-across: ``def fmt_money(amount):`` looked for in main.py twice,
    the function being in helpers.py."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    await backend.write("/main.py", "from report import summary\nprint(summary())\n")
    await backend.write("/helpers.py", "def fmt_money(amount):\n    return f'{amount:.2f}'\n")
    await backend.write("/.venv/x.py", "def fmt_money(amount):\n")  # (hidden: not named)
    await tools.read_file(ctx, "/main.py")
    old = "def fmt_money(amount):\n    return f'${amount}'"
    with pytest.raises(ToolError) as missing:
        await tools.edit_file(ctx, "/main.py", old, old.replace("fmt_", "format_"))
    assert str(missing.value).endswith(
        ". The line 'def fmt_money(amount):' is in /helpers.py (line 1), not in /main.py: to "
        "change it there, call edit_file with path '/helpers.py'"
    )
    # nowhere else: the error as it was
    with pytest.raises(ToolError) as missing:
        await tools.edit_file(ctx, "/main.py", "def nothing_here():", "def x():")
    assert "is in" not in str(missing.value)
    # the tests that judge the fix are no place to change (seen on fix-slugify: sent there,
    # the model edited the test's call)
    await backend.write("/text.py", "def slugify(t):\n    return '_'.join(t.split())\n")
    await backend.write("/test_text.py", "assertEqual(slugify('Hello World'), 'hello-world')\n")
    task = "slugify in text.py is wrong. Fix it; test_text.py has the expected results."
    asked = RunContext(run_id="s", deps=None, usage=RunUsage(), input=task)
    await tools.read_file(asked, "/text.py")
    with pytest.raises(ToolError) as missing:
        await tools.edit_file(asked, "/text.py", "slugify('Hello World')", "slugify('hello')")
    assert str(missing.value).endswith(
        ". The line \"slugify('Hello World')\" is in /test_text.py (line 1), the tests that "
        "check the fix, which stay as they are: in /text.py, change the code that gives the "
        "wrong result"
    )


async def test_a_file_changed_since_the_run_saw_it_is_not_written_over_unseen() -> None:
    """As measured on the 1.5B model (the user-phrased demo): its code wrote the right totals
    into report.md, then it wrote its own wrong ones from before over them. A write that drops
    numbers the file has now is refused once per change, with the text now there; one that
    keeps them goes through (seen: totals.json, which the code wrote with str(), written again
    as valid JSON)."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    await tools.write_file(ctx, "/report.md", "| south | 280 |\n")
    await backend.write("/report.md", "| south | 180 |\n")  # (the code the model ran)
    with pytest.raises(ToolError, match="changed since you last read or wrote it") as refused:
        await tools.write_file(ctx, "/report.md", "| south | 280 |\n| total | 280 |\n")
    assert "this text would drop 180 from it. It now reads:\n| south | 180 |\nIf" in str(
        refused.value
    )
    assert await backend.read("/report.md") == "| south | 180 |\n"
    # shown once: the next write is the model's choice
    await tools.write_file(ctx, "/report.md", "| south | 280 |\n")
    # a rewrite that keeps the numbers the code wrote goes through
    await tools.write_file(ctx, "/totals.json", '{"south": 1}')
    await backend.write("/totals.json", "{'south': 180}")
    await tools.write_file(ctx, "/totals.json", '{"south": 180}')
    # a file read after the change, or edited, is no stale copy
    await backend.write("/report.md", "| south | 1 |\n")
    await tools.read_file(ctx, "/report.md")
    await tools.write_file(ctx, "/report.md", "| south | 2 |\n")
    await backend.write("/report.md", "| south | 3 |\n")
    await tools.edit_file(ctx, "/report.md", "3", "4")
    await tools.write_file(ctx, "/report.md", "| south | 5 |\n")
    # a long file changed is not shown: read it
    await backend.write("/report.md", "".join(f"row {n}\n" for n in range(500)))
    with pytest.raises(ToolError, match=r"otherwise call read_file\('/report.md'\)") as long:
        await tools.write_file(ctx, "/report.md", "short\n")
    assert "row 1\n" not in str(long.value) and "drop 0, 1, 2, 3, 4 from it" in str(long.value)


async def test_a_file_written_back_with_line_numbers_in_front_is_left_as_it_is() -> None:
    """As measured on the 1.5B model: asked how many hours a person logged, it read
    timesheet.csv and wrote it back with "1," in front of each line."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    original = "date,person,hours\n2024-03-04,Priya,7.5\n2024-03-05,Sam,8\n"
    await backend.write("/timesheet.csv", original)
    await tools.read_file(ctx, "/timesheet.csv")
    numbered = "1,date,person,hours\n2,2024-03-04,Priya,7.5\n3,2024-03-05,Sam,8"
    tabbed = numbered.replace("1,", "     1\t", 1)  # (one line as read_file shows it)
    spaced = numbered.replace(",", " ", 1).replace("\n2,", "\n2 ").replace("\n3,", "\n3 ")
    for copy in (numbered, tabbed, spaced):
        with pytest.raises(ToolError, match="with a line number in front of each line"):
            await tools.write_file(ctx, "/timesheet.csv", copy)
        assert await backend.read("/timesheet.csv") == original
    original = "a\nb\n"
    await backend.write("/timesheet.csv", original)
    await tools.read_file(ctx, "/timesheet.csv")  # (changed since read: it is read again)
    # a numbered list is what "number the lines" asks for; numbers over other text are data
    await tools.write_file(ctx, "/timesheet.csv", "1. a\n2. b\n")
    await tools.write_file(ctx, "/timesheet.csv", "1,x\n2,y\n")
    assert await backend.read("/timesheet.csv") == "1,x\n2,y\n"


async def test_line_numbers_are_dropped_only_where_they_must_be_copies() -> None:
    """Review findings: a numbered old_string that is empty without its number, and a file
    really in read_file's format, were changed in ways nobody asked for."""
    backend = StateBackend()
    tools = FileTools(backend)
    await backend.write("/a.txt", "a\n\nb\n\nc\n")
    with pytest.raises(ToolError, match="not found"):
        await tools.edit_file(CTX, "/a.txt", "     2\t\n", "", replace_all=True)
    assert await backend.read("/a.txt") == "a\n\nb\n\nc\n"
    numbered = "     1\tone\n     2\ttwo\n"
    await backend.write("/listing.txt", numbered)  # a file in that format: kept as it is
    await tools.edit_file(CTX, "/listing.txt", "     2\ttwo", "     2\tTWO")
    assert await backend.read("/listing.txt") == "     1\tone\n     2\tTWO\n"


async def test_a_json_or_python_file_that_does_not_parse_gets_a_note() -> None:
    """As measured on the 1.5B model: config.json written as 'name: agentica'."""
    tools = FileTools(StateBackend())
    out = await tools.write_file(CTX, "/config.json", "{name: agentica, version: 1")
    assert "Note: /config.json is not valid JSON (Expecting property name" in out
    out = await tools.write_file(CTX, "/fib.py", "def fib(n):\nreturn n\n")
    assert "Note: /fib.py is not valid Python (line 2: expected an indented block" in out
    for path, text in (("/ok.json", '{"name": "agentica"}'), ("/ok.py", "x = 1\n")):
        assert "Note" not in await tools.write_file(CTX, path, text)


async def test_an_edit_that_leaves_a_setting_without_its_name_gets_a_note() -> None:
    """As measured on the 1.5B model: "Turn off debug mode" became edit_file(old="debug",
    new="", replace_all=True), leaving " = true" in config.ini."""
    backend = StateBackend()
    tools, ctx = FileTools(backend), context()
    await backend.write("/config.ini", "[app]\nname = shop\ndebug = true\n")
    out = await tools.edit_file(ctx, "/config.ini", "debug", "", replace_all=True)
    assert out.endswith(
        "Note: line 3 of /config.ini ('= true') has a value but no setting name: the name was "
        "removed. Put the name back (name = value)."
    )
    fine = await tools.edit_file(ctx, "/config.ini", " = true", "debug = false")
    assert "Note" not in fine
    toml = await tools.write_file(ctx, "/pyproject.toml", "[project]\nname = shop\n")
    assert "Note: /pyproject.toml is not valid TOML" in toml
    assert "Note" not in await tools.write_file(ctx, "/ok.toml", '[project]\nname = "shop"\n')


@pytest.mark.parametrize(
    ("content", "stored"),
    [
        # seen on the 1.5B model, three times over despite the note that it is not JSON
        ("name: agentica\nversion: 1", {"name": "agentica", "version": 1}),
        ("- ada\n- grace\n", ["ada", "grace"]),
        ("servers:\n  web: 8080\n", {"servers": {"web": 8080}}),
    ],
)
async def test_yaml_style_lines_written_to_a_json_file_are_stored_as_json(
    content: str, stored: Any
) -> None:
    backend = StateBackend()
    tools = FileTools(backend)
    out = await tools.write_file(CTX, "/config.json", content)
    assert json.loads(await backend.read("/config.json")) == stored
    assert "YAML-style key: value lines, not JSON, so it was written as this JSON" in out
    assert "not valid JSON" not in out


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("/config.json", "agentica"),  # a lone word is no mapping: left as written
        ("/config.json", "when: 2024-03-04\n"),  # a date JSON has no form for
        ("/config.yaml", "name: agentica\n"),  # not a .json file
        ("/ok.json", '{"name": "agentica"}'),
    ],
)
async def test_only_a_yaml_mapping_or_list_in_a_json_file_is_converted(
    path: str, content: str
) -> None:
    backend = StateBackend()
    await FileTools(backend).write_file(CTX, path, content)
    assert await backend.read(path) == content


async def test_a_write_before_the_files_the_task_names_were_read_is_refused_once() -> None:
    """As measured on the deep agent: "Write the lines of lines.txt in reverse order to
    reversed.txt" answered by writing invented lines first, then copying them after reading."""
    backend = StateBackend()
    await backend.write("/lines.txt", "a\nb\n")
    tools = FileTools(backend)
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), input=(
        "Write the lines of lines.txt in reverse order to reversed.txt (see notes.md)."
    ))  # fmt: skip
    with pytest.raises(ToolError, match=r"the task names lines.txt, which you have not read"):
        await tools.write_file(ctx, "/reversed.txt", "line 2\nline 1\n")
    assert await backend.stat("/reversed.txt") is None  # nothing written; notes.md is no file
    # refused once per file: a second attempt is written (the answer check notes it then)
    assert (await tools.write_file(ctx, "/reversed.txt", "x\n")).startswith("wrote /reversed.txt")
    fresh = RunContext(run_id="r2", deps=None, usage=RunUsage(), input=ctx.input)
    await tools.read_file(fresh, "/lines.txt")
    assert (await tools.write_file(fresh, "/out.txt", "b\na\n")).startswith("wrote")
    # only files named before the one written are its sources ("Create a.txt and change b.txt")
    await backend.write("/b.txt", "old\n")
    later = RunContext(run_id="r4", deps=None, usage=RunUsage(), input="Create a.txt, edit b.txt")
    assert (await tools.write_file(later, "/a.txt", "new\n")).startswith("wrote /a.txt")
    # the file to write may itself be named; the refusal can be turned off
    own = RunContext(run_id="r3", deps=None, usage=RunUsage(), input="Fill in lines.txt")
    await FileTools(backend, read_before_overwrite=False).write_file(own, "/lines.txt", "c\n")
    off = FileTools(backend, read_task_files=False)
    assert (await off.write_file(context(), "/other.txt", "y\n")).startswith("wrote")


async def test_a_written_file_that_shares_no_word_with_its_read_source_gets_a_note() -> None:
    """As measured on the deep agent: after reading lines.txt ("one, two, three") it wrote
    "line 1, line 2, line 3" to reversed.txt and answered "Done."."""
    backend = StateBackend()
    await backend.write("/lines.txt", "one\ntwo\nthree\n")
    tools = FileTools(backend)
    task = "Write the lines of lines.txt in reverse order to reversed.txt."
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), input=task)
    await tools.read_file(ctx, "/lines.txt")
    out = await tools.write_file(ctx, "/reversed.txt", "line 1\nline 2\nline 3\n")
    assert "[check] No word of what you wrote is in /lines.txt" in out
    assert await backend.read("/reversed.txt") == "line 1\nline 2\nline 3\n"  # (a note only)
    assert "[check]" not in await tools.write_file(ctx, "/reversed.txt", "three\ntwo\none\n")
    # numbers made from its numbers ("double each number"): left alone (review finding)
    await backend.write("/numbers.txt", "3\n5\n7\n")
    doubled = RunContext(run_id="d", deps=None, usage=RunUsage(), input=(
        "Double each number in numbers.txt and write the results to doubled.txt."
    ))  # fmt: skip
    await tools.read_file(doubled, "/numbers.txt")
    assert "[check]" not in await tools.write_file(doubled, "/doubled.txt", "6\n10\n14\n")
    # code, a short text or one line (a count), a file the task does not name: left alone
    for path, text in [
        ("/reversed.py", "print(1, 2, 3)\nprint(4)\n"),
        ("/reversed.txt", "13\n"),
        ("/reversed.txt", "The file has 13 lines.\n"),
    ]:
        assert "[check]" not in await tools.write_file(ctx, path, text)
    assert "[check]" not in await tools.write_file(ctx, "/other.txt", "alpha beta gamma\n")
    unread = RunContext(run_id="u", deps=None, usage=RunUsage(), input="Summarise the notes.")
    assert "[check]" not in await tools.write_file(unread, "/sum.txt", "alpha beta gamma\n")
    off = FileTools(backend, read_task_files=False)
    await off.read_file(ctx, "/lines.txt")
    assert "[check]" not in await off.write_file(ctx, "/reversed.txt", "line 1\nline 2\n")


async def test_a_rewrite_that_drops_a_line_says_which() -> None:
    """As measured on the deep agent: setup.cfg written back with the version bumped and its
    [metadata] line gone, the task failed on it. A changed line is a change, not a loss."""
    backend = StateBackend()
    before = "[metadata]\nname = cli\nversion = 1.4.2\n\n[options]\npython = 3.9\n"
    await backend.write("/setup.cfg", before)
    tools, ctx = FileTools(backend), context()
    await tools.read_file(ctx, "/setup.cfg")
    out = await tools.write_file(
        ctx, "/setup.cfg", "name = cli\nversion = 1.5.0\n\n[options]\npython = 3.9\n"
    )
    assert "[check] /setup.cfg lost this line: '[metadata]'. If the task did not ask" in out
    out = await tools.write_file(ctx, "/setup.cfg", before.replace("1.4.2", "1.5.0"))
    assert "[check]" not in out  # (the line back; the version changed)


async def test_a_file_written_back_unchanged_is_refused() -> None:
    """As measured on the deep agent: "Subtract the quantities in orders.csv from stock.csv and
    save the updated stock back" answered by writing stock.csv back as it was, three times."""
    backend = StateBackend()
    await backend.write("/stock.csv", "item,qty\napples,40\n")
    tools, ctx = FileTools(backend), context()
    await tools.read_file(ctx, "/stock.csv")
    with pytest.raises(ToolError, match=r"this is /stock\.csv as it is now, so nothing would"):
        await tools.write_file(ctx, "/stock.csv", "item,qty\napples,40")  # (but the last \n)
    out = await tools.write_file(ctx, "/stock.csv", "item,qty\napples,20\n")
    assert out.startswith("wrote /stock.csv")


async def test_a_valid_python_file_is_not_replaced_by_text_that_does_not_parse() -> None:
    """As measured on the deep agent: main.py written twice with its top-level lines indented by
    a tab; the note that it was not valid Python went unheeded, the task failed on it."""
    backend = StateBackend()
    source = "def f(t):\n    return t\n\nprint(f(1))\n"
    await backend.write("/main.py", source)
    tools = FileTools(backend)
    ctx = context()
    await tools.read_file(ctx, "/main.py")
    broken = "def f(t):\n    return t\n\n\tprint(f(1))\n"
    with pytest.raises(ToolError, match=re.escape("not: line 4 ('\\tprint(f(1))'): ")):
        await tools.write_file(ctx, "/main.py", broken)
    assert await backend.read("/main.py") == source
    fixed = await tools.write_file(ctx, "/main.py", "from t import f\n\nprint(f(1))\n")
    assert fixed.startswith("wrote /main.py")
    # only the indentation is refused: other syntax depends on the Python version (review
    # finding: f"{d['a']}" is valid from 3.12 on), so it is written with a note
    newer = "d = {'a': 1}\nprint(f'{d['a']}')\n"
    assert "wrote /main.py" in await tools.write_file(ctx, "/main.py", newer)
    # a new file, or a file already broken, is written with a note, as before
    assert "not valid Python" in await tools.write_file(ctx, "/new.py", broken)
    assert "not valid Python" in await tools.write_file(ctx, "/new.py", broken + "x(")


@pytest.mark.parametrize(
    ("path", "content", "why"),
    [
        ("/money.py", "<tool_response>", "'<tool_response>' is a marker of the conversation"),
        ("/a.txt", " <|im_end|>\n", "'<|im_end|>' is a marker of the conversation"),
        ("/stats.py", "import unittest\nfrom stats import mean\n", "this code imports stats"),
        ("/pkg/util.py", "import os\nimport util\n", "this code imports util"),
    ],
)
async def test_text_that_cannot_be_the_file_is_refused(path: str, content: str, why: str) -> None:
    """As measured on the 1.5B model: money.py overwritten with "<tool_response>"; the tests of
    test_stats.py written into stats.py, which they import."""
    backend = StateBackend()
    tools = FileTools(backend)
    with pytest.raises(ToolError, match=re.escape(why)):
        await tools.write_file(context(), path, content)
    assert await backend.stat(path) is None
    # a module importing another, or a file that mentions a marker among other text, is written
    for name, text in [("stats", "from statistics import mean\n"), ("b", "see <tool_call>\n")]:
        assert (await tools.write_file(context(), f"/{name}.py", text)).startswith("wrote")


async def test_the_tests_that_judge_a_fix_are_not_changed() -> None:
    """As measured on the 1.5B model: told that stats.py cannot be the tests, it edited
    test_stats.py to expect the bug's result. A change to those tests is refused six times
    per run (fix-slugify's fourth edit of them went through); tests the task asks to write or
    fix are the model's to change."""
    backend = StateBackend()
    await backend.write("/test_stats.py", "assert mean([2, 4, 6]) == 4\n")
    tools = FileTools(backend)
    task = "The tests in test_stats.py fail. Fix stats.py so they pass."
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), input=task)
    await tools.read_file(ctx, "/test_stats.py")
    with pytest.raises(ToolError, match="holds the tests the task uses to check the fix"):
        await tools.edit_file(ctx, "/test_stats.py", "== 4", "== 4.5")
    assert await backend.read("/test_stats.py") == "assert mean([2, 4, 6]) == 4\n"
    for _ in range(5):  # (six times per run)
        with pytest.raises(ToolError, match="holds the tests the task uses"):
            await tools.edit_file(ctx, "/test_stats.py", "== 4", "== 4.5")
    edited = await tools.edit_file(ctx, "/test_stats.py", "== 4", "== 4.0")
    assert edited.startswith("edited /test_stats.py")
    for wanted in ("Add a test for mean to test_stats.py", "Fix the failing tests in test_a.py"):
        asked = RunContext(run_id="w", deps=None, usage=RunUsage(), input=wanted)
        await tools.read_file(asked, "/test_stats.py")
        out = await tools.write_file(
            asked, "/test_stats.py", f"assert mean([1]) == 1  # {wanted}\n"
        )
        assert out.startswith("wrote /test_stats.py")


async def test_a_file_that_is_not_there_is_answered_with_what_its_folder_holds() -> None:
    """As measured on sum-files: /data/numbers.txt, made up, read nine times after ls('/data')
    had shown a.txt, b.txt and c.txt."""
    backend = StateBackend()
    for name in ("a.txt", "b.txt"):
        await backend.write(f"/data/{name}", "1\n")
    await backend.write("/data/more/c.txt", "2\n")
    tools = FileTools(backend)
    with pytest.raises(ToolError) as missing:
        await tools.read_file(CTX, "/data/numbers.txt")
    assert str(missing.value) == (
        "no file /data/numbers.txt; call ls('/data') to see what exists. /data holds: a.txt, "
        "b.txt, more/"
    )
    with pytest.raises(ToolError) as nowhere:  # (no folder: the plain error)
        await tools.read_file(CTX, "/nope/x.txt")
    assert "holds" not in str(nowhere.value)
    for n in range(40):  # (a big folder is not listed)
        await backend.write(f"/big/{n}.txt", "")
    with pytest.raises(ToolError) as big:
        await tools.read_file(CTX, "/big/x.txt")
    assert "holds" not in str(big.value)
    await backend.write("/only/a.txt", "5\n10\n")  # (a few small files: their text too)
    await backend.write("/only/b.txt", "7\n")
    with pytest.raises(ToolError) as small:
        await tools.read_file(CTX, "/only/numbers.txt")
    assert str(small.value).endswith(
        ". /only holds: a.txt, b.txt; they read:\n--- /only/a.txt\n5\n10\n--- /only/b.txt\n7\n"
    )


async def test_grep_names_the_section_of_a_match_in_a_config_file() -> None:
    """As measured on server-port: grep found "port = 5432" and "port = 8080" in settings.ini,
    and the model answered the database's port for the web server's."""
    backend = StateBackend()
    await backend.write("/settings.ini", "[database]\nport = 5432\n\n[server]\nport = 8080\n")
    await backend.write("/notes.txt", "[server]\nport = 1\n")
    tools = FileTools(backend)
    assert await tools.grep(CTX, "port", "/settings.ini", output_mode="content") == (
        "/settings.ini:2:port = 5432  (in [database])\n/settings.ini:5:port = 8080  (in [server])"
    )
    assert await tools.grep(CTX, "port", "/notes.txt", output_mode="content") == (
        "/notes.txt:2:port = 1"  # (not a config file)
    )


async def test_an_edit_that_renames_a_name_says_where_it_is_still_used() -> None:
    """As measured on rename-across: fmt_money renamed where it is defined, report.py still
    importing and calling it, and the task answered."""
    backend = StateBackend()
    await backend.write("/helpers.py", "def fmt_money(amount):\n    return f'{amount:.2f}'\n")
    await backend.write("/report.py", "from helpers import fmt_money\n\nx = fmt_money(2)\n")
    await backend.write("/.results/old.txt", "fmt_money\n")  # (an evicted tool result)
    tools = FileTools(backend)
    renamed = await tools.edit_file(CTX, "/helpers.py", "def fmt_money(", "def format_money(")
    assert renamed == (
        "edited /helpers.py: replaced 1 occurrence at line 1\n[note] fmt_money is still used at "
        "/report.py:1, /report.py:3. If those are the name you renamed, change them too "
        "(edit_file with replace_all=true changes every one in a file)."
    )
    done = await tools.edit_file(CTX, "/report.py", "fmt_money", "format_money", replace_all=True)
    assert done == "edited /report.py: replaced 2 occurrences"  # (none left: no note)
    fixed = await tools.edit_file(CTX, "/helpers.py", "{amount:.2f}", "{amount:,.2f}")
    assert "[note]" not in fixed  # (no name changed)
    for n in range(12):
        await backend.write(f"/doc{n:02}.txt", "the colour\n")
    spelled = await tools.edit_file(CTX, "/doc00.txt", "colour", "color")
    assert spelled.endswith(
        "colour is still used at /doc01.txt:1, /doc02.txt:1, /doc03.txt:1, /doc04.txt:1, "
        "/doc05.txt:1, /doc06.txt:1, /doc07.txt:1, /doc08.txt:1, /doc09.txt:1, /doc10.txt:1 and "
        "1 more. If those are the name you renamed, change them too (edit_file with "
        "replace_all=true changes every one in a file)."
    )


async def test_the_same_read_right_after_itself_says_what_to_do_instead(tmp_path: Path) -> None:
    """As measured on fix-page-count and oldest-person: test_paging.py and people.json read
    four times in a row, each time the same text."""
    (tmp_path / "test_paging.py").write_text("import unittest\n\nfrom paging import count\n")
    (tmp_path / "paging.py").write_text("def count(n):\n    return n\n")
    (tmp_path / "people.json").write_text('[{"name": "A", "born": 1950}]\n')
    (tmp_path / "notes.md").write_text("# notes\n")

    def python(code: str) -> str:
        """Run Python code.

        Args:
            code: the code.
        """
        return "ran"

    model = ScriptedModel([
        *[tool_calls(call("read_file", path="/test_paging.py")) for _ in range(2)],
        tool_calls(call("read_file", path="/paging.py")),
        tool_calls(call("read_file", path="/test_paging.py")),
        tool_calls(call("read_file", path="/test_paging.py")),
        *[tool_calls(call("read_file", path="/people.json")) for _ in range(2)],
        tool_calls(call("read_file", path="/people.json", offset=0, limit=5)),
        *[tool_calls(call("read_file", path="/notes.md")) for _ in range(2)],
        "done",
    ])  # fmt: skip
    tools = FileTools(FilesystemBackend(tmp_path))
    agent = Agent(model=model, tools=[tools, Function.from_callable(python, name="run_python")])
    await agent.run("The tests in test_paging.py fail. Who is the oldest?")
    results = [m.content for m in tool_results(agent)]
    assert results[0].startswith("     1\timport unittest")
    assert results[1] == (
        "/test_paging.py has not changed since you last read it: its text is in "
        "that result above. It imports from /paging.py, which you have not read: read "
        "/paging.py next."
    )
    assert results[3].startswith("     1\timport unittest")  # (not right after its last read)
    assert results[4].startswith("/test_paging.py has not changed")
    assert results[4].endswith("Do not read it again: go on with the next step, or answer.")
    assert results[5].startswith("[")
    assert results[6].endswith(
        "do not read it again: run code that reads it and prints the result with run_python."
    )
    assert results[7].startswith("[")  # (another part of it: read)
    assert results[9].startswith("/notes.md has not changed")


async def test_a_read_again_with_other_calls_between_asks_for_the_change(tmp_path: Path) -> None:
    """As measured on config-repeat: config.json read five times, a todo list saved between
    the reads, then edit_file(old_string="repeat", new_string="repeat 3") sent twice."""
    (tmp_path / "config.json").write_text('{"greeting": "Hello", "name": "team"}\n')

    def note(text: str) -> str:
        """Keep a note.

        Args:
            text: the note.
        """
        return "kept"

    added = json.dumps({
        "path": "config.json",
        "old_string": '{"greeting": "Hello", "name": "team"}',
        "new_string": '{"greeting": "Hello", "name": "team", "repeat": 3}',
    })  # fmt: skip
    model = ScriptedModel([
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("note", text="plan")),
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("edit_file", path="config.json", old_string="repeat",
                        new_string="repeat 3")),
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("edit_file", **json.loads(added))),
        tool_calls(call("note", text="a")), tool_calls(call("note", text="b")),
        tool_calls(call("note", text="c")), tool_calls(call("note", text="d")),
        tool_calls(call("read_file", path="config.json")),
        "done",
    ])  # fmt: skip
    tools = FileTools(FilesystemBackend(tmp_path))
    agent = Agent(model=model, tools=[tools, Function.from_callable(note)])
    task = "Add a repeat setting to config.json, set to 3, and make app.py print it that often."
    await agent.run(task)
    results = [m.content for m in tool_results(agent)]
    assert results[2] == (
        '{"greeting": "Hello", "name": "team"}\n\n[note] config.json is as it was when you last '
        "read it. The task asks for a change: make it now with edit_file (old_string copied "
        "from this text, new_string the same text changed)."
    )
    assert results[3] == (
        'old_string was not found in config.json. To add "repeat": 3 to the object in it, '
        f"put it before its closing brace: call edit_file({added})"
    )
    assert results[4].startswith('{"greeting"')  # (the read a failed edit asks for: the text)
    assert json.loads((tmp_path / "config.json").read_text()) == {
        "greeting": "Hello", "name": "team", "repeat": 3,
    }  # fmt: skip
    assert results[10] == '{"greeting": "Hello", "name": "team", "repeat": 3}'  # (4 between)
    # right after itself, in a task that asks to change the file: the change, not the text
    model = ScriptedModel([
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("read_file", path="config.json")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path))])
    await agent.run("config.json has a typo in its greeting. Fix the file.")
    assert tool_results(agent)[1].content == (
        "config.json has not changed since you last read it: its text is in that result above. "
        "The task asks for a change: do not read it again, make the change with edit_file "
        "(old_string copied from that text, new_string the same text changed)."
    )
    # in a question, with a call between: the text again, no note
    model = ScriptedModel([
        tool_calls(call("read_file", path="config.json")),
        tool_calls(call("note", text="x")),
        tool_calls(call("read_file", path="config.json")),
        "team",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path)), note])
    await agent.run("What is the name in config.json?")
    assert tool_results(agent)[2].content.startswith('{"greeting"')
    assert "[note]" not in tool_results(agent)[2].content


async def test_a_file_the_task_wrote_read_again_is_for_the_final_answer(tmp_path: Path) -> None:
    """As measured on csv-totals: the totals.json it had just written read five times over,
    told each time to compute from it. Read again at once, a file this run wrote is the cue
    to answer (or to change it), not to compute from it."""
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,3\n")
    model = ScriptedModel([
        *[tool_calls(call("read_file", path="sales.csv")) for _ in range(2)],
        tool_calls(call("write_file", path="totals.json", content='{"north": 3}')),
        *[tool_calls(call("read_file", path="totals.json")) for _ in range(2)],
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path))])
    await agent.run("Compute the total per region of sales.csv and write it to totals.json.")
    results = [m.content for m in tool_results(agent)]
    assert "It holds what this task wrote" not in results[1]  # (the data, there before)
    # in a task that asks to change the file, once it was changed: no "make the change" (seen
    # on fix-bug: buggy.py written right, then told at each read to make the change)
    (tmp_path / "buggy.py").write_text("def add(a, b):\n    return a - b\n")
    fixed = "def add(a, b):\n    return a + b\n"
    model = ScriptedModel([
        tool_calls(call("read_file", path="buggy.py")),
        tool_calls(call("write_file", path="buggy.py", content=fixed)),
        *[tool_calls(call("read_file", path="buggy.py")) for _ in range(2)],
        tool_calls(call("ls", path="/")),
        tool_calls(call("read_file", path="buggy.py")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path))])
    await agent.run("buggy.py has a bug: add(2, 3) should return 5. Fix the file.")
    fix = [m.content for m in tool_results(agent)]
    assert fix[3].endswith(
        "It holds what this task wrote there: if that is what the task asks "
        "for, give your final answer now; if not, change it with edit_file."
    )
    assert fix[5].endswith("\n\n[note] buggy.py holds what this task wrote there: if that is "
                           "what the task asks for, give your final answer now; if not, change "
                           "it with edit_file.")  # fmt: skip
    assert results[4] == (
        "totals.json has not changed since you last read it: its text is in that result "
        "above. It holds what this task wrote there: if that is what the task asks for, give "
        "your final answer now; if not, change it with edit_file."
    )


@pytest.mark.parametrize(
    ("text", "old", "new", "added"),
    [
        (
            '{\n  "a": 1,\n  "b": [1, 2]\n}\n',
            "c",
            '"c": "x"',
            ('  "b": [1, 2]\n}', '  "b": [1, 2],\n  "c": "x"\n}'),
        ),
        ('{"a": 1}', "b", "2", ('{"a": 1}', '{"a": 1, "b": 2}')),
        ('{"a": 1}', "b", "b = true", ('{"a": 1}', '{"a": 1, "b": true}')),
        # (seen on config-repeat: "repeat setting" -> "repeat setting: 3", twice)
        ('{"a": 1}', "repeat setting", "repeat setting: 3", ('{"a": 1}', '{"a": 1, "repeat": 3}')),
        ('{"a": 1}', "zz", "a 2", None),  # (a key it has: a change, not an addition)
        ("[1, 2]", "b", "b 2", None),  # (no object)
        ('{"a": 1}', "b", "two words here", None),
    ],
)
def test_a_key_missing_from_a_json_object_gets_the_edit_that_adds_it(
    text: str, old: str, new: str, added: tuple[str, str] | None
) -> None:
    from agentica.deep.files import plan_edit

    with pytest.raises(ToolError) as refused:
        plan_edit("/settings.json", text, old, new)
    if added is None:
        assert "To add" not in str(refused.value)
    else:
        call_text = str(refused.value).split("call edit_file(", 1)[1].removesuffix(")")
        given = json.loads(call_text)
        assert (given["old_string"], given["new_string"]) == added
        assert json.loads(plan_edit("/settings.json", text, *added).text)


async def test_an_edit_of_code_that_only_adds_a_comment_is_refused(tmp_path: Path) -> None:
    """As measured on fix-unique: ``# Keep the original order`` put under
    ``return list(set(items))``, twice, the tests failing as before."""
    text = "def unique(items):\n    return list(set(items))\n"
    (tmp_path / "lists.py").write_text(text)
    model = ScriptedModel([
        tool_calls(call("edit_file", path="lists.py", old_string="return list(set(items))",
                        new_string="return list(set(items))\n    # Keep the original order")),
        tool_calls(call("edit_file", path="lists.py", old_string="return list(set(items))",
                        new_string="return list(dict.fromkeys(items))  # keep the order")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path))])
    await agent.run("unique() in lists.py should keep the original order. Fix it.")
    refused, edited = (m.content for m in tool_results(agent))
    assert refused == (
        "nothing was changed: new_string is old_string with only a comment added ('# Keep the "
        "original order'), and a comment changes nothing the code does. Change the code "
        "itself: old_string the lines that do the wrong thing, new_string those lines "
        "rewritten to do the right thing"
    )
    assert edited.startswith("edited /lists.py")
    assert "dict.fromkeys" in (tmp_path / "lists.py").read_text()
    # a task about comments may add one
    (tmp_path / "lists.py").write_text(text)
    model = ScriptedModel([
        tool_calls(call("edit_file", path="lists.py", old_string="def unique(items):",
                        new_string="# Order kept.\ndef unique(items):")),
        "done",
    ])  # fmt: skip
    agent = Agent(model=model, tools=[FileTools(FilesystemBackend(tmp_path))])
    await agent.run("Add a comment above unique() in lists.py.")
    assert (tmp_path / "lists.py").read_text().startswith("# Order kept.\n")


async def test_an_edit_that_adds_text_the_file_already_has_says_so() -> None:
    """As measured on american-spelling: a line replaced by itself and the two lines after it,
    which README.md then had twice, "colour" unchanged."""
    backend = StateBackend()
    text = "# Palette\n\nPalette picks a colour.\nYou can change the colour of the header.\n"
    await backend.write("/README.md", text)
    tools = FileTools(backend)
    with pytest.raises(ToolError) as doubled:  # (prose: refused, the file as it was)
        await tools.edit_file(
            CTX, "/README.md", "Palette picks a colour.",
            "Palette picks a colour. You can change the colour of the header.",
        )  # fmt: skip
    assert str(doubled.value).startswith(
        "nothing was changed: new_string adds 'You can change the colour of the header.', "
        "which /README.md already has elsewhere, so it would be there twice."
    )
    assert await backend.read("/README.md") == text
    added = await tools.edit_file(CTX, "/README.md", "# Palette", "# Palette\n\nA new intro line.")
    assert "[note]" not in added  # (new text)
    code = "def mean(values):\n    total = 0\n    return total / len(values)\n"
    await backend.write("/stats.py", code)
    pasted = await tools.edit_file(  # (code may repeat a line: written, with a note)
        CTX, "/stats.py", "def mean(values):", "def mean(values):\n    return total / len(values)"
    )
    assert pasted.startswith("edited /stats.py: replaced 1 occurrence at line 1\n")
    assert "[note] new_string adds 'return total / len(values)', which /stats.py already had: " in (
        pasted
    )


async def test_reading_a_file_the_task_names_that_is_not_there_says_to_create_it() -> None:
    """As measured on primes: "Write primes.txt listing ..." planned as "Read primes.txt"
    first, then read_file and ls in turn for 39 calls."""
    tools = FileTools(StateBackend())
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), input="Write primes.txt, please.")
    with pytest.raises(ToolError) as missing:
        await tools.read_file(ctx, "/primes.txt")
    assert str(missing.value).endswith(
        ". The task names primes.txt and it does not exist yet, so there is nothing to read: it "
        "is a file to create with write_file (a step to read it is done)"
    )
    with pytest.raises(ToolError) as other:
        await tools.read_file(ctx, "/other.txt")
    assert "task names" not in str(other.value)


async def test_a_code_file_written_over_with_none_of_its_lines_is_refused_in_a_change_task() -> (
    None
):
    """As measured on rename-across: helpers.py's renamed function written over main.py, all
    of whose lines were lost. Refused when the task asks to change files; a task that asks to
    write files, a file of the run's own, and a data file are written."""
    backend = StateBackend()
    main = "from report import summary\n\nprint(summary([1, 2]))\n"  # (two lines are enough)
    await backend.write("/main.py", main)
    await backend.write("/data.csv", "a,b\n1,2\n3,4\n")
    tools = FileTools(backend)
    task = "Rename fmt_money to format_money everywhere in this project."
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), input=task)
    await tools.read_file(ctx, "/main.py")
    new = "def format_money(amount):\n    return f'${amount:.2f}'\n"
    with pytest.raises(ToolError) as refused:
        await tools.write_file(ctx, "/main.py", new)
    assert str(refused.value).startswith(
        "nothing was written: none of the 2 lines /main.py has would be left (it starts "
        "'from report import summary'), and the task asks to change files"
    )
    assert await backend.read("/main.py") == main
    kept = main.replace("summary([1, 2])", "summary([1, 2, 3])")
    assert (await tools.write_file(ctx, "/main.py", kept)).startswith("wrote /main.py")
    await tools.read_file(ctx, "/data.csv")
    assert (await tools.write_file(ctx, "/data.csv", "x\n9\n")).startswith("wrote /data.csv")
    await tools.write_file(ctx, "/mine.py", "a = 1\nb = 2\nc = 3\n")
    assert (await tools.write_file(ctx, "/mine.py", new)).startswith("wrote /mine.py")
    writing = RunContext(run_id="w", deps=None, usage=RunUsage(), input="Write main.py anew.")
    await tools.read_file(writing, "/main.py")
    assert (await tools.write_file(writing, "/main.py", new)).startswith("wrote /main.py")
