"""What the HTTP provider adapters (``OpenAIChat``, ``Claude``) share: configuration, the
retried JSON call and the retried event stream of one request, and the mapping of a bad reply to
``ModelResponseError``. Each adapter adds only its wire format (``HttpModel``'s hooks)."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self, TypeAlias

from agentica._http import HttpClientPool
from agentica.errors import ModelError, ModelResponseError, UsageError
from agentica.messages import AssistantMessage, ReasoningDelta, TextDelta, ToolCallDelta
from agentica.models._transport import (
    Deadline,
    Endpoint,
    ReplyFieldError,
    describe,
    dumps,
    loads,
    malformed_reply,
    post_json,
    require_answer,
    stream_sse,
)
from agentica.models.base import (
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseDone,
)
from agentica.models.pricing import ModelPrice, price_for
from agentica.models.retry import RetryPolicy, call_with_retries, stream_with_retries

__all__ = ["Delta", "HttpModel", "StreamDecoder", "copy_settings", "decode_event"]

Delta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta
_TOO_DEEP = "a value is nested too deeply to encode"


class StreamDecoder(Protocol):
    """The state of one streamed reply: turns each server-sent event into deltas (raising
    ``ReplyFieldError`` for a bad one) and assembles the message at the end."""

    response_id: str | None

    def feed(self, name: str, data: str) -> list[Delta]:
        """The deltas of the event ``name`` with ``data``."""
        ...

    def finish(self) -> tuple[Sequence[Delta], AssistantMessage]:
        """Deltas held back to the end, and the assembled message."""
        ...


def decode_event(data: str, *, provider: str, model: str, noun: str) -> dict[str, Any]:
    """One streamed event's JSON object; ``noun`` ("chunk", "event") names it in errors."""
    try:
        value = loads(data)
    except ValueError as exc:
        raise ModelResponseError(
            f"{provider} streamed {_a(noun)} that is not JSON for model {model!r} ({exc}): "
            f"{data[:200]!r}",
            provider=provider,
            model=model,
            retryable=True,
        ) from exc
    if not isinstance(value, dict):
        raise ReplyFieldError(f"{_a(noun)} is {describe(value)}, not an object")
    return value


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


def copy_settings(
    body: dict[str, Any], settings: ModelSettings, keys: Sequence[tuple[str, str]]
) -> None:
    """Put each setting that is set into ``body``, in order: ``keys`` pairs a ``ModelSettings``
    attribute with its body key. ``stop`` goes as a list, and only when not empty."""
    for attribute, key in keys:
        value = getattr(settings, attribute)
        if value is None:
            continue
        if attribute == "stop":
            if value:
                body[key] = list(value)
        else:
            body[key] = value


@dataclass(slots=True)
class _Call:
    """What every attempt of one model call sends, and its time limits."""

    body: bytes
    headers: Mapping[str, str]
    timeout: float
    deadline: Deadline


class HttpModel:
    """A model behind an HTTP API that this process calls directly (no SDK).

    It owns the configuration every such adapter has, the pooled connections, and one model
    call: the request is built once (``build_body``), sent with retries (``RetryPolicy``) within
    the call's ``Deadline``, and answered by ``parse_response``-style decoding (``_answer_parser``)
    or, streamed, by a ``StreamDecoder`` per attempt (``_stream_decoder``). A reply that breaks
    the wire format becomes ``ModelResponseError``; an empty reply that could not answer is
    refused by ``require_answer``. A subclass sets ``_url`` and ``_headers`` and gives the wire
    format; ``_refine`` lets it adjust an HTTP error before retrying is decided.
    """

    api_key_env: ClassVar[str]
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[str]

    _headers: dict[str, str]

    def __init__(
        self,
        id: str,
        *,
        provider: str,
        base_url: str | None,
        settings: ModelSettings | None,
        retry: RetryPolicy | None,
        timeout: float,
        request_timeout: float | None,
        price: ModelPrice | None,
        max_connections: int,
    ) -> None:
        self._id = id
        self._provider = provider
        self.base_url = (
            base_url or os.environ.get(self.base_url_env) or self.default_base_url
        ).rstrip("/")
        self.settings = settings or ModelSettings()
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.request_timeout = request_timeout
        self.price = price if price is not None else price_for(id)
        self._pool = HttpClientPool(max_connections=max_connections)
        self._url = self.base_url + self._path()
        self._endpoint = Endpoint(self._pool, self._url, provider, id, self.api_key_env)

    def _api_key(self, api_key: str | None, who: str, hint: str = "") -> str | None:
        """The key given or from ``$api_key_env``; the official endpoint requires one."""
        key = api_key if api_key is not None else os.environ.get(self.api_key_env)
        if not key and self.base_url == self.default_base_url:
            raise UsageError(
                f"{who} needs an API key for {self.base_url}: pass api_key=... or set "
                f"${self.api_key_env}.{hint}"
            )
        return key

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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------- the wire format

    def _path(self) -> str:
        """The path of the API's endpoint below ``base_url``."""
        raise NotImplementedError

    def build_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body for ``request`` (public for inspection and tests)."""
        raise NotImplementedError

    def _answer_parser(self, request: ModelRequest) -> Callable[[Any], ModelResponse]:
        """Turns the decoded JSON answer to ``request`` into a checked ``ModelResponse``."""
        raise NotImplementedError

    def _stream_decoder(self, request: ModelRequest) -> Callable[[], StreamDecoder]:
        """Makes the decoder of one streamed attempt at ``request``."""
        raise NotImplementedError

    def _refine(self, error: ModelError) -> None:
        """Adjust an error of the provider's before retrying is decided (none by default)."""

    # ----------------------------------------------------------------- one call

    def _request_headers(self, settings: ModelSettings) -> Mapping[str, str]:
        extra = self.settings.merged(settings).extra_headers
        return self._headers | extra if extra else self._headers

    def _timeout(self, settings: ModelSettings) -> float:
        return settings.timeout or self.settings.timeout or self.timeout

    def _deadline(self, settings: ModelSettings) -> Deadline:
        limit = settings.request_timeout or self.settings.request_timeout or self.request_timeout
        return Deadline.for_call(limit, self._timeout(settings))

    def _bad_reply(self, problem: str, *, retryable: bool = True) -> ModelResponseError:
        return malformed_reply(self._provider, self._id, problem, retryable=retryable)

    def _call(self, request: ModelRequest, *, stream: bool) -> _Call:
        return _Call(
            body=dumps(self.build_body(request, stream=stream)),
            headers=self._request_headers(request.settings),
            timeout=self._timeout(request.settings),
            deadline=self._deadline(request.settings),
        )

    def _checked(self, parse: Callable[..., ModelResponse], *args: Any) -> ModelResponse:
        """``parse(*args)`` with a field of the wrong type reported as a malformed reply, and a
        reply that could not answer refused (``require_answer``)."""
        try:
            response = parse(*args)
        except ReplyFieldError as exc:
            raise self._bad_reply(str(exc)) from None
        except RecursionError:
            raise self._bad_reply(_TOO_DEEP) from None
        require_answer(response.message, provider=self._provider, model=self._id)
        return response

    async def response(self, request: ModelRequest) -> ModelResponse:
        call = self._call(request, stream=False)
        parse = self._answer_parser(request)

        async def attempt() -> ModelResponse:
            try:
                data = await post_json(
                    self._endpoint,
                    call.body,
                    call.headers,
                    timeout=call.timeout,
                    deadline=call.deadline,
                )
            except ModelError as error:
                self._refine(error)
                raise
            return parse(data)

        return await call_with_retries(attempt, self.retry)

    async def response_stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        call = self._call(request, stream=True)
        decoder = self._stream_decoder(request)
        events = stream_with_retries(lambda: self._stream_once(call, decoder()), self.retry)
        async with aclosing(events):
            async for event in events:
                yield event

    async def _stream_once(
        self, call: _Call, reply: StreamDecoder
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        sse = stream_sse(
            self._endpoint, call.body, call.headers, timeout=call.timeout, deadline=call.deadline
        )
        try:
            async with aclosing(sse) as events:
                async for name, data in events:
                    try:
                        deltas = reply.feed(name, data)
                    except ReplyFieldError as exc:
                        raise self._bad_reply(str(exc)) from None
                    except RecursionError:
                        raise self._bad_reply(_TOO_DEEP) from None
                    for delta in deltas:
                        yield delta
            try:
                held_back, message = reply.finish()
            except ReplyFieldError as exc:
                raise self._bad_reply(str(exc)) from None
        except ModelError as error:
            self._refine(error)
            raise
        for delta in held_back:
            yield delta
        require_answer(message, provider=self._provider, model=self._id)
        response = ModelResponse(
            message=message, provider=self._provider, response_id=reply.response_id
        )
        yield ResponseDone(response)
