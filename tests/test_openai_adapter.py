"""The OpenAI Chat Completions adapter (``OpenAIChat``, ``OpenAILike``) over real HTTP on 127.0.0.1.

Requests go to ``FakeOpenAIServer`` (the real wire format, tool-call pairing checks, fault
injection) or, when a test needs one exact wire shape, to ``WireServer`` below: a few lines of
aiohttp that record each request's headers, body and client port and answer what the test says.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web
from multidict import CIMultiDict

from agentica import ModelSettings, OpenAIChat, OpenAILike, RetryPolicy, UsageError
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


CONVERSATION = [
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
    assert custom.build_body(ask(settings=ModelSettings(max_tokens=8)), stream=False)[
        "max_tokens"
    ] == 8
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
    from agentica import Agent

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
