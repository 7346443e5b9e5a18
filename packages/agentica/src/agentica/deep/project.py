"""Project context: what a folder tells a coding agent about itself (``agentica code DIR``).

``load_project(root)`` reads ``.agentica/config.toml`` into ``ProjectSettings`` (the ``[agent]``
table and the ``[mcp.servers.NAME]`` tables, checked: an unknown key or a wrong type is a
``UsageError`` naming the file), the project's instructions from ``AGENTS.md`` and
``CLAUDE.md`` at the root, and where its skills are (``.agentica/skills/``).

``IgnoringBackend`` wraps a ``FileBackend`` so that ``ls``, ``glob`` and ``grep`` leave out
what the repository's ``.gitignore`` files ignore (and ``.git`` itself), with git's own
matching rules; ``read``, ``stat`` and ``write`` still reach every file.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import stat
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, cast, get_args

from agentica import _beneath
from agentica.deep.backends.paths import check_limit, normalize_path, split_path
from agentica.deep.modes import MODES, Mode
from agentica.errors import UsageError
from agentica.tools.files import FileBackend, FileInfo, GrepLine

__all__ = ["IgnoringBackend", "Project", "ProjectMCPServer", "ProjectSettings", "load_project"]

CONFIG_FILE = Path(".agentica") / "config.toml"
SKILLS_DIR = Path(".agentica") / "skills"
INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
MAX_INSTRUCTION_CHARS = 20_000

Sandbox = Literal["none", "bwrap", "auto"]
_SANDBOXES: tuple[Sandbox, ...] = get_args(Sandbox)

_T = TypeVar("_T")


# ------------------------------------------------------------------------------ settings


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectMCPServer:
    """An MCP server the project's ``[mcp.servers.NAME]`` table names (not started, not
    trusted: whoever starts it decides).

    Attributes:
        name: the table's ``NAME``.
        command: the command line to start it (``command`` as a list, or a string split as a
            shell would, followed by ``args``); empty for a server at ``url``.
        url: the address of a server over HTTP; ``None`` for one started by ``command``.
        env: environment variables for the started server.
    """

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectSettings:
    """The settings of ``.agentica/config.toml``; a missing file or key keeps the default here.

    Attributes:
        model: the model (``None``: the command's default).
        base_url: an OpenAI-compatible server the model is on.
        temperature: sampling temperature (``None``: the model's default).
        max_turns: the run's turn limit (``None``: the command's default).
        approval: the approval mode (``agentica.deep.modes``): ``"read-only"``, ``"ask"``,
            ``"auto-edit"`` or ``"full-auto"`` (``None``: the command's default).
        sandbox: where commands run: ``"none"``, ``"bwrap"`` (bubblewrap) or ``"auto"``
            (``None``: the command's default).
        instructions: added to the agent's instructions.
        kernel: offer the persistent Python kernel.
        mcp_servers: the ``[mcp.servers.NAME]`` tables, in the file's order.
    """

    model: str | None = None
    base_url: str | None = None
    temperature: float | None = None
    max_turns: int | None = None
    approval: Mode | None = None
    sandbox: Sandbox | None = None
    instructions: str | None = None
    kernel: bool = False
    mcp_servers: tuple[ProjectMCPServer, ...] = ()


def _kind(value: object) -> str:
    """How a TOML value is called in errors."""
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    names = {str: "a string", int: "an integer", float: "a number", list: "a list", dict: "a table"}
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return f"{names.get(type(value), type(value).__name__)} ({shown})"


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{where} must be a string, not {_kind(value)}")
    return value


def _nonempty(value: object, where: str) -> str:
    text = _string(value, where).strip()
    if not text:
        raise UsageError(f"{where} is empty; give a value or leave the key out")
    return text


def _url(value: object, where: str) -> str:
    text = _nonempty(value, where)
    if not text.startswith(("http://", "https://")):
        raise UsageError(f"{where} must be an http:// or https:// address, not {text!r}")
    return text


def _temperature(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where} must be a number, not {_kind(value)}")
    if not 0 <= value <= 2:
        raise UsageError(f"{where} must be between 0 and 2, not {value}")
    return float(value)


def _positive_int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{where} must be an integer, not {_kind(value)}")
    if value < 1:
        raise UsageError(f"{where} must be at least 1, not {value}")
    return value


def _boolean(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"{where} must be true or false, not {_kind(value)}")
    return value


def _choice(options: Sequence[str]) -> Callable[[object, str], str]:
    def check(value: object, where: str) -> str:
        text = _string(value, where)
        if text not in options:
            choices = ", ".join(repr(o) for o in options)
            raise UsageError(f"{where} must be one of {choices}, not {text!r}")
        return text

    return check


_AGENT_KEYS: dict[str, Callable[[object, str], object]] = {
    "model": _nonempty,
    "base_url": _url,
    "temperature": _temperature,
    "max_turns": _positive_int,
    "approval": _choice(MODES),
    "sandbox": _choice(_SANDBOXES),
    "instructions": _string,
    "kernel": _boolean,
}
_SERVER_KEYS = ("command", "args", "env", "url")


def _table(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be a table, not {_kind(value)}")
    return value


def _known(table: Mapping[str, object], known: Sequence[str], path: Path, section: str) -> None:
    """``UsageError`` naming the file, the first unknown key and the known ones."""
    for key in table:
        if key not in known:
            raise UsageError(
                f"{path}: unknown key {key!r} in {section}; known keys: {', '.join(sorted(known))}"
            )


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{where} must be a list of strings, not {_kind(value)}")
    return cast(list[str], value)


def _command(value: object, where: str) -> list[str]:
    if isinstance(value, str):
        try:
            argv = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"{where} is not a command line: {exc}") from None
    else:
        argv = _strings(value, where)
    if not argv or not argv[0].strip():
        raise UsageError(f"{where} is empty; give the program to start, e.g. ['npx', 'server']")
    return argv


def _server(name: str, value: object, path: Path) -> ProjectMCPServer:
    section = f"[mcp.servers.{name}]"
    table = _table(value, f"{path}: {section}")
    _known(table, _SERVER_KEYS, path, section)
    where = f"{path}: {section}"
    if ("command" in table) == ("url" in table):
        raise UsageError(f"{where} needs either command (a program to start) or url, not both")
    env = _table(table.get("env", {}), f"{where} env")
    for key, item in env.items():
        _string(item, f"{where} env.{key}")
    if "url" in table:
        if "args" in table:
            raise UsageError(f"{where}: args go with command, not with url")
        return ProjectMCPServer(name=name, url=_url(table["url"], f"{where} url"), env=env)
    argv = _command(table["command"], f"{where} command")
    argv += _strings(table.get("args", []), f"{where} args")
    return ProjectMCPServer(name=name, command=tuple(argv), env=env)


def _servers(data: Mapping[str, object], path: Path) -> tuple[ProjectMCPServer, ...]:
    mcp = _table(data.get("mcp", {}), f"{path}: [mcp]")
    _known(mcp, ("servers",), path, "[mcp]")
    servers = _table(mcp.get("servers", {}), f"{path}: [mcp.servers]")
    return tuple(_server(name, value, path) for name, value in servers.items())


def parse_settings(text: str, path: Path) -> ProjectSettings:
    """The settings in the TOML ``text`` of the file ``path`` (named in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    _known(data, ("agent", "mcp"), path, "the file")
    agent = _table(data.get("agent", {}), f"{path}: [agent]")
    _known(agent, tuple(_AGENT_KEYS), path, "[agent]")
    values: dict[str, Any] = {
        key: _AGENT_KEYS[key](value, f"{path}: agent.{key}") for key, value in agent.items()
    }
    return ProjectSettings(**values, mcp_servers=_servers(data, path))


def load_settings(root: str | os.PathLike[str]) -> ProjectSettings:
    """The settings of ``root/.agentica/config.toml``; the defaults when there is no such file."""
    path = Path(root) / CONFIG_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ProjectSettings()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse_settings(text, path)


# ------------------------------------------------------------------------------ project


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    """A folder an agent works in, and what it says about itself.

    Attributes:
        root: the folder (absolute).
        settings: from ``.agentica/config.toml`` (the defaults without one).
        instructions: the text of ``AGENTS.md`` and ``CLAUDE.md`` at the root, each under a
            heading naming it (``CLAUDE.md`` is left out when it is the same file, the same
            text or only ``@AGENTS.md``), cut at ``MAX_INSTRUCTION_CHARS`` with a note; ``None``
            without either file.
        skills_dir: ``.agentica/skills/`` when that folder exists.
        config_file: the configuration file read, ``None`` when there is none.
    """

    root: Path
    settings: ProjectSettings = field(default_factory=ProjectSettings)
    instructions: str | None = None
    skills_dir: Path | None = None
    config_file: Path | None = None

    @property
    def mcp_servers(self) -> tuple[ProjectMCPServer, ...]:
        """The MCP servers of the configuration (``settings.mcp_servers``)."""
        return self.settings.mcp_servers


def _read_instruction(path: Path, limit: int) -> str | None:
    """The text of ``path`` (its first ``limit`` characters and a bit), ``None`` if missing."""
    try:
        with path.open("rb") as file:
            data = file.read(limit * 4 + 4)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    text = data.decode("utf-8", "replace").strip()
    return text or None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def read_instructions(root: Path, limit: int = MAX_INSTRUCTION_CHARS) -> str | None:
    """``AGENTS.md`` and ``CLAUDE.md`` of ``root`` as one text (see ``Project.instructions``)."""
    agents, claude = (root / name for name in INSTRUCTION_FILES)
    first = _read_instruction(agents, limit)
    second = _read_instruction(claude, limit)
    if first and second and (second in (first, "@AGENTS.md") or _same_file(agents, claude)):
        second = None
    parts = [
        (name, text) for name, text in zip(INSTRUCTION_FILES, (first, second), strict=True) if text
    ]
    if not parts:
        return None
    combined = "\n\n".join(f"## {name}\n\n{text}" for name, text in parts)
    if len(combined) <= limit:
        return combined
    names = " and ".join(name for name, _ in parts)
    return (
        combined[:limit].rstrip()
        + f"\n\n[... cut at {limit:,} characters: read {names} for the rest]"
    )


def load_project(
    root: str | os.PathLike[str] = ".", *, max_instruction_chars: int = MAX_INSTRUCTION_CHARS
) -> Project:
    """The project in the folder ``root``: its settings, instructions and skills folder.

    ``UsageError`` if ``root`` is not a folder or its configuration is wrong (the message names
    the file, the key and what is expected).
    """
    folder = Path(root).expanduser().resolve()
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a folder; give the project's folder")
    config = folder / CONFIG_FILE
    skills = folder / SKILLS_DIR
    return Project(
        root=folder,
        settings=load_settings(folder),
        instructions=read_instructions(folder, max_instruction_chars),
        skills_dir=skills if skills.is_dir() else None,
        config_file=config if config.is_file() else None,
    )


# ------------------------------------------------------------------------------ .gitignore

_POSIX_CLASSES = {
    b"alnum": rb"0-9A-Za-z",
    b"alpha": rb"A-Za-z",
    b"blank": rb" \t",
    b"cntrl": rb"\x00-\x1f\x7f",
    b"digit": rb"0-9",
    b"graph": rb"!-~",
    b"lower": rb"a-z",
    b"print": rb" -~",
    b"punct": rb"!-/:-@\[-`{-~",
    b"space": rb" \t\n\r\f\v",
    b"upper": rb"A-Z",
    b"xdigit": rb"0-9A-Fa-f",
}
_BACKSLASH, _SLASH, _STAR, _OPEN, _CLOSE = b"\\/*[]"
_MAX_IGNORE_BYTES = 1 << 20  # a larger ignore file is read this far
_MAX_ASK = 10**7  # IgnoringBackend asks the inner backend for at most this many results


class _Malformed(Exception):
    """A pattern git never matches (an unclosed ``[``, an unknown ``[:class:]``, a trailing
    ``\\``)."""


def _literal(byte: int) -> bytes:
    return re.escape(bytes([byte]))


def _escaped(pattern: bytes, i: int) -> int:
    """The byte after the ``\\`` at ``i``."""
    if i + 1 >= len(pattern):
        raise _Malformed
    return pattern[i + 1]


def _posix_class(pattern: bytes, j: int) -> tuple[bytes | None, int]:
    """At ``[:`` (``pattern[j]`` is ``[``): the class's regex and the index after its ``]``, or
    ``(None, j + 1)`` when this is no ``[:name:]`` (the ``[`` is then a plain character)."""
    close = pattern.find(b"]", j + 2)
    if close < 0:
        raise _Malformed
    if close - 1 < j + 2 or pattern[close - 1] != ord(":"):
        return None, j + 1
    name = pattern[j + 2 : close - 1]
    if name not in _POSIX_CLASSES:
        raise _Malformed
    return _POSIX_CLASSES[name], close + 1


def _bracket(pattern: bytes, i: int) -> tuple[bytes, int]:
    """The regex of the bracket expression at ``pattern[i]`` (``[``) and the index after it, as
    git's wildmatch reads it: ``!`` or ``^`` negates, a ``]`` first is a member, ranges,
    ``\\`` escapes, ``[:alpha:]`` classes; it never matches ``/``."""
    j = i + 1
    negated = j < len(pattern) and pattern[j] in b"!^"
    j += negated
    items: list[bytes] = []
    prev: int | None = None
    first = True
    while True:
        if j >= len(pattern):
            raise _Malformed
        byte = pattern[j]
        if byte == _CLOSE and not first:
            break
        first = False
        if byte == _BACKSLASH:
            byte = _escaped(pattern, j)
            j += 1
        elif byte == ord("-") and prev is not None and pattern[j + 1 : j + 2] not in (b"", b"]"):
            j += 1  # the range's end, maybe escaped
            if pattern[j] == _BACKSLASH:
                end, j = _escaped(pattern, j), j + 1
            else:
                end = pattern[j]
            if prev <= end:
                items.append(_literal(prev) + b"-" + _literal(end))
            prev, j = None, j + 1
            continue
        elif byte == _OPEN and pattern[j + 1 : j + 2] == b":":
            members, after = _posix_class(pattern, j)
            if members is not None:
                items.append(members)
                prev, j = None, after
                continue
        items.append(_literal(byte))
        prev, j = byte, j + 1
    body = b"".join(items)
    if negated:
        return b"[^/" + body + b"]", j + 1
    return (b"(?!/)[" + body + b"]" if body else b"(?!)"), j + 1


def _stars(pattern: bytes, i: int) -> tuple[bytes, int]:
    """The regex of the ``*`` run at ``i`` and the index after it: ``**`` between slashes (or at
    an end) spans folders (``**/``: any folders or none, ``/**``: everything inside), any other
    run is one ``*``, within a folder."""
    j = i
    while j < len(pattern) and pattern[j] == _STAR:
        j += 1
    after = pattern[j : j + 2]
    spans = (
        j - i >= 2
        and (i == 0 or pattern[i - 1] == _SLASH)
        and (j == len(pattern) or after[:1] == b"/" or after == b"\\/")
    )
    if not spans:
        return b"[^/]*", j
    if j == len(pattern):
        return b".*", j
    if after[:1] == b"/":
        return b"(?:.*/)?", j + 1
    return b".*/", j + 2  # an escaped slash: at least one folder (git tries none only for '/')


def _wildmatch(pattern: bytes) -> bytes:
    """A regex (for ``fullmatch``) doing what git's ``wildmatch(pattern, path, WM_PATHNAME)``
    does: ``*`` and ``?`` stay within a folder, ``**`` as in ``_stars``, ``[...]`` as in
    ``_bracket``, ``\\`` escapes. ``_Malformed`` for a pattern that matches nothing."""
    out: list[bytes] = []
    i = 0
    while i < len(pattern):
        byte = pattern[i]
        if byte == _BACKSLASH:
            out.append(_literal(_escaped(pattern, i)))
            i += 2
        elif byte == _STAR:
            text, i = _stars(pattern, i)
            out.append(text)
        elif byte == ord("?"):
            out.append(b"[^/]")
            i += 1
        elif byte == _OPEN:
            text, i = _bracket(pattern, i)
            out.append(text)
        else:
            out.append(_literal(byte))
            i += 1
    return b"".join(out)


@dataclass(frozen=True, slots=True)
class _Rule:
    """One pattern of an ignore file: ``basename`` patterns (no ``/``) match a path's last
    part at any depth, the others its path from the ignore file's folder."""

    regex: re.Pattern[bytes]
    negated: bool
    dir_only: bool
    basename: bool


def _trim(line: bytes) -> bytes:
    """``line`` without its trailing spaces, but for one escaped by ``\\`` (git's rule)."""
    last_space: int | None = None
    i = 0
    while i < len(line):
        if line[i] == ord(" "):
            last_space = i if last_space is None else last_space
        else:
            if line[i] == _BACKSLASH:
                i += 1
                if i >= len(line):
                    return line
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def _first_wildcard(pattern: bytes) -> int:
    """The index of the first ``*``, ``?``, ``[`` or ``\\`` in ``pattern`` (its length if none)."""
    found = [i for i in (pattern.find(c) for c in (b"*", b"?", b"[", b"\\")) if i >= 0]
    return min(found, default=len(pattern))


def _rule(line: bytes) -> _Rule | None:
    """The rule of one line of an ignore file, ``None`` for blank lines, comments and patterns
    that never match."""
    if line.startswith(b"#"):
        return None
    line = _trim(line)
    negated = line.startswith(b"!")
    line = line[negated:]
    dir_only = line.endswith(b"/")
    line = line[: len(line) - dir_only]
    if not line:
        return None
    basename = b"/" not in line
    if line.startswith(b"/"):
        line = line[1:]
    # git compares a path pattern's part before its first wildcard literally and matches the
    # rest as a pattern of its own: there, a leading ``**`` spans folders (``a**/b``: ``a/x/b``)
    literal = 0 if basename else _first_wildcard(line)
    try:
        regex = re.compile(b"(?s:" + re.escape(line[:literal]) + _wildmatch(line[literal:]) + b")")
    except (_Malformed, re.error):
        return None
    return _Rule(regex, negated, dir_only, basename)


def parse_ignore(data: bytes) -> tuple[_Rule, ...]:
    """The rules of an ignore file's bytes (``.gitignore`` syntax)."""
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    rules = (_rule(line.removesuffix(b"\r")) for line in lines)
    return tuple(rule for rule in rules if rule is not None)


def _decide(rules: Sequence[_Rule], rel: Sequence[str], is_dir: bool) -> bool | None:
    """Whether the last rule of ``rules`` matching ``rel`` (a path from the rules' folder)
    ignores it (``False``: a ``!`` rule re-includes it); ``None`` when none matches."""
    if not rules:
        return None
    path = "/".join(rel).encode("utf-8", "surrogateescape")
    name = rel[-1].encode("utf-8", "surrogateescape")
    for rule in reversed(rules):
        if rule.dir_only and not is_dir:
            continue
        if rule.regex.fullmatch(name if rule.basename else path):
            return not rule.negated
    return None


def _find_top(root: str) -> tuple[str, tuple[str, ...]]:
    """The work tree holding ``root`` (the nearest folder up with a ``.git``) and ``root``'s
    path from it; ``(root, ())`` outside a repository."""
    here = os.path.realpath(root)
    below: list[str] = []
    while True:
        if os.path.lexists(os.path.join(here, ".git")):
            return here, tuple(reversed(below))
        parent = os.path.dirname(here)
        if parent == here:
            return root, ()
        below.append(os.path.basename(here))
        here = parent


_Stamp = tuple[int, int, int]


class _IgnoreFiles:
    """The ignore files of one work tree, parsed once and read again when their modification
    time, size or inode changes. Used from worker threads only."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._top: tuple[str, tuple[str, ...]] | None = None
        self._parsed: dict[str, tuple[_Stamp, tuple[_Rule, ...]]] = {}

    def top(self) -> tuple[str, tuple[str, ...]]:
        if self._top is None:
            self._top = _find_top(self.root)
        return self._top

    def rules(self, key: str, opener: Callable[[], int]) -> tuple[_Rule, ...]:
        """The rules of the file ``key`` (its host path), opened by ``opener``; none if it is
        missing or not a regular file."""
        try:
            fd = opener()
        except OSError:
            return ()
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return ()
            stamp = (info.st_mtime_ns, info.st_size, info.st_ino)
            cached = self._parsed.get(key)
            if cached is not None and cached[0] == stamp:
                return cached[1]
            data = os.read(fd, _MAX_IGNORE_BYTES)
        except OSError:
            return ()
        finally:
            os.close(fd)
        rules = parse_ignore(data)
        self._parsed[key] = (stamp, rules)
        return rules


def _no_root() -> int:
    raise FileNotFoundError("the root folder does not exist")


class _Check:
    """One listing's questions (is this path hidden?), its answers and the rules it read kept
    for its duration."""

    def __init__(self, files: _IgnoreFiles) -> None:
        self.files = files
        self.top, self.prefix = files.top()
        try:
            self.root_fd = os.open(files.root, _beneath.DIR_FLAGS)
        except OSError:
            self.root_fd = -1
        self._rules: dict[tuple[str, ...], tuple[_Rule, ...]] = {}
        self._answers: dict[tuple[tuple[str, ...], bool], bool] = {}

    def close(self) -> None:
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def _opener(self, folder: tuple[str, ...], name: tuple[str, ...]) -> Callable[[], int]:
        """How to open the file ``name`` in the folder ``folder`` (from the top): below the
        root through descriptors without following any link, above it by its host path."""
        n = len(self.prefix)
        if folder[:n] != self.prefix:
            host = os.path.join(self.top, *folder, *name)
            return lambda: os.open(host, _beneath.READ_FLAGS)
        inside = [*folder[n:], *name]
        root_fd = self.root_fd
        if root_fd < 0:
            return _no_root
        return lambda: _beneath.open_strict(root_fd, inside)

    def rules_at(
        self, folder: tuple[str, ...], name: tuple[str, ...] = (".gitignore",)
    ) -> tuple[_Rule, ...]:
        """The rules of the ignore file ``name`` in ``folder`` (from the top), read once per
        check."""
        key = (*folder, "/", *name)
        rules = self._rules.get(key)
        if rules is None:
            opener = self._opener(folder, name)
            rules = self.files.rules(os.path.join(self.top, *folder, *name), opener)
            self._rules[key] = rules
        return rules

    def ignored(self, parts: tuple[str, ...], is_dir: bool) -> bool:
        """Whether the ignore rules alone ignore ``parts`` (from the root): the deepest ignore
        file with a matching rule decides, its last matching rule, then ``info/exclude``."""
        answer = self._answers.get((parts, is_dir))
        if answer is not None:
            return answer
        answer = parts[-1] == ".git"
        if not answer:
            full = (*self.prefix, *parts)
            for depth in range(len(full) - 1, -1, -1):
                decision = _decide(self.rules_at(full[:depth]), full[depth:], is_dir)
                if decision is not None:
                    break
            else:
                decision = _decide(self.rules_at((), (".git", "info", "exclude")), full, is_dir)
            answer = bool(decision)
        self._answers[(parts, is_dir)] = answer
        return answer

    def hidden(self, parts: tuple[str, ...], is_dir: bool, start: int) -> bool:
        """Whether ``parts`` is hidden when listing or searching ``parts[:start]``: it or a
        folder on its way below that is ignored (what was asked for itself is never hidden)."""
        for end in range(start + 1, len(parts)):
            if self.ignored(parts[:end], True):
                return True
        return len(parts) > start and self.ignored(parts, is_dir)


class IgnoringBackend:
    """A ``FileBackend`` whose ``ls``, ``glob`` and ``grep`` leave out what git ignores.

    ``inner`` shows the folder ``root`` of the host as ``/``. Hidden are the paths that the
    ``.gitignore`` files of ``root``, of its folders and of the folders above it up to the
    repository's top ignore, or ``.git/info/exclude``, matched as git does (``!`` re-includes,
    ``dir/`` only folders, a ``/`` anchors, ``**`` spans folders; a file in an ignored folder
    stays ignored), and ``.git`` folders always; ignore files are also obeyed outside a
    repository. Ignore files are read below ``root`` without following links, parsed once and
    read again when they change. What is asked for itself is shown even if ignored (``ls
    ('/build')`` lists the folder, hiding what is ignored inside it); ``read``, ``stat`` and
    ``write`` reach ignored paths too. Unlike git, tracked files that an ignore rule matches are
    hidden as well.

    Args:
        inner: the backend to wrap.
        root: the folder on the host that ``inner`` shows as ``/``.
    """

    def __init__(self, inner: FileBackend, root: str | os.PathLike[str]) -> None:
        self.inner = inner
        self.root = Path(os.path.abspath(os.fspath(root)))
        self._files = _IgnoreFiles(os.fspath(self.root))

    def __repr__(self) -> str:
        return f"IgnoringBackend({self.inner!r}, {os.fspath(self.root)!r})"

    def _keep(
        self, items: Sequence[_T], base: str, key: Callable[[_T], tuple[str, bool]]
    ) -> list[_T]:
        """The ``items`` (whose path and kind ``key`` gives) not hidden below ``base``."""
        check = _Check(self._files)
        try:
            start = split_path(base)
            kept: list[_T] = []
            for item in items:
                path, is_dir = key(item)
                parts = split_path(path)
                below = len(start) if parts[: len(start)] == start else 0
                if not check.hidden(parts, is_dir, below):
                    kept.append(item)
            return kept
        finally:
            check.close()

    async def _visible(
        self, items: Sequence[_T], path: str, key: Callable[[_T], tuple[str, bool]]
    ) -> list[_T]:
        return await asyncio.to_thread(self._keep, items, normalize_path(path), key)

    async def stat(self, path: str) -> FileInfo | None:
        return await self.inner.stat(path)

    async def read(self, path: str) -> str:
        return await self.inner.read(path)

    async def write(self, path: str, content: str) -> FileInfo:
        return await self.inner.write(path, content)

    async def ls(self, path: str = "/") -> list[FileInfo]:
        entries = await self.inner.ls(path)
        return await self._visible(entries, path, _info_key)

    async def glob(self, pattern: str, path: str = "/", *, limit: int = 1000) -> list[FileInfo]:
        check_limit(limit)
        asked = limit
        while True:  # ask for more while what is hidden leaves fewer than ``limit``
            found = await self.inner.glob(pattern, path, limit=asked)
            kept = await self._visible(found, path, _info_key)
            if len(kept) >= limit or len(found) < asked or asked >= _MAX_ASK:
                return kept[:limit]
            asked = min(asked * 8, _MAX_ASK)

    async def grep(
        self,
        pattern: str,
        path: str = "/",
        *,
        glob: str | None = None,
        context: int = 0,
        limit: int = 1000,
    ) -> list[GrepLine]:
        check_limit(limit)
        asked = limit
        while True:
            found = await self.inner.grep(pattern, path, glob=glob, context=context, limit=asked)
            kept = await self._visible(found, path, _line_key)
            if len(kept) >= limit or len(found) < asked or asked >= _MAX_ASK:
                return kept[:limit]
            asked = min(asked * 8, _MAX_ASK)


def _info_key(info: FileInfo) -> tuple[str, bool]:
    return info.path, info.is_dir


def _line_key(line: GrepLine) -> tuple[str, bool]:
    return line.path, False
