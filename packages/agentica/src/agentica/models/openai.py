"""The OpenAI Chat Completions adapter: ``OpenAIChat`` and ``OpenAILike``.

Covers the official API and every server that speaks its wire format (vLLM, llama.cpp, Ollama,
DeepSeek, Qwen/DashScope, ...). The request JSON is built here from ``agentica.messages`` and
posted over one pooled aiohttp session per model object and event loop; no SDK is involved, which
keeps a model call's CPU cost well under a millisecond.

Supported: tools and parallel tool calls, streaming with tool-call deltas, usage (cached and
reasoning tokens), ``tool_choice``, structured output (``response_format`` with a JSON schema),
``reasoning_content`` from compatible servers, retries with backoff.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Literal

from agentica._http import HttpClientPool
from agentica.errors import ModelResponseError, UsageError
from agentica.messages import (
    AssistantMessage,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from agentica.models._transport import dumps, post_json, stream_sse
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseDone,
    StreamAssembler,
    new_tool_call_id,
)
from agentica.models.chat_template import prompted_messages
from agentica.models.openai_wire import message_to_wire
from agentica.models.pricing import ModelPrice, price_for
from agentica.models.retry import RetryPolicy, call_with_retries, stream_with_retries
from agentica.models.toolparse import ToolCallStreamSplitter, as_tool_calls, parse_tool_calls

__all__ = ["OpenAIChat", "OpenAILike"]

_FINISH = {"function_call": "tool_calls", "eos": "stop", "end_turn": "stop"}


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    prompt_details = raw.get("prompt_tokens_details") or {}
    completion_details = raw.get("completion_tokens_details") or {}
    cached = prompt_details.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or 0
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=int(cached),
        reasoning_tokens=int(completion_details.get("reasoning_tokens") or 0),
    )


def _arguments(raw: Any) -> str:
    if raw is None:
        return ""
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


class OpenAIChat:
    """A model served through the OpenAI Chat Completions API.

    Args:
        id: the model name, e.g. ``"gpt-4o-mini"``.
        api_key: the key; defaults to ``$OPENAI_API_KEY``. Required for the official endpoint.
        base_url: the API root; defaults to ``$OPENAI_BASE_URL`` or ``https://api.openai.com/v1``.
        settings: default ``ModelSettings`` for every request (an agent's settings override them).
        retry: the ``RetryPolicy`` for failed requests.
        timeout: seconds for one request (for a stream: the longest wait between two chunks).
        headers: extra HTTP headers sent with every request.
        price: the price per million tokens, when the built-in table does not know the model.
        context_window: the model's context window in tokens, when known.
        max_connections: the size of the connection pool.
        max_tokens_field: the request field for ``max_tokens`` (``"max_completion_tokens"`` on
            the official API, ``"max_tokens"`` on compatible servers).
        tool_mode: ``"native"`` (the API's tools and tool_calls) or ``"text"`` for models
            without native tool calling: tools are described in the system prompt, calls are
            parsed from the reply text (``agentica.models.toolparse``), results go back as text.
        send_reasoning: send earlier replies' reasoning back as ``reasoning_content`` (some
            thinking models require it with tool calls; most servers reject or ignore it).
    """

    api_key_env = "OPENAI_API_KEY"
    default_base_url = "https://api.openai.com/v1"

    def __init__(
        self,
        id: str = "gpt-4o-mini",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        headers: Mapping[str, str] | None = None,
        price: ModelPrice | None = None,
        context_window: int | None = None,
        max_connections: int = 1000,
        max_tokens_field: str | None = None,
        send_reasoning: bool = False,
        tool_mode: Literal["native", "text"] = "native",
        provider: str = "openai",
    ) -> None:
        if not id:
            raise UsageError("a model id is required, e.g. OpenAIChat(id='gpt-4o-mini')")
        self._id = id
        self._provider = provider
        self.base_url = (
            base_url or os.environ.get("OPENAI_BASE_URL") or self.default_base_url
        ).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(self.api_key_env)
        if not key and self.base_url == self.default_base_url:
            raise UsageError(
                f"{type(self).__name__}({id!r}) needs an API key for {self.base_url}: pass "
                f"api_key=... or set ${self.api_key_env}. For a local OpenAI-compatible server "
                "use OpenAILike(id=..., base_url='http://127.0.0.1:PORT/v1')."
            )
        self.settings = settings or ModelSettings()
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.price = price if price is not None else price_for(id)
        self.context_window = context_window
        self.send_reasoning = send_reasoning
        if tool_mode not in ("native", "text"):
            raise UsageError(f"tool_mode must be 'native' or 'text', not {tool_mode!r}")
        self.tool_mode = tool_mode
        self._max_tokens_field = max_tokens_field or (
            "max_completion_tokens" if self.base_url == self.default_base_url else "max_tokens"
        )
        self._url = self.base_url + "/chat/completions"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        if headers:
            self._headers.update(headers)
        self._pool = HttpClientPool(max_connections=max_connections)

    @property
    def id(self) -> str:
        return self._id

    @property
    def provider(self) -> str:
        return self._provider

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(id={self._id!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def __aenter__(self) -> OpenAIChat:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- request building

    def build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        s = self.settings.merged(request.settings)
        messages = request.messages
        tools = request.tools
        if self.tool_mode == "text":
            messages = prompted_messages(
                messages,
                () if s.tool_choice == "none" else tools,
                parallel=s.parallel_tool_calls is not False,
            )
            tools = ()
        body: dict[str, Any] = {
            "model": self._id,
            "messages": [message_to_wire(m, send_reasoning=self.send_reasoning) for m in messages],
        }
        if tools:
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

    def _request_headers(self, settings: ModelSettings) -> Mapping[str, str]:
        extra = self.settings.merged(settings).extra_headers
        return self._headers | extra if extra else self._headers

    def _text_tools(self, request: ModelRequest) -> list[str]:
        """Tool names to look for in the reply text (text tool mode only)."""
        if self.tool_mode != "text" or self.settings.merged(request.settings).tool_choice == "none":
            return []
        return [t.name for t in request.tools]

    def _timeout(self, settings: ModelSettings) -> float:
        return settings.timeout or self.settings.timeout or self.timeout

    # ----------------------------------------------------------------- responses

    def parse_response(self, data: Any, text_tools: Sequence[str] = ()) -> ModelResponse:
        """Turn a decoded Chat Completions answer into a ``ModelResponse``.

        ``text_tools``: tool names whose calls are parsed from the reply text (text tool mode).
        """
        try:
            choice = data["choices"][0]
            msg = choice["message"]
            if not isinstance(msg, dict):
                raise TypeError("choices[0].message is not an object")
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelResponseError(
                f"{self._provider} answered model {self._id!r} without choices[0].message: "
                f"{json.dumps(data)[:300]}",
                provider=self._provider,
                model=self._id,
                retryable=True,
            ) from exc
        calls = []
        for raw in msg.get("tool_calls") or []:
            function = raw.get("function") or {}
            calls.append(
                ToolCall(
                    id=raw.get("id") or new_tool_call_id(),
                    name=function.get("name") or "",
                    arguments=_arguments(function.get("arguments")) or "{}",
                )
            )
        content = msg.get("content") or None
        if text_tools and content and not calls:
            parsed = parse_tool_calls(content, text_tools)
            calls, content = as_tool_calls(parsed), parsed.text or None
        finish = choice.get("finish_reason")
        finish = _FINISH.get(finish, finish) or ("tool_calls" if calls else "stop")
        if calls and finish == "stop":
            finish = "tool_calls"
        message = AssistantMessage(
            content=content,
            tool_calls=calls,
            reasoning=msg.get("reasoning_content") or msg.get("reasoning") or None,
            usage=_usage(data.get("usage")),
            model=data.get("model") or self._id,
            finish_reason=finish,
        )
        return ModelResponse(message=message, provider=self._provider, response_id=data.get("id"))

    async def response(self, request: ModelRequest) -> ModelResponse:
        body = dumps(self.build_body(request, stream=False))
        headers = self._request_headers(request.settings)
        timeout = self._timeout(request.settings)
        text_tools = self._text_tools(request)

        async def attempt() -> ModelResponse:
            data = await post_json(
                self._pool,
                self._url,
                body,
                headers,
                timeout=timeout,
                provider=self._provider,
                model=self._id,
                api_key_env=self.api_key_env,
            )
            return self.parse_response(data, text_tools)

        return await call_with_retries(attempt, self.retry)

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        body = dumps(self.build_body(request, stream=True))
        headers = self._request_headers(request.settings)
        timeout = self._timeout(request.settings)
        text_tools = self._text_tools(request)
        events = stream_with_retries(
            lambda: self._stream_once(body, headers, timeout, text_tools), self.retry
        )
        async with aclosing(events):
            async for event in events:
                yield event

    async def _stream_once(
        self, body: bytes, headers: Mapping[str, str], timeout: float, text_tools: Sequence[str]
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        assembler = StreamAssembler()
        splitter = ToolCallStreamSplitter(text_tools) if text_tools else None
        usage: Usage | None = None
        finish: str | None = None
        response_id: str | None = None
        model_name = self._id
        done = False
        next_index = 0
        last_index = 0
        indexes: dict[str, int] = {}  # call id -> index, for servers that leave out the index
        sse = stream_sse(
            self._pool,
            self._url,
            body,
            headers,
            timeout=timeout,
            provider=self._provider,
            model=self._id,
            api_key_env=self.api_key_env,
        )
        async with aclosing(sse) as chunks:
            async for _event, data in chunks:
                if data.strip() == "[DONE]":
                    done = True  # read on to the end of the body so the connection is reused
                    continue
                try:
                    chunk = json.loads(data)
                except ValueError as exc:
                    raise ModelResponseError(
                        f"{self._provider} streamed a chunk that is not JSON for model "
                        f"{self._id!r}: {data[:200]!r}",
                        provider=self._provider,
                        model=self._id,
                        retryable=True,
                    ) from exc
                if not isinstance(chunk, dict):
                    continue
                if chunk.get("error"):
                    err = chunk["error"]
                    detail = err.get("message") if isinstance(err, dict) else str(err)
                    raise ModelResponseError(
                        f"{self._provider} reported an error mid-stream for model "
                        f"{self._id!r}: {detail}",
                        provider=self._provider,
                        model=self._id,
                        retryable=True,
                    )
                response_id = response_id or chunk.get("id")
                model_name = chunk.get("model") or model_name
                if chunk.get("usage"):
                    usage = _usage(chunk["usage"])
                choices = chunk.get("choices") or []
                if not choices:
                    continue
                choice = choices[0]
                delta = choice.get("delta") or {}
                text = delta.get("content")
                if text and splitter is not None:
                    text = splitter.feed(text)
                if text:
                    text_delta = TextDelta(text)
                    assembler.add(text_delta)
                    yield text_delta
                reasoning = delta.get("reasoning_content") or delta.get("reasoning")
                if reasoning:
                    reasoning_delta = ReasoningDelta(reasoning)
                    assembler.add(reasoning_delta)
                    yield reasoning_delta
                for raw in delta.get("tool_calls") or ():
                    function = raw.get("function") or {}
                    index = raw.get("index")
                    call_id = raw.get("id")
                    if index is None:  # servers that leave out the index: a new id = a new call
                        # (an id seen before is a later piece of its call, repeating the id)
                        index = indexes.get(call_id, next_index if call_id else last_index)
                    if call_id:
                        indexes.setdefault(call_id, index)
                    last_index = index
                    next_index = max(next_index, index + 1)
                    call_delta = ToolCallDelta(
                        index=index,
                        id=call_id,
                        name=function.get("name"),
                        arguments=_arguments(function.get("arguments")),
                    )
                    assembler.add(call_delta)
                    yield call_delta
                if choice.get("finish_reason"):
                    finish = _FINISH.get(choice["finish_reason"], choice["finish_reason"])
        if not done and finish is None:
            raise ModelResponseError(
                f"the stream from {self._provider} for model {self._id!r} ended before the reply "
                "was complete (no finish_reason, no [DONE])",
                provider=self._provider,
                model=self._id,
                retryable=True,
            )
        if splitter is not None:
            parsed = splitter.finish()
            if parsed.text:
                text_delta = TextDelta(parsed.text)
                assembler.add(text_delta)
                yield text_delta
            for index, call in enumerate(as_tool_calls(parsed), start=next_index):
                call_delta = ToolCallDelta(
                    index=index, id=call.id, name=call.name, arguments=call.arguments
                )
                assembler.add(call_delta)
                yield call_delta
                finish = "tool_calls"
        message = assembler.finish(usage=usage, model=model_name, finish_reason=finish)
        if splitter is not None and message.content:
            message.content = message.content.strip() or None
        yield ResponseDone(
            ModelResponse(message=message, provider=self._provider, response_id=response_id)
        )


class OpenAILike(OpenAIChat):
    """Any OpenAI-compatible server: ``OpenAILike(id="qwen2.5", base_url="http://host:8000/v1")``.

    The key is optional (many local servers need none) and read from ``api_key`` only; requests
    use ``max_tokens`` rather than the official API's ``max_completion_tokens``.
    """

    def __init__(
        self,
        id: str,
        *,
        base_url: str,
        api_key: str | None = None,
        provider: str = "openai-compatible",
        **kwargs: Any,
    ) -> None:
        if not base_url:
            raise UsageError("OpenAILike needs base_url=..., e.g. 'http://127.0.0.1:8000/v1'")
        super().__init__(id, api_key=api_key or "", base_url=base_url, provider=provider, **kwargs)
