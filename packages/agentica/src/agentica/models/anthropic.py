"""The Anthropic Messages API adapter: ``Claude``.

The request JSON is built here from ``agentica.messages`` and posted to ``/v1/messages`` over one
pooled aiohttp session per model object and event loop, like the OpenAI adapter; no SDK is
involved. How messages, tools, prompt caching, thinking, structured output, usage and stop
reasons map to the wire format: see ``Claude``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

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
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from agentica.models._adapter import Delta, HttpModel, StreamDecoder, decode_event
from agentica.models._transport import (
    ReplyFieldError,
    describe,
    int_field,
    object_field,
    text_field,
    token_count,
)
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    StreamAssembler,
    new_tool_call_id,
)
from agentica.models.pricing import ModelPrice
from agentica.models.retry import RetryPolicy

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
_CHOICES: dict[str | None, dict[str, str]] = {
    "none": {"type": "none"},
    "required": {"type": "any"},
    "auto": {"type": "auto"},
}
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
_TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")  # the ids the API accepts on tool_use and tool_result


def _usage(raw: Any) -> Usage:
    """Usage from the reply's ``usage``; an odd value counts as missing (bookkeeping only)."""
    if not isinstance(raw, dict):
        return Usage()
    fresh = token_count(raw.get("input_tokens"))
    written = token_count(raw.get("cache_creation_input_tokens"))
    read = token_count(raw.get("cache_read_input_tokens"))
    details = raw.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    return Usage(
        input_tokens=fresh + written + read,
        output_tokens=token_count(raw.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=written,
        reasoning_tokens=token_count(thinking),
    )


def _stop_reason(obj: dict[str, Any], where: str) -> str | None:
    raw = text_field(obj, "stop_reason", where)
    return _STOP.get(raw, raw) if raw else None


def _block_type(block: Any, where: str) -> str:
    if not isinstance(block, dict):
        raise ReplyFieldError(f"{where} is {describe(block)}, not a content block object")
    kind = block.get("type")
    if not isinstance(kind, str):
        raise ReplyFieldError(f"{where}.type is {describe(kind)}, not a string")
    return kind


def _tool_name(block: dict[str, Any], where: str) -> str:
    name = text_field(block, "name", where)
    if not name:
        raise ReplyFieldError(f"{where}.name is missing or empty")
    return name


def _kept_block(block: dict[str, Any], where: str) -> dict[str, Any]:
    """A thinking block as kept for replay: only its known fields, each checked."""
    if block["type"] == "redacted_thinking":
        return {"type": "redacted_thinking", "data": text_field(block, "data", where) or ""}
    kept: dict[str, Any] = {"type": "thinking", "thinking": text_field(block, "thinking", where)}
    kept["thinking"] = kept["thinking"] or ""
    signature = text_field(block, "signature", where)
    if signature is not None:
        kept["signature"] = signature
    return kept


def _index(event: dict[str, Any], default: int | None) -> int:
    index = int_field(event, "index", str(event.get("type") or "event"))
    if index is None:
        if default is None:
            raise ReplyFieldError(f"{event.get('type') or 'an event'} has no index")
        return default
    return index


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


def _tool_id(call_id: str) -> str:
    """A tool call's id as the API accepts it (letters, digits, ``_`` and ``-``). Another
    provider's id that is not (Kimi's ``functions.get_weather:0``) is replaced by one derived
    from it, the same for the call and for its result, so the pair stays a pair."""
    if _TOOL_ID.fullmatch(call_id):
        return call_id
    return "toolu_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def _in_foreign_tool_loop(turns: list[dict[str, Any]]) -> bool:
    """The request continues a tool loop (its last turn holds tool results) whose assistant
    turn does not open with a thinking block: another model (or Claude without thinking) made
    those calls. Thinking cannot start inside that assistant turn: the API wants one thinking
    configuration per assistant turn."""
    if len(turns) < 2 or turns[-1]["role"] != "user":
        return False
    if not any(b.get("type") == "tool_result" for b in turns[-1]["content"]):
        return False
    opening = turns[-2]["content"][0] if turns[-2]["content"] else {}
    return opening.get("type") not in _THINKING_TYPES


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


def _check_budget(max_tokens: int, thinking_budget: int | None) -> None:
    if max_tokens < 1:
        raise UsageError(f"max_tokens must be at least 1, not {max_tokens}")
    if thinking_budget is None:
        return
    if thinking_budget < 1024:
        raise UsageError(f"thinking_budget must be at least 1024 tokens, not {thinking_budget}")
    if thinking_budget >= max_tokens:
        raise UsageError(
            f"thinking_budget ({thinking_budget}) must be less than max_tokens "
            f"({max_tokens}): thinking counts towards max_tokens. Raise max_tokens."
        )


def _tool_choice(s: ModelSettings, *, thinking: bool = False) -> dict[str, Any] | None:
    """The ``tool_choice`` object for the settings (``None``: leave it out). With thinking the
    API takes only ``auto`` and ``none``: a forced choice (a capability's ``tool_choice``, a
    wish not worth a 400) is sent as ``auto``."""
    choice: dict[str, Any] | None = None
    if thinking and s.tool_choice not in (None, "none"):
        choice = {"type": "auto"}
    elif s.tool_choice in _CHOICES:
        choice = dict(_CHOICES[s.tool_choice])
    elif s.tool_choice is not None:
        choice = {"type": "tool", "name": s.tool_choice}
    if s.parallel_tool_calls is False and (choice is None or choice["type"] != "none"):
        choice = (choice or {"type": "auto"}) | {"disable_parallel_tool_use": True}
    return choice


def _put_tools(
    body: dict[str, Any],
    tools: Sequence[ToolDefinition],
    s: ModelSettings,
    *,
    thinking: bool,
    turns: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """Put ``tools`` (and ``tool_choice``) into ``body``; returns the tool definitions.

    Without tools, the tools the conversation called are defined and calls forbidden: the API
    refuses ``tool_use`` blocks in a request that defines no tools (an agent without tools took
    over a conversation with calls in it)."""
    if not tools:
        if used := _tools_used(turns):
            body["tools"] = [{"name": name, "description": "(not available now)",
                              "input_schema": {"type": "object"}} for name in used]  # fmt: skip
            body["tool_choice"] = {"type": "none"}
        return []
    body["tools"] = definitions = [
        {"name": t.name, "description": t.description, "input_schema": t.parameters}
        | ({"strict": True} if t.strict else {})
        for t in tools
    ]
    choice = _tool_choice(s, thinking=thinking)
    if choice is not None:
        body["tool_choice"] = choice
    return definitions


def _tools_used(turns: Sequence[dict[str, Any]]) -> list[str]:
    """The names of the tools the conversation's ``tool_use`` blocks call, in order."""
    names = (
        str(block.get("name") or "tool")
        for turn in turns
        if isinstance(turn.get("content"), list)
        for block in turn["content"]
        if block.get("type") == "tool_use"
    )
    return list(dict.fromkeys(names))


def _structured_output_instructions(schema: OutputSchema) -> str:
    return (
        "Give your final answer as a single JSON value, and nothing else (no prose, no code "
        f"fences), that matches this JSON schema named {schema.name!r}:\n"
        + json.dumps(schema.schema, ensure_ascii=False, separators=(",", ":"))
    )


class Claude(HttpModel[None]):
    """A Claude model served through the Anthropic Messages API.

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
    - Extended thinking (``thinking_budget=...``): ``thinking`` and ``redacted_thinking`` blocks of
      a reply are kept, signatures included, in
      ``AssistantMessage.provider_data["anthropic_blocks"]`` and sent back unchanged, before the
      message's other blocks, when the message is replayed; their text is also the message's
      ``reasoning`` (``ReasoningDelta`` when streaming). A request that goes on with a tool loop
      whose assistant turn opens with no thinking block (calls another model made before the
      agent switched models) is sent without thinking, as the API wants one thinking setting
      per assistant turn.
    - Another provider's history: reasoning without a signed block is left out, and tool-call
      ids the API would refuse (``functions.get_weather:0``) are mapped to ones it accepts, the
      same way for the call and for its result.
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

    Args:
        id: the model name, e.g. ``"claude-sonnet-4-5"``.
        api_key: the key; defaults to ``$ANTHROPIC_API_KEY``. Required for the official endpoint.
        base_url: the API root; defaults to ``$ANTHROPIC_BASE_URL`` or
            ``https://api.anthropic.com`` (requests go to ``{base_url}/v1/messages``; a base URL
            ending in ``/v1`` is accepted too).
        settings: default ``ModelSettings`` for every request (an agent's settings override them).
        retry: the ``RetryPolicy`` for failed requests.
        timeout: seconds for one request (for a stream: the longest wait between two events).
        request_timeout: the overall deadline of one model call in seconds, retries included
            (``None``: 600 s, or ``timeout`` when that is longer); ``ModelSettings`` may override.
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
    base_url_env = "ANTHROPIC_BASE_URL"

    def __init__(
        self,
        id: str = "claude-sonnet-4-5",
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 300.0,
        request_timeout: float | None = None,
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
        super().__init__(
            id,
            provider="anthropic",
            base_url=base_url,
            settings=settings,
            retry=retry,
            timeout=timeout,
            request_timeout=request_timeout,
            price=price,
            max_connections=max_connections,
        )
        key = self._api_key(api_key, f"Claude({id!r})")
        _check_budget(max_tokens, thinking_budget)
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.prompt_caching = prompt_caching
        self.native_structured_output = native_structured_output
        self._headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": anthropic_version,
        }
        if key:
            self._headers["x-api-key"] = key
        if headers:
            self._headers.update(headers)

    # ----------------------------------------------------------------- request building

    def _path(self) -> str:
        return "/messages" if self.base_url.endswith("/v1") else "/v1/messages"

    def _blocks(self, message: Message) -> tuple[str, list[dict[str, Any]]]:
        """The role and content blocks of one message (system messages: role "system")."""
        if isinstance(message, ToolMessage):
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": _tool_id(message.tool_call_id),
            }
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
                        "id": _tool_id(call.id),
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
        # thinking, unless this request goes on with a tool loop another model started (it is
        # on again from the next turn that is not a tool loop)
        thinking = self.thinking_budget is not None and not _in_foreign_tool_loop(turns)
        tools = _put_tools(body, request.tools, s, thinking=thinking, turns=turns)
        if thinking and self.thinking_budget is not None:
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

    # ----------------------------------------------------------------- responses

    def parse_response(self, data: Any) -> ModelResponse:
        """Turn a decoded Messages API answer into a ``ModelResponse``.

        Every field is checked: a value of the wrong type in what makes the answer (content
        blocks, tool calls, stop reason, thinking), or a reply with no text and no tool calls cut
        at ``max_tokens`` or refused, raises ``ModelResponseError`` saying what was wrong (an
        empty ``end_turn``, which Claude may send after tool results, is passed on for the run
        loop to send back); odd bookkeeping values (usage
        counts, id, model name) count as missing. Content block types added to the API later
        are skipped.
        """
        return self._reply(data, None)

    def _parse(self, data: Any, context: None) -> ModelResponse:
        if isinstance(data, dict) and data.get("type") == "error":
            raise self._error_event(data.get("error"), "answered with an error")
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, list):
            problem = (
                f"content is {describe(content)}"
                if isinstance(data, dict)
                else f"the body is {describe(data)}"
            )
            try:
                shown = json.dumps(data)[:300]
            except (TypeError, ValueError, RecursionError):
                shown = repr(data)[:300]
            raise ReplyFieldError(f"the reply came without a content list ({problem}): {shown}")
        text: list[str] = []
        reasoning: list[str] = []
        calls: list[ToolCall] = []
        kept: list[dict[str, Any]] = []
        for n, block in enumerate(content):
            where = f"content[{n}]"
            kind = _block_type(block, where)
            if kind == "text":
                text.append(text_field(block, "text", where) or "")
            elif kind == "tool_use":
                raw = object_field(block, "input", where)
                calls.append(
                    ToolCall(
                        id=text_field(block, "id", where) or new_tool_call_id(),
                        name=_tool_name(block, where),
                        arguments=json.dumps(raw if raw is not None else {}, ensure_ascii=False),
                    )
                )
            elif kind in _THINKING_TYPES:
                block = _kept_block(block, where)
                kept.append(block)
                if block.get("thinking"):
                    reasoning.append(block["thinking"])
        stop = _stop_reason(data, "reply") or ("tool_calls" if calls else "stop")
        model = data.get("model")
        response_id = data.get("id")
        message = AssistantMessage(
            content="".join(text) or None,
            tool_calls=calls,
            reasoning="".join(reasoning) or None,
            usage=_usage(data.get("usage")),
            model=model if isinstance(model, str) and model else self._id,
            finish_reason=stop,
            provider_data={PROVIDER_DATA_KEY: kept} if kept else None,
        )
        return ModelResponse(
            message=message,
            provider="anthropic",
            response_id=response_id if isinstance(response_id, str) else None,
        )

    def _error_event(self, err: Any, what: str) -> ModelResponseError:
        detail = err.get("message") if isinstance(err, dict) else err
        etype = err.get("type") if isinstance(err, dict) else None
        etype = etype if isinstance(etype, str) else None
        return ModelResponseError(
            f"anthropic {what} for model {self._id!r}: "
            f"{etype + ': ' if etype else ''}{str(detail)[:500]}",
            provider="anthropic",
            model=self._id,
            retryable=etype not in _FINAL_ERROR_TYPES,
        )

    def _refine(self, error: ModelError) -> None:
        # A 429 for a reached spend limit lasts until the limit changes: retrying cannot help.
        if (
            isinstance(error, ModelHTTPError)
            and error.status == 429
            and "enforced_spend_limit_reached" in error.body
        ):
            error.retryable = False

    def _context(self, request: ModelRequest) -> None:
        return None

    def _decoder(self, context: None) -> StreamDecoder:
        return _StreamReply(self)


class _StreamReply:
    """The state of one streamed Messages API reply: checks each event, keeps the deltas."""

    __slots__ = (
        "_adapter",
        "_assembler",
        "_blocks",
        "_tool_index",
        "_tool_json",
        "_usage",
        "done",
        "model_name",
        "response_id",
        "stop",
    )

    def __init__(self, adapter: Claude) -> None:
        self._adapter = adapter
        self._assembler = StreamAssembler()
        self._usage: dict[str, Any] = {}
        self._blocks: dict[int, dict[str, Any]] = {}  # content block index -> the block so far
        self._tool_index: dict[int, int] = {}  # content block index -> position among tool_use
        self._tool_json: dict[int, bool] = {}  # content block index -> input_json_delta seen
        self.stop: str | None = None
        self.response_id: str | None = None
        self.model_name = adapter.id
        self.done = False

    def feed(self, name: str, data: str) -> list[Delta]:
        """The deltas of one server-sent event (raises ``ReplyFieldError`` for a bad event)."""
        event = decode_event(data, self._adapter, "event")
        kind = event.get("type")
        kind = kind if isinstance(kind, str) else name
        handler = _EVENT_HANDLERS.get(kind)
        if handler is None:  # "ping" and event types added later are ignored
            return []
        out = handler(self, event, kind)
        for item in out:
            self._assembler.add(item)
        return out

    def _message_start(self, event: dict[str, Any], kind: str) -> list[Delta]:
        message = object_field(event, "message", kind) or {}
        if self.response_id is None and isinstance(message.get("id"), str):
            self.response_id = message["id"]
        if isinstance(message.get("model"), str) and message["model"]:
            self.model_name = message["model"]
        if isinstance(message.get("usage"), dict):
            self._usage.update(message["usage"])
        return []

    def _block_start(self, event: dict[str, Any], kind: str) -> list[Delta]:
        index = _index(event, len(self._blocks))
        where = f"content_block_start[{index}].content_block"
        block = object_field(event, "content_block", f"content_block_start[{index}]")
        if block is None:
            raise ReplyFieldError(f"{where} is missing")
        btype = _block_type(block, where)
        self._blocks[index] = block = dict(block)
        if btype == "tool_use":
            return [self._tool_start(index, block, where)]
        if btype == "text":
            text = text_field(block, "text", where)
            return [TextDelta(text)] if text else []
        if btype in _THINKING_TYPES:
            self._blocks[index] = block = _kept_block(block, where)
            if block.get("thinking"):
                return [ReasoningDelta(block["thinking"])]
        return []

    def _tool_start(self, index: int, block: dict[str, Any], where: str) -> ToolCallDelta:
        self._tool_index[index] = position = len(self._tool_index)
        self._tool_json[index] = False
        object_field(block, "input", where)
        return ToolCallDelta(
            index=position,
            id=text_field(block, "id", where) or new_tool_call_id(),
            name=_tool_name(block, where),
        )

    def _block_delta(self, event: dict[str, Any], kind: str) -> list[Delta]:
        index = _index(event, None)
        where = f"content_block_delta[{index}].delta"
        delta = object_field(event, "delta", f"content_block_delta[{index}]") or {}
        dtype = delta.get("type")
        block = self._blocks.setdefault(index, {})
        if dtype == "text_delta":
            text = text_field(delta, "text", where)
            return [TextDelta(text)] if text else []
        if dtype == "input_json_delta":
            piece = text_field(delta, "partial_json", where)
            if index not in self._tool_index or not piece:
                return []
            self._tool_json[index] = True
            return [ToolCallDelta(index=self._tool_index[index], arguments=piece)]
        if dtype == "thinking_delta":
            piece = text_field(delta, "thinking", where) or ""
            block["thinking"] = str(block.get("thinking") or "") + piece
            return [ReasoningDelta(piece)] if piece else []
        if dtype == "signature_delta":
            block["signature"] = text_field(delta, "signature", where) or ""
        return []

    def _block_stop(self, event: dict[str, Any], kind: str) -> list[Delta]:
        index = _index(event, -1)
        block = self._blocks.get(index) or {}
        # A tool_use whose input came whole in content_block_start, not as deltas.
        if index in self._tool_index and not self._tool_json[index] and block.get("input"):
            arguments = json.dumps(block["input"], ensure_ascii=False)
            return [ToolCallDelta(index=self._tool_index[index], arguments=arguments)]
        return []

    def _message_delta(self, event: dict[str, Any], kind: str) -> list[Delta]:
        delta = object_field(event, "delta", kind) or {}
        self.stop = _stop_reason(delta, "message_delta.delta") or self.stop
        if isinstance(event.get("usage"), dict):
            self._usage.update({k: v for k, v in event["usage"].items() if v is not None})
        return []

    def _message_stop(self, event: dict[str, Any], kind: str) -> list[Delta]:
        self.done = True  # read on to the end of the body so the connection is reused
        return []

    def _error(self, event: dict[str, Any], kind: str) -> list[Delta]:
        raise self._adapter._error_event(event.get("error"), "reported an error mid-stream")

    def finish(self) -> tuple[list[Delta], AssistantMessage]:
        """No deltas held back, and the assembled message (raises when the stream ended early)."""
        adapter = self._adapter
        if not self.done:
            raise ModelResponseError(
                f"the stream from anthropic for model {adapter.id!r} ended before the reply was "
                "complete (no message_stop event)",
                provider="anthropic",
                model=adapter.id,
                retryable=True,
            )
        kept = [
            _kept_block(self._blocks[i], f"content block {i}")
            for i in sorted(self._blocks)
            if self._blocks[i].get("type") in _THINKING_TYPES
        ]
        try:
            message = self._assembler.finish(
                usage=_usage(self._usage),
                model=self.model_name,
                finish_reason=self.stop,
                provider_data={PROVIDER_DATA_KEY: kept} if kept else None,
            )
        except ModelResponseError as exc:
            raise ReplyFieldError(str(exc)) from None
        return [], message


_EVENT_HANDLERS: dict[str, Callable[[_StreamReply, dict[str, Any], str], list[Delta]]] = {
    "message_start": _StreamReply._message_start,
    "content_block_start": _StreamReply._block_start,
    "content_block_delta": _StreamReply._block_delta,
    "content_block_stop": _StreamReply._block_stop,
    "message_delta": _StreamReply._message_delta,
    "message_stop": _StreamReply._message_stop,
    "error": _StreamReply._error,
}
