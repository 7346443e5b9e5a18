"""Skills: Markdown files with YAML front matter, their folders' precedence, and activation."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

import agentica
from agentica import Agent, tool
from agentica.deep.skills import (
    BUILTIN_SKILLS_DIR,
    SkillError,
    Skills,
    load_skill,
    parse_skill,
    user_skills_dir,
)
from agentica.errors import UsageError
from agentica.messages import SystemMessage, ToolMessage
from agentica.models import ModelRequest
from agentica.testing import ScriptedModel, call, tool_calls


async def put(path: Path, content: str | bytes) -> Path:
    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    await asyncio.to_thread(write)
    return path


def skill_text(name: str, description: str = "", body: str = "", **front: str) -> str:
    lines = [f"name: {name}", f"description: {description or f'The {name} skill.'}"]
    lines += [f"{key}: {value}" for key, value in front.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n{body or f'Do the {name} steps.'}\n"


def offered(request: ModelRequest) -> set[str]:
    return {t.name for t in request.tools}


def system_text(request: ModelRequest) -> str:
    first = request.messages[0]
    return first.content if isinstance(first, SystemMessage) else ""


def results(request: ModelRequest) -> list[ToolMessage]:
    return [m for m in request.messages if isinstance(m, ToolMessage)]


class Effects:
    """Tools with visible side effects: the calls that really ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def read_file(path: str) -> str:
            """Read a file."""
            self.ran.append(f"read {path}")
            return "content"

        @tool
        def write_file(path: str, content: str) -> str:
            """Write a file."""
            self.ran.append(f"write {path}")
            return "written"

        @tool
        def shell(command: str) -> str:
            """Run a command."""
            self.ran.append(f"shell {command}")
            return "ok"

        self.tools = [read_file, write_file, shell]


COMMIT = skill_text(
    "commit",
    "Commit the staged changes with a good message.",
    "# Commit\nRun git diff --staged, then commit with a conventional message.",
    trigger="/commit",
    **{"allowed-tools": "shell, read_file"},
)


# ---------------------------------------------------------------------------------- the file


def test_a_skill_file_with_every_field_and_the_other_spellings() -> None:
    skill = parse_skill(
        "\ufeff---\n"
        "name: commit\n"
        "description: >\n  Commit the staged\n  changes.\n"
        "trigger: /commit\n"
        "requires: [shell]\n"
        "allowed-tools: shell read_file, grep\n"
        "license: MIT\n"
        "---\n\n# Commit\nSteps.\n",
        path="skills/commit.md",
    )
    assert skill.name == "commit" and skill.trigger == "/commit"
    assert skill.summary == "Commit the staged changes."
    assert skill.required_tools == ("shell",)
    assert skill.allowed_tools == ("shell", "read_file", "grep")
    assert skill.instructions == "# Commit\nSteps."
    assert skill.metadata == {"license": "MIT"} and skill.path == Path("skills/commit.md")
    plain = parse_skill(skill_text("notes"))
    assert plain.trigger is None and plain.allowed_tools is None and plain.required_tools == ()


MALFORMED = [
    ("no front matter", "# Just Markdown\n", 1, "must start with a '---' line"),
    ("never closed", "---\nname: a\ndescription: b\n\nBody.\n", 1, "never closed"),
    (
        "bad YAML",
        "---\nname: a\ndescription: a: b\n---\nBody\n",
        3,
        "invalid YAML in the front matter, column 15: mapping values are not allowed here",
    ),
    (
        "open quote",
        '---\nname: a\n\ndescription: "b\n---\nBody\n',
        5,
        "found unexpected end of stream (while scanning a quoted scalar started on line 4)",
    ),
    ("a tab", "---\nname: a\n\tdescription: b\n---\nBody\n", 3, "cannot start any token"),
    (
        "no name",
        "---\ndescription: b\n---\nBody\n",
        1,
        "the front matter (lines 1-3) has no 'name'",
    ),
    ("no description", "---\nname: a\n---\nBody\n", 1, "has no 'description'"),
    (
        "name a list",
        "---\ndescription: b\nname: [a, b]\n---\nB\n",
        3,
        "'name' must be a non-empty text, got a list",
    ),
    ("empty description", "---\nname: a\ndescription:\n---\nB\n", 3, "got nothing"),
    (
        "bad name",
        "---\nname: my skill\ndescription: b\n---\nB\n",
        2,
        "name 'my skill' is not allowed",
    ),
    (
        "bad trigger",
        "---\nname: a\ndescription: b\ntrigger: commit\n---\nB\n",
        4,
        "write '/' and one word",
    ),
    (
        "tools a number",
        "---\nname: a\ndescription: b\n\nallowed_tools: 5\n---\nB\n",
        5,
        "'allowed_tools' must be a list of tool names, got a number",
    ),
    (
        "tools a mapping",
        "---\nname: a\ndescription: b\nrequires: {a: 1}\n---\nB\n",
        4,
        "'requires' must be a list",
    ),
    (
        "unknown key",
        "---\nname: a\ndescription: b\ntrigers: /a\n---\nB\n",
        4,
        "unknown key 'trigers'; a skill has name, description, trigger",
    ),
    (
        "twice",
        "---\nname: a\ndescription: b\nname: c\n---\nB\n",
        4,
        "'name' is given twice (first on line 2)",
    ),
    (
        "two spellings",
        "---\nname: a\ndescription: b\nrequires: [x]\nrequired_tools: [y]\n---\nB\n",
        5,
        "repeats 'required_tools'",
    ),
    ("a list", "---\n- name\n- description\n---\nB\n", 2, "must be 'key: value' lines"),
    ("no instructions", "---\nname: a\ndescription: b\n---\n\n  \n", 4, "has no instructions"),
]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [m[1:] for m in MALFORMED],
    ids=[m[0] for m in MALFORMED],
)
async def test_malformed_files_name_the_file_and_the_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = await put(tmp_path / "bad.md", text)
    with pytest.raises(SkillError) as caught:
        await asyncio.to_thread(load_skill, path)
    error = caught.value
    assert isinstance(error, UsageError)
    assert (error.path, error.line) == (path, line)
    assert str(error).startswith(f"{path}:{line}: ")
    assert message in str(error)


async def test_a_file_that_is_not_utf8_names_the_line_of_the_bad_byte(tmp_path: Path) -> None:
    text = skill_text("cafe", body="Order a\ncaf\u00e9.").encode("latin-1")
    path = await put(tmp_path / "cafe.md", text)
    with pytest.raises(SkillError, match=r"cafe\.md:6: the file is not UTF-8 text \(byte 0xe9"):
        await asyncio.to_thread(load_skill, path)
    bom = await put(tmp_path / "bom.md", "\ufeff" + skill_text("bom", body="Caf\u00e9."))
    assert (await asyncio.to_thread(load_skill, bom)).instructions == "Caf\u00e9."


def test_the_built_in_skills_are_valid_and_shipped_in_the_package() -> None:
    names = sorted(load_skill(p).name for p in BUILTIN_SKILLS_DIR.glob("*.md"))
    assert names == ["review", "test"]
    assert BUILTIN_SKILLS_DIR.is_relative_to(Path(agentica.__file__).parent)  # in the wheel


# ---------------------------------------------------------------------------------- folders


async def test_project_overrides_user_overrides_built_in(tmp_path: Path) -> None:
    user, project = tmp_path / "home" / "skills", tmp_path / "repo"
    await put(user / "review.md", skill_text("review", "User review.", "USER REVIEW"))
    await put(user / "deploy.md", skill_text("deploy", "User deploy.", "USER DEPLOY"))
    await put(user / "notes.md", skill_text("notes", "User notes.", "USER NOTES"))
    await put(project / ".agentica/skills/review.md", skill_text("review", "Repo review.", "REPO"))
    await put(project / ".agentica/skills/deploy/SKILL.md", skill_text("deploy", "Repo deploy."))
    skills = Skills(project, user_dir=user, strict=True)
    assert skills.folders == (BUILTIN_SKILLS_DIR, user, project / ".agentica" / "skills")
    model = ScriptedModel([
        tool_calls("list_skills", call("get_skill_info", name="review")),
        "ok",
    ])  # fmt: skip
    await Agent(model=model, capabilities=[skills]).run("What can you do?")
    listing, info = (m.content for m in results(model.requests[1]))
    assert listing.splitlines() == [
        "- deploy: Repo deploy.",
        "- notes: User notes.",
        "- review: Repo review.",
        "- test (/test): Write tests for the code the user names and run them.",
    ]
    assert info == "# Skill review\nRepo review.\n\nREPO"


async def test_the_user_folder_follows_agentica_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTICA_HOME", str(tmp_path / "ah"))
    assert user_skills_dir() == tmp_path / "ah" / "skills"
    await put(tmp_path / "ah/skills/mine.md", skill_text("mine"))
    loaded = await Skills(tmp_path / "nowhere").load()
    assert {"mine", "review", "test"} <= set(loaded)
    monkeypatch.delenv("AGENTICA_HOME")
    assert user_skills_dir() == Path.home() / ".agentica" / "skills"


async def test_a_later_folder_takes_over_a_trigger_and_the_earlier_skill_keeps_its_name(
    tmp_path: Path,
) -> None:
    await put(tmp_path / "low/unit.md", skill_text("unit", trigger="/check", body="LOW"))
    await put(tmp_path / "high/lint.md", skill_text("lint", trigger="/check", body="HIGH"))
    skills = Skills(folders=[tmp_path / "low", tmp_path / "high"])
    model = ScriptedModel(["ok"])
    await Agent(model=model, capabilities=[skills]).run("/check the code")
    assert "HIGH" in system_text(model.requests[0]) and "LOW" not in system_text(model.requests[0])
    loaded = await skills.load()
    assert loaded["unit"].trigger is None and loaded["lint"].trigger == "/check"


async def test_skills_are_read_on_first_use_and_kept_until_reload(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    skills = Skills(folders=[folder])  # the folder does not even exist yet
    await put(folder / "one.md", skill_text("one"))
    model = ScriptedModel([tool_calls("list_skills"), tool_calls("list_skills"), "ok", "ok"])
    agent = Agent(model=model, capabilities=[skills])
    await agent.run("list")
    assert results(model.requests[1])[-1].content == "- one: The one skill."
    await put(folder / "two.md", skill_text("two"))
    await put(folder / "one.md", "broken now")
    assert results(model.requests[2])[-1].content == "- one: The one skill."
    await agent.run("again")  # the same catalogue: nothing re-read
    assert set(await skills.load()) == {"one"}
    assert [e.path for e in skills.problems] == []
    skills.reload()
    assert set(await skills.load()) == {"two"}
    assert [e.path for e in skills.problems] == [folder / "one.md"]


async def test_a_bad_file_is_skipped_with_a_warning_or_raises_when_strict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "skills"
    await put(folder / "good.md", skill_text("good"))
    await put(folder / "bad.md", "---\nname: bad\n---\nno description\n")
    await put(folder / "README.md", "How to write skills (not a skill).")
    await put(folder / ".draft.md", "editor leftovers")
    await put(folder / "twin.md", skill_text("good", "Again."))
    model = ScriptedModel([tool_calls("list_skills"), "ok"])
    skills = Skills(folders=[folder])
    with caplog.at_level(logging.WARNING, logger="agentica.deep.skills"):
        await Agent(model=model, capabilities=[skills]).run("list")
    assert results(model.requests[1])[-1].content == "- good: The good skill."
    assert [str(p) for p in skills.problems] == [
        f"{folder / 'bad.md'}:1: the front matter (lines 1-3) has no 'description'",
        f"{folder / 'twin.md'}: a second skill named 'good' (the first is "
        f"{folder / 'good.md'}); rename one",
    ]
    assert sum("skipped a skill file" in r.getMessage() for r in caplog.records) == 2

    strict = Skills(folders=[folder], strict=True)
    with pytest.raises(SkillError, match=r"bad\.md:1: .*no 'description'"):
        await strict.load()
    agent = Agent(model=ScriptedModel(["never"]), capabilities=[strict])
    with pytest.raises(SkillError, match=r"bad\.md:1"):
        await agent.run("hello")


# ---------------------------------------------------------------------------------- activation


async def test_a_trigger_adds_the_instructions_and_restricts_the_tools(tmp_path: Path) -> None:
    await put(tmp_path / "skills/commit.md", COMMIT)
    effects = Effects()
    model = ScriptedModel([
        tool_calls(call("write_file", path="x", content="y"), call("shell", command="git diff")),
        "Committed.",
        "Plain answer.",
    ])  # fmt: skip
    agent = Agent(
        model=model,
        tools=effects.tools,
        instructions="Be brief.",
        capabilities=[Skills(folders=[tmp_path / "skills"])],
    )
    await agent.run("/commit fix the readme")
    first, second = model.requests[0], model.requests[1]
    allowed = {"shell", "read_file", "list_skills", "get_skill_info"}
    assert offered(first) == offered(second) == allowed
    assert system_text(first).startswith(
        "Be brief.\n\nThe user asked for this skill; follow its instructions.\n\n"
        "## Skill commit (/commit)\n# Commit\nRun git diff --staged"
    )
    refused, ran = results(second)
    assert refused.is_error and refused.content.startswith("Unknown tool 'write_file'.")
    assert not ran.is_error and effects.ran == ["shell git diff"]  # write_file never ran

    await agent.run("thanks, what else?")  # the skill was for that run only
    assert offered(model.requests[2]) == {*allowed, "write_file"}
    assert "## Skill" not in system_text(model.requests[2])


@pytest.mark.parametrize(
    ("message", "active"),
    [
        ("/commit", True),
        ("Please (/COMMIT) the change.", True),
        ("fix it, then /commit.", True),
        ("open src/commit please", False),
        ("run /commits", False),
        ("run /commit-all", False),
        ("edit /commit.py", False),
        ("commit it", False),
    ],
)
async def test_the_trigger_must_be_a_word_of_its_own(
    tmp_path: Path, message: str, active: bool
) -> None:
    await put(tmp_path / "skills/commit.md", COMMIT)
    model = ScriptedModel(["ok"])
    agent = Agent(
        model=model, tools=Effects().tools, capabilities=[Skills(folders=[tmp_path / "skills"])]
    )
    await agent.run(message)
    assert ("write_file" not in offered(model.requests[0])) is active
    assert ("## Skill commit" in system_text(model.requests[0])) is active


async def test_two_triggers_join_their_tools_and_a_skill_without_a_list_lifts_it(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "skills"
    await put(folder / "a.md", skill_text("a", trigger="/a", body="A", allowed_tools="[read_file]"))
    await put(folder / "b.md", skill_text("b", trigger="/b", body="B", allowed_tools="[shell]"))
    await put(folder / "free.md", skill_text("free", trigger="/free", body="F"))
    model = ScriptedModel(["ok", "ok"])
    agent = Agent(model=model, tools=Effects().tools, capabilities=[Skills(folders=[folder])])
    await agent.run("/b then /a")
    assert offered(model.requests[0]) == {"read_file", "shell", "list_skills", "get_skill_info"}
    text = system_text(model.requests[0])
    assert text.startswith("The user asked for these skills")
    assert text.index("## Skill b") < text.index("## Skill a")
    await agent.run("/a and /free")
    assert "write_file" in offered(model.requests[1])


async def test_missing_required_tools_are_named_in_the_instructions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "skills"
    await put(
        folder / "ship.md", skill_text("ship", trigger="/ship", required_tools="[shell, deploy]")
    )
    model = ScriptedModel(["I cannot deploy."])
    agent = Agent(model=model, tools=Effects().tools, capabilities=[Skills(folders=[folder])])
    with caplog.at_level(logging.WARNING, logger="agentica.deep.skills"):
        response = await agent.run("/ship")
    assert response.content == "I cannot deploy."
    assert "Warning: this skill needs the tools deploy, which you do not have." in (
        system_text(model.requests[0])
    )
    assert "skill 'ship' needs tools the agent does not have: deploy" in caplog.text
    assert "write_file" in offered(model.requests[0])  # required_tools alone restrict nothing


async def test_get_skill_info_finds_by_name_or_trigger_and_does_not_restrict(
    tmp_path: Path,
) -> None:
    await put(tmp_path / "skills/commit.md", COMMIT)
    model = ScriptedModel([
        tool_calls(call("get_skill_info", name="/Commit"), call("get_skill_info", name="nope")),
        "ok",
    ])  # fmt: skip
    agent = Agent(
        model=model,
        tools=Effects().tools,
        capabilities=[Skills(folders=[tmp_path / "skills", BUILTIN_SKILLS_DIR])],
    )
    await agent.run("How do I commit?")
    found, missing = results(model.requests[1])
    assert found.content.startswith(
        "# Skill commit\nCommit the staged changes with a good message.\nTrigger: /commit\n\n"
        "# Commit\nRun git diff"
    )
    assert missing.is_error
    assert missing.content == "There is no skill named 'nope'. Skills: commit, review, test."
    assert "write_file" in offered(model.requests[1])


def test_the_tools_are_short_and_folders_must_be_a_list() -> None:
    functions = Agent(model=ScriptedModel([]), capabilities=[Skills(folders=[])]).functions
    assert len(functions["list_skills"].description) < 80
    assert len(functions["get_skill_info"].description) < 80
    with pytest.raises(UsageError, match="a list of folders"):
        Skills(folders="skills")
