"""The embedded local model: llama.cpp in this process (``xllamacpp``), no key, no network.

``LocalModel()`` is the default model when none is configured: it loads verified weights
(``agentica.models.weights``), runs llama.cpp's server on a random 127.0.0.1 port, renders the
prompt itself (``agentica.models.chat_template``) and parses tool calls from the reply text
(``agentica.models.toolparse``). ``shared_local_model(name)`` returns the process-wide instance
per model name so that many agents share one copy of the weights. ``stop()`` unloads it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeAlias

from agentica._http import HttpClientPool
from agentica.errors import ModelError, ModelResponseError, UsageError
from agentica.messages import (
    AssistantMessage,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolDefinition,
    Usage,
)
from agentica.models._transport import Endpoint, dumps, post_json, stream_sse
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseDone,
    StreamAssembler,
)
from agentica.models.chat_template import CHATML_STOP, render_chatml
from agentica.models.grammar import (
    arguments_grammar,
    call_start_fields,
    is_grammar_error,
    opened_call,
    tool_call_grammar,
    tool_name_grammar,
)
from agentica.models.pricing import ModelPrice
from agentica.models.retry import RetryPolicy, call_with_retries, stream_with_retries
from agentica.models.toolparse import (
    ToolCallStreamSplitter,
    as_tool_calls,
    parse_tool_calls,
)
from agentica.models.weights import EMBEDDED_MODELS, ensure_weights

__all__ = ["DEFAULT_LOCAL_MODEL", "LocalModel", "shared_local_model"]

log = logging.getLogger(__name__)

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b-instruct"
_FREE = ModelPrice(input=0.0, output=0.0)
_HEADERS = {"Content-Type": "application/json"}


# (tool names to parse, keep only the first call, the reply's start written for the model,
# the tool whose code the reply is when that start is a fenced block, else "")
_Policy: TypeAlias = tuple[list[str], bool, str, str]
_FENCE = "```python\n"


def _code_tool(choice: str | None, tools: Sequence[ToolDefinition]) -> ToolDefinition | None:
    """The tool ``choice`` names when it runs Python from one ``code`` string: its required call
    is written as a fenced block, not as a JSON string (seen: a script inside the JSON written
    on one line, ``with open(...) as f: rows = ... total = 0 for row in rows: ...``, a
    SyntaxError sent again after every hint; in a fence the model writes lines)."""
    tool = next((t for t in tools if t.name == choice), None)
    if tool is None or (tool.parameters.get("required") or [None])[0] != "code":
        return None
    code = (tool.parameters.get("properties") or {}).get("code")
    if not isinstance(code, dict) or code.get("type") != "string":
        return None
    return tool if "python" in f"{tool.name} {tool.description}".lower() else None


def _fenced_call(tool: str, text: str) -> str:
    """The call of ``tool`` with the code the model wrote after ``_FENCE`` (up to its end)."""
    code = text.split("```", 1)[0].rstrip()
    if not code.strip() or code.lstrip().startswith("{"):  # nothing, or a JSON call after all
        return ""
    return json.dumps({"name": tool, "arguments": {"code": code}})


def _prefill(choice: str | None, tools: Sequence[ToolDefinition]) -> str:
    """The start of the reply that makes the model call a tool: ``tool_choice="required"``
    opens a call; a tool's name opens a call of that tool up to its first required argument's
    value (``{"name": "run_python", "arguments": {"code": "``: a small model left to write the
    arguments writes ``1``). Other choices, or a tool not offered, leave the reply to the model."""
    names = [t.name for t in tools]
    if choice == "required" and names:
        return '{"name": "'
    if _code_tool(choice, tools) is not None:
        return _FENCE
    tool = next((t for t in tools if t.name == choice), None)
    if tool is None:
        return ""
    start = f'{{"name": {json.dumps(tool.name)}, "arguments": {{'
    required = tool.parameters.get("required") or []
    properties = tool.parameters.get("properties") or {}
    if not required or not isinstance(properties.get(required[0]), dict):
        return start  # (an object; the model writes its keys)
    first = required[0]
    string = properties[first].get("type") == "string"
    return f"{start}{json.dumps(first)}: " + ('"' if string else "")


def _forced(choice: str | None, tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """The tools a required call may name (all for ``"required"``, the one named), else []."""
    if choice == "required":
        return list(tools)
    return [t for t in tools if t.name == choice]


def _joined(first: Usage, second: Usage) -> Usage:
    """The usage of a reply sampled in two requests (the second's prompt holds the first)."""
    return Usage(
        input_tokens=first.input_tokens,
        output_tokens=first.output_tokens + second.output_tokens,
        cache_read_tokens=first.cache_read_tokens,
    )


def _usage(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cache_read_tokens=int(details.get("cached_tokens") or 0),
    )


class LocalModel:
    """A GGUF model run by llama.cpp inside this process.

    On first use it assembles and verifies the weights, loads them on a worker thread, and
    starts llama.cpp's server. Requests go over one pooled HTTP connection to the server's raw
    completion endpoint, and tool calls are parsed from the reply text on the client: the
    server's own strict tool-call parser rejects most of what these small models write
    (measured: HTTP 500 in 46 of 72 runs), and a rejected reply cannot be recovered. A reply
    that tries to call a tool but is malformed is turned into a call the engine reports back to
    the model, so the model can fix it; it is never returned as the answer. One ``LocalModel``
    holds one loaded model.

    Args:
        name: an embedded model (``"qwen2.5-coder-1.5b-instruct"``, the default, or
            ``"qwen2.5-coder-0.5b-instruct"``), or any name when ``model_path`` is given.
        model_path: a GGUF file to load instead of the embedded weights.
        n_ctx: the context to allocate (tokens), shared by the ``parallel`` slots; memory
            grows with it.
        threads: CPU threads for inference (default: all cores).
        parallel: requests decoded at once, each in a slot of ``n_ctx / parallel`` tokens that
            keeps its own prompt cache. Two by default (8,192 tokens each): an agent and its
            subagent, or the summariser, each keep theirs, where with one slot the agent's
            whole conversation was processed again after every subagent (15 s for 800 tokens,
            about 90 s for 3,900).
        settings: default ``ModelSettings`` (temperature defaults to 0 for reliable tool calls).
        timeout: seconds for one request (for a stream: between two chunks).
        max_tokens: the default cap on generated tokens per reply.
        server_options: extra llama.cpp server parameters (``xllamacpp.CommonParams``
            attributes, e.g. ``{"use_jinja": True}``), for experiments.
        tool_grammar: constrain tool calls with grammars of the turn's tools
            (``agentica.models.grammar``): free text stays free, and a call, once begun, can
            only name an offered tool with arguments that match its schema (one call per
            reply, sampled in two requests). Off by default until the task suite shows it
            helps.
    """

    def __init__(
        self,
        name: str = DEFAULT_LOCAL_MODEL,
        *,
        model_path: str | Path | None = None,
        n_ctx: int = 16384,
        threads: int | None = None,
        parallel: int = 2,
        settings: ModelSettings | None = None,
        timeout: float = 600.0,
        max_tokens: int = 2048,
        server_options: dict[str, Any] | None = None,
        tool_grammar: bool = False,
    ) -> None:
        if model_path is None and name not in EMBEDDED_MODELS:
            raise UsageError(
                f"unknown embedded model {name!r}: choose one of {', '.join(EMBEDDED_MODELS)} "
                "or pass model_path='file.gguf'"
            )
        self._name = name
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.threads = threads or os.cpu_count() or 2
        self.parallel = parallel
        self.settings = ModelSettings(temperature=0.0).merged(settings)
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.server_options = dict(server_options or {})
        self.tool_grammar = tool_grammar
        self._name_grammar = True  # a required call's tool name constrained (until refused)
        self.retry = RetryPolicy(max_retries=1)
        self.price = _FREE
        self.context_window = n_ctx // max(parallel, 1)
        self._server: Any = None
        self._base_url: str | None = None
        self._start_lock = threading.Lock()
        # llama.cpp's server closes idle keep-alive connections; on loopback a fresh connection
        # per request costs microseconds and never meets a half-closed socket.
        self._pool = HttpClientPool(max_connections=64, keepalive=False)
        self.load_seconds: float | None = None
        self.weights_path: Path | None = self.model_path  # the GGUF file, known once started

    @property
    def id(self) -> str:
        return self._name

    @property
    def provider(self) -> str:
        return "local"

    @property
    def base_url(self) -> str | None:
        """The loopback URL of the running llama.cpp server (``None`` until started)."""
        return self._base_url

    def __repr__(self) -> str:
        return f"LocalModel({self._name!r}, n_ctx={self.n_ctx})"

    # ----------------------------------------------------------------- lifecycle

    def start_blocking(self) -> str:
        """Load the model and start the server (blocking; safe to call from several threads)."""
        with self._start_lock:
            if self._base_url is not None:
                return self._base_url
            path = self.model_path or ensure_weights(EMBEDDED_MODELS[self._name])
            if not path.exists():
                raise UsageError(f"model file not found: {path}")
            self.weights_path = path
            try:
                import xllamacpp
            except ImportError:
                raise UsageError(
                    "the embedded model needs llama.cpp: run `pip install 'agentica[local]'`"
                ) from None
            started = time.perf_counter()
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.n_ctx = self.n_ctx
            params.n_parallel = self.parallel
            params.cpuparams.n_threads = self.threads
            params.cpuparams_batch.n_threads = self.threads
            params.verbosity = -1
            params.warmup = False
            for option, value in self.server_options.items():
                if not hasattr(params, option):
                    raise UsageError(f"llama.cpp has no server option {option!r}")
                setattr(params, option, value)
            self._server = xllamacpp.Server(params)
            self._base_url = str(self._server.listening_address).rstrip("/")
            self.load_seconds = time.perf_counter() - started
            return self._base_url

    async def start(self) -> str:
        """Load the model on a worker thread (the event loop keeps running) and return its URL."""
        if self._base_url is not None:
            return self._base_url
        return await asyncio.to_thread(self.start_blocking)

    def stop(self) -> None:
        """Unload the model and stop its server."""
        with self._start_lock:
            self._server = None
            self._base_url = None

    async def aclose(self) -> None:
        await self._pool.aclose()

    async def __aenter__(self) -> LocalModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- requests

    def build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The raw-completion request for ``request`` (prompt rendered here)."""
        s = self.settings.merged(request.settings)
        tools = () if s.tool_choice == "none" else request.tools
        forced = _forced(s.tool_choice, tools) if self.tool_grammar else []
        opening = self._opening(s, tools)
        body: dict[str, Any] = {
            "prompt": render_chatml(
                request.messages,
                tools,
                parallel=s.parallel_tool_calls is not False,
                listed=request.listed_tools if tools else (),
            )
            + opening,
            "max_tokens": s.max_tokens or self.max_tokens,
            "temperature": s.temperature if s.temperature is not None else 0.0,
            "stop": list(CHATML_STOP) + list(s.stop or ()) + (["```"] if opening == _FENCE else []),
            "cache_prompt": True,
        }
        if s.top_p is not None:
            body["top_p"] = s.top_p
        if s.seed is not None:
            body["seed"] = s.seed
        if request.output_schema is not None and not tools:
            body["json_schema"] = request.output_schema.schema
        if forced:  # the whole reply is a call of one of them (no text, no prefix)
            body["grammar"] = tool_call_grammar(forced, parallel=False)
        elif tools and self.tool_grammar:  # free until a call begins (then see _continued)
            body.update(call_start_fields(tools))
        elif tools and s.tool_choice == "required" and self._name_grammar:
            body["grammar"] = tool_name_grammar(tools)  # the call opened for it names a tool
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if s.extra_body:
            body.update(s.extra_body)
        return body

    def _lazy_tools(self, request: ModelRequest) -> Sequence[ToolDefinition]:
        """The tools whose calls are sampled in two requests (a call's start, then its
        arguments under the grammar): the turn's tools under ``tool_grammar``, unless the call
        is required (then it is sampled whole)."""
        s = self.settings.merged(request.settings)
        if not (self.tool_grammar and request.tools) or s.tool_choice == "none":
            return ()
        return () if _forced(s.tool_choice, request.tools) else request.tools

    def _continued(
        self, body: dict[str, Any], text: str, tools: Sequence[ToolDefinition], used: int
    ) -> bytes | None:
        """The second request of a reply that ``text`` ended by opening a call of one of
        ``tools`` (``used`` tokens so far): the same prompt with the text, the arguments under
        that tool's grammar. ``None`` when the reply opened no call."""
        opened = opened_call(text, tools) if tools else None
        if opened is None:
            return None
        tool, comma = opened
        body = {k: v for k, v in body.items() if k not in ("grammar_lazy", "grammar_triggers")}
        body["prompt"] += text
        body["grammar"] = arguments_grammar(tool, comma=comma)
        body["max_tokens"] = max(1, int(body["max_tokens"]) - used)
        return dumps(body)

    def _tool_policy(self, request: ModelRequest) -> _Policy:
        """The tool names to parse from the reply, whether to keep only the first call, and the
        start of the reply written for the model (a required call)."""
        s = self.settings.merged(request.settings)
        if s.tool_choice == "none":
            return [], False, "", ""
        tools = request.tools
        forced = self.tool_grammar and bool(_forced(s.tool_choice, tools))
        prefill = self._opening(s, tools)
        return (
            [t.name for t in tools],
            s.parallel_tool_calls is False or forced,
            prefill,
            str(s.tool_choice) if prefill == _FENCE else "",
        )

    def _opening(self, s: ModelSettings, tools: Sequence[ToolDefinition]) -> str:
        """The start of the reply written for the model: a required call's opening, unless
        the tool grammar samples that call whole."""
        if self.tool_grammar and _forced(s.tool_choice, tools):
            return ""
        return _prefill(s.tool_choice, tools)

    def _timeout(self, settings: ModelSettings) -> float:
        return settings.timeout or self.settings.timeout or self.timeout

    def _message(
        self, text: str, policy: _Policy, usage: Usage, finish: str | None
    ) -> AssistantMessage:
        tool_names, first_only, prefill, code_tool = policy
        if code_tool and (call := _fenced_call(code_tool, text)):
            text, prefill = call, ""
        if tool_names:
            parsed = parse_tool_calls(prefill + text, tool_names)
            calls = as_tool_calls(parsed, first_only=first_only)
            content = parsed.text or None
            if prefill and not calls:  # it wrote no call after all: its own text, no prefix
                content = text.strip() or None
        else:
            calls, content = [], text.strip() or None
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            usage=usage,
            model=self._name,
            finish_reason="tool_calls" if calls else ("length" if finish == "length" else "stop"),
        )

    def _drop_grammar(self, error: ModelError, request: ModelRequest) -> bool:
        """When llama.cpp could not build the tools' grammar: no grammar from now on (the
        request is sent again); whether that was the failure."""
        if not (request.tools and is_grammar_error(error)):
            return False
        required = self.settings.merged(request.settings).tool_choice == "required"
        if not self.tool_grammar:
            if not (required and self._name_grammar):
                return False
            self._name_grammar = False
            log.warning("llama.cpp refused the tool-name grammar (%s)", str(error)[:200])
            return True
        self.tool_grammar = False
        log.warning("llama.cpp refused the tool-call grammar (%s); calls are no longer "
                    "constrained", str(error)[:200])  # fmt: skip
        return True

    async def response(self, request: ModelRequest) -> ModelResponse:
        try:
            return await self._response(request)
        except ModelError as error:
            if not self._drop_grammar(error, request):
                raise
        return await self._response(request)

    async def response_stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        shown = False
        try:
            async with aclosing(self._response_stream(request)) as events:
                async for event in events:
                    shown = True
                    yield event
            return
        except ModelError as error:
            if shown or not self._drop_grammar(error, request):
                raise
        async with aclosing(self._response_stream(request)) as again:
            async for event in again:
                yield event

    async def _response(self, request: ModelRequest) -> ModelResponse:
        base = await self.start()
        fields = self.build_body(request, stream=False)
        body = dumps(fields)
        timeout = self._timeout(request.settings)
        policy = self._tool_policy(request)
        lazy = self._lazy_tools(request)

        async def post(payload: bytes) -> tuple[dict[str, Any], str, str | None]:
            data = await post_json(self._endpoint(base), payload, _HEADERS, timeout=timeout)
            try:
                choice = data["choices"][0]
                return data, choice.get("text") or "", choice.get("finish_reason")
            except (KeyError, IndexError, TypeError) as exc:
                raise ModelResponseError(
                    f"llama.cpp answered without choices[0].text: {json.dumps(data)[:200]}",
                    provider="local",
                    model=self._name,
                    retryable=True,
                ) from exc

        async def attempt() -> ModelResponse:
            data, text, finish = await post(body)
            usage = _usage(data.get("usage"))
            rest = self._continued(fields, text, lazy, usage.output_tokens)
            if rest is not None:  # a call begun: its arguments under the tool's grammar
                more, tail, finish = await post(rest)
                text += tail
                usage = _joined(usage, _usage(more.get("usage")))
            message = self._message(text, policy, usage, finish)
            return ModelResponse(message=message, provider="local", response_id=data.get("id"))

        return await call_with_retries(attempt, self.retry)

    async def _response_stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        base = await self.start()
        fields = self.build_body(request, stream=True)
        timeout = self._timeout(request.settings)
        policy = self._tool_policy(request)
        lazy = self._lazy_tools(request)
        events = stream_with_retries(
            lambda: self._stream(base, fields, timeout, policy, lazy), self.retry
        )
        async with aclosing(events):
            async for event in events:
                yield event

    def _endpoint(self, base: str) -> Endpoint:
        return Endpoint(self._pool, f"{base}/v1/completions", "local", self._name)

    async def _stream(
        self,
        base: str,
        fields: dict[str, Any],
        timeout: float,
        policy: _Policy,
        lazy: Sequence[ToolDefinition] = (),
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        reply = _StreamReply(self._name, policy)
        body: bytes | None = dumps(fields)
        first: Usage | None = None
        while body is not None:
            sse = stream_sse(self._endpoint(base), body, _HEADERS, timeout=timeout)
            async with aclosing(sse) as chunks:
                async for name, data in chunks:
                    for text in reply.feed(name, data):
                        yield text
            body = None
            if first is None:  # a call begun: its arguments under the tool's grammar
                first = reply.usage or Usage()
                body = self._continued(fields, reply.raw, lazy, first.output_tokens)
                if body is not None:
                    reply.done = False
            elif reply.usage is not None:
                reply.usage = _joined(first, reply.usage)
        held_back, message = reply.finish()
        for delta in held_back:
            yield delta
        yield ResponseDone(ModelResponse(message=message, provider="local"))


class _StreamReply:
    """The state of one streamed raw completion: the text as it arrives (tool-call markup held
    back by a ``ToolCallStreamSplitter``), the tool calls parsed from it at the end."""

    __slots__ = (
        "_assembler",
        "_code_tool",
        "_first_only",
        "_model",
        "_prefill",
        "_splitter",
        "done",
        "finish_reason",
        "raw",
        "usage",
    )

    def __init__(self, model: str, policy: _Policy) -> None:
        tool_names, self._first_only, prefill, self._code_tool = policy
        self._prefill = prefill
        self._model = model
        self._splitter = ToolCallStreamSplitter(tool_names) if tool_names else None
        if self._splitter is not None and prefill and not self._code_tool:
            self._splitter.feed(prefill)  # the call's start, written for the model: held back
        self._assembler = StreamAssembler()
        self.raw = ""  # the text as the model wrote it
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.done = False

    def feed(self, name: str, data: str) -> list[TextDelta]:
        """The text deltas of one server-sent event."""
        if data.strip() == "[DONE]":
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise ModelResponseError(
                f"llama.cpp streamed a chunk that is not JSON: {data[:200]!r}",
                provider="local",
                model=self._model,
                retryable=True,
            ) from exc
        if chunk.get("error"):
            raise ModelError(
                f"llama.cpp failed mid-stream: {chunk['error']}",
                provider="local",
                model=self._model,
            )
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        out: list[TextDelta] = []
        for choice in chunk.get("choices") or ():
            text = choice.get("text") or ""
            self.raw += text
            if self._code_tool:  # the code of a call: held back whole (see finish)
                shown = ""
            else:
                shown = self._splitter.feed(text) if self._splitter is not None else text
            if shown:
                out.append(TextDelta(shown))
                self._assembler.add(out[-1])
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return out

    def finish(self) -> tuple[list[TextDelta | ToolCallDelta], AssistantMessage]:
        """The deltas held back to the end (text after the tool-call markup, the tool calls)
        and the assembled message."""
        if not self.done and self.finish_reason is None:
            raise ModelResponseError(
                "the stream from the local model ended before the reply was complete",
                provider="local",
                model=self._model,
                retryable=True,
            )
        out: list[TextDelta | ToolCallDelta] = []
        calls: list[ToolCall] = []
        if self._splitter is not None:
            if self._code_tool:
                self._splitter.feed(_fenced_call(self._code_tool, self.raw) or self.raw)
            parsed = self._splitter.finish()
            calls = as_tool_calls(parsed, first_only=self._first_only)
            text = parsed.text
            if self._prefill and not calls:  # no call after all: its own text, no prefix
                text = text.removeprefix(self._prefill)
            if text:
                out.append(TextDelta(text))
        for index, call in enumerate(calls):
            out.append(
                ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments)
            )
        for delta in out:
            self._assembler.add(delta)
        stop = "length" if self.finish_reason == "length" else "stop"
        message = self._assembler.finish(
            usage=self.usage, model=self._model, finish_reason="tool_calls" if calls else stop
        )
        if message.content:
            message.content = message.content.strip() or None
        return out, message


_SHARED: dict[str, LocalModel] = {}
_SHARED_LOCK = threading.Lock()


def shared_local_model(name: str = DEFAULT_LOCAL_MODEL) -> LocalModel:
    """The process-wide ``LocalModel`` for ``name``: agents share one copy of the weights.

    It holds the loaded model only (no conversation data), so sharing it is safe across users.
    """
    with _SHARED_LOCK:
        model = _SHARED.get(name)
        if model is None:
            model = _SHARED[name] = LocalModel(name)
        return model
