"""``create_app``: the FastAPI application of the team service.

The lifespan opens a ``Team`` (database upgrade, first admin, supervisor) and closes it on
shutdown. Every ``TeamError`` becomes its status with ``{"error": {"type", "message", ...}}``;
malformed bodies are a 422 in the same shape naming the field; bodies over
``max_body_bytes`` are refused with 413 before they are read; any other failure is logged (with
secrets redacted) and answered with a 500 that says nothing internal.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentica.errors import StorageError
from agentica_team.errors import TeamError
from agentica_team.security import redact
from agentica_team.service import Team
from agentica_team.settings import TeamSettings

__all__ = ["create_app"]

log = logging.getLogger("agentica_team")


def create_app(settings: TeamSettings | None = None, *, team: Team | None = None) -> FastAPI:
    """The service's ASGI app on ``settings`` (default: from the environment). With ``team``,
    the app uses that open service and leaves closing it to the caller."""
    config = settings or (team.settings if team is not None else TeamSettings.load())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if team is not None:
            app.state.team = team
            yield
            return
        opened = await Team.open(config)
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
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)  # type: ignore[arg-type]
    return app


def _add_routers(app: FastAPI) -> None:
    from agentica_team import gateway
    from agentica_team.api import accounts, audit, courses, sessions

    for router in (accounts.router, courses.router, audit.router, sessions.router, gateway.router):
        app.include_router(router)


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

    async def storage_error(_: Request, exc: Exception) -> JSONResponse:
        log.error("storage error: %s", redact(str(exc)))
        return _error(503, "unavailable", "the database is unavailable; try again shortly")

    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s: %s", type(exc).__name__, redact(str(exc))[:2000])
        return _error(500, "internal", "the server failed to handle this request (it is logged)")

    app.add_exception_handler(TeamError, team_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(StorageError, storage_error)
    app.add_exception_handler(Exception, unexpected)


class BodyLimit:
    """ASGI middleware: refuse request bodies over ``max_bytes`` with 413 (by the declared
    length at once, else as soon as the streamed body passes the limit)."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await self._refuse(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise _TooLarge
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        response = _error(
            413,
            "too_large",
            f"the request body is larger than {self.max_bytes} bytes; send less "
            "(the server's limit is `max_body_bytes`)",
        )
        await send({"type": "http.response.start", "status": 413,
                    "headers": response.raw_headers})  # fmt: skip
        await send({"type": "http.response.body", "body": response.body})


class _TooLarge(Exception):
    pass
