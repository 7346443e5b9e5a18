"""``Todos``: the agent's to-do list, a plan it writes, updates and sees every turn.

Long tasks go better when the model writes its plan down and ticks steps off. ``Todos`` gives it
``write_todos`` and ``read_todos``; the list (``TodoItem``s) lives in the session's state as plain
JSON, so it is saved with the session and is still there after a restart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, field_validator, model_validator

from agentica.deep.files import FILE_NAME, may_change_files
from agentica.errors import ToolError, UsageError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.run.repetition import returned_error
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = ["TodoItem", "Todos"]

Status = Literal["pending", "in_progress", "completed"]

_MARKS: dict[str, str] = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
_STATUS_ALIASES = {
    "done": "completed",
    "complete": "completed",
    "finished": "completed",
    "todo": "pending",
    "to_do": "pending",
    "not_started": "pending",
    "open": "pending",
    "doing": "in_progress",
    "active": "in_progress",
    "started": "in_progress",
    "inprogress": "in_progress",
}


_TODO_TOOLS = frozenset({"write_todos", "read_todos"})
# A step that changes a file it names: "Add a repeat setting to config.json", "make app.py print"
_CHANGE_STEP = re.compile(
    r"(?i)^\W*(?:\d+[.)]\s*)?(?:add|write|save|update|change|edit|fix|set|replace|rename|move|"
    r"create|fill|append|insert|remove|delete|bump|make|modify|correct)\b"
)
# ... and write the totals to totals.json / save it in out.txt
_WRITE_TO = re.compile(r"(?i)\b(?:write|save|store|put)\b[^.;]*?\b(?:to|into|in)\s+\S+\.\w{1,6}\b")
_MAX_EXAMPLE = 400  # characters of the write_todos example a nudge shows


def _no_description(schema: dict[str, Any]) -> None:
    schema.pop("description", None)  # the class docstring: tokens the model does not need


class TodoItem(BaseModel):
    """One step of the plan: what to do (``content``) and how far it is (``status``:
    ``pending``, ``in_progress`` or ``completed``).

    Small models get some slack: a bare string instead of an item, and common spellings of a
    status (``done``, ``in progress``, ``todo``) are accepted; anything else is refused with an
    error that says which item is wrong and what is expected.
    """

    model_config = ConfigDict(
        extra="ignore", str_strip_whitespace=True, json_schema_extra=_no_description
    )

    content: str
    status: Status = "pending"

    @model_validator(mode="before")
    @classmethod
    def _bare_string(cls, value: Any) -> Any:
        return {"content": value} if isinstance(value, str) else value

    @field_validator("status", mode="before")
    @classmethod
    def _status_spelling(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        key = value.strip().lower().replace(" ", "_").replace("-", "_")
        return _STATUS_ALIASES.get(key, key)

    @field_validator("content")
    @classmethod
    def _not_empty(cls, value: str) -> str:
        if not value:
            raise ValueError("content is empty: write what the step is")
        return value


def _json_list(value: Any) -> Any:
    """A list sent as a JSON string (small models do that) is decoded."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _inline_refs(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """The schema with ``$ref``s replaced by their definitions (clearer for small models)."""
    if isinstance(schema, dict):
        if defs is None:
            defs = schema.get("$defs", {})
        if "$ref" in schema:
            return _inline_refs(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [_inline_refs(item, defs) for item in schema]
    return schema


def _changes_a_file(step: str) -> bool:
    """Whether ``step`` says to change a file it names ("Add a repeat setting to config.json",
    or "Compute the totals and write them to totals.json": closed after only a read)."""
    if FILE_NAME.search(step) is None:
        return False
    return bool(_CHANGE_STEP.match(step) or _WRITE_TO.search(step))


def _render(items: list[dict[str, Any]]) -> str:
    """The compact one-line form: ``[x] a  [>] b  [ ] c``."""
    return "  ".join(f"{_MARKS.get(str(i.get('status')), '[ ]')} {i.get('content')}" for i in items)


def _current(open_items: list[dict[str, Any]]) -> dict[str, Any]:
    """The step being worked on: the first one in progress, else the first open one."""
    return next((i for i in open_items if i.get("status") == "in_progress"), open_items[0])


def _next_step(items: list[dict[str, Any]]) -> str:
    """What to do now, after the list was saved (a small model otherwise stops after planning)."""
    open_items = [i for i in items if i.get("status") != "completed"]
    if not open_items:
        return "Every step is completed: check the result, then give your final answer."
    step = _current(open_items)
    return (
        f"Next: do the step {step.get('content')!r} now with a tool call; when it is done, "
        "mark it completed with write_todos."
    )


def _marking(items: list[dict[str, Any]], step: dict[str, Any]) -> str:
    """The arguments of the ``write_todos`` call that marks only ``step`` completed."""
    marked = [
        {"content": i.get("content"), "status": "completed" if i is step else i.get("status")}
        for i in items
    ]
    example = json.dumps({"todos": marked}, ensure_ascii=False)
    if len(example) > _MAX_EXAMPLE:
        return '{"todos": [..., {"content": "...", "status": "completed"}, ...]}'
    return example


class Todos(Capability):
    """A to-do list the model keeps with ``write_todos``/``read_todos`` and sees every turn.

    ``write_todos`` replaces the whole list (a JSON string instead of a list is accepted too);
    ``read_todos`` returns it. The list lives in ``agent.memory.state[key]`` (plain JSON), and
    while it is not empty the model sees it before every call in one compact line:
    ``Todos: [x] done  [>] doing  [ ] to do``.

    Args:
        key: the key of the list in ``agent.memory.state``.
        max_items: the longest list accepted (it is shown to the model every turn).
        max_chars: the longest ``content`` of one item.
        max_nudges: how many times per run a model that answers while steps are still open is
            sent back to do the next one (small models stop after planning); 0 disables it.
            An answer after work that covers the open steps, a call each, closes them instead.
        check_steps_from: the shortest list whose steps are checked one by one when marked
            completed (a step that says to change a file needs a call that changed one). The
            one step of a shorter list is the task itself: marked completed after any work, it
            is left to the answer's checks (``DeepAgent`` uses 2: its 1.5B model's one-step
            lists, refused again and again, cost more calls than the task, and refused
            outright, it lost its cue to answer, "Every step is completed").
    """

    name = "todos"

    def __init__(
        self,
        *,
        key: str = "todos",
        max_items: int = 30,
        max_chars: int = 300,
        max_nudges: int = 2,
        check_steps_from: int = 1,
    ) -> None:
        if check_steps_from < 1:
            raise UsageError(f"Todos check_steps_from must be at least 1, not {check_steps_from}")
        self.key = key
        self.check_steps_from = check_steps_from
        self.max_nudges = max_nudges
        self.max_items = max_items
        self.max_chars = max_chars
        write = Function.from_callable(self.write_todos)
        write.parameters = _inline_refs(write.parameters)
        self._tools = (write, Function.from_callable(self.read_todos))

    def tools(self) -> tuple[ToolLike, ...]:
        return self._tools

    @staticmethod
    def render(items: list[dict[str, Any]]) -> str:
        """A list in the compact one-line form the model sees: ``[x] a  [>] b  [ ] c``."""
        return _render(items)

    def items(self, ctx: RunContext[Any]) -> list[dict[str, Any]]:
        """The current list (plain dicts), read from the agent's session state."""
        items = ctx.session_state.get(self.key)
        return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        items = self.items(ctx)
        return f"Todos: {_render(items)}" if items else None

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """Send the model back to the next open step, a bounded number of times per run.

        The reminder names that one step and shows the ``write_todos`` call that marks only it
        completed: offered a call that closes the whole list, small models close it without
        doing the steps.
        """
        items = self.items(ctx)
        open_items = [i for i in items if i.get("status") != "completed"]
        nudged = int(ctx.state.get(f"{self.name}.nudges", 0))
        if not open_items or nudged >= self.max_nudges:
            return None
        if self._done_by_work(ctx, open_items):
            ctx.session_state[self.key] = [{**i, "status": "completed"} for i in items]
            return None
        ctx.state[f"{self.name}.nudges"] = nudged + 1
        step = _current(open_items)
        example = _marking(items, step)
        return (
            f"Your todo list still has open steps: {_render(open_items)}. Do the next one, "
            f"{step.get('content')!r}, now with a tool call. If it is already done, mark it "
            f"completed with write_todos({example}) and go on with the step after it."
        )

    def _done_by_work(self, ctx: RunContext[Any], open_items: list[dict[str, Any]]) -> bool:
        """Whether the answer may close the open steps itself: work was done since the list
        was last saved, and the run's calls not yet counted for a step cover them, a call each
        (a step that changes a file it names, a call that may have changed one). Seen on the
        demo: the report edited, then answered with "edit report" and "check report" open; sent
        back twice, the model redid the edit (it failed) and read the report three times."""
        if not ctx.state.get(f"{self.name}.work", 0):
            return False  # (planned, then answered: the steps are not done)
        work, changes = (
            int(ctx.state.get(f"{self.name}.{total}", 0) - ctx.state.get(f"{self.name}.{used}", 0))
            for total, used in (("work_total", "credited"), ("changes", "credited_changes"))
        )
        steps = [str(i.get("content")) for i in open_items]
        if len(self.items(ctx)) < self.check_steps_from:
            return work >= len(steps)
        return work >= len(steps) and changes >= sum(map(_changes_a_file, steps))

    # ------------------------------------------------------------------------------ tools

    async def write_todos(
        self,
        ctx: RunContext[Any],
        todos: Annotated[list[TodoItem], BeforeValidator(_json_list)],
    ) -> str:
        """Save your plan as a todo list; send the whole list each time, each step with a status."""
        if len(todos) > self.max_items:
            raise ToolError(
                f"Too many todos ({len(todos)}): keep at most {self.max_items}. Merge small "
                "steps into bigger ones and call write_todos again."
            )
        for number, item in enumerate(todos, 1):
            if len(item.content) > self.max_chars:
                raise ToolError(
                    f"Todo {number} is too long ({len(item.content)} characters, at most "
                    f"{self.max_chars}): describe the step in one short sentence and call "
                    "write_todos again."
                )
        items: list[dict[str, Any]] = [item.model_dump() for item in todos]
        if items and items == self.items(ctx) and self._saved_again(ctx):
            # the list as it is saved, nothing done since: nothing to save (seen: the same
            # closed list saved 20 times over, until the run's calls were spent); the next call
            # does work
            ctx.state[f"{self.name}.act"] = "work"
            raise ToolError(
                f"Nothing saved: this is your todo list as it already is ({_render(items)}). "
                "Do the task's next step with a tool call instead (the todo tools are not "
                "offered for it), or give your final answer if the task is done."
            )
        open_items = [i for i in items if i["status"] != "completed"]
        if open_items and items == self.items(ctx) and self._beside(ctx) <= 0:
            # work since, and the list as it is: its next step again (seen on primes: "[ ] Read
            # primes.txt  [ ] Write primes.txt" saved after each read, ten times over)
            step = _current(open_items)
            raise ToolError(
                f"Nothing saved: this is your todo list as it already is ({_render(items)}). "
                f"If your calls since did the step {step['content']!r}, mark it completed: "
                f"write_todos({_marking(items, step)}). If not, do it now with a tool call."
            )
        unearned = self._unearned(ctx, items)
        idle = not ctx.state.get(f"{self.name}.work", 0)
        again = self._saved_again(ctx)
        for step in unearned:
            step["status"] = "pending"
        if unearned:
            unearned[0]["status"] = "in_progress"
        ctx.session_state[self.key] = items
        ctx.state[f"{self.name}.work"] = 0
        # a list with open steps: the next call must call a tool ("Next: do the step ... now
        # with a tool call" alone was answered by copying the step's text); after a refused
        # closing, a tool that does work (the same list came six times over)
        # with open steps; saved again with nothing done in between, a tool that does work
        # (seen: the forced call spent on write_todos, over and over)
        open_steps = any(i["status"] != "completed" for i in items)
        act = "work" if unearned or (open_steps and again) else "call" if open_steps else ""
        ctx.state[f"{self.name}.saved"] = True
        ctx.state[f"{self.name}.act"] = act
        if not items:
            return "Todo list cleared."
        refused = ""
        if unearned:
            names = ", ".join(repr(i["content"]) for i in unearned)
            refused = (
                f"\nNot marked completed: {names}. No tool call has done any work since the "
                "list was last saved, so nothing is done yet."
                if idle
                else f"\nNot marked completed: {names}. No tool call has done that step's work "
                "yet (each completed step needs its own tool call; a step that changes a file "
                "needs a call that changed it: reading a file, or code that only prints, "
                "changes nothing)."
            )
        return f"Todos saved: {_render(items)}{refused}\n{_next_step(items)}"

    def _saved_again(self, ctx: RunContext[Any]) -> bool:
        """Whether a list was saved before in this run and no call did work since (calls of
        this same reply count as work: they run beside this one)."""
        saved = bool(ctx.state.get(f"{self.name}.saved"))
        return saved and not ctx.state.get(f"{self.name}.work", 0) and self._beside(ctx) <= 0

    def _beside(self, ctx: RunContext[Any]) -> int:
        """Tool calls of the reply that holds this write_todos call, other than it."""
        return int(ctx.usage.tool_calls - ctx.state.get(f"{self.name}.seen", 0) - 1)

    def _unearned(self, ctx: RunContext[Any], items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The steps this list newly marks completed that no work stands behind. In a list
        that closes every step, each newly completed step needs a tool call of the run that did
        work (anything but the todo tools) not already counted for another step; in any list,
        a step that says to change a file it names needs a call that may have changed one, not
        counted for another such step (seen: a first list whose only step was already
        "completed"; "Add a repeat setting to config.json ..." completed after only reading
        config.json). Work done before the list was saved counts (the work done first, then
        the steps ticked one save at a time)."""
        # calls of this same reply (they run beside this one and are counted after it): maybe
        # work, so the benefit of the doubt
        if self._beside(ctx) > 0:
            return []
        before = {str(i.get("content")) for i in self.items(ctx) if i.get("status") == "completed"}
        marked = [i for i in items if i["status"] == "completed" and i["content"] not in before]
        work, changes = (
            ctx.state.get(f"{self.name}.work_total", 0),
            ctx.state.get(f"{self.name}.changes", 0),
        )
        credited = ctx.state.get(f"{self.name}.credited", 0)
        changed = ctx.state.get(f"{self.name}.credited_changes", 0)
        # a list that closes every step with no work since the last save needs earlier work
        # not yet counted, a step each; with work since, it stands (one call may do two steps)
        idle = all(i["status"] == "completed" for i in items) and not ctx.state.get(
            f"{self.name}.work", 0
        )
        unearned = []
        # a change step is refused once: refused again and again, the model read the file and
        # saved the list in a loop until the run's time ran out (the answer check asks at the end)
        refused: list[str] = ctx.state.setdefault(f"{self.name}.change_refused", [])
        checked = len(items) >= self.check_steps_from
        for item in marked:
            content = str(item["content"])
            change = _changes_a_file(content) and content not in refused and checked
            # (a list with steps still open may carry a step done before it was written)
            no_work, no_change = idle and credited >= work, change and changed >= changes
            if no_work or no_change:
                unearned.append(item)
                if no_change and not no_work:  # (seen: refused as idle first, then closed
                    refused.append(content)  # after a read, the change never checked)
                continue
            credited += 1
            changed += change
        ctx.state[f"{self.name}.credited"] = credited
        ctx.state[f"{self.name}.credited_changes"] = changed
        return unearned

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        """After a list was refused as closed with nothing done, the next call does a step, not
        another list (seen: the same write_todos six times over)."""
        if ctx.state.get(f"{self.name}.act") != "work":
            return None  # (a changed tool list costs a local model its prompt cache: rarely)
        work = [name for name in ctx.functions if name not in _TODO_TOOLS]
        return work or None

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        act = ctx.state.pop(f"{self.name}.act", "")
        others = any(name not in _TODO_TOOLS for name in ctx.offered)
        return "required" if act and others else None

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        """Count the calls that did work (anything but the todo tools) since the last save."""
        work = sum(c.status == "success" and c.name not in _TODO_TOOLS for c in calls)
        for key in (f"{self.name}.work", f"{self.name}.work_total"):
            ctx.state[key] = ctx.state.get(key, 0) + work
        changes = f"{self.name}.changes"
        # (code that failed changed nothing the step asked for: seen on csv-totals, a NameError
        # before totals.json was written, and "write the totals to totals.json" closed)
        changed = sum(may_change_files(c) and not returned_error(c) for c in calls)
        ctx.state[changes] = ctx.state.get(changes, 0) + changed
        ctx.state[f"{self.name}.seen"] = ctx.usage.tool_calls

    async def read_todos(self, ctx: RunContext[Any]) -> str:
        """Return your todo list."""
        items = self.items(ctx)
        return json.dumps(items, ensure_ascii=False) if items else "The todo list is empty."
