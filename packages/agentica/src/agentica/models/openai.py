"""The OpenAI Chat Completions adapter: ``OpenAIChat`` and ``OpenAILike``.

Covers the official API and every server that speaks its wire format (vLLM, llama.cpp, Ollama,
DeepSeek, Qwen/DashScope, ...). The request JSON is built here and posted over one pooled
aiohttp session per model object and event loop (no SDK: a call costs well under 1 ms of CPU).

Supported: tools and parallel tool calls, streaming with tool-call deltas, usage (cached and
reasoning tokens), ``tool_choice``, structured output (``response_format`` with a JSON schema),
``reasoning_content``, retries with backoff. A refusal is the reply's content, not a fault.
Tool calls are native, described in the prompt (``tool_mode="text"``), or native until the
server fails a reply on its own tool-call parsing (``"auto"``, the default of ``OpenAILike``):
then that request is sent again in text mode, and the model keeps text mode.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

from agentica.errors import ModelError, ModelHTTPError, ModelResponseError, UsageError
from agentica.messages import (
    AssistantMessage,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from agentica.models._adapter import Delta, HttpModel, StreamDecoder, decode_event
from agentica.models._transport import (
    ReplyFieldError,
    describe,
    int_field,
    list_field,
    object_field,
    text_field,
    token_count,
)
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    StreamAssembler,
    new_tool_call_id,
)
from agentica.models.chat_template import prompted_messages
from agentica.models.openai_wire import message_to_wire
from agentica.models.pricing import ModelPrice
from agentica.models.retry import RetryPolicy
from agentica.models.toolparse import ToolCallStreamSplitter, as_tool_calls, parse_tool_calls

__all__ = ["OpenAIChat", "OpenAILike", "is_tool_format_error"]

_FINISH = {"function_call": "tool_calls", "eos": "stop", "end_turn": "stop"}
ToolMode = Literal["native", "text", "auto"]
log = logging.getLogger(__name__)

# What servers say when their own parser fails on a reply's tool call: llama.cpp ("The model
# produced output that does not match the expected ... format", "Failed to parse input at pos",
# "Failed to parse tool call ..."), Ollama ("error parsing tool call: raw=..."), vLLM ("Error in
# extracting tool call ...", its tool parsers' errors); or that it cannot take native tools at
# all (llama.cpp without --jinja, Ollama's "... does not support tools").
_TOOL_FORMAT = re.compile(
    r"does not match the expected [\w -]*format|failed to parse input at pos"
    r"|failed to parse tool call|error parsing tool call|extracting tool call"
    r"|tool[ _-]?call[ _-]?parser|tools param requires --jinja|does not support tools",
    re.IGNORECASE,
)


def is_tool_format_error(error: ModelError) -> bool:
    """Whether ``error`` is a server failing a reply because of its own tool-call parsing."""
    if isinstance(error, ModelHTTPError):
        if error.status < 400 or error.status in (401, 403, 404, 429):
            return False
        return bool(_TOOL_FORMAT.search(f"{error} {error.body}"))
    return isinstance(error, ModelResponseError) and bool(_TOOL_FORMAT.search(str(error)))


def _usage(raw: Any) -> Usage:
    """Usage from the reply's ``usage``; an odd value counts as missing (bookkeeping only)."""
    if not isinstance(raw, dict):
        return Usage()
    prompt_details = raw.get("prompt_tokens_details")
    completion_details = raw.get("completion_tokens_details")
    prompt_details = prompt_details if isinstance(prompt_details, dict) else {}
    completion_details = completion_details if isinstance(completion_details, dict) else {}
    cached = token_count(prompt_details.get("cached_tokens")) or token_count(
        raw.get("prompt_cache_hit_tokens")
    )
    return Usage(
        input_tokens=token_count(raw.get("prompt_tokens")),
        output_tokens=token_count(raw.get("completion_tokens")),
        cache_read_tokens=cached,
        reasoning_tokens=token_count(completion_details.get("reasoning_tokens")),
    )


def _arguments(function: dict[str, Any], where: str) -> str:
    """A call's arguments as JSON text: a string as sent, an object encoded, null as empty."""
    raw = function.get("arguments")
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return json.dumps(raw, ensure_ascii=False)
    raise ReplyFieldError(f"{where}.arguments is {describe(raw)}, not a JSON string or object")


def _content(obj: dict[str, Any], key: str, where: str) -> str | None:
    """Text content: a string, or a list of text parts (some compatible servers) joined."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        texts: list[str] = []
        for n, part in enumerate(value):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("type"), str):
                if part["type"] == "text":
                    texts.append(text_field(part, "text", f"{where}.{key}[{n}]") or "")
            else:
                raise ReplyFieldError(f"{where}.{key}[{n}] is {describe(part)}, not a text part")
        return "".join(texts)
    raise ReplyFieldError(f"{where}.{key} is {describe(value)}, not a string")


def _reasoning(obj: dict[str, Any], where: str) -> str | None:
    return text_field(obj, "reasoning_content", where) or text_field(obj, "reasoning", where)


def _finish(obj: dict[str, Any], where: str) -> str | None:
    finish = text_field(obj, "finish_reason", where)
    return _FINISH.get(finish, finish) if finish else None


def _message_of(data: Any) -> dict[str, Any]:
    """``choices[0].message`` of a non-streamed answer."""
    problem = None
    if not isinstance(data, dict):
        problem = f"the body is {describe(data)}"
    elif not isinstance(choices := data.get("choices"), list) or not choices:
        problem = f"choices is {describe(data.get('choices'))}"
    elif not isinstance(choice := choices[0], dict):
        problem = f"choices[0] is {describe(choice)}"
    elif not isinstance(msg := choice.get("message"), dict):
        problem = f"choices[0].message is {describe(choice.get('message'))}"
    else:
        return msg
    raise ReplyFieldError(
        f"there is no choices[0].message object ({problem}): {json.dumps(data)[:300]}"
    )


def _tool_call(raw: Any, where: str) -> ToolCall:
    if not isinstance(raw, dict):
        raise ReplyFieldError(f"{where} is {describe(raw)}, not a tool call object")
    function = object_field(raw, "function", where) or {}
    name = text_field(function, "name", f"{where}.function")
    if not name:
        raise ReplyFieldError(f"{where}.function.name is missing or empty")
    return ToolCall(
        id=text_field(raw, "id", where) or new_tool_call_id(),
        name=name,
        arguments=_arguments(function, f"{where}.function") or "{}",
    )


class OpenAIChat(HttpModel[Sequence[str]]):
    """A model served through the OpenAI Chat Completions API.

    Args:
        id: the model name, e.g. ``"gpt-4o-mini"``.
        api_key: the key; defaults to ``$OPENAI_API_KEY``. Required for the official endpoint.
        base_url: the API root; defaults to ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        settings: default ``ModelSettings`` for every request (an agent's settings override them).
        retry: the ``RetryPolicy`` for failed requests.
        timeout: seconds for one request (for a stream: the longest wait between two chunks).
        request_timeout: the overall deadline of one model call in seconds, retries included
            (``None``: 600 s, or ``timeout`` when that is longer); ``ModelSettings`` may override.
        headers: extra HTTP headers sent with every request.
        price: the price per million tokens, when the built-in table does not know the model.
        context_window: the model's context window in tokens, when known.
        max_connections: the size of the connection pool.
        max_tokens_field: the request field for ``max_tokens`` (``"max_completion_tokens"`` on
            the official API, ``"max_tokens"`` on compatible servers).
        tool_mode: ``"native"`` (the API's tools and tool_calls), ``"text"`` for models
            without native tool calling (tools are described in the system prompt, calls are
            parsed from the reply text by ``agentica.models.toolparse``, results go back as
            text), or ``"auto"``: native, with a call the model wrote in its text parsed too,
            until the server fails a reply on its own tool-call parsing (llama.cpp's, vLLM's
            and Ollama's errors are recognised); that request is then sent again in text mode,
            and this model object stays in text mode (``text_mode`` says so).
        send_reasoning: send earlier replies' reasoning back as ``reasoning_content`` (some
            thinking models require it with tool calls; most servers reject or ignore it).
    """

    api_key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"
    base_url_env = "OPENAI_BASE_URL"

    def __init__(
        self,
        id: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        request_timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        price: ModelPrice | None = None,
        context_window: int | None = None,
        max_connections: int = 1000,
        max_tokens_field: str | None = None,
        send_reasoning: bool = False,
        tool_mode: ToolMode = "native",
        provider: str = "openai",
    ) -> None:
        if not id:
            raise UsageError("a model id is required, e.g. OpenAIChat(id='gpt-4o-mini')")
        super().__init__(
            id,
            provider=provider,
            base_url=base_url,
            settings=settings,
            retry=retry,
            timeout=timeout,
            request_timeout=request_timeout,
            price=price,
            max_connections=max_connections,
        )
        key = self._api_key(
            api_key,
            f"{type(self).__name__}({id!r})",
            " For a local OpenAI-compatible server use "
            "OpenAILike(id=..., base_url='http://127.0.0.1:PORT/v1').",
        )
        self.context_window = context_window
        self.send_reasoning = send_reasoning
        if tool_mode not in ("native", "text", "auto"):
            raise UsageError(f"tool_mode must be 'native', 'text' or 'auto', not {tool_mode!r}")
        self.tool_mode: ToolMode = tool_mode
        self._fell_back = False
        self._max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if self.base_url == self.default_base_url else "max_tokens"
        )
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        if headers:
            self._headers.update(headers)

    # ----------------------------------------------------------------- request building

    def _path(self) -> str:
        return "/chat/completions"

    @property
    def text_mode(self) -> bool:
        """Whether tool calls go through the prompt and the reply text (``tool_mode="text"``,
        or ``"auto"`` after the server failed on its own tool-call parsing)."""
        return self.tool_mode == "text" or self._fell_back

    def _fall_back(self, error: ModelError, request: ModelRequest) -> bool:
        """In auto mode, switch to text mode for good when the server failed on its own
        tool-call parsing; whether it did (the request is then sent again)."""
        if self.tool_mode != "auto" or self._fell_back or not request.tools:
            return False
        if not is_tool_format_error(error):
            return False
        self._fell_back = True
        log.warning(
            "%s could not parse model %r's tool call itself (%s); its tool calls go through "
            "the prompt and the reply text from now on (tool_mode='text')",
            self._provider, self._id, str(error)[:200],
        )  # fmt: skip
        return True

    def _refine(self, error: ModelError) -> None:
        if is_tool_format_error(error):  # the same reply fails the same way: no identical retry
            error.retryable = False

    async def response(self, request: ModelRequest) -> ModelResponse:
        try:
            return await super().response(request)
        except ModelError as error:
            if not self._fall_back(error, request):
                raise
        return await super().response(request)

    async def response_stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        shown = False
        try:
            async with aclosing(super().response_stream(request)) as events:
                async for event in events:
                    shown = True
                    yield event
            return
        except ModelError as error:
            if not self._fall_back(error, request) or shown:  # (text shown cannot be taken back)
                raise
        async with aclosing(super().response_stream(request)) as again:
            async for event in again:
                yield event

    def build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        s = self.settings.merged(request.settings)
        messages = request.messages
        tools = request.tools
        if self.text_mode:
            messages = prompted_messages(
                messages,
                () if s.tool_choice == "none" else tools,
                parallel=s.parallel_tool_calls is not False,
                listed=request.listed_tools,
            )
            tools = ()
        body: dict[str, Any] = {
            "model": self._id,
            "messages": [message_to_wire(m, send_reasoning=self.send_reasoning) for m in messages],
        }
        if tools:
            _put_tools(body, tools, s)
        if request.output_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output_schema.name,
                    "schema": request.output_schema.schema,
                    "strict": request.output_schema.strict,
                },
            }
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.max_tokens is not None:
            body[self._max_tokens_field] = s.max_tokens
        if s.stop:
            body["stop"] = list(s.stop)
        if s.seed is not None:
            body["seed"] = s.seed
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if s.extra_body:
            body.update(s.extra_body)
        return body

    def _context(self, request: ModelRequest) -> Sequence[str]:
        """Tool names to look for in the reply text (text and auto tool modes)."""
        choice = self.settings.merged(request.settings).tool_choice
        if self.tool_mode == "native" or choice == "none":
            return []
        return [t.name for t in request.tools]

    # ----------------------------------------------------------------- responses

    def parse_response(self, data: Any, text_tools: Sequence[str] = ()) -> ModelResponse:
        """Turn a decoded Chat Completions answer into a ``ModelResponse``.

        Every field is checked: a value of the wrong type in what makes the answer (content,
        tool calls, finish reason, reasoning), or a reply with no text and no tool calls cut at
        the token limit or withheld by a content filter, raises ``ModelResponseError`` saying
        what was wrong (another empty reply is passed on, for the run loop to send back); odd
        bookkeeping values (usage counts, id, model name) count as missing. ``text_tools``: tool
        names whose calls are parsed from the reply text (text tool mode).
        """
        return self._reply(data, text_tools)

    def _parse(self, data: Any, text_tools: Sequence[str]) -> ModelResponse:
        msg = _message_of(data)
        where = "choices[0].message"
        calls = [
            _tool_call(raw, f"{where}.tool_calls[{n}]")
            for n, raw in enumerate(list_field(msg, "tool_calls", where) or ())
        ]
        content = _content(msg, "content", where) or text_field(msg, "refusal", where) or None
        reasoning = _reasoning(msg, where) or None
        finish = _finish(data["choices"][0], "choices[0]")
        if text_tools and content and not calls:
            parsed = parse_tool_calls(content, text_tools)
            calls, content = as_tool_calls(parsed), parsed.text or None
        finish = finish or ("tool_calls" if calls else "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        model = data.get("model")
        response_id = data.get("id")
        message = AssistantMessage(
            content=content,
            tool_calls=calls,
            reasoning=reasoning,
            usage=_usage(data.get("usage")),
            model=model if isinstance(model, str) and model else self._id,
            finish_reason=finish,
        )
        return ModelResponse(
            message=message,
            provider=self._provider,
            response_id=response_id if isinstance(response_id, str) else None,
        )

    def _decoder(self, context: Sequence[str]) -> StreamDecoder:
        return _StreamReply(self, context)


def _put_tools(body: dict[str, Any], tools: Sequence[ToolDefinition], s: ModelSettings) -> None:
    """The tool fields of a request body: ``tools``, ``tool_choice``, ``parallel_tool_calls``."""
    body["tools"] = [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
            }
            | ({"strict": True} if t.strict else {}),
        }
        for t in tools
    ]
    if s.tool_choice is not None:
        body["tool_choice"] = (
            s.tool_choice
            if s.tool_choice in ("auto", "none", "required")
            else {"type": "function", "function": {"name": s.tool_choice}}
        )
    if s.parallel_tool_calls is not None:
        body["parallel_tool_calls"] = s.parallel_tool_calls


class _StreamReply:
    """The state of one streamed Chat Completions reply: checks each chunk, keeps the deltas."""

    __slots__ = (
        "_adapter",
        "_assembler",
        "_indexes",
        "_last_index",
        "_next_index",
        "_splitter",
        "done",
        "finish_reason",
        "model_name",
        "response_id",
        "usage",
    )

    def __init__(self, adapter: OpenAIChat, text_tools: Sequence[str]) -> None:
        self._adapter = adapter
        self._assembler = StreamAssembler()
        self._splitter = ToolCallStreamSplitter(text_tools) if text_tools else None
        self._indexes: dict[str, int] = {}  # call id -> index, for servers that leave it out
        self._next_index = 0
        self._last_index = 0
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.model_name = adapter.id
        self.done = False

    def feed(self, name: str, data: str) -> list[Delta]:
        """The deltas of one server-sent event (raises ``ReplyFieldError`` for a bad chunk)."""
        if data.strip() == "[DONE]":
            self.done = True  # read on to the end of the body so the connection is reused
            return []
        adapter = self._adapter
        chunk = decode_event(data, adapter, "chunk")
        if chunk.get("error"):
            err = chunk["error"]
            detail = err.get("message") if isinstance(err, dict) else err
            raise ModelResponseError(
                f"{adapter.provider} reported an error mid-stream for model "
                f"{adapter.id!r}: {str(detail)[:500]}",
                provider=adapter.provider,
                model=adapter.id,
                retryable=True,
            )
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model_name = chunk["model"]
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        choices = list_field(chunk, "choices", "chunk")
        if not choices:
            return []
        choice = choices[0]
        if not isinstance(choice, dict):
            raise ReplyFieldError(f"chunk.choices[0] is {describe(choice)}, not an object")
        out = self._deltas(choice)
        for item in out:
            self._assembler.add(item)
        return out

    def _deltas(self, choice: dict[str, Any]) -> list[Delta]:
        """The deltas of a chunk's ``choices[0]``; notes its finish reason."""
        delta = object_field(choice, "delta", "chunk.choices[0]") or {}
        where = "chunk.choices[0].delta"
        out: list[Delta] = []
        text = _content(delta, "content", where)
        refusal = text_field(delta, "refusal", where)
        if refusal:  # a refusal is the answer's text
            text = (text or "") + refusal
        reasoning = _reasoning(delta, where)
        raw_calls = list_field(delta, "tool_calls", where) or ()
        finish = _finish(choice, "chunk.choices[0]")
        if text and self._splitter is not None:
            text = self._splitter.feed(text)
        if text:
            out.append(TextDelta(text))
        if reasoning:
            out.append(ReasoningDelta(reasoning))
        for n, raw in enumerate(raw_calls):
            out.append(self._call_delta(raw, f"{where}.tool_calls[{n}]"))
        if finish:
            self.finish_reason = finish
        return out

    def _call_delta(self, raw: Any, where: str) -> ToolCallDelta:
        if not isinstance(raw, dict):
            raise ReplyFieldError(f"{where} is {describe(raw)}, not a tool call object")
        function = object_field(raw, "function", where) or {}
        index = int_field(raw, "index", where)
        call_id = text_field(raw, "id", where)
        if index is None:  # servers that leave out the index: a new id = a new call
            # (an id seen before is a later piece of its call, repeating the id)
            index = self._indexes.get(call_id, self._next_index) if call_id else self._last_index
        if call_id:
            self._indexes.setdefault(call_id, index)
        self._last_index = index
        self._next_index = max(self._next_index, index + 1)
        return ToolCallDelta(
            index=index,
            id=call_id,
            name=text_field(function, "name", f"{where}.function"),
            arguments=_arguments(function, f"{where}.function"),
        )

    def finish(self) -> tuple[list[Delta], AssistantMessage]:
        """The deltas held back to the end (text tool mode) and the assembled message."""
        adapter = self._adapter
        if not self.done and self.finish_reason is None:
            raise ModelResponseError(
                f"the stream from {adapter.provider} for model {adapter.id!r} ended before the "
                "reply was complete (no finish_reason, no [DONE])",
                provider=adapter.provider,
                model=adapter.id,
                retryable=True,
            )
        out: list[Delta] = []
        finish = self.finish_reason
        if self._splitter is not None:
            parsed = self._splitter.finish()
            if parsed.text:
                out.append(TextDelta(parsed.text))
            native = self._next_index > 0  # the server parsed calls itself (auto mode)
            for index, call in enumerate(() if native else as_tool_calls(parsed),
                                         start=self._next_index):  # fmt: skip
                out.append(
                    ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments)
                )
                finish = "tool_calls"
        for item in out:
            self._assembler.add(item)
        try:
            message = self._assembler.finish(
                usage=self.usage, model=self.model_name, finish_reason=finish
            )
        except ModelResponseError as exc:
            raise ReplyFieldError(str(exc)) from None
        if self._splitter is not None and message.content:
            message.content = message.content.strip() or None
        return out, message


class OpenAILike(OpenAIChat):
    """Any OpenAI-compatible server: ``OpenAILike(id="qwen2.5", base_url="http://host:8000/v1")``.

    The key is optional (many local servers need none) and read from ``api_key`` only; requests
    use ``max_tokens`` rather than the official API's ``max_completion_tokens``. Tool calls are
    ``tool_mode="auto"``: native, falling back to the prompt and the reply text for good when
    the server fails a reply on its own tool-call parsing (as llama.cpp's server does when a
    small model writes its call in a code fence).
    """

    def __init__(
        self,
        id: str,
        *,
        base_url: str,
        api_key: str | None = None,
        provider: str = "openai-compatible",
        tool_mode: ToolMode = "auto",
        **kwargs: Any,
    ) -> None:
        if not base_url:
            raise UsageError("OpenAILike needs base_url=..., e.g. 'http://127.0.0.1:8000/v1'")
        super().__init__(
            id, api_key=api_key or "", base_url=base_url, provider=provider,
            tool_mode=tool_mode, **kwargs,
        )  # fmt: skip
