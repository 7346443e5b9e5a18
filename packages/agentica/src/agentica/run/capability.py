"""``Capability``: cross-cutting behaviour plugged into the run loop, one object per concern.

A capability bundles what one feature needs (its tools, its prompt text, its hooks into the run
loop) instead of adding keywords to ``Agent``: workspace memory, the variable space and evidence
archive, and the deep-agent harness's features are capabilities. Pass them as
``Agent(capabilities=[...])``; the ``Capability`` class lists the hooks.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from agentica.messages import AssistantMessage
from agentica.models.base import ToolChoice
from agentica.storage.records import RunRecord
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.toolkit import ToolLike

if TYPE_CHECKING:
    from agentica.run.approval import PendingCall

__all__ = ["Capability"]


class Capability:
    """Base class of capabilities; override the hooks you need (the defaults do nothing).

    Hooks: ``tools``, ``instructions``, ``allowed_tools``, ``tool_choice``, ``system_slot``,
    ``refuse_call``, ``after_tools``, ``needs_approval``, ``review_answer`` and ``after_run``;
    each method says when it is called.

    A capability object is configuration: it may be shared by many agents and runs. Per-run
    state belongs in ``ctx.state`` (a dict private to the run), keyed by the capability's name.
    """

    name: str = "capability"

    def tools(self) -> Sequence[ToolLike]:
        """Tools this capability adds to the agent."""
        return ()

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        """Text for the system prompt, computed once at the start of each run."""
        return None

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        """Names of the tools offered for the next model call, or ``None`` (no restriction).

        For example a skill's allowed tools; the restrictions of several capabilities intersect.
        """
        return None

    async def tool_choice(self, ctx: RunContext[Any]) -> ToolChoice | None:
        """The tool choice for the next model call, or ``None`` (the model decides).

        A tool's name makes the model call that tool now, ``"required"`` makes it call one;
        for example after telling it to run code it only showed. The first capability that
        gives one wins; a choice naming a tool not offered this turn is ignored.
        """
        return None

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        """Text for the model before each model call, replaced every turn.

        It goes in a system message at the end of the request that is replaced each turn rather
        than appended to the history (for example the variable directory); at the end it leaves
        the prompt cache of the rest intact.
        """
        return None

    async def refuse_call(self, ctx: RunContext[Any], call: FunctionCall) -> str | None:
        """A reason to refuse ``call`` before it runs, or ``None`` to let it run.

        Called for each call of a turn, in order, before any of them runs; a reason becomes the
        call's error (the model receives it) and the tool is not run. The first capability that
        refuses decides; the others are not asked about that call.
        """
        return None

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        """After the turn's calls ran, before their results are sent to the model: archive
        them, annotate them, or fail them."""
        return

    async def needs_approval(self, ctx: RunContext[Any], call: FunctionCall) -> PendingCall | None:
        """A ``PendingCall`` if ``call`` must wait for a person's decision, else ``None``.

        The run pauses before the turn's calls run; see ``agentica.run.approval``.
        """
        return None

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """Return text to send the model back to work instead of finishing, or ``None``.

        Called when the model gives a final answer; the text becomes the next user message (a
        checkpoint: "is it really done?"). The capability itself bounds how often it does so.
        """
        return None

    async def after_run(self, ctx: RunContext[Any], record: RunRecord) -> None:
        """When the run ended (completed, failed or cancelled), with its record."""
        return

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"
