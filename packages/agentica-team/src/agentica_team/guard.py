"""``RequestGuard``: the ASGI middleware every request passes before any route sees it.

- Bodies over ``max_bytes`` are refused with 413: by the declared length at once, else as soon as
  a chunked body passes the limit (the rest, up to 64 MiB, is read and dropped first, so a
  client still sending reads the 413 instead of a reset connection).
- A JSON body whose strings hold a NUL or an unpaired surrogate (``\\u0000``, ``\\ud800``) is
  refused with 422 naming where: such text cannot be stored in PostgreSQL or encoded as UTF-8,
  so it would fail later, far from its cause.
- Any exception a route lets escape is logged once with secrets redacted and answered with a
  generic 500, instead of reaching the server's own (unredacted) traceback log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentica_team.security import redact

__all__ = ["RequestGuard", "bad_text"]

log = logging.getLogger("agentica_team")
_DRAIN_LIMIT = 64 * 1024 * 1024  # a refused body up to this size is read to its end, then dropped


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Every string in a JSON value (keys too), with a path such as ``messages[0].content``."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{where}.{key}" if where else str(key), key
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{where}[{index}]")


def bad_text(text: str) -> str | None:
    """What is wrong with ``text`` for storage (a NUL or an unpaired surrogate), else ``None``."""
    if "\x00" in text:
        return "a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "an unpaired UTF-16 surrogate (e.g. \\ud800), which is not text"
    return None


def _check_json(body: bytes) -> str | None:
    """Why a JSON body's text is unacceptable, else ``None`` (also for bodies that are not
    JSON: the route reports those). Bodies without escapes cannot hold such text: skipped."""
    if b"\\u" not in body:
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    for where, text in _strings(value, ""):
        problem = bad_text(text)
        if problem:
            return f"the text at {where or 'the body'} contains {problem}; remove it and resend"
    return None


class RequestGuard:
    """See the module docstring; ``max_bytes`` is the largest body accepted."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            refusal, replay = await self._read(scope, receive)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            await self.app(scope, replay, tracked)
        except Exception as exc:
            log.error(
                "unhandled %s on %s %s: %s",
                type(exc).__name__,
                scope.get("method"),
                scope.get("path"),
                redact(str(exc))[:2000],
            )
            if not started:
                internal = _error(
                    500, "internal", "the server failed to handle this request (it is logged)"
                )
                await internal(scope, receive, send)

    async def _read(self, scope: Scope, receive: Receive) -> tuple[JSONResponse | None, Receive]:
        """The whole body (bounded), checked; a refusal or a ``receive`` that replays it."""
        headers = dict(scope.get("headers") or ())
        declared = headers.get(b"content-length")
        if declared is not None and not declared.isdigit():
            return _error(400, "invalid_request", "Content-Length must be a number"), receive
        if declared is not None and int(declared) > self.max_bytes:
            if int(declared) <= _DRAIN_LIMIT:
                await _drain(receive, _DRAIN_LIMIT)
            return self._too_large(), receive
        if scope.get("method") in ("GET", "HEAD", "OPTIONS", "DELETE") and declared is None:
            return None, receive
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None, _replay([], message, receive)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                if message.get("more_body", False):
                    await _drain(receive, _DRAIN_LIMIT - size)
                return self._too_large(), receive
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if b"json" in headers.get(b"content-type", b""):
            problem = _check_json(body)
            if problem:
                return _error(422, "invalid_request", problem), receive
        return None, _replay([body], None, receive)

    def _too_large(self) -> JSONResponse:
        return _error(
            413,
            "too_large",
            f"the request body is larger than {self.max_bytes} bytes; send less "
            "(the server's limit is `max_body_bytes`)",
        )


async def _drain(receive: Receive, limit: int) -> None:
    """Read and drop the rest of a refused body (up to ``limit`` bytes), so the client, still
    sending, reads the refusal instead of a reset connection."""
    while limit > 0:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        limit -= len(message.get("body", b""))


def _replay(chunks: list[bytes], last: Message | None, receive: Receive) -> Receive:
    """A ``receive`` that first gives the body already read, then passes through."""
    pending: list[Message] = (
        [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
        if last is None
        else [last]
    )

    async def replay() -> Message:
        if pending:
            return pending.pop()
        return await receive()

    return replay
