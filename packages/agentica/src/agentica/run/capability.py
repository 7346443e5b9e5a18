"""``Capability``: cross-cutting behaviour plugged into the run loop, one object per concern.

A capability bundles what one feature needs (its tools, its prompt text, its hooks) instead of
adding keywords to ``Agent``: workspace memory, the variable space and evidence archive, and the
deep-agent harness's features are capabilities. Pass them as ``Agent(capabilities=[...])``.

Hooks, all optional (the defaults do nothing):

- ``tools()``: tools the capability gives the agent;
- ``instructions(ctx)``: text added to the system prompt once per run;
- ``allowed_tools(ctx)``: the names of the tools the model may use for the next call, or
  ``None`` for no restriction (a skill's allowed tools); several restrictions intersect;
- ``system_slot(ctx)``: text shown to the model before every model call, in a system message at
  the end of the request that is replaced each turn rather than appended to the history (for
  example the variable directory); at the end it leaves the prompt cache of the rest intact;
- ``after_tools(ctx, calls)``: called after a turn's tool calls ran and before the model sees their
  results (archive them, annotate them, or fail them);
- ``needs_approval(ctx, call)``: a ``PendingCall`` when the call must wait for a person's
  decision (the run pauses before the turn's calls run; see approval.py), else ``None``;
- ``review_answer(ctx, message)``: called when the model gives a final answer; returning text sends
  the model back to work with that text as the next user message (a checkpoint: "is it really
  done?"); the capability itself bounds how often it does so;
- ``after_run(ctx, record)``: called when the run ended, with its record.

A capability object is configuration: it may be shared by many agents and runs. Per-run state
belongs in ``ctx.state`` (a dict private to the run), keyed by the capability's name.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from agentica.messages import AssistantMessage
from agentica.storage.records import RunRecord
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.toolkit import ToolLike

if TYPE_CHECKING:
    from agentica.run.approval import PendingCall

__all__ = ["Capability"]


class Capability:
    """Base class of capabilities; override the hooks you need."""

    name: str = "capability"

    def tools(self) -> Sequence[ToolLike]:
        """Tools this capability adds to the agent."""
        return ()

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        """Text for the system prompt, computed once at the start of each run."""
        return None

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        """Names of the tools offered for the next model call, or ``None`` (no restriction)."""
        return None

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        """Text for the model before each model call, replaced every turn."""
        return None

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        """After the turn's calls ran, before their results are sent to the model."""
        return

    async def needs_approval(self, ctx: RunContext[Any], call: FunctionCall) -> PendingCall | None:
        """A ``PendingCall`` if ``call`` must wait for a person's decision, else ``None``."""
        return None

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """Return text to send the model back to work instead of finishing, or ``None``."""
        return None

    async def after_run(self, ctx: RunContext[Any], record: RunRecord) -> None:
        """When the run ended (completed, failed or cancelled)."""
        return

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
