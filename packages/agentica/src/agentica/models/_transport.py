"""HTTP transport shared by the model adapters: the JSON POST (``post_json``) and the event
stream (``stream_sse``) to an ``Endpoint``, the typed ``ModelError`` for every failure
(``http_error``), and the checks a reply's fields pass at the adapter boundary.

What a provider sends is untrusted: JSON is decoded with a guard against nesting deep enough to
exhaust the stack (``loads``), one server-sent event may be at most ``MAX_EVENT_BYTES``, and
``text_field``, ``object_field``, ``list_field``, ``int_field`` and ``token_count`` check one
field each (``ReplyFieldError``).
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from agentica._http import HttpClientPool
from agentica.errors import (
    ContextOverflowError,
    ModelAuthError,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from agentica.messages import AssistantMessage

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT",
    "MAX_EVENT_BYTES",
    "Deadline",
    "Endpoint",
    "ReplyFieldError",
    "describe",
    "dumps",
    "http_error",
    "int_field",
    "list_field",
    "loads",
    "malformed_reply",
    "object_field",
    "post_json",
    "require_answer",
    "stream_sse",
    "text_field",
    "token_count",
]

DEFAULT_REQUEST_TIMEOUT = 600.0  # seconds for one model call, unless the gap timeout is longer
MAX_EVENT_BYTES = 16 * 1024 * 1024  # one server-sent event (a line or its data lines together)
_MAX_TOKENS = 2**53  # a token count above this is not a count (and would not fit storage)

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "exceed_context_size",
    "exceeds the available context size",
    "prompt is too long",
    "input is too long",
    "too many tokens",
)
_DETERMINISTIC_MARKERS = (
    "does not match the expected",  # llama.cpp's strict tool-call parser: same prompt, same failure
    "failed to parse",
)


def dumps(body: Mapping[str, Any]) -> bytes:
    """Compact JSON for a request body."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class ReplyFieldError(ValueError):
    """A field of a provider's reply has a value the adapter cannot use (the message says which);
    the adapters turn it into ``ModelResponseError``."""


def describe(value: Any) -> str:
    """A short description of an unexpected JSON value, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value!r}"[:60]
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, list):
        return f"a list of {len(value)} item(s)"
    if isinstance(value, dict):
        return f"an object with keys {sorted(map(str, value))[:5]}"
    return type(value).__name__


def text_field(obj: dict[str, Any], key: str, where: str) -> str | None:
    """``obj[key]`` when it is a string or absent/null; anything else raises."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    raise ReplyFieldError(f"{where}.{key} is {describe(value)}, not a string")


def object_field(obj: dict[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """``obj[key]`` when it is an object or absent/null; anything else raises."""
    value = obj.get(key)
    if value is None or isinstance(value, dict):
        return value
    raise ReplyFieldError(f"{where}.{key} is {describe(value)}, not an object")


def list_field(obj: dict[str, Any], key: str, where: str) -> list[Any] | None:
    """``obj[key]`` when it is a list or absent/null; anything else raises."""
    value = obj.get(key)
    if value is None or isinstance(value, list):
        return value
    raise ReplyFieldError(f"{where}.{key} is {describe(value)}, not a list")


def int_field(obj: dict[str, Any], key: str, where: str) -> int | None:
    """``obj[key]`` when it is a non-negative integer or absent/null; anything else raises."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_TOKENS:
        return value
    raise ReplyFieldError(f"{where}.{key} is {describe(value)}, not a non-negative integer")


def token_count(value: Any) -> int:
    """A usage count as sent: a non-negative integer, else 0 (an odd count is treated as missing,
    since usage is bookkeeping, not the answer)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_TOKENS:
        return value
    if isinstance(value, float) and value.is_integer() and 0 <= value < _MAX_TOKENS:
        return int(value)
    return 0


def loads(text: str | bytes) -> Any:
    """``json.loads`` for untrusted text: nesting too deep to decode raises ``ValueError`` too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to decode") from None


@dataclass(slots=True, frozen=True)
class Endpoint:
    """Where a model's requests go (``url``, over the pooled client ``pool``), and the names its
    errors give: the provider, the model, and the environment variable of the API key."""

    pool: HttpClientPool
    url: str
    provider: str
    model: str
    api_key_env: str = ""


@dataclass(slots=True, frozen=True)
class Deadline:
    """The overall time limit of one model request (all its attempts): ``limit`` seconds from
    ``start`` (``time.monotonic()``).

    Two time limits bound a model request: ``timeout`` (the wait for the answer to start and,
    for a stream, between two chunks) and this deadline for the whole request, retries
    included, so a server that trickles keep-alive comments cannot hold a run forever."""

    limit: float
    start: float

    @classmethod
    def after(cls, limit: float) -> Deadline:
        return cls(limit=limit, start=time.monotonic())

    @classmethod
    def for_call(cls, request_timeout: float | None, gap_timeout: float) -> Deadline:
        """The deadline of one model call starting now: ``request_timeout`` when set, else
        ``DEFAULT_REQUEST_TIMEOUT`` or the gap timeout when that is longer."""
        if request_timeout is None:
            request_timeout = max(DEFAULT_REQUEST_TIMEOUT, gap_timeout)
        return cls.after(request_timeout)

    def remaining(self) -> float:
        return self.start + self.limit - time.monotonic()

    def error(self, *, provider: str, model: str) -> ModelTimeoutError:
        return ModelTimeoutError(
            f"{provider} did not finish the reply for model {model!r} within the request "
            f"deadline of {self.limit:g} s (all attempts together); raise it with "
            "ModelSettings(request_timeout=...) or the adapter's request_timeout=... for long "
            "replies from slow models",
            provider=provider,
            model=model,
            retryable=False,
        )


def malformed_reply(
    provider: str, model: str, problem: str, *, retryable: bool = True
) -> ModelResponseError:
    """The error for a reply that breaks the wire format: ``problem`` says which field."""
    return ModelResponseError(
        f"{provider} sent a malformed reply for model {model!r}: {problem}",
        provider=provider,
        model=model,
        retryable=retryable,
    )


def require_answer(message: AssistantMessage, *, provider: str, model: str) -> None:
    """Raise ``ModelResponseError`` for a reply with neither text nor tool calls that says it
    could not answer: cut at ``max_tokens`` or withheld by a content filter (retrying the same
    request will not help, so not retryable).

    Any other empty reply (a normal stop) is passed on: the run loop charges its usage and sends
    it back to the model once (an empty reply is never a final answer)."""
    if message.tool_calls or (message.content and message.content.strip()):
        return
    finish = message.finish_reason
    if finish == "length":
        why = "it stopped at the token limit before any text (raise max_tokens"
        why += ", or lower the thinking budget)" if message.reasoning else ")"
    elif finish == "content_filter":
        why = "the provider withheld it (content filter or refusal)"
    else:
        return
    raise ModelResponseError(
        f"{provider} returned an empty reply for model {model!r} (no text, no tool calls"
        f"{', only reasoning' if message.reasoning else ''}): {why}",
        provider=provider,
        model=model,
        retryable=False,
    )


def _error_text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(err.get(key), str):
                    return str(err[key])[:500]
        elif isinstance(err, str):
            return err[:500]
    return text[:500]


def _retry_after(headers: Mapping[str, str]) -> float | None:
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            seconds = float(ms) / 1000.0
        except ValueError:
            pass
        else:
            if math.isfinite(seconds):
                return seconds
    value = headers.get("Retry-After") or headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) else None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # a malformed date (Python >= 3.10 raises, never None)
        return None
    return max(0.0, parsed.timestamp() - time.time())


def http_error(
    status: int,
    raw: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    model: str,
    api_key_env: str,
) -> ModelHTTPError:
    """The typed error for an HTTP error answer from a provider.

    Every failure leaves the transport as a typed ``ModelError`` that names the provider, the
    model, the HTTP status and what to do about it; its ``retryable`` flag decides whether
    ``RetryPolicy`` tries again."""
    detail = _error_text(raw)
    lowered = detail.lower()
    body = raw[:2000].decode("utf-8", "replace")
    where = f"{provider} returned HTTP {status} for model {model!r}: {detail}"
    if status in (401, 403):
        return ModelAuthError(
            f"{where}. Check the API key (argument api_key=... or ${api_key_env}).",
            status=status,
            body=body,
            provider=provider,
            model=model,
        )
    if any(marker in lowered for marker in _OVERFLOW_MARKERS) and status in (400, 413, 422, 500):
        return ContextOverflowError(
            f"{where}. The conversation is longer than the model's context window; "
            "shorten the input or lower the history budget.",
            status=status,
            body=body,
            provider=provider,
            model=model,
        )
    retryable = (status in _RETRYABLE_STATUS or status >= 500) and not any(
        marker in lowered for marker in _DETERMINISTIC_MARKERS
    )
    if status == 404:
        hint = "Check the model id and the base URL."
    elif status == 429:
        hint = "Rate limited; retried with backoff, then raised."
    elif retryable:
        hint = "The provider failed; retried with backoff, then raised."
    else:
        hint = "The request was rejected; retrying it unchanged will not help."
    return ModelHTTPError(
        f"{where}. {hint}",
        status=status,
        body=body,
        provider=provider,
        model=model,
        retryable=retryable,
        retry_after=_retry_after(headers),
    )


def _transport_error(
    exc: BaseException, endpoint: Endpoint, *, timeout: float, deadline: Deadline | None
) -> ModelError:
    import aiohttp
    from aiohttp.http_exceptions import HttpProcessingError

    provider, model, url = endpoint.provider, endpoint.model, endpoint.url
    if isinstance(exc, TimeoutError):
        if deadline is not None and deadline.remaining() <= min(0.05, timeout / 2):
            return deadline.error(provider=provider, model=model)
        return ModelTimeoutError(
            f"{provider} did not answer in time for model {model!r} ({url}; timeout "
            f"{timeout:g} s); raise the timeout (ModelSettings(timeout=...)) for slow models",
            provider=provider,
            model=model,
            retryable=True,
        )
    if isinstance(exc, aiohttp.ClientPayloadError | HttpProcessingError):
        return ModelResponseError(
            f"{provider} closed the response for model {model!r} before it was complete, or "
            f"sent one that is not valid HTTP: {exc}",
            provider=provider,
            model=model,
            retryable=True,
        )
    return ModelConnectionError(
        f"cannot reach {provider} at {url} for model {model!r}: {exc}. "
        "Check the base URL and that the server is running.",
        provider=provider,
        model=model,
        retryable=True,
    )


def _time_left(deadline: Deadline | None, *, provider: str, model: str) -> float | None:
    """Seconds this attempt may take in all (None: no overall limit); raises past the deadline."""
    if deadline is None:
        return None
    left = deadline.remaining()
    if left <= 0:
        raise deadline.error(provider=provider, model=model)
    return left


async def _raise_http_error(resp: aiohttp.ClientResponse, endpoint: Endpoint) -> NoReturn:
    raise http_error(
        resp.status,
        await resp.read(),
        resp.headers,
        provider=endpoint.provider,
        model=endpoint.model,
        api_key_env=endpoint.api_key_env,
    )


async def post_json(
    endpoint: Endpoint,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    deadline: Deadline | None = None,
) -> Any:
    """POST a JSON body to ``endpoint`` and return the decoded JSON answer.

    ``timeout`` bounds this attempt; ``deadline``, when given, bounds all attempts together.
    """
    import aiohttp
    from aiohttp.http_exceptions import HttpProcessingError

    provider, model = endpoint.provider, endpoint.model
    session = endpoint.pool.session()
    left = _time_left(deadline, provider=provider, model=model)
    total = timeout if left is None else min(timeout, left)
    try:
        async with session.post(
            endpoint.url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=total)
        ) as resp:
            if resp.status >= 400:
                await _raise_http_error(resp, endpoint)
            raw = await resp.read()
    except (aiohttp.ClientError, HttpProcessingError, TimeoutError) as exc:
        raise _transport_error(exc, endpoint, timeout=total, deadline=deadline) from exc
    try:
        return loads(raw)
    except ValueError as exc:
        raise ModelResponseError(
            f"{provider} answered model {model!r} with a body that is not JSON ({exc}): "
            f"{raw[:200]!r}",
            provider=provider,
            model=model,
            retryable=True,
        ) from exc


def _event_too_big(provider: str, model: str) -> ModelResponseError:
    return ModelResponseError(
        f"{provider} streamed an event over {MAX_EVENT_BYTES // (1024 * 1024)} MB for model "
        f"{model!r}: not a reply this client reads",
        provider=provider,
        model=model,
        retryable=False,
    )


class _EventReader:
    """Splits a server-sent-event body into ``(event, data)`` pairs as its bytes arrive.

    Lines are split here rather than by aiohttp, whose line limit (128 KB) is smaller than a
    real tool call's arguments can be. An event over ``MAX_EVENT_BYTES`` (or a line that long
    still waiting for its newline) stops the reading: ``check()`` raises it, after the events
    completed before it have been passed on."""

    __slots__ = ("_buffer", "_data", "_error", "_event", "_model", "_provider", "_scan", "_size")

    def __init__(self, provider: str, model: str) -> None:
        self._provider = provider
        self._model = model
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._buffer = bytearray()
        self._scan = 0  # _buffer[:_scan] holds no newline
        self._error: ModelResponseError | None = None

    def feed(self, piece: bytes) -> list[tuple[str, str]]:
        """The events that ``piece`` completes."""
        out: list[tuple[str, str]] = []
        buffer = self._buffer
        buffer += piece
        start = 0
        scan = self._scan
        while (end := buffer.find(b"\n", scan)) >= 0:
            line = bytes(buffer[start:end]).rstrip(b"\r")
            start = scan = end + 1
            if not line:
                if self._data:
                    out.append((self._event, "\n".join(self._data)))
                    self._event, self._data, self._size = "", [], 0
                continue
            name, _, value = line.partition(b":")  # a comment (":...") has no name
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self._size += len(value)
                if self._size > MAX_EVENT_BYTES:
                    self._error = _event_too_big(self._provider, self._model)
                    return out
                self._data.append(value.decode("utf-8", "replace"))
            elif name == b"event":
                self._event = value.decode("utf-8", "replace")
        del buffer[:start]
        self._scan = len(buffer)
        if self._scan > MAX_EVENT_BYTES:
            self._error = _event_too_big(self._provider, self._model)
        return out

    def end(self) -> list[tuple[str, str]]:
        """The events left when the body ends (a last line may lack its newline)."""
        out = self.feed(b"\n") if self._buffer else []
        if self._data and self._error is None:
            out.append((self._event, "\n".join(self._data)))
        return out

    def check(self) -> None:
        """Raise the error that stopped the reading, if any."""
        if self._error is not None:
            raise self._error


async def stream_sse(
    endpoint: Endpoint,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    deadline: Deadline | None = None,
) -> AsyncGenerator[tuple[str, str], None]:
    """POST a JSON body to ``endpoint`` and yield the answer's server-sent events as
    ``(event, data)``.

    ``timeout`` bounds the wait for each chunk, so a stalled stream fails instead of hanging;
    ``deadline``, when given, bounds the whole request (a stream that keeps sending keep-alive
    comments, or one byte at a time, ends there). An event is allowed up to ``MAX_EVENT_BYTES``
    (see ``_EventReader``).
    """
    import aiohttp
    from aiohttp.http_exceptions import HttpProcessingError

    session = endpoint.pool.session()
    left = _time_left(deadline, provider=endpoint.provider, model=endpoint.model)
    try:
        async with session.post(
            endpoint.url,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=left, sock_read=timeout),
        ) as resp:
            if resp.status >= 400:
                await _raise_http_error(resp, endpoint)
            reader = _EventReader(endpoint.provider, endpoint.model)
            async for piece in resp.content.iter_any():
                for event in reader.feed(piece):
                    yield event
                reader.check()
            for event in reader.end():
                yield event
            reader.check()
    except (aiohttp.ClientError, HttpProcessingError, TimeoutError) as exc:
        raise _transport_error(exc, endpoint, timeout=timeout, deadline=deadline) from exc
