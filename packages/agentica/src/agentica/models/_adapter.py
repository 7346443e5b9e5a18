"""What the HTTP provider adapters (``OpenAIChat``, ``Claude``) share: configuration, the
retried JSON call and the retried event stream of one request, and the mapping of a bad reply to
``ModelResponseError``. Each adapter adds only its wire format (``HttpModel``'s hooks)."""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, Self, TypeAlias, TypeVar

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
    Model,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelStreamEvent,
    ResponseDone,
)
from agentica.models.pricing import ModelPrice, price_for
from agentica.models.retry import RetryPolicy, call_with_retries, stream_with_retries

__all__ = ["Delta", "HttpModel", "StreamDecoder", "decode_event"]

Delta: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta
C = TypeVar("C")  # what decoding a reply needs to know of its request
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


def decode_event(data: str, model: Model, noun: str) -> dict[str, Any]:
    """One streamed event's JSON object; ``noun`` ("chunk", "event") names it in errors."""
    try:
        value = loads(data)
    except ValueError as exc:
        raise ModelResponseError(
            f"{model.provider} streamed {_a(noun)} that is not JSON for model {model.id!r} "
            f"({exc}): {data[:200]!r}",
            provider=model.provider,
            model=model.id,
            retryable=True,
        ) from exc
    if not isinstance(value, dict):
        raise ReplyFieldError(f"{_a(noun)} is {describe(value)}, not an object")
    return value


def _a(noun: str) -> str:
    return f"an {noun}" if noun[0] in "aeiou" else f"a {noun}"


@dataclass(slots=True)
class _Call:
    """What every attempt of one model call sends, and its time limits."""

    body: bytes
    headers: Mapping[str, str]
    timeout: float
    deadline: Deadline


class HttpModel(Generic[C]):
    """A model behind an HTTP API that this process calls directly (no SDK).

    It owns the configuration every such adapter has, the pooled connections (``Endpoint``),
    and one model call: the request is built once (``build_body``), sent with retries
    (``RetryPolicy``) within the call's ``Deadline``, and decoded by ``_parse`` or, streamed, by
    a fresh ``StreamDecoder`` per attempt (``_decoder``). A reply that breaks the wire format
    becomes ``ModelResponseError``; an empty reply that could not answer is refused by
    ``require_answer``.

    A subclass gives the endpoint's ``_path``, sets ``_headers`` (with the API key from
    ``_api_key``), and implements the wire format: ``build_body``, and the decoding of a reply
    given what it needs to know of the request (``_context``): ``_parse`` for an answer,
    ``_decoder`` for a stream; ``_refine`` lets it adjust an HTTP error before retrying is
    decided.
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

    def _context(self, request: ModelRequest) -> C:
        """What decoding the reply to ``request`` needs to know of it."""
        raise NotImplementedError

    def _parse(self, data: Any, context: C) -> ModelResponse:
        """The decoded JSON answer as a ``ModelResponse`` (raises ``ReplyFieldError`` for a
        field of the wrong type)."""
        raise NotImplementedError

    def _decoder(self, context: C) -> StreamDecoder:
        """The decoder of one streamed attempt."""
        raise NotImplementedError

    def _refine(self, error: ModelError) -> None:
        """Adjust an error of the provider's before retrying is decided (none by default)."""

    # ----------------------------------------------------------------- one call

    def _request_headers(self, settings: ModelSettings) -> Mapping[str, str]:
        extra = settings.extra_headers  # as ``self.settings.merged(settings)`` has it, cheaper
        if extra is None:
            extra = self.settings.extra_headers
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

    def _reply(self, data: Any, context: C) -> ModelResponse:
        """``_parse`` with a field of the wrong type reported as a malformed reply, and a reply
        that could not answer refused (``require_answer``)."""
        try:
            response = self._parse(data, context)
        except ReplyFieldError as exc:
            raise self._bad_reply(str(exc)) from None
        except RecursionError:
            raise self._bad_reply(_TOO_DEEP) from None
        require_answer(response.message, provider=self._provider, model=self._id)
        return response

    async def response(self, request: ModelRequest) -> ModelResponse:
        call = self._call(request, stream=False)
        context = self._context(request)

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
            return self._reply(data, context)

        return await call_with_retries(attempt, self.retry)

    async def response_stream(
        self, request: ModelRequest
    ) -> AsyncGenerator[ModelStreamEvent, None]:
        call = self._call(request, stream=True)
        context = self._context(request)
        events = stream_with_retries(
            lambda: self._stream_once(call, self._decoder(context)), self.retry
        )
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
