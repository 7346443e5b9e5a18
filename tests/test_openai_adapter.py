"""The OpenAI Chat Completions adapter (``OpenAIChat``, ``OpenAILike``) over real HTTP on 127.0.0.1.

Requests go to ``FakeOpenAIServer`` (the real wire format, tool-call pairing checks, fault
injection) or, when a test needs one exact wire shape, to ``WireServer`` below: a few lines of
aiohttp that record each request's headers, body and client port and answer what the test says.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import socket
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict
from pydantic import BaseModel

from agentica import (
    Agent,
    ModelSettings,
    OpenAIChat,
    OpenAILike,
    RetryPolicy,
    RunResponse,
    UsageError,
    tool,
)
from agentica.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.models import ModelRequest, ModelResponse, OutputSchema, ResponseDone
from agentica.models.base import ModelStreamEvent
from agentica.testing import BadBody, FakeOpenAIServer, Hang, HTTPFault, TruncatedStream
from agentica.testing.openai_server import tool_pair_error

# ----------------------------------------------------------------------------- helpers

FAST_RETRY = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05, jitter=0.0)
NO_RETRY = RetryPolicy(max_retries=0)

StartFake = Callable[..., Awaitable[FakeOpenAIServer]]


def ask(text: str = "hi", **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content=text)], **kwargs)


ADD = ToolDefinition(
    name="add",
    description="Add two numbers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
LOOKUP = ToolDefinition(
    name="lookup",
    description="Look a word up.",
    parameters={"type": "object", "properties": {"word": {"type": "string"}}},
    strict=True,
)


@dataclass(slots=True)
class Seen:
    """One request as ``WireServer`` received it."""

    headers: CIMultiDict[str]
    body: dict[str, Any]
    client_port: int


WireReply = dict[str, Any] | bytes | web.StreamResponse
WireHandler = Callable[[web.Request, dict[str, Any]], WireReply | Awaitable[WireReply]]


class WireServer:
    """A minimal Chat Completions endpoint answering exactly what ``handler`` returns.

    ``handler(request, body)`` returns a dict (sent as JSON), bytes (sent as an SSE body) or a
    ``web.StreamResponse`` it wrote itself; it may be async.
    """

    def __init__(self, handler: WireHandler) -> None:
        self.handler = handler
        self.seen: list[Seen] = []
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> WireServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        self.seen.append(Seen(CIMultiDict(request.headers), body, peer[1] if peer else -1))
        reply = self.handler(request, body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, web.StreamResponse):
            return reply
        if isinstance(reply, bytes):
            return web.Response(body=reply, content_type="text/event-stream")
        return web.json_response(reply)


@pytest.fixture
async def wire() -> AsyncIterator[Callable[[WireHandler], Awaitable[WireServer]]]:
    servers: list[WireServer] = []

    async def start(handler: WireHandler) -> WireServer:
        server = await WireServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def make_model() -> AsyncIterator[Callable[..., OpenAILike]]:
    """``make_model(base_url, **kwargs)``: an ``OpenAILike`` with fast retries, closed after."""
    made: list[OpenAILike] = []

    def make(base_url: str, **kwargs: Any) -> OpenAILike:
        options: dict[str, Any] = {"retry": FAST_RETRY, "timeout": 5.0} | kwargs
        model = OpenAILike(id=options.pop("id", "fake-model"), base_url=base_url, **options)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


def completion(
    message: dict[str, Any], finish: str | None = "stop", **extra: Any
) -> dict[str, Any]:
    """A Chat Completions answer with one choice."""
    return {
        "id": "chatcmpl-wire",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    } | extra


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stream",
        "object": "chat.completion.chunk",
        "model": "served-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def sse(*events: dict[str, Any] | str, done: bool = True, newline: bytes = b"\n") -> bytes:
    """An SSE body: each event a ``data:`` line (dicts as JSON), then ``[DONE]``."""
    lines = [
        b"data: " + (json.dumps(e) if isinstance(e, dict) else e).encode() + newline + newline
        for e in events
    ]
    if done:
        lines.append(b"data: [DONE]" + newline + newline)
    return b"".join(lines)


async def collect(
    model: OpenAILike, request: ModelRequest
) -> tuple[list[ModelStreamEvent], ModelResponse]:
    events = [event async for event in model.response_stream(request)]
    last = events[-1]
    assert isinstance(last, ResponseDone)
    assert not any(isinstance(e, ResponseDone) for e in events[:-1])
    return events[:-1], last.response


def answer_ok(request: web.Request, body: dict[str, Any]) -> WireReply:
    """Answer "ok", streamed when the request asks for a stream."""
    if body.get("stream"):
        return sse(chunk({"content": "ok"}, "stop"))
    return completion({"role": "assistant", "content": "ok"})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# ----------------------------------------------------------------------------- request building


CONVERSATION: list[Message] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="What is 2+3?", name="alice"),
    AssistantMessage(
        content=None,
        tool_calls=[ToolCall(id="call_1", name="add", arguments='{"a":2,"b":3}')],
        reasoning="I should add.",
    ),
    ToolMessage(tool_call_id="call_1", name="add", content="5"),
    AssistantMessage(content="It is 5."),
    UserMessage(
        content=[
            TextPart(text="And what is this?"),
            ImagePart(url="data:image/png;base64,iVBORw0KGgo=", detail="low"),
            ImagePart(url="https://example.org/cat.png"),
        ]
    ),
]

CONVERSATION_WIRE = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+3?", "name": "alice"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    {"role": "assistant", "content": "It is 5."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And what is this?"},
            {
                "type": "image_url",
                "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
            },
            {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}},
        ],
    },
]


async def test_messages_of_every_role_are_sent_as_built(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: "a cat")
    model = make_model(server.base_url)
    request = ModelRequest(messages=CONVERSATION)

    body = model.build_body(request, stream=False)
    assert body == {"model": "fake-model", "messages": CONVERSATION_WIRE}

    response = await model.response(request)
    assert response.message.content == "a cat"
    assert server.requests == [body]  # what went over the wire is exactly build_body()


async def test_reasoning_is_sent_back_only_when_asked(
    make_model: Callable[..., OpenAILike],
) -> None:
    request = ModelRequest(messages=CONVERSATION)
    plain = make_model("http://127.0.0.1:9/v1").build_body(request, stream=False)
    thinking = make_model("http://127.0.0.1:9/v1", send_reasoning=True)
    sent = thinking.build_body(request, stream=False)
    assert "reasoning_content" not in plain["messages"][2]
    assert sent["messages"][2]["reasoning_content"] == "I should add."
    assert "reasoning_content" not in sent["messages"][4]  # no reasoning, nothing sent


async def test_tools_are_sent_as_functions(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: "ok")
    model = make_model(server.base_url)
    await model.response(ask(tools=[ADD, LOOKUP]))

    (sent,) = server.requests
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": ADD.parameters,
            },
        },
        {
            "type": "function",
            "function": {
                "name": "lookup",
                "description": "Look a word up.",
                "parameters": LOOKUP.parameters,
                "strict": True,
            },
        },
    ]
    assert "tool_choice" not in sent and "parallel_tool_calls" not in sent


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("lookup", {"type": "function", "function": {"name": "lookup"}}),
    ],
)
async def test_tool_choice(
    choice: str,
    wire: Any,
    fake_openai: StartFake,
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await fake_openai(lambda body: "ok")
    model = make_model(server.base_url)
    settings = ModelSettings(tool_choice=choice, parallel_tool_calls=False)
    await model.response(ask(tools=[ADD, LOOKUP], settings=settings))
    assert server.requests[0]["tool_choice"] == wire
    assert server.requests[0]["parallel_tool_calls"] is False


async def test_tool_settings_are_left_out_without_tools(
    make_model: Callable[..., OpenAILike],
) -> None:
    model = make_model("http://127.0.0.1:9/v1")
    settings = ModelSettings(tool_choice="required", parallel_tool_calls=True)
    body = model.build_body(ask(settings=settings), stream=False)
    assert "tools" not in body and "tool_choice" not in body
    assert "parallel_tool_calls" not in body


async def test_response_format_from_output_schema(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    server = await fake_openai(lambda body: '{"city": "Oslo"}')
    model = make_model(server.base_url)
    response = await model.response(ask(output_schema=OutputSchema(name="Place", schema=schema)))
    loose = model.build_body(
        ask(output_schema=OutputSchema(name="Loose", schema=schema, strict=False)), stream=False
    )

    assert response.message.content == '{"city": "Oslo"}'
    assert server.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Place", "schema": schema, "strict": True},
    }
    assert loose["response_format"]["json_schema"]["strict"] is False


async def test_sampling_settings_merge_model_and_request(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: "ok")
    defaults = ModelSettings(temperature=0.1, top_p=0.5, seed=7, max_tokens=100)
    model = make_model(server.base_url, settings=defaults)
    override = ModelSettings(temperature=0.9, max_tokens=20, stop=("END",))
    await model.response(ask(settings=override))

    sent = server.requests[0]
    assert sent["temperature"] == 0.9  # the request wins
    assert sent["top_p"] == 0.5 and sent["seed"] == 7  # the model's defaults stay
    assert sent["stop"] == ["END"]
    assert sent["max_tokens"] == 20  # OpenAILike: compatible servers read max_tokens
    assert "max_completion_tokens" not in sent


async def test_official_endpoint_uses_max_completion_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    official = OpenAIChat("gpt-4o-mini", api_key="sk-test", settings=ModelSettings(max_tokens=64))
    body = official.build_body(ask(), stream=False)  # built only: nothing is sent to OpenAI
    assert official.base_url == "https://api.openai.com/v1"
    assert body["max_completion_tokens"] == 64 and "max_tokens" not in body

    custom = OpenAIChat("m", api_key="sk-test", max_tokens_field="max_tokens")
    assert (
        custom.build_body(ask(settings=ModelSettings(max_tokens=8)), stream=False)["max_tokens"]
        == 8
    )
    await official.aclose()
    await custom.aclose()


async def test_official_endpoint_without_a_key_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match="OpenAILike"):
        OpenAIChat("gpt-4o-mini")
    with pytest.raises(UsageError, match="base_url"):
        OpenAILike("m", base_url="")


async def test_stream_flags(fake_openai: StartFake, make_model: Callable[..., OpenAILike]) -> None:
    server = await fake_openai(lambda body: "streamed")
    model = make_model(server.base_url)

    assert "stream" not in model.build_body(ask(), stream=False)
    assert "stream_options" not in model.build_body(ask(), stream=False)
    _, response = await collect(model, ask())
    await model.response(ask())

    streamed, plain = server.requests
    assert streamed["stream"] is True
    assert streamed["stream_options"] == {"include_usage": True}
    assert streamed == model.build_body(ask(), stream=True)
    assert "stream" not in plain and "stream_options" not in plain
    assert response.message.content == "streamed"


async def test_extra_body_and_extra_headers_reach_the_server(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(answer_ok)
    model = make_model(
        server.base_url,
        headers={"X-Team": "core"},
        settings=ModelSettings(extra_headers={"X-Trace": "model-default"}),
    )
    settings = ModelSettings(
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}},
        extra_headers={"X-Trace": "abc123"},
    )
    await model.response(ask(settings=settings))
    await collect(model, ask())

    first, second = server.seen
    assert first.body["top_k"] == 20
    assert first.body["chat_template_kwargs"] == {"enable_thinking": False}
    assert first.headers["X-Trace"] == "abc123"  # the request's headers win
    assert first.headers["X-Team"] == "core"
    assert first.headers["Content-Type"] == "application/json"
    assert second.headers["X-Trace"] == "model-default"
    assert "top_k" not in second.body


async def test_authorization_header_only_with_a_key(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server = await wire(answer_ok)
    keyless = make_model(server.base_url)  # OpenAILike reads its key from api_key only
    keyed = make_model(server.base_url, api_key="sk-local")
    chat = OpenAIChat("m", base_url=server.base_url, retry=NO_RETRY)  # reads $OPENAI_API_KEY
    try:
        await keyless.response(ask())
        await keyed.response(ask())
        await chat.response(ask())
    finally:
        await chat.aclose()

    assert "Authorization" not in server.seen[0].headers
    assert server.seen[1].headers["Authorization"] == "Bearer sk-local"
    assert server.seen[2].headers["Authorization"] == "Bearer sk-from-env"


async def test_repr_never_shows_the_key(make_model: Callable[..., OpenAILike]) -> None:
    secret = "sk-very-secret-0123456789"
    like = make_model("http://127.0.0.1:9/v1", api_key=secret)
    chat = OpenAIChat("gpt-4o-mini", api_key=secret, base_url="https://api.openai.com/v1")
    for model in (like, chat):
        assert secret not in repr(model) and secret not in str(model)
        assert model.id in repr(model)
    assert secret not in repr(Agent(model=like))
    await chat.aclose()


# ----------------------------------------------------------------------------- responses


async def test_text_reply(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(
        lambda request, body: completion({"role": "assistant", "content": "Hello there."})
    )
    response = await make_model(server.base_url).response(ask())
    message = response.message
    assert message.content == "Hello there."
    assert message.tool_calls == []
    assert message.finish_reason == "stop"
    assert message.model == "served-model"  # the name the server answered with
    assert response.response_id == "chatcmpl-wire"
    assert response.provider == "openai-compatible"
    assert message.usage == Usage()  # no usage in the answer: zeros, never None


async def test_one_tool_call(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    call = {
        "id": "call_abc",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
    }
    server = await wire(
        lambda request, body: completion(
            {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        )
    )
    message = (await make_model(server.base_url).response(ask(tools=[ADD]))).message
    assert message.content is None
    assert message.tool_calls == [ToolCall(id="call_abc", name="add", arguments='{"a": 2, "b": 3}')]
    assert message.finish_reason == "tool_calls"


async def test_parallel_tool_calls_with_missing_ids_and_object_arguments(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{}"}},
        # no id (some local servers): a fresh one is made up
        {"type": "function", "function": {"name": "lookup", "arguments": '{"word": "x"}'}},
        # arguments as a JSON object instead of a string
        {"id": "", "function": {"name": "add", "arguments": {"a": 1, "b": "é"}}},
        # arguments left out
        {"id": "call_4", "function": {"name": "lookup", "arguments": None}},
    ]
    server = await wire(
        lambda request, body: completion(
            {"role": "assistant", "content": "Working on it.", "tool_calls": calls}, None
        )
    )
    message = (await make_model(server.base_url).response(ask())).message

    assert [c.name for c in message.tool_calls] == ["add", "lookup", "add", "lookup"]
    ids = [c.id for c in message.tool_calls]
    assert ids[0] == "call_1" and ids[3] == "call_4"
    assert ids[1].startswith("call_") and ids[2].startswith("call_")
    assert len(set(ids)) == 4
    assert message.tool_calls[1].arguments == '{"word": "x"}'
    assert json.loads(message.tool_calls[2].arguments) == {"a": 1, "b": "é"}
    assert message.tool_calls[3].arguments == "{}"
    assert message.content == "Working on it."
    assert message.finish_reason == "tool_calls"  # no finish_reason given, calls present


async def test_usage_with_cached_and_reasoning_tokens(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    openai_usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 300,
        "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 256},
    }
    deepseek_usage = {"prompt_tokens": 50, "completion_tokens": 5, "prompt_cache_hit_tokens": 32}
    answers = iter([openai_usage, deepseek_usage])
    server = await wire(
        lambda request, body: completion(
            {"role": "assistant", "content": "ok"}, usage=next(answers)
        )
    )
    model = make_model(server.base_url)
    first = await model.response(ask())
    second = await model.response(ask())
    assert first.usage == Usage(
        input_tokens=1200, output_tokens=300, cache_read_tokens=1024, reasoning_tokens=256
    )
    assert second.usage == Usage(input_tokens=50, output_tokens=5, cache_read_tokens=32)


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_content(
    field: str,
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(
        lambda request, body: completion(
            {"role": "assistant", "content": "42", field: "Six times seven."}
        )
    )
    message = (await make_model(server.base_url).response(ask())).message
    assert message.reasoning == "Six times seven."
    assert message.content == "42"


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("function_call", "tool_calls"),
        ("eos", "stop"),
        ("end_turn", "stop"),
        (None, "stop"),
    ],
)
async def test_finish_reason_is_normalised(
    sent: str | None,
    expected: str,
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(
        lambda request, body: completion({"role": "assistant", "content": "x"}, sent)
    )
    message = (await make_model(server.base_url).response(ask())).message
    assert message.finish_reason == expected


# ----------------------------------------------------------------------------- streaming


async def test_stream_text_deltas_and_usage(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: "the quick brown fox")
    events, response = await collect(make_model(server.base_url), ask())

    assert all(isinstance(e, TextDelta) for e in events)
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "the ",
        "quick ",
        "brown ",
        "fox",
    ]
    assert response.message.content == "the quick brown fox"
    assert response.message.finish_reason == "stop"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.response_id is not None and response.response_id.startswith("chatcmpl-")


async def test_stream_tool_call_deltas_are_assembled(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    reply = AssistantMessage(
        content="Let me check.",
        tool_calls=[
            ToolCall(id="call_x", name="add", arguments='{"a": 10, "b": 20}'),
            ToolCall(id="call_y", name="lookup", arguments='{"word": "streaming"}'),
        ],
    )
    server = await fake_openai(lambda body: reply)
    events, response = await collect(make_model(server.base_url), ask(tools=[ADD, LOOKUP]))

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.index for d in deltas] == [0, 0, 1, 1]  # each call arrives in two pieces
    assert deltas[0].id == "call_x" and deltas[0].name == "add"
    assert deltas[1].id is None and deltas[1].name is None
    assert "".join(d.arguments for d in deltas if d.index == 0) == '{"a": 10, "b": 20}'
    message = response.message
    assert message.tool_calls == reply.tool_calls
    assert message.content == "Let me check."
    assert message.finish_reason == "tool_calls"


async def test_stream_usage_chunk_and_reasoning_deltas(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    usage = {
        "prompt_tokens": 90,
        "completion_tokens": 12,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 7},
    }
    body = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Think "}),
        chunk({"reasoning": "hard."}),  # vLLM's newer field name
        chunk({"content": "Done"}),
        chunk({"content": "."}),
        chunk({}, "stop"),
        {"id": "chatcmpl-stream", "choices": [], "usage": usage},
        newline=b"\r\n",  # CRLF line endings are valid SSE
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())

    assert events == [
        ReasoningDelta("Think "),
        ReasoningDelta("hard."),
        TextDelta("Done"),
        TextDelta("."),
    ]
    message = response.message
    assert message.reasoning == "Think hard."
    assert message.content == "Done."
    assert message.model == "served-model"
    assert response.usage == Usage(
        input_tokens=90, output_tokens=12, cache_read_tokens=64, reasoning_tokens=7
    )


async def test_stream_skips_comments_and_named_events(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    body = (
        b": OPENROUTER PROCESSING\n\n"
        + b"event: message\n"
        + sse(chunk({"content": "a"}), done=False)
        + b": keep-alive\n\n"
        + sse(chunk({"content": "b"}, "stop"))
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("a"), TextDelta("b")]
    assert response.message.content == "ab"


async def test_stream_tool_calls_without_index(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    def call_delta(**fields: Any) -> dict[str, Any]:
        function = {k: v for k, v in fields.items() if k in ("name", "arguments")}
        raw: dict[str, Any] = {"type": "function", "function": function}
        if "id" in fields:
            raw["id"] = fields["id"]
        return chunk({"tool_calls": [raw]})

    body = sse(
        call_delta(id="call_a", name="add", arguments='{"a": 1,'),
        call_delta(arguments=' "b": 2}'),
        call_delta(id="call_b", name="lookup", arguments=""),
        call_delta(arguments='{"word": "hi"}'),
        chunk({}, "tool_calls"),
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())

    assert [e.index for e in events if isinstance(e, ToolCallDelta)] == [0, 0, 1, 1]
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="add", arguments='{"a": 1, "b": 2}'),
        ToolCall(id="call_b", name="lookup", arguments='{"word": "hi"}'),
    ]


async def test_stream_tool_calls_without_index_repeating_the_id(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    """A server that leaves out ``index`` but repeats the call's id on every piece."""

    def piece(call_id: str, arguments: str, name: str | None = None) -> dict[str, Any]:
        function = {"arguments": arguments} | ({"name": name} if name else {})
        return chunk({"tool_calls": [{"id": call_id, "type": "function", "function": function}]})

    body = sse(
        piece("call_a", '{"a": 1,', name="add"),
        piece("call_a", ' "b": 2}'),
        piece("call_b", '{"word":', name="lookup"),
        piece("call_b", ' "hi"}'),
        chunk({}, "tool_calls"),
    )
    server = await wire(lambda request, sent: body)
    _, response = await collect(make_model(server.base_url), ask())
    assert response.message.tool_calls == [
        ToolCall(id="call_a", name="add", arguments='{"a": 1, "b": 2}'),
        ToolCall(id="call_b", name="lookup", arguments='{"word": "hi"}'),
    ]


async def test_stream_with_finish_reason_but_no_done_marker_is_complete(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(
        lambda request, sent: sse(chunk({"content": "cut"}), chunk({}, "length"), done=False)
    )
    _, response = await collect(make_model(server.base_url), ask())
    assert response.message.content == "cut"
    assert response.message.finish_reason == "length"
    assert len(server.seen) == 1


# ----------------------------------------------------------------------------- faults


def script(*replies: Any) -> Callable[[dict[str, Any]], Any]:
    """A responder answering ``replies`` in order, then repeating the last one."""
    queue = list(replies)

    def responder(body: dict[str, Any]) -> Any:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return responder


@pytest.mark.parametrize("stream", [False, True])
async def test_http_500_is_retried_then_succeeds(
    stream: bool, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(script(HTTPFault(500), HTTPFault(503), "recovered"))
    model = make_model(server.base_url)
    if stream:
        _, response = await collect(model, ask())
    else:
        response = await model.response(ask())
    assert response.message.content == "recovered"
    assert len(server.requests) == 3


async def test_http_500_gives_up_after_max_retries(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: HTTPFault(502))
    model = make_model(server.base_url, retry=RetryPolicy(max_retries=3, initial_delay=0.01))
    with pytest.raises(ModelHTTPError) as caught:
        await model.response(ask())
    assert caught.value.status == 502 and caught.value.retryable
    assert caught.value.model == "fake-model"
    assert caught.value.provider == "openai-compatible"
    assert "injected failure" in str(caught.value)
    assert len(server.requests) == 4


REFUSAL = "I can't help with that."


def refuse(request: web.Request, body: dict[str, Any]) -> WireReply:
    """A refusal as the official API sends it: ``content`` null, the text in ``refusal``."""
    if body.get("stream"):
        return sse(
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": REFUSAL[:9]}),
            chunk({"refusal": REFUSAL[9:]}),
            chunk({}, "stop"),
        )
    return completion({"role": "assistant", "content": None, "refusal": REFUSAL})


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_a_refusal_is_the_answer_and_is_not_retried(
    stream: bool,
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(refuse)
    agent = Agent(model=make_model(server.base_url))
    if stream:
        async with agent.run_stream("how do I pick a lock?") as events:
            deltas = [e.text async for e in events if isinstance(e, TextDelta)]
        response = events.response
        assert "".join(deltas) == REFUSAL
    else:
        response = await agent.run("how do I pick a lock?")
    assert response.content == REFUSAL
    assert response.stop_reason == "completed"
    assert len(server.seen) == 1  # a refusal is deterministic: no retry


@pytest.mark.parametrize(
    ("headers", "wait"),
    [({"Retry-After": "0.25"}, 0.25), ({"retry-after-ms": "150"}, 0.15)],
)
async def test_429_honours_retry_after(
    headers: dict[str, str],
    wait: float,
    fake_openai: StartFake,
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await fake_openai(script(HTTPFault(429, headers=headers), "after the wait"))
    model = make_model(server.base_url, retry=RetryPolicy(initial_delay=0.01, jitter=0.0))
    started = time.monotonic()
    response = await model.response(ask())
    elapsed = time.monotonic() - started
    assert response.message.content == "after the wait"
    assert len(server.requests) == 2
    assert wait - 0.02 <= elapsed < wait + 1.0


async def test_retry_after_is_capped_by_max_delay(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(script(HTTPFault(429, headers={"Retry-After": "3600"}), "ok"))
    model = make_model(server.base_url, retry=RetryPolicy(initial_delay=0.01, max_delay=0.05))
    started = time.monotonic()
    assert (await model.response(ask())).message.content == "ok"
    assert time.monotonic() - started < 1.0
    assert len(server.requests) == 2


async def test_429_error_carries_retry_after(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: HTTPFault(429, headers={"Retry-After": "7"}))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(server.base_url, retry=NO_RETRY).response(ask())
    assert caught.value.status == 429 and caught.value.retryable
    assert caught.value.retry_after == 7.0


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [401, 403])
async def test_auth_errors_are_not_retried(
    status: int, stream: bool, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    fault = HTTPFault(status, {"error": {"message": "Incorrect API key provided"}})
    server = await fake_openai(lambda body: fault)
    model = make_model(server.base_url)
    with pytest.raises(ModelAuthError) as caught:
        if stream:
            await collect(model, ask())
        else:
            await model.response(ask())
    assert caught.value.status == status
    assert not caught.value.retryable
    assert "Incorrect API key provided" in str(caught.value)
    assert "api_key" in str(caught.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "This model's maximum context length is 8192 tokens. However, you requested 9000."),
        (400, "the request exceeds the available context size, try increasing it"),
        (413, "Prompt is too long"),
    ],
)
async def test_context_overflow(
    status: int,
    message: str,
    fake_openai: StartFake,
    make_model: Callable[..., OpenAILike],
) -> None:
    fault = HTTPFault(status, {"error": {"message": message, "code": "context_length_exceeded"}})
    server = await fake_openai(lambda body: fault)
    with pytest.raises(ContextOverflowError) as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.status == status
    assert not caught.value.retryable
    assert message in caught.value.body
    assert len(server.requests) == 1


async def test_404_is_not_retried(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    fault = HTTPFault(404, {"error": {"message": "The model `nope` does not exist"}})
    server = await fake_openai(lambda body: fault)
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(server.base_url, id="nope").response(ask())
    error = caught.value
    assert type(error) is ModelHTTPError
    assert error.status == 404 and not error.retryable
    assert "does not exist" in str(error) and "base URL" in str(error)
    assert len(server.requests) == 1


async def test_llama_cpp_parser_failure_is_not_retried(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    text = (
        "Failed to parse input at pos 112: <tool_call>{...} does not match the expected "
        "peg-native format"
    )
    server = await fake_openai(lambda body: HTTPFault(500, {"error": {"message": text}}))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.status == 500
    assert not caught.value.retryable
    assert len(server.requests) == 1


async def test_plain_text_error_body(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: HTTPFault(400, "Bad Request: no such field 'x'"))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.status == 400 and not caught.value.retryable
    assert "no such field 'x'" in str(caught.value)
    assert len(server.requests) == 1


async def test_body_that_is_not_json_is_retried_then_raised(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: BadBody(b"<html>502 Bad Gateway</html>"))
    with pytest.raises(ModelResponseError, match="not JSON") as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.retryable
    assert len(server.requests) == FAST_RETRY.max_retries + 1


async def test_body_that_is_not_json_then_success(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(script(BadBody(), "fine"))
    assert (await make_model(server.base_url).response(ask())).message.content == "fine"
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"choices": []},
        {"choices": None},
        {"choices": [None]},
        {"choices": [{"finish_reason": "stop"}]},
        {"choices": [{"message": None}]},
        {"choices": [{"message": "hello"}]},
        [],
        "hello",
        None,
    ],
)
async def test_answer_without_choices(
    data: Any,
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(lambda request, body: web.json_response(data))
    with pytest.raises(ModelResponseError, match=r"choices\[0\]\.message") as caught:
        await make_model(server.base_url, retry=NO_RETRY).response(ask())
    assert caught.value.retryable
    assert len(server.seen) == 1


async def test_truncated_stream_before_any_delta_is_retried(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    # chunk 0 is the empty role delta: the cut comes before anything reached the caller
    server = await fake_openai(script(TruncatedStream("never seen", chunks=1), "whole reply"))
    events, response = await collect(make_model(server.base_url), ask())
    assert response.message.content == "whole reply"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["whole ", "reply"]
    assert len(server.requests) == 2


async def test_truncated_stream_after_deltas_is_an_error(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: TruncatedStream("one two three four", chunks=3))
    seen: list[str] = []
    with pytest.raises(ModelResponseError) as caught:
        async for event in make_model(server.base_url).response_stream(ask()):
            assert isinstance(event, TextDelta)
            seen.append(event.text)
    assert seen == ["one ", "two "]
    assert caught.value.retryable  # retryable in principle, but the caller already saw text
    assert len(server.requests) == 1


async def test_truncated_stream_every_time_gives_up(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: TruncatedStream("x", chunks=1))
    with pytest.raises(ModelResponseError):
        await collect(make_model(server.base_url), ask())
    assert len(server.requests) == FAST_RETRY.max_retries + 1


async def test_stream_closed_cleanly_without_an_end_is_an_error(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(lambda request, body: sse(chunk({"role": "assistant"}), done=False))
    with pytest.raises(ModelResponseError, match="ended before the reply was complete"):
        await collect(make_model(server.base_url), ask())
    assert len(server.seen) == FAST_RETRY.max_retries + 1


@pytest.mark.parametrize("where", ["request settings", "model settings", "model"])
async def test_hang_times_out(
    where: str, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: Hang())
    request = ask()
    if where == "request settings":
        model = make_model(server.base_url, retry=NO_RETRY, timeout=60.0)
        request = ask(settings=ModelSettings(timeout=0.3))
    elif where == "model settings":
        model = make_model(
            server.base_url, retry=NO_RETRY, settings=ModelSettings(timeout=0.3), timeout=60.0
        )
    else:
        model = make_model(server.base_url, retry=NO_RETRY, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError) as caught:
        await model.response(request)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 1.5
    assert caught.value.retryable and "timeout" in str(caught.value)


async def test_hang_then_answer_is_retried(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(script(Hang(), "awake"))
    model = make_model(server.base_url, timeout=0.2)
    assert (await model.response(ask())).message.content == "awake"
    assert len(server.requests) == 2


async def test_stream_hang_before_the_first_chunk_times_out(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: Hang())
    model = make_model(server.base_url, retry=NO_RETRY, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError):
        await collect(model, ask())
    assert time.monotonic() - started < 1.5


async def test_stream_stalling_mid_reply_times_out(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    async def stall(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(chunk({"content": "first"}), done=False))
        await asyncio.sleep(30)  # cancelled when the client gives up
        return response

    server = await wire(stall)
    model = make_model(server.base_url, timeout=0.3)  # 0.3 s at most between two chunks
    seen: list[ModelStreamEvent] = []
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError):
        async for event in model.response_stream(ask()):
            seen.append(event)
    assert time.monotonic() - started < 1.5
    assert seen == [TextDelta("first")]
    assert len(server.seen) == 1  # text reached the caller: not retried


@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused(stream: bool, make_model: Callable[..., OpenAILike]) -> None:
    port = free_port()  # bound, then closed: nothing listens there
    model = make_model(f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    with pytest.raises(ModelConnectionError) as caught:
        if stream:
            await collect(model, ask())
        else:
            await model.response(ask())
    assert caught.value.retryable
    assert f"127.0.0.1:{port}" in str(caught.value)
    assert time.monotonic() - started < 2.0


async def test_error_object_mid_stream(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    error = {"error": {"message": "upstream overloaded", "code": 529}}
    server = await wire(lambda request, body: sse(chunk({"content": "par"}), error))
    seen: list[ModelStreamEvent] = []
    with pytest.raises(ModelResponseError, match="upstream overloaded"):
        async for event in make_model(server.base_url).response_stream(ask()):
            seen.append(event)
    assert seen == [TextDelta("par")]
    assert len(server.seen) == 1


async def test_error_object_as_the_first_chunk_is_retried(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    answers = iter([sse({"error": "model is loading"}), sse(chunk({"content": "ok"}, "stop"))])
    server = await wire(lambda request, body: next(answers))
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("ok")]
    assert response.message.content == "ok"
    assert len(server.seen) == 2


async def test_stream_chunk_that_is_not_json(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(lambda request, body: sse(chunk({"content": "a"}), "{not json"))
    with pytest.raises(ModelResponseError, match="not JSON"):
        await collect(make_model(server.base_url), ask())
    assert len(server.seen) == 1


async def test_every_model_error_is_a_model_error(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    """What a caller catches: one base class for every provider failure."""
    faults = [HTTPFault(401), HTTPFault(404), HTTPFault(500), BadBody(), Hang()]
    server = await fake_openai(script(*faults))
    model = make_model(server.base_url, retry=NO_RETRY, timeout=0.2)
    kinds = []
    for _ in faults:
        with pytest.raises(ModelError) as caught:
            await model.response(ask())
        kinds.append(type(caught.value).__name__)
    assert kinds == [
        "ModelAuthError",
        "ModelHTTPError",
        "ModelHTTPError",
        "ModelResponseError",
        "ModelTimeoutError",
    ]


@pytest.mark.parametrize(
    ("status", "retried"),
    [
        (408, True),
        (409, True),
        (425, True),
        (429, True),
        (500, True),
        (503, True),
        (400, False),
        (404, False),
        (422, False),
    ],
)
async def test_which_statuses_are_retried(
    status: int, retried: bool, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda body: HTTPFault(status))
    model = make_model(server.base_url, retry=RetryPolicy(max_retries=1, initial_delay=0.001))
    with pytest.raises(ModelHTTPError) as caught:
        await model.response(ask())
    assert caught.value.status == status
    assert caught.value.retryable is retried
    assert len(server.requests) == (2 if retried else 1)


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"error": {"message": "nested message", "type": "x"}}, "nested message"),
        ({"object": "error", "message": "vLLM top-level message", "code": 400}, "vLLM top-level"),
        ({"detail": "FastAPI detail"}, "FastAPI detail"),
        ({"error": "a bare error string"}, "a bare error string"),
        ("plain text, not JSON", "plain text, not JSON"),
    ],
)
async def test_error_text_is_found_in_any_body_shape(
    body: Any, detail: str, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(lambda sent: HTTPFault(400, body))
    with pytest.raises(ModelHTTPError, match=detail) as caught:
        await make_model(server.base_url).response(ask())
    assert "HTTP 400" in str(caught.value) and "'fake-model'" in str(caught.value)


@pytest.mark.parametrize("value", ["soon", "", "Wed, 21 Oct 2015 07:28:00 GMT"])
async def test_odd_retry_after_values(
    value: str, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    """A malformed or past ``Retry-After`` still gives a typed error and a prompt retry."""
    server = await fake_openai(script(HTTPFault(503, headers={"Retry-After": value}), "ok"))
    model = make_model(server.base_url)
    started = time.monotonic()
    assert (await model.response(ask())).message.content == "ok"
    assert time.monotonic() - started < 1.0
    assert len(server.requests) == 2

    server.responder = lambda body: HTTPFault(503, headers={"Retry-After": value})
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(server.base_url, retry=NO_RETRY).response(ask())
    assert caught.value.retry_after in (None, 0.0)


async def test_body_cut_short_is_retried(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    async def cut(request: web.Request, body: dict[str, Any]) -> WireReply:
        if len(server.seen) > 1:
            return completion({"role": "assistant", "content": "whole"})
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b'{"choices": [')
        assert request.transport is not None
        request.transport.close()
        return response

    server = await wire(cut)
    model = make_model(server.base_url)
    assert (await model.response(ask())).message.content == "whole"
    assert len(server.seen) == 2

    server.seen.clear()
    with pytest.raises(ModelResponseError, match="before it was complete"):
        await make_model(server.base_url, retry=NO_RETRY).response(ask())


async def test_dropped_connection_is_retried(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    async def drop_first(request: web.Request, body: dict[str, Any]) -> WireReply:
        if len(server.seen) == 1:
            assert request.transport is not None
            request.transport.close()  # no answer at all
            await asyncio.sleep(1)  # cancelled: the client is gone
        return completion({"role": "assistant", "content": "second try"})

    server = await wire(drop_first)
    assert (await make_model(server.base_url).response(ask())).message.content == "second try"
    assert len(server.seen) == 2


async def test_dropped_connection_without_retries_is_a_connection_error(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    async def drop(request: web.Request, body: dict[str, Any]) -> WireReply:
        assert request.transport is not None
        request.transport.close()
        await asyncio.sleep(1)
        return completion({"role": "assistant", "content": "never sent"})

    server = await wire(drop)
    with pytest.raises(ModelConnectionError) as caught:
        await make_model(server.base_url, retry=NO_RETRY).response(ask())
    assert caught.value.retryable


async def test_stopping_a_stream_early_releases_it(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    handler_cancelled = asyncio.Event()

    async def endless(request: web.Request, body: dict[str, Any]) -> WireReply:
        if len(server.seen) > 1:
            return answer_ok(request, body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(sse(chunk({"content": "first"}), done=False))
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            handler_cancelled.set()
            raise
        return response

    server = await wire(endless)
    model = make_model(server.base_url)
    stream = model.response_stream(ask())
    assert isinstance(stream, AsyncGenerator)
    started = time.monotonic()
    assert await anext(stream) == TextDelta("first")
    await stream.aclose()  # the caller stops listening: must not wait for the server
    await asyncio.wait_for(handler_cancelled.wait(), 2)  # the connection was closed
    assert time.monotonic() - started < 1.0
    _, response = await collect(model, ask())  # and the model still works
    assert response.message.content == "ok"


async def test_cancelling_a_request_propagates_cancellation(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    arrived = asyncio.Event()

    def responder(body: dict[str, Any]) -> Hang | str:
        if arrived.is_set():
            return "after cancel"
        arrived.set()
        return Hang()

    server = await fake_openai(responder)
    model = make_model(server.base_url)
    task = asyncio.create_task(model.response(ask()))
    await asyncio.wait_for(arrived.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task  # not turned into a ModelError, not retried
    assert len(server.requests) == 1
    assert (await model.response(ask())).message.content == "after cancel"


async def test_model_is_an_async_context_manager(
    fake_openai: StartFake,
) -> None:
    server = await fake_openai(lambda body: "ok")
    async with OpenAILike(id="fake-model", base_url=server.base_url) as model:
        assert (await model.response(ask())).message.content == "ok"
        session = model._pool.session()
    assert session.closed


async def test_unknown_message_type_is_a_usage_error(
    make_model: Callable[..., OpenAILike],
) -> None:
    model = make_model("http://127.0.0.1:9/v1")
    request = ModelRequest(messages=[object()])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="cannot send object"):
        model.build_body(request, stream=False)


async def test_stream_last_event_without_blank_line_and_multiline_data(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    first = json.dumps(chunk({"content": "multi"}), indent=1).splitlines()
    body = (
        b"".join(b"data: " + line.encode() + b"\n" for line in first)  # one event, many lines
        + b"\n"
        + b"data: "
        + json.dumps(chunk({"content": "line"}, "stop")).encode()  # no blank line at the end
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("multi"), TextDelta("line")]
    assert response.message.content == "multiline"
    assert response.message.finish_reason == "stop"


# ----------------------------------------------------------------------------- agent end to end


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    await asyncio.sleep(0)
    return a + b


def adder(body: dict[str, Any]) -> AssistantMessage | str:
    """Call ``add`` on a user message; answer with the sum once the tool result is back."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return f"The sum is {last['content']}."
    return AssistantMessage(tool_calls=[ToolCall(id="", name="add", arguments='{"a": 2, "b": 3}')])


async def run_agent(agent: Agent, prompt: str, stream: bool) -> RunResponse:
    if not stream:
        return await agent.run(prompt)
    async with agent.run_stream(prompt) as events:
        async for _ in events:
            pass
    return events.response


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_agent_completes_a_tool_loop(
    stream: bool, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(adder)
    agent = Agent(model=make_model(server.base_url), tools=[add], instructions="Use tools.")
    response = await run_agent(agent, "What is 2 + 3?", stream)

    assert response.content == "The sum is 5."
    assert len(server.requests) == 2  # a broken tool-call pairing would have been a 400
    first, second = server.requests
    assert all(bool(r.get("stream")) is stream for r in server.requests)
    assert first["messages"] == [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "What is 2 + 3?"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    assert first["tools"][0]["function"]["description"] == "Add two numbers."
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    (sent_call,) = second["messages"][2]["tool_calls"]
    assert sent_call["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": sent_call["id"],
        "content": "5",
    }
    assert tool_pair_error(second["messages"]) is None
    assert [(c.name, c.status, c.result) for c in response.tool_calls] == [("add", "success", 5)]
    assert response.usage.requests == 2 and response.usage.tool_calls == 1
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0

    again = await run_agent(agent, "And once more?", stream)  # replays the first run's pairs
    assert again.content == "The sum is 5."
    assert len(server.requests) == 4
    replayed = server.requests[2]["messages"]
    assert [m["role"] for m in replayed] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert tool_pair_error(server.requests[3]["messages"]) is None


async def test_agent_stream_events_over_http(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(adder)
    agent = Agent(model=make_model(server.base_url), tools=[add])
    async with agent.run_stream("What is 2 + 3?") as stream:
        events = [event async for event in stream]

    kinds = [event.kind for event in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    assert kinds.count("model_request_started") == 2
    assert kinds.count("tool_call_delta") == 2  # the fake server sends each call in two pieces
    assert kinds.index("tool_call_delta") < kinds.index("tool_call_started")
    assert kinds.index("tool_call_completed") < kinds.index("text_delta")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == stream.response.content == "The sum is 5."
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_unknown_tool_goes_back_to_the_model(
    stream: bool, fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    def responder(body: dict[str, Any]) -> AssistantMessage | str:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"Sorry: {last['content']}"
        return AssistantMessage(tool_calls=[ToolCall(id="", name="teleport", arguments="{}")])

    server = await fake_openai(responder)
    agent = Agent(model=make_model(server.base_url), tools=[add])
    response = await run_agent(agent, "Beam me up", stream)

    assert len(server.requests) == 2
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert "Unknown tool 'teleport'" in tool_message["content"]
    assert "add" in tool_message["content"]  # the model is told what it may call
    assert response.content == "Sorry: " + tool_message["content"]
    assert [c.status for c in response.tool_calls] == ["error"]


async def test_agents_sharing_one_model_never_mix_histories(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    prompts = [f"prompt number {i}" for i in range(6)]
    in_flight = 0
    most_in_flight = 0

    @tool
    async def shout(text: str) -> str:
        """Shout the text."""
        await asyncio.sleep(0.01)
        return text.upper()

    async def responder(body: dict[str, Any]) -> AssistantMessage | str:
        nonlocal in_flight, most_in_flight
        in_flight += 1
        most_in_flight = max(most_in_flight, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        messages = body["messages"]
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        if messages[-1]["role"] == "tool":
            return f"{prompt} -> {messages[-1]['content']}"
        arguments = json.dumps({"text": prompt})
        return AssistantMessage(tool_calls=[ToolCall(id="", name="shout", arguments=arguments)])

    server = await fake_openai(responder)
    model = make_model(server.base_url)  # one model object for every agent
    agents = [Agent(model=model, tools=[shout], instructions=f"You serve {p}.") for p in prompts]
    runs = [
        run_agent(a, p, stream=i % 2 == 1)
        for i, (a, p) in enumerate(zip(agents, prompts, strict=True))
    ]
    responses = await asyncio.gather(*runs)

    assert most_in_flight >= 2  # the runs really overlapped
    assert [r.content for r in responses] == [f"{p} -> {p.upper()}" for p in prompts]
    assert len(server.requests) == 2 * len(prompts)
    for sent in server.requests:
        text = json.dumps(sent["messages"])
        owners = [p for p in prompts if p in text]
        assert len(owners) == 1, f"a request mixes conversations: {owners}"
        assert sent["messages"][0] == {"role": "system", "content": f"You serve {owners[0]}."}
        assert tool_pair_error(sent["messages"]) is None
    for agent, prompt in zip(agents, prompts, strict=True):
        remembered = json.dumps([str(m) for m in agent.memory.messages])
        assert prompt in remembered
        assert not any(p in remembered for p in prompts if p != prompt)


async def test_agent_structured_output_over_http(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    class Weather(BaseModel):
        city: str
        celsius: float

    server = await fake_openai(lambda body: '{"city": "Oslo", "celsius": -3.5}')
    agent = Agent(model=make_model(server.base_url), output_type=Weather)
    response = await agent.run("Weather in Oslo?")

    assert response.output == Weather(city="Oslo", celsius=-3.5)
    response_format = server.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Weather"
    assert set(response_format["json_schema"]["schema"]["properties"]) == {"city", "celsius"}


async def test_agent_run_surfaces_typed_errors(
    fake_openai: StartFake, make_model: Callable[..., OpenAILike]
) -> None:
    server = await fake_openai(script(HTTPFault(500), "fine", HTTPFault(401)))
    agent = Agent(model=make_model(server.base_url))
    assert (await agent.run("first")).content == "fine"  # the 500 was retried
    with pytest.raises(ModelAuthError):
        await agent.run("second")
    assert [r.status for r in agent.memory.runs] == ["completed", "failed"]
    assert len(server.requests) == 3


async def test_pooled_session_is_reused_and_closed(
    wire: Callable[[WireHandler], Awaitable[WireServer]],
    make_model: Callable[..., OpenAILike],
) -> None:
    server = await wire(answer_ok)
    model = make_model(server.base_url)
    session = model._pool.session()
    await model.response(ask())
    await collect(model, ask())
    await Agent(model=model).run("via an agent")
    await model.response(ask())

    assert model._pool.session() is session  # (a closed session would have been replaced)
    assert len(server.seen) == 4
    assert len({s.client_port for s in server.seen}) == 1  # one kept-alive connection

    await model.aclose()
    assert session.closed
    assert (await model.response(ask())).message.content == "ok"  # reconnects when next used
    fresh = model._pool.session()
    assert fresh is not session
    await model.aclose()
    assert fresh.closed


@pytest.fixture
def threaded_fake_openai() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """A ``FakeOpenAIServer`` on its own loop in a background thread, for sync tests."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-openai", daemon=True)
    thread.start()
    servers: list[FakeOpenAIServer] = []

    def start(responder: Any, **kwargs: Any) -> FakeOpenAIServer:
        server = FakeOpenAIServer(responder, **kwargs)
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=5)
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()


def test_run_sync_twice_from_plain_code(
    threaded_fake_openai: Callable[..., FakeOpenAIServer],
) -> None:
    server = threaded_fake_openai(adder)
    model = OpenAILike(id="fake-model", base_url=server.base_url, retry=FAST_RETRY, timeout=5.0)
    agent = Agent(model=model, tools=[add])

    first = agent.run_sync("What is 2 + 3?")
    second = agent.run_sync("Once more: what is 2 + 3?")  # a new event loop, a new session

    assert first.content == second.content == "The sum is 5."
    assert len(server.requests) == 4
    assert "What is 2 + 3?" in json.dumps(server.requests[2]["messages"])  # remembered
    assert [r.status for r in agent.memory.runs] == ["completed", "completed"]
    gc.collect()  # an unclosed session would warn (an error in this suite) when collected
