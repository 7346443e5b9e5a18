"""``NumberCheck``: numbers the model wrote or answered must come from a tool's output.

Small models add up a column in their head, usually wrongly. The check collects every number
the run has seen (its input, each tool output) and refuses, notes or sends back a number
written into a report or stated in an answer that none of them showed, with the tool to
compute it. ``_Sources`` owns what was seen; ``NumberCheck`` owns when to speak up.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from agentica.deep.checks.calls import DATA_SUFFIXES, arguments, short, written
from agentica.deep.files import READ_AGAIN, may_change_files, task_files
from agentica.deep.shell.hints import written_texts
from agentica.errors import AgenticaError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.run.repetition import returned_error
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["NumberCheck"]

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
LEFT_PROMPT = (
    "{path} still holds {numbers}, which you wrote there when no tool output showed {them}: a "
    "number worked out in your head is often wrong. Compute what {path} should hold with "
    "{tool}: code that reads the data, works the values out and writes {path}, then prints "
    "it. Then answer.{code}"
)
STALE_PROMPT = (
    "Your last {tool} call printed: {printed}. But {path}, which the task asks for, still says "
    "{text}, written before that. If the printed value is what the task asks for, write it to "
    "{path} now; then answer."
)

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


_KEPT_TOKENS = 4000  # numbers seen that a conversation keeps for its next runs


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

    def seed(self, tokens: list[Any]) -> None:
        """Count ``tokens`` (numbers an earlier run of the conversation saw) as seen."""
        for token in tokens:
            if isinstance(token, str) and token not in self.tokens:
                self.tokens.add(token)
                if (value := _value(token)) is not None:
                    self.values.extend((value, value * 100))
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
            earlier = ctx.session_state.get(self.name)
            if isinstance(earlier, list):  # (seen: a follow-up refused the totals printed
                sources.seed(earlier)  # by code in the first run of the conversation)
            if ctx.session_state.get(f"{self.name}.computed") is True:
                ctx.state[f"{self.name}.computed"] = True  # (and told no code worked it out)
            sources.add(ctx.input)
        return sources

    def _keep(self, ctx: RunContext[Any], sources: _Sources) -> None:
        """The numbers seen so far, and whether code worked something out, kept with the
        conversation for its next runs."""
        tokens = sorted(sources.tokens)
        ctx.session_state[self.name] = tokens[-_KEPT_TOKENS:]
        if ctx.state.get(f"{self.name}.computed"):
            ctx.session_state[f"{self.name}.computed"] = True

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
        planned = written(call, done=False)
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
            wrote = written(call)
            if wrote is not None:
                ctx.state.setdefault(f"{self.name}.files", {})[wrote[0]] = wrote[1]
            tainted: dict[str, set[str]] = ctx.state.setdefault(f"{self.name}.tainted", {})
            if wrote is not None and not call.notes:  # one remark per call: the first stands
                self._unseen_written(ctx, sources, call, *wrote)
            if call.name == "run_python" and not call.notes and call.status == "success":
                self._typed(ctx, sources, call)
            if call.name == "read_file" and READ_AGAIN in call.content_without_notes:
                self._read_again(ctx, call)
            # (without the notes: a note may quote the number)
            echo = _echoed(call, tainted)
            sources.add(call.content_without_notes, echoed=echo)
            if call.name in _DELEGATING_TOOLS and not returned_error(call):
                ctx.state[f"{self.name}.computed"] = True  # (a subagent worked on it)
            if call.name in _COMPUTE_TOOLS:
                self._computing(ctx, call, tainted, echo)
        self._keep(ctx, sources)

    def _computing(
        self, ctx: RunContext[Any], call: FunctionCall, tainted: dict[str, Any], echo: str
    ) -> None:
        """Keep what a computing call did: whether it failed, what it printed (not when it only
        repeats ``echo``, see ``_echoed``), whether it worked something out, and the files it
        may have written anew."""
        if may_change_files(call):
            files: dict[str, str] = ctx.state.setdefault(f"{self.name}.files", {})
            for kept in (tainted, files):  # (code wrote it since: what it holds, code worked out)
                for path in [p for p in kept if PurePosixPath(p).name in call.call.arguments]:
                    del kept[path]
        failed = returned_error(call)
        ctx.state[f"{self.name}.failed"] = call.name if failed else ""
        printed = _printed(call.content_without_notes) if not failed else ""
        # (print(14, 13, 12) computed nothing: not taken as the value asked for)
        ctx.state[f"{self.name}.echoed"] = _echoes(printed, call.call.arguments)
        if printed and echo != call.call.arguments and _echoes(printed, echo):
            printed = ""  # (a guessed file printed back is not what code worked out)
        ctx.state[f"{self.name}.printed"] = (call.name, printed) if printed else None
        code = arguments(call).get("code")
        if not failed and not (isinstance(code, str) and _shows_data(code)):
            ctx.state[f"{self.name}.computed"] = True

    def _unseen_written(
        self, ctx: RunContext[Any], sources: _Sources, call: FunctionCall, path: str, text: str
    ) -> None:
        """A note on a call that wrote into ``path`` numbers no tool output showed (kept, to
        look for in the file when the model answers)."""
        unseen = _added_unseen(sources, call, text)
        if not unseen:
            return
        ctx.state[f"{self.name}.tainted"].setdefault(path, set()).update(unseen)
        tool = self._spend(ctx)
        if tool is not None:
            call.notes.append(NUMBER_NOTE.format(path=path, tool=tool, **_list(unseen)))

    def _read_again(self, ctx: RunContext[Any], call: FunctionCall) -> None:
        """A data file read again at once, in a task asking for a value worked out from data,
        before any code computed one: the next call is made to compute it, with code to start
        from (seen: csv-totals read sales.csv seven times in a row, each time told to run code
        instead, until the tool was taken away)."""
        path = arguments(call).get("path")
        if not isinstance(path, str) or PurePosixPath(path).suffix.lower() not in DATA_SUFFIXES:
            return
        if ctx.state.get(f"{self.name}.computed") or _AGGREGATE.search(ctx.input) is None:
            return
        tool = self._spend(ctx)
        if tool is not None:
            code = _reading_code(ctx.input) if tool == "run_python" else ""
            call.notes.append(
                f"[number check] Compute what the task asks for now with {tool}: code that "
                f"reads the data and prints the result.{code}"
            )

    def _typed(self, ctx: RunContext[Any], sources: _Sources, call: FunctionCall) -> None:
        """A note when code wrote into a data or text file numbers typed into the code that
        no tool output showed (seen: restock's code wrote "apples,35" for 40 - 15 - 5)."""
        typed = set(_parts(call.call.arguments))
        for path, text in written_texts(call.content_without_notes):
            if PurePosixPath(path).suffix.lower() not in DATA_SUFFIXES:
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
        if not unseen and retries < self.max_retries and (left := await self._left(ctx)):
            ctx.state[f"{self.name}.retries"] = retries + 1
            return left
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

    async def _left(self, ctx: RunContext[Any]) -> str | None:
        """Once per run: a file the task names that still holds numbers the model wrote there
        when no tool output showed them, and that no code wrote since (seen: restock wrote
        "apples,35" for 40 - 15 - 5 from its head, got the note, printed the file back and
        answered "The task is done"), sent back to compute it with code."""
        key = f"{self.name}.left"
        tool = next((t for t in _COMPUTE_TOOLS if t in ctx.functions), None)
        if ctx.state.get(key) or tool is None or ctx.files is None or self.max_nudges == 0:
            return None
        named = {PurePosixPath(n).name for n in task_files(ctx.input)}
        tainted: dict[str, set[str]] = ctx.state.get(f"{self.name}.tainted") or {}
        for path, numbers in tainted.items():
            if PurePosixPath(path).name not in named:
                continue
            try:
                now = set(_parts(await ctx.files.read(path)))
            except AgenticaError:
                continue
            left = sorted(numbers & now, key=lambda n: (_value(n) or 0, n))
            if left:
                ctx.state[key] = True
                ctx.state[f"{self.name}.choice"] = tool
                code = _reading_code(ctx.input) if tool == "run_python" else ""
                return LEFT_PROMPT.format(path=path, tool=tool, code=code, **_list(left))
        return None

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
                shown = repr(short(text, 60))
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


def _shows_data(code: str) -> bool:
    """Whether Python ``code`` only loads data and prints it, working nothing out: imports,
    names bound to what a call returns (``json.load(...)``, ``list(csv.DictReader(...))``)
    and ``print`` of names (seen: oldest-person ran the code to start from as it was,
    ``print(people)``, and answered from reading the list, wrongly)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Assign) and _loads(node.value):
            continue
        call = node.value if isinstance(node, ast.Expr) else None
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "print"
            and all(isinstance(arg, ast.Name) for arg in call.args)
        ):
            return False
    return bool(tree.body)


_LOADERS = frozenset({"open", "load", "loads", "read", "readlines", "list", "DictReader", "reader"})


def _loads(value: ast.expr) -> bool:
    """Whether ``value`` only reads data: every call in it is one of ``_LOADERS``."""
    calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)]
    names = [
        c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", "") for c in calls
    ]
    return bool(calls) and all(name in _LOADERS for name in names)


def _echoed(call: FunctionCall, tainted: dict[str, set[str]]) -> str:
    """What a call's output only repeats: its arguments, and the numbers from the head of the
    files it names and changes not (seen: sum-files wrote 17 from its head into total.txt,
    read it back with code that printed it, and the 17 counted as computed)."""
    if may_change_files(call) and call.name in _COMPUTE_TOOLS:
        return call.call.arguments  # (code that may have written them anew)
    arguments = call.call.arguments
    named = [
        n for p, numbers in tainted.items() if PurePosixPath(p).name in arguments for n in numbers
    ]
    return " ".join([arguments, *named])


def _added_unseen(sources: _Sources, call: FunctionCall, text: str) -> list[str]:
    """The unseen numbers of ``text``, written by ``call``, but those its ``old_string`` has
    (an edit keeps them: they are in the file already)."""
    kept = set(_parts(str(arguments(call).get("old_string") or "")))
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
