"""``agentica models serve`` (``agentica.cli.serve.build_app``): a model behind the OpenAI wire
format, spoken to over real HTTP on 127.0.0.1 (a scripted model stands in for the local one;
tests/test_local_model.py serves the real one when its weights are installed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from agentica.cli.serve import build_app
from agentica.errors import ModelHTTPError
from agentica.testing import Reply, ScriptedModel, StreamReply, call, model_error, tool_calls

KEY = {"Authorization": "Bearer secret"}
ASK = {"model": "served", "messages": [{"role": "user", "content": "hi"}]}


@dataclass
class Served:
    model: ScriptedModel
    url: str
    http: aiohttp.ClientSession

    async def post(self, body: Any, headers: dict[str, str] = KEY) -> aiohttp.ClientResponse:
        return await self.http.post(f"{self.url}/v1/chat/completions", json=body, headers=headers)

    async def events(self, body: dict[str, Any]) -> list[Any]:
        """The ``data:`` payloads of a streamed answer (JSON, or the final ``[DONE]``)."""
        async with await self.post({**body, "stream": True}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"] == "text/event-stream"
            text = await resp.text()
        payloads = [line.removeprefix("data: ") for line in text.split("\n\n") if line]
        return [p if p == "[DONE]" else json.loads(p) for p in payloads]


Serve = Callable[..., Awaitable[Served]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[Served]]]:
    """``await serve(*replies)``: a server of a ``ScriptedModel`` with these replies."""
    runners: list[web.AppRunner] = []
    async with aiohttp.ClientSession() as http:

        async def start(*replies: Reply) -> Served:
            model = ScriptedModel(replies)
            runner = web.AppRunner(build_app(model, api_key="secret"), access_log=None)
            runners.append(runner)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            return Served(model, f"http://127.0.0.1:{port}", http)

        try:
            yield start
        finally:
            for runner in runners:
                await runner.cleanup()


async def test_a_wrong_or_missing_key_is_refused_and_the_model_is_listed(serve: Serve) -> None:
    served = await serve()
    for headers in ({}, {"Authorization": "Bearer nope"}):
        async with served.http.get(f"{served.url}/v1/models", headers=headers) as resp:
            assert resp.status == 401
            assert (await resp.json())["error"]["type"] == "authentication_error"
        async with await served.post(ASK, headers) as resp:
            assert resp.status == 401
    async with served.http.get(f"{served.url}/v1/models", headers=KEY) as resp:
        listed = await resp.json()
    assert [m["id"] for m in listed["data"]] == [served.model.id]
    assert served.model.requests == []  # nothing reached the model


async def test_an_invalid_request_is_a_400(serve: Serve) -> None:
    served = await serve()
    bad_options = {"messages": [{"role": "user", "content": "hi"}], "stream": True,
                   "stream_options": "usage"}  # fmt: skip
    for body in ({"messages": []}, {"model": "x"}, ["not", "an", "object"], bad_options):
        async with await served.post(body) as resp:
            assert resp.status == 400, body
            assert (await resp.json())["error"]["message"].startswith("invalid request: ")


async def test_a_whole_answer_carries_the_tool_calls_and_model_errors_keep_their_status(
    serve: Serve,
) -> None:
    served = await serve(
        tool_calls(call("add", a=1, b=2), content="adding"),
        model_error(ModelHTTPError("slow down", status=429)),
        model_error("the provider is down"),
    )
    async with await served.post(ASK) as resp:
        answer = await resp.json()
    (choice,) = answer["choices"]
    assert answer["model"] == "served" and answer["id"].startswith("chatcmpl-")
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "adding"
    (wire_call,) = choice["message"]["tool_calls"]
    assert wire_call["function"]["name"] == "add"
    assert json.loads(wire_call["function"]["arguments"]) == {"a": 1, "b": 2}
    assert served.model.requests[0].messages[0].content == "hi"
    for status, message in ((429, "slow down"), (502, "the provider is down")):
        async with await served.post(ASK) as resp:
            assert resp.status == status
            error = (await resp.json())["error"]
        assert error["type"] == "server_error" and message in error["message"]


async def test_a_streamed_answer_sends_every_delta_then_usage_and_done(serve: Serve) -> None:
    served = await serve(
        StreamReply(chunks=["Hel", "lo"], reasoning=["think"], calls=[call("add", a=1)]),
        "plain",
    )
    events = await served.events({**ASK, "stream_options": {"include_usage": True}})
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0] == {"role": "assistant"}
    assert "".join(d.get("content", "") for d in deltas) == "Hello"
    assert "".join(d.get("reasoning_content", "") for d in deltas) == "think"
    calls = [c for d in deltas for c in d.get("tool_calls", ())]
    assert calls[0]["function"]["name"] == "add" and calls[0]["type"] == "function"
    assert all(c["index"] == 0 for c in calls)
    arguments = "".join(c["function"]["arguments"] for c in calls)
    assert json.loads(arguments) == {"a": 1}
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[:-1] == [None] * (len(finishes) - 1) and finishes[-1] == "tool_calls"
    assert deltas[-1] == {}  # the finish chunk
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] > 0

    plain = await served.events(ASK)  # no include_usage: no usage chunk
    assert all(e == "[DONE]" or e["choices"] for e in plain)
    assert plain[-2]["choices"][0]["finish_reason"] == "stop"


async def test_a_model_error_in_a_stream_is_its_last_event(serve: Serve) -> None:
    served = await serve(model_error("the provider is down"))
    events = await served.events(ASK)
    assert events[-1] == "[DONE]"
    assert events[-2] == {"error": {"message": "the provider is down", "type": "server_error"}}
