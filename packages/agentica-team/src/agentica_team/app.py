"""``create_app``: the FastAPI application of the team service.

The lifespan opens a ``Team`` (database upgrade, first admin, supervisor) and closes it on
shutdown. Every ``TeamError`` becomes its status with ``{"error": {"type", "message", ...}}``;
malformed bodies are a 422 in the same shape naming the field; ``RequestGuard`` refuses
oversized bodies and text that cannot be stored, and turns any other failure into a logged
(redacted) 500 that says nothing internal.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from starlette.exceptions import HTTPException as StarletteHTTPException

from agentica.errors import StorageError
from agentica_team.errors import TeamError
from agentica_team.guard import RequestGuard
from agentica_team.security import redact
from agentica_team.service import Team
from agentica_team.settings import TeamSettings
from agentica_team.webui import BUILT, WebUI, not_built

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["create_app"]

log = logging.getLogger("agentica_team")


def create_app(
    settings: TeamSettings | None = None,
    *,
    team: Team | None = None,
    tracer_provider: TracerProvider | None = None,
) -> FastAPI:
    """The service's ASGI app on ``settings`` (default: from the environment). With ``team``,
    the app uses that open service and leaves closing it to the caller; ``tracer_provider``
    receives the spans of the ``Team`` the app opens (see ``Team.open``)."""
    config = settings or (team.settings if team is not None else TeamSettings.load())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if team is not None:
            app.state.team = team
            yield
            return
        opened = await Team.open(config, tracer_provider=tracer_provider)
        app.state.team = opened
        try:
            yield
        finally:
            await opened.aclose()

    app = FastAPI(
        title="agentica team service",
        version="0.1.0",
        description="Accounts, budgets, an OpenAI-compatible gateway, agent sessions and an audit "
        "for a class. Authenticate with `Authorization: Bearer agt_...` or a browser login.",
        lifespan=lifespan,
    )
    _add_error_handlers(app)
    _add_routers(app)
    _build_routes(app)
    _mount_web(app, config.web_dir or BUILT)
    app.add_middleware(RequestGuard, max_bytes=config.max_body_bytes)
    return app


def _add_routers(app: FastAPI) -> None:
    from agentica_team import gateway
    from agentica_team.api import accounts, audit, courses, executors, knowledge, server, sessions

    # the gateway first: its routes are matched first (FastAPI tries the routes in order)
    routers = (gateway.router, accounts.router, courses.router, audit.router, sessions.router)
    for router in (*routers, knowledge.router, executors.router, server.router):
        app.include_router(router)


def _mount_web(app: FastAPI, directory: Path) -> None:
    """The web UI at ``/``, after every API route (``agentica_team.webui``)."""
    if (directory / "index.html").is_file():
        app.mount("/", WebUI(directory), name="web")
    else:
        app.mount("/", not_built(directory), name="web")


def _build_routes(app: FastAPI) -> None:
    """Build the included routers' routes now (FastAPI builds them lazily, on the first request,
    which would take 0.2-0.4 s of the event loop); ``create_app`` may run on a worker thread."""
    pending: list[Any] = list(app.router.routes)
    while pending:
        route = pending.pop()
        for build in ("effective_candidates", "effective_low_priority_routes"):
            method = getattr(route, build, None)
            if callable(method):
                pending.extend(method())


def _error(status: int, kind: str, message: str, **detail: Any) -> JSONResponse:
    headers = {"Retry-After": str(detail["retry_after"])} if "retry_after" in detail else None
    body = {"error": {"type": kind, "message": message, **detail}}
    return JSONResponse(body, status_code=status, headers=headers)


def _add_error_handlers(app: FastAPI) -> None:
    async def team_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, TeamError)
        return _error(exc.status, exc.kind, exc.message, **exc.detail)

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = [
            f"{'.'.join(str(p) for p in error.get('loc', ()) if p != 'body') or 'body'}: "
            f"{error.get('msg', 'invalid')}"
            for error in exc.errors()[:10]
        ]
        return _error(422, "invalid_request", "the request is invalid: " + "; ".join(problems))

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return _error(exc.status_code, "http_error", str(exc.detail))

    async def integrity_error(_: Request, exc: Exception) -> JSONResponse:
        log.info("integrity conflict: %s", type(exc).__name__)
        return _error(409, "conflict", "it exists already or changed meanwhile; try again")

    async def storage_error(_: Request, exc: Exception) -> JSONResponse:
        log.error("storage error: %s", redact(str(exc)))
        return _error(503, "unavailable", "the database is unavailable; try again shortly")

    app.add_exception_handler(TeamError, team_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(StorageError, storage_error)
    app.add_exception_handler(IntegrityError, integrity_error)
