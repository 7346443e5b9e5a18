"""Model rules: which model answers each model call of a run (``ModelRule``, ``Escalate``,
``ByTask``).

A rule stands where an agent's model goes (``Agent(model=Escalate(cheap, strong))``). Before each
model call the run loop asks it for that call's model, telling it what the run knows so far
(``TurnFacts``: the call's number, answers a check sent back, failed tool calls, the input). The
conversation is provider-neutral (``agentica.messages``), so the chosen models may be of different
providers. Outside a run (a direct call, a summary) a rule answers as its first model, whose id,
provider and price it shows.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from agentica.errors import UsageError
from agentica.models.base import Model, ModelRequest, ModelResponse, ModelStreamEvent
from agentica.models.pricing import ModelPrice, price_for
from agentica.models.registry import resolve_model

__all__ = ["ByTask", "Chooser", "Escalate", "ModelRule", "TurnFacts", "chosen_model"]

_NESTED = 8  # rules choosing rules, at most (a cycle is a mistake, not a loop)
_CLASSIFIED = 256  # inputs a ``ByTask`` remembers the kind of


@dataclass(slots=True, frozen=True, kw_only=True)
class TurnFacts:
    """What a run knows before one of its model calls: what a ``ModelRule`` decides on.

    Attributes:
        turn: the call's number in the run (1 for the first).
        input: the text of the run's input (its images left out; ``images`` counts them).
        sent_back: answers a check sent back in this run so far (``AnswerSentBack``: an answer
            check, an output guardrail, an answer that did not parse, an empty reply).
        tool_errors: tool calls of this run that failed so far.
        previous: the id of the model that answered this run's previous call, if any.
    """

    turn: int
    input: str = ""
    images: int = 0
    sent_back: int = 0
    tool_errors: int = 0
    previous: str | None = None

    @property
    def failures(self) -> int:
        """Answers sent back plus failed tool calls."""
        return self.sent_back + self.tool_errors


Chooser: TypeAlias = Callable[[TurnFacts], "Model | str | Awaitable[Model | str]"]
"""A function of ``TurnFacts`` returning a model or a model string (may be async)."""


def _model(value: Any, where: str) -> Model:
    model = resolve_model(value) if isinstance(value, str) else value
    if not callable(getattr(model, "response", None)):
        raise UsageError(
            f"{where} needs models or model strings ('openai:gpt-4o-mini'), not "
            f"{type(value).__name__}"
        )
    return model


class ModelRule:
    """Chooses the model of each model call of a run; give it as an agent's model.

    ``ModelRule(cheap, strong, choose=f)`` calls ``f(facts)`` before every model call (a plain
    or an async function of ``TurnFacts``) and uses the model it returns: one of ``models``, a
    model string (one of the models' ids, or a new model string, built once), or any model.
    Without ``choose`` the first model answers every call. Subclasses override ``choose``.

    A rule is a ``Model`` too: called outside a run (a summary, a direct call) it answers as its
    first model (``default``), whose ``id``, ``provider`` and ``price`` it shows; its
    ``context_window`` is the smallest of its models' (the conversation must fit whichever
    answers). Cost is counted per model that answered (``RunUsage.by_model``).
    """

    def __init__(self, *models: Model | str, choose: Chooser | None = None) -> None:
        if not models:
            raise UsageError(f"{type(self).__name__} needs at least one model")
        self.models: tuple[Model, ...] = tuple(_model(m, type(self).__name__) for m in models)
        self._choose = choose
        self._built: dict[str, Model] = {}  # model strings a chooser returned, built once

    @property
    def default(self) -> Model:
        """The model that answers outside a run: the first."""
        return self.models[0]

    async def choose(self, facts: TurnFacts) -> Model:
        """The model for the call ``facts`` describe."""
        if self._choose is None:
            return self.default
        picked = self._choose(facts)
        if inspect.isawaitable(picked):
            picked = await picked
        return self._named(picked)

    def _named(self, picked: Model | str) -> Model:
        """``picked``, a model string resolved: one of the models' ids first, else built once."""
        if not isinstance(picked, str):
            return _model(picked, f"{type(self).__name__}'s choice")
        for model in self.models:
            if model.id == picked:
                return model
        built = self._built.get(picked)
        if built is None:
            built = self._built[picked] = _model(picked, f"{type(self).__name__}'s choice")
        return built

    # ----------------------------------------------------------------- the Model protocol

    @property
    def id(self) -> str:
        return self.default.id

    @property
    def provider(self) -> str:
        return self.default.provider

    @property
    def price(self) -> ModelPrice | None:
        price: ModelPrice | None = getattr(self.default, "price", price_for(self.default.id))
        return price

    @property
    def context_window(self) -> int | None:
        windows = [getattr(m, "context_window", None) for m in self.models]
        known = [w for w in windows if isinstance(w, int)]
        return min(known) if known else None

    async def response(self, request: ModelRequest) -> ModelResponse:
        return await self.default.response(request)

    def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        return self.default.response_stream(request)

    async def aclose(self) -> None:
        for model in (*self.models, *self._built.values()):
            await model.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(m) for m in self.models)})"


class Escalate(ModelRule):
    """A cheap model first, a stronger one after repeated failures in the run.

    ``Escalate(cheap, strong, after_failures=2)``: each call of a run goes to ``cheap`` until a
    check sent its answers back ``after_failures`` times (an answer check, an output guardrail,
    an answer that did not match the output type, an empty reply), then to ``strong`` for the
    rest of the run; with more models, each further ``after_failures`` failures move one model
    up. ``tool_errors=True`` counts failed tool calls as failures too. Each run starts again at
    the first model.
    """

    def __init__(
        self, *models: Model | str, after_failures: int = 2, tool_errors: bool = False
    ) -> None:
        if len(models) < 2:
            raise UsageError("Escalate needs two models or more: the cheap one first")
        if after_failures < 1:
            raise UsageError(f"after_failures must be 1 or more, not {after_failures}")
        super().__init__(*models)
        self.after_failures = after_failures
        self.tool_errors = tool_errors

    async def choose(self, facts: TurnFacts) -> Model:
        failures = facts.failures if self.tool_errors else facts.sent_back
        return self.models[min(failures // self.after_failures, len(self.models) - 1)]


class ByTask(ModelRule):
    """A model per kind of task: ``classify`` names the kind of the run's input.

    ``ByTask(classify, {"code": strong, "chat": cheap})``: ``classify(text)`` (a plain or an
    async function: keywords, a regular expression, a call to a small model) returns a kind; the
    run's calls go to that kind's model, or to ``default``'s (by default the first kind's) when
    the kind is not one of ``models``. An input's kind is asked once and remembered (the last
    256 inputs).
    """

    def __init__(
        self,
        classify: Callable[[str], str | Awaitable[str]],
        models: Mapping[str, Model | str],
        *,
        default: str | None = None,
    ) -> None:
        if not models:
            raise UsageError("ByTask needs a model for at least one kind of task")
        if default is not None and default not in models:
            raise UsageError(f"ByTask's default {default!r} is not one of {list(models)}")
        kinds = list(models)
        if default is not None:  # the default's model first: it answers outside a run
            kinds.remove(default)
            kinds.insert(0, default)
        super().__init__(*(models[k] for k in kinds))
        self.kinds: dict[str, Model] = dict(zip(kinds, self.models, strict=True))
        self.classify = classify
        self._seen: OrderedDict[str, str] = OrderedDict()

    async def kind_of(self, text: str) -> str:
        """The kind of task ``text`` is (asked once per text, then remembered)."""
        kind = self._seen.get(text)
        if kind is None:
            answer = self.classify(text)
            kind = await answer if inspect.isawaitable(answer) else answer
            self._seen[text] = kind
            while len(self._seen) > _CLASSIFIED:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(text)
        return kind

    async def choose(self, facts: TurnFacts) -> Model:
        return self.kinds.get(await self.kind_of(facts.input), self.default)


async def chosen_model(model: Model, facts: TurnFacts) -> Model:
    """The model that answers the call ``facts`` describe: ``model`` itself, or what its rule
    chooses (a rule may choose another rule)."""
    for _ in range(_NESTED):
        if not isinstance(model, ModelRule):
            return model
        model = await model.choose(facts)
    raise UsageError(
        f"model rules chose other rules {_NESTED} times in a row: a rule must choose a model"
    )
