"""``agentica models serve``: any agentica model behind an OpenAI-compatible HTTP endpoint.

Other tools (editors, scripts, other frameworks) can then use the embedded model through
``/v1/chat/completions`` (JSON and streaming, with tool calls parsed by agentica's lenient parser
rather than llama.cpp's strict one) and list it at ``/v1/models``. It listens on 127.0.0.1 by
default; ``--api-key`` makes it require ``Authorization: Bearer KEY``.
"""

from __future__ import annotations

import hmac
import itertools
import json
from typing import TYPE_CHECKING, Any

from agentica.errors import AgenticaError, ModelError, ModelHTTPError
from agentica.models.base import Model, ModelRequest, ResponseDone
from agentica.models.openai_wire import (
    chunk_body,
    completion_body,
    delta_to_wire,
    request_from_wire,
)

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["build_app"]


def _error(status: int, message: str, kind: str = "invalid_request_error") -> web.Response:
    from aiohttp import web

    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
    )


def build_app(model: Model, *, api_key: str | None = None) -> web.Application:
    """The aiohttp application serving ``model``."""
    from aiohttp import web

    server = _Server(model, api_key)
    app = web.Application(client_max_size=32 * 1024 * 1024)
    app.router.add_get("/v1/models", server.models)
    app.router.add_post("/v1/chat/completions", server.chat)
    return app


class _Server:
    """The handlers of ``build_app``: ``model`` behind the OpenAI wire format."""

    def __init__(self, model: Model, api_key: str | None) -> None:
        self.model = model
        self.api_key = api_key
        self.ids = itertools.count(1)

    def authorised(self, request: web.Request) -> bool:
        if not self.api_key:
            return True
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(sent.encode(), self.api_key.encode())

    async def models(self, request: web.Request) -> web.Response:
        from aiohttp import web

        if not self.authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        model = self.model
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": model.id, "object": "model", "created": 0, "owned_by": model.provider}
                ],
            }
        )

    async def chat(self, request: web.Request) -> web.StreamResponse:
        if not self.authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        try:
            body = await request.json()
            model_request = request_from_wire(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _error(400, f"invalid request: {exc}")
        rid = f"chatcmpl-{next(self.ids)}"
        name = str(body.get("model") or self.model.id)
        if body.get("stream"):
            options = body.get("stream_options") or {}
            if not isinstance(options, dict):
                return _error(400, "invalid request: stream_options must be an object")
            return await self._stream(request, model_request, rid, name, options=options)
        return await self._complete(model_request, rid, name)

    async def _complete(self, model_request: ModelRequest, rid: str, name: str) -> web.Response:
        """The whole reply as one chat completion (or the provider's error)."""
        from aiohttp import web

        try:
            response = await self.model.response(model_request)
        except ModelError as exc:
            status = exc.status if isinstance(exc, ModelHTTPError) else 502
            return _error(status, str(exc), "server_error")
        return web.json_response(completion_body(response.message, model=name, response_id=rid))

    async def _stream(
        self,
        request: web.Request,
        model_request: ModelRequest,
        rid: str,
        name: str,
        *,
        options: dict[str, Any],
    ) -> web.StreamResponse:
        """The reply as server-sent chunks, ending with ``[DONE]`` (an error as a last chunk);
        ``options``: the request's ``stream_options`` (``include_usage``)."""
        from aiohttp import web

        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(chunk_body(response_id=rid, model=name, delta={"role": "assistant"}))
        try:
            async for event in self.model.response_stream(model_request):
                if not isinstance(event, ResponseDone):
                    delta = delta_to_wire(event)
                    await stream.write(chunk_body(response_id=rid, model=name, delta=delta))
                    continue
                finish = event.response.message.finish_reason or "stop"
                await stream.write(
                    chunk_body(response_id=rid, model=name, delta={}, finish_reason=finish)
                )
                if options.get("include_usage"):
                    await stream.write(
                        chunk_body(response_id=rid, model=name, usage=event.response.usage)
                    )
        except AgenticaError as exc:
            error = {"error": {"message": str(exc), "type": "server_error"}}
            await stream.write(b"data: " + json.dumps(error).encode() + b"\n\n")
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream
