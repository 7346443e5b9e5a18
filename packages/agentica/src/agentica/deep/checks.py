"""``AnswerCheck``: ask the model to check its work before it finishes.

Small models often answer "done" after computing a result without doing the last step the user
asked for (writing the file, saving the code). Before the run may end, the model is asked, a
bounded number of times per run, to compare what was asked with what its tool calls did and to
finish the missing steps. A model that really is done repeats its answer and the run ends.
"""

from __future__ import annotations

import ast
import bisect
import json
import re
import shlex
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from agentica.deep.files import (
    FILE_NAME,
    UNREAD_REFUSAL,
    existing_files,
    guards_the_tests,
    may_change_files,
    task_files,
)
from agentica.deep.shell.hints import written_texts, wrong_result
from agentica.errors import AgenticaError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.run.repetition import returned_error
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["AnswerCheck", "NumberCheck"]

DEFAULT_PROMPT = (
    "Before you finish, check your work against the task: {task}\n"
    "Your tool calls in this task:\n{calls}\n"
    "For each thing the task asks for, was it done by one of these calls? A file the "
    "task asks to create or change must be written with a tool (printing its content is not "
    "enough); a value it asks to save must be in the file. Do any missing step now with a tool "
    "call. If everything is done, give your final answer to the user again: the result itself "
    "(the value asked for, or what you changed), not whether you are done."
)


class AnswerCheck(Capability):
    """Send the model back once (``max_checks``) to verify its work before the run ends.

    The request lists the tool calls the run made (name, short arguments, short result), because
    a small model checks evidence it is shown far better than its memory of the conversation.
    Small models also answer the check itself ("Yes, the task is done."): when the task was a
    question, such a reply is sent back once more for the answer.

    Args:
        max_checks: how many times per run the model is asked (0 disables the check).
        prompt: the text of the check; ``{task}`` is replaced by the user's request and
            ``{calls}`` by the list of the run's tool calls.
        only_after_tools: skip the check when the run made no tool calls (a plain question),
            unless the task names a file (``Create config.json ...`` answered with the file's
            text in a code block and no call).
    """

    name = "answer_check"

    def __init__(
        self, *, max_checks: int = 1, prompt: str = DEFAULT_PROMPT, only_after_tools: bool = True
    ) -> None:
        self.max_checks = max_checks
        self.prompt = prompt
        self.only_after_tools = only_after_tools

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        log: list[str] = ctx.state.setdefault(f"{self.name}.calls", [])
        key = f"{self.name}.arguments"
        for call in calls:
            log.append(_describe(call))
            if call.status != "success":
                await _note_task_words(ctx, call)
                refused = call.content_without_notes.startswith(UNREAD_REFUSAL)
                if refused and "read_file" in ctx.functions:  # (the refusal says it all)
                    ctx.state[f"{self.name}.choice"] = "read_file"
                elif call.name in _WRITERS:  # (seen: a list made up until the length limit)
                    path = _PATH_IN_ARGUMENTS.search(call.call.arguments)
                    target = path.group(1) if path else "the file"
                    await self._note_unread(ctx, call, target, ctx.state.get(key, ""), failed=True)
                continue
            if call.name in _BOOKKEEPING:
                continue  # (a todo naming a file does not use it)
            _note_settings(ctx, f"{self.name}.settings", call.content_without_notes)
            if call.name == "run_python":  # (the last run's result is what an answer quotes)
                code = _arguments(call).get("code")
                wrong = wrong_result(code) if isinstance(code, str) else None
                ctx.state[f"{self.name}.wrong"] = wrong
            runs_tests = call.name in _RUNNERS and _RUNS_TESTS.search(call.call.arguments)
            if may_change_files(call):
                ctx.state[f"{self.name}.changed"] = True
                if not runs_tests:
                    ctx.state[f"{self.name}.retest"] = "changed"
            if runs_tests:
                ctx.state[f"{self.name}.tested"] = True
                output = call.content_without_notes
                failed = _FAILED_RUN.match(output)
                ctx.state[f"{self.name}.retest"] = _failure(output) if failed else None
                if failed and (mismatch := _mismatch(output)):
                    call.notes.append(
                        f"[check] {mismatch}. Change the code under test so that it gives "
                        "what the test expects; the tests stay as they are."
                    )
            written = _written(call, data_only=False)
            if written is not None:
                await self._note_unread(ctx, call, written[0], ctx.state.get(key, ""))
            ctx.state[key] = ctx.state.get(key, "") + "\n" + call.call.arguments

    async def _note_unread(
        self,
        ctx: RunContext[Any],
        call: FunctionCall,
        path: str,
        arguments: str,
        *,
        failed: bool = False,
    ) -> None:
        """A file written (or a write that ``failed``) while a file the task names, which
        exists, was never used: what was written cannot come from it (seen: "Write the lines of
        lines.txt in reverse order to reversed.txt" answered with invented lines)."""
        backend = ctx.files
        noted: list[str] = ctx.state.setdefault(f"{self.name}.unread", [])
        if backend is None:
            return
        unread = await existing_files(backend, [
            name for name in _unused_files(ctx.input, arguments)
            if name not in noted and PurePosixPath(path).name != PurePosixPath(name).name
        ])  # fmt: skip
        if unread:
            noted.extend(unread)
            if "read_file" in ctx.functions:
                ctx.state[f"{self.name}.choice"] = "read_file"
            names = " and ".join(unread)
            them = "it" if len(unread) == 1 else "them"
            target = PurePosixPath(path).name
            named = {PurePosixPath(n).name for n in task_files(ctx.input)}
            if (
                failed
                and target in named
                and target not in arguments
                and await existing_files(backend, [path])
            ):
                # a file the task names to change, never read: it is changed, not replaced
                # by the text of the others (seen: test_text.py's tests written into text.py)
                call.notes.append(
                    f"[check] {path} is a file the task names to change, and you have not read "
                    f"it. Read {path} and {names} now; then change {path} where {names} "
                    f"show{'s' if len(unread) == 1 else ''} it is wrong (its own code stays; do "
                    f"not copy {names} into it)."
                )
                return
            call.notes.append(
                f"[check] Before writing {path}, read {names}, which the task names: what you "
                f"write must come from {them}. Read {names} now, then write {path} from what you "
                "read."
                if failed
                else f"[check] You wrote {path} without reading {names}, which the task names: "
                f"what you wrote cannot come from {them}. Read {names} now, then write {path} "
                "again from what you read."
            )

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        choice: str | None = ctx.state.pop(f"{self.name}.choice", None)
        return choice

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        done = int(ctx.state.get(self.name, 0))
        unused = _unused_files(ctx.input, ctx.state.get(f"{self.name}.arguments", ""))
        if self.max_checks and (specific := await self._specific(ctx, message, unused)):
            return specific
        if done >= self.max_checks:
            return self._bare_confirmation(ctx, message) if done else None
        # no tool used: check only a task about files ("Create config.json ...", "What is in
        # notes.txt?" when it exists), not a question that names Node.js or setup.py
        if self.only_after_tools and ctx.usage.tool_calls == 0:
            if unused and (_WRITING.search(ctx.input) or await _any_exists(ctx, unused)):
                pass  # a task about named files, answered without touching them
            elif _HERE.search(ctx.input):
                return await self._unread_folder(ctx, done)
            else:
                return None
        ctx.state[self.name] = done + 1
        calls: list[str] = ctx.state.get(f"{self.name}.calls") or []
        listing = "\n".join(f"- {line}" for line in calls[-_MAX_LISTED:]) or "- (none)"
        prompt = self.prompt.replace("{task}", ctx.input.strip() or "(see above)")
        prompt = prompt.replace("{calls}", listing)
        if unused:
            # a call on them, not an answer; the file tools' own when the agent has them (seen:
            # "required" answered with write_todos, once more, and totals.json never written)
            choice = await _call_for(ctx, unused)
            ctx.state[f"{self.name}.choice"] = choice
            names = ", ".join(unused)
            # the call itself when it is a read (seen: told to use app.py, with read_file
            # chosen, the model read config.json once more)
            how = (
                f"Call read_file({json.dumps({'path': unused[0]})}) now"
                if choice == "read_file"
                else f"Call a tool on {'it' if len(unused) == 1 else 'each of them'} now"
            )
            prompt = (
                f"The task names {names}, but none of your tool calls used "
                f"{'it' if len(unused) == 1 else 'them'}. {how} (to write a file the task "
                f"asks for, call the tool that writes files).\n\n{prompt}"
            )
        return prompt

    async def _specific(
        self, ctx: RunContext[Any], message: AssistantMessage, unused: list[str]
    ) -> str | None:
        """The first of the checks that each send back once for one thing seen wrong. They come
        before the general check; the ones about the answer, and ``_unchanged``, count as it
        (seen: oldest-person put right, then asked the general check, whose list of calls
        showed the wrong result first, answered it again)."""
        answer = self._wrong_result(ctx) or self._both_settings(ctx, message)
        if answer:
            ctx.state[self.name] = int(ctx.state.get(self.name, 0)) + 1
            return answer
        if left := await self._left_to_change(ctx):  # (changed or not: it says what to change)
            return left
        if ctx.state.get(f"{self.name}.changed") and (stays := await self._not_moved(ctx)):
            return stays
        if unused:
            return None
        if unchanged := await self._unchanged(ctx):
            ctx.state[self.name] = int(ctx.state.get(self.name, 0)) + 1  # (the run's check)
            return unchanged
        if untested := await self._untested(ctx):
            return untested
        if failing := await self._failing(ctx):
            return failing
        return await self._placeholder(ctx)

    def _wrong_result(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: an answer given while the last ``run_python`` call's code gives a
        wrong result a reading of it shows (``wrong_result``: seen, "Who is the oldest person?"
        answered from ``max()`` of the birth years, the remark "Use min()" on that result
        unread), sent back with the code put right to run."""
        key = f"{self.name}.wrong"
        wrong: tuple[str, str | None] | None = ctx.state.get(key)
        if wrong is None or ctx.state.get(f"{key}.sent") or "run_python" not in ctx.functions:
            return None
        ctx.state[f"{key}.sent"] = True
        ctx.state[f"{self.name}.choice"] = "run_python"
        remark, right = wrong
        run = (
            f"Run it again put right, with run_python:\n```python\n{right}\n```"
            if right is not None
            else "Change that in the code and run it again with run_python."
        )
        return WRONG_RESULT_PROMPT.format(remark=remark, run=run)

    def _both_settings(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """Once per run: a question for one setting ("What port does the web server listen
        on?") answered with two of the values tool outputs showed for it (seen: "5432 for the
        database and port 8080 for the server", from ``port = 5432 (in [database])`` and
        ``port = 8080 (in [server])``), sent back with those lines to answer with one."""
        key = f"{self.name}.settings"
        found: dict[str, str] = ctx.state.get(key) or {}
        answer = message.content or ""
        named = [v for v in found if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w]|\.\w)", answer)]
        if len(named) < 2 or ctx.state.get(f"{key}.sent"):
            return None
        ctx.state[f"{key}.sent"] = True
        noun = _asked_setting(ctx.input)
        lines = "\n".join(f"- {found[value]}" for value in named)
        prompt = BOTH_SETTINGS_PROMPT.format(
            noun=noun, values=", ".join(named), lines=lines, task=ctx.input.strip()
        )
        # the line that shares a word with the question beside the setting's own ("web
        # server" and "(in [server])"), when only one does
        asked = {w for w in _WORD.findall(ctx.input.lower()) if len(w) > 2}
        words = {v: set(_WORD.findall(found[v].lower())) for v in named}
        common = set.intersection(*words.values())  # (the file's name, the setting's)
        shared = {v: (asked & words[v]) - common for v in named}
        sharing = [v for v in named if shared[v]]
        if len(sharing) == 1:
            value = sharing[0]
            quoted = " and ".join(repr(w) for w in sorted(shared[value]))
            prompt += f" (The question's {quoted} is in the line of {value}.)"
        return prompt

    async def _left_to_change(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a task to change one word or name to another ("Change the British
        spelling colour to color in README.md", "Rename fmt_money to format_money everywhere")
        answered while the files still have the old one (seen: a line of README.md pasted
        around itself, "colour" never changed), sent back with where it is left."""
        key = f"{self.name}.left"
        found = _CHANGE_TO.search(ctx.input)
        if ctx.state.get(key) or found is None or ctx.files is None:
            return None
        if _QUESTION.match(ctx.input) or ctx.usage.tool_calls == 0:
            return None  # ("What breaks if I rename calc to compute?" is answered)
        old, new = found.group(1), found.group(2)
        if old.lower() == new.lower() or old in task_files(ctx.input) or len(old) < 3:
            return None
        named = await existing_files(ctx.files, task_files(ctx.input))
        word = re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)(?!\s*[=:])")
        places: dict[str, list[int]] = {}
        for path in named or ["/"]:
            try:
                lines = await ctx.files.grep(rf"\b{re.escape(old)}\b", path, limit=_MAX_LEFT)
            except AgenticaError:
                continue
            for line in lines:
                hidden = any(part.startswith(".") for part in PurePosixPath(line.path).parts)
                if line.match and not hidden and word.search(line.text):
                    places.setdefault(line.path, []).append(line.line)
        if not places:
            return None
        ctx.state[key] = True
        if "edit_file" in ctx.functions:
            ctx.state[f"{self.name}.choice"] = "edit_file"
        where = "; ".join(
            f"{path} (line{'s' if len(at) > 1 else ''} {', '.join(map(str, at[:8]))})"
            for path, at in list(places.items())[:_MAX_LEFT_FILES]
        )
        return LEFT_PROMPT.format(task=ctx.input.strip(), old=old, new=new, where=where)

    async def _not_moved(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a task to move a function or class from one Python file to another
        ("Move slugify out of main.py into a new module textutils.py ...") answered while the
        first still defines it (seen: textutils.py written with a slugify from the model's
        head, main.py as it was), sent back with the definition and the two edits it takes."""
        key = f"{self.name}.moved"
        found = _MOVE.search(ctx.input)
        # twice (seen: the first time, the model made the first of the two changes only)
        if ctx.state.get(key, 0) >= _MAX_MOVE_CHECKS or found is None or ctx.files is None:
            return None
        name, source, target = found.group(1), found.group(2), found.group(3)
        definition = _definition(await _read_or_empty(ctx, source), name)
        if definition is None:
            return None
        ctx.state[key] = ctx.state.get(key, 0) + 1
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
            ctx.state[f"{self.name}.choice"] = "edit_file" if there == definition else "write_file"
        return MOVE_PROMPT.format(
            task=ctx.input.strip(), name=name, source=source, definition=definition,
            first=first, line=line, second=second,
        )  # fmt: skip

    async def _unchanged(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a task asking to change files it names that exist, answered when no
        call changed anything (seen: "Bump the version in setup.cfg to 1.5.0." answered "has
        been updated" after a read and a todo list marked done, the file as it was)."""
        key = f"{self.name}.unchanged"
        if ctx.state.get(key) or ctx.state.get(f"{self.name}.changed") or ctx.files is None:
            return None
        asks = _CHANGING.search(ctx.input) and not _QUESTION.match(ctx.input)
        if not asks or ctx.usage.tool_calls == 0:
            return None  # (a question; or an answer without tools: the check below sees it)
        named = await existing_files(ctx.files, task_files(ctx.input))
        if not named:
            return None
        ctx.state[key] = True
        tool = next((t for t in ("edit_file", "write_file") if t in ctx.functions), None)
        if tool is not None:
            ctx.state[f"{self.name}.choice"] = tool
        names = " and ".join(named)
        state = "is as it was" if len(named) == 1 else "are as they were"
        return UNCHANGED_PROMPT.format(
            task=ctx.input.strip(), names=names, state=state, tool=tool or "a tool"
        )

    async def _placeholder(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a task to fill in a file it names, answered while a line of that file
        still is a placeholder ("TODO") and the run changed files (seen: "Fill in report.md
        ..." answered with the totals in a table added under the template's TODO line)."""
        key = f"{self.name}.placeholder"
        if ctx.state.get(key) or not ctx.state.get(f"{self.name}.changed") or ctx.files is None:
            return None
        if not _FILL.search(ctx.input) or _QUESTION.match(ctx.input):
            return None
        for name in await existing_files(ctx.files, task_files(ctx.input)):
            try:
                text = await ctx.files.read(name)
            except AgenticaError:
                continue
            lines = text.splitlines()
            at = next((n for n, line in enumerate(lines) if _PLACEHOLDER.fullmatch(line)), None)
            if at is None:
                continue
            ctx.state[key] = True
            if "edit_file" in ctx.functions:
                ctx.state[f"{self.name}.choice"] = "edit_file"
            before = next((line.strip() for line in reversed(lines[:at]) if line.strip()), "")
            after = f", after the line {before!r}" if before else ""
            return PLACEHOLDER_PROMPT.format(
                path=name, line=lines[at].strip(), number=at + 1, after=after,
                task=ctx.input.strip(),
            )  # fmt: skip
        return None

    async def _untested(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a fix judged by tests the task names, answered when no call ran them
        (seen: "The tests in test_stats.py fail. Fix stats.py so they pass." answered with the
        task's own words, the tests never run, the bug never seen)."""
        key = f"{self.name}.untested"
        if ctx.state.get(key) or ctx.state.get(f"{self.name}.tested") or ctx.files is None:
            return None
        found = await self._judging_tests(ctx)
        if found is None:
            return None
        runner, tests, how = found
        ctx.state[key] = True
        ctx.state[f"{self.name}.choice"] = runner
        return UNTESTED_PROMPT.format(tests=" and ".join(tests), how=how)

    async def _failing(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a fix judged by tests the task names, answered while the last run of
        them failed, or after a change made since it (seen: "AssertionError: 'Hello_World' !=
        'hello-world'" answered with how slugify "should be modified", nothing changed; "+ 0.5"
        edited onto mean's result and answered "the tests pass", never run again)."""
        key = f"{self.name}.failing"
        retest = ctx.state.get(f"{self.name}.retest")
        if ctx.state.get(key) or not retest or ctx.files is None:
            return None
        found = await self._judging_tests(ctx)
        if found is None:
            return None
        runner, tests, how = found
        ctx.state[key] = True
        names = " and ".join(tests)
        if retest == "changed":
            ctx.state[f"{self.name}.choice"] = runner
            return RETEST_PROMPT.format(tests=names, how=how)
        if "edit_file" in ctx.functions:
            ctx.state[f"{self.name}.choice"] = "edit_file"
        return FAILING_PROMPT.format(tests=names, failure=retest, how=how) + await _sources(
            ctx, tests
        )

    async def _judging_tests(self, ctx: RunContext[Any]) -> tuple[str, list[str], str] | None:
        """For a task to fix code that tests it names judge ("The tests in test_stats.py fail.
        Fix stats.py ..."): the tool that runs them, the test files, and the call to show."""
        if ctx.files is None or not _CHANGING.search(ctx.input) or _QUESTION.match(ctx.input):
            return None  # ("Why do the tests fail?" is answered, not fixed)
        runner = next((t for t in ("execute", "run_python") if t in ctx.functions), None)
        named = task_files(ctx.input)
        tests = [name for name in named if guards_the_tests(ctx.input, name)]
        if not tests:  # "The tests fail, can you fix it?": the tests of the modules it names
            tests = [
                test
                for name in named
                if name.endswith(".py")
                for test in _test_files(name)
                if guards_the_tests(ctx.input, test)
            ]
        tests = await existing_files(ctx.files, tests)
        if runner is None or not tests:
            return None
        try:
            source = await ctx.files.read(tests[0])
        except AgenticaError:
            source = ""
        # unittest finds no plain test functions ("Ran 0 tests ... OK"): those run with pytest
        if "unittest" in source or "TestCase" in source:
            module = PurePosixPath(tests[0]).with_suffix("").as_posix().replace("/", ".")
            runner_args = ["-m", "unittest", module]
        else:
            runner_args = ["-m", "pytest", "-q", tests[0]]
        command = shlex.join(["python3", *runner_args])
        how = (
            f"execute({json.dumps({'command': command})})"
            if runner == "execute"
            else "run_python with import subprocess, sys; r = subprocess.run([sys.executable, "
            f"{', '.join(map(repr, runner_args))}], capture_output=True, text=True); "
            "print(r.stdout, r.stderr)"
        )
        return runner, tests, how

    async def _unread_folder(self, ctx: RunContext[Any], done: int) -> str | None:
        """A question about "the documents in this folder" answered without a tool call (seen:
        "How many days of paid vacation ...?" answered "3" with handbook.md unread): sent back
        once with the folder's files, to read one now."""
        listing = await _listing(ctx)
        if not listing:
            return None
        ctx.state[self.name] = done + 1
        if "read_file" in ctx.functions:
            ctx.state[f"{self.name}.choice"] = "read_file"
        return UNREAD_FOLDER_PROMPT.replace("{files}", listing)

    def _bare_confirmation(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """After the check, a reply that only says the task is done ("Yes, the task is done.")
        does not answer a question: asked once for the answer itself. (For a change, "Done."
        is a fine answer.)"""
        key = f"{self.name}.final"
        reply = (message.content or "").strip()
        if ctx.state.get(key) or "?" not in ctx.input or not reply:
            return None
        if len(reply) > _SHORT or not _CONFIRMATION.fullmatch(" ".join(reply.split())):
            return None
        ctx.state[key] = True
        return FINAL_PROMPT.replace("{task}", ctx.input.strip() or "(see above)")


UNCHANGED_PROMPT = (
    "The task asks for a change: {task}\nBut none of your tool calls changed a file, so "
    "{names} {state}: reading a file or marking a step done changes nothing. Make the "
    "change now with {tool}, then answer with what you changed."
)
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
_RUNNERS = frozenset({"execute", "run_python", "start_command"})
_RUNS_TESTS = re.compile(r"unittest|pytest|\btest_\w+|\b\w+_test\b")
_FAILED_RUN = re.compile(r"exit code [1-9]")
_MAX_SOURCE = 2000  # characters of a file the task names shown beside a failing test
# the line of a test run that says what failed: "AssertionError: 3.33 != 4", "E   assert ..."
_FAILURE_LINE = re.compile(r"(?m)^(?:E\s+)?(?:\w+(?:Error|Exception)\b.*|assert .+)$")
# A task that asks to change something (not a question about it)
_CHANGING = re.compile(
    r"(?i)\b(?:create|write|save|make|generate|add|put|fill|update|change|bump|rename|fix|"
    r"turn|remove|delete|replace|move|combine|merge|subtract|convert|edit|append|insert)\b"
)
# ... unless it opens with a question ("What port ...? It's set in settings.ini.")
_QUESTION = re.compile(r"(?i)^\s*(?:what|which|who|whose|how|where|when|why|is|are|does|do|did)\b")

MOVE_PROMPT = (
    "The task: {task}\nBut {source} still defines {name}:\n```python\n{definition}\n```\n"
    "Moving it takes two changes:\n1. {first}\n2. In {source}, replace that definition with "
    "the line `{line}`: edit_file({second})\nThen run {source} to check that it works as "
    "before."
)
_MAX_MOVE_CHECKS = 2
# "Move slugify out of main.py into a new module textutils.py": the name, from, to
_MOVE = re.compile(
    r"(?i)\bmove\s+(?:the\s+(?:function|class)\s+)?([a-z_]\w*)(?:\(\))?\s+(?:out\s+of|from)\s+"
    r"(\S+?\.py)\s+(?:in)?to\s+(?:a\s+new\s+(?:module|file)\s+)?(\S+?\.py)\b"
)


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
_MAX_LEFT = 200
_MAX_LEFT_FILES = 6
WRONG_RESULT_PROMPT = (
    "Your answer comes from the last code you ran, and that code gives a wrong result: "
    "{remark}\n{run}\nThen answer from what it prints."
)
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
_WORD = re.compile(r"[a-z][a-z_]+")
_MAX_OUTPUT_SCANNED = 20_000


def _asked_setting(task: str) -> str:
    """The singular noun a "What port ...?" question asks for, or ``""``."""
    match = _ASKED_SETTING.match(task)
    noun = match.group(1).lower() if match else ""
    return "" if noun.endswith("s") and not noun.endswith("ss") else noun


def _note_settings(ctx: RunContext[Any], key: str, output: str) -> None:
    """Record the values ``output`` shows for the setting the task's question asks for (lines
    such as ``port = 8080`` or ``"version": "2.4.1"``), each with its line."""
    noun = _asked_setting(ctx.input)
    if not noun:
        return
    found: dict[str, str] = ctx.state.setdefault(key, {})
    pattern = re.compile(
        rf"""(?im)^[^\n]*?\b{re.escape(noun)}\w*["']?\s*[=:]\s*["']?([\w.\-]+)[^\n]*$"""
    )
    for match in pattern.finditer(output[:_MAX_OUTPUT_SCANNED]):
        value = match.group(1)
        if len(found) < _MAX_SETTINGS and value not in found:
            found[value] = " ".join(match.group(0).split())[:200]


FINAL_PROMPT = (
    "Your reply only says that the task is done, but the user asked a question: {task}\n"
    "Reply with the answer itself, with the values the tools showed."
)
# "Yes, the task is done.", "Done!", "All steps are completed." (nothing else); matched on the
# reply with its whitespace collapsed and at most _SHORT characters, so it cannot backtrack long
_CONFIRMATION = re.compile(
    r"(?i)(?:(?:yes|yeah|ok|okay)[,.!]? )?(?:(?:the|this|my|all|all the|every|everything) )?"
    r"(?:(?:task|tasks|step|steps|work|it) )?(?:(?:is|are|has been|have been|was|were) )?"
    r"(?:(?:now|all|really) ){0,2}(?:done|complete|completed|finished)"
    r"(?: (?:and checked|successfully))?[.!]?"
)
_SHORT = 80

UNREAD_FOLDER_PROMPT = (
    "You answered without reading anything, but the task is about the files here:\n{files}\n"
    "Read the file that can answer it now; then answer with what it says."
)
# the task points at the workspace's content without naming a file
_HERE = re.compile(
    r"(?i)\b(?:documents?|docs|files?|folder|directory|workspace|project|repo(?:sitory)?)\b"
)
_LISTED_FILES = 20


async def _listing(ctx: RunContext[Any]) -> str:
    """The workspace's top-level files (at most ``_LISTED_FILES``), one per line; ``""`` when
    there are none (or no file tools)."""
    backend = ctx.files
    if backend is None:
        return ""
    try:
        entries = await backend.ls("/")
    except AgenticaError:
        return ""
    names = [f"- {e.name}" for e in entries if not e.is_dir and not e.name.startswith(".")]
    return "\n".join(names[:_LISTED_FILES])


_WRITING = re.compile(r"(?i)\b(?:create|write|save|make|generate|add|put|fill|update|change)\b")


async def _call_for(ctx: RunContext[Any], names: list[str]) -> str:
    """The tool choice that makes the model use ``names``: ``write_file`` when one of them does
    not exist yet (a file to create), ``read_file`` when they all do, else ``"required"``."""
    if ctx.files is None:
        return "required"
    missing = False
    for name in names:
        try:
            missing = missing or await ctx.files.stat(name) is None
        except AgenticaError:
            return "required"
    tool = "write_file" if missing else "read_file"
    return tool if tool in ctx.functions else "required"


async def _any_exists(ctx: RunContext[Any], names: list[str]) -> bool:
    """Whether one of ``names`` is a file of the agent's file tools (``False`` without any)."""
    backend = ctx.files
    if backend is None:
        return False
    for name in names:
        try:
            if await backend.stat(name) is not None:
                return True
        except AgenticaError:
            continue
    return False


_MAX_LISTED = 12
_BOOKKEEPING = frozenset({"write_todos", "read_todos"})
_WRITERS = frozenset({"write_file", "edit_file"})
_PATH_IN_ARGUMENTS = re.compile(r'"(?:path|file_path)"\s*:\s*"([^"\\]{1,200})"')


def _arguments(call: FunctionCall) -> dict[str, Any]:
    """The call's arguments as a dict (empty when they are no JSON object)."""
    try:
        arguments = json.loads(call.call.arguments or "{}")
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


async def _note_task_words(ctx: RunContext[Any], call: FunctionCall) -> None:
    """A failed edit whose ``old_string`` is words of the task, not text of the file (seen:
    "is_leap in dates.py says 2000 is not a leap year." and "British spelling", twice over,
    for "Change the British spelling colour to color"): the note names the task's words the
    file does have, when there are a few."""
    arguments = _arguments(call)
    old, path = arguments.get("old_string"), arguments.get("path")
    if not isinstance(old, str) or len(old.strip()) < 8:
        return
    if " ".join(old.split()).lower() not in " ".join(ctx.input.split()).lower():
        return
    found = await _task_words_in(ctx, path) if isinstance(path, str) else []
    words = ", ".join(f"{w!r} ({n} time{'s' if n > 1 else ''})" for w, n in found)
    call.notes.append(
        "[check] old_string is words of the task, not text of the file. "
        + (
            f"Of the task's words, the file has {words}: to change a word, pass that word as "
            "old_string (replace_all=true for every time it occurs) and what replaces it as "
            "new_string; to change more, copy the whole line from the file."
            if found
            else "Read the file, copy the exact line to change from it as old_string, and give "
            "the changed line as new_string."
        )
    )


_WORD = re.compile(r"[A-Za-z_][\w-]{3,}")


async def _task_words_in(ctx: RunContext[Any], path: str) -> list[tuple[str, int]]:
    """The task's words (four letters or more, file names left out) that the file at ``path``
    has as whole words, with their counts; empty when there are none or more than three."""
    if ctx.files is None:
        return []
    try:
        text = await ctx.files.read(path)
    except AgenticaError:
        return []
    task = FILE_NAME.sub(" ", ctx.input)
    found = []
    for word in dict.fromkeys(_WORD.findall(task)):
        count = len(re.findall(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text[:200_000]))
        if count:
            found.append((word, count))
    return found if len(found) <= 3 else []


def _test_files(module: str) -> list[str]:
    """Where the tests of ``module`` (a .py path) usually are: test_m.py, m_test.py, tests/."""
    path = PurePosixPath(module)
    stem, folder = path.stem, path.parent
    names = [f"test_{stem}.py", f"{stem}_test.py"]
    return [(folder / name).as_posix() for name in names] + [f"tests/test_{stem}.py"]


def _unused_files(task: str, arguments: str) -> list[str]:
    """File names the task mentions that no successful tool call's arguments mention (a
    Python module run by its name counts: ``python3 -m unittest test_text``)."""
    return [n for n in task_files(task) if n not in arguments and not _ran_module(n, arguments)]


def _ran_module(name: str, arguments: str) -> bool:
    """Whether ``arguments`` run the Python file ``name`` as a module (``-m unittest test_a``)."""
    if not name.endswith(".py"):
        return False
    module = re.escape(name.removesuffix(".py").replace("/", "."))
    return re.search(rf"-m\s+(?:unittest|pytest)\b[^\n]*?\b{module}\b", arguments) is not None


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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


def _failure(output: str) -> str:
    """What a failed test run says failed: its first error line, after the line of the test
    that raised it when the traceback shows one (told only "AssertionError: 3 != 4", the
    model edited the test's assertion into paging.py), else its last line."""
    found = _failed_line(output)
    if found is None:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        return (lines[-1] if lines else "the run failed")[:300]
    code, error = found
    if not code:
        return error[:300]
    expected = _expected(code, error)
    return f"{code[:200]} -> {error[:200]}" + (f" ({expected})" if expected else "")


def _mismatch(output: str) -> str:
    """What the first failed ``assertEqual`` of a test run says, in words ("page_count(10, 3)
    gives 3; the test expects 4"), or ""."""
    found = _failed_line(output)
    return _expected(*found) if found is not None else ""


def _failed_line(output: str) -> tuple[str, str] | None:
    """The first error line of a test run and the line of code above it that raised it ("" when
    the traceback shows none), or None."""
    found = _FAILURE_LINE.search(output)
    if found is None:
        return None
    error = re.sub(r"^E\s+", "", found.group(0).strip())
    above = [
        line.strip().lstrip(">").strip()
        for line in output[: found.start()].splitlines()
        if line.strip() and not set(line.strip()) <= set("^~ ")
    ]
    code = above[-1] if above else ""
    if code.startswith(("File ", "Traceback", "---", "===")):
        code = ""
    return code, error


_NOT_EQUAL = re.compile(r"AssertionError: (.{1,80}) != (.{1,80})")


def _expected(code: str, error: str) -> str:
    """``self.assertEqual(page_count(10, 3), 4)`` failed with ``3 != 4``: "page_count(10, 3)
    gives 3; the test expects 4"."""
    values = _NOT_EQUAL.fullmatch(error)
    if values is None or "assertEqual" not in code:
        return ""
    try:
        node = ast.parse(code, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    if (
        not isinstance(node, ast.Call)
        or not isinstance(node.func, ast.Attribute)
        or node.func.attr != "assertEqual"
        or len(node.args) < 2
    ):
        return ""
    tested = ast.unparse(node.args[0])
    given = re.sub(r"^\w+ differ: ", "", values.group(1))  # ("Lists differ: [1, 2] != ...")
    return f"{tested} gives {given}; the test expects {values.group(2)}"


def _describe(call: FunctionCall) -> str:
    """One line per call: ``write_file(path="a.txt", ...) -> wrote 3 characters``."""
    outcome = "error: " if call.status != "success" else ""
    return (
        f"{call.name}({_short(call.call.arguments, 80)}) -> "
        f"{outcome}{_short(call.content, 80) or '(no output)'}"
    )


NUMBER_NOTE = (
    "[number check] You wrote {numbers} into {path}, but no tool output showed "
    "{them}. A number you work out in your head is often wrong: compute {them} with {tool} "
    "(print the result), then correct {path} with the printed value."
)
NUMBER_REFUSAL = (
    "nothing was written: no tool output showed {numbers}, which you were writing into "
    "{path}. A number you work out in your head is often wrong: compute {them} with {tool} "
    "(print the result), then write {path} with the printed value."
)
TYPED_NOTE = (
    "[number check] Your code wrote {numbers} into {path}, typed into the code, and no tool "
    "output showed {them}: a number you work out in your head is often wrong. Have the code "
    "read the data files and compute {them}, then write {path} again."
)
NUMBER_PROMPT = (
    "Your answer says {numbers}, but no tool output showed {them}. A number you work out in "
    "your head is often wrong: compute {them} with {tool} (print the result) and answer with "
    "the printed value. If you read {them} somewhere, read that file again and quote it."
)
RETRY_PROMPT = (
    "Your answer says {numbers}, but your last {tool} call failed, so nothing checked "
    "{them}. Fix the code as the note under its error says and call {tool} again; then answer "
    "with the value it prints."
)
COMPUTE_PROMPT = (
    "The task asks for the {word}, and no code of yours worked it out: the {word} found by "
    "reading the data is often wrong. Compute it now with {tool} (code that reads the file and "
    "prints the result), then answer with the printed value; if the task asks to write it to a "
    "file, write that value there."
)
# What a task asks to work out from data: a value found by reading a file is often wrong.
_AGGREGATE = re.compile(
    r"\b(total|sum|average|median|count|how many|number of|largest|smallest|biggest|highest|"
    r"lowest|oldest|youngest|maximum|minimum|longest|shortest)\b",
    re.I,
)
_AGGREGATE_NAMES = {"how many": "count", "number of": "count"}


def _asked_aggregate(task: str) -> str:
    """What the task asks to work out: a total or an average before a count ("How many hours
    did Priya log in total?" is a total; seen, asked for "the count", the code printed the
    number of rows), else the first word found."""
    words = [m.group(1).lower() for m in _AGGREGATE.finditer(task)]
    return next((w for w in words if w in ("total", "sum", "average", "median")), "") or (
        words[0] if words else ""
    )


_COUNTED = re.compile(r"(?i)\b(?:how many|number of)\s+([a-z]+)")
_STATED = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s+([A-Za-z]+)")


def _singular(word: str) -> str:
    word = word.lower()
    return word[:-1] if word.endswith("s") and len(word) > 3 else word


PRINTED_PROMPT = (
    "Your answer says {numbers}, but your last {tool} call printed: {printed}. If that is the "
    "value the task asks for, answer with it (and write it where the task says, if it asks "
    "for a file); if not, compute the value asked for with {tool} and answer with what it "
    "prints."
)
_PRINTED_CHARS = 80  # a computing call's output short enough to quote back
STALE_PROMPT = (
    "Your last {tool} call printed: {printed}. But {path}, which the task asks for, still says "
    "{text}, written before that. If the printed value is what the task asks for, write it to "
    "{path} now; then answer."
)

# Where a written number must come from a tool: reports and data, not code or configuration
# (a port or a version there is the model's to choose).
_DATA_SUFFIXES = frozenset({".md", ".txt", ".rst", ".csv", ".tsv", ".json", ".html", ".log"})
_WRITTEN_KEYS = ("content", "new_string", "new_text", "text")
_PATH_KEYS = ("path", "file_path", "filename")
# A number: digits with thousands separators or decimals ("1,299.99", "82.5"), not part of a
# word ("file2", "Q3") and not a version's or an address's piece ("1.5.0" is one token).
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*(?![\w])")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_COMPUTE_TOOLS = ("run_python", "execute", "calculator")
_DELEGATING_TOOLS = ("task",)  # a subagent's work counts as computed (the demo's design)


def _numbers(text: str) -> list[tuple[str, list[str]]]:
    """The numbers in ``text``: each as written (thousands separators dropped, "1,299.99" is
    1299.99) with the numbers it is as a comma list ("1,2,3"; "1,299.99": 1 and 299.99)."""
    found: list[tuple[str, list[str]]] = []
    for match in _NUMBER.finditer(text):
        token = match.group(0)
        parts = token.split(",")
        found.append((token.replace(",", "") if _THOUSANDS.fullmatch(token) else "", parts))
    return found


def _parts(text: str) -> list[str]:
    """Every number of ``text`` one by one, in order ("1,2" is 1 and 2)."""
    return [t for _, parts in _numbers(text) for t in parts]


def _value(token: str) -> float | None:
    """The value of a plain number ("82.5"); ``None`` for a dotted token like "1.5.0"."""
    return float(token) if token.count(".") <= 1 and token.strip(".") else None


def _needs_source(token: str) -> bool:
    """Numbers worth checking: any with a fraction, integers from 10 (counts below ten, list
    positions and the like are left alone)."""
    value = _value(token)
    return value is not None and ("." in token or value >= 10)


class _Sources:
    """The numbers a run has seen: its input and every tool output."""

    def __init__(self) -> None:
        self.tokens: set[str] = set()
        self.values: list[float] = []
        self._sorted: list[float] | None = None  # the values, sorted when first needed
        self.stated: set[tuple[str, str]] = set()  # ("27", "day") of "27 days"

    def add(self, text: str, *, echoed: str = "") -> None:
        """Count ``text``'s numbers as seen, but not those also in ``echoed`` (the call's own
        arguments: a tool that repeats what the model sent proves nothing, as a todo list
        saying "10 orders are pending" or ``print(14, 13, 12)`` did)."""
        skip = {t for joined, parts in _numbers(echoed) for t in [joined, *parts] if t}
        for match in _STATED.finditer(text):
            if match.group(1) not in skip:
                self.stated.add((match.group(1).replace(",", ""), _singular(match.group(2))))
        for joined, parts in _numbers(text):
            for token in [joined, *parts] if joined else parts:
                if token in self.tokens or token in skip:
                    continue
                self.tokens.add(token)
                value = _value(token)
                if value is not None:
                    self.values.extend((value, value * 100))  # 0.825 is also "82.5%"
                    self._sorted = None

    def states(self, text: str, noun: str) -> bool:
        """Whether every number of ``text`` was seen written before ``noun`` ("27 days")."""
        numbers = [t.replace(",", "") for t in _parts(text)]
        wanted = _singular(noun)
        return bool(numbers) and all((n, wanted) in self.stated for n in numbers)

    def shows(self, token: str) -> bool:
        """Whether ``token`` is a number seen, or a rounding of one ("82.67" of 82.6666)."""
        if token in self.tokens:
            return True
        value = _value(token)
        if value is None:
            return False
        decimals = len(token.split(".", 1)[1]) if "." in token else 0
        tolerance = 0.5 * 10**-decimals + 1e-9
        if self._sorted is None:
            self._sorted = sorted(self.values)
        at = bisect.bisect_left(self._sorted, value - tolerance)
        return at < len(self._sorted) and self._sorted[at] <= value + tolerance

    def unseen(self, text: str) -> list[str]:
        """The numbers of ``text`` worth checking that no source showed, in order, once each."""
        missing: list[str] = []
        for joined, parts in _numbers(text):
            if joined and self.shows(joined):
                continue
            unseen = [p for p in parts if _needs_source(p) and not self.shows(p)]
            if joined and unseen:
                missing.append(joined)
            else:
                missing.extend(unseen)
        return list(dict.fromkeys(missing))


class NumberCheck(Capability):
    """Flag numbers the model wrote or answered that no tool output showed, and have it compute
    them.

    Small models read a CSV and then add up its column in their head, usually wrongly, and write
    the result into a report or answer with it. The check collects the numbers of the run's
    input and of every tool output; a number with a fraction or of ten and more that the model
    then writes into a data or text file (not code) is refused the first time when the file
    has text, before it lands among it, and gets a note on that call's result otherwise; a
    final answer that states one is sent back, each telling the model to compute it with a tool
    (``run_python``, ``execute`` or ``calculator``, whichever the agent has; an agent with none
    of them is left alone), and the next model call is made to call that tool (``tool_choice``).
    A rounding of a number seen counts as seen ("82.67" of 82.6666). A task that asks for a
    value worked out from data ("the total", "the largest", "how many") answered while no
    computing call succeeded is sent back once to compute it (seen: the 1.5B model answered
    the oldest person, the largest number and a word count from reading, wrongly).

    Args:
        max_nudges: how many notes and send-backs per run, together (0 disables the check).
        max_retries: after those, how many more times an answer with an unseen number is sent
            back when the last computing call failed (seen: the code failed, the model answered
            the number from its head again, and the run ended on it).
    """

    name = "number_check"

    def __init__(self, *, max_nudges: int = 2, max_retries: int = 2) -> None:
        self.max_nudges = max_nudges
        self.max_retries = max_retries

    def _sources(self, ctx: RunContext[Any]) -> _Sources:
        sources = ctx.state.get(self.name)
        if not isinstance(sources, _Sources):
            sources = ctx.state[self.name] = _Sources()
            sources.add(ctx.input)
        return sources

    def _spend(self, ctx: RunContext[Any]) -> str | None:
        """The tool to compute with, if a nudge is left (and counts it as spent); the next
        model call is made to call it."""
        spent = int(ctx.state.get(f"{self.name}.nudges", 0))
        tool = next((t for t in _COMPUTE_TOOLS if t in ctx.functions), None)
        if spent >= self.max_nudges or tool is None:
            return None
        ctx.state[f"{self.name}.nudges"] = spent + 1
        ctx.state[f"{self.name}.choice"] = tool
        return tool

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        choice: str | None = ctx.state.pop(f"{self.name}.choice", None)
        return choice

    async def refuse_call(self, ctx: RunContext[Any], call: FunctionCall) -> str | None:
        """Once per run, refuse to write numbers no tool output showed into a data or text file
        that has text, before they land among it (seen: the model wrote South 280 from its head
        into report.md; the code it ran when told to compute read the report back and kept the
        row). A new file gets the note instead: a later write replaces it whole (seen: totals
        right from the head, refused, then code that failed twice)."""
        key = f"{self.name}.refused"
        if ctx.state.get(key) or self.max_nudges == 0 or ctx.files is None:
            return None
        planned = _written(call, done=False)
        tool = next((t for t in _COMPUTE_TOOLS if t in ctx.functions), None)
        if planned is None or tool is None:
            return None
        unseen = _added_unseen(self._sources(ctx), call, planned[1])
        if not unseen:
            return None
        try:
            existing = await ctx.files.stat(planned[0])
        except AgenticaError:
            return None
        if existing is None or existing.is_dir or existing.size == 0:
            return None
        ctx.state[key] = True
        ctx.state[f"{self.name}.choice"] = tool
        refusal = NUMBER_REFUSAL.format(path=planned[0], tool=tool, **_list(unseen))
        return refusal + _reading_code(ctx.input) if tool == "run_python" else refusal

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        sources = self._sources(ctx)
        for call in calls:
            written = _written(call)
            if written is not None:
                ctx.state.setdefault(f"{self.name}.files", {})[written[0]] = written[1]
            if written is not None and not call.notes:  # one remark per call: the first stands
                path, text = written
                unseen = _added_unseen(sources, call, text)
                tool = self._spend(ctx) if unseen else None
                if tool is not None:
                    call.notes.append(NUMBER_NOTE.format(path=path, tool=tool, **_list(unseen)))
            if call.name == "run_python" and not call.notes and call.status == "success":
                self._typed(ctx, sources, call)
            # (without the notes: a note may quote the number)
            sources.add(call.content_without_notes, echoed=call.call.arguments)
            if call.name in _DELEGATING_TOOLS and not returned_error(call):
                ctx.state[f"{self.name}.computed"] = True  # (a subagent worked on it)
            if call.name in _COMPUTE_TOOLS:
                failed = returned_error(call)
                ctx.state[f"{self.name}.failed"] = call.name if failed else ""
                printed = _printed(call.content_without_notes) if not failed else ""
                # (print(14, 13, 12) computed nothing: not taken as the value asked for)
                ctx.state[f"{self.name}.echoed"] = _echoes(printed, call.call.arguments)
                ctx.state[f"{self.name}.printed"] = (call.name, printed) if printed else None
                if not failed:
                    ctx.state[f"{self.name}.computed"] = True

    def _typed(self, ctx: RunContext[Any], sources: _Sources, call: FunctionCall) -> None:
        """A note when code wrote into a data or text file numbers typed into the code that
        no tool output showed (seen: restock's code wrote "apples,35" for 40 - 15 - 5)."""
        typed = set(_parts(call.call.arguments))
        for path, text in written_texts(call.content_without_notes):
            if PurePosixPath(path).suffix.lower() not in _DATA_SUFFIXES:
                continue
            unseen = [n for n in sources.unseen(text) if n in typed]
            tool = self._spend(ctx) if unseen else None
            if tool is not None:
                note = TYPED_NOTE.format(path=path, **_list(unseen))
                call.notes.append(note + _reading_code(ctx.input))
                return

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        if ctx.usage.tool_calls == 0:
            return None  # an answer from what the model knows ("The Wall fell in 1989.")
        text = _FENCE.sub(" ", message.content or "")
        unseen = self._sources(ctx).unseen(text)
        retries = int(ctx.state.get(f"{self.name}.retries", 0))
        printed = ctx.state.get(f"{self.name}.printed")
        if not unseen and printed and retries < self.max_retries and self.max_nudges:
            # first the file the task asks for: writing it is one concrete call (seen: told
            # twice that its code printed 13, the model answered 1 again both times)
            stale = self._stale_file(ctx, printed)
            if stale is not None:
                ctx.state[f"{self.name}.retries"] = retries + 1
                return stale
        if (
            not unseen and printed and retries < self.max_retries
            and self._unanswered(ctx, text, printed[1])
        ):  # fmt: skip
            # the value the task asks for was computed, and the answer does not say it (seen:
            # run_python printed 13 words, the model answered 1 again)
            ctx.state[f"{self.name}.retries"] = retries + 1
            numbers = _parts(text) or ["something else"]
            return PRINTED_PROMPT.format(tool=printed[0], printed=printed[1], **_list(numbers))
        if not unseen:
            return self._compute(ctx, text)
        if printed and retries < self.max_retries and self.max_nudges:
            # seen: run_python printed 3 twice, and the model answered its 10 again each time
            ctx.state[f"{self.name}.retries"] = retries + 1
            tool, output = printed
            return PRINTED_PROMPT.format(tool=tool, printed=output, **_list(unseen))
        tool = self._spend(ctx)
        if tool is not None:
            return NUMBER_PROMPT.format(tool=tool, **_list(unseen))
        failed = str(ctx.state.get(f"{self.name}.failed") or "")
        if not failed or retries >= self.max_retries or self.max_nudges == 0:
            return None
        ctx.state[f"{self.name}.retries"] = retries + 1
        ctx.state[f"{self.name}.choice"] = failed
        return RETRY_PROMPT.format(tool=failed, **_list(unseen))

    def _stale_file(self, ctx: RunContext[Any], printed: tuple[str, str]) -> str | None:
        """A file the task names, written with numbers before the code printed others: sent
        back to write the printed value there (seen: max.txt written 55 from reading, then the
        code printed 97, and the model answered 97 with max.txt left at 55)."""
        if ctx.state.get(f"{self.name}.echoed"):
            return None
        tool, output = printed
        wanted = set(_parts(output))
        named = {PurePosixPath(n).name for n in task_files(ctx.input)}
        files: dict[str, str] = ctx.state.get(f"{self.name}.files") or {}
        for path, text in files.items():
            has = set(_parts(text))
            if PurePosixPath(path).name in named and has and not has & wanted:
                if "write_file" in ctx.functions:
                    ctx.state[f"{self.name}.choice"] = "write_file"
                shown = repr(_short(text, 60))
                return STALE_PROMPT.format(tool=tool, printed=output, path=path, text=shown)
        return None

    def _unanswered(self, ctx: RunContext[Any], answer: str, printed: str) -> bool:
        """Whether ``answer`` leaves out what the last computing call printed, when that was
        the value asked for: after this check asked to compute it (whatever the answer says),
        or in answer to a task asking for a value from data with only small numbers (counts
        below ten, which the unseen-number check leaves alone)."""
        said = _parts(answer)
        wanted = set(_parts(printed))
        if not wanted or wanted & set(said) or self.max_nudges == 0:
            return False
        if ctx.state.get(f"{self.name}.compute"):
            return True
        if ctx.state.get(f"{self.name}.echoed"):
            return False
        small = bool(said) and not any(_needs_source(t) for t in said)
        return small and _AGGREGATE.search(ctx.input) is not None

    def _compute(self, ctx: RunContext[Any], answer: str) -> str | None:
        """Once per run: a task asking for a value worked out from data (a total, the largest)
        answered with no computing call that succeeded is sent back to compute it; not a count
        a file states ("How many days of vacation ...?" answered 27 from "27 days")."""
        counted = _COUNTED.search(ctx.input)
        if counted is not None and self._sources(ctx).states(answer, counted.group(1)):
            return None
        asked = _AGGREGATE.search(ctx.input)
        tool = next((t for t in _COMPUTE_TOOLS if t in ctx.functions), None)
        key = f"{self.name}.compute"
        if asked is None or tool is None or self.max_nudges == 0 or ctx.state.get(key):
            return None
        if ctx.state.get(f"{self.name}.computed"):
            return None
        ctx.state[key] = True
        ctx.state[f"{self.name}.choice"] = tool
        word = _asked_aggregate(ctx.input) or asked.group(1).lower()
        # (no code to start from here: seen twice on hours-logged, the model ran it as it was,
        # or summed every row, and dropped the filter it had planned)
        return COMPUTE_PROMPT.format(word=_AGGREGATE_NAMES.get(word, word), tool=tool)


_READERS = {
    ".csv": ("csv", "list(csv.DictReader(open({path!r}, newline='')))"),
    ".json": ("json", "json.load(open({path!r}))"),
}
_MAX_READ = 3


def _reading_code(task: str) -> str:
    """Code to start from that reads the CSV and JSON files the task names into variables
    (seen: told to have the code read the data files, restock's 1.5B model sent the same code
    with the numbers typed in three times); ``""`` when the task names none."""
    modules: list[str] = []
    lines: list[str] = []
    for name in task_files(task):
        reader = _READERS.get(PurePosixPath(name).suffix.lower())
        if reader is None or len(lines) == _MAX_READ:
            continue
        variable = re.sub(r"\W", "_", PurePosixPath(name).stem).lower() or "data"
        variable = f"_{variable}" if variable[0].isdigit() else variable
        modules.append(reader[0])
        lines.append(f"{variable} = {reader[1].format(path=name.lstrip('/'))}")
    if not lines:
        return ""
    imports = ", ".join(dict.fromkeys(modules))
    names = ", ".join(line.split(" = ", 1)[0] for line in lines)
    body = "\n".join([f"import {imports}", *lines, f"print({names})"])
    return (
        f"\nCode that reads the data files the task names, to start from:\n```python\n{body}\n```"
    )


def _added_unseen(sources: _Sources, call: FunctionCall, text: str) -> list[str]:
    """The unseen numbers of ``text``, written by ``call``, but those its ``old_string`` has
    (an edit keeps them: they are in the file already)."""
    kept = set(_parts(str(_arguments(call).get("old_string") or "")))
    return [n for n in sources.unseen(text) if n not in kept]


def _printed(output: str) -> str:
    """A computing call's output worth quoting back: short, with a number ("3", "82.5\n");
    the "exit code 0" line the shell tools put first is left out (their remarks on the code are
    the call's notes, not in ``output``)."""
    text = output.strip()
    first, _, rest = text.partition("\n")
    if first.startswith("exit code 0 (no output)"):
        return ""  # (what follows is the text of a file the code wrote, not what it printed)
    if first.startswith("exit code 0"):
        text = rest.strip()
    if not text or len(text) > _PRINTED_CHARS or not _NUMBER.search(text):
        return ""
    return " ".join(text.split())


def _echoes(printed: str, arguments: str) -> bool:
    """Whether every number ``printed`` shows was already in the call's ``arguments``."""
    given = {t for joined, parts in _numbers(arguments) for t in [joined, *parts] if t}
    return all(t in given for t in _parts(printed))


def _list(numbers: list[str]) -> dict[str, str]:
    shown = numbers[:5]
    words = ", ".join(shown[:-1]) + f" and {shown[-1]}" if len(shown) > 1 else shown[0]
    return {"numbers": words, "them": "them" if len(shown) > 1 else "it"}


def _written(
    call: FunctionCall, *, data_only: bool = True, done: bool = True
) -> tuple[str, str] | None:
    """(path, text) of a successful call that wrote text into a file (a data or prose file
    when ``data_only``); of a call that is to write one when not ``done``."""
    if call.status != ("success" if done else "pending"):
        return None
    arguments = _arguments(call)
    path = next((arguments[k] for k in _PATH_KEYS if isinstance(arguments.get(k), str)), None)
    text = next((arguments[k] for k in _WRITTEN_KEYS if isinstance(arguments.get(k), str)), None)
    if path is None or text is None:
        return None
    if data_only and PurePosixPath(path).suffix.lower() not in _DATA_SUFFIXES:
        return None
    return path, text
