"""``AnswerCheck``: ask the model to check its work before it finishes.

Small models often answer "done" after computing a result without doing the last step the user
asked for (writing the file, saving the code). Before the run may end, the model is asked, a
bounded number of times per run, to compare what was asked with what its tool calls did and to
finish the missing steps. A model that really is done repeats its answer and the run ends.
Before that general check come the send-backs (``send_backs``) for one thing seen wrong each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from agentica.deep.checks.calls import arguments, describe, written
from agentica.deep.checks.failures import FAILED_RUN, RUNS_TESTS, failure, mismatch
from agentica.deep.checks.send_backs import Seen, first_send_back, note_settings
from agentica.deep.files import (
    ADDS_KEY,
    FILE_NAME,
    UNREAD_REFUSAL,
    existing_files,
    may_change_files,
    task_files,
)
from agentica.deep.shell.hints import wrong_result
from agentica.errors import AgenticaError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["AnswerCheck"]

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

    def _seen(self, ctx: RunContext[Any]) -> Seen:
        seen = ctx.state.get(self.name)
        if not isinstance(seen, Seen):
            seen = ctx.state[self.name] = Seen()
        return seen

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        seen = self._seen(ctx)
        for call in calls:
            seen.calls.append(describe(call))
            if call.status != "success":
                await _note_task_words(ctx, call)
                refused = call.content_without_notes.startswith(UNREAD_REFUSAL)
                if refused and "read_file" in ctx.functions:  # (the refusal says it all)
                    seen.choice = "read_file"
                elif call.name in _WRITERS:  # (seen: a list made up until the length limit)
                    path = _PATH_IN_ARGUMENTS.search(call.call.arguments)
                    target = path.group(1) if path else "the file"
                    await self._note_unread(ctx, seen, call, target, failed=True)
                continue
            if call.name in _BOOKKEEPING:
                continue  # (a todo naming a file does not use it)
            note_settings(ctx.input, seen, call.content_without_notes)
            if call.name == "run_python":  # (the last run's result is what an answer quotes)
                code = arguments(call).get("code")
                seen.wrong = wrong_result(code) if isinstance(code, str) else None
            runs_tests = call.name in _RUNNERS and RUNS_TESTS.search(call.call.arguments)
            if may_change_files(call):
                seen.changed = True
                if not runs_tests:
                    seen.retest = "changed"
            if runs_tests:
                _note_test_run(seen, call)
            wrote = written(call, data_only=False)
            if wrote is not None:
                seen.changed_files.add(wrote[0].lstrip("/"))
                await self._note_unread(ctx, seen, call, wrote[0])
            elif may_change_files(call):
                seen.changed_files.add("*")  # (code or a command: which files, unknown)
            seen.arguments += "\n" + call.call.arguments

    async def _note_unread(
        self,
        ctx: RunContext[Any],
        seen: Seen,
        call: FunctionCall,
        path: str,
        *,
        failed: bool = False,
    ) -> None:
        """A file written (or a write that ``failed``) while a file the task names, which
        exists, was never used: what was written cannot come from it (seen: "Write the lines of
        lines.txt in reverse order to reversed.txt" answered with invented lines)."""
        backend = ctx.files
        if backend is None:
            return
        unread = await existing_files(backend, [
            name for name in seen.unused(ctx.input)
            if name not in seen.unread and PurePosixPath(path).name != PurePosixPath(name).name
        ])  # fmt: skip
        if not unread:
            return
        seen.unread.extend(unread)
        if "read_file" in ctx.functions:
            seen.choice = "read_file"
        names = " and ".join(unread)
        them = "it" if len(unread) == 1 else "them"
        target = PurePosixPath(path).name
        named = {PurePosixPath(n).name for n in task_files(ctx.input)}
        if (
            failed
            and target in named
            and target not in seen.arguments
            and await existing_files(backend, [path])
        ):
            # a file the task names to change, never read: it is changed, not replaced by the
            # text of the others (seen: test_text.py's tests written into text.py)
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
        seen = self._seen(ctx)
        choice, seen.choice = seen.choice, None
        return choice

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        seen = self._seen(ctx)
        if self.max_checks and (sent := await first_send_back(ctx, seen, message.content or "")):
            return sent
        done = seen.checks
        if done >= self.max_checks:
            return self._bare_confirmation(ctx, seen, message) if done else None
        unused = seen.unused(ctx.input)
        # no tool used: check only a task about files ("Create config.json ...", "What is in
        # notes.txt?" when it exists), not a question that names Node.js or setup.py
        if self.only_after_tools and ctx.usage.tool_calls == 0:
            if unused and (_WRITING.search(ctx.input) or await _any_exists(ctx, unused)):
                pass  # a task about named files, answered without touching them
            elif _HERE.search(ctx.input):
                return await self._unread_folder(ctx, seen)
            else:
                return None
        seen.checks += 1
        listing = "\n".join(f"- {line}" for line in seen.calls[-_MAX_LISTED:]) or "- (none)"
        prompt = self.prompt.replace("{task}", ctx.input.strip() or "(see above)")
        prompt = prompt.replace("{calls}", listing)
        if unused:
            # a call on them, not an answer; the file tools' own when the agent has them (seen:
            # "required" answered with write_todos, once more, and totals.json never written)
            choice = seen.choice = await _call_for(ctx, unused)
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

    async def _unread_folder(self, ctx: RunContext[Any], seen: Seen) -> str | None:
        """A question about "the documents in this folder" answered without a tool call (seen:
        "How many days of paid vacation ...?" answered "3" with handbook.md unread): sent back
        once with the folder's files, to read one now."""
        listing = await _listing(ctx)
        if not listing:
            return None
        seen.checks += 1
        if "read_file" in ctx.functions:
            seen.choice = "read_file"
        return UNREAD_FOLDER_PROMPT.replace("{files}", listing)

    def _bare_confirmation(
        self, ctx: RunContext[Any], seen: Seen, message: AssistantMessage
    ) -> str | None:
        """After the check, a reply that only says the task is done ("Yes, the task is done.")
        does not answer a question: asked once for the answer itself. (For a change, "Done."
        is a fine answer.)"""
        reply = (message.content or "").strip()
        if seen.confirmation_sent or "?" not in ctx.input or not reply:
            return None
        if len(reply) > _SHORT or not _CONFIRMATION.fullmatch(" ".join(reply.split())):
            return None
        seen.confirmation_sent = True
        return FINAL_PROMPT.replace("{task}", ctx.input.strip() or "(see above)")


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


def _note_test_run(seen: Seen, call: FunctionCall) -> None:
    """Record a call that ran tests: whether they failed, and how (with a note in words on a
    failed comparison)."""
    seen.tested = True
    output = call.content_without_notes
    failed = FAILED_RUN.match(output)
    seen.retest = failure(output) if failed else None
    if failed and (found := mismatch(output)):
        call.notes.append(
            f"[check] {found}. Change the code under test so that it gives what the test "
            "expects; the tests stay as they are."
        )


_BOOKKEEPING = frozenset({"write_todos", "read_todos"})
_WRITERS = frozenset({"write_file", "edit_file"})
_PATH_IN_ARGUMENTS = re.compile(r'"(?:path|file_path)"\s*:\s*"([^"\\]{1,200})"')


async def _note_task_words(ctx: RunContext[Any], call: FunctionCall) -> None:
    """A failed edit whose ``old_string`` is words of the task, not text of the file (seen:
    "is_leap in dates.py says 2000 is not a leap year." and "British spelling", twice over,
    for "Change the British spelling colour to color"): the note names the task's words the
    file does have, when there are a few."""
    given = arguments(call)
    old, path = given.get("old_string"), given.get("path")
    if not isinstance(old, str) or len(old.strip()) < 8:
        return
    if " ".join(old.split()).lower() not in " ".join(ctx.input.split()).lower():
        return
    if ADDS_KEY in call.content_without_notes:
        return  # (the result gives the call to make: config-repeat ticked its list instead)
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


_RUNNERS = frozenset({"execute", "run_python", "start_command"})
