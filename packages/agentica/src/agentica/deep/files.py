"""``FileTools``: the deep agent's file tools (ls, read_file, write_file, edit_file, glob, grep).

The tools work on one ``FileBackend`` (``agentica.tools.files``), given as an object or as a
function of the ``RunContext`` resolved on every call: ``session_state_backend`` (the default)
keeps the files in the session state (``RunContext.session_state["files"]``), saved with it.

Every output is sized for a small model's context: at most ``max_output_chars`` characters, long
lines cut at ``max_line_chars``, and whenever something was left out the output says so and how
to get the rest (``... 340 more lines; call read_file with offset=2000``).
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import json
import keyword
import re
import shlex
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal, TypeAlias

from agentica.deep.backends import CompositeBackend, FilesystemBackend, StateBackend
from agentica.deep.backends.paths import NotFound, normalize_path, parent_path
from agentica.errors import AgenticaError, ToolError, UsageError
from agentica.run.capability import Capability
from agentica.run.window import RESULTS_DIR, RESULTS_STATE_KEY
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.files import BackendError, FileBackend, FileInfo, GrepLine
from agentica.tools.function import tool
from agentica.tools.toolkit import Tool

__all__ = ["BackendSource", "FileTools", "WorkspaceOverview", "session_state_backend"]

BackendSource: TypeAlias = FileBackend | Callable[[RunContext[Any]], FileBackend]

_MAX_MATCH_LINES = 10_000  # grep results fetched from the backend per call
_MAX_GLOB_RESULTS = 1000
_MAX_CONTEXT = 20
_NOTE_ROOM = 200  # characters kept free for the note saying what was cut
_SMALL_FILE_LINES = 60  # a file this short that grep found nothing in is shown whole
_SMALL_FILE_BYTES = 4000
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")  # a value in a file ("180", "7.5")


def session_state_backend(ctx: RunContext[Any]) -> StateBackend:
    """A ``StateBackend`` over the running agent's ``memory.state["files"]`` (saved with the
    session)."""
    files = ctx.session_state.setdefault("files", {})
    if not isinstance(files, dict):
        raise BackendError("the session state's 'files' entry is not a dict; it cannot hold files")
    return StateBackend(files)


_BACKEND_METHODS = ("ls", "stat", "read", "write", "glob", "grep")


def _is_object(backend: object) -> bool:
    """True for an object meant as a backend (it has some backend methods), not a function."""
    return any(callable(getattr(backend, m, None)) for m in _BACKEND_METHODS)


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / (1024 * 1024):.1f} MB"


def _when(modified: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(modified)) if modified > 0 else ""


def _digest(text: str) -> bytes:
    """A short fingerprint of a file's text (to see whether it changed)."""
    return hashlib.blake2b(text.encode(errors="replace"), digest_size=16).digest()


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


# read_file's prefix exactly: the number right-aligned in six columns, then a tab (an empty line
# may lose its tab); a data file's own numbered lines ("1\talice") do not look like this
_NUMBERED = re.compile(r"(?= {0,5}\d{1,6}(?:\t|$))( *(\d+))(?:\t|$)")
_NUMBERS_DROPPED = "; the line numbers read_file shows were left out (they are not in the file)"

_MAX_TEST_REFUSALS = 6  # changes to the tests that judge a fix refused per run
_MAX_SIBLINGS = 30  # entries of a folder named in read_file's "no file" error
_MAX_SMALL_FILES, _MAX_SMALL_SIZE = 5, 300  # ... whose text it shows, when they are all small
LineNumbers: TypeAlias = Literal["code", "all", "none"]
"""Which files ``read_file`` shows with line numbers (``FileTools(line_numbers=...)``)."""
_CODE_SUFFIXES = frozenset({
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".java", ".kt", ".scala", ".c",
    ".h", ".cc", ".cpp", ".hpp", ".cs", ".go", ".rs", ".rb", ".php", ".swift", ".m", ".lua", ".pl",
    ".r", ".sh", ".bash", ".zsh", ".ps1", ".sql", ".html", ".css", ".scss", ".vue", ".svelte",
})  # fmt: skip


def _numbered(path: str, line_numbers: LineNumbers) -> bool:
    """Whether ``read_file`` numbers the lines of ``path``: code, where a traceback's "line 6"
    points into it; not data or prose, where the 1.5B model took "     1\tone" for a line
    called "line 1" (reverse-lines wrote "line 1, line 2, line 3", every round) and copied
    the numbers into what it wrote."""
    if line_numbers != "code":
        return line_numbers == "all"
    return PurePosixPath(path).suffix.lower() in _CODE_SUFFIXES


def _without_line_numbers(text: str, *, min_lines: int = 2) -> str | None:
    """``text`` without the line numbers ``read_file`` puts in front of each line, when every
    line has one and they count up (a small model copies them into what it writes); else None."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < min_lines or not lines:
        return None
    found = [_NUMBERED.match(line) for line in lines]
    if any(m is None or len(m.group(1)) != 6 for m in found) or "\t" not in text:
        return None
    numbers = [int(m.group(2)) for m in found if m is not None]
    if numbers != list(range(numbers[0], numbers[0] + len(lines))):
        return None
    plain = [line[m.end() :] for line, m in zip(lines, found, strict=True) if m is not None]
    return "\n".join(plain) + ("\n" if text.endswith("\n") else "")


_LEADING_NUMBER = re.compile(r"\s*1[\t ,]")


def _numbered_copy(current: str, content: str) -> bool:
    """Whether ``content`` is ``current`` with a line number in front of each line, set off by
    a tab, a space or a comma ("1,date,hours" for "date,hours"): a small model copies
    read_file's numbers into a file it means to leave as it is. (A numbered list, "1. a", is
    what a task asking to number the lines wants, and is left alone.)"""
    lines, originals = _lines(content), _lines(current)
    if len(lines) < 2 or len(lines) != len(originals):
        return False
    for number, (line, original) in enumerate(zip(lines, originals, strict=True), start=1):
        rest = line.lstrip().removeprefix(str(number))
        if rest == line.lstrip() or rest[:1] not in ("\t", " ", ","):
            return False
        if rest[1:].lstrip(" ").rstrip() != original.rstrip():
            return False
    return True


_PARSE_LIMIT = 200_000  # characters parsed on the event loop (a few ms)


_CONVERT_LIMIT = 20_000  # characters of YAML-style text converted on the event loop (~ms)


def _json_from_mapping_lines(path: str, text: str) -> str | None:
    """``text`` as JSON when ``path`` is a ``.json`` file and ``text`` is not JSON but YAML-style
    ``key: value`` lines or ``- item`` lists (a small model writes ``name: agentica`` for
    ``{"name": "agentica"}``, escaping quotes inside a JSON string being what it cannot do);
    else None. Only a mapping or a list is converted, never a lone word."""
    if not path.lower().endswith(".json") or len(text) > _CONVERT_LIMIT or not text.strip():
        return None
    try:
        json.loads(text)
    except ValueError:
        pass
    else:
        return None
    import yaml  # type: ignore[import-untyped]

    try:
        data = yaml.safe_load(text)
        if not data or not isinstance(data, dict | list):
            return None
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    except (yaml.YAMLError, TypeError, ValueError, RecursionError):
        return None  # (not YAML either, or values JSON has no form for: a date)


_KEYLESS = re.compile(r"^\s*[=:]\s*\S")  # "= true": a setting whose name was deleted


_MARKER = re.compile(r"\s*(?:</?(?:tool_call|tool_response|tools)>|<\|[\w-]+\|>)\s*")


def _refused_content(path: str, text: str) -> str | None:
    """Why ``text`` cannot be meant as ``path``'s content, or ``None``: a marker of the chat
    format alone (seen: ``<tool_response>`` written into money.py), or a Python module that
    imports itself (seen: test_stats.py's tests written into stats.py, which they import)."""
    if _MARKER.fullmatch(text):
        return (
            f"nothing was written: {text.strip()!r} is a marker of the conversation's format, "
            f"not text for {path}. Write the file's whole content"
        )
    if not path.endswith(".py") or len(text) > _PARSE_LIMIT:
        return None
    module = PurePosixPath(path).stem
    pattern = rf"^\s*(?:from\s+{re.escape(module)}\s+import\b|import\s+{re.escape(module)}\b)"
    if module.isidentifier() and re.search(pattern, text, re.M):
        return (
            f"nothing was written: this code imports {module}, the module it would be written "
            f"to (is it the tests?). {path} must define what other files import from it: "
            f"write {path}'s own code, changed where it is wrong"
        )
    return None


def _parse_problem(path: str, text: str) -> str | None:
    """Why a ``.json``, ``.py``, ``.toml`` or INI-style file just written or edited does not
    parse (seen: config.json written as ``name: agentica``; ``debug = true`` edited into
    `` = true``), or ``None``."""
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if len(text) > _PARSE_LIMIT:
        return None
    if suffix == "json":
        try:
            json.loads(text)
        except ValueError as exc:
            return (
                f"Note: {path} is not valid JSON ({exc}); JSON looks like "
                '{"key": "text", "number": 1}. Write it again as JSON.'
            )
        return None
    if suffix == "toml":
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            return f"Note: {path} is not valid TOML ({exc}); fix it."
        return None
    if suffix in ("ini", "cfg", "conf", "properties", "env"):
        for number, line in enumerate(text.splitlines(), start=1):
            if _KEYLESS.match(line):
                return (
                    f"Note: line {number} of {path} ({line.strip()[:60]!r}) has a value but no "
                    "setting name: the name was removed. Put the name back (name = value)."
                )
        return None
    if suffix != "py":
        return None
    try:
        ast.parse(text)
    except SyntaxError as exc:
        return (
            f"Note: {path} is not valid Python (line {exc.lineno}: {exc.msg}); fix it and "
            "write it again."
        )
    except ValueError:  # (a NUL byte)
        return None
    return None


def _check_breaks_python(path: str, before: str | None, text: str) -> None:
    """Refuse to replace a ``.py`` file that parses with ``text`` that does not (seen: main.py
    written twice with its top-level lines indented by tabs, the parse note unheeded)."""
    if before is None or not path.endswith(".py") or max(len(before), len(text)) > _PARSE_LIMIT:
        return
    try:
        ast.parse(before)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return  # (already broken: writing it again may be the fix)
    try:
        ast.parse(text)
    except (ValueError, RecursionError, MemoryError):
        return
    except IndentationError as exc:  # (only the indentation: other syntax differs by version)
        lines = text.splitlines()
        number = exc.lineno or 0
        shown = f" ({lines[number - 1][:120]!r})" if 0 < number <= len(lines) else ""
        raise ToolError(
            f"nothing was written: {path} is valid Python now and this text is not: line "
            f"{number}{shown}: {exc.msg}. Fix that line (top-level lines start without "
            "indentation; indent blocks with four spaces) and write the whole file again"
        ) from None
    except SyntaxError:
        return


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_USES_LISTED = 10  # places named in edit_file's note on a name left after a rename


def _renamed(old_string: str, new_string: str) -> str | None:
    """The name an edit renames (``def fmt_money(`` -> ``def format_money(``, ``colour`` ->
    ``color``): the one identifier of ``old_string`` not in ``new_string``, when ``new_string``
    has exactly one that ``old_string`` has not; else None."""
    old, new = set(_IDENTIFIER.findall(old_string)), set(_IDENTIFIER.findall(new_string))
    gone, added = old - new, new - old
    if len(gone) != 1 or len(added) != 1:
        return None
    (name,) = gone
    return None if len(name) < 3 or keyword.iskeyword(name) else name


_PIECES = re.compile(r"[^\n.!?]+[.!?]?")


def _repeated_text(before: str, old_string: str, new_string: str) -> str | None:
    """A sentence or line that an edit adds around ``old_string`` and that the file already
    had elsewhere (american-spelling: "Palette picks a colour ..." replaced by itself followed
    by the next two lines, each then in README.md twice, "colour" never changed)."""
    if old_string not in new_string:
        return None
    added = new_string.replace(old_string, "\n", 1)
    rest = before.replace(old_string, "\n", 1)
    pieces: list[str] = [p.strip() for p in _PIECES.findall(added)]
    return next((p for p in pieces if len(p) >= 12 and p in rest), None)


_MAX_BLOCK_LINES = 60  # lines after old_string looked at for lines an edit adds again


def _check_edit(path: str, text: str, old_string: str, new_string: str, task: str) -> str | None:
    """Refuse (``ToolError``) an edit that would change nothing the code does or would put
    lines in the file twice; the repeated text of an edit of code allowed with a note, or
    None."""
    if (comment := _comment_only(path, old_string, new_string, task)) is not None:
        raise ToolError(
            f"nothing was changed: new_string is old_string with only a comment added "
            f"({_short_quote(comment)}), and a comment changes nothing the code does. "
            "Change the code itself: old_string the lines that do the wrong thing, "
            "new_string those lines rewritten to do the right thing"
        )
    if (block := _block_again(text, old_string, new_string)) is not None:
        first, last = block
        lines = "\n".join(text.splitlines()[first - 1 : last])
        raise ToolError(
            f"nothing was changed: new_string is old_string followed by lines {path} already "
            f"has after it (lines {first}-{last}), so they would be there twice. To rewrite "
            f"those lines, old_string is all of them, as the file has them:\n{lines[:1500]}\n"
            "and new_string is what replaces them"
        )
    twice = _repeated_text(text, old_string, new_string)
    if twice is not None and PurePosixPath(path).suffix.lower() not in _CODE_SUFFIXES:
        # prose: refused (seen: the note alone, and american-spelling's README.md kept its
        # doubled lines after "colour" was changed); code may well repeat a line: a note
        raise ToolError(
            f"nothing was changed: new_string adds {_short_quote(twice)}, which {path} "
            "already has elsewhere, so it would be there twice. To change words in a line, "
            "old_string is that line and new_string the same line with only those words "
            "changed (to change one word everywhere, old_string the word, replace_all=true)"
        )
    return twice


_ABOUT_COMMENTS = re.compile(r"(?i)\b(?:comments?|docstrings?|document\w*|annotat\w*)\b")


def _comment_only(path: str, old_string: str, new_string: str, task: str) -> str | None:
    """The first comment line an edit of a Python file adds, when that is all it adds (seen:
    fix-unique's ``# Keep the original order`` put under ``return list(set(items))``, twice,
    the tests failing as before); None for any other edit, or a task about comments."""
    if PurePosixPath(path).suffix.lower() != ".py" or _ABOUT_COMMENTS.search(task):
        return None

    def code(text: str) -> list[str]:
        return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]

    if code(old_string) != code(new_string):
        return None
    old_lines = set(old_string.splitlines())
    added = [line.strip() for line in new_string.splitlines() if line not in old_lines]
    return next((line for line in added if line.startswith("#")), None)


def _block_again(text: str, old_string: str, new_string: str) -> tuple[int, int] | None:
    """The first and last line of the block an edit meant to rewrite, when its ``new_string``
    is ``old_string`` followed by lines of which two or more the file has right after it (seen
    on fix-mean: old_string ``def mean(values):``, new_string the whole function again, mean's
    body then in stats.py twice); else None."""
    if not new_string.startswith(old_string) or text.count(old_string) != 1:
        return None
    added = {s for line in new_string[len(old_string) :].splitlines() if len(s := line.strip()) > 3}
    start = text.index(old_string)
    first = text.count("\n", 0, start) + 1
    following = text[start + len(old_string) :].splitlines()[: _MAX_BLOCK_LINES + 1]
    again = [
        number
        for number, line in enumerate(following, start=first + old_string.count("\n"))
        if line.strip() in added
    ]
    return (first, again[-1]) if len(again) >= 2 else None


def _lines_above(path: str, text: str, old_string: str, new_string: str) -> tuple[int, int]:
    """How many lines ``new_string`` starts with that the file has right above ``old_string``
    (the same lines, in order), and the number of the first of them; ``(0, 0)`` for code, or
    when ``old_string`` is not once in the file at the start of a line. Seen on the demo:
    ``TODO`` under a table's header replaced by that header and the rows, so two headers."""
    if PurePosixPath(path).suffix.lower() in _CODE_SUFFIXES or text.count(old_string) != 1:
        return 0, 0
    start = text.index(old_string)
    if start and text[start - 1] != "\n":
        return 0, 0
    above = text[:start].splitlines()
    new = new_string.splitlines()
    for count in range(min(len(above), len(new)), 0, -1):
        same = [line.strip() for line in above[-count:]] == [line.strip() for line in new[:count]]
        if same and any(len(line.strip()) > 3 for line in new[:count]):
            return count, len(above) - count + 1
    return 0, 0


def _without_lines_above(path: str, text: str, old_string: str, new_string: str) -> tuple[str, str]:
    """``new_string`` without the lines it starts with that the file has right above
    ``old_string`` (``_lines_above``), and the note saying so (``""`` when none were).
    Raises ``ToolError`` when those lines are all of it."""
    above, first = _lines_above(path, text, old_string, new_string)
    if not above:
        return new_string, ""
    rest = "\n".join(new_string.splitlines()[above:])
    lines = f"line {first}" if above == 1 else f"lines {first}-{first + above - 1}"
    if not rest.strip():
        rows = table_rows_hint(text, first + above)
        raise ToolError(
            f"nothing was changed: new_string is {lines} of {path}, which are already right "
            f"above old_string, so they would be there twice. new_string is only what goes "
            f"where {_short_quote(old_string)} is now" + (f": {rows}" if rows else "")
        )
    return rest + ("\n" if new_string.endswith("\n") else ""), (
        f"\n[note] new_string began with {lines} of {path}, which are right above "
        "old_string: they were left out, not written twice."
    )


async def _elsewhere(backend: FileBackend, path: str, old_string: str, task: str) -> str:
    """Where else in the workspace the first line of an ``old_string`` not in ``path`` is
    (seen on rename-across: ``def fmt_money(amount):`` looked for in main.py, twice, the
    function being in helpers.py), as a sentence; ``""`` when nowhere. The tests that judge
    the task's fix are not offered as the place to change (seen on fix-slugify: sent there,
    the model edited the test's ``slugify('Hello World')``)."""
    line = next((s for line in old_string.splitlines() if len(s := line.strip()) >= 6), None)
    if line is None:
        return ""
    try:
        found = await backend.grep(re.escape(line[:200]), "/", limit=_MAX_ELSEWHERE * 4)
        target = normalize_path(path)
    except BackendError:
        return ""
    places = [
        g for g in found
        if g.match and g.path != target
        and not any(part.startswith(".") for part in PurePosixPath(g.path).parts)
    ][:_MAX_ELSEWHERE]  # fmt: skip
    if not places:
        return ""
    where = ", ".join(f"{g.path} (line {g.line})" for g in places)
    if all(guards_the_tests(task, g.path) for g in places):
        return (
            f"The line {_short_quote(line)} is in {where}, the tests that check the fix, which "
            f"stay as they are: in {target}, change the code that gives the wrong result"
        )
    places = [g for g in places if not guards_the_tests(task, g.path)]
    return (
        f"The line {_short_quote(line)} is in {where}, not in {target}: to change it there, call "
        f"edit_file with path {places[0].path!r}"
    )


_MAX_ELSEWHERE = 3  # other files named where an old_string's line is


_PLACEHOLDER = re.compile(r"(?i)(?:todo|tbd|fixme|to do|fill (?:this )?in|\.\.\.|…)[.:!]?")


def placeholder_line(text: str) -> tuple[int, str] | None:
    """The number and text of the one line of ``text`` that is a placeholder to fill in
    (``TODO``, ``TBD``, ``...``), or None when it has none or several."""
    found = [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if _PLACEHOLDER.fullmatch(line.strip())
    ]
    return found[0] if len(found) == 1 else None


def table_rows_hint(text: str, number: int) -> str:
    """How a row of the Markdown table right above line ``number`` of ``text`` is written
    (its header and the number of cells), or ``""`` when no table is right above it."""
    lines = text.splitlines()
    above = lines[: number - 1]
    if len(above) < 2 or not above[-1].lstrip().startswith("|"):
        return ""
    start = len(above)
    while start > 0 and above[start - 1].lstrip().startswith("|"):
        start -= 1
    header = above[start].strip()
    cells = len(header.strip("|").split("|"))
    return (
        f"the table's rows, one per line, each with {cells} cells written like its header: {header}"
    )


def _not_rows(path: str, text: str, number: int, old_string: str, new_string: str) -> str:
    """A note when an edit of a Markdown file replacing the whole lines ``old_string`` at line
    ``number`` puts lines that are not rows right under a table (seen: the totals written
    under "| region | total |" as 165, 180, 90, with no regions and no cells)."""
    if PurePosixPath(path).suffix.lower() not in (".md", ".markdown"):
        return ""
    start = text.find(old_string)
    end = start + len(old_string)
    if start < 0 or (start and text[start - 1] != "\n") or text[end : end + 1] not in ("", "\n"):
        return ""  # (a part of a line changed, a cell of a row: no new lines)
    rows = table_rows_hint(text, number)
    added = [line for line in new_string.splitlines() if line.strip()]
    if not rows or all(line.lstrip().startswith("|") for line in added):
        return ""
    return f"\n[note] The lines under the table of {path} are not rows of it: write {rows}."


def _placeholder_call(path: str, text: str, new_string: str) -> str:
    """The ``edit_file`` call that puts ``new_string`` where the one placeholder line of the
    file is (``placeholder_line``), as a sentence; ``""`` when it has none or several, or
    ``new_string`` keeps it. Seen on the demo sampled at 0.3: the totals computed, the
    model sent the refusal it had just read as ``old_string``, then the totals as both."""
    found = placeholder_line(text)
    if found is None or not new_string.strip() or found[1] in new_string:
        return ""
    number, line = found
    call = json.dumps({"path": path, "old_string": line, "new_string": new_string})
    return (
        f"{path} has one line to fill in, {line!r} (line {number}): to put new_string there, "
        f"call edit_file({call})"
    )


def _short_quote(text: str, limit: int = 80) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _numbers_dropped(text: str, old_string: str, new_string: str) -> tuple[str, str]:
    """``old_string`` and ``new_string`` without ``read_file``'s line numbers, when the numbered
    ``old_string`` is not in the file and the plain one is (a file really in that format, or a
    string that would be empty without them, is left as it is)."""
    plain_old = _without_line_numbers(old_string, min_lines=1)
    if not plain_old or not plain_old.strip() or old_string in text or plain_old not in text:
        return old_string, new_string
    plain_new = _without_line_numbers(new_string, min_lines=1)
    return plain_old, new_string if plain_new is None else plain_new


# A task that asks for whole files ("Write hello.py ...", "Rewrite app.py ..."): writing one
# anew is what it asks
_WHOLE_FILE_TASK = re.compile(
    r"(?i)\b(?:write|rewrite|create|generate|overwrite|replace|regenerate|reset|make|save)\b"
)


# ... and one that asks to change files ("Rename fmt_money ...", "Fix stats.py ...")
_CHANGE_TASK = re.compile(
    r"(?i)\b(?:rename|move|fix|change|update|edit|refactor|add|remove|delete|turn|bump)\b"
)


def _all_lines_gone(before: str, after: str, least: int = 3) -> int:
    """How many lines ``before`` had, when it had ``least`` or more and none is in ``after`` (a
    file rewritten from scratch: seen, setup.cfg replaced by an invented one); else 0."""
    old = {line.strip() for line in before.splitlines() if line.strip()}
    new = {line.strip() for line in after.splitlines() if line.strip()}
    return len(old) if len(old) >= least and not old & new else 0


_MAX_COMPARED_LINES = 500  # (difflib is quadratic in the worst case; it runs on the loop)


def _lines_lost(before: str, after: str) -> list[str]:
    """The lines of ``before`` that ``after`` lost, when it kept most of them and changed
    others (seen: setup.cfg written back with the version bumped and its ``[metadata]`` line
    gone); else nothing. Blank lines and moved lines are no loss."""
    old = [line.strip() for line in before.splitlines() if line.strip()]
    new = [line.strip() for line in after.splitlines() if line.strip()]
    if len(old) > _MAX_COMPARED_LINES or len(new) > _MAX_COMPARED_LINES:
        return []
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    lost = [  # (lines removed with nothing in their place; a changed line is a change)
        line
        for tag, start, end, _, _ in matcher.get_opcodes()
        if tag == "delete"
        for line in old[start:end]
        if line not in new
    ]
    kept = len(old) - len(lost)
    return lost if lost and kept >= 2 and len(lost) * 2 <= len(old) else []


_QUOTES = re.compile(r"""['"]""")


def _without_added_quotes(text: str, old_string: str, new_string: str) -> tuple[str, str] | None:
    """(old, new) without the quotes the model put around values, when ``old_string`` is not
    in ``text`` but is, once, without its quotes, and ``new_string`` has the same number of
    them (seen: ``version = '1.4.2'`` for the line ``version = 1.4.2``); else None."""
    plain_old = _QUOTES.sub("", old_string)
    if plain_old == old_string or not plain_old.strip() or text.count(plain_old) != 1:
        return None
    if len(_QUOTES.findall(new_string)) != len(_QUOTES.findall(old_string)):
        return None
    at = text.index(plain_old)
    around = text[at - 1 : at] + text[at + len(plain_old) : at + len(plain_old) + 1]
    if _QUOTES.search(around):  # (quotes there: the text is inside another string, not bare)
        return None
    return plain_old, _QUOTES.sub("", new_string)


def _with_file_quotes(
    text: str, old_string: str, new_string: str, *, replace_all: bool
) -> tuple[str, str] | None:
    """(old, new) with the file's quotes, when ``old_string`` is not in ``text`` but is with
    its single quotes double ones (or the other way round) and is so once (any number of times
    with ``replace_all``); ``new_string``'s quotes of that kind turned too when it has none of
    the other (seen: ``'_'.join(title.split())`` for the line ``"_".join(title.split())``, the
    edit sent again unchanged after "the closest line is ..."); else None."""
    if not _QUOTES.search(old_string):
        return None
    pattern = "".join("['\"]" if c in "'\"" else re.escape(c) for c in old_string)
    found = [m.group(0) for m in re.finditer(pattern, text)]
    if not found or (len(found) > 1 and not replace_all) or len(set(found)) > 1:
        return None
    turned = {(a, b) for a, b in zip(old_string, found[0], strict=True) if a != b}
    if len(turned) != 1:  # (one kind turned into the other, every time)
        return None
    ((given, wanted),) = turned
    if given in found[0]:  # (a quote of that kind kept somewhere: not one style for another)
        return None
    if wanted not in new_string:
        new_string = new_string.replace(given, wanted)
    return found[0], new_string


_KEY_VALUE = re.compile(r"""^\s*["']?([A-Za-z_][\w-]*)["']?\s*[:=]?\s*(.+?)[\s,]*$""", re.S)
# "a repeat setting" is the key "repeat": the noun after a key's name in a request
_KEY_NOUN = re.compile(
    r"(?i)(?<=\w)\s+(?:setting|option|key|field|entry|parameter|property|flag)\b"
)


def _key_and_value(old_string: str, new_string: str) -> tuple[str, Any] | None:
    """The one key and value an edit meant to add to a JSON object: ``"repeat": 3``,
    ``repeat 3``, ``repeat = 3``, ``repeat setting: 3``, or old_string ``repeat`` with
    new_string ``3``."""
    old, new = (_KEY_NOUN.sub("", text.strip(), count=1) for text in (old_string, new_string))
    try:
        pairs = json.loads("{" + new.strip(",{} \n") + "}")
    except ValueError:
        pairs = None
    if isinstance(pairs, dict) and len(pairs) == 1:
        return next(iter(pairs.items()))
    if re.fullmatch(r"[A-Za-z_][\w-]*", old) and not new.startswith(old):
        new = f"{old} {new}"
    found = _KEY_VALUE.match(new)
    if found is None:
        return None
    key, raw = found.groups()
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw.strip("'\"")
        if not value or re.search(r"\s", value):  # (words: a description, not a value)
            return None
    return key, value


def _json_key_added(path: str, text: str, old_string: str, new_string: str) -> str:
    """For an ``edit_file`` whose old_string is not in a JSON object file and whose new_string
    names one key and value not in it, the call that adds them before the closing brace
    (seen: old_string "repeat", new_string "repeat 3" for config.json, sent twice); else ""."""
    if PurePosixPath(path).suffix.lower() != ".json":
        return ""
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    pair = _key_and_value(old_string, new_string)
    if not isinstance(data, dict) or not data or pair is None or pair[0] in data:
        return ""
    key, value = pair
    close = text.rstrip().rfind("}")
    end = len(text[:close].rstrip())  # (after the last value)
    start = text.rfind("\n", 0, end) + 1
    line = text[start:end]
    indent = line[: len(line) - len(line.lstrip())]
    sep = ", " if start == 0 or "\n" not in text[end:close] else ",\n" + indent
    added = json.dumps({key: value}, ensure_ascii=False)[1:-1]
    old, new = text[start : close + 1], f"{line}{sep}{added}{text[end : close + 1]}"
    try:
        if json.loads(text[:start] + new + text[close + 1 :]).get(key) != value:
            return ""
    except ValueError:
        return ""
    call = json.dumps({"path": path, "old_string": old, "new_string": new}, ensure_ascii=False)
    return (
        f"old_string was not found in {path}. To add {added} to the object in it, put it "
        f"{ADDS_KEY}{call})"
    )


def _not_found(path: str, text: str, old_string: str) -> str:
    """Why ``old_string`` is not in the file, with the line it most likely meant."""
    if old_string.strip() and old_string.strip() in text:
        hint = " (it is there without its leading or trailing spaces and line breaks)"
    else:
        lines = {line.strip(): line for line in text.splitlines() if line.strip()}
        close = difflib.get_close_matches(old_string.strip(), list(lines), n=1, cutoff=0.6)
        words = {w.lower() for w in re.findall(r"\w+", old_string)}
        if close:
            hint = f"; the closest line is {lines[close[0]][:200]!r}"
        elif words and not words & {w.lower() for w in re.findall(r"\w+", text)}:
            hint = (
                ": none of its words are in the file. old_string is the part of the file to "
                "replace, copied from it (to change a word, the word itself), not a description"
            )
        else:
            hint = ""
    return (
        f"old_string was not found in {path}{hint}. Call read_file('{path}') and copy the exact "
        "text, with the same spaces and indentation"
    )


@dataclass(slots=True, frozen=True)
class PlannedEdit:
    """What ``edit_file`` will do to a file: the new text, how many occurrences it replaces,
    the line of the first, and a note on how it matched (``""``: as given)."""

    text: str
    count: int
    first_line: int
    note: str


def plan_edit(
    path: str, text: str, old_string: str, new_string: str, *, replace_all: bool = False
) -> PlannedEdit:
    """Apply an ``edit_file`` call to ``text`` as the tool does (line numbers copied from
    read_file dropped, Windows line ends, quotes the file does not have); ``ToolError`` when
    ``old_string`` is not found, or found several times without ``replace_all``."""
    old_string, new_string = _numbers_dropped(text, old_string, new_string)
    count = text.count(old_string)
    if count == 0 and "\r\n" in text and "\n" in old_string:
        crlf = old_string.replace("\r\n", "\n").replace("\n", "\r\n")
        if crlf in text:  # the file has Windows line ends: match them
            old_string = crlf
            new_string = new_string.replace("\r\n", "\n").replace("\n", "\r\n")
            count = text.count(old_string)
    unquoted = ""
    if count == 0 and (plain := _without_added_quotes(text, old_string, new_string)):
        old_string, new_string = plain  # ("version = '1.4.2'" for "version = 1.4.2")
        count = 1
        unquoted = (
            "; old_string matched without the quotes you put around its value (the file "
            "has none), so new_string was written without them too"
        )
    if count == 0 and (
        quoted := _with_file_quotes(text, old_string, new_string, replace_all=replace_all)
    ):
        old_string, new_string = quoted  # ("'_'.join(...)" for '"_".join(...)')
        count = text.count(old_string)
        unquoted = (
            "; old_string matched with the file's quotes, not the ones you typed, so new_string "
            "was written with the file's quotes too"
        )
    if count == 0:
        added = _json_key_added(path, text, old_string, new_string)
        raise ToolError(added or _not_found(path, text, old_string))
    if count > 1 and not replace_all:
        starts: list[int] = []
        index = text.find(old_string)
        while index >= 0 and len(starts) < 10:
            starts.append(text.count("\n", 0, index) + 1)
            index = text.find(old_string, index + len(old_string))
        where = ", ".join(map(str, starts)) + (", ..." if count > len(starts) else "")
        raise ToolError(
            f"old_string occurs {count} times in {path} (lines {where}). Add nearby lines "
            "to old_string so that it occurs once, or pass replace_all=true to replace all "
            f"{count}"
        )
    first_line = text.count("\n", 0, text.find(old_string)) + 1
    updated = text.replace(old_string, new_string)
    return PlannedEdit(updated, count, first_line, unquoted)


async def _text_or_none(backend: FileBackend, path: str) -> str | None:
    """The file's text, or ``None`` when the backend will not read it as text (binary, too
    large, not UTF-8): read_file could not show it either, so reading first is no remedy."""
    try:
        return await backend.read(path)
    except BackendError:
        return None


# A file name as a task writes it: "lines.txt", "src/app.py" (not a path's tail, not "v1.5.0")
FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w/-])")


UNREAD_REFUSAL = "nothing was written: the task names"  # how FileTools' refusal begins
ADDS_KEY = "before its closing brace: call edit_file("  # (the edit that adds a JSON key)
READ_AGAIN = "has not changed since you last read it"  # (a read repeated, nothing between)
_READ_GAP = 3  # other calls a repeated read may follow the first by
_WROTE = (  # (a file read again that this run wrote: seen on csv-totals, its totals.json read
    # five times over, told each time to compute from it)
    "holds what this task wrote there: if that is what the task asks for, give your final "
    "answer now; if not, change it with edit_file."
)
# a task that asks for a change ("Add ...", "... Fix the file.", "make app.py print ...")
_CHANGE_ASKED = re.compile(
    r"(?i)\b(?:add|fix|change|update|edit|make|set|replace|rename|remove|delete|bump|correct|"
    r"insert|append|modify)\b"
)


def task_files(task: str) -> list[str]:
    """The file names ``task`` mentions, in order, once each ("e.g", "1.5" left out)."""
    names = dict.fromkeys(m.group(1) for m in FILE_NAME.finditer(task))
    return [n for n in names if not n[0].isdigit() and len(n) > 3]


def _names(task: str, path: str) -> bool:
    """Whether ``task`` names the file at ``path`` (``config.json`` for ``/config.json``)."""
    named = set()
    for name in task_files(task):
        try:
            named.add(normalize_path(name))
        except BackendError:
            continue
    return normalize_path(path) in named


_TEST_FILE = re.compile(r"(?:^|/)(?:test_[\w-]*|[\w-]+_test)\.py$")
_TESTS_JUDGE = re.compile(
    r"(?i)\b(?:tests?|test_\w+\.py|\w+_test\.py)\b.*\b(?:fail\w*|pass\w*|expected|cases)\b"
)
_TESTS_WANTED = re.compile(  # "add a test", "fix the failing tests" (not "fix it so the tests")
    r"(?i)\b(?:add|write|create|update|extend|change|fix)\s+(?:\w+\s+){0,2}?tests?\b"
)


def guards_the_tests(task: str, path: str) -> bool:
    """Whether ``path`` holds the tests that ``task`` uses to judge the fix ("The tests in
    test_stats.py fail. Fix stats.py so they pass."), not tests the task asks to write."""
    task = task[:2000]  # (a task's first lines say what it is; the patterns stay cheap)
    if not _TEST_FILE.search(path) or _TESTS_WANTED.search(task):
        return False
    return bool(_TESTS_JUDGE.search(task))


async def judging_tests(task: str, backend: FileBackend) -> list[str]:
    """The test files, existing, that judge ``task``'s fix: the ones it names ("The tests in
    test_stats.py fail"), else those of the Python modules it names where tests usually are
    ("mean() in stats.py is wrong. The tests fail": test_stats.py, stats_test.py, tests/)."""
    named = task_files(task)
    tests = [name for name in named if guards_the_tests(task, name)]
    if not tests:
        tests = [
            test
            for name in named
            if name.endswith(".py")
            for test in _usual_test_files(name)
            if guards_the_tests(task, test)
        ]
    return await existing_files(backend, tests)


def _usual_test_files(module: str) -> list[str]:
    """Where the tests of ``module`` (a .py path) usually are: test_m.py, m_test.py, tests/."""
    path = PurePosixPath(module)
    stem, folder = path.stem, path.parent
    names = [f"test_{stem}.py", f"{stem}_test.py"]
    return [(folder / name).as_posix() for name in names] + [f"tests/test_{stem}.py"]


async def tests_call(
    ctx: RunContext[Any], backend: FileBackend, test_path: str
) -> tuple[str, str] | None:
    """How to run the tests in ``test_path``: the tool (``execute``, else ``run_python``) and
    the call written out, the command ``python3 -m unittest module`` for unittest tests and
    ``python3 -m pytest -q path`` for plain test functions (unittest finds none of those:
    "Ran 0 tests ... OK"); None when the agent has neither tool."""
    runner = next((t for t in ("execute", "run_python") if t in ctx.functions), None)
    if runner is None:
        return None
    try:
        source = await backend.read(test_path)
    except BackendError:
        source = ""
    relative = test_path.lstrip("/")
    if "unittest" in source or "TestCase" in source:
        module = PurePosixPath(relative).with_suffix("").as_posix().replace("/", ".")
        runner_args = ["-m", "unittest", module]
    else:
        runner_args = ["-m", "pytest", "-q", relative]
    if runner == "execute":
        return runner, f"execute({json.dumps({'command': shlex.join(['python3', *runner_args])})})"
    return runner, (
        "run_python with import subprocess, sys; r = subprocess.run([sys.executable, "
        f"{', '.join(map(repr, runner_args))}], capture_output=True, text=True); "
        "print(r.stdout, r.stderr)"
    )


_WORD = re.compile(r"[A-Za-z0-9]+")
_LETTERS = re.compile(r"[A-Za-z]{2}")


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def _sources_named(task: str, path: str, known: set[str]) -> list[str]:
    """The files ``task`` names before ``path`` that this run has read (its sources)."""
    sources: list[str] = []
    for name in task_files(task):
        try:
            named = normalize_path(name)
        except BackendError:
            continue
        if named == path:
            return sources
        if named in known:
            sources.append(named)
    return []  # (the written file is not one the task names: no sources known)


# Tools that change no file (any other tool may: a tool of the user's own, a subagent)
_READERS = frozenset({"ls", "read_file", "glob", "grep", "read_todos", "write_todos"})
# Python that may change a file (anything else run_python runs only computes: seen, fix-price's
# function definition "run" to claim the fix, money.py as it was)
_PYTHON_WRITES = re.compile(
    r"""\b(?:write\w*|\w*dump|rename|replace|remove|unlink|rmtree|move|copy\w*|mkdir|"""
    r"""makedirs|touch|truncate|system|subprocess|exec\w*|to_\w+|save\w*|commit)\b"""
    r"""|open\([^,)]*,\s*(?:mode\s*=\s*)?['"]\w*[wax+]"""
)


def may_change_files(call: FunctionCall) -> bool:
    """Whether ``call`` succeeded and may have changed a file: any tool but the file tools that
    read and the todo tools, and ``run_python`` only with code that may write (not code that
    only computes)."""
    if call.status != "success" or call.name in _READERS:
        return False
    return call.name != "run_python" or bool(_PYTHON_WRITES.search(call.call.arguments))


async def _siblings(backend: FileBackend, path: str) -> str:
    """For a file that is not there: what its folder holds, when that is a few entries (seen:
    /data/numbers.txt, made up, read nine times after ls('/data') had shown a.txt, b.txt and
    c.txt)."""
    folder = parent_path(path)
    try:
        entries = await backend.ls(folder)
    except AgenticaError:
        return ""
    if not entries or len(entries) > _MAX_SIBLINGS:
        return ""
    names = ", ".join(f"{e.name}{'/' if e.is_dir else ''}" for e in entries)
    return f". {folder} holds: {names}{await _small_files(backend, entries)}"


async def _small_files(backend: FileBackend, entries: Sequence[FileInfo]) -> str:
    """The text of a folder's files when it holds only a few small ones (seen: sum-files read
    the made-up /data/numbers.txt 20 times, told each time that /data holds a.txt, b.txt and
    c.txt, and answered a total from its head): what the model would read next, shown."""
    if len(entries) > _MAX_SMALL_FILES or any(
        e.is_dir or e.size > _MAX_SMALL_SIZE or e.name.startswith(".") for e in entries
    ):
        return ""
    shown: list[str] = []
    for entry in entries:
        try:
            text = await backend.read(entry.path)
        except AgenticaError:
            return ""
        shown.append(f"--- {entry.path}\n{text.rstrip()}")
    return "; they read:\n" + "\n".join(shown) + "\n"


def _to_create(task: str, path: str) -> str:
    """For a file that is not there which the task names: it is one to write (seen: "Write
    primes.txt listing ..." planned as "Read primes.txt" first, read and listed for 39 calls)."""
    name = PurePosixPath(path).name
    if name not in {PurePosixPath(n).name for n in task_files(task)}:
        return ""
    return (
        f". The task names {name} and it does not exist yet, so there is nothing to read: it is "
        "a file to create with write_file (a step to read it is done)"
    )


_SECTIONED = frozenset({".ini", ".cfg", ".conf", ".toml"})
_SECTION = re.compile(r"^\s*\[+\s*([^\]]+?)\s*\]+\s*(?:[#;].*)?$")


async def _sections(backend: FileBackend, found: list[GrepLine]) -> dict[tuple[str, int], str]:
    """The section of each match in a small INI or TOML file: a key line alone is ambiguous
    (seen: "port = 5432" and "port = 8080" found in settings.ini, and the database's port
    answered for the web server's)."""
    sections: dict[tuple[str, int], str] = {}
    for path in dict.fromkeys(g.path for g in found if g.match):
        if PurePosixPath(path).suffix.lower() not in _SECTIONED:
            continue
        try:
            text = await backend.read(path)
        except AgenticaError:
            continue
        if len(text) > _SMALL_FILE_BYTES * 4:
            continue
        current = ""
        for number, line in enumerate(_lines(text), 1):
            header = _SECTION.match(line)
            if header:
                current = header.group(1)
            elif current:
                sections[(path, number)] = current
    return sections


_DATA_SUFFIXES = frozenset(
    {".csv", ".tsv", ".json", ".jsonl", ".xml", ".yaml", ".yml", ".txt", ".log"}
)
_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([\w.]+))", re.MULTILINE)


async def _local_imports(backend: FileBackend, path: str, text: str) -> list[str]:
    """The files of the modules a Python file imports that are beside it (``from paging
    import page_count`` in /test_paging.py: /paging.py), in the order it imports them."""
    folder = PurePosixPath(normalize_path(path)).parent
    found: list[str] = []
    for match in _IMPORT.finditer(text):
        module = (match.group(1) or match.group(2)).lstrip(".")
        if not module:
            continue
        for candidate in (
            f"{module.replace('.', '/')}.py",
            f"{module.replace('.', '/')}/__init__.py",
        ):
            name = str(folder / candidate)
            if name not in found and (info := await backend.stat(name)) is not None:
                if not info.is_dir:
                    found.append(name)
                break
    return found


async def existing_files(backend: FileBackend, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that are files in ``backend`` (a name it refuses is none)."""
    found = []
    for name in names:
        try:
            info = await backend.stat(name)
        except AgenticaError:
            continue
        if info is not None and not info.is_dir:
            found.append(name)
    return found


class FileTools(Tool):
    """File tools over a ``FileBackend``: ls, read_file, write_file, edit_file, glob, grep.

    Args:
        backend: the backend, or a function of the run's ``RunContext`` returning it (called on
            every tool call); default: ``session_state_backend`` (files in the session state).
        max_output_chars: the most characters one tool result may have.
        max_line_chars: lines longer than this are cut in ``read_file`` and ``grep`` output.
        read_before_overwrite: refuse a ``write_file`` over a file that has text and that this
            run has neither read, written nor edited (a small model writes a whole config file
            from its head and loses what was in it; the refusal tells it to read first), and,
            once per change, one over a file that changed since the run last read or wrote it
            (its code wrote it) that drops numbers now in it (the refusal shows the text).
        read_task_files: refuse (once per file) a ``write_file`` of a new file made while none
            of the files the task names before it (which exist) was read, written or edited in
            this run (a small model writes "the lines of lines.txt in reverse order to
            reversed.txt" from its head, then copies what it wrote); and, up to three times per
            run, a change to the tests a task names as the judge of its fix ("The tests in
            test_stats.py fail. Fix stats.py ..."), which a small model edits to pass.
        line_numbers: which files ``read_file`` shows with a number in front of each line:
            ``"code"`` (source files: tracebacks name lines; data and prose as they are, since
            a small model copies the numbers into what it writes), ``"all"`` or ``"none"``.
        name: the group's name.
    """

    def __init__(
        self,
        backend: BackendSource | None = None,
        *,
        max_output_chars: int = 12_000,
        max_line_chars: int = 500,
        read_before_overwrite: bool = True,
        read_task_files: bool = True,
        line_numbers: LineNumbers = "code",
        name: str = "files",
    ) -> None:
        if max_output_chars < 1000:
            raise UsageError(
                f"FileTools max_output_chars must be at least 1000, not {max_output_chars}"
            )
        if max_line_chars < 20:
            raise UsageError(f"FileTools max_line_chars must be at least 20, not {max_line_chars}")
        if backend is not None and not isinstance(backend, FileBackend) and _is_object(backend):
            missing = [m for m in _BACKEND_METHODS if not callable(getattr(backend, m, None))]
            raise UsageError(
                f"FileTools backend {type(backend).__name__} is not a FileBackend: it lacks "
                f"{', '.join(missing)} (see agentica.tools.files.FileBackend); or pass a function "
                "of the RunContext returning a backend"
            )
        self.backend: BackendSource = backend if backend is not None else session_state_backend
        self.max_output_chars = max_output_chars
        self.max_line_chars = max_line_chars
        self.read_before_overwrite = read_before_overwrite
        self.read_task_files = read_task_files
        self.line_numbers: LineNumbers = line_numbers
        super().__init__(name)

    def file_backend(self, ctx: RunContext[Any]) -> FileBackend:
        return self.resolve(ctx)

    def resolve(self, ctx: RunContext[Any]) -> FileBackend:
        """The backend for a call of run ``ctx``; tool results evicted from the conversation
        (``agentica.run.window``) appear under ``/.results/``."""
        self._started(ctx)
        backend = self.backend if isinstance(self.backend, FileBackend) else self.backend(ctx)
        results = ctx.session_state.get(RESULTS_STATE_KEY)
        if isinstance(results, dict) and results:
            return CompositeBackend(backend, {RESULTS_DIR: StateBackend(results)})
        return backend

    def _paths(self, ctx: RunContext[Any], kind: str) -> set[str]:
        """A set of paths this run keeps under ``kind`` (see the three below)."""
        paths = ctx.state.get(f"{self.name}.{kind}")
        if not isinstance(paths, set):
            paths = ctx.state[f"{self.name}.{kind}"] = set()
        return paths

    def _known(self, ctx: RunContext[Any]) -> set[str]:
        """The files this run has read, written or edited (their normalized paths)."""
        return self._paths(ctx, "known")

    def _started(self, ctx: RunContext[Any]) -> float:
        """When this run first used the file area (``resolve``; ``WorkspaceOverview`` does at
        the run's start): a file modified since was written in this run, by a tool or by code
        it ran."""
        key = f"{self.name}.started"
        if key not in ctx.state:  # (resolve runs on every call: the clock read once per run)
            ctx.state[key] = time.time()
        started: float = ctx.state[key]
        return started

    def _changed(self, ctx: RunContext[Any]) -> set[str]:
        """The files this run wrote or edited with these tools (their paths)."""
        return self._paths(ctx, "changed")

    async def _wrote(self, ctx: RunContext[Any], backend: FileBackend, path: str) -> bool:
        """Whether this run wrote ``path``: with these tools, or by code it ran."""
        if normalize_path(path) in self._changed(ctx):
            return True
        info = await backend.stat(path)
        return info is not None and self._since_start(ctx, info)

    def _since_start(self, ctx: RunContext[Any], info: FileInfo) -> bool:
        """Whether a file was modified since the run first used the files: written in this
        run, by a tool or by code it ran. Only for a directory on this machine (another's clock,
        such as a student's computer behind the team service, may be ahead)."""
        local = isinstance(self.backend, FilesystemBackend)
        return local and info.modified > self._started(ctx)

    def _created(self, ctx: RunContext[Any]) -> set[str]:
        """The files this run created (or found empty) with write_file (their paths)."""
        return self._paths(ctx, "created")

    def _saw(self, ctx: RunContext[Any], path: str, text: str) -> None:
        """Note that the run has seen ``path`` holding ``text`` (read, written or edited)."""
        key = normalize_path(path)
        self._known(ctx).add(key)
        seen = ctx.state.get(f"{self.name}.seen")
        if not isinstance(seen, dict):
            seen = ctx.state[f"{self.name}.seen"] = {}
        seen[key] = _digest(text)

    def _changed_since_seen(self, ctx: RunContext[Any], path: str, current: str) -> bool:
        """Whether ``path`` holds other text than when the run last saw it through these tools
        (its code or a command wrote it since)."""
        seen = ctx.state.get(f"{self.name}.seen")
        digest = seen.get(normalize_path(path)) if isinstance(seen, dict) else None
        return digest is not None and digest != _digest(current)

    # -- formatting -----------------------------------------------------------------------------

    def _cut_line(self, line: str) -> str:
        if len(line) <= self.max_line_chars:
            return line
        extra = len(line) - self.max_line_chars
        return f"{line[: self.max_line_chars]} [... line cut, {extra} more characters]"

    def _rows(self, path: str, lines: list[str], first: int = 1) -> list[str]:
        """``lines`` of ``path`` as the tools show them: cut to ``max_line_chars``, numbered
        from ``first`` if ``path`` is numbered (``line_numbers``)."""
        rows = [self._cut_line(line.removesuffix("\r")) for line in lines]
        if _numbered(path, self.line_numbers):
            rows = [f"{n:>6}\t{row}" for n, row in enumerate(rows, first)]
        return rows

    def _fit(self, rows: list[str]) -> int:
        """How many of ``rows`` fit in the output budget (at least one)."""
        budget = self.max_output_chars - _NOTE_ROOM
        used = 0
        for count, row in enumerate(rows):
            used += len(row) + 1
            if used > budget and count:
                return count
        return len(rows)

    # -- tools ----------------------------------------------------------------------------------

    @tool
    async def ls(self, ctx: RunContext[Any], path: str = "/") -> str:
        """List a directory: names with size and modification time.

        Args:
            path: the directory, e.g. "/" or "/src".
        """
        entries = await self.resolve(ctx).ls(path)
        if not entries:
            return f"{path} is empty."
        rows = []
        for e in entries:
            details = "dir" if e.is_dir else _size(e.size)
            when = _when(e.modified)
            rows.append(f"{e.name}{'/' if e.is_dir else ''}  {details}  {when}".rstrip())
        shown = self._fit(rows)
        out = "\n".join(rows[:shown])
        if shown < len(rows):
            out += (
                f"\n... {len(rows) - shown} more entries; call ls on a subfolder or use glob to "
                "find files"
            )
        return out

    @tool
    async def read_file(
        self, ctx: RunContext[Any], path: str, offset: int = 0, limit: int = 2000
    ) -> str:
        """Read a text file (the lines of code files are numbered).

        Args:
            path: the file, e.g. "/notes.md".
            offset: lines to skip from the start.
            limit: the most lines to show.
        """
        if offset < 0:
            raise ToolError("offset must be 0 or more (the number of lines to skip)")
        if limit < 1:
            raise ToolError("limit must be 1 or more (the number of lines to show)")
        backend = self.resolve(ctx)
        try:
            text = await backend.read(path)
        except NotFound as exc:
            raise ToolError(
                f"{exc}{await _siblings(backend, path)}{_to_create(ctx.input, path)}"
            ) from None
        self._saw(ctx, path, text)
        again, note = await self._read_again(ctx, backend, path, offset, limit, text)
        if again is not None:
            return again
        out = self._shown(path, text, offset, limit)
        return f"{out}\n\n[note] {note}" if note else out

    def _shown(self, path: str, text: str, offset: int, limit: int) -> str:
        """``limit`` lines of ``text`` from ``offset`` on, as ``read_file`` shows them."""
        lines = _lines(text)
        total = len(lines)
        if total == 0:
            return f"{path} is empty (0 lines)."
        if offset >= total:
            raise ToolError(
                f"{path} has {total} lines, so offset={offset} is past its end; call read_file "
                f"with a smaller offset (0 to {total - 1})"
            )
        end = min(total, offset + limit)
        rows = self._rows(path, lines[offset:end], offset + 1)
        shown = self._fit(rows)
        out = "\n".join(rows[:shown])
        after = offset + shown
        if not _numbered(path, self.line_numbers) and (offset or after < total):
            out = f"[{path}: lines {offset + 1}-{after} of {total}]\n{out}"
        if after < total:
            out += (
                f"\n... {total - after} more lines; call read_file with offset={after} to read on"
            )
        return out

    async def _read_again(
        self,
        ctx: RunContext[Any],
        backend: FileBackend,
        path: str,
        offset: int,
        limit: int,
        text: str,
    ) -> tuple[str | None, str]:
        """For the same read as the last one, of a file unchanged since, with no write or edit
        between: right after it, what to do instead of the text again (the 1.5B model met the
        text by reading once more: test_paging.py and people.json read four times in a row),
        as the first of the pair; up to ``_READ_GAP`` other calls after it, in a task that asks
        to change that file, a note to go with the text saying so (config-repeat read
        config.json five times, a todo list saved between; without the text, fix-bug read
        buggy.py twenty times between its todo lists). ``(None, "")`` otherwise."""
        key = f"{self.name}.last_read"
        read = (normalize_path(path), offset, limit, _digest(text))
        last = ctx.state.get(key)
        ctx.state[key] = (read, ctx.usage.tool_calls)
        if not last or last[0] != read or ctx.usage.tool_calls - last[1] > _READ_GAP + 1:
            return None, ""
        if await self._wrote(ctx, backend, path):
            # (seen: fix-bug wrote buggy.py right, then was told to make the change at each
            # read, and sent the edit it had made, twenty times)
            wrote = f"{path} {_WROTE}"
            if ctx.usage.tool_calls - last[1] > 1:
                return None, wrote
            return f"{path} {READ_AGAIN}: its text is in that result above. It {_WROTE}", ""
        change = "edit_file" in ctx.functions and _CHANGE_ASKED.search(ctx.input) is not None
        change = change and _names(ctx.input, path)
        if ctx.usage.tool_calls - last[1] > 1:
            note = (
                f"{path} is as it was when you last read it. The task asks for a change: make "
                "it now with edit_file (old_string copied from this text, new_string the same "
                "text changed)."
            )
            return None, note if change else ""
        return await self._instead(ctx, backend, path, text, change=change), ""

    async def _instead(
        self, ctx: RunContext[Any], backend: FileBackend, path: str, text: str, *, change: bool
    ) -> str:
        """What to do instead of reading ``path`` again right after reading it."""
        suffix = PurePosixPath(path).suffix.lower()
        runner = next((t for t in ("run_python", "execute") if t in ctx.functions), None)
        again = f"{path} {READ_AGAIN}: its text is in that result above."
        if suffix == ".py":
            known = self._known(ctx)
            unread = [m for m in await _local_imports(backend, path, text) if m not in known]
            if unread:
                names = " and ".join(unread)
                return f"{again} It imports from {names}, which you have not read: read " + (
                    f"{unread[0]} next."
                )
        if change:
            return (
                f"{again} The task asks for a change: do not read it again, make the change "
                "with edit_file (old_string copied from that text, new_string the same text "
                "changed)."
            )
        if suffix in _DATA_SUFFIXES and runner is not None:
            return (
                f"{again} To work something out from it (a count, a total, an average, the "
                "largest or the smallest, an order), do not read it again: run code that reads "
                f"it and prints the result with {runner}."
            )
        return f"{again} Do not read it again: go on with the next step, or answer."

    async def _check_tests(self, ctx: RunContext[Any], path: str) -> None:
        """Refuse, up to ``_MAX_TEST_REFUSALS`` times per run, a change to the tests that judge
        the task's fix (seen: told that stats.py cannot be the tests, the model edited
        test_stats.py to expect the bug's 4.5; refused once, fix-page-count sent the same edit
        of test_paging.py again at once, and a fourth time, the tests never run), with the
        call that runs them."""
        key = f"{self.name}.tests_refused"
        refused = int(ctx.state.get(key, 0))
        if (
            not self.read_task_files
            or refused >= _MAX_TEST_REFUSALS
            or not guards_the_tests(ctx.input, path)
        ):
            return
        ctx.state[key] = refused + 1
        run = await tests_call(ctx, self.resolve(ctx), path)
        how = f"Run them to see what fails: {run[1]}; then change" if run else "Change"
        raise ToolError(
            f"nothing was changed: {path} holds the tests the task uses to check the fix, so "
            f"they stay as they are. {how} the code they test (the failing assertion shows what "
            "the function it calls gives and what it should give)"
        )

    async def _check_task_files(
        self, ctx: RunContext[Any], backend: FileBackend, path: str
    ) -> None:
        """Refuse a write made before any of the files the task names was used (see the
        class)."""
        target = normalize_path(path)
        known = self._known(ctx)
        if target in known:
            return  # (a file read or written before: its new text may come from it)
        refused: set[str] = ctx.state.setdefault(f"{self.name}.refused_unread", set())
        unread = []
        for name in task_files(ctx.input):  # (in the task's order)
            try:
                named = normalize_path(name)
            except BackendError:
                continue
            if named == target:
                break  # the sources are the files named before it ("from a.csv to b.json")
            if named in known:
                return  # (one of them read: the write may come from it)
            if named not in refused:
                unread.append(name)
        unread = await existing_files(backend, unread)
        if unread:
            refused.update(normalize_path(n) for n in unread)
            names = " and ".join(unread)
            raise ToolError(
                f"{UNREAD_REFUSAL} {names}, which you have not read, and "
                f"what you write to {path} must come from {'it' if len(unread) == 1 else 'them'}. "
                f"Call read_file('{unread[0]}') now, then write {path} from what it shows"
            )

    def _check_replaced_code(self, ctx: RunContext[Any], path: str, before: str, text: str) -> None:
        """Refuse to write a code file, not this run's own, with text that keeps none of its
        lines, when the task asks to change files rather than write them (seen: rename-across
        wrote helpers.py's renamed function over main.py, whose lines were all lost, and
        main.py "should still print the same")."""
        gone = _all_lines_gone(before, text, least=2)  # (rename-across's main.py had two)
        if not gone or not _CHANGE_TASK.search(ctx.input) or _WHOLE_FILE_TASK.search(ctx.input):
            return
        if PurePosixPath(path).suffix.lower() not in _CODE_SUFFIXES:
            return
        if normalize_path(path) in self._created(ctx):
            return
        first = next(line.strip() for line in before.splitlines() if line.strip())
        raise ToolError(
            f"nothing was written: none of the {gone} lines {path} has would be left (it starts "
            f"{_short_quote(first)}), and the task asks to change files, not to write them anew. "
            "Change the part that must change with edit_file (old_string copied from the file), "
            "or write the whole file with its other lines kept"
        )

    async def _check_overwrite(
        self, ctx: RunContext[Any], backend: FileBackend, path: str, content: str
    ) -> str | None:
        """Refuse to overwrite a file with text that this run never saw, or to write a file back
        with line numbers in front (see the class); the file's text before (``None``: a new,
        empty or binary file)."""
        existing = await backend.stat(path)
        if existing is None or existing.is_dir or existing.size == 0:
            return None
        current = await _text_or_none(backend, path)
        if current is None:  # (binary: read_file could not show it, so reading is no remedy)
            return None
        if current.rstrip("\n") == content.rstrip("\n"):  # (a last newline is no change asked)
            raise ToolError(
                f"nothing was written: this is {existing.path} as it is now, so nothing would "
                "change. If the task asks for a change, write the file with the change made (or "
                "change the part with edit_file); if the file already is as the task asks, say so"
            )
        if _LEADING_NUMBER.match(content) and _numbered_copy(current, content):
            raise ToolError(
                f"this is {existing.path} as it is now with a line number in front of each line "
                "(read_file shows line numbers; they are not in the file), so nothing was "
                "written. Write a file only to change it, without line numbers"
            )
        # (a file the run's own code wrote is no text from the head: seen on csv-totals, the
        # code wrote totals.json, and write_file of the printed totals was refused)
        if (
            existing.path not in self._known(ctx)
            and current.strip()
            and not self._since_start(ctx, existing)
        ):
            raise ToolError(
                f"{existing.path} already exists ({_size(existing.size)}) and you have not read "
                "it in this task, so writing it would replace what is in it with text from your "
                f"head. Call read_file('{existing.path}') first; then change it with edit_file, "
                "or call write_file again with the whole new content"
            )
        if self._changed_since_seen(ctx, existing.path, current):
            # (seen: code wrote the right totals into report.md, then the model wrote its own
            # wrong ones from before over them; a rewrite keeping the code's numbers, such as
            # its totals.json written again as valid JSON, goes through)
            kept = set(_NUMBER.findall(content))
            lost = list(dict.fromkeys(n for n in _NUMBER.findall(current) if n not in kept))
            if lost:
                self._refuse_stale(ctx, existing.path, current, lost)
        return current

    def _refuse_stale(self, ctx: RunContext[Any], path: str, current: str, lost: list[str]) -> None:
        """Refuse a write over ``path``, changed since the run saw it, that drops ``lost``."""
        self._saw(ctx, path, current)  # (shown below, or refused only once)
        shown = _lines(current)
        text = "\n".join(self._rows(path, shown))
        whole = len(shown) <= _SMALL_FILE_LINES and len(text) <= _SMALL_FILE_BYTES
        now = f"It now reads:\n{text}\n" if whole else ""
        raise ToolError(
            f"nothing was written: {path} changed since you last read or wrote it (code or a "
            f"command you ran wrote it), and this text would drop {', '.join(lost[:5])} from "
            f"it. {now}If it already is as the task asks, leave it; otherwise "
            + ("change it from this text" if whole else f"call read_file('{path}')")
        )

    @tool(exclusive=True)
    async def write_file(self, ctx: RunContext[Any], path: str, content: str) -> str:
        """Create or overwrite a text file.

        Args:
            path: the file, e.g. "/notes.md".
            content: the complete text of the file.
        """
        ctx.state.pop(f"{self.name}.last_read", None)  # (a read after a write is no repeat)
        plain = _without_line_numbers(content)
        written = content if plain is None else plain
        note = "" if plain is None else _NUMBERS_DROPPED
        if (converted := _json_from_mapping_lines(path, written)) is not None:
            written = converted
            shown = converted.rstrip() if len(converted) <= 600 else converted[:600] + "..."
            note += (
                "; the content was YAML-style key: value lines, not JSON, so it was written as "
                f"this JSON (check it):\n{shown}"
            )
        if (refused := _refused_content(path, written)) is not None:
            raise ToolError(refused)
        await self._check_tests(ctx, path)
        backend = self.resolve(ctx)
        if self.read_task_files:
            await self._check_task_files(ctx, backend, path)
        before = None
        if self.read_before_overwrite:
            before = await self._check_overwrite(ctx, backend, path, written)
            _check_breaks_python(path, before, written)
            if before is not None:
                self._check_replaced_code(ctx, path, before, written)
        info = await backend.write(path, written)
        self._saw(ctx, info.path, written)
        self._changed(ctx).add(info.path)
        created = self._created(ctx)
        if before is None:
            created.add(info.path)  # (its lines are this run's own: replacing them loses nothing)
        if before is None or info.path in created:
            note += await self._unsourced(ctx, backend, info.path, written)
        elif info.path not in created and (gone := _all_lines_gone(before, written)):
            note += (
                f"\n[check] None of the {gone} lines {info.path} had are in it now. If the task "
                "asked to change a part of the file, the rest is lost: write the whole file "
                "again with the other lines kept, or change only that part with edit_file."
            )
        elif info.path not in created and (lost := _lines_lost(before, written)):
            shown = ", ".join(repr(line[:80]) for line in lost[:3])
            more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
            one = len(lost) == 1
            note += (
                f"\n[check] {info.path} lost {'this line' if one else 'these lines'}: {shown}"
                f"{more}. If the task did not ask to remove {'it' if one else 'them'}, put "
                f"{'it' if one else 'them'} back: write the whole file again with every other "
                "line kept, or change only the part the task asks for with edit_file."
            )
        problem = _parse_problem(info.path, written)
        return f"wrote {info.path} ({len(_lines(written))} lines, {_size(info.size)}){note}" + (
            f"\n{problem}" if problem else ""
        )

    async def _unsourced(
        self, ctx: RunContext[Any], backend: FileBackend, path: str, written: str
    ) -> str:
        """A note when a text file the run writes for the task shares no word with the files
        the task names as its sources, all read (seen: "line 1, line 2, line 3" written to
        reversed.txt after reading lines.txt's "one, two, three"); a sentence (a count) is
        left alone."""
        words = _words(written)
        if (
            not self.read_task_files
            or len(words) < 3
            or not _LETTERS.search(written)  # (numbers made from numbers: doubled, summed)
            or len([line for line in written.splitlines() if line.strip()]) < 2
            or PurePosixPath(path).suffix in _CODE_SUFFIXES
        ):
            return ""
        sources = _sources_named(ctx.input, path, self._known(ctx))
        texts = [await _text_or_none(backend, source) for source in sources]
        if not sources or any(text is None or words & _words(text) for text in texts):
            return ""
        names = " and ".join(sources)
        return (
            f"\n[check] No word of what you wrote is in {names}, which the task says "
            f"{path} comes from: it is not made from {'its' if len(sources) == 1 else 'their'} "
            f"text. Read {sources[0]} again and write {path} from the lines it shows."
        )

    @tool(exclusive=True)
    async def edit_file(
        self,
        ctx: RunContext[Any],
        path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
    ) -> str:
        """Replace exact text in a file.

        Args:
            path: the file to change.
            old_string: the exact text to find, as read_file shows it (without line numbers).
            new_string: the text to put instead.
            replace_all: replace every occurrence, not just a unique one.
        """
        ctx.state.pop(f"{self.name}.last_read", None)  # (the read a failed edit asks for)
        if not old_string:
            raise ToolError(
                "old_string is empty; give the exact text to replace, or use write_file to "
                "write a whole file"
            )
        await self._check_tests(ctx, path)
        backend = self.resolve(ctx)
        try:
            text = await backend.read(path)
        except BackendError as exc:
            if await backend.stat(path) is None:
                raise ToolError(f"{exc}. To create a new file, use write_file") from None
            raise
        if old_string == new_string:
            fill = "" if old_string in text else _placeholder_call(path, text, new_string)
            raise ToolError(
                "old_string and new_string are the same; there is nothing to change"
                + (f". old_string is not in {path} either; {fill}" if fill else "")
            )
        new_string, kept = _without_lines_above(path, text, old_string, new_string)
        try:
            edit = plan_edit(path, text, old_string, new_string, replace_all=replace_all)
        except ToolError as exc:
            if old_string in text:
                raise
            if fill := _placeholder_call(path, text, new_string):
                raise ToolError(f"{exc}. {fill}") from None
            if not (elsewhere := await _elsewhere(backend, path, old_string, ctx.input)):
                raise
            raise ToolError(f"{exc}. {elsewhere}") from None
        count, first_line, unquoted, updated = edit.count, edit.first_line, edit.note, edit.text
        twice = _check_edit(path, text, old_string, new_string, ctx.input)
        info = await backend.write(path, updated)
        self._saw(ctx, info.path, updated)
        self._changed(ctx).add(info.path)
        problem = _parse_problem(info.path, updated)
        after = kept + (f"\n{problem}" if problem else "")
        after += (
            _not_rows(info.path, text, first_line, old_string, new_string) if count == 1 else ""
        )
        if (name := _renamed(old_string, new_string)) is not None:
            after += await self._uses_left(backend, name)
        if twice is not None:
            after += (
                f"\n[note] new_string adds {_short_quote(twice)}, which {info.path} already had: "
                "it is there twice now. To change words in a line, old_string is that line and "
                "new_string the same line with only those words changed."
            )
        if count == 1:
            return (
                f"edited {info.path}: replaced 1 occurrence at line {first_line}{unquoted}{after}"
            )
        return f"edited {info.path}: replaced {count} occurrences{after}"

    async def _uses_left(self, backend: FileBackend, name: str) -> str:
        """A note naming where ``name`` is still used after an edit renamed it (the 1.5B model
        renamed fmt_money where it is defined and answered, report.py still importing it)."""
        try:
            found = await backend.grep(rf"\b{re.escape(name)}\b", "/", limit=_MAX_MATCH_LINES)
        except BackendError:
            return ""
        places = [
            f"{g.path}:{g.line}"
            for g in found
            if g.match and not any(part.startswith(".") for part in PurePosixPath(g.path).parts)
        ]
        if not places:
            return ""
        listed = ", ".join(places[:_MAX_USES_LISTED])
        if len(places) > _MAX_USES_LISTED:
            listed += f" and {len(places) - _MAX_USES_LISTED} more"
        return (
            f"\n[note] {name} is still used at {listed}. If those are the name you renamed, "
            "change them too (edit_file with replace_all=true changes every one in a file)."
        )

    @tool
    async def glob(self, ctx: RunContext[Any], pattern: str, path: str = "/") -> str:
        """Find files by name, e.g. "**/*.py" (.py files at any depth) or "*.md" (in path only).

        Args:
            pattern: the pattern, relative to path; "**" spans folders.
            path: the directory to search in.
        """
        if pattern.startswith("/"):  # an absolute pattern: from the root
            path, pattern = "/", pattern.lstrip("/")
        found = await self.resolve(ctx).glob(pattern, path, limit=_MAX_GLOB_RESULTS + 1)
        if not found:
            return f"no files match {pattern!r} in {path}"
        more = len(found) > _MAX_GLOB_RESULTS
        found = found[:_MAX_GLOB_RESULTS]
        rows = [f.path for f in found]
        shown = self._fit(rows)
        out = "\n".join(rows[:shown])
        if shown < len(rows) or more:
            rest = f"{len(rows) - shown}{'+' if more else ''}"
            out += f"\n... {rest} more files; use a narrower pattern or path"
        return out

    async def _small_file(self, ctx: RunContext[Any], path: str) -> str:
        """A short file searched in vain, shown whole: a small model that guessed the line's
        wording ("web_server_port = 8080") repeats the search, when reading the file answers
        it (measured: six identical searches of a 9-line settings.ini)."""
        backend = self.resolve(ctx)
        info = await backend.stat(path)
        if info is None or info.is_dir or info.size > _SMALL_FILE_BYTES:
            return ""
        try:
            text = await backend.read(path)
        except BackendError:
            return ""  # (binary or unreadable: the plain "no matches" stands)
        lines = _lines(text)
        if not lines or len(lines) > _SMALL_FILE_LINES:
            return ""
        self._saw(ctx, info.path, text)
        shown = "\n".join(self._rows(info.path, lines))
        return f"; the pattern may not be worded as the file is. The whole file:\n{shown}"

    @tool
    async def grep(
        self,
        ctx: RunContext[Any],
        pattern: str,
        path: str = "/",
        glob: str | None = None,
        output_mode: Literal["files_with_matches", "content", "count"] = "files_with_matches",
        context: int = 0,
    ) -> str:
        """Search file contents with a regular expression.

        Args:
            pattern: the regular expression, e.g. "def main".
            path: a file or directory to search.
            glob: only files matching this, e.g. "*.py".
            output_mode: "files_with_matches" (paths), "content" (matching lines) or "count".
            context: lines shown around each match (content mode).
        """
        if context < 0:
            raise ToolError("context must be 0 or more")
        context = min(context, _MAX_CONTEXT) if output_mode == "content" else 0
        found = await self.resolve(ctx).grep(
            pattern, path, glob=glob, context=context, limit=_MAX_MATCH_LINES
        )
        where = f"{path}" + (f" (files {glob})" if glob else "")
        if not found:
            return f"no matches for {pattern!r} in {where}" + await self._small_file(ctx, path)
        stopped = len(found) >= _MAX_MATCH_LINES
        if output_mode == "content":
            sections = await _sections(self.resolve(ctx), found)
            rows = self._content_rows(found, context, sections)
        else:
            counts: dict[str, int] = {}
            for g in found:
                if g.match:
                    counts[g.path] = counts.get(g.path, 0) + 1
            if output_mode == "count":
                # (spelled out: the 1.5B model read "/orders.csv:3" and answered 10)
                rows = [f"{p}: {n} matching line{'' if n == 1 else 's'}" for p, n in counts.items()]
            else:
                rows = list(counts)
        shown = self._fit(rows)
        out = "\n".join(rows[:shown])
        if shown < len(rows):
            unit = "lines" if output_mode == "content" else "files"
            out += f"\n... {len(rows) - shown} more {unit}"
        if shown < len(rows) or stopped:
            if stopped:
                out += f"\n(the search stopped after {_MAX_MATCH_LINES} lines)"
            out += "; narrow the search with path= or glob=" + (
                ", or use output_mode='count'" if output_mode == "content" else ""
            )
        return out

    def _content_rows(
        self,
        found: list[GrepLine],
        context: int,
        sections: dict[tuple[str, int], str] | None = None,
    ) -> list[str]:
        """``path:line:text`` for matches, ``path-line-text`` for context lines, ``--`` between
        separate groups (as grep and ripgrep print them); a match in a config file's section
        ends with ``(in [section])``."""
        rows: list[str] = []
        previous: GrepLine | None = None
        for g in found:
            if (
                context
                and previous is not None
                and (previous.path != g.path or g.line > previous.line + 1)
            ):
                rows.append("--")
            mark = ":" if g.match else "-"
            section = (sections or {}).get((g.path, g.line)) if g.match else None
            where = f"  (in [{section}])" if section else ""
            rows.append(f"{g.path}{mark}{g.line}{mark}{self._cut_line(g.text)}{where}")
            previous = g
        return rows


_FOLDER_NAMES = 8  # names of a folder's entries shown beside it, at most


async def _folder(backend: FileBackend, path: str) -> str:
    """A folder as the overview shows it: with its entries' names when it has a few (seen:
    data/numbers.txt made up for "the files in the data folder", which held a.txt, b.txt and
    c.txt, and looked for to the end of the run)."""
    try:
        inside = await backend.ls(path)
    except BackendError:
        return f"{path}/ (dir)"
    if not inside or len(inside) > _FOLDER_NAMES:
        return f"{path}/ (dir)"
    names = ", ".join(PurePosixPath(e.path).name + ("/" if e.is_dir else "") for e in inside)
    return f"{path}/ (dir: {names})"


class WorkspaceOverview(Capability):
    """Shows the model the top of its file area at the start of each run.

    A model that has never seen the workspace guesses paths (``/src/data.csv``) and content; one
    line listing what is there (``/sales.csv (120 B), /data/ (dir: a.txt, b.txt)``) grounds its
    first calls. At most ``max_entries`` entries of the top folder are listed, the rest counted;
    a folder's entries are named when it has a few.
    """

    name = "workspace-overview"

    def __init__(self, files: FileTools, *, max_entries: int = 30) -> None:
        if max_entries < 1:
            raise UsageError(f"WorkspaceOverview max_entries must be at least 1, not {max_entries}")
        self.files = files
        self.max_entries = max_entries

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        try:
            entries = await self.files.resolve(ctx).ls("/")
        except BackendError:
            return None
        if not entries:
            return "The workspace is empty."
        backend = self.files.resolve(ctx)
        shown = [
            await _folder(backend, e.path) if e.is_dir else f"{e.path} ({_size(e.size)})"
            for e in entries[: self.max_entries]
        ]
        more = len(entries) - len(shown)
        tail = f", and {more} more (call ls)" if more else ""
        return f"Files in the workspace now: {', '.join(shown)}{tail}."
