"""The Anthropic Messages API adapter (``Claude``) over real HTTP on 127.0.0.1.

Requests go to ``FakeAnthropicServer`` (the real wire format, the API's conversation checks,
simulated prompt caching, fault injection) or, when a test needs one exact wire shape, to
``WireServer`` below: a few lines of aiohttp that record each request and answer what the test
says.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from multidict import CIMultiDict
from pydantic import BaseModel

from agentica import Agent, ModelSettings, RetryPolicy, RunResponse, UsageError, tool
from agentica.errors import (
    ContextOverflowError,
    ModelAuthError,
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
from agentica.models.anthropic import Claude
from agentica.models.base import ModelStreamEvent
from agentica.testing.anthropic_server import FakeAnthropicServer, request_error
from agentica.testing.openai_server import BadBody, Hang, HTTPFault, TruncatedStream

# ----------------------------------------------------------------------------- helpers

FAST_RETRY = RetryPolicy(max_retries=2, initial_delay=0.01, max_delay=0.05, jitter=0.0)
NO_RETRY = RetryPolicy(max_retries=0)
KEY = "sk-ant-test-0123456789"
CACHE = {"type": "ephemeral"}

StartFake = Callable[..., Awaitable[FakeAnthropicServer]]
MakeModel = Callable[..., Claude]


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
)


@pytest.fixture
async def make_model() -> AsyncIterator[MakeModel]:
    """``make_model(base_url, **kwargs)``: a ``Claude`` with fast retries, closed after."""
    made: list[Claude] = []

    def make(base_url: str, **kwargs: Any) -> Claude:
        options: dict[str, Any] = {"retry": FAST_RETRY, "timeout": 5.0, "api_key": KEY} | kwargs
        model = Claude(options.pop("id", "claude-sonnet-4-5"), base_url=base_url, **options)
        made.append(model)
        return model

    yield make
    for model in made:
        await model.aclose()


@dataclass(slots=True)
class Seen:
    headers: CIMultiDict[str]
    body: dict[str, Any]


WireReply = dict[str, Any] | bytes | web.StreamResponse
WireHandler = Callable[[web.Request, dict[str, Any]], WireReply | Awaitable[WireReply]]


class WireServer:
    """A minimal ``/v1/messages`` endpoint answering exactly what ``handler`` returns.

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
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> WireServer:
        app = web.Application()
        app.router.add_post("/v1/messages", self._handle)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen.append(Seen(CIMultiDict(request.headers), body))
        reply = self.handler(request, body)
        if inspect.isawaitable(reply):
            reply = await reply
        if isinstance(reply, web.StreamResponse):
            return reply
        if isinstance(reply, bytes):
            return web.Response(body=reply, content_type="text/event-stream")
        return web.json_response(reply)


Wire = Callable[[WireHandler], Awaitable[WireServer]]


@pytest.fixture
async def wire() -> AsyncIterator[Wire]:
    servers: list[WireServer] = []

    async def start(handler: WireHandler) -> WireServer:
        server = await WireServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


def message(
    content: list[dict[str, Any]], stop: str | None = "end_turn", **extra: Any
) -> dict[str, Any]:
    """A Messages API answer."""
    return {
        "id": "msg_wire",
        "type": "message",
        "role": "assistant",
        "model": "claude-served",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    } | extra


def sse(*events: dict[str, Any] | str) -> bytes:
    """An SSE body with ``event:`` and ``data:`` lines (dicts as JSON, named by their type)."""
    out = []
    for e in events:
        if isinstance(e, dict):
            out.append(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
        else:
            out.append(f"data: {e}\n\n".encode())
    return b"".join(out)


def start_event(**usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_stream",
            "type": "message",
            "role": "assistant",
            "model": "claude-served",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1} | usage,
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop: str = "end_turn", **usage: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": 7} | usage,
    }


STOP = {"type": "message_stop"}


def text_stream(*pieces: str) -> bytes:
    return sse(
        start_event(),
        block_start(0, {"type": "text", "text": ""}),
        *(block_delta(0, {"type": "text_delta", "text": p}) for p in pieces),
        block_stop(0),
        message_delta(),
        STOP,
    )


def answer_ok(request: web.Request, body: dict[str, Any]) -> WireReply:
    if body.get("stream"):
        return text_stream("ok")
    return message([{"type": "text", "text": "ok"}])


async def collect(
    model: Claude, request: ModelRequest
) -> tuple[list[ModelStreamEvent], ModelResponse]:
    events = [event async for event in model.response_stream(request)]
    last = events[-1]
    assert isinstance(last, ResponseDone)
    assert not any(isinstance(e, ResponseDone) for e in events[:-1])
    return events[:-1], last.response


def script(*replies: Any) -> Callable[[dict[str, Any]], Any]:
    """A responder answering ``replies`` in order, then repeating the last one."""
    queue = list(replies)

    def responder(body: dict[str, Any]) -> Any:
        return queue.pop(0) if len(queue) > 1 else queue[0]

    return responder


def count_breakpoints(body: dict[str, Any]) -> int:
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [b for m in body["messages"] for b in m["content"]]
    return sum("cache_control" in b for b in blocks)


# ----------------------------------------------------------------------------- request building

CONVERSATION: list[Message] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="What is 2+3?", name="alice"),
    AssistantMessage(
        content="Let me add.",
        tool_calls=[ToolCall(id="toolu_1", name="add", arguments='{"a":2,"b":3}')],
    ),
    ToolMessage(tool_call_id="toolu_1", name="add", content="5"),
    AssistantMessage(content="It is 5."),
    UserMessage(
        content=[
            TextPart(text="And what is this?"),
            ImagePart(url="data:image/png;base64,iVBORw0KGgo="),
            ImagePart(url="https://example.org/cat.png"),
        ]
    ),
]

CONVERSATION_WIRE = [
    {"role": "user", "content": [{"type": "text", "text": "What is 2+3?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me add."},
            {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "5"}],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "It is 5."}]},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And what is this?"},
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
            },
            {"type": "image", "source": {"type": "url", "url": "https://example.org/cat.png"}},
        ],
    },
]


async def test_messages_of_every_role_are_sent_as_built(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "a cat")
    model = make_model(server.base_url, prompt_caching=False)
    request = ModelRequest(messages=CONVERSATION)

    body = model.build_body(request, stream=False)
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": "Be brief."}],
        "messages": CONVERSATION_WIRE,
        # no tools offered, but the history calls some: the API needs them defined
        "tools": [{"name": "add", "description": "(not available now)",
                   "input_schema": {"type": "object"}}],
        "tool_choice": {"type": "none"},
    }  # fmt: skip
    response = await model.response(request)
    assert response.message.content == "a cat"
    assert server.requests == [body]  # what went over the wire is exactly build_body()
    headers = server.headers[0]
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["Content-Type"] == "application/json"


async def test_tool_results_and_user_text_share_one_user_turn(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    messages: list[Message] = [
        SystemMessage(content="First rule."),
        UserMessage(content="Add and look up."),
        UserMessage(content="Please."),  # two user messages in a row: one turn
        AssistantMessage(
            tool_calls=[
                ToolCall(id="toolu_a", name="add", arguments='{"a": 1, "b": 2}'),
                ToolCall(id="toolu_b", name="lookup", arguments='{"word": "x"'),  # invalid JSON
            ]
        ),
        ToolMessage(tool_call_id="toolu_a", name="add", content="3"),
        ToolMessage(tool_call_id="toolu_b", name="lookup", content="bad arguments", is_error=True),
        UserMessage(content="Also, hurry."),  # joins the tool results' user turn
        SystemMessage(content="Todos: x"),  # a late system message (a slot) stays in place
    ]
    server = await fake_anthropic(lambda body: "done")
    model = make_model(server.base_url, prompt_caching=False)
    await model.response(ModelRequest(messages=messages, tools=[ADD, LOOKUP]))

    (sent,) = server.requests
    # ... as text of the user turn: `system` (the start of the cached prefix) is unchanged
    assert sent["system"] == [{"type": "text", "text": "First rule."}]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][0]["content"] == [
        {"type": "text", "text": "Add and look up."},
        {"type": "text", "text": "Please."},
    ]
    assert sent["messages"][1]["content"][1]["input"] == {}  # invalid arguments: an empty object
    assert sent["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_a", "content": "3"},
        {
            "type": "tool_result",
            "tool_use_id": "toolu_b",
            "content": "bad arguments",
            "is_error": True,
        },
        {"type": "text", "text": "Also, hurry."},
        {"type": "text", "text": "Todos: x"},
    ]
    assert request_error(sent) is None


async def test_tool_results_open_their_user_turn(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    messages: list[Message] = [
        UserMessage(content="Add."),
        AssistantMessage(tool_calls=[ToolCall(id="toolu_a", name="add", arguments="{}")]),
        UserMessage(content="(a note that arrived before the result)"),
        ToolMessage(tool_call_id="toolu_a", name="add", content="3"),
    ]
    server = await fake_anthropic(lambda body: "done")
    await make_model(server.base_url).response(ModelRequest(messages=messages))
    content = server.requests[0]["messages"][2]["content"]
    assert [b["type"] for b in content] == ["tool_result", "text"]


async def test_empty_messages_are_left_out_and_roles_still_alternate(
    make_model: MakeModel,
) -> None:
    model = make_model("http://127.0.0.1:9", prompt_caching=False)
    messages: list[Message] = [
        SystemMessage(content=""),
        UserMessage(content="one"),
        AssistantMessage(content="  "),  # nothing to send
        UserMessage(content="two"),
        AssistantMessage(content=None),
        UserMessage(content=[TextPart(text=""), TextPart(text="three")]),
    ]
    body = model.build_body(ModelRequest(messages=messages), stream=False)
    assert "system" not in body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "text", "text": "two"},
                {"type": "text", "text": "three"},
            ],
        }
    ]
    assert request_error(body) is None


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("data:image/png,rawbytes", "base64"),
        ("ftp://example.org/cat.png", "https"),
        ("file:///tmp/cat.png", "https"),
    ],
)
async def test_unsupported_images_are_usage_errors(
    url: str, error: str, make_model: MakeModel
) -> None:
    model = make_model("http://127.0.0.1:9")
    request = ModelRequest(messages=[UserMessage(content=[ImagePart(url=url)])])
    with pytest.raises(UsageError, match=error):
        model.build_body(request, stream=False)


async def test_image_media_type_comes_from_the_part_or_the_url(make_model: MakeModel) -> None:
    model = make_model("http://127.0.0.1:9")
    parts: list[TextPart | ImagePart] = [
        ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
        ImagePart(url="data:;base64,R0lGOD", media_type="image/gif"),
    ]
    body = model.build_body(ModelRequest(messages=[UserMessage(content=parts)]), stream=False)
    sources = [b["source"] for b in body["messages"][0]["content"]]
    assert sources[0] == {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQ"}
    assert sources[1] == {"type": "base64", "media_type": "image/gif", "data": "R0lGOD"}


async def test_tools_are_sent_with_input_schema(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "ok")
    model = make_model(server.base_url, prompt_caching=False)
    strict = ToolDefinition(name="s", description="Strict.", parameters={}, strict=True)
    await model.response(ask(tools=[ADD, LOOKUP, strict]))

    (sent,) = server.requests
    assert sent["tools"] == [
        {"name": "add", "description": "Add two numbers.", "input_schema": ADD.parameters},
        {"name": "lookup", "description": "Look a word up.", "input_schema": LOOKUP.parameters},
        {"name": "s", "description": "Strict.", "input_schema": {}, "strict": True},
    ]
    assert "tool_choice" not in sent


@pytest.mark.parametrize(
    ("choice", "parallel", "wire_choice"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        ("lookup", None, {"type": "tool", "name": "lookup"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("lookup", False, {"type": "tool", "name": "lookup", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, True, None),
    ],
)
async def test_tool_choice(
    choice: str | None,
    parallel: bool | None,
    wire_choice: dict[str, Any] | None,
    make_model: MakeModel,
) -> None:
    model = make_model("http://127.0.0.1:9")
    settings = ModelSettings(tool_choice=choice, parallel_tool_calls=parallel)
    body = model.build_body(ask(tools=[ADD, LOOKUP], settings=settings), stream=False)
    assert body.get("tool_choice") == wire_choice
    # without tools, no tool settings at all
    bare = model.build_body(ask(settings=settings), stream=False)
    assert "tools" not in bare and "tool_choice" not in bare
    # with thinking the API takes only auto and none: a forced choice is sent as auto
    thinking = make_model("http://127.0.0.1:9", thinking_budget=1024, max_tokens=8000)
    sent = thinking.build_body(ask(tools=[ADD, LOOKUP], settings=settings), stream=False)
    if choice in ("required", "lookup"):
        assert sent["tool_choice"]["type"] == "auto"
    else:
        assert sent.get("tool_choice") == wire_choice


async def test_cache_control_marks_the_stable_prefix(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "ok")
    model = make_model(server.base_url)
    history: list[Message] = [
        SystemMessage(content="Rules."),
        UserMessage(content="first question"),
        AssistantMessage(content="first answer"),
        UserMessage(content="second question"),
    ]
    request = ModelRequest(messages=history, tools=[ADD, LOOKUP])
    body = model.build_body(request, stream=False)

    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == CACHE
    assert body["system"][-1]["cache_control"] == CACHE
    first_user, answer, newest = body["messages"]
    assert "cache_control" not in first_user["content"][0]
    assert answer["content"][-1]["cache_control"] == CACHE  # the end of the older history
    assert "cache_control" not in newest["content"][0]
    assert count_breakpoints(body) == 3

    # a first request: only tools and system can be marked
    first = model.build_body(ask(tools=[ADD]), stream=False)
    assert count_breakpoints(first) == 1
    assert first["tools"][0]["cache_control"] == CACHE

    # switched off: no marks at all
    plain = make_model(server.base_url, prompt_caching=False).build_body(request, stream=False)
    assert count_breakpoints(plain) == 0

    await model.response(request)
    assert request_error(server.requests[0]) is None  # the API's 4-breakpoint limit holds


async def test_cache_control_in_a_tool_loop_and_reported_cache_usage(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "ok")
    model = make_model(server.base_url)
    system = SystemMessage(content="You are a careful assistant. " * 20)
    call = AssistantMessage(tool_calls=[ToolCall(id="toolu_1", name="add", arguments="{}")])
    turn1: list[Message] = [system, UserMessage(content="q")]
    turn2 = [*turn1, call, ToolMessage(tool_call_id="toolu_1", content="3")]
    call2 = AssistantMessage(
        content="again", tool_calls=[ToolCall(id="toolu_2", name="add", arguments="{}")]
    )
    turn3 = [*turn2, call2, ToolMessage(tool_call_id="toolu_2", content="4")]

    first = (await model.response(ModelRequest(messages=turn1, tools=[ADD]))).usage
    second = (await model.response(ModelRequest(messages=turn2, tools=[ADD]))).usage
    third = (await model.response(ModelRequest(messages=turn3, tools=[ADD]))).usage

    bodies = server.requests
    assert bodies[1]["messages"][1]["content"][-1]["cache_control"] == CACHE  # the tool_use
    assert bodies[2]["messages"][3]["content"][-1]["cache_control"] == CACHE
    assert "cache_control" not in bodies[2]["messages"][1]["content"][-1]  # moved on
    assert all(count_breakpoints(b) <= 4 for b in bodies)
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 0
    assert second.cache_read_tokens == first.cache_write_tokens  # tools + system were reused
    assert third.cache_read_tokens > second.cache_read_tokens
    for usage in (first, second, third):  # input_tokens counts cached tokens too
        assert usage.input_tokens > usage.cache_read_tokens + usage.cache_write_tokens


async def test_thinking_blocks_are_replayed_first_and_unchanged(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    kept = [
        {"type": "thinking", "thinking": "Add them.", "signature": "EqQBCgIYAhIM"},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
    ]
    reply = AssistantMessage(
        content="Adding.",
        tool_calls=[ToolCall(id="toolu_1", name="add", arguments='{"a": 1, "b": 2}')],
        reasoning="Add them.",
        provider_data={"anthropic_blocks": copy.deepcopy(kept)},
    )
    messages: list[Message] = [
        UserMessage(content="1+2?"),
        reply,
        ToolMessage(tool_call_id="toolu_1", content="3"),
    ]
    server = await fake_anthropic(lambda body: "3")
    model = make_model(server.base_url, thinking_budget=2048)
    await model.response(ModelRequest(messages=messages, tools=[ADD]))

    (sent,) = server.requests  # the fake server rejects a thinking tool loop without them
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    content = sent["messages"][1]["content"]
    assert content[:2] == kept
    assert [b["type"] for b in content] == ["thinking", "redacted_thinking", "text", "tool_use"]
    assert content[-1]["cache_control"] == CACHE  # never on a thinking block
    assert reply.provider_data == {"anthropic_blocks": kept}  # not marked in place

    # calls made without thinking (another model's, before a switch): the API refuses thinking
    # inside that assistant turn, so this request goes without it
    without = [messages[0], AssistantMessage(tool_calls=reply.tool_calls), messages[2]]
    await model.response(ModelRequest(messages=without, tools=[ADD]))
    body = server.requests[-1]
    assert "thinking" not in body
    refused = request_error(body | {"thinking": {"type": "enabled", "budget_tokens": 2048}})
    assert "must start with a thinking block" in (refused or "")


async def test_max_tokens_and_thinking_budget(make_model: MakeModel) -> None:
    model = make_model("http://127.0.0.1:9")
    assert model.build_body(ask(), stream=False)["max_tokens"] == 4096
    override = ask(settings=ModelSettings(max_tokens=100))
    assert model.build_body(override, stream=False)["max_tokens"] == 100
    assert (
        make_model("http://127.0.0.1:9", max_tokens=50).build_body(ask(), stream=False)[
            "max_tokens"
        ]
        == 50
    )

    thinking = make_model("http://127.0.0.1:9", thinking_budget=1024, max_tokens=8000)
    assert thinking.build_body(ask(), stream=False)["thinking"] == {
        "type": "enabled",
        "budget_tokens": 1024,
    }
    assert "thinking" not in model.build_body(ask(), stream=False)
    with pytest.raises(UsageError, match="more than thinking_budget"):
        thinking.build_body(override, stream=False)
    with pytest.raises(UsageError, match="at least 1024"):
        make_model("http://127.0.0.1:9", thinking_budget=500)
    with pytest.raises(UsageError, match="less than max_tokens"):
        make_model("http://127.0.0.1:9", thinking_budget=4096)


async def test_sampling_settings_extra_body_and_headers(wire: Wire, make_model: MakeModel) -> None:
    server = await wire(answer_ok)
    model = make_model(
        server.base_url,
        headers={"anthropic-beta": "some-beta"},
        settings=ModelSettings(temperature=0.1, top_p=0.9, extra_headers={"X-Trace": "default"}),
    )
    settings = ModelSettings(
        temperature=0.5,
        stop=("END",),
        seed=7,
        extra_body={"top_k": 20, "metadata": {"user_id": "u1"}},
        extra_headers={"X-Trace": "abc"},
    )
    await model.response(ask(settings=settings))
    await collect(model, ask())

    first, second = server.seen
    assert first.body["temperature"] == 0.5 and first.body["top_p"] == 0.9
    assert first.body["stop_sequences"] == ["END"]
    assert "seed" not in first.body and "stop" not in first.body  # no such API field
    assert first.body["top_k"] == 20 and first.body["metadata"] == {"user_id": "u1"}
    assert first.headers["X-Trace"] == "abc" and second.headers["X-Trace"] == "default"
    assert first.headers["anthropic-beta"] == "some-beta"
    assert "stream" not in first.body
    assert second.body["stream"] is True
    assert second.body == model.build_body(ask(), stream=True)


async def test_structured_output_as_instructions_or_native(make_model: MakeModel) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    request = ModelRequest(
        messages=[SystemMessage(content="Be brief."), UserMessage(content="Where?")],
        output_schema=OutputSchema(name="Place", schema=schema),
    )
    body = make_model("http://127.0.0.1:9").build_body(request, stream=False)
    assert body["system"][0] == {"type": "text", "text": "Be brief."}
    instructions = body["system"][1]["text"]
    assert "JSON" in instructions and "'Place'" in instructions
    assert json.dumps(schema, separators=(",", ":")) in instructions
    assert body["system"][1]["cache_control"] == CACHE  # part of the stable prefix
    assert "output_config" not in body

    native = make_model("http://127.0.0.1:9", native_structured_output=True)
    body = native.build_body(request, stream=False)
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert len(body["system"]) == 1


async def test_keys_base_urls_and_repr(monkeypatch: pytest.MonkeyPatch, wire: Wire) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        Claude()
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    official = Claude()
    assert official.id == "claude-sonnet-4-5" and official.provider == "anthropic"
    assert official.base_url == "https://api.anthropic.com"
    assert official._url == "https://api.anthropic.com/v1/messages"
    assert official.context_window == 200_000
    assert official.price is not None and official.price.input == 3.0  # priced as claude-sonnet-4
    for shown in (repr(official), str(official), repr(Agent(model=official))):
        assert KEY not in shown
    assert "claude-sonnet-4-5" in repr(official)

    server = await wire(answer_ok)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url + "/v1")  # a /v1 root works too
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    keyless = Claude("claude-haiku-4-5", retry=NO_RETRY)  # a custom endpoint needs no key
    async with keyless:
        assert (await keyless.response(ask())).message.content == "ok"
    assert "x-api-key" not in server.seen[0].headers
    assert server.seen[0].headers["anthropic-version"] == "2023-06-01"
    await official.aclose()


async def test_unknown_message_type_is_a_usage_error(make_model: MakeModel) -> None:
    model = make_model("http://127.0.0.1:9")
    with pytest.raises(UsageError, match="cannot send object"):
        model.build_body(ModelRequest(messages=[object()]), stream=False)  # type: ignore[list-item]


# ----------------------------------------------------------------------------- responses


async def test_text_reply(wire: Wire, make_model: MakeModel) -> None:
    server = await wire(
        lambda request, body: message(
            [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there."}]
        )
    )
    response = await make_model(server.base_url).response(ask())
    assert response.message.content == "Hello there."
    assert response.message.tool_calls == []
    assert response.message.finish_reason == "stop"
    assert response.message.model == "claude-served"
    assert response.message.provider_data is None
    assert response.response_id == "msg_wire"
    assert response.provider == "anthropic"
    assert response.usage == Usage(input_tokens=10, output_tokens=5)


async def test_parallel_tool_use(wire: Wire, make_model: MakeModel) -> None:
    content: list[dict[str, Any]] = [
        {"type": "text", "text": "I'll do both."},
        {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 2, "b": 3}},
        {"type": "tool_use", "id": "toolu_b", "name": "lookup", "input": {"word": "é"}},
    ]
    server = await wire(lambda request, body: message(content, "tool_use"))
    result = (await make_model(server.base_url).response(ask(tools=[ADD, LOOKUP]))).message
    assert result.content == "I'll do both."
    assert [(c.id, c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("toolu_a", "add", {"a": 2, "b": 3}),
        ("toolu_b", "lookup", {"word": "é"}),
    ]
    assert result.finish_reason == "tool_calls"


async def test_usage_with_cache_and_thinking_tokens(wire: Wire, make_model: MakeModel) -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 200,
        "cache_read_input_tokens": 1000,
        "output_tokens": 50,
        "output_tokens_details": {"thinking_tokens": 30},
        "service_tier": "standard",
    }
    server = await wire(lambda request, body: message([{"type": "text", "text": "x"}], usage=usage))
    response = await make_model(server.base_url).response(ask())
    assert response.usage == Usage(
        input_tokens=1210,
        output_tokens=50,
        cache_read_tokens=1000,
        cache_write_tokens=200,
        reasoning_tokens=30,
    )


@pytest.mark.parametrize(
    ("sent", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "pause_turn"),
        (None, "stop"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_stop_reasons(
    sent: str | None, expected: str, stream: bool, wire: Wire, make_model: MakeModel
) -> None:
    def handler(request: web.Request, body: dict[str, Any]) -> WireReply:
        if body.get("stream"):
            return sse(
                start_event(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "x"}),
                block_stop(0),
                {"type": "message_delta", "delta": {"stop_reason": sent}, "usage": {}},
                STOP,
            )
        return message([{"type": "text", "text": "x"}], sent)

    server = await wire(handler)
    model = make_model(server.base_url)
    if stream:
        _, response = await collect(model, ask())
    else:
        response = await model.response(ask())
    assert response.message.finish_reason == expected


async def test_thinking_reply_keeps_signed_blocks(wire: Wire, make_model: MakeModel) -> None:
    content = [
        {"type": "thinking", "thinking": "Let me think. ", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "Done.", "signature": "sig-2"},
        {"type": "text", "text": "42"},
    ]
    server = await wire(lambda request, body: message(content))
    result = (await make_model(server.base_url).response(ask())).message
    assert result.content == "42"
    assert result.reasoning == "Let me think. Done."
    assert result.provider_data == {"anthropic_blocks": content[:3]}


@pytest.mark.parametrize(
    "data",
    [{}, {"content": None}, {"content": "text"}, [], "hello", None],
)
async def test_answer_without_content_list(data: Any, wire: Wire, make_model: MakeModel) -> None:
    server = await wire(lambda request, body: web.json_response(data))
    with pytest.raises(ModelResponseError, match="without a content list") as caught:
        await make_model(server.base_url, retry=NO_RETRY).response(ask())
    assert caught.value.retryable
    assert len(server.seen) == 1


# ----------------------------------------------------------------------------- streaming


async def test_stream_text_deltas_and_usage(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "the quick brown fox")
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("the "), TextDelta("quick "), TextDelta("brown "), TextDelta("fox")]
    assert response.message.content == "the quick brown fox"
    assert response.message.finish_reason == "stop"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 1
    assert response.response_id is not None and response.response_id.startswith("msg_")
    assert server.requests[0]["stream"] is True


async def test_stream_tool_calls_are_assembled(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    reply = AssistantMessage(
        content="Let me check.",
        reasoning="Two tools.",
        tool_calls=[
            ToolCall(id="toolu_x", name="add", arguments='{"a": 10, "b": 20}'),
            ToolCall(id="toolu_y", name="lookup", arguments='{"word": "streaming"}'),
        ],
    )
    server = await fake_anthropic(lambda body: reply)
    model = make_model(server.base_url, thinking_budget=1024)
    events, response = await collect(model, ask(tools=[ADD, LOOKUP]))

    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    # content blocks 2 and 3 (after thinking and text) are tool calls 0 and 1
    assert [d.index for d in deltas] == [0, 0, 0, 1, 1, 1]
    assert (deltas[0].id, deltas[0].name, deltas[0].arguments) == ("toolu_x", "add", "")
    assert deltas[1].id is None and deltas[1].name is None
    assert "".join(d.arguments for d in deltas if d.index == 0) == '{"a": 10, "b": 20}'
    message_ = response.message
    assert message_.tool_calls == reply.tool_calls
    assert message_.content == "Let me check."
    assert message_.reasoning == "Two tools."
    assert message_.finish_reason == "tool_calls"
    (thinking,) = message_.provider_data["anthropic_blocks"]  # type: ignore[index]
    assert thinking["type"] == "thinking" and thinking["thinking"] == "Two tools."
    assert thinking["signature"].startswith("sig")


async def test_stream_input_json_in_many_pieces(wire: Wire, make_model: MakeModel) -> None:
    arguments = '{"word": "a long streamed argument"}'
    pieces = [arguments[i : i + 3] for i in range(0, len(arguments), 3)]
    body = sse(
        start_event(),
        block_start(0, {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}),
        {"type": "ping"},
        *(block_delta(0, {"type": "input_json_delta", "partial_json": p}) for p in pieces),
        block_delta(0, {"type": "input_json_delta", "partial_json": ""}),
        block_stop(0),
        # a tool whose input came whole at the start (some proxies), and one without arguments
        block_start(1, {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {"a": 1}}),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_3", "name": "noargs", "input": {}}),
        block_stop(2),
        message_delta("tool_use"),
        STOP,
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())
    assert len([e for e in events if isinstance(e, ToolCallDelta)]) == 1 + len(pieces) + 2 + 1
    assert response.message.tool_calls == [
        ToolCall(id="toolu_1", name="lookup", arguments=arguments),
        ToolCall(id="toolu_2", name="add", arguments='{"a": 1}'),
        ToolCall(id="toolu_3", name="noargs", arguments="{}"),
    ]


async def test_stream_thinking_signature_and_redacted(wire: Wire, make_model: MakeModel) -> None:
    body = sse(
        start_event(),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(0, {"type": "thinking_delta", "thinking": "Six times "}),
        block_delta(0, {"type": "thinking_delta", "thinking": "seven."}),
        block_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
        block_stop(0),
        block_start(1, {"type": "redacted_thinking", "data": "EmwKAhgB"}),
        block_stop(1),
        block_start(2, {"type": "text", "text": ""}),
        block_delta(2, {"type": "text_delta", "text": "42"}),
        block_stop(2),
        message_delta(),
        STOP,
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [ReasoningDelta("Six times "), ReasoningDelta("seven."), TextDelta("42")]
    assert response.message.reasoning == "Six times seven."
    assert response.message.content == "42"
    assert response.message.provider_data == {
        "anthropic_blocks": [
            {"type": "thinking", "thinking": "Six times seven.", "signature": "EqQBCgIYAhIM"},
            {"type": "redacted_thinking", "data": "EmwKAhgB"},
        ]
    }


async def test_stream_usage_from_message_start_and_message_delta(
    wire: Wire, make_model: MakeModel
) -> None:
    body = sse(
        start_event(input_tokens=12, cache_creation_input_tokens=100, cache_read_input_tokens=0),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "hi"}),
        block_stop(0),
        # cumulative counts: the delta's values replace the start's, missing ones are kept
        message_delta(output_tokens=30, cache_read_input_tokens=400),
        STOP,
    )
    server = await wire(lambda request, sent: body)
    _, response = await collect(make_model(server.base_url), ask())
    assert response.usage == Usage(
        input_tokens=512, output_tokens=30, cache_read_tokens=400, cache_write_tokens=100
    )
    assert response.response_id == "msg_stream"
    assert response.message.model == "claude-served"


async def test_stream_ignores_pings_unknown_events_and_crlf(
    wire: Wire, make_model: MakeModel
) -> None:
    body = text_stream("a", "b").replace(b"\n", b"\r\n")
    body = (
        b": comment\r\n\r\n"
        + sse({"type": "ping"}, {"type": "some_future_event", "x": 1}).replace(b"\n", b"\r\n")
        + body
    )
    server = await wire(lambda request, sent: body)
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("a"), TextDelta("b")]
    assert response.message.content == "ab"


# ----------------------------------------------------------------------------- faults

OVERLOADED = HTTPFault(
    529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
)


@pytest.mark.parametrize("stream", [False, True])
async def test_overloaded_529_is_retried_then_succeeds(
    stream: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(script(OVERLOADED, OVERLOADED, "recovered"))
    model = make_model(server.base_url)
    if stream:
        _, response = await collect(model, ask())
    else:
        response = await model.response(ask())
    assert response.message.content == "recovered"
    assert len(server.requests) == 3


async def test_overloaded_gives_up_after_max_retries(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: OVERLOADED)
    with pytest.raises(ModelHTTPError, match="Overloaded") as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.status == 529 and caught.value.retryable
    assert caught.value.provider == "anthropic" and caught.value.model == "claude-sonnet-4-5"
    assert len(server.requests) == FAST_RETRY.max_retries + 1


async def test_429_honours_retry_after(fake_anthropic: StartFake, make_model: MakeModel) -> None:
    limited = HTTPFault(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        headers={"retry-after": "0.25"},
    )
    server = await fake_anthropic(script(limited, "after the wait"))
    model = make_model(server.base_url, retry=RetryPolicy(initial_delay=0.01, jitter=0.0))
    started = time.monotonic()
    assert (await model.response(ask())).message.content == "after the wait"
    assert 0.23 <= time.monotonic() - started < 1.5
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_spend_limit_429_is_not_retried(
    stream: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    body = {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "You have reached your specified API usage limits.",
            "details": {"error_code": "enforced_spend_limit_reached"},
        },
    }
    server = await fake_anthropic(lambda sent: HTTPFault(429, body))
    model = make_model(server.base_url)
    with pytest.raises(ModelHTTPError) as caught:
        if stream:
            await collect(model, ask())
        else:
            await model.response(ask())
    assert caught.value.status == 429 and not caught.value.retryable
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_wrong_key_is_an_auth_error(
    stream: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: "never", api_key="the-right-key")
    model = make_model(server.base_url, api_key="a-wrong-key")
    with pytest.raises(ModelAuthError) as caught:
        if stream:
            await collect(model, ask())
        else:
            await model.response(ask())
    assert caught.value.status == 401 and not caught.value.retryable
    assert "invalid x-api-key" in str(caught.value) and "ANTHROPIC_API_KEY" in str(caught.value)
    assert len(server.requests) == 1
    good = make_model(server.base_url, api_key="the-right-key")
    assert (await good.response(ask())).message.content == "never"


async def test_prompt_too_long_is_a_context_overflow(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    text = "prompt is too long: 208970 tokens > 200000 maximum"
    fault = HTTPFault(
        400, {"type": "error", "error": {"type": "invalid_request_error", "message": text}}
    )
    server = await fake_anthropic(lambda body: fault)
    with pytest.raises(ContextOverflowError) as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.status == 400 and not caught.value.retryable
    assert text in str(caught.value)
    assert len(server.requests) == 1


async def test_error_event_mid_stream(wire: Wire, make_model: MakeModel) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    body = sse(
        start_event(),
        block_start(0, {"type": "text", "text": ""}),
        block_delta(0, {"type": "text_delta", "text": "par"}),
        error,
    )
    server = await wire(lambda request, sent: body)
    seen: list[ModelStreamEvent] = []
    with pytest.raises(ModelResponseError, match="overloaded_error: Overloaded") as caught:
        async for event in make_model(server.base_url).response_stream(ask()):
            seen.append(event)
    assert seen == [TextDelta("par")]
    assert caught.value.retryable  # in principle; but text reached the caller: not retried
    assert len(server.seen) == 1


async def test_error_event_before_any_delta_is_retried(wire: Wire, make_model: MakeModel) -> None:
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    answers = iter([sse(start_event(), error), text_stream("ok")])
    server = await wire(lambda request, sent: next(answers))
    events, response = await collect(make_model(server.base_url), ask())
    assert events == [TextDelta("ok")] and response.message.content == "ok"
    assert len(server.seen) == 2


async def test_invalid_request_error_event_is_not_retried(
    wire: Wire, make_model: MakeModel
) -> None:
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    server = await wire(lambda request, sent: sse(error))
    with pytest.raises(ModelResponseError) as caught:
        await collect(make_model(server.base_url), ask())
    assert not caught.value.retryable
    assert len(server.seen) == 1


async def test_truncated_stream_before_any_delta_is_retried(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    # event 0 is message_start: the cut comes before anything reached the caller
    server = await fake_anthropic(script(TruncatedStream("never seen", chunks=1), "whole reply"))
    events, response = await collect(make_model(server.base_url), ask())
    assert response.message.content == "whole reply"
    assert events == [TextDelta("whole "), TextDelta("reply")]
    assert len(server.requests) == 2


async def test_truncated_stream_after_deltas_is_an_error(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    # message_start, content_block_start, ping, then two text deltas
    server = await fake_anthropic(lambda body: TruncatedStream("one two three", chunks=5))
    seen: list[ModelStreamEvent] = []
    with pytest.raises(ModelResponseError) as caught:
        async for event in make_model(server.base_url).response_stream(ask()):
            seen.append(event)
    assert seen == [TextDelta("one "), TextDelta("two ")]
    assert caught.value.retryable
    assert len(server.requests) == 1


async def test_stream_without_message_stop_is_an_error(wire: Wire, make_model: MakeModel) -> None:
    body = sse(start_event(), message_delta())  # closed cleanly, but no message_stop
    server = await wire(lambda request, sent: body)
    with pytest.raises(ModelResponseError, match="no message_stop") as caught:
        await collect(make_model(server.base_url), ask())
    assert caught.value.retryable
    assert len(server.seen) == FAST_RETRY.max_retries + 1


@pytest.mark.parametrize("stream", [False, True])
async def test_hang_times_out(
    stream: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(lambda body: Hang())
    model = make_model(server.base_url, retry=NO_RETRY, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError) as caught:
        if stream:
            await collect(model, ask())
        else:
            await model.response(ask())
    assert 0.25 <= time.monotonic() - started < 1.5
    assert caught.value.retryable


async def test_request_timeout_setting_wins(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(script(Hang(), "awake"))
    model = make_model(server.base_url, timeout=60.0)
    request = ask(settings=ModelSettings(timeout=0.2))
    assert (await model.response(request)).message.content == "awake"
    assert len(server.requests) == 2


async def test_body_that_is_not_json(fake_anthropic: StartFake, make_model: MakeModel) -> None:
    server = await fake_anthropic(script(BadBody(), "fine"))
    assert (await make_model(server.base_url).response(ask())).message.content == "fine"
    assert len(server.requests) == 2

    server.responder = lambda body: BadBody(b"<html>502</html>")
    server.requests.clear()
    with pytest.raises(ModelResponseError, match="not JSON") as caught:
        await make_model(server.base_url).response(ask())
    assert caught.value.retryable
    assert len(server.requests) == FAST_RETRY.max_retries + 1


async def test_stream_event_that_is_not_json(wire: Wire, make_model: MakeModel) -> None:
    server = await wire(lambda request, sent: sse(start_event(), "{not json"))
    with pytest.raises(ModelResponseError, match="not JSON"):
        await collect(make_model(server.base_url, retry=NO_RETRY), ask())


# ----------------------------------------------------------------------------- the fake server


async def test_fake_server_rejects_what_the_api_rejects(fake_anthropic: StartFake) -> None:
    server = await fake_anthropic(lambda body: "ok")
    base = {"model": "claude-sonnet-4-5", "max_tokens": 100}
    use = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}
    text = {"type": "text", "text": "hi"}
    cases = {
        "alternate": [
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
        ],
        "corresponding `tool_use`": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [text]},
            {"role": "user", "content": [result]},
        ],
        "without `tool_result`": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [text]},
        ],
        "must come first": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [text, result]},
        ],
        "non-empty": [{"role": "user", "content": [{"type": "text", "text": ""}]}],
        "maximum of 4": [
            {"role": "user", "content": [dict(text, cache_control=CACHE)] * 5},
        ],
        "must define tools": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": [use]},
            {"role": "user", "content": [result]},
        ],
    }
    tools = {"tools": [{"name": "add", "input_schema": {"type": "object"}}]}
    async with aiohttp.ClientSession() as session:
        for expected, messages in cases.items():
            assert expected in (request_error(base | {"messages": messages}) or "")
            async with session.post(
                server.base_url + "/v1/messages",
                json=base | {"messages": messages},
                headers={"anthropic-version": "2023-06-01"},
            ) as resp:
                assert resp.status == 400
                data = await resp.json()
            assert data["type"] == "error"
            assert data["error"]["type"] == "invalid_request_error"
            assert expected in data["error"]["message"]
        ok = [{"role": "user", "content": "a"}, {"role": "assistant", "content": [use]}]
        ok.append({"role": "user", "content": [result, text]})
        async with session.post(
            server.base_url + "/v1/messages", json=base | tools | {"messages": ok}
        ) as resp:
            assert resp.status == 400  # no anthropic-version header
            assert "anthropic-version" in (await resp.json())["error"]["message"]
        async with session.post(
            server.base_url + "/v1/messages",
            json=base | tools | {"messages": ok},
            headers={"anthropic-version": "2023-06-01"},
        ) as resp:
            assert resp.status == 200
            answer = await resp.json()
    assert answer["type"] == "message" and answer["content"] == [{"type": "text", "text": "ok"}]
    assert answer["stop_reason"] == "end_turn"
    assert set(answer["usage"]) >= {"input_tokens", "output_tokens"}
    assert len(server.requests) == len(cases) + 2


async def test_fake_server_streams_the_real_event_sequence(fake_anthropic: StartFake) -> None:
    reply = AssistantMessage(
        content="Hi there",
        reasoning="Think.",
        tool_calls=[ToolCall(id="", name="add", arguments='{"a": 1}')],
    )
    server = await fake_anthropic(lambda body: reply)
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            server.base_url + "/v1/messages",
            json=body,
            headers={"anthropic-version": "2023-06-01"},
        ) as resp,
    ):
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = (await resp.read()).decode()
    events = [chunk.split("\n") for chunk in raw.strip().split("\n\n")]
    names = [lines[0].removeprefix("event: ") for lines in events]
    datas = [json.loads(lines[1].removeprefix("data: ")) for lines in events]
    assert all(d["type"] == n for n, d in zip(names, datas, strict=True))
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    starts = [d["content_block"]["type"] for d in datas if d["type"] == "content_block_start"]
    assert starts == ["thinking", "text", "tool_use"]
    kinds = {d["delta"]["type"] for d in datas if d["type"] == "content_block_delta"}
    assert kinds == {"thinking_delta", "signature_delta", "text_delta", "input_json_delta"}
    assert datas[-2]["delta"]["stop_reason"] == "tool_use"
    assert datas[0]["message"]["content"] == [] and datas[0]["message"]["stop_reason"] is None


# ----------------------------------------------------------------------------- agent end to end


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    await asyncio.sleep(0)
    return a + b


def last_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    last = body["messages"][-1]
    return [b for b in last["content"] if b["type"] == "tool_result"]


def adder(body: dict[str, Any]) -> AssistantMessage | str:
    """Call ``add`` on a user message; answer with the sum once the tool result is back."""
    results = last_results(body)
    if results:
        return f"The sum is {results[0]['content']}."
    return AssistantMessage(
        reasoning="I should use the tool." if body.get("thinking") else None,
        tool_calls=[ToolCall(id="", name="add", arguments='{"a": 2, "b": 3}')],
    )


async def run_agent(agent: Agent, prompt: str, stream: bool) -> RunResponse:
    if not stream:
        return await agent.run(prompt)
    async with agent.run_stream(prompt) as events:
        async for _ in events:
            pass
    return events.response


@pytest.mark.parametrize("thinking", [False, True], ids=["plain", "thinking"])
@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_agent_completes_a_tool_loop(
    stream: bool, thinking: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(adder)
    model = make_model(server.base_url, thinking_budget=1024 if thinking else None)
    agent = Agent(model=model, tools=[add], instructions="Use tools.")
    response = await run_agent(agent, "What is 2 + 3?", stream)

    assert response.content == "The sum is 5."
    assert len(server.requests) == 2  # a broken conversation would have been a 400
    first, second = server.requests
    assert all(bool(r.get("stream")) is stream for r in server.requests)
    assert first["system"] == [{"type": "text", "text": "Use tools.", "cache_control": CACHE}]
    assert first["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What is 2 + 3?"}]}
    ]
    assert [t["name"] for t in first["tools"]] == ["add"]
    assert first["tools"][0]["input_schema"]["required"] == ["a", "b"]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    blocks = second["messages"][1]["content"]
    assert [b["type"] for b in blocks] == (["thinking", "tool_use"] if thinking else ["tool_use"])
    use = blocks[-1]
    assert use["input"] == {"a": 2, "b": 3} and use["cache_control"] == CACHE
    assert last_results(second) == [
        {"type": "tool_result", "tool_use_id": use["id"], "content": "5"}
    ]
    assert [(c.name, c.status, c.result) for c in response.tool_calls] == [("add", "success", 5)]
    assert response.usage.requests == 2 and response.usage.tool_calls == 1
    assert response.usage.cache_read_tokens > 0  # the second request reused the prefix
    assert response.usage.cost is not None and response.usage.cost > 0
    if thinking:
        reply = response.messages[1]
        assert isinstance(reply, AssistantMessage)
        assert reply.reasoning == "I should use the tool."
        assert reply.provider_data is not None

    again = await run_agent(agent, "And once more?", stream)  # replays the first run
    assert again.content == "The sum is 5."
    assert len(server.requests) == 4
    replayed = server.requests[2]["messages"]
    assert [m["role"] for m in replayed] == ["user", "assistant", "user", "assistant", "user"]
    assert replayed[2]["content"][0]["type"] == "tool_result"
    assert replayed[3]["content"][-1] == {
        "type": "text",
        "text": "The sum is 5.",
        "cache_control": CACHE,
    }
    assert request_error(server.requests[3]) is None


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_stream"])
async def test_an_empty_end_turn_after_a_tool_result_is_sent_back_and_the_run_completes(
    stream: bool, fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    # Claude may answer a tool result with an empty ``end_turn`` (documented): the run asks
    # again once, without the empty turn, instead of failing or retrying the same request.
    def responder(body: dict[str, Any]) -> AssistantMessage | str:
        if len(server.requests) == 2:
            return ""
        return adder(body) if len(server.requests) == 1 else "The sum is 5."

    server = await fake_anthropic(responder)
    agent = Agent(model=make_model(server.base_url), tools=[add])
    response = await run_agent(agent, "What is 2 + 3?", stream)

    assert response.content == "The sum is 5."
    assert len(server.requests) == 3  # no adapter retry of the empty reply
    third = server.requests[2]["messages"]
    assert [m["role"] for m in third] == ["user", "assistant", "user"]
    assert third[2]["content"][0]["type"] == "tool_result"
    assert "empty" in third[2]["content"][-1]["text"]
    assert request_error(server.requests[2]) is None
    assert response.usage.requests == 3  # the empty reply is charged


async def test_agent_stream_events_over_http(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    server = await fake_anthropic(adder)
    agent = Agent(model=make_model(server.base_url, thinking_budget=1024), tools=[add])
    async with agent.run_stream("What is 2 + 3?") as stream:
        events = [event async for event in stream]

    kinds = [event.kind for event in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_completed"
    assert kinds.count("model_request_started") == 2
    assert kinds.count("reasoning_delta") == 2
    assert kinds.count("tool_call_delta") == 3  # the start, then the input in two pieces
    assert kinds.index("tool_call_delta") < kinds.index("tool_call_started")
    assert kinds.index("tool_call_completed") < kinds.index("text_delta")
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == stream.response.content == "The sum is 5."


async def test_agents_sharing_one_model_never_mix_histories(
    fake_anthropic: StartFake, make_model: MakeModel
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
        prompt = body["messages"][0]["content"][0]["text"]
        results = last_results(body)
        if results:
            return f"{prompt} -> {results[0]['content']}"
        arguments = json.dumps({"text": prompt})
        return AssistantMessage(tool_calls=[ToolCall(id="", name="shout", arguments=arguments)])

    server = await fake_anthropic(responder)
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
        text = json.dumps([sent["system"], sent["messages"]])
        owners = [p for p in prompts if p in text]
        assert len(owners) == 1, f"a request mixes conversations: {owners}"
        assert sent["system"][0]["text"] == f"You serve {owners[0]}."
        assert request_error(sent) is None
    for agent, prompt in zip(agents, prompts, strict=True):
        remembered = json.dumps([str(m) for m in agent.memory.messages])
        assert prompt in remembered
        assert not any(p in remembered for p in prompts if p != prompt)


async def test_agent_structured_output_over_http(
    fake_anthropic: StartFake, make_model: MakeModel
) -> None:
    class Weather(BaseModel):
        city: str
        celsius: float

    server = await fake_anthropic(lambda body: '```json\n{"city": "Oslo", "celsius": -3.5}\n```')
    agent = Agent(model=make_model(server.base_url), output_type=Weather)
    response = await agent.run("Weather in Oslo?")

    assert response.output == Weather(city="Oslo", celsius=-3.5)
    instructions = server.requests[0]["system"][-1]["text"]
    assert "'Weather'" in instructions and '"celsius"' in instructions
    assert "output_config" not in server.requests[0]


async def test_model_is_an_async_context_manager_and_reuses_its_session(
    fake_anthropic: StartFake,
) -> None:
    server = await fake_anthropic(lambda body: "ok")
    async with Claude("claude-sonnet-4-5", api_key=KEY, base_url=server.base_url) as model:
        session = model._pool.session()
        assert (await model.response(ask())).message.content == "ok"
        await collect(model, ask())
        assert model._pool.session() is session
    assert session.closed
