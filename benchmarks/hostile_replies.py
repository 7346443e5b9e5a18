"""Hostile probe: malformed model replies. ``uv run python benchmarks/hostile_replies.py``

A fixed corpus of replies a careless or broken provider could send, for both wire formats (OpenAI
Chat Completions, Anthropic Messages) and both modes (one JSON body, a server-sent-event stream):
every reply field replaced by values of the wrong type or range (null, numbers, booleans, lists,
objects, negative and huge counts), deeply nested JSON, bodies and chunks that are not JSON, an
SSE line over 512 KB, events that are not objects, empty replies, streams that end early and a
stream that trickles keep-alive comments forever.

Each reply is served by the scripted loopback servers of ``agentica.testing`` to the real adapter
(``OpenAILike`` / ``Claude``) inside a real ``Agent`` run with SQLite storage; the next request
of a run (after a tool call) gets a plain text answer. Then a fresh ``Agent`` loads the session.
An attempt fails when

- the run raised anything but a typed ``ModelError`` (an untyped exception),
- the run did not end within ``HANG`` seconds (the adapter's gap timeout is 2 s, its overall
  request deadline 3 s),
- the run ended "completed" with no answer text (an empty reply passed off as an answer), or
- the stored session could not be loaded again (a reply poisoned the session).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, RunResponse, tool  # noqa: E402
from agentica.errors import ModelError  # noqa: E402
from agentica.models import Claude, OpenAIChat, OpenAILike, RetryPolicy  # noqa: E402
from agentica.storage.base import Storage  # noqa: E402
from agentica.storage.factory import open_storage  # noqa: E402
from agentica.testing import FakeAnthropicServer, FakeOpenAIServer  # noqa: E402
from agentica.testing.openai_server import BadBody, RawStream, ServerReply  # noqa: E402

GAP = 2.0  # the adapter's timeout between two chunks
DEADLINE = 3.0  # the adapter's overall deadline for one model request
HANG = 10.0  # a run still going after this long counts as a hang
CONCURRENCY = 24

# Values of the wrong type or range, put in place of each field in turn.
WRONG: list[Any] = [None, 7, -1.5, True, [1, "a"], {"a": 1}]
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than any JSON parser's recursion limit
DEEP_OBJECT = '{"a":' * 50_000 + "1" + "}" * 50_000


@tool
def echo(text: str) -> str:
    """Repeat the text.

    Args:
        text: what to repeat.
    """
    return text


# ----------------------------------------------------------------------------- corpus helpers


def _set(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = copy.deepcopy(data)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _mutations(name: str, base: Any, paths: list[tuple[Any, ...]]) -> Iterator[tuple[str, Any]]:
    for path in paths:
        for value in WRONG:
            yield f"{name}{list(path)}={json.dumps(value)}", _set(base, path, value)


def _body(value: Any) -> BadBody:
    return BadBody(json.dumps(value).encode())


def _sse(events: list[Any], *, done: bool = True, named: bool = False) -> RawStream:
    pieces: list[bytes] = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        if named and isinstance(event, dict) and isinstance(event.get("type"), str):
            pieces.append(f"event: {event['type']}\ndata: {data}\n\n".encode())
        else:
            pieces.append(f"data: {data}\n\n".encode())
    if done:
        pieces.append(b"data: [DONE]\n\n")
    return RawStream(pieces)


def _trickle() -> RawStream:
    return RawStream((b": keep-alive\n\n" for _ in range(1000)), interval=0.5)


# ----------------------------------------------------------------------------- OpenAI
# Valid replies (also the fixtures of tests/test_hostile_replies.py): a text answer and a call of
# ``echo``, as one JSON body and as stream chunks (role, text, reasoning, a call in two argument
# pieces, finish, usage).

OPENAI_TEXT: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "fake",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello", "reasoning_content": "hm"},
            "finish_reason": "stop",
        }
    ],
    "usage": {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0},
    },
}
OPENAI_TOOL: dict[str, Any] = _set(
    OPENAI_TEXT,
    ("choices", 0, "message"),
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "echo", "arguments": '{"text": "hi"}'},
            }
        ],
    },
)
OPENAI_TOOL["choices"][0]["finish_reason"] = "tool_calls"


def openai_json() -> list[tuple[str, ServerReply]]:
    m = ("choices", 0, "message")
    cases: list[tuple[str, Any]] = [
        *_mutations(
            "text",
            OPENAI_TEXT,
            [
                ("choices",),
                ("choices", 0),
                m,
                (*m, "content"),
                (*m, "reasoning_content"),
                ("choices", 0, "finish_reason"),
                ("usage",),
                ("usage", "prompt_tokens"),
                ("usage", "prompt_tokens_details"),
                ("model",),
                ("id",),
            ],
        ),
        *_mutations(
            "tool",
            OPENAI_TOOL,
            [
                (*m, "tool_calls"),
                (*m, "tool_calls", 0),
                (*m, "tool_calls", 0, "id"),
                (*m, "tool_calls", 0, "function"),
                (*m, "tool_calls", 0, "function", "name"),
                (*m, "tool_calls", 0, "function", "arguments"),
            ],
        ),
    ]
    replies: list[tuple[str, ServerReply]] = [(n, _body(v)) for n, v in cases]
    replies += [
        ("deep nesting body", BadBody(DEEP.encode())),
        (
            "deep nesting content",
            BadBody(json.dumps(OPENAI_TEXT).replace('"hello"', DEEP).encode()),
        ),
        (
            "deep nesting arguments",
            BadBody(
                json.dumps(OPENAI_TOOL).replace('"{\\"text\\": \\"hi\\"}"', DEEP_OBJECT).encode()
            ),
        ),
        ("not JSON", BadBody(b"<html>502 Bad Gateway</html>")),
        ("empty body", BadBody(b"")),
        ("body is a list", _body([OPENAI_TEXT])),
        ("empty content", _body(_set(OPENAI_TEXT, (*m, "content"), ""))),
        ("null content, no calls", _body(_set(OPENAI_TEXT, (*m, "content"), None))),
        (
            "content parts",
            _body(_set(OPENAI_TEXT, (*m, "content"), [{"type": "text", "text": "hi"}])),
        ),
        ("huge usage", _body(_set(OPENAI_TEXT, ("usage", "prompt_tokens"), 10**40))),
        (
            "empty tool name",
            _body(_set(OPENAI_TOOL, (*m, "tool_calls", 0, "function", "name"), "")),
        ),
        (
            "deep nesting in arguments text",
            _body(_set(OPENAI_TOOL, (*m, "tool_calls", 0, "function", "arguments"), DEEP_OBJECT)),
        ),
    ]
    return replies


_OA_CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake"}


def openai_chunks() -> list[dict[str, Any]]:
    def delta(d: dict[str, Any], finish: Any = None) -> dict[str, Any]:
        return _OA_CHUNK | {"choices": [{"index": 0, "delta": d, "finish_reason": finish}]}

    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": "echo", "arguments": '{"text"'}}  # fmt: skip
    return [
        delta({"role": "assistant", "content": ""}),
        delta({"content": "hel"}),
        delta({"reasoning_content": "hm"}),
        delta({"tool_calls": [call]}),
        delta({"tool_calls": [{"index": 0, "function": {"arguments": ': "hi"}'}}]}),
        delta({}, "tool_calls"),
        _OA_CHUNK | {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    ]


def openai_stream() -> list[tuple[str, ServerReply]]:
    base = openai_chunks()
    paths = [
        (1, "choices"),
        (1, "choices", 0),
        (1, "choices", 0, "delta"),
        (1, "choices", 0, "delta", "content"),
        (2, "choices", 0, "delta", "reasoning_content"),
        (3, "choices", 0, "delta", "tool_calls"),
        (3, "choices", 0, "delta", "tool_calls", 0),
        (3, "choices", 0, "delta", "tool_calls", 0, "index"),
        (4, "choices", 0, "delta", "tool_calls", 0, "index"),
        (3, "choices", 0, "delta", "tool_calls", 0, "id"),
        (3, "choices", 0, "delta", "tool_calls", 0, "function"),
        (3, "choices", 0, "delta", "tool_calls", 0, "function", "name"),
        (4, "choices", 0, "delta", "tool_calls", 0, "function", "arguments"),
        (5, "choices", 0, "finish_reason"),
        (6, "usage"),
        (6, "usage", "completion_tokens"),
    ]
    replies: list[tuple[str, ServerReply]] = [
        (name, _sse(chunks)) for name, chunks in _mutations("chunks", base, paths)
    ]
    text_only = [base[0], base[1], _set(base[5], ("choices", 0, "finish_reason"), "stop")]
    call = ("choices", 0, "delta", "tool_calls", 0)
    big = _set(base[1], ("choices", 0, "delta", "content"), "x" * 600_000)
    replies += [
        ("chunk is a list", _sse([base[0], [1, 2], *base[1:]])),
        ("chunk is a number", _sse([base[0], 3, *base[1:]])),
        ("chunk is a string", _sse([base[0], '"text"', *base[1:]])),
        ("chunk not JSON", _sse([base[0], "{not json", *base[1:]])),
        ("deep nesting chunk", _sse([base[0], DEEP, *base[1:]])),
        ("SSE line over 512 KB", _sse([base[0], big, base[-2]])),
        ("SSE line over 16 MB", _sse([base[0], "x" * (17 << 20), base[-2]])),
        ("no finish, no [DONE]", _sse(base[:3], done=False)),
        ("only keep-alive comments", RawStream([b": ping\n\n"] * 5)),
        ("empty stream", RawStream([b""])),
        ("[DONE] only", RawStream([b"data: [DONE]\n\n"])),
        ("empty reply", _sse([base[0], _set(base[5], ("choices", 0, "finish_reason"), "stop")])),
        ("binary garbage", RawStream([b"\xff\xfe\x00data: \x80\x81\n\n"])),
        ("CRLF lines", RawStream([p.replace(b"\n", b"\r\n") for p in _sse(text_only).pieces])),
        ("index gap", _sse([*base[:3], _set(base[3], (*call, "index"), 5), base[5]])),
        ("huge index", _sse([*base[:3], _set(base[3], (*call, "index"), 10**30), base[5]])),
        ("tool call without name",
         _sse([*base[:3], _set(base[3], (*call, "function", "name"), None), base[5]])),
        ("deep nesting in arguments text",
         _sse([*base[:3], _set(base[3], (*call, "function", "arguments"), DEEP_OBJECT), base[5]])),
        ("error object mid-stream", _sse([base[0], {"error": {"message": [1]}}])),
        ("trickle of keep-alive comments", _trickle()),
    ]  # fmt: skip
    return replies


# ----------------------------------------------------------------------------- Anthropic
# Valid replies: thinking and text (or a call of ``echo``) as one JSON body, and as stream events
# (thinking with signature, text, a call of ``echo``, stop and usage).

_AN_USAGE = {"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 0}
ANTHROPIC_TEXT: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-fake",
    "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig"},
        {"type": "text", "text": "hello"},
    ],
    "stop_reason": "end_turn",
    "usage": _AN_USAGE,
}
ANTHROPIC_TOOL: dict[str, Any] = _set(
    _set(ANTHROPIC_TEXT, ("content", 1), {"type": "tool_use", "id": "tu_1", "name": "echo",
                                    "input": {"text": "hi"}}),
    ("stop_reason",),
    "tool_use",
)  # fmt: skip


def anthropic_json() -> list[tuple[str, ServerReply]]:
    cases: list[tuple[str, Any]] = [
        *_mutations(
            "text",
            ANTHROPIC_TEXT,
            [
                ("content",),
                ("content", 1),
                ("content", 1, "type"),
                ("content", 1, "text"),
                ("content", 0, "thinking"),
                ("content", 0, "signature"),
                ("stop_reason",),
                ("usage",),
                ("usage", "input_tokens"),
                ("usage", "cache_read_input_tokens"),
                ("model",),
                ("id",),
            ],
        ),
        *_mutations(
            "tool",
            ANTHROPIC_TOOL,
            [
                ("content", 1, "id"),
                ("content", 1, "name"),
                ("content", 1, "input"),
            ],
        ),
    ]
    replies: list[tuple[str, ServerReply]] = [(n, _body(v)) for n, v in cases]
    replies += [
        ("deep nesting body", BadBody(DEEP.encode())),
        ("deep nesting input", BadBody(
            json.dumps(ANTHROPIC_TOOL).replace('{"text": "hi"}', DEEP_OBJECT).encode()
        )),
        ("deep nesting thinking block", BadBody(
            json.dumps(ANTHROPIC_TEXT).replace('"sig"', DEEP).encode()
        )),
        ("not JSON", BadBody(b"<html>502 Bad Gateway</html>")),
        ("body is a list", _body([ANTHROPIC_TEXT])),
        ("no content blocks", _body(_set(ANTHROPIC_TEXT, ("content",), []))),
        ("empty text", _body(_set(ANTHROPIC_TEXT, ("content", 1, "text"), ""))),
        ("error body with 200", _body({"type": "error", "error": {"type": "overloaded_error",
                                                                  "message": "Overloaded"}})),
        ("huge usage", _body(_set(ANTHROPIC_TEXT, ("usage", "output_tokens"), 10**40))),
        ("empty tool name", _body(_set(ANTHROPIC_TOOL, ("content", 1, "name"), ""))),
    ]  # fmt: skip
    return replies


def anthropic_events() -> list[dict[str, Any]]:
    return [
        {"type": "message_start", "message": {"id": "msg_1", "type": "message",
         "role": "assistant", "model": "claude-fake", "content": [], "usage": _AN_USAGE}},
        {"type": "content_block_start", "index": 0,
         "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "thinking_delta", "thinking": "hm"}},
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "signature_delta", "signature": "sig"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1,
         "delta": {"type": "text_delta", "text": "hello"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "tu_1", "name": "echo", "input": {}}},
        {"type": "content_block_delta", "index": 2,
         "delta": {"type": "input_json_delta", "partial_json": '{"text": "hi"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
         "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]  # fmt: skip


def anthropic_stream() -> list[tuple[str, ServerReply]]:
    base = anthropic_events()
    paths = [
        (0, "message"),
        (0, "message", "usage"),
        (0, "message", "usage", "input_tokens"),
        (1, "index"),
        (1, "content_block"),
        (3, "delta", "signature"),
        (2, "delta"),
        (2, "delta", "thinking"),
        (6, "delta", "text"),
        (6, "index"),
        (8, "content_block", "name"),
        (8, "content_block", "id"),
        (9, "delta", "partial_json"),
        (10, "index"),
        (11, "delta"),
        (11, "delta", "stop_reason"),
        (11, "usage"),
    ]
    replies: list[tuple[str, ServerReply]] = [
        (name, _sse(events, done=False, named=True))
        for name, events in _mutations("events", base, paths)
    ]
    big = _set(base[6], ("delta", "text"), "x" * 600_000)
    text_only = [*base[:8], _set(base[11], ("delta", "stop_reason"), "end_turn"), base[12]]
    empty = [base[0], _set(base[11], ("delta", "stop_reason"), "end_turn"), base[12]]
    replies += [
        ("event is a list", _sse([base[0], [1], *base[1:]], done=False)),
        ("event not JSON", _sse([base[0], "{not json", *base[1:]], done=False)),
        ("deep nesting event", _sse([base[0], DEEP, *base[1:]], done=False)),
        ("deep nesting tool input", _sse(
            [*base[:8], _set(base[8], ("content_block", "input"), {"a": [[[[1]]]]}), base[10],
             *base[11:]], done=False)),
        ("SSE line over 512 KB", _sse([*base[:6], big, *text_only[7:]], done=False)),
        ("no message_stop", _sse(base[:-1], done=False)),
        ("empty reply", _sse(empty, done=False)),
        ("only pings", RawStream([b"event: ping\ndata: {\"type\": \"ping\"}\n\n"] * 3)),
        ("tool_use without name", _sse([*base[:8], _set(base[8], ("content_block", "name"), None),
                                        *base[9:]], done=False)),
        ("delta for unknown block", _sse([*base[:6], _set(base[6], ("index",), 42),
                                          *text_only[7:]], done=False)),
        ("error event", _sse([base[0], {"type": "error", "error": {"type": "overloaded_error",
                                                                   "message": "Overloaded"}}],
                             done=False)),
        ("error event, odd fields", _sse([base[0], {"type": "error", "error": [1]}], done=False)),
        ("trickle of keep-alive comments", _trickle()),
    ]  # fmt: skip
    return replies


# ----------------------------------------------------------------------------- running


def _models(url: str, kind: str) -> Any:
    kwargs: dict[str, Any] = {
        "timeout": GAP,
        "retry": RetryPolicy(max_retries=1, initial_delay=0.01),
    }
    cls = OpenAIChat if kind == "openai" else Claude
    if "request_timeout" in inspect.signature(cls).parameters:
        kwargs["request_timeout"] = DEADLINE
    if kind == "openai":
        return OpenAILike(id="fake", base_url=url, **kwargs)
    return Claude(id="claude-fake", api_key="test", base_url=url, prompt_caching=False, **kwargs)


async def _family(
    kind: str, stream: bool, cases: list[tuple[str, ServerReply]], storage: Storage
) -> list[str]:
    replies: dict[int, ServerReply] = {}

    def responder(body: dict[str, Any]) -> ServerReply:
        text = json.dumps(body.get("messages", []))
        if '"role": "tool"' in text or '"tool_result"' in text:
            return "done"  # the run's next request, after the tool call
        for number, reply in replies.items():
            if f"[case {number}]" in text:
                return reply
        return "done"

    server_cls: Callable[..., Any] = FakeOpenAIServer if kind == "openai" else FakeAnthropicServer
    server = server_cls(
        responder, record=False, **({} if kind == "openai" else {"validate": False})
    )
    await server.start()
    model = _models(server.base_url, kind)
    failures: list[str] = []
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(number: int, name: str, reply: ServerReply) -> None:
        replies[number] = reply
        async with gate:
            session = f"{kind}-{stream}-{number}"
            problem = await _attempt(model, storage, session, stream, number)
        if problem is not None:
            failures.append(f"{kind} {'stream' if stream else 'json'} {name!r}: {problem}")

    try:
        await asyncio.gather(*(one(n, name, reply) for n, (name, reply) in enumerate(cases)))
    finally:
        await model.aclose()
        await server.stop()
    return failures


async def run_agent(agent: Agent, text: str, *, stream: bool) -> RunResponse:
    """``agent.run(text)``, or ``agent.run_stream(text)`` read to the end."""
    if not stream:
        return await agent.run(text)
    run = agent.run_stream(text)
    async with run:
        async for _ in run:
            pass
    return run.response


async def _attempt(
    model: Any, storage: Storage, session: str, stream: bool, number: int
) -> str | None:
    """None when the reply was handled, else what went wrong."""
    agent_input = f"[case {number}] say hello"
    agent = Agent(model=model, tools=[echo], storage=storage, session_id=session)
    try:
        async with asyncio.timeout(HANG):
            response: RunResponse | None = await run_agent(agent, agent_input, stream=stream)
    except TimeoutError:
        return f"hang (no end after {HANG:.0f} s)"
    except ModelError:
        response = None
    except Exception as exc:
        return f"untyped {type(exc).__name__}: {str(exc)[:120]}"
    if response is not None and response.stop_reason == "completed" and not response.content:
        return "completed with no answer text"
    fresh = Agent(model=model, storage=storage, session_id=session)
    try:
        await fresh.load()
    except Exception as exc:
        return f"session does not load: {type(exc).__name__}: {str(exc)[:120]}"
    return None


FAMILIES: list[tuple[str, bool, Callable[[], list[tuple[str, ServerReply]]]]] = [
    ("openai", False, openai_json),
    ("openai", True, openai_stream),
    ("anthropic", False, anthropic_json),
    ("anthropic", True, anthropic_stream),
]


async def _run_all(verbose: bool) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        storage = open_storage(str(Path(tmp) / "sessions.db"))
        for kind, stream, build in FAMILIES:
            cases = build()
            try:
                failures = await _family(kind, stream, cases, storage)
            finally:
                if (kind, stream) == FAMILIES[-1][:2]:
                    await storage.aclose()
            if verbose:
                for line in failures:
                    print("  " + line)
            label = "OpenAI" if kind == "openai" else "Anthropic"
            rows.append(
                {
                    "family": f"model replies: {label} {'stream' if stream else 'JSON'}",
                    "attempts": len(cases),
                    "failures": len(failures),
                    "what": (
                        "malformed replies (wrong-typed fields, deep nesting, huge lines, empty "
                        "replies, trickling streams) through the real adapter and an Agent with "
                        "SQLite storage; failure = untyped exception, hang, empty 'completed' "
                        "run, or a session that no longer loads"
                    ),
                }
            )
    return rows


def run(verbose: bool = False) -> list[dict[str, Any]]:
    return asyncio.run(_run_all(verbose))


if __name__ == "__main__":
    for row in run(verbose=True):
        print(row)
