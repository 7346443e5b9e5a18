"""Skills: instructions for a kind of task, in Markdown files with YAML front matter.

```markdown
---
name: commit
description: Write a commit message for the staged changes and commit them.
trigger: /commit
required_tools: [execute]
allowed_tools: [execute, read_file]
---
Run `git diff --staged`, then write a conventional commit message ...
```

A skill file needs ``name`` and ``description``; ``Skills`` reads the built-in, user and project
folders (later ones win) and activates a skill when its trigger is in the user's message (see
``Skills`` for the rules).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from agentica.errors import ToolError, UsageError
from agentica.run.capability import Capability
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = [
    "BUILTIN_SKILLS_DIR",
    "Skill",
    "SkillError",
    "Skills",
    "load_skill",
    "parse_skill",
    "user_skills_dir",
]

logger = logging.getLogger(__name__)

BUILTIN_SKILLS_DIR = Path(__file__).resolve().parent / "skills_builtin"
PROJECT_SKILLS = Path(".agentica") / "skills"
SKILL_TOOLS = frozenset({"list_skills", "get_skill_info"})

_MAX_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_TRIGGER = re.compile(r"/[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_FENCE = re.compile(r"(---|\.\.\.)[ \t]*")
_TOOL_SPLIT = re.compile(r"[,\s]+")
_ALIASES = {
    "requires": "required_tools",
    "required-tools": "required_tools",
    "allowed-tools": "allowed_tools",
}
_KEYS = ("name", "description", "trigger", "required_tools", "allowed_tools")
_INFO_KEYS = ("license", "version", "metadata")


class SkillError(UsageError):
    """A skill file cannot be used; the message names the file and the line.

    Attributes:
        path: the file (``None`` for parsed text without a file).
        line: the line of the file (1-based) where the problem is, when known.
    """

    def __init__(self, message: str, *, path: Path | None = None, line: int | None = None) -> None:
        where = str(path) if path is not None else "<skill>"
        if line is not None:
            where += f":{line}"
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


@dataclass(frozen=True, slots=True, kw_only=True)
class Skill:
    """One skill: its metadata and its instructions (the Markdown body).

    Attributes:
        name: the skill's name (unique in a ``Skills`` catalogue).
        description: what the skill is for (shown by ``list_skills``).
        instructions: the body of the file, the text the model follows.
        trigger: the word that activates it in a user's message (``/commit``), or ``None``.
        required_tools: tools the skill needs.
        allowed_tools: the only tools offered while it is active, or ``None`` (no restriction).
        path: the file it was read from.
        metadata: the informational keys (``license``, ``version``, ``metadata``).
    """

    name: str
    description: str
    instructions: str
    trigger: str | None = None
    required_tools: tuple[str, ...] = ()
    allowed_tools: tuple[str, ...] | None = None
    path: Path | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, hash=False)

    @property
    def summary(self) -> str:
        """The description on one line."""
        return " ".join(self.description.split())


def user_skills_dir() -> Path:
    """The user's skills: ``$AGENTICA_HOME/skills``, else ``~/.agentica/skills``."""
    home = os.environ.get("AGENTICA_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".agentica") / "skills"


# ---------------------------------------------------------------------------------- parsing


def _kind(value: Any) -> str:
    names = {str: "a text", int: "a number", float: "a number", bool: "true/false"}
    if value is None:
        return "nothing"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return names.get(type(value), type(value).__name__)


def _tool_names(
    value: Any, key: str, fail: Callable[[str, str | None], SkillError]
) -> tuple[str, ...]:
    if isinstance(value, str):
        names = [n for n in _TOOL_SPLIT.split(value) if n]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        names = [v.strip() for v in value]
    else:
        raise fail(f"{key!r} must be a list of tool names, got {_kind(value)}", key)
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise fail(f"{key!r} has {name!r}, which is not a tool name", key)
    return tuple(dict.fromkeys(names))


def _yaml_error(exc: yaml.YAMLError, path: Path | None) -> SkillError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    context_mark = getattr(exc, "context_mark", None)
    detail = problem
    if context:
        detail += f" ({context}"
        if context_mark is not None:
            detail += f" started on line {context_mark.line + 2}"
        detail += ")"
    line = mark.line + 2 if mark is not None else 1  # +1: 1-based, +1: the opening ---
    column = f", column {mark.column + 1}" if mark is not None else ""
    return SkillError(f"invalid YAML in the front matter{column}: {detail}", path=path, line=line)


def _front_matter(text: str, path: Path | None) -> tuple[Any, dict[str, int], int, str]:
    """(the front matter's data, the line of each top-level key, the closing line, the body)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").strip() != "---":
        raise SkillError(
            "a skill file must start with a '---' line, then the YAML front matter (name, "
            "description, ...), then another '---' line, then the instructions",
            path=path,
            line=1,
        )
    end = next((i for i in range(1, len(lines)) if _FENCE.fullmatch(lines[i].rstrip("\r\n"))), 0)
    if not end:
        raise SkillError(
            "the front matter opened on this line is never closed: add a '---' line after it",
            path=path,
            line=1,
        )
    loader = yaml.SafeLoader("".join(lines[1:end]))
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, path) from None
    finally:
        loader.dispose()
    key_lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:
            key = str(key_node.value)
            line = key_node.start_mark.line + 2
            if key in key_lines:
                raise SkillError(
                    f"{key!r} is given twice (first on line {key_lines[key]})",
                    path=path,
                    line=line,
                )
            key_lines[key] = line
    return data, key_lines, end + 1, "".join(lines[end + 1 :])


_Fail = Callable[[str, str | None], SkillError]


def _known_fields(data: dict[Any, Any], fail: _Fail) -> tuple[dict[str, Any], dict[str, Any]]:
    """The front matter's skill keys (spelling-normalised: key -> (raw key, value)), and its
    information keys; an unknown or repeated key raises."""
    fields: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _ALIASES.get(str(raw_key), str(raw_key))
        if key in _INFO_KEYS:
            metadata[key] = value
            continue
        if key not in _KEYS:
            raise fail(
                f"unknown key {raw_key!r}; a skill has {', '.join(_KEYS)} "
                f"(and {', '.join(_INFO_KEYS)} as information)",
                str(raw_key),
            )
        if key in fields:
            raise fail(f"{raw_key!r} repeats {key!r} under another spelling", str(raw_key))
        fields[key] = (str(raw_key), value)
    return fields, metadata


def _texts(fields: dict[str, Any], fail: _Fail) -> dict[str, str]:
    """The text fields (name, description, trigger), checked."""
    texts: dict[str, str] = {}
    for key in ("name", "description", "trigger"):
        if key not in fields:
            continue
        raw_key, value = fields[key]
        if not isinstance(value, str) or not value.strip():
            raise fail(f"{key!r} must be a non-empty text, got {_kind(value)}", raw_key)
        texts[key] = value.strip()
    if not _NAME.fullmatch(texts["name"]):
        raise fail(
            f"name {texts['name']!r} is not allowed: use up to 64 letters, digits, '_', '.' "
            "or '-', starting with a letter or digit",
            fields["name"][0],
        )
    trigger = texts.get("trigger")
    if trigger is not None and not _TRIGGER.fullmatch(trigger):
        raise fail(
            f"trigger {trigger!r} is not allowed: write '/' and one word, such as /commit",
            fields["trigger"][0],
        )
    return texts


def _tool_field(fields: dict[str, Any], key: str, fail: _Fail) -> tuple[str, ...] | None:
    if key not in fields:
        return None
    raw_key, value = fields[key]
    return _tool_names(value, raw_key, fail)


def parse_skill(text: str, *, path: str | os.PathLike[str] | None = None) -> Skill:
    """Parse a skill from the text of its file; ``SkillError`` names ``path`` and the line."""
    where = Path(path) if path is not None else None
    data, key_lines, closing, body = _front_matter(text.removeprefix("\ufeff"), where)
    if not isinstance(data, dict):
        raise SkillError(
            f"the front matter must be 'key: value' lines (name, description, ...), "
            f"got {_kind(data)}",
            path=where,
            line=2,
        )

    def fail(message: str, key: str | None = None) -> SkillError:
        return SkillError(message, path=where, line=key_lines.get(key, 1) if key else 1)

    fields, metadata = _known_fields(data, fail)
    for required in ("name", "description"):
        if required not in fields:
            raise SkillError(
                f"the front matter (lines 1-{closing}) has no {required!r}",
                path=where,
                line=1,
            )
    texts = _texts(fields, fail)
    required_tools = _tool_field(fields, "required_tools", fail) or ()
    allowed_tools = _tool_field(fields, "allowed_tools", fail)
    instructions = body.strip()
    if not instructions:
        raise SkillError(
            "the skill has no instructions: write them after the front matter",
            path=where,
            line=closing,
        )
    return Skill(
        name=texts["name"],
        description=texts["description"],
        instructions=instructions,
        trigger=texts.get("trigger"),
        required_tools=required_tools,
        allowed_tools=allowed_tools,
        path=where,
        metadata=metadata,
    )


def load_skill(path: str | os.PathLike[str]) -> Skill:
    """Read and parse one skill file (blocking: call it in a thread from async code)."""
    where = Path(path)
    try:
        with open(where, "rb") as file:
            data = file.read(_MAX_BYTES + 1)
    except OSError as exc:
        raise SkillError(f"cannot read the file: {exc.strerror or exc}", path=where) from None
    if len(data) > _MAX_BYTES:
        raise SkillError(f"the file is larger than {_MAX_BYTES // 1024} KiB", path=where)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillError(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8",
            path=where,
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from None
    return parse_skill(text, path=where)


# ---------------------------------------------------------------------------------- catalogue


@dataclass(frozen=True, slots=True)
class _Catalog:
    skills: dict[str, Skill]
    triggers: dict[str, Skill]  # lower-case trigger -> skill
    problems: tuple[SkillError, ...]


def _skill_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.md")) + sorted(folder.glob("*/SKILL.md"))
    return [
        f
        for f in files
        if not f.name.startswith(".")
        and not f.parent.name.startswith(".")
        and not (f.parent == folder and f.name.lower() == "readme.md")
        and f.is_file()  # a FIFO or a folder named x.md is not read
    ]


def _read_folder(
    folder: Path, problem: Callable[[SkillError], None]
) -> tuple[dict[str, Skill], dict[str, Skill]]:
    """The skills of one folder by name and by lower-case trigger; a bad file, or a second
    skill with a name or trigger already taken in the folder, is a ``problem``."""
    names: dict[str, Skill] = {}
    triggers: dict[str, Skill] = {}
    for path in _skill_files(folder):
        try:
            skill = load_skill(path)
        except SkillError as error:
            problem(error)
            continue
        key = skill.trigger.lower() if skill.trigger else None
        if skill.name in names:
            problem(SkillError(
                f"a second skill named {skill.name!r} (the first is "
                f"{names[skill.name].path}); rename one",
                path=path,
            ))  # fmt: skip
        elif key is not None and key in triggers:
            problem(SkillError(
                f"trigger {skill.trigger} is already used by skill "
                f"{triggers[key].name!r} ({triggers[key].path})",
                path=path,
            ))  # fmt: skip
        else:
            names[skill.name] = skill
            if key is not None:
                triggers[key] = skill
    return names, triggers


def _overlay(
    skills: dict[str, Skill],
    triggers: dict[str, Skill],
    names: Mapping[str, Skill],
    folder_triggers: Mapping[str, Skill],
) -> None:
    """Put one folder's skills over those of the folders before it (same name or trigger)."""
    for name, skill in names.items():
        replaced = skills.get(name)
        old_key = replaced.trigger.lower() if replaced and replaced.trigger else None
        if old_key is not None and triggers.get(old_key) is replaced:
            del triggers[old_key]
        skills[name] = skill
    for key, skill in folder_triggers.items():
        shadowed = triggers.get(key)
        if shadowed is not None and skills.get(shadowed.name) is shadowed:
            # the skill of an earlier folder is kept, without its trigger
            logger.info("trigger %s: skill %r replaces %r", key, skill.name, shadowed.name)
            skills[shadowed.name] = _without_trigger(shadowed)
        triggers[key] = skill


def _scan(folders: Sequence[Path], strict: bool) -> _Catalog:
    """Read every folder (lowest precedence first); blocking."""
    problems: list[SkillError] = []

    def problem(error: SkillError) -> None:
        if strict:
            raise error
        logger.warning("skipped a skill file: %s", error)
        problems.append(error)

    skills: dict[str, Skill] = {}
    triggers: dict[str, Skill] = {}
    for folder in folders:
        if not folder.exists():
            continue
        if not folder.is_dir():
            problem(SkillError("a skills folder was expected here, not a file", path=folder))
            continue
        _overlay(skills, triggers, *_read_folder(folder, problem))
    return _Catalog(skills=skills, triggers=triggers, problems=tuple(problems))


def _without_trigger(skill: Skill) -> Skill:
    return Skill(
        name=skill.name,
        description=skill.description,
        instructions=skill.instructions,
        required_tools=skill.required_tools,
        allowed_tools=skill.allowed_tools,
        path=skill.path,
        metadata=skill.metadata,
    )


def _trigger_pattern(trigger: str) -> re.Pattern[str]:
    # a word of its own: not inside a path (src/commit, ./commit) nor a longer word (/commits,
    # /commit-all, /commit.py); punctuation after it is fine ("/commit.", "(/commit)")
    return re.compile(rf"(?<![\w/.-]){re.escape(trigger)}(?![\w/-]|\.\w)", re.IGNORECASE)


# ---------------------------------------------------------------------------------- capability


class Skills(Capability):
    """Skills from Markdown files: listed and read by the model, activated by a trigger.

    **A skill file.** ``name`` (letters, digits, ``_ . -``) and ``description`` (one line for the
    listing) are required; ``trigger`` (a word starting with ``/``), ``required_tools`` and
    ``allowed_tools`` (lists of tool names, or one string of names separated by commas or spaces)
    are optional; the spellings ``requires``, ``required-tools`` and ``allowed-tools`` (the paper's,
    Claude's) are accepted too, and ``license``, ``version`` and ``metadata`` are kept as
    information. Any other key, a missing or non-closed front matter, bad YAML, a wrong type, a file
    that is not UTF-8 or has no instructions after the front matter raises ``SkillError`` naming the
    file and the line. ``load_skill`` reads one file; ``parse_skill`` parses text.

    **Where skills come from.** ``Skills`` reads folders in precedence order: the built-in skills
    shipped with agentica (``skills_builtin/``), the user's (``$AGENTICA_HOME/skills``, else
    ``~/.agentica/skills``) and the project's (``<project_root>/.agentica/skills``); a skill of a
    later folder replaces one of the same name from an earlier folder (project > user > built-in),
    and so does its trigger. In a folder, every ``*.md`` file is a skill (``README.md`` and hidden
    files excepted), and so is every ``<folder>/SKILL.md``. The folders are scanned on first use, in
    a worker thread, and the result is kept on the ``Skills`` object until ``reload()``.

    **Bad files.** With ``strict=True`` the first bad file raises ``SkillError`` when the skills are
    loaded (the first run, or ``await skills.load()`` at start-up to fail early). Otherwise, the
    default, a bad file is skipped with a logged warning and listed in ``Skills.problems``: one
    broken file in a user's folder does not stop the agent. Two skills of one folder with the same
    name or trigger are a problem of the same kind.

    **Activation.** A skill's trigger in the user's message (``/commit fix the readme``, or anywhere
    as a word: not inside a path such as ``src/commit``) activates the skill for that run: its
    instructions are added to the system prompt, and, if it has ``allowed_tools``, the model is
    offered only those tools, its ``required_tools``, and ``list_skills``/``get_skill_info``; a call
    to any other tool is refused as an unknown tool. Several triggers activate several skills (their
    allowed tools are joined; one without ``allowed_tools`` lifts the restriction). When the agent
    lacks a ``required_tools`` entry, the run goes on and the instructions say which tools are
    missing, so the model can tell the user (a warning is logged too): a typed error would end the
    user's conversation for a configuration problem.

    **The model's side.** ``list_skills`` lists name, trigger and description; ``get_skill_info``
    returns a skill's full instructions, for the model to follow. Reading a skill does not restrict
    the tools: only the user's trigger does, since the user chose that workflow.

    Args:
        project_root: the project whose ``.agentica/skills`` folder is read (default: the current
            directory when the capability is created).
        user_dir: the user's skills folder (default: ``user_skills_dir()``).
        folders: read exactly these folders instead, lowest precedence first.
        strict: raise ``SkillError`` for a bad skill file instead of skipping it.
    """

    name = "skills"

    def __init__(
        self,
        project_root: str | os.PathLike[str] | None = None,
        *,
        user_dir: str | os.PathLike[str] | None = None,
        folders: Sequence[str | os.PathLike[str]] | None = None,
        strict: bool = False,
    ) -> None:
        if folders is not None:
            if isinstance(folders, str | os.PathLike):
                raise UsageError("folders must be a list of folders, not one path")
            self.folders = tuple(Path(f).expanduser().absolute() for f in folders)
        else:
            root = Path(project_root).expanduser() if project_root is not None else Path.cwd()
            user = Path(user_dir).expanduser() if user_dir is not None else user_skills_dir()
            self.folders = (
                BUILTIN_SKILLS_DIR,
                user.absolute(),
                (root / PROJECT_SKILLS).absolute(),
            )
        self.strict = strict
        self._catalog: _Catalog | None = None
        self._generation = 0
        self._lock = threading.Lock()  # one scan at a time (taken in worker threads only)
        self._patterns: dict[str, re.Pattern[str]] = {}
        self._tools = (
            Function.from_callable(self.list_skills),
            Function.from_callable(self.get_skill_info),
        )

    def __repr__(self) -> str:
        return f"<Skills {', '.join(os.fspath(f) for f in self.folders)}>"

    # ------------------------------------------------------------------------------ catalogue

    def _load_sync(self) -> _Catalog:
        with self._lock:
            catalog = self._catalog
            if catalog is not None:
                return catalog
            generation = self._generation
            catalog = _scan(self.folders, self.strict)
            if generation == self._generation:  # no reload() meanwhile
                self._catalog = catalog
            return catalog

    async def _catalogue(self) -> _Catalog:
        catalog = self._catalog
        if catalog is None:
            catalog = await asyncio.to_thread(self._load_sync)
        return catalog

    async def load(self) -> Mapping[str, Skill]:
        """The skills by name, the folders read on first use (in a thread) and then kept."""
        return dict((await self._catalogue()).skills)

    def reload(self) -> None:
        """Forget what was read: the folders are read again on next use."""
        self._generation += 1
        self._catalog = None

    @property
    def problems(self) -> tuple[SkillError, ...]:
        """The skill files skipped by the last load, with why (empty before the first load)."""
        return self._catalog.problems if self._catalog is not None else ()

    async def active(self, ctx: RunContext[Any]) -> tuple[Skill, ...]:
        """The skills the run's user message triggered, in the order they appear in it."""
        cached = ctx.state.get(self.name)
        if isinstance(cached, tuple):
            return cached
        catalog = await self._catalogue()
        found: list[tuple[int, Skill]] = []
        for key, skill in catalog.triggers.items():
            pattern = self._patterns.get(key)
            if pattern is None:
                pattern = self._patterns[key] = _trigger_pattern(key)
            match = pattern.search(ctx.input)
            if match is not None:
                found.append((match.start(), skill))
        active = tuple(skill for _, skill in sorted(found, key=lambda pair: pair[0]))
        ctx.state[self.name] = active
        return active

    # ------------------------------------------------------------------------------ hooks

    def tools(self) -> tuple[ToolLike, ...]:
        return self._tools

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        active = await self.active(ctx)
        if not active:
            return None
        have = set(ctx.functions)
        parts = []
        for skill in active:
            text = f"## Skill {skill.name} ({skill.trigger})\n{skill.instructions}"
            missing = [t for t in skill.required_tools if t not in have]
            if missing:
                logger.warning(
                    "skill %r needs tools the agent does not have: %s",
                    skill.name,
                    ", ".join(missing),
                )
                text += (
                    f"\n\nWarning: this skill needs the tools {', '.join(missing)}, which you do "
                    "not have. Do what you can without them and tell the user what you could "
                    "not do."
                )
            parts.append(text)
        intro = "The user asked for this skill; follow its instructions."
        if len(active) > 1:
            intro = "The user asked for these skills; follow their instructions."
        return "\n\n".join([intro, *parts])

    async def allowed_tools(self, ctx: RunContext[Any]) -> frozenset[str] | None:
        active = await self.active(ctx)
        if not active or any(skill.allowed_tools is None for skill in active):
            return None
        allowed = set(SKILL_TOOLS)
        for skill in active:
            allowed.update(skill.allowed_tools or ())
            allowed.update(skill.required_tools)
        return frozenset(allowed)

    # ------------------------------------------------------------------------------ tools

    async def list_skills(self) -> str:
        """List the skills you can use: name, trigger and what each is for."""
        skills = (await self._catalogue()).skills
        if not skills:
            return "No skills are available."
        return "\n".join(
            f"- {s.name}{f' ({s.trigger})' if s.trigger else ''}: {s.summary}"
            for s in sorted(skills.values(), key=lambda s: s.name)
        )

    async def get_skill_info(self, name: str) -> str:
        """Read a skill's full instructions, to follow them.

        Args:
            name: the skill's name, as list_skills shows it.
        """
        catalog = await self._catalogue()
        wanted = name.strip()
        lowered = wanted.lower()
        skill = (
            catalog.skills.get(wanted)
            or next((s for s in catalog.skills.values() if s.name.lower() == lowered), None)
            or catalog.triggers.get(lowered if lowered.startswith("/") else f"/{lowered}")
        )
        if skill is None:
            known = ", ".join(sorted(catalog.skills)) or "none"
            raise ToolError(f"There is no skill named {name!r}. Skills: {known}.")
        head = [f"# Skill {skill.name}", skill.summary]
        if skill.trigger:
            head.append(f"Trigger: {skill.trigger}")
        if skill.required_tools:
            head.append(f"Needs tools: {', '.join(skill.required_tools)}")
        return "\n".join(head) + "\n\n" + skill.instructions
