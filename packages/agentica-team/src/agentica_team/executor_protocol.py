"""The executor protocol: the messages between the server and ``agentica connect``, defined once.

A student's executor dials ``/api/executors/connect`` over a WebSocket with their token and
says ``Hello`` (protocol ``version``, a machine ``name``, what it ``can`` do); the server answers
``Welcome`` with its id, or closes the socket with a reason. Then the server sends ``Call``s (an
``id``, a ``method`` from ``METHODS``, JSON ``args``) and the executor answers each with a
``Result`` (``value`` or ``error``); a started command streams ``Output`` pieces and ends with
``Exited``. Every message is one JSON text frame with a ``type``; ``parse`` reads one and raises
``ProtocolError`` saying what was wrong. WebSocket pings carry the heartbeat.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = [
    "METHODS",
    "VERSION",
    "Call",
    "Exited",
    "Hello",
    "Message",
    "Output",
    "ProtocolError",
    "Result",
    "Welcome",
    "dump",
    "parse",
]

VERSION = 1
"""The protocol version this side speaks; a ``Hello`` with another is refused."""

METHODS = frozenset({
    "command.start",  # {command, timeout, max_output} -> {cid}
    "command.stop",  # {cid} -> null (the command's end comes as Exited)
    "files.ls", "files.stat", "files.read", "files.write", "files.glob", "files.grep",
})  # fmt: skip
"""What the server may ask an executor to do: nothing else runs."""

_MAX_TEXT = 4 * 1024 * 1024


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hello(_Message):
    """The executor's first message."""

    type: Literal["hello"] = "hello"
    version: int
    name: Annotated[str, Field(min_length=1, max_length=100)]
    workspace: Annotated[str, Field(max_length=1000)] = ""
    can: list[Literal["commands", "files"]] = Field(default_factory=list, max_length=8)
    sandboxed: bool = False


class Welcome(_Message):
    """The server accepted the executor: its id."""

    type: Literal["welcome"] = "welcome"
    executor_id: str
    version: int = VERSION


class Call(_Message):
    """The server asks the executor to do something."""

    type: Literal["call"] = "call"
    id: int
    method: str
    args: dict[str, Any] = Field(default_factory=dict)


class Result(_Message):
    """The executor's answer to call ``id``: its ``value``, or an ``error`` (``kind``: ``tool``,
    the model should see it; ``backend``, the workspace refused; ``usage``, the executor cannot
    do this at all)."""

    type: Literal["result"] = "result"
    id: int
    value: Any = None
    error: str = ""
    kind: Literal["", "tool", "backend", "usage"] = ""


class Output(_Message):
    """A piece of a running command's output."""

    type: Literal["output"] = "output"
    cid: str
    text: Annotated[str, Field(max_length=_MAX_TEXT)]


class Exited(_Message):
    """A command ended (``result``: a ``CommandResult``'s fields)."""

    type: Literal["exited"] = "exited"
    cid: str
    result: dict[str, Any]


Message: TypeAlias = Hello | Welcome | Call | Result | Output | Exited
_ADAPTER: TypeAdapter[Message] = TypeAdapter(Annotated[Message, Field(discriminator="type")])


class ProtocolError(ValueError):
    """A frame that is not a message of this protocol (the text says why)."""


def parse(frame: str | bytes) -> Message:
    """The message in ``frame`` (``ProtocolError`` if it is not one)."""
    if len(frame) > 2 * _MAX_TEXT:
        raise ProtocolError(f"a frame of {len(frame):,} bytes is larger than the protocol allows")
    try:
        return _ADAPTER.validate_json(frame)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem.get("loc", ()))
        raise ProtocolError(f"not an executor message: {where}: {problem.get('msg')}") from None


def dump(message: Message) -> str:
    """``message`` as a JSON text frame."""
    return message.model_dump_json()
