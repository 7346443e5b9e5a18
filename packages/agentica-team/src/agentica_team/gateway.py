"""The OpenAI-compatible gateway: students' own tools use the class model without its key.

``GET /v1/models`` lists the caller's courses as models (the id is the course's name);
``POST /v1/chat/completions`` (JSON, or server-sent events with ``stream: true``) forwards the
request to the course's model through a ``MeteredModel``: reserved on the student's budgets
before anything is spent, settled and audited (source ``gateway``; the instruction is audited
as ``gateway_request`` with the admission, the settling finishes after the answer). Errors
have OpenAI's shape, ``{"error": {"message", "type", ...}}``: 400 for a malformed request, 401
without a valid token, 404 for a model the caller may not use, 429 when a budget or rate limit
refuses (with what remains and when it resets), 502 when the course's model fails. No
response, log line or record contains the provider key.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from agentica.errors import (
    AgenticaError,
    ContextOverflowError,
    ModelAuthError,
    ModelError,
    ModelHTTPError,
)
from agentica.messages import UserMessage
from agentica.models.base import ModelRequest, ModelStreamEvent, ResponseDone
from agentica.models.openai_wire import (
    chunk_body,
    completion_body,
    delta_to_wire,
    request_from_wire,
)
from agentica_team.accounts import Course
from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS
from agentica_team.errors import BadRequest, NotFound, RateLimited, TeamError
from agentica_team.metering import AuditNote, MeteredModel
from agentica_team.principal import Principal
from agentica_team.security import redact

if TYPE_CHECKING:
    from agentica_team.service import Team

__all__ = ["UpstreamError", "router"]

router = APIRouter(prefix="/v1", tags=["gateway"], responses=ERRORS)

INSTRUCTION_CAP = 2000
"""Characters of the last user message kept in a ``gateway_request`` audit record."""
_DONE = b"data: [DONE]\n\n"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_CLIENT_FAULTS = frozenset({400, 404, 413, 422})
_CHAT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "description": "A course name from GET /v1/models"},
        "messages": {"type": "array", "minItems": 1, "items": {"type": "object"}},
        "stream": {"type": "boolean", "default": False},
        "stream_options": {
            "type": "object",
            "properties": {"include_usage": {"type": "boolean"}},
        },
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number"},
        "top_p": {"type": "number"},
        "stop": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        "seed": {"type": "integer"},
        "tools": {"type": "array", "items": {"type": "object"}},
        "tool_choice": {"anyOf": [{"type": "string"}, {"type": "object"}]},
        "response_format": {"type": "object"},
    },
}


class UpstreamError(TeamError):
    """The course's model failed or could not be reached (502); the message says how."""

    status = 502
    kind = "upstream_error"


# -- routes ------------------------------------------------------------------------------------


@router.get("/models")
async def list_models(team: TeamDep, me: PrincipalDep) -> dict[str, Any]:
    """The caller's courses as OpenAI models: use a course's name as ``model``."""
    return {
        "object": "list",
        "data": [
            {
                "id": course.name,
                "object": "model",
                "created": int(course.created_at),
                "owned_by": "agentica-team",
            }
            for course in await team.accounts.courses_of(me)
        ],
    }


@router.post(
    "/chat/completions",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": _CHAT_SCHEMA}},
        }
    },
    responses={
        200: {"description": "A chat completion, or with `stream` its server-sent chunks"},
        400: {"description": "The request is malformed"},
        404: {"description": "No such model (course) for the caller"},
        429: {"description": "A budget or rate limit refuses the call"},
        502: {"description": "The course's model failed"},
    },
)
async def chat_completions(request: Request, team: TeamDep, me: PrincipalDep) -> Response:
    """An OpenAI chat completion from the course's model, counted against the caller's
    budgets and audited."""
    body = _json_object(await request.body())
    stream, include_usage = _stream_options(body)
    course = await _course_for(team, me, body.get("model"))
    try:
        model_request = request_from_wire(body)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadRequest(f"not a valid chat completion request: {_describe(exc)}") from None
    _check_request(body, model_request)
    # the instruction is recorded in the admission's transaction (or alone if the call is not
    # admitted): durable before the model is called
    note = AuditNote(
        "gateway_request", "gateway", _instruction(course, model_request, stream=stream)
    )
    model = await team.models.for_user(
        course.id, me.user_id, source="gateway", defer_settling=True, note=note
    )
    rid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    if stream:
        return await _stream(model, model_request, rid, course.name, include_usage)
    try:
        response = await model.response(model_request)
    except ModelError as exc:
        raise _upstream_failure(exc) from None
    answer = completion_body(response.message, model=course.name, response_id=rid)
    return Response(json.dumps(answer, ensure_ascii=False), media_type="application/json")


# -- the request -------------------------------------------------------------------------------


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON ({exc}); send a chat completion object") from None
    except RecursionError:
        raise BadRequest("the body is nested too deeply to be a chat completion") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with `model` and `messages`")
    if _SURROGATE_ESCAPE.search(raw):  # rare: then check for halves of a pair left alone
        try:
            json.dumps(body, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise BadRequest(
                "the body has invalid unicode: a \\uD800-\\uDFFF escape that is not half of a "
                "surrogate pair"
            ) from None
    return body


def _stream_options(body: dict[str, Any]) -> tuple[bool, bool]:
    stream = body.get("stream", False)
    if not isinstance(stream, bool) and stream is not None:
        raise BadRequest("stream must be true or false")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest('stream_options must be an object such as {"include_usage": true}')
    return bool(stream), bool(options.get("include_usage"))


async def _course_for(team: Team, me: Principal, name: Any) -> Course:
    """The course ``name`` names among the caller's; the only one if they have one."""
    if not isinstance(name, str) or not name:
        raise BadRequest("model must be a course name (GET /v1/models lists yours)")
    mine: list[Course] = await team.accounts.courses_of(me)
    for course in mine:
        if course.name == name:
            return course
    if len(mine) == 1:
        return mine[0]
    if not mine:
        raise NotFound(
            f"there is no model {name[:100]!r} for you: you are not in any course yet "
            "(ask your teacher to add you)"
        )
    ids = ", ".join(course.name for course in mine)
    raise NotFound(f"there is no model {name[:100]!r} for you; use one of: {ids}", models=ids)


def _check_request(body: dict[str, Any], request: ModelRequest) -> None:
    n = body.get("n")
    if n not in (None, 1):
        raise BadRequest("n must be 1: the gateway returns one choice per request")
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise BadRequest(f"{name} must be a number")
    limit = request.settings.max_tokens
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise BadRequest("max_tokens must be a positive integer")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"a required field is missing: {exc.args[0]!r}"
    return str(exc)[:300] or type(exc).__name__


def _instruction(course: Course, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
    """What the audit keeps of a request: the last user message (capped) and its shape."""
    last = ""
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            content = message.content
            last = content if isinstance(content, str) else " ".join(
                getattr(part, "text", "[image]") for part in content
            )  # fmt: skip
            break
    return {
        "model": course.name,
        "stream": stream,
        "messages": len(request.messages),
        "tools": len(request.tools),
        "instruction": last[:INSTRUCTION_CAP],
        "truncated": len(last) > INSTRUCTION_CAP,
    }


# -- answers -----------------------------------------------------------------------------------


def _upstream_failure(exc: ModelError) -> TeamError:
    """What the caller is told when the course's model failed (the key was scrubbed from
    ``exc`` by ``MeteredModel``)."""
    detail = redact(str(exc))[:500]
    if isinstance(exc, ContextOverflowError):
        return BadRequest(f"the messages do not fit the course model's context window: {detail}")
    if isinstance(exc, ModelHTTPError) and not isinstance(exc, ModelAuthError):
        if exc.status == 429:
            wait = max(1, round(exc.retry_after or 1))
            return RateLimited(
                f"the course model's provider is rate limiting; retry in {wait} s",
                retry_after=wait,
            )
        if exc.status in _CLIENT_FAULTS:
            return BadRequest(f"the course's model refused the request: {detail}")
    if isinstance(exc, ModelAuthError):
        detail = "the provider rejected the server's credentials"
        return UpstreamError(
            f"the course's model is not usable: {detail}; ask your teacher to check the "
            "course's model settings"
        )
    return UpstreamError(f"the course's model failed: {detail}")


async def _stream(
    model: MeteredModel, request: ModelRequest, rid: str, name: str, include_usage: bool
) -> Response:
    """Server-sent chunks; admission and the first event happen before the response starts,
    so a refusal or a failure to reach the model is an ordinary HTTP error."""
    events = model.response_stream(request)
    try:
        first = await anext(events)
    except StopAsyncIteration:
        raise UpstreamError("the course's model ended its reply without an answer") from None
    except ModelError as exc:
        raise _upstream_failure(exc) from None
    return StreamingResponse(
        _chunks(first, events, rid, name, include_usage),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _chunks(
    first: ModelStreamEvent,
    events: AsyncIterator[ModelStreamEvent],
    rid: str,
    name: str,
    include_usage: bool,
) -> AsyncIterator[bytes]:
    """The chunks of one streamed answer, ending with ``[DONE]`` (a failure of the model as a
    last ``{"error": ...}`` event before it)."""
    async with aclosing(events):  # type: ignore[type-var]
        yield chunk_body(response_id=rid, model=name, delta={"role": "assistant", "content": ""})
        event: ModelStreamEvent | None = first
        try:
            while event is not None:
                if isinstance(event, ResponseDone):
                    finish = event.response.message.finish_reason or "stop"
                    yield chunk_body(response_id=rid, model=name, delta={}, finish_reason=finish)
                    if include_usage:
                        yield chunk_body(response_id=rid, model=name, usage=event.response.usage)
                else:
                    yield chunk_body(response_id=rid, model=name, delta=delta_to_wire(event))
                event = await anext(events, None)
        except AgenticaError as exc:
            yield b"data: " + json.dumps(_failure(exc).body()).encode() + b"\n\n"
        yield _DONE


def _failure(exc: AgenticaError) -> TeamError:
    if isinstance(exc, TeamError):
        return exc
    if isinstance(exc, ModelError):
        return _upstream_failure(exc)
    return UpstreamError(f"the course's model failed: {redact(str(exc))[:500]}")
