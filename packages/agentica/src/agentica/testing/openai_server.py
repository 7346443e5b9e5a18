"""A scripted OpenAI-compatible HTTP server on 127.0.0.1, for tests and benchmarks.

It speaks the real Chat Completions wire format (JSON and server-sent-event streams with
tool-call deltas and usage), checks that every tool result answers a pending ``tool_call_id``
(answering HTTP 400 like the real API otherwise), waits a configurable latency per request, and
can misbehave on demand: HTTP errors, bodies that are not JSON, streams cut short, hangs, and
hand-made bodies sent piece by piece (``RawStream``: any bytes, slowly if asked).

```python
async with FakeOpenAIServer(lambda body: "hello") as server:
    model = OpenAILike(id="fake", base_url=server.base_url)
```

Run it as a process (the benchmarks do): ``python -m agentica.testing
--responder package.module:function --latency 0.1`` prints ``PORT <n>`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import sys
from typing import TYPE_CHECKING, Any

from agentica.messages import AssistantMessage, ToolCall, Usage
from agentica.models.openai_wire import chunk_body, completion_body
from agentica.testing._server import (
    BadBody,
    Hang,
    HTTPFault,
    RawStream,
    Responder,
    ScriptedServer,
    ServerReply,
    TruncatedStream,
)
from agentica.testing._server import send_raw as send_raw  # importable from here, as before

if TYPE_CHECKING:
    from aiohttp import web

__all__ = [
    "BadBody",
    "FakeOpenAIServer",
    "HTTPFault",
    "Hang",
    "RawStream",
    "ServerReply",
    "TruncatedStream",
    "tool_pair_error",
]


def tool_pair_error(messages: list[dict[str, Any]]) -> str | None:
    """The API's complaint about unanswered or unknown tool calls in ``messages``, if any."""
    pending: dict[str, str] = {}
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (
                    f"Invalid parameter: messages[{index}] with role 'tool' must be a response to "
                    f"a preceding message with 'tool_calls' (unknown tool_call_id {call_id!r})."
                )
            del pending[call_id]
            continue
        if pending:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(pending)} "
                f"(before messages[{index}])."
            )
        if role == "assistant":
            for call in message.get("tool_calls") or []:
                if not call.get("id"):
                    return f"messages[{index}].tool_calls has a call without an id"
                pending[call["id"]] = call.get("function", {}).get("name", "")
    if pending:
        return f"Tool calls without results at the end of messages: {', '.join(pending)}."
    return None


def _usage(body: dict[str, Any], message: AssistantMessage) -> Usage:
    prompt = len(json.dumps(body.get("messages", []))) // 4
    completion = (
        len(message.content or "") // 4
        + sum(len(c.arguments) // 4 + 5 for c in message.tool_calls)
        + 1
    )
    return Usage(input_tokens=prompt, output_tokens=completion)


class FakeOpenAIServer(ScriptedServer):
    """A scripted Chat Completions server; ``responder(request_body)`` decides each reply.

    Args:
        responder: returns the reply for a request body: a string (text), an
            ``AssistantMessage`` (text and/or tool calls; ids are filled in if empty), or a fault
            (``HTTPFault``, ``BadBody``, ``TruncatedStream``, ``Hang``, ``RawStream``); may be
            async.
        latency: seconds to wait before answering each request.
        validate_tool_pairs: answer 400 when the messages break tool-call pairing.
    """

    route = "/v1/chat/completions"
    base_path = "/v1"
    not_json = "We could not parse the JSON body of your request."
    hang_kind = "invalid_request_error"

    def __init__(
        self,
        responder: Responder,
        *,
        latency: float = 0.0,
        validate_tool_pairs: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
        record: bool = True,
    ) -> None:
        super().__init__(responder, latency=latency, host=host, port=port, record=record)
        self.validate_tool_pairs = validate_tool_pairs

    def _error(self, status: int, text: str, kind: str = "invalid_request_error") -> web.Response:
        from aiohttp import web

        return web.json_response(
            {"error": {"message": text, "type": kind, "param": None, "code": None}},
            status=status,
        )

    def _refusal(self, request: web.Request, body: dict[str, Any]) -> web.Response | None:
        if self.validate_tool_pairs:
            problem = tool_pair_error(body.get("messages") or [])
            if problem:
                return self._error(400, problem)
        return None

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        message: AssistantMessage,
        truncate_after: int | None,
    ) -> web.StreamResponse:
        from aiohttp import web

        message = AssistantMessage(
            content=message.content,
            reasoning=message.reasoning,
            tool_calls=[
                ToolCall(id=c.id or f"call_{next(self._ids)}", name=c.name, arguments=c.arguments)
                for c in message.tool_calls
            ],
        )
        model = body.get("model", "fake")
        if body.get("stream"):
            chunks = self._chunks(body, message, model)
            return await self._send_events(
                request,
                chunks,
                truncate_after,
                headers={"Content-Type": "text/event-stream"},
                tail=b"data: [DONE]\n\n",
            )
        return web.json_response(
            completion_body(
                message,
                model=model,
                response_id=f"chatcmpl-{next(self._ids)}",
                usage=_usage(body, message),
            )
        )

    def _chunks(self, body: dict[str, Any], message: AssistantMessage, model: str) -> list[bytes]:
        rid = f"chatcmpl-{next(self._ids)}"
        chunks = [
            chunk_body(response_id=rid, model=model, delta={"role": "assistant", "content": ""})
        ]
        if message.reasoning:
            chunks.append(
                chunk_body(
                    response_id=rid, model=model, delta={"reasoning_content": message.reasoning}
                )
            )
        words = (message.content or "").split(" ") if message.content else []
        for n, word in enumerate(words):
            piece = word if n == len(words) - 1 else word + " "
            chunks.append(chunk_body(response_id=rid, model=model, delta={"content": piece}))
        for index, c in enumerate(message.tool_calls):
            half = len(c.arguments) // 2
            first = {"index": index, "id": c.id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments[:half]}}  # fmt: skip
            rest = {"index": index, "function": {"arguments": c.arguments[half:]}}
            chunks.append(chunk_body(response_id=rid, model=model, delta={"tool_calls": [first]}))
            chunks.append(chunk_body(response_id=rid, model=model, delta={"tool_calls": [rest]}))
        finish = "tool_calls" if message.tool_calls else "stop"
        chunks.append(chunk_body(response_id=rid, model=model, delta={}, finish_reason=finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append(chunk_body(response_id=rid, model=model, usage=_usage(body, message)))
        return chunks


def _load(path: str) -> Responder:
    module, _, name = path.partition(":")
    responder = getattr(importlib.import_module(module), name)
    assert callable(responder)
    return responder  # type: ignore[no-any-return]


async def _serve(args: argparse.Namespace) -> None:
    server = FakeOpenAIServer(
        _load(args.responder), latency=args.latency, port=args.port, record=False
    )
    await server.start()
    sys.stdout.write(f"PORT {server.port}\n")
    sys.stdout.flush()
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--responder", required=True, help="module:function deciding replies")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(args))


if __name__ == "__main__":
    main()
