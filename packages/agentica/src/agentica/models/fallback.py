"""``FallbackModel``: try a chain of models in order until one answers.

Each model keeps its own retry policy; when a model still fails with a ``ModelError``, the next one
is tried. A stream falls back only before anything was yielded (text already shown cannot be taken
back). When every model fails, the error names each model and why it failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agentica.errors import ModelError, UsageError
from agentica.models.base import Model, ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["FallbackModel"]


class FallbackModel:
    """A model that delegates to ``models[0]`` and falls back to the next on failure.

    ``id``, ``provider``, ``price`` and ``context_window`` are those of the first model; the
    response's ``message.model`` tells which model actually answered.
    """

    def __init__(self, *models: Model) -> None:
        if not models:
            raise UsageError("FallbackModel needs at least one model")
        self.models = models

    @property
    def id(self) -> str:
        return self.models[0].id

    @property
    def provider(self) -> str:
        return self.models[0].provider

    @property
    def price(self) -> Any:
        return getattr(self.models[0], "price", None)

    @property
    def context_window(self) -> int | None:
        windows = [getattr(m, "context_window", None) for m in self.models]
        known = [w for w in windows if isinstance(w, int)]
        return min(known) if known else None

    def _give_up(self, failures: list[tuple[Model, ModelError]]) -> ModelError:
        detail = "; ".join(f"{m.provider}:{m.id}: {e}" for m, e in failures)
        last = failures[-1][1]
        return ModelError(
            f"all {len(failures)} models of the fallback chain failed: {detail}",
            provider=last.provider,
            model=last.model,
            retryable=last.retryable,
        )

    async def response(self, request: ModelRequest) -> ModelResponse:
        failures: list[tuple[Model, ModelError]] = []
        for model in self.models:
            try:
                return await model.response(request)
            except ModelError as error:
                failures.append((model, error))
        raise self._give_up(failures) from failures[-1][1]

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        failures: list[tuple[Model, ModelError]] = []
        for model in self.models:
            yielded = False
            stream = model.response_stream(request)
            try:
                async for event in stream:
                    yielded = True
                    yield event
                return
            except ModelError as error:
                if yielded:
                    raise
                failures.append((model, error))
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:
                    await close()
        raise self._give_up(failures) from failures[-1][1]

    async def aclose(self) -> None:
        for model in self.models:
            await model.aclose()

    def __repr__(self) -> str:
        return f"FallbackModel({', '.join(repr(m) for m in self.models)})"
