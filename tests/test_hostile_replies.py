"""Hostile model replies at the adapter boundary: both wire formats, both modes, real HTTP.

Whatever a provider sends, a model call ends with a valid ``ModelResponse`` (every field of the
type its message declares, storable and loadable again) or a typed ``ModelError``, and it ends:
property-based tests (hypothesis) mutate valid replies and streams field by field and cut streams
into arbitrary pieces; fixed cases cover the defects found by ``benchmarks/hostile_replies.py``
(deep nesting, SSE lines over 512 KB, wrong-typed fields, empty replies, a session poisoned by a
stored reply, a stream that trickles keep-alive comments).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentica import Agent, ModelSettings, RetryPolicy
from agentica.errors import ModelError, ModelResponseError, ModelTimeoutError
from agentica.messages import AssistantMessage, RunUsage, TextDelta, UserMessage
from agentica.models import ModelRequest, ModelResponse, ResponseDone
from agentica.models.anthropic import Claude
from agentica.models.openai import OpenAILike
from agentica.storage.codec import decode_run, encode_run
from agentica.storage.factory import open_storage
from agentica.storage.records import RunRecord
from agentica.testing import FakeAnthropicServer, FakeOpenAIServer
from agentica.testing.openai_server import BadBody, Hang, RawStream, ServerReply
from benchmarks.hostile_replies import (
    ANTHROPIC_TEXT,
    ANTHROPIC_TOOL,
    DEEP,
    OPENAI_TEXT,
    OPENAI_TOOL,
    anthropic_events,
    openai_chunks,
    run_agent,
)

NO_RETRY = RetryPolicy(max_retries=0)


def ask(text: str = "hi", **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=[UserMessage(content=text)], **kwargs)


_OPEN: list[OpenAILike | Claude] = []


def make_model(kind: str, base_url: str, **kwargs: Any) -> OpenAILike | Claude:
    """An adapter for the scripted server at ``base_url``; closed after the test."""
    kwargs.setdefault("retry", NO_RETRY)
    model: OpenAILike | Claude
    if kind == "openai":
        model = OpenAILike(id="fake", base_url=base_url, **kwargs)
    else:
        model = Claude(id="claude-fake", api_key="test", base_url=base_url, **kwargs)
    _OPEN.append(model)
    return model


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def start_server(kind: str, responder: Callable[[dict[str, Any]], ServerReply]) -> Any:
    if kind == "openai":
        return FakeOpenAIServer(responder)
    return FakeAnthropicServer(responder, validate=False)


async def call(model: OpenAILike | Claude, stream: bool, request: ModelRequest) -> ModelResponse:
    if not stream:
        return await model.response(request)
    done = None
    async for event in model.response_stream(request):
        if isinstance(event, ResponseDone):
            done = event.response
    assert done is not None
    return done


def sse(events: list[Any], *, done: bool = False) -> bytes:
    out = b"".join(
        b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events
    )
    return out + (b"data: [DONE]\n\n" if done else b"")


# ----------------------------------------------------------------------------- valid replies
# OPENAI_TEXT, OPENAI_TOOL, openai_chunks(), ANTHROPIC_TEXT, ANTHROPIC_TOOL and anthropic_events()
# come from the probe; here, an Anthropic reply with every kind of block (thinking, text, a call).
ANTHROPIC_ALL: dict[str, Any] = ANTHROPIC_TOOL | {
    "content": [*ANTHROPIC_TEXT["content"], ANTHROPIC_TOOL["content"][1]]
}


# ----------------------------------------------------------------------------- strategies

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=6,
)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (the root excluded)."""
    if not isinstance(value, dict | list):
        return
    items: Any = value.items() if isinstance(value, dict) else enumerate(value)
    for key, child in items:
        yield (*prefix, key)
        yield from paths(child, (*prefix, key))


@st.composite
def mutated(draw: st.DrawFn, base: Any) -> Any:
    """``base`` with one to three values replaced by arbitrary JSON or removed."""
    value = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        candidates = list(paths(value))
        if not candidates:
            break
        path = draw(st.sampled_from(candidates))
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return value


@st.composite
def hostile_stream(draw: st.DrawFn, events: list[Any], done: bool) -> RawStream:
    """A stream of ``events`` (some mutated, dropped or replaced by garbage), cut anywhere."""
    chosen = []
    for event in events:
        action = draw(st.sampled_from(["keep", "keep", "keep", "mutate", "drop", "garbage"]))
        if action == "mutate":
            chosen.append(draw(mutated(event)))
        elif action == "garbage":
            chosen.append(draw(json_values | st.sampled_from(["{bad", DEEP, "[DONE]"])))
        elif action == "keep":
            chosen.append(event)
    body = sse(chosen, done=done and draw(st.booleans()))
    if draw(st.booleans()):
        body = body.replace(b"\n", b"\r\n")
    cuts = sorted(draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    return RawStream([p for p in pieces if p] or [b""])


# ----------------------------------------------------------------------------- invariants


def assert_valid(response: ModelResponse) -> None:
    """A reply the run loop can use and storage can keep and load again."""
    message = response.message
    assert isinstance(message.content, str | None)
    assert isinstance(message.reasoning, str | None)
    assert isinstance(message.finish_reason, str)
    assert isinstance(message.model, str)
    assert isinstance(response.response_id, str | None)
    if not (message.tool_calls or (message.content and message.content.strip())):
        # an empty reply with a normal stop is the run loop's to send back; one cut at the
        # token limit or withheld by a filter is a ModelResponseError at the adapter
        assert message.finish_reason not in ("length", "content_filter")
    for tool_call in message.tool_calls:
        assert isinstance(tool_call.id, str) and tool_call.id
        assert isinstance(tool_call.name, str) and tool_call.name
        assert isinstance(tool_call.arguments, str)
    usage = message.usage
    assert usage is not None
    for count in (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens):
        assert isinstance(count, int) and not isinstance(count, bool) and count >= 0
    record = RunRecord(
        run_id="r",
        messages=[UserMessage(content="hi"), message],
        usage=RunUsage(),
        status="completed",
        started_at=0.0,
        duration=0.0,
    )
    assert decode_run(encode_run(record)).messages[1] == message


class Harness:
    """One scripted server and one adapter on a private event loop, reused for every example."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.reply: ServerReply = "hello"
        self.loop = asyncio.new_event_loop()
        self.server = start_server(kind, lambda body: self.reply)
        self.loop.run_until_complete(self.server.start())
        self.model = make_model(kind, self.server.base_url, timeout=2.0, request_timeout=4.0)
        _OPEN.remove(self.model)  # closed in its own loop by close()
        self.outcomes: dict[str, int] = {}

    def check(self, reply: ServerReply, *, stream: bool) -> None:
        self.reply = reply

        async def scenario() -> None:
            async with asyncio.timeout(8):  # past the adapter's own deadline: a hang
                try:
                    response = await call(self.model, stream, ask())
                except ModelError as exc:
                    self.outcomes[type(exc).__name__] = self.outcomes.get(type(exc).__name__, 0) + 1
                    return
            self.outcomes["valid"] = self.outcomes.get("valid", 0) + 1
            assert_valid(response)

        self.loop.run_until_complete(scenario())

    def close(self) -> None:
        self.loop.run_until_complete(self.model.aclose())
        self.loop.run_until_complete(self.server.stop())
        self.loop.close()


PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_any_hostile_reply_gives_a_valid_response_or_a_model_error(kind: str, stream: bool) -> None:
    harness = Harness(kind)
    try:
        if kind == "openai" and not stream:
            replies = st.sampled_from([OPENAI_TEXT, OPENAI_TOOL]).flatmap(mutated)
            strategy = replies.map(lambda v: BadBody(json.dumps(v).encode()))
        elif kind == "openai":
            strategy = hostile_stream(openai_chunks(), done=True)
        elif not stream:
            strategy = mutated(ANTHROPIC_ALL).map(lambda v: BadBody(json.dumps(v).encode()))
        else:
            strategy = hostile_stream(anthropic_events(), done=False)

        @PROPERTY
        @given(reply=strategy)
        def check(reply: ServerReply) -> None:
            harness.check(reply, stream=stream)

        check()
    finally:
        harness.close()
    # the generated replies exercised both sides of the boundary
    assert harness.outcomes.get("valid", 0) > 0
    assert harness.outcomes.get("ModelResponseError", 0) > 0


# ----------------------------------------------------------------------------- fixed cases


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        ({"tool_calls": [7]}, "tool_calls[0] is the number 7"),
        ({"tool_calls": [{"function": {"name": 5, "arguments": "{}"}}]}, "function.name"),
        ({"content": 42}, "content is the number 42"),
        ({"content": [1, 2]}, "content[0]"),
        ({"content": "hi", "reasoning_content": {"a": 1}}, "reasoning_content"),
    ],
)
async def test_openai_fields_of_the_wrong_type_are_named(
    reply: dict[str, Any], named: str, fake_openai: Any
) -> None:
    body = copy.deepcopy(OPENAI_TEXT)
    body["choices"][0]["message"] = {"role": "assistant"} | reply
    server = await fake_openai(lambda _: BadBody(json.dumps(body).encode()))
    with pytest.raises(ModelResponseError, match="malformed reply") as caught:
        await make_model("openai", server.base_url).response(ask())
    assert named in str(caught.value)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_openai_finish_reason_list_and_odd_usage(stream: bool, fake_openai: Any) -> None:
    body = copy.deepcopy(OPENAI_TEXT)
    body["usage"] = {"prompt_tokens": -3, "completion_tokens": [1], "prompt_tokens_details": 7}
    chunks = openai_chunks()
    chunks[-1]["usage"] = body["usage"]
    good: ServerReply = (
        RawStream([sse(chunks, done=True)]) if stream else BadBody(json.dumps(body).encode())
    )
    server = await fake_openai(lambda _: good)
    model = make_model("openai", server.base_url)
    response = await call(model, stream, ask())  # odd usage counts are treated as missing
    assert response.usage.input_tokens == 0 and response.usage.output_tokens == 0

    body["choices"][0]["finish_reason"] = ["stop"]
    chunks[5]["choices"][0]["finish_reason"] = ["stop"]
    good = RawStream([sse(chunks, done=True)]) if stream else BadBody(json.dumps(body).encode())
    with pytest.raises(ModelResponseError, match="finish_reason is a list"):
        await call(model, stream, ask())


@pytest.mark.parametrize(
    ("chunk_delta", "named"),
    [
        ({"tool_calls": [{"index": "0", "function": {"name": "add"}}]}, "index"),
        ({"tool_calls": [{"index": -1, "function": {"name": "add"}}]}, "index"),
        ({"tool_calls": ["add"]}, "tool_calls[0] is the string"),
        ({"content": {"text": "hi"}}, "content is an object"),
    ],
)
async def test_openai_stream_bad_deltas_are_named(
    chunk_delta: dict[str, Any], named: str, fake_openai: Any
) -> None:
    chunks = openai_chunks()
    chunks[1]["choices"][0]["delta"] = chunk_delta
    server = await fake_openai(lambda _: RawStream([sse(chunks, done=True)]))
    with pytest.raises(ModelResponseError, match="malformed reply") as caught:
        await call(make_model("openai", server.base_url), True, ask())
    assert named in str(caught.value)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_deeply_nested_json_is_a_model_response_error(kind: str, stream: bool) -> None:
    reply = RawStream([sse([DEEP])]) if stream else BadBody(DEEP.encode())
    async with start_server(kind, lambda _: reply) as server:
        model = make_model(kind, server.base_url)
        with pytest.raises(ModelResponseError, match="nested too deeply"):
            await call(model, stream, ask())
        await model.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_sse_lines_over_512_kb_are_read_and_a_huge_event_is_refused(kind: str) -> None:
    big = "x" * 600_000
    if kind == "openai":
        chunks = openai_chunks()
        chunks[1]["choices"][0]["delta"]["content"] = big
        body = sse(chunks, done=True)
    else:
        events = anthropic_events()
        events[6]["delta"]["text"] = big
        body = sse(events)
    huge = [b"data: ", *[b"x" * (1 << 20)] * 17, b"\n\n"]  # 1 MB writes: no long loop step
    replies = [RawStream([body]), RawStream(huge)]
    async with start_server(kind, lambda _: replies.pop(0)) as server:
        model = make_model(kind, server.base_url)
        response = await call(model, True, ask())
        assert response.message.content == big
        with pytest.raises(ModelResponseError, match="over 16 MB"):
            await call(model, True, ask())
        await model.aclose()


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_text_sent_before_a_huge_event_is_passed_on_before_the_error(kind: str) -> None:
    head = sse(openai_chunks()[:2]) if kind == "openai" else sse(anthropic_events()[:7])
    huge = [b"data: ", *[b"x" * (1 << 20)] * 17, b"\n\n"]  # sent 1 MB at a time
    async with start_server(kind, lambda _: RawStream([head, *huge])) as server:
        seen = []
        with pytest.raises(ModelResponseError, match="over 16 MB"):
            async for event in make_model(kind, server.base_url).response_stream(ask()):
                seen.append(event)
    assert TextDelta("hel" if kind == "openai" else "hello") in seen


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_stream_cut_into_single_bytes_with_crlf_is_read(kind: str) -> None:
    body = sse(openai_chunks(), done=True) if kind == "openai" else sse(anthropic_events())
    body = body.replace(b"\n", b"\r\n")
    pieces = [body[i : i + 1] for i in range(len(body))]
    async with start_server(kind, lambda _: RawStream(pieces)) as server:
        model = make_model(kind, server.base_url)
        response = await call(model, True, ask())
        await model.aclose()
    assert response.message.tool_calls[0].name == "echo"
    assert response.message.tool_calls[0].arguments.replace(" ", "") == '{"text":"hi"}'


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_an_empty_reply_is_an_error_not_a_completed_run(kind: str, stream: bool) -> None:
    # An empty reply with a normal stop goes to the run loop (charged, sent back once); a second
    # one fails the run: never "completed" with nothing, never retried by the adapter.
    async with start_server(kind, lambda _: "") as server:
        agent = Agent(model=make_model(kind, server.base_url, retry=RetryPolicy(max_retries=2)))
        with pytest.raises(ModelResponseError, match="two empty replies in a row") as caught:
            await run_agent(agent, "hi", stream=stream)
        assert not caught.value.retryable
        assert len(server.requests) == 2
        assert agent.memory.runs[-1].usage.requests == 2
        await agent.model.aclose()  # type: ignore[attr-defined]


def test_an_empty_reply_at_the_token_limit_says_so() -> None:
    body = copy.deepcopy(OPENAI_TEXT)
    body["choices"][0]["message"]["content"] = None
    body["choices"][0]["finish_reason"] = "length"
    model = OpenAILike(id="fake", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ModelResponseError, match="raise max_tokens") as caught:
        model.parse_response(body)
    assert not caught.value.retryable


def test_openai_content_parts_are_joined_into_text() -> None:
    body = copy.deepcopy(OPENAI_TEXT)
    body["choices"][0]["message"]["content"] = [
        {"type": "text", "text": "hel"},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "lo"},
    ]
    model = OpenAILike(id="fake", base_url="http://127.0.0.1:9/v1")
    assert model.parse_response(body).message.content == "hello"


# ----------------------------------------------------------------------------- storage


@pytest.mark.parametrize(
    ("kind", "stream", "field", "value"),
    [
        ("openai", False, "content", 42),
        ("openai", False, "content", [1, "a"]),
        ("openai", False, "model", 7),
        ("openai", True, "content", 42),
        ("anthropic", False, "text", 42),
        ("anthropic", False, "model", [1]),
        ("anthropic", True, "text", ["a"]),
    ],
)
async def test_nothing_a_model_sends_poisons_a_stored_session(
    kind: str, stream: bool, field: str, value: Any, tmp_path: Any
) -> None:
    if kind == "openai" and not stream:
        body = copy.deepcopy(OPENAI_TEXT)
        target = body if field == "model" else body["choices"][0]["message"]
        target[field] = value
        hostile: ServerReply = BadBody(json.dumps(body).encode())
    elif kind == "openai":
        chunks = [*openai_chunks()[:3], openai_chunks()[5]]
        chunks[1]["choices"][0]["delta"]["content"] = value
        chunks[3]["choices"][0]["finish_reason"] = "stop"
        hostile = RawStream([sse(chunks, done=True)])
    elif not stream:
        body = copy.deepcopy(ANTHROPIC_TEXT)  # thinking and text, "end_turn"
        if field == "model":
            body["model"] = value
        else:
            body["content"][1]["text"] = value
        hostile = BadBody(json.dumps(body).encode())
    else:
        events = [*anthropic_events()[:8], *anthropic_events()[11:]]
        events[6]["delta"]["text"] = value
        events[8]["delta"]["stop_reason"] = "end_turn"
        hostile = RawStream([sse(events)])
    replies: list[ServerReply] = [hostile, "fine again"]
    database = open_storage(str(tmp_path / "sessions.db"))
    async with start_server(kind, lambda _: replies.pop(0)) as server:
        model = make_model(kind, server.base_url)
        agent = Agent(model=model, storage=database, session_id="s")
        # refusing the reply is fine; storing something unloadable is not
        with contextlib.suppress(ModelError):
            await run_agent(agent, "hi", stream=stream)
        fresh = Agent(model=model, storage=database, session_id="s")
        await fresh.load()
        again = await fresh.run("and now?")
        assert again.content == "fine again"
        for message in fresh.memory.runs[0].messages:
            if isinstance(message, AssistantMessage):
                assert isinstance(message.content, str | None)
                assert isinstance(message.model, str | None)
        await model.aclose()
    await database.aclose()


# ----------------------------------------------------------------------------- deadline


@pytest.mark.parametrize("where", ["adapter", "request settings"])
@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_trickling_stream_ends_at_the_request_deadline(kind: str, where: str) -> None:
    sent: list[int] = []

    def trickle() -> Iterator[bytes]:
        for n in range(40):  # 8 s of keep-alive comments, one every 0.2 s
            sent.append(n)
            yield b": keep-alive\n\n"

    async with start_server(kind, lambda _: RawStream(trickle(), interval=0.2)) as server:
        if where == "adapter":
            model = make_model(kind, server.base_url, timeout=5.0, request_timeout=1.0)
            request = ask()
        else:
            model = make_model(kind, server.base_url, timeout=5.0)
            request = ask(settings=ModelSettings(request_timeout=1.0))
        seen = []
        with pytest.raises(ModelTimeoutError, match="request_timeout") as caught:
            async for event in model.response_stream(request):
                seen.append(event)
        await model.aclose()
    assert "deadline of 1 s" in str(caught.value)
    assert not caught.value.retryable
    assert not seen
    assert len(sent) < 40  # the client gave up long before the server stopped trickling


async def test_the_deadline_bounds_all_attempts_together(fake_openai: Any) -> None:
    server = await fake_openai(lambda _: Hang())
    retry = RetryPolicy(max_retries=50, initial_delay=0.01, max_delay=0.01)
    model = make_model("openai", server.base_url, timeout=0.2, request_timeout=0.7, retry=retry)
    with pytest.raises(ModelTimeoutError, match="request deadline") as caught:
        await model.response(ask())
    assert not caught.value.retryable
    assert len(server.requests) < 50  # retrying stopped at the deadline, not after 51 attempts
    await model.aclose()


async def test_the_default_deadline_is_on_and_follows_a_longer_gap_timeout() -> None:
    model = OpenAILike(id="fake", base_url="http://127.0.0.1:9/v1")
    assert model._deadline(ModelSettings()).limit == 600.0
    slow = OpenAILike(id="fake", base_url="http://127.0.0.1:9/v1", timeout=900.0)
    assert slow._deadline(ModelSettings()).limit == 900.0
    assert slow._deadline(ModelSettings(request_timeout=5.0)).limit == 5.0


async def test_text_deltas_before_a_malformed_chunk_are_not_lost(fake_openai: Any) -> None:
    chunks = openai_chunks()
    chunks[3]["choices"][0]["delta"]["tool_calls"][0]["index"] = [0]
    server = await fake_openai(lambda _: RawStream([sse(chunks, done=True)]))
    seen = []
    with pytest.raises(ModelResponseError, match="index"):
        async for event in make_model("openai", server.base_url).response_stream(ask()):
            seen.append(event)
    assert TextDelta("hel") in seen
