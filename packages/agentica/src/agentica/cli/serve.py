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
from agentica.messages import ReasoningDelta, TextDelta, ToolCallDelta
from agentica.models.base import Model, ResponseDone
from agentica.models.openai_wire import chunk_body, completion_body, request_from_wire

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

    ids = itertools.count(1)

    def authorised(request: web.Request) -> bool:
        if not api_key:
            return True
        sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(sent.encode(), api_key.encode())

    async def models(request: web.Request) -> web.Response:
        if not authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": model.id, "object": "model", "created": 0, "owned_by": model.provider}
                ],
            }
        )

    async def chat(request: web.Request) -> web.StreamResponse:
        if not authorised(request):
            return _error(401, "missing or wrong API key", "authentication_error")
        try:
            body = await request.json()
            model_request = request_from_wire(body)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return _error(400, f"invalid request: {exc}")
        rid = f"chatcmpl-{next(ids)}"
        name = str(body.get("model") or model.id)
        if not body.get("stream"):
            try:
                response = await model.response(model_request)
            except ModelError as exc:
                status = exc.status if isinstance(exc, ModelHTTPError) else 502
                return _error(status, str(exc), "server_error")
            return web.json_response(completion_body(response.message, model=name, response_id=rid))
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(chunk_body(response_id=rid, model=name, delta={"role": "assistant"}))
        try:
            async for event in model.response_stream(model_request):
                if isinstance(event, TextDelta):
                    delta: dict[str, Any] = {"content": event.text}
                elif isinstance(event, ReasoningDelta):
                    delta = {"reasoning_content": event.text}
                elif isinstance(event, ToolCallDelta):
                    call: dict[str, Any] = {"index": event.index, "function": {}}
                    if event.id:
                        call |= {"id": event.id, "type": "function"}
                    if event.name:
                        call["function"]["name"] = event.name
                    call["function"]["arguments"] = event.arguments
                    delta = {"tool_calls": [call]}
                elif isinstance(event, ResponseDone):
                    message = event.response.message
                    await stream.write(
                        chunk_body(
                            response_id=rid,
                            model=name,
                            delta={},
                            finish_reason=message.finish_reason or "stop",
                        )
                    )
                    if (body.get("stream_options") or {}).get("include_usage"):
                        await stream.write(
                            chunk_body(response_id=rid, model=name, usage=event.response.usage)
                        )
                    continue
                await stream.write(chunk_body(response_id=rid, model=name, delta=delta))
        except AgenticaError as exc:
            error = {"error": {"message": str(exc), "type": "server_error"}}
            await stream.write(b"data: " + json.dumps(error).encode() + b"\n\n")
        await stream.write(b"data: [DONE]\n\n")
        await stream.write_eof()
        return stream

    app = web.Application(client_max_size=32 * 1024 * 1024)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    return app
