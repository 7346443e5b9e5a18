"""``Heartbeat`` checkpoints and ``Reflection``: keep a long task on track, and finish it.

Models stop early: they answer "done" with todos still open or right after changing a file they
never checked. ``Heartbeat`` shows the model a short checkpoint every few model calls and sends
an early final answer back, a bounded number of times; ``Reflection`` asks for a one-sentence
self-assessment after tool results. Both are capabilities with per-run state in ``ctx.state``;
``DeepAgent(heartbeat=False, reflection=...)`` switches them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentica.deep.files import judging_tests, tests_call
from agentica.deep.subagents import delegated_calls
from agentica.errors import UsageError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["Heartbeat", "Reflection"]

WRITE_TOOLS = frozenset({"write_file", "edit_file"})
"""Tools that change a file (their ``path`` argument)."""
CHECK_TOOLS = frozenset({"read_file", "execute", "run_python", "grep"})
"""Tools whose call counts as verifying the changes made before it."""

# An answer that says the work is not finished ("The task is not done yet. I need to ...").
_NOT_DONE = re.compile(
    r"(?i)\b(?:task|work|it)\s+(?:is|was)\s+not\s+(?:yet\s+)?(?:done|finished|complete)"
    r"|\bnot\s+(?:done|finished|complete)\s+yet\b"
)

REFLECTION_PROMPT = (
    "Reflect in one sentence before your next step: did the last tool results move the task "
    "forward, and if not, what will you do differently? Then continue."
)


def _path_of(call: FunctionCall) -> str | None:
    try:
        arguments = json.loads(call.call.arguments or "{}")
    except ValueError:
        return None
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return path if isinstance(path, str) and path else None


class Heartbeat(Capability):
    """A checkpoint every ``every`` model calls and a bounded "continue" on an early answer.

    The heartbeat counts the run's model calls; every ``every`` calls (default 5) the model sees
    a short checkpoint before its next step: the step number, the todos still open, the files
    changed and not verified since (written or edited, and not read back or run since), and
    what to do: answer with the result if the task is done, else the next step. A subagent's
    calls (through the ``task`` tool) count like the agent's own: a subagent that reads a
    changed file back has checked it. When the model gives its final answer while todos are
    open or changes are unverified, or says the task is not done yet, it is told to continue
    (its next call must call a tool), at most ``max_continues`` times per run, so a model that
    cannot finish still ends.

    Args:
        every: model calls between checkpoints (at least 1).
        max_continues: how many times per run an early final answer is sent back.
        todos_key: where the todo list lives in ``agent.memory.state`` (``Todos``).
        check_todos: send an answer back for open todos too (``DeepAgent`` leaves that to its
            ``Todos``, which nudges on its own).
    """

    name = "heartbeat"

    def __init__(
        self,
        *,
        every: int = 5,
        max_continues: int = 2,
        todos_key: str = "todos",
        check_todos: bool = True,
    ) -> None:
        if every < 1:
            raise UsageError(f"Heartbeat(every={every}): give a number of model calls >= 1")
        if max_continues < 0:
            raise UsageError("Heartbeat max_continues must be >= 0")
        self.every = every
        self.max_continues = max_continues
        self.todos_key = todos_key
        self.check_todos = check_todos

    def _state(self, ctx: RunContext[Any]) -> dict[str, Any]:
        state: dict[str, Any] = ctx.state.setdefault(
            self.name, {"calls": 0, "changed": [], "continues": 0, "checkpoints": 0}
        )
        return state

    def open_todos(self, ctx: RunContext[Any]) -> list[str]:
        """The todos not completed, from the session state."""
        items = ctx.session_state.get(self.todos_key)
        if not isinstance(items, list):
            return []
        return [
            str(item.get("content", ""))
            for item in items
            if isinstance(item, dict) and item.get("status") != "completed"
        ]

    def unverified(self, ctx: RunContext[Any]) -> list[str]:
        """Files changed in this run and not read back or run since."""
        return list(self._state(ctx)["changed"])

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        state = self._state(ctx)
        changed: list[str] = state["changed"]
        for call in calls:
            if call.status != "success":
                continue
            steps = [call]
            if call.name == "task":  # what the subagents did counts like the agent's own calls
                delegated = delegated_calls(ctx)
                steps = [c for c in delegated[state.get("delegated", 0) :] if c.status == "success"]
                state["delegated"] = len(delegated)
            for step in steps:
                if step.name in WRITE_TOOLS:
                    path = _path_of(step)
                    if path is not None and path not in changed:
                        changed.append(path)
                elif step.name in CHECK_TOOLS:
                    changed.clear()

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        state = self._state(ctx)
        state["calls"] += 1
        step = state["calls"]
        if step % self.every or step == 0:
            return None
        state["checkpoints"] += 1
        lines = [f"Checkpoint at step {step}."]
        todos = self.open_todos(ctx)
        if todos:
            lines.append(f"- todos still open: {'; '.join(todos[:6])}")
        changed = self.unverified(ctx)
        if changed:
            lines.append(
                f"- changed but not checked yet: {', '.join(changed[:6])} (read it back or run it)"
            )
        # a statement, not a question: asked "is the task really done?", small models answer
        # "Yes, the task is done." (or copy the question) instead of the result
        lines.append(
            "- If the task is done, give your final answer now: the result itself. If not, do "
            "the next step with a tool call."
        )
        return "\n".join(lines)

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        state = self._state(ctx)
        if state["continues"] >= self.max_continues:
            return None
        reasons = []
        todos = self.open_todos(ctx) if self.check_todos else []
        if todos:
            reasons.append(f"these todos are still open: {'; '.join(todos[:6])}")
        changed = self.unverified(ctx)
        if changed:
            reasons.append(
                f"you changed {', '.join(changed[:6])} and did not check the result "
                "(read it back or run it)"
            )
        if _NOT_DONE.search(message.content or ""):
            reasons.append("your answer says the task is not done yet")
        if not reasons:
            return None
        state["continues"] += 1
        state["act"] = True  # the next call does a step (a tool call), not another answer
        run = await _tests_to_run(ctx, changed) if changed and len(reasons) == 1 else None
        if run is not None:  # (read back, fix-leap-year's wrong edit looked right to the model)
            state["act"] = run[0]
            return (
                f"You answered, but you changed {', '.join(changed[:6])} and did not run the "
                f"tests the task names since. Run them now: {run[1]}. If they pass, give your "
                "final answer again, else fix the code first."
            )
        if changed and len(reasons) == 1 and "read_file" in ctx.functions:
            # only the check is missing: say which call does it, and choose it (told to "do the
            # remaining steps", the demo's model redid its first step, a 40 s subagent)
            state["act"] = "read_file"
            return (
                f"You answered, but you changed {', '.join(changed[:6])} and did not check the "
                f"result. Read {changed[0]} back now with read_file (run it if it is code); if "
                "it is right, give your final answer again, else fix it first."
            )
        return (
            f"You answered, but {' and '.join(reasons)}. Continue the task: do the remaining "
            "steps with tool calls, then give your final answer. If a step is impossible, say "
            "why in your final answer."
        )

    async def tool_choice(self, ctx: RunContext[Any]) -> str | None:
        """After an early answer was sent back: a tool call (small models otherwise answer
        "The task is not done yet. I need to ..." again)."""
        state = self._state(ctx)
        act, state["act"] = state.get("act", False), False
        if isinstance(act, str):
            return act
        return "required" if act else None

    @staticmethod
    def stats(ctx: RunContext[Any]) -> dict[str, int]:
        """Checkpoints shown and early answers sent back in the run of ``ctx``."""
        state = ctx.state.get(Heartbeat.name) or {}
        return {"checkpoints": state.get("checkpoints", 0), "continues": state.get("continues", 0)}


async def _tests_to_run(ctx: RunContext[Any], changed: list[str]) -> tuple[str, str] | None:
    """The tool and call that run the tests judging the task's fix, when Python files were
    changed in a task that has such tests; else None."""
    if ctx.files is None or not any(path.endswith(".py") for path in changed):
        return None
    tests = await judging_tests(ctx.input, ctx.files)
    return await tests_call(ctx, ctx.files, tests[0]) if tests else None


class Reflection(Capability):
    """Ask for a one-sentence self-assessment after tool results, every ``every`` model calls:
    did the last results move the task forward, and what is the next step. Off by default in
    ``DeepAgent``.

    Args:
        every: model calls between reflections (at least 1).
        prompt: the text shown.
    """

    name = "reflection"

    def __init__(self, *, every: int = 3, prompt: str = REFLECTION_PROMPT) -> None:
        if every < 1:
            raise UsageError(f"Reflection(every={every}): give a number of model calls >= 1")
        self.every = every
        self.prompt = prompt

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        ctx.state[f"{self.name}.results"] = True

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        calls = int(ctx.state.get(self.name, 0)) + 1
        ctx.state[self.name] = calls
        if calls % self.every or not ctx.state.pop(f"{self.name}.results", False):
            return None
        ctx.state[f"{self.name}.shown"] = int(ctx.state.get(f"{self.name}.shown", 0)) + 1
        return self.prompt
