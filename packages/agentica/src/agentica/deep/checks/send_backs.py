"""The send-backs: one thing seen wrong with an answer, each sent back at most once or twice.

``AnswerCheck`` asks before a run ends whether the task was done; before that general check it
looks for the things a small model gets wrong most (seen in transcripts): a result from wrong
code, two values for one setting, a word left to change, a move half made, tests never run or
still failing (then the function asked for anew), a change never made or made to one file of
several, a placeholder left. Each is a ``SendBackCheck`` in ``SEND_BACKS``,
in the order they are looked for; ``Seen`` is what the run's calls showed, which they read.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from agentica.deep.files import (
    existing_files,
    judging_tests,
    placeholder_line,
    table_rows_hint,
    task_files,
    tests_call,
)
from agentica.errors import AgenticaError
from agentica.tools.context import RunContext
from agentica.tools.files import FileBackend

__all__ = ["SEND_BACKS", "Seen", "SendBackCheck", "first_send_back", "note_settings"]


@dataclass
class Seen:
    """What ``AnswerCheck`` saw of one run's tool calls (kept in the run's state)."""

    calls: list[str] = field(default_factory=list)  # one line per call, in order
    arguments: str = ""  # the successful calls' arguments, one after another
    changed: bool = False  # a call may have changed files
    changed_files: set[str] = field(default_factory=set)  # written paths ("*": unknown ones)
    tested: bool = False  # a call ran tests
    # after a failed test run, what failed; "changed" after a change since the last run
    retest: str | None = None
    # what a reading of the last run_python call's code shows wrong, and that code put right
    wrong: tuple[str, str | None] | None = None
    settings: dict[str, str] = field(default_factory=dict)  # value -> line, of the setting asked
    unread: list[str] = field(default_factory=list)  # named files a note said to read
    choice: str | None = None  # the tool the next model call is to call
    checks: int = 0  # general checks made (and send-backs that stand for one)
    sent: dict[str, int] = field(default_factory=dict)  # send-backs made, by name
    confirmation_sent: bool = False  # a bare "Done." after the check, asked for the answer
    left: str = ""  # where the word to change was left, when last sent back

    def unused(self, task: str) -> list[str]:
        """File names the task gives that no successful call used."""
        return unused_files(task, self.arguments)


Review = Callable[[RunContext[Any], Seen, str], Awaitable[str | None]]


@dataclass(frozen=True)
class SendBackCheck:
    """One thing a small model gets wrong, looked for in an answer (``review`` gets the run's
    context, what was seen and the answer; it returns the request to send back, or None).

    Attributes:
        times: how many times per run it may send back.
        counts_as_check: it stands for the run's general check (seen: oldest-person put right,
            then asked the general check, whose list of calls showed the wrong result first,
            answered it again).
        after_named_files: looked for only once every file the task names was used (else the
            general check sends the model to them first).
    """

    name: str
    review: Review
    times: int = 1
    counts_as_check: bool = False
    after_named_files: bool = False


async def first_send_back(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """The request of the first send-back in ``SEND_BACKS`` that finds something wrong with
    ``answer`` (and has sends left), counted as made; None when none does."""
    unused = seen.unused(ctx.input)
    for send_back in SEND_BACKS:
        if seen.sent.get(send_back.name, 0) >= send_back.times:
            continue
        if send_back.after_named_files and unused:
            continue
        request = await send_back.review(ctx, seen, answer)
        if request is not None:
            seen.sent[send_back.name] = seen.sent.get(send_back.name, 0) + 1
            seen.checks += send_back.counts_as_check
            return request
    return None


# -- a wrong result ---------------------------------------------------------------------------

WRONG_RESULT_PROMPT = (
    "Your answer comes from the last code you ran, and that code gives a wrong result: "
    "{remark}\n{run}\nThen answer from what it prints."
)


async def _wrong_result(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """An answer given while the last ``run_python`` call's code gives a wrong result a reading
    of it shows (``hints.wrong_result``: seen, "Who is the oldest person?" answered from
    ``max()`` of the birth years, the remark "Use min()" on that result unread), sent back
    with the code put right to run."""
    if seen.wrong is None or "run_python" not in ctx.functions:
        return None
    seen.choice = "run_python"
    remark, right = seen.wrong
    # (as a call to copy: given the code in a fence, oldest-person's 1.5B model called
    # run_python with the name the wrong code had printed as its code, twice)
    run = (
        f"Run it again put right: run_python({json.dumps({'code': right}, ensure_ascii=False)})"
        if right is not None
        else "Change that in the code and run it again with run_python."
    )
    return WRONG_RESULT_PROMPT.format(remark=remark, run=run)


# -- two values for one setting ---------------------------------------------------------------

BOTH_SETTINGS_PROMPT = (
    "The question asks for one {noun}, and your answer gives {values}, from these lines the "
    "tools showed:\n{lines}\nThe question: {task}\nWhich of them is the one it asks about? "
    "Answer with that one."
)
# "What port does ...", "Which version of ...": the one setting a question asks for
_ASKED_SETTING = re.compile(
    r"(?i)^\s*(?:what|which)(?:\s+is\s+the|\s+was\s+the)?\s+([a-z_]{2,30})\b(?!\s+(?:is|are)\b)"
)
_MAX_SETTINGS = 20
_SETTING_WORD = re.compile(r"[A-Za-z_][\w-]{3,}")
_MAX_OUTPUT_SCANNED = 20_000


async def _both_settings(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A question for one setting ("What port does the web server listen on?") answered with
    two of the values tool outputs showed for it (seen: "5432 for the database and port 8080
    for the server", from ``port = 5432 (in [database])`` and ``port = 8080 (in [server])``),
    sent back with those lines to answer with one."""
    found = seen.settings
    named = [v for v in found if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w]|\.\w)", answer)]
    if len(named) < 2:
        return None
    lines = "\n".join(f"- {found[value]}" for value in named)
    prompt = BOTH_SETTINGS_PROMPT.format(
        noun=_asked_setting(ctx.input), values=", ".join(named), lines=lines,
        task=ctx.input.strip(),
    )  # fmt: skip
    # the line that shares a word with the question beside the setting's own ("web
    # server" and "(in [server])"), when only one does
    asked = set(_SETTING_WORD.findall(ctx.input.lower()))
    words = {v: set(_SETTING_WORD.findall(found[v].lower())) for v in named}
    common = set.intersection(*words.values())  # (the file's name, the setting's)
    shared = {v: (asked & words[v]) - common for v in named}
    sharing = [v for v in named if shared[v]]
    if len(sharing) == 1:
        value = sharing[0]
        quoted = " and ".join(repr(w) for w in sorted(shared[value]))
        prompt += f" (The question's {quoted} is in the line of {value}.)"
    return prompt


def _asked_setting(task: str) -> str:
    """The singular noun a "What port ...?" question asks for, or ``""``."""
    match = _ASKED_SETTING.match(task)
    noun = match.group(1).lower() if match else ""
    return "" if noun.endswith("s") and not noun.endswith("ss") else noun


def note_settings(task: str, seen: Seen, output: str) -> None:
    """Record the values a tool's ``output`` shows for the setting the ``task``'s question asks
    for (lines such as ``port = 8080`` or ``"version": "2.4.1"``), each with its line."""
    noun = _asked_setting(task)
    if not noun:
        return
    pattern = re.compile(
        rf"""(?im)^[^\n]*?\b{re.escape(noun)}\w*["']?\s*[=:]\s*["']?([\w.\-]+)[^\n]*$"""
    )
    for match in pattern.finditer(output[:_MAX_OUTPUT_SCANNED]):
        value = match.group(1)
        if len(seen.settings) < _MAX_SETTINGS and value not in seen.settings:
            seen.settings[value] = " ".join(match.group(0).split())[:200]


# -- a word left to change --------------------------------------------------------------------

LEFT_PROMPT = (
    "The task: {task}\nBut {old!r} is still there: {where}. Change it in each of these files "
    "with edit_file: old_string {old!r}, new_string {new!r}, replace_all true. Then answer "
    "with what you changed."
)
# "Change the British spelling colour to color", "rename the function calc to compute": the
# word or name to change (the one right before "to") and what it becomes
_CHANGE_TO = re.compile(
    r"(?i)\b(?:change|rename|replace)\b[^.?!\n]{0,80}?(?<![\w.])([a-z_][\w]*)\s+"
    r"(?:to|with|by)\s+['\"`]?([a-z_][\w]*)\b"
)
_EVERYWHERE = re.compile(
    r"(?i)\b(?:everywhere|throughout|across|all\s+(?:the\s+)?files|"
    r"(?:whole|entire|this)\s+(?:project|repo|repository|codebase|code\s*base))\b"
)
_MAX_LEFT = 200
_MAX_LEFT_FILES = 6
# A task that asks to change something (not a question about it)
CHANGING = re.compile(
    r"(?i)\b(?:create|write|save|make|generate|add|put|fill|update|change|bump|rename|fix|"
    r"turn|remove|delete|replace|move|combine|merge|subtract|convert|edit|append|insert)\b"
)
# ... unless it opens with a question ("What port ...? It's set in settings.ini.")
QUESTION = re.compile(r"(?i)^\s*(?:what|which|who|whose|how|where|when|why|is|are|does|do|did)\b")


async def _left_to_change(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A task to change one word or name to another ("Change the British spelling colour to
    color in README.md", "Rename fmt_money to format_money everywhere") answered while the
    files still have the old one (seen: a line of README.md pasted around itself, "colour"
    never changed), sent back with where it is left, whether the run changed files or not."""
    found = _CHANGE_TO.search(ctx.input)
    if found is None or ctx.files is None:
        return None
    if QUESTION.match(ctx.input) or ctx.usage.tool_calls == 0:
        return None  # ("What breaks if I rename calc to compute?" is answered)
    old, new = found.group(1), found.group(2)
    if old.lower() == new.lower() or old in task_files(ctx.input) or len(old) < 3:
        return None
    named = await existing_files(ctx.files, task_files(ctx.input))
    word = re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)(?!\s*[=:])")  # (not a setting's key)
    # the files it names; the workspace when it names none, or says "everywhere" (seen:
    # "Rename fmt_money ... everywhere in this project. main.py should still print the same
    # thing.", main.py naming no fmt_money)
    paths = ["/"] if not named or _EVERYWHERE.search(ctx.input) else named
    places = await _places(ctx, word, old, paths)
    where = "; ".join(
        f"{path} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at[:8]))})"
        for path, at in list(places.items())[:_MAX_LEFT_FILES]
    )
    if not places or where == seen.left:
        return None  # (gone; or left where it was when last sent back: no progress to go on)
    seen.left = where
    if "edit_file" in ctx.functions:
        seen.choice = "edit_file"
    return LEFT_PROMPT.format(task=ctx.input.strip(), old=old, new=new, where=where)


async def _places(
    ctx: RunContext[Any], word: re.Pattern[str], old: str, paths: list[str]
) -> dict[str, list[int]]:
    """The lines, by file, under ``paths`` where ``word`` (the name ``old``) is."""
    places: dict[str, list[int]] = {}
    if ctx.files is None:
        return places
    for path in paths:
        try:
            lines = await ctx.files.grep(rf"\b{re.escape(old)}\b", path, limit=_MAX_LEFT)
        except AgenticaError:
            continue
        for line in lines:
            hidden = any(part.startswith(".") for part in PurePosixPath(line.path).parts)
            if line.match and not hidden and word.search(line.text):
                places.setdefault(line.path, []).append(line.line)
    return places


# -- a move half made -------------------------------------------------------------------------

MOVE_PROMPT = (
    "The task: {task}\nBut {source} still defines {name}:\n```python\n{definition}\n```\n"
    "Moving it takes two changes:\n1. {first}\n2. In {source}, replace that definition with "
    "the line `{line}`: edit_file({second})\nThen run {source} to check that it works as "
    "before."
)
# "Move slugify out of main.py into a new module textutils.py": the name, from, to
_MOVE = re.compile(
    r"(?i)\bmove\s+(?:the\s+(?:function|class)\s+)?([a-z_]\w*)(?:\(\))?\s+(?:out\s+of|from)\s+"
    r"(\S+?\.py)\s+(?:in)?to\s+(?:a\s+new\s+(?:module|file)\s+)?(\S+?\.py)\b"
)


async def _not_moved(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A task to move a function or class from one Python file to another ("Move slugify out of
    main.py into a new module textutils.py ...") answered, after a change, while the first
    still defines it (seen: textutils.py written with a slugify from the model's head, main.py
    as it was), sent back with the definition and the two edits it takes."""
    found = _MOVE.search(ctx.input)
    if not seen.changed or found is None or ctx.files is None:
        return None
    name, source, target = found.group(1), found.group(2), found.group(3)
    definition = _definition(await _read_or_empty(ctx, source), name)
    if definition is None:
        return None
    there = _definition(await _read_or_empty(ctx, target), name)
    module = PurePosixPath(target.lstrip("/")).with_suffix("").as_posix().replace("/", ".")
    line = f"from {module} import {name}"
    if there == definition:
        first = f"{target} has it already."
    else:  # (the calls themselves: seen, told to, the model wrote its own slugify again)
        call = json.dumps({"path": target, "content": definition + "\n"})
        first = f"{target} gets the definition exactly as {source} has it: write_file({call})"
    second = json.dumps({"path": source, "old_string": definition, "new_string": line})
    if "edit_file" in ctx.functions:
        seen.choice = "edit_file" if there == definition else "write_file"
    return MOVE_PROMPT.format(
        task=ctx.input.strip(), name=name, source=source, definition=definition,
        first=first, line=line, second=second,
    )  # fmt: skip


async def _read_or_empty(ctx: RunContext[Any], path: str) -> str:
    if ctx.files is None:
        return ""
    try:
        return await ctx.files.read(path)
    except AgenticaError:
        return ""


def _definition(source: str, name: str) -> str | None:
    """The source of the top-level function or class ``name`` in Python ``source``, or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        if isinstance(node, kinds) and node.name == name:
            return ast.get_source_segment(source, node, padded=False)
    return None


# -- a change never made ----------------------------------------------------------------------

UNCHANGED_PROMPT = (
    "The task asks for a change: {task}\nBut none of your tool calls changed a file, so "
    "{names} {state}: reading a file or marking a step done changes nothing. Make the "
    "change now with {tool}, then answer with what you changed."
)


async def _unchanged(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A task asking to change files it names that exist, answered when no call changed
    anything (seen: "Bump the version in setup.cfg to 1.5.0." answered "has been updated"
    after a read and a todo list marked done, the file as it was)."""
    if seen.changed or ctx.files is None:
        return None
    asks = CHANGING.search(ctx.input) and not QUESTION.match(ctx.input)
    if not asks or ctx.usage.tool_calls == 0:
        return None  # (a question; or an answer without tools: the general check sees it)
    named = await existing_files(ctx.files, task_files(ctx.input))
    if not named:
        return None
    tool = next((t for t in ("edit_file", "write_file") if t in ctx.functions), None)
    if tool is not None:
        seen.choice = tool
    names = " and ".join(named)
    state = "is as it was" if len(named) == 1 else "are as they were"
    prompt = UNCHANGED_PROMPT.format(
        task=ctx.input.strip(), names=names, state=state, tool=tool or "a tool"
    )
    return prompt + (await _to_fill(ctx.files, named) if tool == "edit_file" else "")


async def _to_fill(files: FileBackend, named: Sequence[str]) -> str:
    """Where to make the change in the first of ``named`` with one line to fill in (``TODO``):
    that line as ``old_string``, and under a Markdown table, how its rows are written (seen on
    the demo sampled at 0.3: the header again as new_string, then the totals without regions)."""
    for name in named:
        try:
            text = await files.read(name)
        except AgenticaError:
            continue
        if (found := placeholder_line(text)) is None:
            continue
        number, line = found
        what = table_rows_hint(text, number) or "what goes there"
        return (
            f" {name} has one line to fill in, {line!r} (line {number}): old_string is "
            f"{line!r}, new_string {what}."
        )
    return ""


HALF_CHANGED_PROMPT = (
    "The task: {task}\nYou changed {done}, but {names} {state}: none of your calls changed "
    "{pronoun}. Make that change now with edit_file, then answer with what you changed."
)
_FILE = r"((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4})\b"
# the files a task says to change: "make app.py print ...", "fix stats.py", "add a repeat
# setting to config.json" (not "from data.csv", nor "write the total to total.txt": a new file)
_TO_CHANGE = re.compile(
    rf"(?i)\b(?:make|fix|change|update|edit|modify|correct|bump)\s+(?:the\s+)?(?:file\s+)?"
    rf"{_FILE}|\b(?:add|append|insert)\b[^.;,]{{0,60}}?\b(?:to|into)\s+(?:the\s+)?"
    rf"(?:file\s+)?{_FILE}"
)


async def _half_changed(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A task that says to change several files it names answered when the calls changed
    some of them but not another (seen: "Add a repeat setting to config.json, set to 3, and
    make app.py print the greeting that many times." answered after config.json only, app.py
    as it was). Not when code or a command may have changed files."""
    if not seen.changed_files or "*" in seen.changed_files or ctx.files is None:
        return None
    if QUESTION.match(ctx.input):
        return None
    asked = [name for m in _TO_CHANGE.finditer(ctx.input) for name in m.groups() if name]
    left = [
        name for name in await existing_files(ctx.files, dict.fromkeys(asked))
        if name.lstrip("/") not in seen.changed_files
    ]  # fmt: skip
    if not left:
        return None
    if "edit_file" in ctx.functions:
        seen.choice = "edit_file"
    one = len(left) == 1
    return HALF_CHANGED_PROMPT.format(
        task=ctx.input.strip(), done=" and ".join(sorted(seen.changed_files)),
        names=" and ".join(left), state="is as it was" if one else "are as they were",
        pronoun="it" if one else "them",
    )  # fmt: skip


# -- tests never run, or still failing --------------------------------------------------------

UNTESTED_PROMPT = (
    "The task says the tests in {tests} must pass, and none of your calls ran them, so "
    "nothing shows that they pass. Run them now: {how}. Read what fails (the assertion shows "
    "the expected and the actual value), fix the code it tests, and run them again; then "
    "answer with what you changed."
)
FAILING_PROMPT = (
    "The tests in {tests} still fail, so the task is not done: {failure}\nFind the line of "
    "the code under test that gives the wrong value and change it now with edit_file (the "
    "tests stay as they are); then run them again ({how}) and answer with what you changed."
)
RETEST_PROMPT = (
    "You changed the code after the tests in {tests} last ran, so nothing shows that they pass "
    "now. Run them again: {how}. If they still fail, fix the code they test; then answer with "
    "what you changed."
)
_MAX_SOURCE = 2000  # characters of a file the task names shown beside a failing test


async def _untested(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A fix judged by tests the task names, answered when no call ran them (seen: "The tests
    in test_stats.py fail. Fix stats.py so they pass." answered with the task's own words,
    the tests never run, the bug never seen)."""
    return None if seen.tested else await _to_run(ctx, seen, UNTESTED_PROMPT)


async def _failing(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A fix judged by tests the task names, answered while the last run of them failed (seen:
    "AssertionError: 'Hello_World' != 'hello-world'" answered with how slugify "should be
    modified", nothing changed), sent back with the failure and the code it comes from."""
    if not seen.retest or seen.retest == "changed":
        return None
    found = await _judging_tests(ctx)
    if found is None:
        return None
    _, tests, how = found
    if "edit_file" in ctx.functions:
        seen.choice = "edit_file"
    failing = FAILING_PROMPT.format(tests=" and ".join(tests), failure=seen.retest, how=how)
    return failing + await _sources(ctx, tests)


REWRITE_PROMPT = (
    "The tests in {tests} still fail after your changes: {failure}\nPatching {name} line by "
    "line has not worked, so write it anew. What it must do:\n{spec}\nCall edit_file with "
    "path {source!r}, old_string exactly the definition as the file has it now:\n```python\n"
    "{definition}\n```\nand new_string a new definition of {name}, written from scratch so "
    "that it does what its docstring says and every check above holds. Then run the tests "
    "again ({how})."
)
_MAX_REWRITTEN = 40  # lines of a function asked to be written anew
_MAX_CHECKS = 6


async def _rewrite(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A fix still failing its tests after the failure was sent back once: the function the
    failing assertion calls, asked to be written anew from its docstring and the tests'
    checks of it, with its definition as old_string (seen: mean's loop over ``values[1:]``
    left, ``+ 1`` put on its result, then taken off again; a 1.5B model writes a mean from
    scratch better than it finds the line to patch)."""
    if not seen.retest or seen.retest == "changed" or not seen.sent.get("failing"):
        return None
    called = _called(seen.retest)
    found = await _judging_tests(ctx) if called else None
    if found is None or called is None or ctx.files is None:
        return None
    _, tests, how = found
    for source in await existing_files(ctx.files, task_files(ctx.input)):
        if not source.endswith(".py") or source in tests:
            continue
        definition = _definition(await _read_or_empty(ctx, source), called)
        if definition is not None and definition.count("\n") < _MAX_REWRITTEN:
            break
    else:
        return None
    checks: list[str] = []
    for test in tests:
        for line in (await _read_or_empty(ctx, test)).splitlines():
            if re.search(rf"\b{re.escape(called)}\(", line) and "assert" in line:
                checks.append(f"- {line.strip()}")
    spec = "\n".join(dict.fromkeys(checks[:_MAX_CHECKS])) or f"- {seen.retest}"
    if "edit_file" in ctx.functions:
        seen.choice = "edit_file"
    return REWRITE_PROMPT.format(
        tests=" and ".join(tests), failure=seen.retest, name=called, spec=spec, source=source,
        definition=definition, how=how,
    )  # fmt: skip


def _called(failure_text: str) -> str | None:
    """The function a failed ``assertEqual(f(...), ...)`` line calls (``mean``), or None."""
    code = failure_text.split(" -> ", 1)[0]
    try:
        node = ast.parse(code.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Call):
        func = node.args[0].func
        return func.id if isinstance(func, ast.Name) else None
    return None


async def _changed_since(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A fix judged by tests the task names, answered after a change made since they last ran
    (seen: "+ 0.5" edited onto mean's result and answered "the tests pass", never run again;
    a second change, after the failure was sent back, answered unrun too)."""
    return await _to_run(ctx, seen, RETEST_PROMPT) if seen.retest == "changed" else None


async def _to_run(ctx: RunContext[Any], seen: Seen, prompt: str) -> str | None:
    """``prompt`` with the tests that judge the task's fix and the call that runs them (that
    tool chosen); None when there are none."""
    found = await _judging_tests(ctx)
    if found is None:
        return None
    runner, tests, how = found
    seen.choice = runner
    return prompt.format(tests=" and ".join(tests), how=how)


async def _judging_tests(ctx: RunContext[Any]) -> tuple[str, list[str], str] | None:
    """For a task to fix code that tests it names judge ("The tests in test_stats.py fail. Fix
    stats.py ..."): the tool that runs them, the test files, and the call to show."""
    if ctx.files is None or not CHANGING.search(ctx.input) or QUESTION.match(ctx.input):
        return None  # ("Why do the tests fail?" is answered, not fixed)
    tests = await judging_tests(ctx.input, ctx.files)
    run = await tests_call(ctx, ctx.files, tests[0]) if tests else None
    if run is None:
        return None
    runner, how = run
    return runner, tests, how


async def _sources(ctx: RunContext[Any], tests: list[str]) -> str:
    """The short Python files the task names other than ``tests``, shown whole: the failure
    and the code it comes from side by side (told only the failure, the model repeated an
    edit that changed nothing)."""
    if ctx.files is None:
        return ""
    shown = []
    for name in await existing_files(ctx.files, task_files(ctx.input)):
        if not name.endswith(".py") or name in tests:
            continue
        try:
            text = await ctx.files.read(name)
        except AgenticaError:
            continue
        if len(text) <= _MAX_SOURCE:
            shown.append(f"\n{name} now reads:\n{text.rstrip()}")
    return "\n" + "\n".join(shown) if shown else ""


# -- a placeholder left -----------------------------------------------------------------------

PLACEHOLDER_PROMPT = (
    "The task: {task}\nBut {path} still has the placeholder line {line!r} (line {number}"
    "{after}): to fill it in, that line is replaced by what belongs there, written the way the "
    "lines around it are, so it is gone. Replace it now (edit_file with old_string {line!r}; "
    "keep every other line, and no second copy of what is already there), then answer."
)
# a task to fill in a template ("Fill in report.md ...", "Complete the form in form.txt")
_FILL = re.compile(r"(?i)\b(?:fill(?:\s+(?:in|out))?|complete)\b")
# a line that only marks where something goes: "TODO", "# TODO: totals", "<!-- TBD -->"
_PLACEHOLDER = re.compile(r"(?i)\s*(?:#|//|<!--|-|\*)?\s*(?:TODO|TBD|FIXME)\b[^\n]{0,60}")


async def _placeholder(ctx: RunContext[Any], seen: Seen, answer: str) -> str | None:
    """A task to fill in a file it names, answered while a line of that file still is a
    placeholder ("TODO") and the run changed files (seen: "Fill in report.md ..." answered
    with the totals in a table added under the template's TODO line)."""
    if not seen.changed or ctx.files is None:
        return None
    if not _FILL.search(ctx.input) or QUESTION.match(ctx.input):
        return None
    for name in await existing_files(ctx.files, task_files(ctx.input)):
        lines = (await _read_or_empty(ctx, name)).splitlines()
        at = next((n for n, line in enumerate(lines) if _PLACEHOLDER.fullmatch(line)), None)
        if at is None:
            continue
        if "edit_file" in ctx.functions:
            seen.choice = "edit_file"
        before = next((line.strip() for line in reversed(lines[:at]) if line.strip()), "")
        after = f", after the line {before!r}" if before else ""
        return PLACEHOLDER_PROMPT.format(
            path=name, line=lines[at].strip(), number=at + 1, after=after,
            task=ctx.input.strip(),
        )  # fmt: skip
    return None


# -- the files the task names -----------------------------------------------------------------


def unused_files(task: str, arguments: str) -> list[str]:
    """File names the task mentions that no successful tool call's arguments mention (a
    Python module run by its name counts: ``python3 -m unittest test_text``)."""
    return [n for n in task_files(task) if n not in arguments and not _ran_module(n, arguments)]


def _ran_module(name: str, arguments: str) -> bool:
    """Whether ``arguments`` run the Python file ``name`` as a module (``-m unittest test_a``)."""
    if not name.endswith(".py"):
        return False
    module = re.escape(name.removesuffix(".py").replace("/", "."))
    return re.search(rf"-m\s+(?:unittest|pytest)\b[^\n]*?\b{module}\b", arguments) is not None


SEND_BACKS: tuple[SendBackCheck, ...] = (
    # about the answer itself: they stand for the general check
    SendBackCheck("wrong_result", _wrong_result, counts_as_check=True),
    SendBackCheck("both_settings", _both_settings, counts_as_check=True),
    # about the files, changed or not (it says what to change)
    # again while each time some of it was changed (seen: rename-across renamed it in
    # helpers.py, of helpers.py and report.py, and answered)
    SendBackCheck("left_to_change", _left_to_change, times=3),
    # twice (seen: the first time, the model made the first of the two changes only)
    SendBackCheck("not_moved", _not_moved, times=2),
    # tests first: told to change something before it saw what fails, the model changed the
    # tests (fix-page-count) or a line at random
    SendBackCheck("untested", _untested, after_named_files=True),
    SendBackCheck("failing", _failing, after_named_files=True),
    # still failing after that: the function written anew
    SendBackCheck("rewrite", _rewrite, after_named_files=True),
    SendBackCheck("changed_since", _changed_since, after_named_files=True),
    # twice (seen: config-repeat's one edit after it failed, old_string the task's words)
    SendBackCheck("unchanged", _unchanged, times=2, counts_as_check=True, after_named_files=True),
    # twice (a change to a second file may take two tries)
    SendBackCheck("half_changed", _half_changed, times=2, after_named_files=True),
    SendBackCheck("placeholder", _placeholder, after_named_files=True),
)
