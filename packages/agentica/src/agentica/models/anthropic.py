"""The Anthropic Messages API adapter: ``Claude``.

The request JSON is built here from ``agentica.messages`` and posted to ``/v1/messages`` over one
pooled aiohttp session per model object and event loop, like the OpenAI adapter; no SDK is
involved.

What it maps:

- System messages become the top-level ``system`` (a list of text blocks). User text and images
  (``data:`` URLs as base64 sources, ``https:`` URLs as url sources), assistant text and tool
  calls (``tool_use`` blocks) and tool results (``tool_result`` blocks in a user turn) become
  content blocks. Consecutive messages of one role are merged into one turn, because the API
  wants user and assistant turns to alternate; tool results come first in their user turn.
- Tools, ``tool_choice`` (``"required"`` is ``any``) and ``parallel_tool_calls=False``
  (``disable_parallel_tool_use``).
- Prompt caching (``prompt_caching=True``): ``cache_control`` breakpoints on the last tool
  definition, the last system block and the last block of the message before the newest user
  turn, so the stable prefix (tools, instructions, older history) is read from the cache on the
  next request. Three breakpoints; the API allows four.
- Extended thinking (``thinking_budget=...``): ``thinking`` and ``redacted_thinking`` blocks of a
  reply are kept, signatures included, in ``AssistantMessage.provider_data["anthropic_blocks"]``
  and sent back unchanged, before the message's other blocks, when the message is replayed; their
  text is also the message's ``reasoning`` (``ReasoningDelta`` when streaming).
- Structured output: by default the JSON schema is given to the model as instructions at the end
  of the system prompt (any Claude model, any schema; the run loop validates the answer and asks
  again when it does not match). ``native_structured_output=True`` sends it as
  ``output_config.format`` instead (constrained decoding: Claude 4.5 models and newer, and only
  the JSON-schema subset the API supports).
- Usage: ``input_tokens`` counts every input token, cache reads and cache writes included;
  ``cache_read_tokens`` and ``cache_write_tokens`` say how many of them were which.
- Stop reasons: ``end_turn`` and ``stop_sequence`` are ``"stop"``, ``tool_use`` is
  ``"tool_calls"``, ``max_tokens`` and ``model_context_window_exceeded`` are ``"length"``,
  ``refusal`` is ``"content_filter"``; others (``pause_turn``) are kept as they are.

Not sent (the Messages API has no such field): ``ModelSettings.seed`` and ``UserMessage.name``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from agentica._http import HttpClientPool
from agentica.errors import ModelError, ModelHTTPError, ModelResponseError, UsageError
from agentica.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningDelta,
    SystemMessage,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.models._transport import dumps, post_json, stream_sse
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    OutputSchema,
    ResponseDone,
    StreamAssembler,
    new_tool_call_id,
)
from agentica.models.pricing import ModelPrice, price_for
from agentica.models.retry import RetryPolicy, call_with_retries, stream_with_retries

__all__ = ["PROVIDER_DATA_KEY", "Claude"]

_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}
_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_CACHE = {"type": "ephemeral"}
# Error types of an ``error`` event that repeating the request cannot fix.
_FINAL_ERROR_TYPES = frozenset(
    {
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "request_too_large",
        "billing_error",
    }
)
PROVIDER_DATA_KEY = "anthropic_blocks"


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    fresh = int(raw.get("input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    read = int(raw.get("cache_read_input_tokens") or 0)
    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=fresh + written + read,
        output_tokens=int(raw.get("output_tokens") or 0),
        cache_read_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=int(thinking or 0),
    )


def _stop_reason(raw: Any) -> str | None:
    if not isinstance(raw, str) or not raw:
        return None
    return _STOP.get(raw, raw)


def _tool_input(arguments: str) -> dict[str, Any]:
    """The ``input`` object of a ``tool_use`` block from a call's JSON arguments.

    Arguments that are not a JSON object were reported to the model when the call ran (as a
    failed tool result); the API accepts only an object here, so ``{}`` stands in for them.
    """
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _image_block(part: ImagePart) -> dict[str, Any]:
    url = part.url
    if url.startswith("data:"):
        header, sep, data = url[5:].partition(",")
        media_type, _, encoding = header.partition(";")
        if not sep or encoding.lower() != "base64":
            raise UsageError(
                "an image data: URL for Claude must be base64 encoded ('data:image/png;base64,...')"
            )
        return {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": part.media_type or media_type or "image/png",
                "data": data,
            },
        }
    if url.startswith(("https://", "http://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise UsageError(f"Claude takes images as https: or base64 data: URLs, not {url[:40]!r}")


def _structured_output_instructions(schema: OutputSchema) -> str:
    return (
        "Give your final answer as a single JSON value, and nothing else (no prose, no code "
        f"fences), that matches this JSON schema named {schema.name!r}:\n"
        + json.dumps(schema.schema, ensure_ascii=False, separators=(",", ":"))
    )


class Claude:
    """A Claude model served through the Anthropic Messages API.

    Args:
        id: the model name, e.g. ``"claude-sonnet-4-5"``.
        api_key: the key; defaults to ``$ANTHROPIC_API_KEY``. Required for the official endpoint.
        base_url: the API root; defaults to ``$ANTHROPIC_BASE_URL`` or
            ``https://api.anthropic.com`` (requests go to ``{base_url}/v1/messages``; a base URL
            ending in ``/v1`` is accepted too).
        settings: default ``ModelSettings`` for every request (an agent's settings override them).
        retry: the ``RetryPolicy`` for failed requests.
        timeout: seconds for one request (for a stream: the longest wait between two events).
        headers: extra HTTP headers sent with every request (e.g. ``anthropic-beta``).
        price: the price per million tokens, when the built-in table does not know the model.
        context_window: the model's context window in tokens.
        max_connections: the size of the connection pool.
        max_tokens: the most tokens a reply may have (the API requires a value);
            ``ModelSettings.max_tokens`` overrides it.
        thinking_budget: enable extended thinking with this many tokens for thinking (at least
            1024, less than ``max_tokens``). The API then accepts only ``tool_choice`` ``"auto"``
            or ``"none"`` and no changed ``temperature``; such requests fail with HTTP 400.
        prompt_caching: mark the stable prefix of each request with ``cache_control``.
        anthropic_version: the ``anthropic-version`` header.
        native_structured_output: send an output schema as ``output_config.format`` (constrained
            decoding on the models that support it) rather than as instructions.
    """

    api_key_env = "ANTHROPIC_API_KEY"
    default_base_url = "https://api.anthropic.com"

    def __init__(
        self,
        id: str = "claude-sonnet-4-5",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        headers: Mapping[str, str] | None = None,
        price: ModelPrice | None = None,
        context_window: int = 200_000,
        max_connections: int = 1000,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        prompt_caching: bool = True,
        anthropic_version: str = "2023-06-01",
        native_structured_output: bool = False,
    ) -> None:
        if not id:
            raise UsageError("a model id is required, e.g. Claude(id='claude-sonnet-4-5')")
        self._id = id
        self.base_url = (
            base_url or os.environ.get("ANTHROPIC_BASE_URL") or self.default_base_url
        ).rstrip("/")
        key = api_key if api_key is not None else os.environ.get(self.api_key_env)
        if not key and self.base_url == self.default_base_url:
            raise UsageError(
                f"Claude({id!r}) needs an API key for {self.base_url}: pass api_key=... or set "
                f"${self.api_key_env}."
            )
        if max_tokens < 1:
            raise UsageError(f"max_tokens must be at least 1, not {max_tokens}")
        if thinking_budget is not None:
            if thinking_budget < 1024:
                raise UsageError(
                    f"thinking_budget must be at least 1024 tokens, not {thinking_budget}"
                )
            if thinking_budget >= max_tokens:
                raise UsageError(
                    f"thinking_budget ({thinking_budget}) must be less than max_tokens "
                    f"({max_tokens}): thinking counts towards max_tokens. Raise max_tokens."
                )
        self.settings = settings or ModelSettings()
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.price = price if price is not None else price_for(id)
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.prompt_caching = prompt_caching
        self.native_structured_output = native_structured_output
        self._url = self.base_url + (
            "/messages" if self.base_url.endswith("/v1") else "/v1/messages"
        )
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": anthropic_version,
        }
        if key:
            self._headers["x-api-key"] = key
        if headers:
            self._headers.update(headers)
        self._pool = HttpClientPool(max_connections=max_connections)

    @property
    def id(self) -> str:
        return self._id

    @property
    def provider(self) -> str:
        return "anthropic"

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(id={self._id!r}, base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def __aenter__(self) -> Claude:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- request building

    def _blocks(self, message: Message) -> tuple[str, list[dict[str, Any]]]:
        """The role and content blocks of one message (system messages: role "system")."""
        if isinstance(message, ToolMessage):
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            if message.content:
                result["content"] = message.content
            if message.is_error:
                result["is_error"] = True
            return "user", [result]
        if isinstance(message, AssistantMessage):
            blocks: list[dict[str, Any]] = []
            kept = (message.provider_data or {}).get(PROVIDER_DATA_KEY)
            if isinstance(kept, list):  # signed thinking: first, unchanged (copied, never marked)
                blocks.extend(dict(b) for b in kept if isinstance(b, dict))
            if message.content and message.content.strip():
                blocks.append({"type": "text", "text": message.content})
            for call in message.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": _tool_input(call.arguments),
                    }
                )
            return "assistant", blocks
        if isinstance(message, UserMessage):
            if isinstance(message.content, str):
                text = message.content
                parts = [{"type": "text", "text": text}] if text.strip() else []
            else:
                parts = [
                    _image_block(part)
                    if isinstance(part, ImagePart)
                    else {"type": "text", "text": part.text}
                    for part in message.content
                    if isinstance(part, ImagePart) or part.text.strip()
                ]
            return "user", parts
        if isinstance(message, SystemMessage):
            text = message.content
            return "system", [{"type": "text", "text": text}] if text.strip() else []
        raise UsageError(f"cannot send {type(message).__name__} to anthropic")

    def _conversation(
        self, messages: Sequence[Message]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The ``system`` blocks and the alternating ``messages`` of a request.

        The leading system messages are the ``system`` parameter. A system message later in the
        conversation (a per-turn slot, a summary) becomes text in the user turn where it is:
        moving it into ``system`` would change the start of every request, which the prompt
        cache keys on."""
        system: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        for message in messages:
            role, blocks = self._blocks(message)
            if role == "system" and not turns:
                system.extend(blocks)
                continue
            if role == "system":
                role = "user"
            if not blocks:  # an empty message: the API rejects empty content
                continue
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
        for turn in turns:
            content = turn["content"]
            # Tool results must open their user turn; any text or image comes after them.
            if turn["role"] == "user" and any(b["type"] == "tool_result" for b in content):
                content.sort(key=lambda b: b["type"] != "tool_result")
        return system, turns

    def build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        s = self.settings.merged(request.settings)
        system, turns = self._conversation(request.messages)
        schema = request.output_schema
        if schema is not None and not self.native_structured_output:
            system.append({"type": "text", "text": _structured_output_instructions(schema)})
        max_tokens = s.max_tokens if s.max_tokens is not None else self.max_tokens
        body: dict[str, Any] = {"model": self._id, "max_tokens": max_tokens}
        if system:
            body["system"] = system
        body["messages"] = turns
        tools: list[dict[str, Any]] = []
        if request.tools:
            tools = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                | ({"strict": True} if t.strict else {})
                for t in request.tools
            ]
            body["tools"] = tools
            choice: dict[str, Any] | None = None
            if s.tool_choice == "none":
                choice = {"type": "none"}
            elif s.tool_choice == "required":
                choice = {"type": "any"}
            elif s.tool_choice == "auto":
                choice = {"type": "auto"}
            elif s.tool_choice is not None:
                choice = {"type": "tool", "name": s.tool_choice}
            if s.parallel_tool_calls is False and (choice is None or choice["type"] != "none"):
                choice = (choice or {"type": "auto"}) | {"disable_parallel_tool_use": True}
            if choice is not None:
                body["tool_choice"] = choice
        if self.thinking_budget is not None:
            if max_tokens <= self.thinking_budget:
                raise UsageError(
                    f"max_tokens ({max_tokens}) must be more than thinking_budget "
                    f"({self.thinking_budget}) for {self._id!r}"
                )
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if schema is not None and self.native_structured_output:
            body["output_config"] = {"format": {"type": "json_schema", "schema": schema.schema}}
        if s.temperature is not None:
            body["temperature"] = s.temperature
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.stop:
            body["stop_sequences"] = list(s.stop)
        if stream:
            body["stream"] = True
        if self.prompt_caching:
            self._mark_cache(system, tools, turns)
        if s.extra_body:
            body.update(s.extra_body)
        return body

    @staticmethod
    def _mark_cache(
        system: list[dict[str, Any]], tools: list[dict[str, Any]], turns: list[dict[str, Any]]
    ) -> None:
        """Put ``cache_control`` on the stable prefix: tools, system, the older history."""
        if tools:
            tools[-1]["cache_control"] = dict(_CACHE)
        if system:
            system[-1]["cache_control"] = dict(_CACHE)
        newest_user = next(
            (i for i in range(len(turns) - 1, -1, -1) if turns[i]["role"] == "user"), None
        )
        if newest_user is None or newest_user == 0:
            return
        for block in reversed(turns[newest_user - 1]["content"]):
            if block.get("type") not in _THINKING_TYPES:  # thinking blocks cannot be marked
                block["cache_control"] = dict(_CACHE)
                return

    def _request_headers(self, settings: ModelSettings) -> Mapping[str, str]:
        extra = self.settings.merged(settings).extra_headers
        return self._headers | extra if extra else self._headers

    def _timeout(self, settings: ModelSettings) -> float:
        return settings.timeout or self.settings.timeout or self.timeout

    # ----------------------------------------------------------------- responses

    def _bad_reply(self, what: str, data: Any) -> ModelResponseError:
        try:
            shown = json.dumps(data)[:300]
        except (TypeError, ValueError):
            shown = repr(data)[:300]
        return ModelResponseError(
            f"anthropic answered model {self._id!r} {what}: {shown}",
            provider="anthropic",
            model=self._id,
            retryable=True,
        )

    def parse_response(self, data: Any) -> ModelResponse:
        """Turn a decoded Messages API answer into a ``ModelResponse``."""
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            raise self._bad_reply("without a content list", data)
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        kept: list[dict[str, Any]] = []
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                text.append(str(block.get("text") or ""))
            elif kind == "tool_use":
                raw = block.get("input")
                calls.append(
                    ToolCall(
                        id=block.get("id") or new_tool_call_id(),
                        name=block.get("name") or "",
                        arguments=json.dumps(raw if raw is not None else {}, ensure_ascii=False),
                    )
                )
            elif kind in _THINKING_TYPES:
                kept.append(block)
                if kind == "thinking" and block.get("thinking"):
                    reasoning.append(str(block["thinking"]))
        stop = _stop_reason(data.get("stop_reason")) or ("tool_calls" if calls else "stop")
        message = AssistantMessage(
            content="".join(text) or None,
            tool_calls=calls,
            reasoning="".join(reasoning) or None,
            usage=_usage(data.get("usage")),
            model=data.get("model") or self._id,
            finish_reason=stop,
            provider_data={PROVIDER_DATA_KEY: kept} if kept else None,
        )
        return ModelResponse(message=message, provider="anthropic", response_id=data.get("id"))

    @staticmethod
    def _refine(error: ModelError) -> None:
        # A 429 for a reached spend limit lasts until the limit changes: retrying cannot help.
        if (
            isinstance(error, ModelHTTPError)
            and error.status == 429
            and "enforced_spend_limit_reached" in error.body
        ):
            error.retryable = False

    async def response(self, request: ModelRequest) -> ModelResponse:
        body = dumps(self.build_body(request, stream=False))
        headers = self._request_headers(request.settings)
        timeout = self._timeout(request.settings)

        async def attempt() -> ModelResponse:
            try:
                data = await post_json(
                    self._pool,
                    self._url,
                    body,
                    headers,
                    timeout=timeout,
                    provider="anthropic",
                    model=self._id,
                    api_key_env=self.api_key_env,
                )
            except ModelError as error:
                self._refine(error)
                raise
            return self.parse_response(data)

        return await call_with_retries(attempt, self.retry)

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        body = dumps(self.build_body(request, stream=True))
        headers = self._request_headers(request.settings)
        timeout = self._timeout(request.settings)

        async def refined() -> AsyncGenerator[ModelStreamEvent, None]:
            try:
                async with aclosing(self._stream_once(body, headers, timeout)) as events:
                    async for event in events:
                        yield event
            except ModelError as error:
                self._refine(error)
                raise

        events = stream_with_retries(refined, self.retry)
        async with aclosing(events):
            async for event in events:
                yield event

    async def _stream_once(
        self, body: bytes, headers: Mapping[str, str], timeout: float
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        assembler = StreamAssembler()
        usage: dict[str, Any] = {}
        stop: str | None = None
        response_id: str | None = None
        model_name = self._id
        done = False
        blocks: dict[int, dict[str, Any]] = {}  # content block index -> the block so far
        tool_index: dict[int, int] = {}  # content block index -> position among tool_use blocks
        tool_json: dict[int, bool] = {}  # content block index -> input_json_delta seen
        sse = stream_sse(
            self._pool,
            self._url,
            body,
            headers,
            timeout=timeout,
            provider="anthropic",
            model=self._id,
            api_key_env=self.api_key_env,
        )
        async with aclosing(sse) as events:
            async for name, data in events:
                try:
                    event = json.loads(data)
                except ValueError as exc:
                    raise ModelResponseError(
                        f"anthropic streamed an event that is not JSON for model {self._id!r}: "
                        f"{data[:200]!r}",
                        provider="anthropic",
                        model=self._id,
                        retryable=True,
                    ) from exc
                if not isinstance(event, dict):
                    continue
                kind = event.get("type") or name
                if kind == "message_start":
                    message = event.get("message") or {}
                    response_id = message.get("id") or response_id
                    model_name = message.get("model") or model_name
                    if isinstance(message.get("usage"), dict):
                        usage.update(message["usage"])
                elif kind == "content_block_start":
                    index = int(event.get("index", len(blocks)))
                    block = dict(event.get("content_block") or {})
                    blocks[index] = block
                    btype = block.get("type")
                    if btype == "tool_use":
                        tool_index[index] = position = len(tool_index)
                        tool_json[index] = False
                        call_delta = ToolCallDelta(
                            index=position,
                            id=block.get("id") or new_tool_call_id(),
                            name=block.get("name") or "",
                        )
                        assembler.add(call_delta)
                        yield call_delta
                    elif btype == "text" and block.get("text"):
                        text_delta = TextDelta(str(block["text"]))
                        assembler.add(text_delta)
                        yield text_delta
                    elif btype == "thinking" and block.get("thinking"):
                        reasoning_delta = ReasoningDelta(str(block["thinking"]))
                        assembler.add(reasoning_delta)
                        yield reasoning_delta
                elif kind == "content_block_delta":
                    index = int(event.get("index", -1))
                    delta = event.get("delta") or {}
                    dtype = delta.get("type")
                    block = blocks.setdefault(index, {})
                    if dtype == "text_delta":
                        if delta.get("text"):
                            text_delta = TextDelta(str(delta["text"]))
                            assembler.add(text_delta)
                            yield text_delta
                    elif dtype == "input_json_delta":
                        piece = str(delta.get("partial_json") or "")
                        if index in tool_index and piece:
                            tool_json[index] = True
                            call_delta = ToolCallDelta(index=tool_index[index], arguments=piece)
                            assembler.add(call_delta)
                            yield call_delta
                    elif dtype == "thinking_delta":
                        piece = str(delta.get("thinking") or "")
                        block["thinking"] = str(block.get("thinking") or "") + piece
                        if piece:
                            reasoning_delta = ReasoningDelta(piece)
                            assembler.add(reasoning_delta)
                            yield reasoning_delta
                    elif dtype == "signature_delta":
                        block["signature"] = delta.get("signature") or ""
                elif kind == "content_block_stop":
                    index = int(event.get("index", -1))
                    block = blocks.get(index) or {}
                    # A tool_use whose input came whole in content_block_start, not as deltas.
                    if index in tool_index and not tool_json[index] and block.get("input"):
                        call_delta = ToolCallDelta(
                            index=tool_index[index],
                            arguments=json.dumps(block["input"], ensure_ascii=False),
                        )
                        assembler.add(call_delta)
                        yield call_delta
                elif kind == "message_delta":
                    stop = _stop_reason((event.get("delta") or {}).get("stop_reason")) or stop
                    if isinstance(event.get("usage"), dict):
                        usage.update({k: v for k, v in event["usage"].items() if v is not None})
                elif kind == "message_stop":
                    done = True  # read on to the end of the body so the connection is reused
                elif kind == "error":
                    err = event.get("error")
                    detail = err.get("message") if isinstance(err, dict) else str(err)
                    etype = err.get("type") if isinstance(err, dict) else None
                    raise ModelResponseError(
                        f"anthropic reported an error mid-stream for model {self._id!r}: "
                        f"{etype + ': ' if etype else ''}{detail}",
                        provider="anthropic",
                        model=self._id,
                        retryable=etype not in _FINAL_ERROR_TYPES,
                    )
                # "ping" and event types added later are ignored
        if not done:
            raise ModelResponseError(
                f"the stream from anthropic for model {self._id!r} ended before the reply was "
                "complete (no message_stop event)",
                provider="anthropic",
                model=self._id,
                retryable=True,
            )
        kept = [blocks[i] for i in sorted(blocks) if blocks[i].get("type") in _THINKING_TYPES]
        message = assembler.finish(
            usage=_usage(usage),
            model=model_name,
            finish_reason=stop,
            provider_data={PROVIDER_DATA_KEY: kept} if kept else None,
        )
        yield ResponseDone(
            ModelResponse(message=message, provider="anthropic", response_id=response_id)
        )
