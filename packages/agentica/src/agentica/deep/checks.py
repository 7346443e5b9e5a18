"""``AnswerCheck``: ask the model to check its work before it finishes.

Small models often answer "done" after computing a result without doing the last step the user
asked for (writing the file, saving the code). Before the run may end, the model is asked, a
bounded number of times per run, to compare what was asked with what its tool calls did and to
finish the missing steps. A model that really is done repeats its answer and the run ends.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

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
    "call. If everything is done, reply with only your final answer again."
)


class AnswerCheck(Capability):
    """Send the model back once (``max_checks``) to verify its work before the run ends.

    The request lists the tool calls the run made (name, short arguments, short result), because
    a small model checks evidence it is shown far better than its memory of the conversation.

    Args:
        max_checks: how many times per run the model is asked (0 disables the check).
        prompt: the text of the check; ``{task}`` is replaced by the user's request and
            ``{calls}`` by the list of the run's tool calls.
        only_after_tools: skip the check when the run made no tool calls (a plain question).
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
        for call in calls:
            log.append(_describe(call))
            if call.status == "success":
                key = f"{self.name}.arguments"
                ctx.state[key] = ctx.state.get(key, "") + "\n" + call.call.arguments

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        done = int(ctx.state.get(self.name, 0))
        if done >= self.max_checks:
            return None
        if self.only_after_tools and ctx.usage.tool_calls == 0:
            return None
        ctx.state[self.name] = done + 1
        calls: list[str] = ctx.state.get(f"{self.name}.calls") or []
        listing = "\n".join(f"- {line}" for line in calls[-_MAX_LISTED:]) or "- (none)"
        prompt = self.prompt.replace("{task}", ctx.input.strip() or "(see above)")
        prompt = prompt.replace("{calls}", listing)
        unused = _unused_files(ctx.input, ctx.state.get(f"{self.name}.arguments", ""))
        if unused:
            names = ", ".join(unused)
            prompt = (
                f"The task names {names}, but none of your tool calls used "
                f"{'it' if len(unused) == 1 else 'them'}. Call a tool on "
                f"{'it' if len(unused) == 1 else 'each of them'} now (to write a file the task "
                f"asks for, call the tool that writes files).\n\n{prompt}"
            )
        return prompt


_MAX_LISTED = 12
_FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z][A-Za-z0-9]{0,4})(?![\w/-])")


def _unused_files(task: str, arguments: str) -> list[str]:
    """File names the task mentions that no successful tool call's arguments mention."""
    names = dict.fromkeys(m.group(1) for m in _FILE_NAME.finditer(task))
    return [
        n
        for n in names
        if n not in arguments
        and not n[0].isdigit()
        and len(n) > 3  # "e.g", "i.e": abbreviations, not files
    ]


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(call: FunctionCall) -> str:
    """One line per call: ``write_file(path="a.txt", ...) -> wrote 3 characters``."""
    outcome = "error: " if call.status != "success" else ""
    return (
        f"{call.name}({_short(call.call.arguments, 80)}) -> "
        f"{outcome}{_short(call.content, 80) or '(no output)'}"
    )
