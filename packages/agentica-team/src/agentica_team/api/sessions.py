"""Routes for agent sessions: create, list, rename and delete them, send messages, stream their
events (SSE), continue or cancel a run (or one operation of a lanes session), and read the
session's workspace files.

A student sees only their own sessions (another's is a 404); a teacher can read, not change, the
sessions in the courses they teach (but may guide the agent, cancel a run or stop an
operation); admins can read every session. Sending a message appends it to the session's log
(with its audit record, in one transaction) and wakes the supervisor: the handler never runs the
agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Path, Query
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field

from agentica.errors import ToolError
from agentica_team.access import course_as_member
from agentica_team.api.deps import PrincipalDep, TeamDep
from agentica_team.api.schemas import ERRORS, JSON_ERRORS
from agentica_team.errors import BadRequest, Conflict, Forbidden, NotFound
from agentica_team.sessions import AgentSession, SessionEvent
from agentica_team.supervisor import CancelRequested, MessageQueued, OperationCancelRequested

if TYPE_CHECKING:
    from agentica_team.principal import Principal
    from agentica_team.service import Team

__all__ = ["router"]

router = APIRouter(prefix="/api/sessions", tags=["sessions"], responses=ERRORS)

_PAGE = 500


# -- bodies ----------------------------------------------------------------------------------


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionBody(_Body):
    course_id: Annotated[str, Field(min_length=1, max_length=64)]
    title: Annotated[str, Field(max_length=500)] = ""
    runtime: Literal["", "serial", "batch", "lanes"] = Field(
        default="", description="How the agent handles messages; empty: the server's choice."
    )


class SessionChange(_Body):
    title: Annotated[str, Field(min_length=1, max_length=500)]


class MessageBody(_Body):
    text: Annotated[str, Field(min_length=1, max_length=100_000)]


class ContinueBody(_Body):
    seq: Annotated[int, Field(ge=1)] | None = Field(
        default=None, description="The interrupted message to continue; default the latest."
    )


class SessionOut(BaseModel):
    id: str
    user_id: str
    course_id: str
    title: str
    created_at: float
    updated_at: float
    last_seq: int = Field(description="The seq of the session's last event.")
    runtime: str = Field(default="", description="The session's runtime (empty: the server's).")
    active: bool = Field(description="Whether the agent is working on the session now.")

    @classmethod
    def of(cls, session: AgentSession, active: bool) -> SessionOut:
        return cls(
            id=session.id,
            user_id=session.user_id,
            course_id=session.course_id,
            title=session.title,
            created_at=session.created_at,
            updated_at=session.updated_at,
            last_seq=session.last_seq,
            runtime=session.runtime,
            active=active,
        )


class MessageOut(BaseModel):
    session_id: str
    seq: int
    ts: float
    state: Literal["pending", "running", "done", "failed", "interrupted"]
    text: str
    continued: int = Field(default=0, description="How often it was continued after a stop.")

    @classmethod
    def of(cls, event: SessionEvent) -> MessageOut:
        return cls(
            session_id=event.session_id,
            seq=event.seq,
            ts=event.ts,
            state=event.state,  # type: ignore[arg-type]
            text=str(event.data.get("text", "")),
            continued=int(event.data.get("continued", 0)),
        )


class EventOut(BaseModel):
    """One entry of a session's log; the SSE stream sends these as ``data`` with ``id: seq``."""

    seq: int
    ts: float
    kind: Literal["message", "run", "status", "lane"] = Field(
        description="message: a student's instruction (its state in `state`); run: one run "
        "event (`data.kind`: run_started, text_delta, tool_call_started, tool_call_completed, "
        "todos, context_compacted, budget, budget_exceeded, run_failed, run_completed, ...); "
        "status: a run started, ended, was interrupted or continued (`data.event`); lane: a "
        "step of the lanes runtime (`data.kind`): `event` (`data.event`: the event fed to the "
        "transition, `{type, ...its fields}`; with `data.lanes` when the lanes changed), "
        "operation_started / operation_ended (`lane`, `op`, `command` / `exit_code`, `status`, "
        "`output`), operation_cancel_requested (`lane`, `op`, `reason`), answer "
        "(`message_seq`, `text`), lane_failed (`lane`, `error`), lane_ended (`lane`, `reason`, "
        "`summary`), run_failed (`message_seq`, `message`). `data.lanes`, the snapshot of "
        "every lane after the event: `[{id, intent, status: ready|working|waiting|ended, "
        "active, created: the seq of the message that opened it, termination, operations: "
        "[{id, what, executor, status: running|cancelling|completed|failed, progress}]}]`."
    )
    state: str | None
    data: dict[str, Any]

    @classmethod
    def of(cls, event: SessionEvent) -> EventOut:
        return cls.model_validate(event.to_json())


class CancelOut(BaseModel):
    session_id: str
    cancelled: bool


class OperationCancelOut(BaseModel):
    session_id: str
    op_id: str
    cancelled: bool


class FileOut(BaseModel):
    path: str
    size: int
    modified: float


class FileTextOut(FileOut):
    content: str


# -- access ----------------------------------------------------------------------------------


SessionId = Annotated[str, Path(max_length=200)]


async def readable_session(session_id: SessionId, team: TeamDep, me: PrincipalDep) -> AgentSession:
    """The session if the caller may read it: its owner, an admin, or a teacher of its course
    (404 for anyone else: its existence is not revealed)."""
    session = await team.supervisor.sessions.get(session_id)
    if me.course_id is not None and session.course_id != me.course_id:
        raise NotFound(f"no session {session_id[:80]!r}")  # a course token: its course only
    if session.user_id == me.user_id or me.is_admin:
        return session
    teaches = me.role == "teacher" and (
        await team.accounts.member_role(session.course_id, me.user_id) == "teacher"
    )
    if teaches:
        return session
    raise NotFound(f"no session {session_id[:80]!r}")


ReadableSession = Annotated[AgentSession, Depends(readable_session)]


async def writable_session(
    session: ReadableSession, team: TeamDep, me: PrincipalDep
) -> AgentSession:
    """The session if the caller owns it and is still in its course (403 for readers)."""
    if session.user_id != me.user_id:
        raise Forbidden("only the session's owner can change it; teachers and admins can read it")
    if not me.is_admin and not await _member_of(team, me, session.course_id):
        raise Forbidden("you are no longer a member of this session's course")
    return session


WritableSession = Annotated[AgentSession, Depends(writable_session)]


async def stoppable_session(
    session: ReadableSession, team: TeamDep, me: PrincipalDep
) -> tuple[AgentSession, str]:
    """The session and who stops its work (``"student"`` or ``"teacher"``) if the caller may:
    its owner (still in its course) or a teacher of its course (403 for other readers)."""
    if session.user_id == me.user_id:
        return await writable_session(session, team, me), "student"
    staff = me.role in ("teacher", "admin") and not me.scoped
    if staff and await team.accounts.member_role(session.course_id, me.user_id) == "teacher":
        return session, "teacher"
    raise Forbidden(
        "only the session's owner or a teacher of its course can stop its work; you can read it"
    )


StoppableSession = Annotated[tuple[AgentSession, str], Depends(stoppable_session)]


async def _member_of(team: Team, me: Principal, course_id: str) -> bool:
    """Whether the caller is in the course (from their courses, which ``Accounts`` keeps a few
    seconds: a removal in this process counts at once, in another within that time)."""
    return any(course.id == course_id for course in await team.accounts.courses_of(me))


# -- routes ----------------------------------------------------------------------------------


@router.post("", response_model=SessionOut, status_code=201)
async def create_session(body: SessionBody, team: TeamDep, me: PrincipalDep) -> SessionOut:
    """A new agent session of the caller in a course they belong to; its runtime is
    ``runtime``, else the course's, else (``""``) the server's."""
    course, _ = await course_as_member(team, me, body.course_id)
    session = await team.supervisor.sessions.create(
        me.user_id, body.course_id, body.title, runtime=body.runtime or course.runtime
    )
    return SessionOut.of(session, False)


@router.get("", response_model=list[SessionOut])
async def list_sessions(
    team: TeamDep,
    me: PrincipalDep,
    course_id: Annotated[str | None, Query(max_length=64)] = None,
    user_id: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> list[SessionOut]:
    """The caller's sessions, most recently active first. With ``course_id`` a teacher of the
    course (or an admin) gets the course's sessions (``user_id``: one student's)."""
    sessions = team.supervisor.sessions
    if course_id is None and me.course_id is not None:
        course_id = me.course_id  # a course token sees its course only
    if course_id is None:
        if user_id not in (None, me.user_id) and not me.is_admin:
            raise Forbidden(
                "you can list only your own sessions; a teacher lists a student's sessions "
                "with the course_id of a course they teach"
            )
        found = await sessions.list_sessions(user_id=user_id or me.user_id, limit=limit)
    else:
        _, role = await course_as_member(team, me, course_id)
        if role == "student":
            if user_id not in (None, me.user_id):
                raise Forbidden("students see only their own sessions")
            user_id = me.user_id
        found = await sessions.list_sessions(user_id=user_id, course_id=course_id, limit=limit)
    return [SessionOut.of(s, team.supervisor.active(s.id)) for s in found]


@router.get("/{session_id}", response_model=SessionOut)
async def get_session(session: ReadableSession, team: TeamDep) -> SessionOut:
    """A session the caller may read (its owner, a teacher of its course, an admin)."""
    return SessionOut.of(session, team.supervisor.active(session.id))


@router.patch("/{session_id}", response_model=SessionOut)
async def rename_session(
    session: WritableSession, body: SessionChange, team: TeamDep, me: PrincipalDep
) -> SessionOut:
    """Rename the caller's session (audited: ``session_renamed``)."""
    _check_text(body.title)
    renamed = await team.supervisor.sessions.rename(session, body.title, actor_id=me.user_id)
    return SessionOut.of(renamed, team.supervisor.active(session.id))


@router.delete("/{session_id}", status_code=204)
async def delete_session(session: WritableSession, team: TeamDep, me: PrincipalDep) -> None:
    """Delete the caller's session for good: its agent is stopped first (waiting until it
    has), then its log, conversations and workspace files go (audited: ``session_deleted``).
    Its live event streams end; afterwards it is a 404."""
    await team.delete_session(session, actor_id=me.user_id)


@router.get("/{session_id}/messages", response_model=list[MessageOut])
async def list_messages(session: ReadableSession, team: TeamDep) -> list[MessageOut]:
    """The session's messages (instructions), oldest first, with their states."""
    return [MessageOut.of(m) for m in await team.supervisor.sessions.messages(session.id)]


@router.post("/{session_id}/messages", response_model=MessageOut, status_code=202)
async def post_message(
    session: WritableSession, body: MessageBody, team: TeamDep, me: PrincipalDep
) -> MessageOut:
    """Queue an instruction for the session's agent. It is stored (and audited) before this
    returns; the agent works on it in the background: follow ``GET .../events``."""
    _check_text(body.text)
    message = await team.supervisor.sessions.post_message(session, body.text, actor_id=me.user_id)
    team.supervisor.deliver(session, MessageQueued(message.seq))
    return MessageOut.of(message)


@router.post("/{session_id}/teacher-messages", response_model=MessageOut, status_code=202)
async def post_teacher_message(
    session: ReadableSession, body: MessageBody, team: TeamDep, me: PrincipalDep
) -> MessageOut:
    """A teacher of the session's course guides its agent: the message is queued like the
    student's, marked as the teacher's (the agent is told who speaks; audited with the
    teacher as the actor). 403 for anyone but the course's teachers."""
    if session.user_id == me.user_id or me.role not in ("teacher", "admin") or me.scoped:
        raise Forbidden("only a teacher of the session's course can send a teacher's message")
    if await team.accounts.member_role(session.course_id, me.user_id) != "teacher":
        raise Forbidden("only a teacher of the session's course can send a teacher's message")
    _check_text(body.text)
    message = await team.supervisor.sessions.post_message(
        session, body.text, actor_id=me.user_id, role="teacher"
    )
    team.supervisor.deliver(session, MessageQueued(message.seq))
    return MessageOut.of(message)


@router.post("/{session_id}/continue", response_model=MessageOut, status_code=202)
async def continue_message(
    session: WritableSession, team: TeamDep, me: PrincipalDep, body: ContinueBody | None = None
) -> MessageOut:
    """Queue an interrupted message again (the server stopped or the run was cancelled while
    it ran); the agent is told it is continuing."""
    seq = body.seq if body is not None else None
    message = await team.supervisor.sessions.requeue(session, seq, actor_id=me.user_id)
    team.supervisor.deliver(session, MessageQueued(message.seq))
    return MessageOut.of(message)


@router.post("/{session_id}/cancel", response_model=CancelOut, status_code=202)
async def cancel_run(stopping: StoppableSession, team: TeamDep, me: PrincipalDep) -> CancelOut:
    """Stop the run in progress (its message becomes ``interrupted`` and can be continued);
    409 when nothing is running. The owner or a teacher of the course (audited:
    ``run_cancel_requested``, the caller as the actor)."""
    session, who = stopping
    reason = f"cancelled by the {who}"
    if not team.supervisor.deliver(session, CancelRequested(reason)):
        raise Conflict("nothing is running in this session")
    await _audit_stop(team, me, session, "run_cancel_requested", {"reason": reason})
    return CancelOut(session_id=session.id, cancelled=True)


OpId = Annotated[str, Path(min_length=1, max_length=64)]


@router.post(
    "/{session_id}/operations/{op_id}/cancel", response_model=OperationCancelOut, status_code=202
)
async def cancel_operation(
    stopping: StoppableSession, op_id: OpId, team: TeamDep, me: PrincipalDep
) -> OperationCancelOut:
    """Stop one running operation (a command) of a lanes session, by its id (``op1``, ... as
    the ``lanes`` snapshots and the ``operation_started`` events name it); its lane hears the
    operation failed and goes on. The owner or a teacher of the course (audited:
    ``operation_cancel_requested``). 409 when the session is not in lanes or no operation by
    that id is running."""
    session, who = stopping
    runtime = session.runtime or team.settings.agent_runtime
    if runtime != "lanes":
        raise Conflict(
            f"this session runs the {runtime} runtime, which has no operations to stop: stop "
            "the whole run with POST /api/sessions/{id}/cancel"
        )
    lanes = await team.supervisor.sessions.latest_lanes(session.id) or []
    status = next(
        (op.get("status") for lane in lanes for op in lane.get("operations", ())
         if op.get("id") == op_id),
        None,
    )  # fmt: skip
    op = repr(op_id[:64])
    if status is None:
        raise Conflict(
            f"no operation {op} is running in this session: the running ones are in the last "
            "`lanes` snapshot of its events (GET /api/sessions/{id}/events)"
        )
    if status != "running":
        raise Conflict(f"operation {op} is {status}, not running: there is nothing to stop")
    reason = f"cancelled by the {who}"
    if not team.supervisor.deliver(session, OperationCancelRequested(op_id, reason)):
        raise Conflict(f"operation {op} is not running any more: the session's agent stopped")
    await _audit_stop(
        team, me, session, "operation_cancel_requested", {"op": op_id, "reason": reason}
    )
    return OperationCancelOut(session_id=session.id, op_id=op_id, cancelled=True)


async def _audit_stop(
    team: Team, me: Principal, session: AgentSession, kind: str, data: dict[str, Any]
) -> None:
    await team.audit.record(
        kind,
        actor_id=me.user_id,
        course_id=session.course_id,
        subject=session.id,
        data={"session_id": session.id, **data},
    )


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(
            f"the text is not valid Unicode: it holds a lone surrogate at character {exc.start}; "
            "send UTF-8 text"
        ) from None


def _sse(event: SessionEvent) -> ServerSentEvent:
    return ServerSentEvent(
        raw_data=event.to_text(),
        id=str(event.seq),
    )


@router.get("/{session_id}/events", response_class=EventSourceResponse, responses=JSON_ERRORS)
async def stream_events(
    session: ReadableSession,
    team: TeamDep,
    after: Annotated[
        int, Query(ge=0, le=2**63 - 1, description="Send the events after this seq.")
    ] = 0,
    follow: Annotated[
        bool, Query(description="Keep the stream open for new events (false: stored only).")
    ] = True,
    last_event_id: Annotated[int | None, Header(alias="Last-Event-ID", ge=0, le=2**63 - 1)] = None,
) -> AsyncIterator[EventOut]:
    """The session's events as server-sent events (``id:`` the seq, ``data:`` an EventOut):
    the stored ones after ``after`` (or after the ``Last-Event-ID`` a reconnecting client
    sends), then, with ``follow``, live ones as the agent works.

    Subscribes before reading the log, so nothing is missed in between; a live event whose
    seq is not the next one (published out of order, or after the subscription was dropped
    for falling behind) is preceded by the missing ones, read from the log."""
    sessions, hub = team.supervisor.sessions, team.supervisor.hub
    last = last_event_id if last_event_id is not None else after
    while True:
        with hub.subscribe(session.id) as subscription:
            while True:  # the stored events
                page = await sessions.events(session.id, after=last, limit=_PAGE)
                for event in page:
                    yield _sse(event)  # type: ignore[misc]
                    last = event.seq
                if len(page) < _PAGE:
                    break
            if not follow:
                return
            while subscription.active:
                for event in await subscription.get():
                    if event.seq <= last:
                        continue
                    if event.seq > last + 1:
                        for missing in await sessions.events(
                            session.id, after=last, before=event.seq, limit=event.seq - last
                        ):
                            yield _sse(missing)  # type: ignore[misc]
                    yield _sse(event)  # type: ignore[misc]
                    last = event.seq
            if subscription.closed:
                return


@router.get("/{session_id}/events/log", response_model=list[EventOut])
async def list_events(
    session: ReadableSession,
    team: TeamDep,
    after: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=_PAGE)] = 100,
) -> list[EventOut]:
    """The session's stored events after ``after`` as JSON (for clients without SSE)."""
    events = await team.supervisor.sessions.events(session.id, after=after, limit=limit)
    return [EventOut.of(event) for event in events]


@router.get("/{session_id}/files", response_model=list[FileOut])
async def list_files(session: ReadableSession, team: TeamDep) -> list[FileOut]:
    """The files in the session's workspace, where its agent works (the student's connected
    computer, the session's folder on the server, or the service database): at most 1000."""
    try:
        found = await team.supervisor.workbench_of(session).files.glob("**/*", "/", limit=1000)
    except ToolError as exc:
        raise BadRequest(f"cannot list the files: {exc}") from None
    return [FileOut(path=f.path, size=f.size, modified=f.modified) for f in found]


@router.get("/{session_id}/files/{path:path}", response_model=FileTextOut)
async def read_file(
    session: ReadableSession, path: Annotated[str, Path(max_length=1000)], team: TeamDep
) -> FileTextOut:
    """One file of the session's workspace with its text."""
    workspace = team.supervisor.workbench_of(session).files
    try:
        info = await workspace.stat(path)
        if info is None:
            raise NotFound(f"no file {path[:200]!r} in this session's workspace")
        if info.is_dir:
            raise BadRequest(f"{info.path!r} is a folder: list the files with GET .../files")
        content = await workspace.read(info.path)
    except ToolError as exc:  # a BackendError, or the executor went away
        raise BadRequest(f"cannot read {path[:200]!r}: {exc}") from None
    return FileTextOut(path=info.path, size=info.size, modified=info.modified, content=content)
