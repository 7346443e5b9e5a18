"""``RepetitionGuard``: notice when the model repeats itself, and make it change course.

Small models loop: after a ``SyntaxError`` they re-send the byte-identical code until the step
cap, or they alternate between two calls (read, write, read, write). The guard watches the run's
recent tool calls (``call_key``, ``returned_error``), warns the model in the result it sees, and
refuses a tool the model keeps repeating for a few model calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentica.errors import UsageError
from agentica.run.capability import Capability
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["RepetitionGuard", "call_key", "returned_error"]

_SPACES = re.compile(r"\s+")
# Output that says the tool ran but failed: a non-zero exit code, a traceback, a Python error.
_FAILED_OUTPUT = re.compile(
    r"(?m)^(?:exit code [1-9]\d*|exited with (?:code|status) [1-9]\d*|"
    r"Traceback \(most recent call last\)|\w*(?:Error|Exception): )"
)


def call_key(call: FunctionCall) -> str:
    """The call's tool name and normalised arguments: equal for calls that do the same thing
    (JSON re-serialised with sorted keys, whitespace runs collapsed)."""
    raw = call.call.arguments
    try:
        arguments = json.dumps(json.loads(raw), sort_keys=True, ensure_ascii=False)
    except (ValueError, TypeError):
        arguments = raw
    return f"{call.name}:{_SPACES.sub(' ', arguments).strip()}"


def returned_error(call: FunctionCall) -> bool:
    """Whether the call failed: it raised, or it returned output saying it failed."""
    if call.status == "error":
        return True
    return bool(_FAILED_OUTPUT.search(call.content[:4000]))


@dataclass(slots=True)
class _State:
    keys: list[str] = field(default_factory=list)
    failed: list[bool] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)  # tool -> model calls left refused
    stuck: bool = False  # a refused tool was called during its cooldown
    warnings: int = 0
    refusals: int = 0


class RepetitionGuard(Capability):
    """Warn on repeated tool calls and refuse a tool that the model keeps repeating.

    The guard keeps a sliding window of the run's recent tool calls, each reduced to a key
    (``call_key``) and whether it failed (``returned_error``: a call that *returned* an error as
    output, ``exit code 1`` with a traceback, counts as a failure like one that raised; that is
    the commonest loop).

    - ``k`` identical calls in a row (default 3): the result the model sees gets a warning note
      saying the call was repeated, that repeating it will not change the result, and what to do.
    - ``2k`` in a row: the tool is refused for the next ``cooldown`` model calls (it is not
      offered) and the note says so.
    - A failed call identical to one that already failed in the window (not necessarily just
      before) gets a warning at once: a deterministic failure (a missing module, a bad path) does
      not change on a retry, and small models retry it between other calls.
    - A cycle (``A B A B`` or ``A B C A B C``) seen twice gets the warning; seen ``k`` times, the
      cycle's tools are refused the same way.
    - A model that calls a refused tool anyway is offered no tools at all for its next call, so
      it has to answer with what it knows.

    The guard's state is per run (in ``ctx.state``), so two runs never see each other's calls.

    Args:
        k: identical calls in a row that trigger a warning; ``2 * k`` refuse the tool.
        window: how many recent calls are remembered.
        cooldown: model calls for which a refused tool is not offered.
        cycles: also detect cycles of 2 or 3 different calls (``A B A B``).
    """

    name = "repetition"

    def __init__(
        self, *, k: int = 3, window: int = 24, cooldown: int = 2, cycles: bool = True
    ) -> None:
        if k < 2:
            raise UsageError(f"RepetitionGuard(k=...) must be at least 2, not {k}")
        if window < 2 * k:
            raise UsageError(f"RepetitionGuard(window=...) must be at least 2 * k = {2 * k}")
        if cooldown < 1:
            raise UsageError(f"RepetitionGuard(cooldown=...) must be at least 1, not {cooldown}")
        self.k = k
        self.window = window
        self.cooldown = cooldown
        self.cycles = cycles

    def _state(self, ctx: RunContext[Any]) -> _State:
        state = ctx.state.get(self.name)
        if not isinstance(state, _State):
            state = ctx.state[self.name] = _State()
        return state

    @staticmethod
    def stats(ctx: RunContext[Any]) -> tuple[int, int]:
        """(warnings, refusals) the guard gave in the run of ``ctx``."""
        state = ctx.state.get(RepetitionGuard.name)
        return (state.warnings, state.refusals) if isinstance(state, _State) else (0, 0)

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        state = self._state(ctx)
        if not state.refused:
            return None
        refused = set(state.refused)
        if state.stuck:  # it called a refused tool anyway: no tools until it answers
            state.stuck = False
            return []
        for tool in list(state.refused):  # this model call uses one turn of the cooldown
            state.refused[tool] -= 1
            if state.refused[tool] <= 0:
                del state.refused[tool]
        return [n for n in ctx.functions if n not in refused]

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        state = self._state(ctx)
        for call in calls:
            if call.name in state.refused:
                state.stuck = True
                call.notes.append(
                    f"[repetition stop] {call.name} is refused for now and you called it "
                    "anyway. The next step offers no tools: give your final answer with what "
                    "the tools showed, and say what you could not do (do not invent results)."
                )
                continue
            state.keys.append(call_key(call))
            state.failed.append(returned_error(call))
            del state.keys[: -self.window], state.failed[: -self.window]
            note = self._check(state, call)
            if note is not None:
                call.notes.append(note)

    def _check(self, state: _State, call: FunctionCall) -> str | None:
        keys = state.keys
        run = 1
        while run < len(keys) and keys[-run - 1] == keys[-1]:
            run += 1
        if run >= self.k:
            all_failed = all(state.failed[-run:])
            outcome = (
                " and it failed every time" if all_failed else ", with the same result each time"
            )
            if run >= 2 * self.k:
                return self._refuse(state, [call.name], f"{call.name} was called {run} times "
                                    f"in a row with the same arguments{outcome}")  # fmt: skip
            state.warnings += 1
            advice = (
                "Read the error above and change the input (fix the code or the arguments); "
                "sending it again will fail again."
                if all_failed
                else "Calling it again will not change anything. If this step is done, go on "
                "to the next one, or give your final answer."
            )
            return (
                f"[repetition warning] You made this exact {call.name} call {run} times in a "
                f"row{outcome}. {advice}"
            )
        earlier = zip(keys[:-1], state.failed[:-1], strict=True)
        if state.failed[-1] and any(failed and key == keys[-1] for key, failed in earlier):
            state.warnings += 1
            return (
                f"[repetition warning] This exact {call.name} call already failed earlier in "
                "this run, and it failed again: the same input gives the same error. Change "
                "the input (fix the code or the arguments) or do something else."
            )
        if not self.cycles:
            return None
        for period in (2, 3):
            length = _cycle_length(keys, period)
            if length < 2 * period:
                continue
            tools = list(dict.fromkeys(k.split(":", 1)[0] for k in keys[-period:]))
            if length >= self.k * period:
                return self._refuse(state, tools, f"the same {period} calls ({', '.join(tools)}) "
                                    f"were repeated {self.k} times in a cycle")  # fmt: skip
            if length == 2 * period:  # warn once per cycle, when it is first seen
                state.warnings += 1
                return (
                    f"[repetition warning] Your last {2 * period} calls repeat the same "
                    f"{period} calls ({', '.join(tools)}) in a cycle; the results will not "
                    "change. Do something different to make progress, or give your final "
                    "answer if the task is done."
                )
        return None

    def _refuse(self, state: _State, tools: list[str], what: str) -> str:
        state.refusals += 1
        for tool in tools:
            state.refused[tool] = self.cooldown
        del state.keys[:], state.failed[:]  # a fresh start after the refusal
        names = ", ".join(tools)
        return (
            f"[repetition stop] {what}. {names} is refused for your next {self.cooldown} "
            "steps. Change your approach: use a different tool, fix the input, or give your "
            "final answer with what you know."
        )


def _cycle_length(keys: Sequence[str], period: int) -> int:
    """How many calls at the end of ``keys`` follow a cycle of ``period`` different calls."""
    if len(keys) < 2 * period or len(set(keys[-period:])) < period:
        return 0
    length = period
    while length < len(keys) and keys[-length - 1] == keys[-length - 1 + period]:
        length += 1
    return length
