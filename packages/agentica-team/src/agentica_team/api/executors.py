"""Routes of executors: ``agentica connect`` dials ``/api/executors/connect`` (a WebSocket,
authenticated by the student's token); ``GET /api/executors`` lists the caller's connected ones.

The socket's first message must be a ``Hello`` of this protocol version within 10 s; anything
else closes it with a reason (1008 for authentication or more than ``MAX_PER_USER`` executors
of one account, 1002 for the protocol). Connecting and
disconnecting are audited.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from typing import Any

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, Field

from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS
from agentica_team.executor_protocol import (
    VERSION,
    Hello,
    ProtocolError,
    Welcome,
    dump,
    parse,
)
from agentica_team.executors import Connection, ExecutorInfo

__all__ = ["ExecutorOut", "router"]

router = APIRouter(prefix="/api/executors", tags=["executors"], responses=ERRORS)

HELLO_TIMEOUT = 10.0
MAX_PER_USER = 16
"""Executors one account may have connected at once."""
_POLICY = 1008
_PROTOCOL = 1002


class ExecutorOut(BaseModel):
    """A connected executor (``agentica connect``)."""

    id: str
    name: str = Field(description="The computer's name (`--name`, default its host name).")
    workspace: str = Field(description="The folder it works in, as the computer names it.")
    can: list[str] = Field(description="What it offers, e.g. `commands`, `files`.")
    sandboxed: bool = Field(description="Whether its commands run in bubblewrap.")
    connected_at: float

    @classmethod
    def of(cls, info: ExecutorInfo) -> ExecutorOut:
        return cls(
            id=info.id,
            name=info.name,
            workspace=info.workspace,
            can=list(info.can),
            sandboxed=info.sandboxed,
            connected_at=info.connected_at,
        )


@router.get("", response_model=list[ExecutorOut])
async def list_executors(team: TeamDep, me: PrincipalDep) -> list[ExecutorOut]:
    """The caller's connected executors (``agentica connect``)."""
    return [ExecutorOut.of(info) for info in team.executors.of(me.user_id)]


@router.websocket("/connect")
async def connect(websocket: WebSocket) -> None:
    """An executor's socket (see the module docstring)."""
    team = websocket.app.state.team
    scheme, _, token = websocket.headers.get("authorization", "").partition(" ")
    principal = None
    if scheme.lower() == "bearer" and token.strip():
        principal = await team.accounts.principal_for_token(token.strip())
    refusal = ""
    if principal is None:
        refusal = "the token is not valid: send the student's token (agt_...)"
    elif len(team.executors.of(principal.user_id)) >= MAX_PER_USER:
        refusal = f"this account has {MAX_PER_USER} executors connected, the most; stop one"
    await websocket.accept()  # then closed with the reason, which a refused handshake loses
    if refusal or principal is None:
        await websocket.close(_POLICY, refusal)
        return
    try:
        async with asyncio.timeout(HELLO_TIMEOUT):
            hello = parse(await websocket.receive_text())
        if not isinstance(hello, Hello):
            raise ProtocolError("the first message must be a hello")
        if hello.version != VERSION:
            raise ProtocolError(
                f"this server speaks executor protocol {VERSION}, not {hello.version}: update "
                "agentica on this computer"
            )
    except (ProtocolError, TimeoutError, WebSocketDisconnect) as exc:
        with contextlib.suppress(Exception):
            await websocket.close(_PROTOCOL, str(exc)[:120] or "no hello")
        return
    info = ExecutorInfo(
        id="x_" + secrets.token_hex(6),
        user_id=principal.user_id,
        name=hello.name,
        workspace=hello.workspace,
        can=tuple(hello.can),
        sandboxed=hello.sandboxed,
    )
    connection = Connection(info, websocket.send_text)
    await _serve(team, websocket, connection)


async def _serve(team: Any, websocket: WebSocket, connection: Connection) -> None:
    info = connection.info
    # welcomed before anyone can find it: a call never reaches it before its welcome
    await websocket.send_text(dump(Welcome(executor_id=info.id)))
    team.executors.add(connection)
    team.supervisor.executor_changed(info.user_id, info.id, connected=True)
    try:
        await team.audit.record("executor_connected", actor_id=info.user_id, subject=info.id,
                                data={"name": info.name, "workspace": info.workspace,
                                      "sandboxed": info.sandboxed})  # fmt: skip
        while True:
            connection.received(parse(await websocket.receive_text()))
    except WebSocketDisconnect:
        pass
    except ProtocolError as exc:
        with contextlib.suppress(Exception):
            await websocket.close(_PROTOCOL, str(exc)[:120])
    finally:
        connection.lose()
        team.executors.remove(connection)
        team.supervisor.executor_changed(info.user_id, info.id, connected=False)
        await team.audit.record("executor_disconnected", actor_id=info.user_id, subject=info.id)
