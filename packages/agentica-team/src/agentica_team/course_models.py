"""``CourseModels``: the model each course uses, built from its configuration and shared.

A course's model is its ``model`` / ``model_base_url`` / ``model_api_key`` (set by its teacher),
else the server's ``model`` settings. Models are built once per configuration (courses with the
same one share a model and its connection pool) and rebuilt when a course's configuration
changes (re-read once ``config_ttl`` seconds have passed); the embedded model is loaded on its
first call, on a worker thread, and shared by every course that uses it. ``for_user`` binds
a course's model to a student as a ``MeteredModel``: every call is counted against the budgets
and audited. The provider key stays in this process: it is never shown, logged or audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sqlalchemy as sa

from agentica.context.tokenizers import counter_for
from agentica.errors import UsageError
from agentica.models.base import Model
from agentica.models.pricing import price_for
from agentica.models.registry import PRESETS, model_from_string
from agentica_team.db.schema import courses
from agentica_team.errors import BadRequest, NotFound, TeamError
from agentica_team.metering import AuditNote, CourseModel, Meter, MeteredModel, Upstream, scrub

if TYPE_CHECKING:
    from agentica.models.local import LocalModel
    from agentica_team.accounts import Accounts
    from agentica_team.audit import Audit
    from agentica_team.budgets import Budgets
    from agentica_team.settings import TeamSettings

__all__ = ["CONFIG_TTL", "CourseModels", "ModelConfig", "ModelUnavailable"]

CONFIG_TTL = 1.0
"""Seconds a course's model configuration is reused before it is read again."""


class ModelUnavailable(TeamError):
    """The course's model is configured in a way that cannot work (503); its teacher must fix
    the course's model settings."""

    status = 503
    kind = "model_unavailable"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """A model configuration: the model string, the API root ("" for the provider's) and the
    key ("" for none or the server's environment)."""

    model: str
    base_url: str = ""
    api_key: str = field(default="", repr=False)


def _split(spec: str) -> tuple[str, str]:
    """``(provider, model_id)`` of a model string, as ``model_from_string`` reads it."""
    provider, sep, model_id = spec.strip().partition(":")
    if not sep and provider != "local":
        return "", provider
    return provider.lower(), model_id


class CourseModels:
    """The courses' models of one service (see the module docstring)."""

    def __init__(
        self, settings: TeamSettings, accounts: Accounts, budgets: Budgets, audit: Audit
    ) -> None:
        self.settings = settings
        self.accounts = accounts
        self.meter = Meter(budgets, audit)
        self.config_ttl = CONFIG_TTL
        self._built: dict[ModelConfig, Upstream] = {}
        self._locals: dict[str, LocalModel] = {}
        self._courses: dict[str, tuple[float, ModelConfig, int]] = {}
        self._building = asyncio.Lock()

    # -- configuration -------------------------------------------------------------------------

    def config_of(
        self, model: str | None, base_url: str | None, api_key: str | None
    ) -> ModelConfig:
        """The configuration of a course with these settings (``None``: not set). A course that
        sets a model or a URL uses its own key (or none); only a course that sets neither uses
        the server's model, URL and key, so the server's key never goes anywhere else."""
        if model or base_url:
            return ModelConfig(model or self.settings.model, base_url or "", api_key or "")
        settings = self.settings
        return ModelConfig(
            settings.model, settings.model_base_url, settings.model_api_key.get_secret_value()
        )

    async def _course_config(self, course_id: str) -> tuple[ModelConfig, int]:
        now = time.monotonic()
        cached = self._courses.get(course_id)
        if cached is not None and now - cached[0] < self.config_ttl:
            return cached[1], cached[2]
        query = sa.select(
            courses.c.model,
            courses.c.model_base_url,
            courses.c.model_api_key,
            courses.c.max_output_tokens,
        ).where(courses.c.id == course_id)
        async with self.accounts.db.read() as conn:
            row = (await conn.execute(query)).first()
        if row is None:
            raise NotFound(f"no course {course_id!r}")
        key = self.accounts.open_key(row.model_api_key)
        config = self.config_of(row.model, row.model_base_url, key)
        cap = row.max_output_tokens or self.settings.max_output_tokens
        self._courses[course_id] = (now, config, cap)
        return config, cap

    def check(self, model: str, base_url: str = "") -> None:
        """Raise ``BadRequest`` (saying why) if a course could not use the model string
        ``model`` (at ``base_url``): an unknown provider, a missing model id. Nothing is
        connected or loaded."""
        provider, name = _split(model)
        if provider == "local":
            from agentica.models.local import DEFAULT_LOCAL_MODEL
            from agentica.models.weights import EMBEDDED_MODELS

            if (name or DEFAULT_LOCAL_MODEL) not in EMBEDDED_MODELS:
                raise BadRequest(
                    f"there is no embedded model {name!r}: use local or "
                    + ", ".join(f"local:{known}" for known in EMBEDDED_MODELS)
                )
            return
        try:
            self._model(ModelConfig(model, base_url, "sk-unused-for-the-check"))
        except UsageError as exc:
            raise BadRequest(f"the model {model!r} cannot be used: {exc}") from None

    # -- building ------------------------------------------------------------------------------

    async def _upstream(self, config: ModelConfig) -> Upstream:
        built = self._built.get(config)
        if built is not None:
            return built
        async with self._building:
            built = self._built.get(config)
            if built is None:
                built = self._built[config] = await self._build(config)
        return built

    async def _build(self, config: ModelConfig) -> Upstream:
        try:
            model = self._model(config)
        except UsageError as exc:
            raise ModelUnavailable(
                f"the course's model {config.model!r} cannot be used: "
                f"{scrub(str(exc), (config.api_key,))}; ask the course's teacher to fix its "
                "model settings"
            ) from None
        counter = counter_for(model.id, model.provider)
        load = getattr(counter, "load", None)
        if load is not None:
            await asyncio.to_thread(load)  # an encoding takes 0.2-0.5 s to load
        price = model.price if hasattr(model, "price") else price_for(model.id)
        secrets = (config.api_key,) if config.api_key else ()
        return Upstream(model=model, counter=counter, price=price, secrets=secrets)

    def _model(self, config: ModelConfig) -> Model:
        """The model for ``config`` (cheap: nothing is connected or loaded here)."""
        provider, model_id = _split(config.model)
        if provider == "local":
            return self._local(model_id)
        key = config.api_key or None
        if not config.base_url:
            return model_from_string(config.model, **({"api_key": key} if key else {}))
        if not provider:  # a bare id on a server of the teacher's choice
            from agentica.models.openai import OpenAILike

            return OpenAILike(id=model_id, base_url=config.base_url, api_key=key)
        preset = PRESETS.get(provider)
        if preset is None:
            raise UsageError(f"unknown provider {provider!r}: use one of {', '.join(PRESETS)}")
        if not model_id:
            raise UsageError(f"{config.model!r} names no model: write '{provider}:MODEL_ID'")
        if preset.kind == "anthropic":
            from agentica.models.anthropic import Claude

            return Claude(model_id, api_key=key or "", base_url=config.base_url)
        from agentica.models.openai import OpenAIChat

        return OpenAIChat(
            model_id,
            api_key=key or "",
            base_url=config.base_url,
            provider=preset.name,
            context_window=preset.context_window,
        )

    def _local(self, name: str) -> LocalModel:
        from agentica.models.local import DEFAULT_LOCAL_MODEL, LocalModel

        name = name or DEFAULT_LOCAL_MODEL
        model = self._locals.get(name)
        if model is None:
            # loads on its first call; its compute threads leave a core to the event loop, which
            # serves every other request meanwhile (all cores starve it on a small machine)
            threads = max(1, (os.cpu_count() or 2) - 1)
            model = self._locals[name] = LocalModel(name, threads=threads)
        return model

    # -- the interface -------------------------------------------------------------------------

    async def course_model(self, course_id: str) -> CourseModel:
        """The course's model as configured now and its output cap (``NotFound``,
        ``ModelUnavailable``)."""
        config, cap = await self._course_config(course_id)
        return CourseModel(await self._upstream(config), cap)

    async def base_model(self, course_id: str) -> Model:
        """The course's configured model, unmetered (for the service's own use)."""
        return (await self.course_model(course_id)).upstream.model

    async def for_user(
        self,
        course_id: str,
        user_id: str,
        *,
        source: str,
        session_id: str = "",
        defer_settling: bool = False,
        note: AuditNote | None = None,
    ) -> MeteredModel:
        """The course's model for ``user_id``: each call is reserved on their budgets, settled
        and audited with ``source`` (``"gateway"``, ``"agent"``) and ``session_id``
        (``defer_settling``: see ``MeteredModel``; ``note``: an ``AuditNote`` written with
        the first call's admission, or on its own if that fails, here included)."""
        try:
            current = await self.course_model(course_id)
        except BaseException:
            await self.meter.note(note, course_id=course_id, user_id=user_id)
            raise

        async def resolve() -> CourseModel:
            return await self.course_model(course_id)

        return MeteredModel(
            self.meter,
            resolve,
            current,
            course_id=course_id,
            user_id=user_id,
            source=source,
            session_id=session_id,
            defer_settling=defer_settling,
            note=note,
        )

    async def aclose(self) -> None:
        """Wait for settling under way, close every model's connections and unload the
        embedded models."""
        await self.meter.drain()
        for upstream in self._built.values():
            with contextlib.suppress(Exception):
                await upstream.model.aclose()
        for local in self._locals.values():
            await asyncio.to_thread(local.stop)
        self._built.clear()
        self._locals.clear()
        self._courses.clear()
