"""``AnswerCheck``: ask the model to check its work before it finishes.

Small models often answer "done" after computing a result without doing the last step the user
asked for (writing the file, saving the code). Before the run may end, the model is asked, a
bounded number of times per run, to compare what was asked with what its tool calls did and to
finish the missing steps. A model that really is done repeats its answer and the run ends.
"""

from __future__ import annotations

from typing import Any

from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.tools.context import RunContext

__all__ = ["AnswerCheck"]

DEFAULT_PROMPT = (
    "Before you finish, check your work against the task: {task}\n"
    "For each thing it asks for, was it done by a tool call whose result you saw? A file the "
    "task asks to create or change must be written with a tool (printing its content is not "
    "enough); a value it asks to save must be in the file. Do any missing step now with a tool "
    "call. If everything is done, reply with only your final answer again."
)


class AnswerCheck(Capability):
    """Send the model back once (``max_checks``) to verify its work before the run ends.

    Args:
        max_checks: how many times per run the model is asked (0 disables the check).
        prompt: the text of the check; ``{task}`` is replaced by the user's request.
        only_after_tools: skip the check when the run made no tool calls (a plain question).
    """

    name = "answer_check"

    def __init__(
        self, *, max_checks: int = 1, prompt: str = DEFAULT_PROMPT, only_after_tools: bool = True
    ) -> None:
        self.max_checks = max_checks
        self.prompt = prompt
        self.only_after_tools = only_after_tools

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        done = int(ctx.state.get(self.name, 0))
        if done >= self.max_checks:
            return None
        if self.only_after_tools and ctx.usage.tool_calls == 0:
            return None
        ctx.state[self.name] = done + 1
        return self.prompt.replace("{task}", ctx.input.strip() or "(see above)")
