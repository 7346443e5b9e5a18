"""HTTP transport shared by the provider adapters: JSON POST, server-sent events, error mapping.

Every failure leaves here as a typed ``ModelError`` that names the provider, the model, the HTTP
status and what to do about it; the ``retryable`` flag decides whether ``RetryPolicy`` tries again.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

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

__all__ = ["dumps", "http_error", "post_json", "stream_sse"]

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


def _error_text(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
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
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("Retry-After") or headers.get("retry-after")
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        pass
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
    """The typed error for an HTTP error answer from a provider."""
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


def _transport_error(exc: BaseException, *, provider: str, model: str, url: str) -> ModelError:
    import aiohttp

    if isinstance(exc, TimeoutError):
        return ModelTimeoutError(
            f"{provider} did not answer in time for model {model!r} ({url}); "
            "raise the timeout (ModelSettings(timeout=...)) for slow models.",
            provider=provider,
            model=model,
            retryable=True,
        )
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ModelResponseError(
            f"{provider} closed the response for model {model!r} before it was complete: {exc}",
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


async def post_json(
    pool: HttpClientPool,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    provider: str,
    model: str,
    api_key_env: str,
) -> Any:
    """POST a JSON body and return the decoded JSON answer."""
    import aiohttp

    session = pool.session()
    try:
        async with session.post(
            url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)
        ) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                raise http_error(
                    resp.status,
                    raw,
                    resp.headers,
                    provider=provider,
                    model=model,
                    api_key_env=api_key_env,
                )
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport_error(exc, provider=provider, model=model, url=url) from exc
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ModelResponseError(
            f"{provider} answered model {model!r} with a body that is not JSON: {raw[:200]!r}",
            provider=provider,
            model=model,
            retryable=True,
        ) from exc


async def stream_sse(
    pool: HttpClientPool,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    *,
    timeout: float,
    provider: str,
    model: str,
    api_key_env: str,
) -> AsyncGenerator[tuple[str, str], None]:
    """POST a JSON body and yield the answer's server-sent events as ``(event, data)``.

    ``timeout`` bounds the wait for each chunk, so a stalled stream fails instead of hanging.
    """
    import aiohttp

    session = pool.session()
    try:
        async with session.post(
            url,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_read=timeout),
        ) as resp:
            if resp.status >= 400:
                raw = await resp.read()
                raise http_error(
                    resp.status,
                    raw,
                    resp.headers,
                    provider=provider,
                    model=model,
                    api_key_env=api_key_env,
                )
            event = ""
            data: list[str] = []
            async for line_bytes in resp.content:
                line = line_bytes.rstrip(b"\r\n")
                if not line:
                    if data:
                        yield event, "\n".join(data)
                        event, data = "", []
                    continue
                if line.startswith(b":"):
                    continue
                name, _, value = line.partition(b":")
                if value.startswith(b" "):
                    value = value[1:]
                if name == b"data":
                    data.append(value.decode("utf-8", "replace"))
                elif name == b"event":
                    event = value.decode("utf-8", "replace")
            if data:
                yield event, "\n".join(data)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _transport_error(exc, provider=provider, model=model, url=url) from exc
