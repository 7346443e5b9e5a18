"""``WorkspaceMemory``: the capability that gives an agent a ``Workspace`` as its memory.

```python
agent = Agent(model=..., capabilities=[WorkspaceMemory("workspace/")], user_id="alice")
```

At the start of each run the workspace's files for the run's user (``ctx.user_id``, or
``default_user``) go into the system prompt within ``budget_tokens``, counted with the agent's
model's counter (``agentica.context.counter_for``; the estimate when the model is unknown). The
agent gets two tools: ``save_memory`` (append a fact to the user's MEMORY.md and today's notes) and
``read_daily_notes`` (read the notes of a day or of several days).
"""

from __future__ import annotations

import asyncio
import logging
import os
from datetime import date
from typing import Any

from agentica.context.tokens import EstimateCounter, TokenCounter
from agentica.errors import ToolError, UsageError
from agentica.memory.workspace import Workspace, user_folder
from agentica.run.capability import Capability
from agentica.run.window import load_counter
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = ["WorkspaceMemory"]

logger = logging.getLogger(__name__)

_MAX_READ_DAYS = 31


class WorkspaceMemory(Capability):
    """File-based long-term memory: a ``Workspace`` in the prompt, and tools to add to it.

    Args:
        workspace: a ``Workspace`` or its folder.
        budget_tokens: the most tokens the workspace's files may take in the system prompt.
        default_user: the user of runs without a user id.
        counter: count tokens with this counter instead of the agent's model's.
    """

    name = "workspace_memory"

    def __init__(
        self,
        workspace: Workspace | str | os.PathLike[str],
        *,
        budget_tokens: int = 2000,
        default_user: str = "default",
        counter: TokenCounter | None = None,
    ) -> None:
        if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int):
            raise UsageError(f"budget_tokens must be an int, got {budget_tokens!r}")
        if budget_tokens < 1:
            raise UsageError(f"budget_tokens must be at least 1, got {budget_tokens}")
        user_folder(default_user)  # refuses an id that cannot be a folder
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.budget_tokens = budget_tokens
        self.default_user = default_user
        self.counter = counter
        self._counters: dict[tuple[str, str], TokenCounter] = {}
        self._tools = (
            Function.from_callable(self.save_memory),
            Function.from_callable(self.read_daily_notes),
        )

    def __repr__(self) -> str:
        return f"<WorkspaceMemory {os.fspath(self.workspace.root)!r}>"

    def user_of(self, ctx: RunContext[Any]) -> str:
        """The user whose memory a run uses: ``ctx.user_id``, or ``default_user``."""
        return ctx.user_id or self.default_user

    async def counter_for_run(self, ctx: RunContext[Any]) -> TokenCounter:
        """The counter for the run's model (loaded once per model id, in a thread)."""
        if self.counter is not None:
            return self.counter
        model = ctx.model
        if model is None:
            return EstimateCounter()
        key = (model.id, model.provider)
        counter = self._counters.get(key)
        if counter is None:
            counter = self._counters[key] = await asyncio.to_thread(load_counter, model)
        return counter

    # ------------------------------------------------------------------------------ hooks

    def tools(self) -> tuple[ToolLike, ...]:
        return self._tools

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        prompt = await self.workspace.context_prompt(
            self.user_of(ctx),
            budget_tokens=self.budget_tokens,
            counter=await self.counter_for_run(ctx),
        )
        return prompt or None

    # ------------------------------------------------------------------------------ tools

    async def save_memory(self, ctx: RunContext[Any], note: str) -> str:
        """Save one fact about the user so you remember it in future conversations.

        Use it when the user tells you something worth remembering: their name, preferences,
        plans, decisions, or asks you to remember something. Save one short fact per call, as a
        full sentence that makes sense on its own later. Do not save secrets like passwords.

        Args:
            note: the fact to remember, for example "Prefers short answers in French."
        """
        if not note.strip():
            raise ToolError("The note is empty. Write the fact to remember, in one sentence.")
        entry = await self.workspace.save_memory(self.user_of(ctx), note)
        return f"Saved to memory: {entry.removeprefix('- ')}"

    async def read_daily_notes(
        self, ctx: RunContext[Any], date: str | None = None, days: int = 1
    ) -> str:
        """Read the daily notes: what was saved on a day.

        Use it to recall what happened on an earlier day. Today's and yesterday's notes are
        usually already in your instructions.

        Args:
            date: the day to read, as YYYY-MM-DD (for example 2024-05-01). Omit it for today.
            days: how many days to read back from that day (1: only that day, 7: a week).
        """
        if date is None or not date.strip():
            day = self.workspace.today()
        else:
            try:
                day = _parse_date(date.strip())
            except ValueError:
                raise ToolError(
                    f"date {date!r} is not a date written YYYY-MM-DD. Write it like 2024-05-01 "
                    "(year, month, day), or leave it out for today."
                ) from None
        if not 1 <= days <= _MAX_READ_DAYS:
            raise ToolError(f"days must be a number from 1 to {_MAX_READ_DAYS}, got {days}.")
        notes = await self.workspace.daily_notes(self.user_of(ctx), date=day, days=days)
        if notes:
            return notes
        if days == 1:
            return f"No notes for {day.isoformat()}."
        return f"No notes in the {days} days up to {day.isoformat()}."


def _parse_date(text: str) -> date:
    if len(text) != 10 or text[4] != "-" or text[7] != "-":
        raise ValueError(text)
    return date.fromisoformat(text)
