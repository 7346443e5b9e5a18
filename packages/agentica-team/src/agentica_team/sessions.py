"""Agent sessions on the server: the session records, their event log and its live fan-out.

A session's log (``team_session_events``) is numbered by ``seq`` (1, 2, ... per session, counted
in ``team_agent_sessions.last_seq`` inside the inserting transaction). ``kind`` is ``message``
(a student's instruction; ``state`` pending, running, done, failed or interrupted), ``run`` (one
run event as JSON, ``encode_run_event``) or ``status`` (a run started, ended or was interrupted).
``Sessions`` writes and reads it; ``EventWriter`` commits the run's events of every session in
one transaction per batch (group commit) and then hands them to ``EventHub``, which fans each
session's new events out to its live subscribers through bounded buffers: a subscriber that falls
behind is dropped (it catches up from the log) instead of slowing the writer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import sqlalchemy as sa
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from agentica.errors import AgenticaError, StorageError
from agentica.messages import ReasoningDelta, TextDelta, ToolCallDelta
from agentica.run.events import (
    AnswerSentBack,
    ContextCompacted,
    ModelRequestStarted,
    ModelResponseReceived,
    RunCompleted,
    RunEvent,
    RunStarted,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from agentica.tools.call import FunctionCall
from agentica_team.db.schema import agent_sessions, new_id, session_events
from agentica_team.errors import Conflict, NotFound, RateLimited
from agentica_team.security import redact

if TYPE_CHECKING:
    from agentica_team.audit import Audit
    from agentica_team.db import Database

__all__ = [
    "AgentSession",
    "AuditNote",
    "EventHub",
    "EventWriter",
    "MessageState",
    "NewEvent",
    "SessionEvent",
    "Sessions",
    "Subscription",
    "encode_run_event",
    "interrupted_event",
    "status_event",
]

log = logging.getLogger("agentica_team.sessions")

MessageState = Literal["pending", "running", "done", "failed", "interrupted"]
MAX_QUEUED_MESSAGES = 20  # pending or running messages per session
MAX_TEXT_IN_EVENT = 8_000  # characters of a tool's arguments or result kept in an event
MAX_DELTA_CHARS = 16_000  # coalesced text deltas are cut into events of at most this size


@dataclass(frozen=True, slots=True)
class AgentSession:
    """A session: whose it is, in which course, its title, the last ``seq`` of its log and
    its ``runtime`` (``""``: the server's ``agent_runtime``)."""

    id: str
    user_id: str
    course_id: str
    title: str
    created_at: float
    updated_at: float
    last_seq: int
    runtime: str = ""


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One entry of a session's log (``data`` is the decoded JSON)."""

    session_id: str
    seq: int
    ts: float
    kind: str
    state: str | None
    data: dict[str, Any]

    def to_text(self) -> str:
        """``to_json()`` as JSON text."""
        return _dumps(self.to_json())

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "ts": self.ts,
            "kind": self.kind,
            "state": self.state,
            "data": self.data,
        }


@dataclass(frozen=True, slots=True)
class AuditNote:
    """An audit record to write in the same transaction as an event."""

    kind: str
    actor_id: str
    course_id: str
    subject: str
    data: Mapping[str, Any]


def _session(row: Any) -> AgentSession:
    return AgentSession(
        row.id, row.user_id, row.course_id, row.title, row.created_at, row.updated_at,
        row.last_seq, row.runtime,
    )  # fmt: skip


def _event(row: Any) -> SessionEvent:
    return SessionEvent(row.session_id, row.seq, row.ts, row.kind, row.state, json.loads(row.data))


def _dumps(data: Mapping[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=str)


def clean_json(data: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``data`` and its JSON text, both valid UTF-8: a lone surrogate (a model can send one)
    becomes ``?`` instead of failing the write, the stream or the response."""
    text = _dumps(data)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
        data = json.loads(text)
    return data, text


def _clip(text: str | None, limit: int = MAX_TEXT_IN_EVENT) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text) - limit} more characters]"


# -- run events as JSON --------------------------------------------------------------------------


def _call_started(call: FunctionCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": _clip(call.call.arguments)}


def _call_completed(call: FunctionCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "name": call.name,
        "status": call.status,
        "result": _clip(call.content),
        "error": _clip(call.error, 2000),
        "duration": round(call.duration, 4),
    }


def _usage(usage: Any) -> dict[str, Any] | None:
    return None if usage is None else dataclasses.asdict(usage)


def _reply(event: ModelResponseReceived) -> dict[str, Any]:
    message = event.message
    return {
        "turn": event.turn,
        "content": _clip(message.content),
        "tool_calls": [
            {"id": c.id, "name": c.name, "arguments": _clip(c.arguments)}
            for c in message.tool_calls
        ],
        "finish_reason": message.finish_reason,
        "usage": _usage(message.usage),
        "model": message.model,
    }


def _completed(event: RunCompleted) -> dict[str, Any]:
    response = event.response
    return {
        "run_id": response.run_id,
        "content": response.content,
        "stop_reason": response.stop_reason,
        "usage": dataclasses.asdict(response.usage),
        "model": response.model,
        "duration": round(response.duration, 4),
    }


def _progress(event: ToolProgress) -> dict[str, Any]:
    update = event.update
    nested = encode_run_event(update) if _is_run_event(update) else None  # type: ignore[arg-type]
    return {"source": event.source, "update": nested or {"text": _clip(str(update), 2000)}}


def _is_run_event(value: object) -> bool:
    return type(value) in _ENCODERS


def _plain(event: Any) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(event).items() if k != "kind"}


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {
    RunStarted: _plain,
    ContextCompacted: _plain,
    ModelRequestStarted: _plain,
    TextDelta: _plain,
    ReasoningDelta: _plain,
    ToolCallDelta: _plain,
    ModelResponseReceived: _reply,
    AnswerSentBack: _plain,
    ToolCallStarted: lambda e: _call_started(e.call),
    ToolProgress: _progress,
    ToolCallCompleted: lambda e: _call_completed(e.call),
    RunCompleted: _completed,
}


def encode_run_event(event: RunEvent) -> dict[str, Any]:
    """The JSON object of a run event: ``{"kind": ..., **fields}``; tool arguments and results
    are cut at ``MAX_TEXT_IN_EVENT`` characters, a ``FunctionCall`` becomes its id, name,
    arguments, status, result, error and duration."""
    encoder = _ENCODERS.get(type(event), _plain)
    return {"kind": event.kind, **encoder(event)}


# -- live fan-out --------------------------------------------------------------------------------


class Subscription:
    """A live view of one session's new events (from ``EventHub.subscribe``).

    ``get()`` returns the events published since the last call, waiting for some. When more than
    ``limit`` events wait unread the subscription is dropped: ``dropped`` is set, ``get()``
    returns ``[]`` and the reader should catch up from the log and subscribe again. ``closed`` is
    set when the hub closes (the server is stopping)."""

    __slots__ = ("_events", "_hub", "_ready", "closed", "dropped", "limit", "session_id")

    def __init__(self, hub: EventHub, session_id: str, limit: int) -> None:
        self._hub = hub
        self.session_id = session_id
        self.limit = limit
        self._events: deque[SessionEvent] = deque()
        self._ready = asyncio.Event()
        self.dropped = False
        self.closed = False

    @property
    def active(self) -> bool:
        return not (self.dropped or self.closed)

    def _push(self, events: Sequence[SessionEvent]) -> None:
        if not self.active:
            return
        if len(self._events) + len(events) > self.limit:
            self.dropped = True
            self._events.clear()
            self._hub._remove(self)
        else:
            self._events.extend(events)
        self._ready.set()

    def _close(self) -> None:
        self.closed = True
        self._events.clear()
        self._ready.set()

    async def get(self, timeout: float | None = None) -> list[SessionEvent]:
        """The events published since the last call (``[]`` after ``timeout`` seconds, or when
        dropped or closed)."""
        if not self._events and self.active:
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                return []
        self._ready.clear()
        events = list(self._events)
        self._events.clear()
        return events


class EventHub:
    """Per-session fan-out of newly committed events to live subscribers (one per SSE client).

    ``publish`` never waits: each subscriber buffers at most ``limit`` unread events and is
    dropped beyond that. With several workers, ``relay`` (when set) is told of each publish,
    so the other workers' subscribers hear of it; what they hear comes in through ``push``."""

    def __init__(self, *, limit: int = 2000) -> None:
        self.limit = limit
        self._subscribers: dict[str, set[Subscription]] = {}
        self._closed = False
        self.relay: Callable[[str, Sequence[SessionEvent]], None] | None = None

    @contextmanager
    def subscribe(self, session_id: str) -> Iterator[Subscription]:
        """A subscription to ``session_id``'s new events for the ``with`` block."""
        subscription = Subscription(self, session_id, self.limit)
        if self._closed:
            subscription._close()
        else:
            self._subscribers.setdefault(session_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            self._remove(subscription)

    def _remove(self, subscription: Subscription) -> None:
        subscribers = self._subscribers.get(subscription.session_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.session_id]

    def publish(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Hand committed ``events`` (in ``seq`` order) to the session's subscribers, and tell
        the ``relay``."""
        self.push(session_id, events)
        if self.relay is not None and events:
            self.relay(session_id, events)

    def push(self, session_id: str, events: Sequence[SessionEvent]) -> None:
        """Hand ``events`` to this process's subscribers of the session only."""
        for subscription in list(self._subscribers.get(session_id, ())):
            subscription._push(events)

    def subscribers(self, session_id: str) -> int:
        return len(self._subscribers.get(session_id, ()))

    def end(self, session_id: str) -> None:
        """End the subscriptions of ``session_id`` (it was deleted; their readers see
        ``closed``)."""
        for subscription in list(self._subscribers.pop(session_id, ())):
            subscription._close()

    def close(self) -> None:
        """End every subscription (their readers see ``closed``)."""
        self._closed = True
        for subscribers in list(self._subscribers.values()):
            for subscription in list(subscribers):
                subscription._close()
        self._subscribers.clear()


# -- the store -----------------------------------------------------------------------------------


@dataclass(slots=True)
class NewEvent:
    """An event to write: its session, kind, state and data, the message whose state it
    changes (``(seq, state)``), the audit records written with it and, for a student's
    message, the session's queue limit and a title for an untitled session."""

    session_id: str
    kind: str
    data: dict[str, Any]
    state: str | None = None
    message: tuple[int, str] | None = None  # (seq, new state) of a message of the session
    audit: tuple[AuditNote, ...] = ()
    # a new message: refused when the session has this many messages waiting or running
    queue_limit: int | None = None
    title: str | None = None  # becomes the session's title if it has none
    # bookkeeping of the writer: when the event was queued, its serial number, who waits
    ts: float = field(default=0.0)
    serial: int = 0
    future: asyncio.Future[SessionEvent] | None = field(default=None, repr=False)


class Sessions:
    """The sessions and their logs in ``db``; new events go to ``hub`` once committed."""

    def __init__(
        self,
        db: Database,
        audit: Audit,
        hub: EventHub,
        *,
        clock: Callable[[], float] = time.time,
        max_queued: int = MAX_QUEUED_MESSAGES,
    ) -> None:
        self.db = db
        self.audit = audit
        self.hub = hub
        self.clock = clock
        self.max_queued = max_queued
        self.writer = EventWriter(self)

    # -- sessions ----------------------------------------------------------------------------

    async def create(
        self, user_id: str, course_id: str, title: str = "", *, runtime: str = ""
    ) -> AgentSession:
        """A new, empty session of ``user_id`` in ``course_id`` (audited); ``runtime``: see
        ``AgentSession``."""
        now = self.clock()
        session = AgentSession(new_id("s"), user_id, course_id, title, now, now, 0, runtime)
        async with self.db.write() as conn:
            await conn.execute(agent_sessions.insert().values(**dataclasses.asdict(session)))
            await self.audit.record_in(
                conn,
                "session_created",
                actor_id=user_id,
                course_id=course_id,
                subject=session.id,
                data={"title": title},
            )
        return session

    async def get(self, session_id: str) -> AgentSession:
        """The session (``NotFound`` if there is none)."""
        async with self.db.read() as conn:
            row = (
                await conn.execute(
                    sa.select(agent_sessions).where(agent_sessions.c.id == session_id)
                )
            ).first()
        if row is None:
            raise NotFound(f"no session {session_id[:80]!r}")
        return _session(row)

    async def list_sessions(
        self, *, user_id: str | None = None, course_id: str | None = None, limit: int = 100
    ) -> list[AgentSession]:
        """Sessions of ``user_id`` and/or in ``course_id``, the most recently active first."""
        query = sa.select(agent_sessions).order_by(
            agent_sessions.c.updated_at.desc(), agent_sessions.c.id
        )
        if user_id is not None:
            query = query.where(agent_sessions.c.user_id == user_id)
        if course_id is not None:
            query = query.where(agent_sessions.c.course_id == course_id)
        async with self.db.read() as conn:
            rows = (await conn.execute(query.limit(limit))).all()
        return [_session(row) for row in rows]

    async def rename(self, session: AgentSession, title: str, *, actor_id: str) -> AgentSession:
        """``session`` with its title changed to ``title`` (audited: ``session_renamed``)."""
        async with self.db.write() as conn:
            done = await conn.execute(
                sa.update(agent_sessions)
                .where(agent_sessions.c.id == session.id)
                .values(title=title)
            )
            if done.rowcount == 0:
                raise NotFound(f"no session {session.id[:80]!r}")
            await self.audit.record_in(
                conn,
                "session_renamed",
                actor_id=actor_id,
                course_id=session.course_id,
                subject=session.id,
                data={"session_id": session.id, "title": title, "previous": session.title},
            )
        return await self.get(session.id)

    async def delete(self, session: AgentSession, *, actor_id: str) -> None:
        """Delete ``session`` and its log in one transaction (audited: ``session_deleted``,
        with its title and how many events it had); ``NotFound`` if it is gone already."""
        async with self.db.write() as conn:
            await conn.execute(
                sa.delete(session_events).where(session_events.c.session_id == session.id)
            )
            done = await conn.execute(
                sa.delete(agent_sessions).where(agent_sessions.c.id == session.id)
            )
            if done.rowcount == 0:
                raise NotFound(f"no session {session.id[:80]!r}")
            await self.audit.record_in(
                conn,
                "session_deleted",
                actor_id=actor_id,
                course_id=session.course_id,
                subject=session.id,
                data={"session_id": session.id, "title": session.title,
                      "owner_id": session.user_id, "events": session.last_seq},
            )  # fmt: skip

    # -- the log -----------------------------------------------------------------------------

    async def _allocate(self, conn: AsyncConnection, counts: Mapping[str, int]) -> dict[str, int]:
        """Reserve ``counts[session_id]`` seqs of each session's log in one statement; each
        session's last reserved seq (sessions that do not exist are left out)."""
        table = agent_sessions.c
        added: sa.ColumnElement[int]
        if len(counts) == 1:
            ((session_id, count),) = counts.items()
            where, added = table.id == session_id, sa.literal(count)
        else:
            where, added = table.id.in_(list(counts)), sa.case(dict(counts), value=table.id)
        rows = await conn.execute(
            sa.update(agent_sessions)
            .where(where)
            .values(last_seq=table.last_seq + added, updated_at=self.clock())
            .returning(table.id, table.last_seq)
        )
        return {row.id: int(row.last_seq) for row in rows}

    async def _refusals(
        self, conn: AsyncConnection, new: Sequence[NewEvent]
    ) -> dict[int, RateLimited]:
        """The new messages (by index) refused because their session's queue is full."""
        limited = {item.session_id for item in new if item.queue_limit is not None}
        if not limited:
            return {}
        c = session_events.c
        rows = await conn.execute(
            sa.select(c.session_id, sa.func.count())
            .where(
                c.session_id.in_(sorted(limited)),
                c.kind == "message",
                c.state.in_(("pending", "running")),
            )
            .group_by(c.session_id)
        )
        queued: dict[str, int] = {row[0]: int(row[1]) for row in rows}
        refused = {}
        for index, item in enumerate(new):
            if item.queue_limit is None:
                continue
            count = queued.get(item.session_id, 0)
            if count >= item.queue_limit:
                refused[index] = RateLimited(
                    f"this session already has {count} messages waiting or running (at most "
                    f"{item.queue_limit}); wait until the agent has worked through them",
                    retry_after=10,
                )
            else:
                queued[item.session_id] = count + 1
        return refused

    async def _insert(
        self, conn: AsyncConnection, new: Sequence[NewEvent]
    ) -> list[SessionEvent | AgenticaError]:
        """Insert ``new`` events (of any sessions, in order; seqs allocated here), change the
        messages they name, write their audit records and titles, all in ``conn``'s
        transaction. What became of each: its stored event, or why it was not written
        (``RateLimited``: the session's queue is full; ``NotFound``: no such session)."""
        refused = await self._refusals(conn, new)
        outcomes: list[SessionEvent | AgenticaError] = [
            refused.get(index, _MISSING) for index in range(len(new))
        ]
        counts: dict[str, int] = {}
        for item, outcome in zip(new, outcomes, strict=True):
            if outcome is _MISSING:
                counts[item.session_id] = counts.get(item.session_id, 0) + 1
        last = await self._allocate(conn, counts) if counts else {}
        seqs = {session_id: last[session_id] - counts[session_id] for session_id in last}
        now = self.clock()
        kept: list[tuple[NewEvent, SessionEvent]] = []
        for index, item in enumerate(new):
            if outcomes[index] is not _MISSING:
                continue
            if item.session_id not in seqs:
                outcomes[index] = NotFound(f"no session {item.session_id[:80]!r}")
                continue
            seqs[item.session_id] += 1
            data, _ = clean_json(item.data)
            event = SessionEvent(item.session_id, seqs[item.session_id], item.ts or now,
                                 item.kind, item.state, data)  # fmt: skip
            outcomes[index] = event
            kept.append((item, event))
        if kept:
            await self._write_kept(conn, kept)
        return outcomes

    async def _write_kept(
        self, conn: AsyncConnection, kept: Sequence[tuple[NewEvent, SessionEvent]]
    ) -> None:
        await conn.execute(
            session_events.insert(),
            [
                {"session_id": e.session_id, "seq": e.seq, "ts": e.ts, "kind": e.kind,
                 "state": e.state, "data": _dumps(e.data)}
                for _, e in kept
            ],
        )  # fmt: skip
        changes = [
            {"b_session": item.session_id, "b_seq": item.message[0], "b_state": item.message[1]}
            for item, _ in kept
            if item.message is not None
        ]
        if changes:
            await conn.execute(_SET_STATE, changes)
        titles = [{"b_session": item.session_id, "b_title": item.title}
                  for item, _ in kept if item.title]  # fmt: skip
        if titles:
            await conn.execute(_SET_TITLE, titles)
        notes = [
            {"kind": note.kind, "actor_id": note.actor_id, "course_id": note.course_id,
             "subject": note.subject, "data": note.data}
            for item, _ in kept
            for note in item.audit
        ]  # fmt: skip
        await self.audit.records_in(conn, notes)

    async def post_message(
        self, session: AgentSession, text: str, *, actor_id: str, role: str = "student"
    ) -> SessionEvent:
        """Append a pending message with its ``instruction`` audit record (in one transaction,
        group-committed with other writes) and publish it; returns once it is committed.
        ``role``: ``student`` (the owner) or ``teacher`` (a teacher guiding the agent).
        ``RateLimited`` when the session already has ``max_queued`` messages waiting or
        running."""
        note = AuditNote(
            "instruction",
            actor_id,
            session.course_id,
            session.id,
            {"session_id": session.id, "text": text[:4000], "chars": len(text), "role": role},
        )
        item = NewEvent(
            session.id,
            "message",
            {"text": text, **({"role": role} if role != "student" else {})},
            "pending",
            audit=(note,),
            queue_limit=self.max_queued,
            title=None if session.title else " ".join(text.split())[:80],
        )
        return await self.writer.commit(item)

    async def requeue(
        self, session: AgentSession, seq: int | None, *, actor_id: str
    ) -> SessionEvent:
        """Put an interrupted message (``seq``; default the latest one) back in the queue, with
        a ``continued`` status event; ``Conflict`` if it is not interrupted."""
        async with self.db.write() as conn:
            query = sa.select(session_events).where(
                session_events.c.session_id == session.id,
                session_events.c.kind == "message",
            )
            if seq is None:
                query = query.where(session_events.c.state == "interrupted")
            else:
                query = query.where(session_events.c.seq == seq)
            row = (await conn.execute(query.order_by(session_events.c.seq.desc()).limit(1))).first()
            if row is None:
                what = "no interrupted message" if seq is None else f"no message {seq}"
                raise NotFound(f"this session has {what}")
            message = _event(row)
            if message.state != "interrupted":
                raise Conflict(
                    f"message {message.seq} is {message.state}: only an interrupted message can "
                    "be continued"
                )
            continued = int(message.data.get("continued", 0)) + 1
            message = dataclasses.replace(
                message, state="pending", data={**message.data, "continued": continued}
            )
            await conn.execute(
                sa.update(session_events)
                .where(session_events.c.session_id == session.id,
                       session_events.c.seq == message.seq)
                .values(state="pending", data=_dumps(message.data))
            )  # fmt: skip
            data = {"event": "continued", "message_seq": message.seq}
            note = AuditNote("continue", actor_id, session.course_id, session.id,
                             {"session_id": session.id, "message_seq": message.seq})  # fmt: skip
            events = _written(
                await self._insert(conn, [NewEvent(session.id, "status", data, audit=(note,))])
            )
        self.hub.publish(session.id, events)
        return message

    async def resume_running(self, session: AgentSession, reason: str) -> list[int]:
        """Put the session's messages left ``running`` by a worker that is gone back in the
        queue (``continued`` counted, a ``resumed`` status event and an audit record each), in
        one transaction; their seqs. Only the holder of the session's lease may call it."""
        async with self.db.write() as conn:
            rows = (
                await conn.execute(
                    sa.select(session_events).where(
                        session_events.c.session_id == session.id,
                        session_events.c.kind == "message",
                        session_events.c.state == "running",
                    )
                )
            ).all()
            items = []
            for row in rows:
                message = _event(row)
                data = {**message.data, "continued": int(message.data.get("continued", 0)) + 1}
                await conn.execute(
                    sa.update(session_events)
                    .where(session_events.c.session_id == session.id,
                           session_events.c.seq == message.seq)
                    .values(state="pending", data=_dumps(data))
                )  # fmt: skip
                detail = {"session_id": session.id, "message_seq": message.seq, "reason": reason}
                note = AuditNote("run_resumed", session.user_id, session.course_id, session.id,
                                 detail)  # fmt: skip
                items.append(NewEvent(session.id, "status",
                                      {"event": "resumed", "message_seq": message.seq,
                                       "state": "pending", "reason": reason},
                                      audit=(note,)))  # fmt: skip
            events = _written(await self._insert(conn, items)) if items else []
        if events:
            self.hub.publish(session.id, events)
        return [int(row.seq) for row in rows]

    async def events(
        self, session_id: str, *, after: int = 0, before: int | None = None, limit: int = 500
    ) -> list[SessionEvent]:
        """The session's events with ``after < seq < before``, in order, at most ``limit``."""
        query = sa.select(session_events).where(
            session_events.c.session_id == session_id, session_events.c.seq > after
        )
        if before is not None:
            query = query.where(session_events.c.seq < before)
        async with self.db.read() as conn:
            rows = (await conn.execute(query.order_by(session_events.c.seq).limit(limit))).all()
        return [_event(row) for row in rows]

    async def latest_lanes(self, session_id: str) -> list[dict[str, Any]] | None:
        """The newest snapshot of the session's lanes (the ``lanes`` of its last ``lane``
        event that has one), or ``None`` when it has none."""
        c = session_events.c
        query = (
            sa.select(session_events)
            .where(c.session_id == session_id, c.kind == "lane",
                   c.data.like('%"lanes":[%'))  # the key as _dumps writes it
            .order_by(c.seq.desc())
            .limit(1)
        )  # fmt: skip
        async with self.db.read() as conn:
            row = (await conn.execute(query)).first()
        lanes = None if row is None else _event(row).data.get("lanes")
        return lanes if isinstance(lanes, list) else None

    async def messages(self, session_id: str, *, limit: int = 500) -> list[SessionEvent]:
        """The session's messages (instructions) and their states, oldest first."""
        query = (
            sa.select(session_events)
            .where(session_events.c.session_id == session_id, session_events.c.kind == "message")
            .order_by(session_events.c.seq)
            .limit(limit)
        )
        async with self.db.read() as conn:
            return [_event(row) for row in (await conn.execute(query)).all()]

    async def next_pending(self, session_id: str) -> SessionEvent | None:
        """The session's oldest pending message."""
        query = (
            sa.select(session_events)
            .where(
                session_events.c.session_id == session_id,
                session_events.c.kind == "message",
                session_events.c.state == "pending",
            )
            .order_by(session_events.c.seq)
            .limit(1)
        )
        async with self.db.read() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _event(row)

    async def with_messages(self, *states: MessageState) -> list[AgentSession]:
        """The sessions that have a message in one of ``states``."""
        having = (
            sa.select(session_events.c.session_id)
            .where(session_events.c.kind == "message", session_events.c.state.in_(states))
            .distinct()
        )
        async with self.db.read() as conn:
            rows = (
                await conn.execute(sa.select(agent_sessions).where(agent_sessions.c.id.in_(having)))
            ).all()
        return [_session(row) for row in rows]

    async def interrupt_running(self, reason: str) -> int:
        """Mark every message left ``running`` (by a crash) ``interrupted``, each with a status
        event and an audit record, in one transaction; how many there were."""
        async with self.db.write() as conn:
            rows = (
                await conn.execute(
                    sa.select(session_events.c.session_id, session_events.c.seq).where(
                        session_events.c.kind == "message", session_events.c.state == "running"
                    )
                )
            ).all()
            published: list[tuple[str, list[SessionEvent]]] = []
            for session_id, seq in rows:
                row = (
                    await conn.execute(
                        sa.select(agent_sessions).where(agent_sessions.c.id == session_id)
                    )
                ).first()
                if row is None:  # pragma: no cover - events are deleted with their session
                    continue
                session = _session(row)
                item = interrupted_event(session, seq, reason)
                published.append((session_id, _written(await self._insert(conn, [item]))))
        for session_id, events in published:
            self.hub.publish(session_id, events)
        return len(rows)

    async def write_batch(self, items: Sequence[NewEvent]) -> list[SessionEvent | AgenticaError]:
        """Write ``items`` (of any sessions, in order) in one transaction; what became of each
        (see ``_insert``)."""

        async def body(conn: AsyncConnection) -> list[SessionEvent | AgenticaError]:
            return await self._insert(conn, items)

        return await self.db.transaction(body)


def _written(outcomes: Sequence[SessionEvent | AgenticaError]) -> list[SessionEvent]:
    return [outcome for outcome in outcomes if isinstance(outcome, SessionEvent)]


_MISSING: Any = object()
_UNAVAILABLE = (OperationalError, InterfaceError, OSError, TimeoutError)


def _or_failed(
    outcomes: list[SessionEvent | AgenticaError] | Exception, count: int
) -> list[SessionEvent | AgenticaError]:
    if not isinstance(outcomes, Exception):
        return outcomes
    return [
        StorageError("the session's log could not be written (the server logged why); try again")
        for _ in range(count)
    ]


_SET_TITLE = (
    sa.update(agent_sessions)
    .where(agent_sessions.c.id == sa.bindparam("b_session"), agent_sessions.c.title == "")
    .values(title=sa.bindparam("b_title"))
)

_SET_STATE = (
    sa.update(session_events)
    .where(
        session_events.c.session_id == sa.bindparam("b_session"),
        session_events.c.seq == sa.bindparam("b_seq"),
        session_events.c.kind == "message",
    )
    .values(state=sa.bindparam("b_state"))
)


def status_event(
    session: AgentSession,
    event: str,
    message_seq: int,
    state: MessageState,
    *,
    audit: Iterable[AuditNote] = (),
    **data: Any,
) -> NewEvent:
    """A ``status`` event ``event`` about message ``message_seq`` that also sets its state."""
    return NewEvent(
        session.id,
        "status",
        {"event": event, "message_seq": message_seq, "state": state, **data},
        message=(message_seq, state),
        audit=tuple(audit),
    )


def interrupted_event(session: AgentSession, message_seq: int, reason: str) -> NewEvent:
    """The status event marking message ``message_seq`` interrupted (audited)."""
    note = AuditNote(
        "run_interrupted",
        session.user_id,
        session.course_id,
        session.id,
        {"session_id": session.id, "message_seq": message_seq, "reason": reason},
    )
    return status_event(
        session, "run_interrupted", message_seq, "interrupted", audit=[note], reason=reason
    )


# -- group commit --------------------------------------------------------------------------------


_DELTAS = ("text_delta", "reasoning_delta", "tool_call_delta")


def _merge(last: NewEvent, item: NewEvent) -> bool:
    """Fold the delta ``item`` into ``last`` (queued, not yet written) when both are deltas of
    the same kind (tool-call deltas: of the same call); whether it did."""
    if last.kind != "run" or item.message or item.audit:
        return False
    kind = item.data.get("kind")
    if kind not in _DELTAS or last.data.get("kind") != kind:
        return False
    if kind == "tool_call_delta":
        if item.data.get("index") != last.data.get("index") or item.data.get("id"):
            return False
        key = "arguments"
    else:
        key = "text"
    if len(last.data[key]) + len(item.data[key]) > MAX_DELTA_CHARS:
        return False
    last.data[key] += item.data[key]
    return True


class EventWriter:
    """Writes the sessions' new events in batches: whatever was queued while the previous
    transaction ran goes into the next one (group commit), then to the ``EventHub``.

    ``put`` never waits; consecutive text, reasoning and tool-call-argument deltas of a session
    still in the queue are merged into one event (so under load one event carries the text of
    several model chunks, at most ``MAX_DELTA_CHARS``). ``append`` waits while more than
    ``max_queued`` events are queued. ``flush`` returns once everything put before it is
    committed; ``commit`` once its event is, returning it (students' messages go this way, so
    the messages of a whole class arriving at once share a few transactions). A batch that
    cannot be written after a few attempts is dropped: logged, and its ``commit`` callers get
    the error.
    """

    def __init__(self, sessions: Sessions, *, max_queued: int = 20_000) -> None:
        self.sessions = sessions
        self.max_queued = max_queued
        self._queue: list[NewEvent] = []
        self._tail: dict[str, NewEvent] = {}  # each session's last queued event
        self._serial = 0
        self._written = 0
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._wake = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._loop(), name="agentica-team session events")

    def put(self, item: NewEvent) -> None:
        """Queue ``item`` (merged into the session's last queued delta when it can be)."""
        self.start()
        last = self._tail.get(item.session_id)
        if last is not None and _merge(last, item):
            return
        self._serial += 1
        item.serial = self._serial
        item.ts = item.ts or self.sessions.clock()
        self._queue.append(item)
        self._tail[item.session_id] = item
        if len(self._queue) >= self.max_queued:
            self._room.clear()
        self._wake.set()

    async def append(self, item: NewEvent) -> None:
        """``put``, after waiting for room in the queue."""
        while not self._room.is_set():
            await self._room.wait()
        self.put(item)

    async def commit(self, item: NewEvent) -> SessionEvent:
        """Queue ``item`` and wait until it is written; the stored event (or, raised, why it
        was not: ``RateLimited``, ``NotFound``, ``StorageError``). Cancelling the wait does
        not take the event back."""
        if self._closing:
            raise StorageError("the server is stopping; send the message again in a moment")
        item.future = asyncio.get_running_loop().create_future()
        self.put(item)
        return await asyncio.shield(item.future)

    async def flush(self) -> None:
        """Wait until everything queued so far is written (or dropped)."""
        target = self._serial
        if self._written >= target:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((target, future))
        self._wake.set()
        await asyncio.shield(future)

    async def aclose(self) -> None:
        """Write what is queued, then stop."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._queue:
                if self._closing:
                    return
                continue
            batch, self._queue, self._tail = self._queue, [], {}
            self._room.set()
            await self._write(batch)
            self._written = batch[-1].serial
            self._settle()
            self._wake.set()  # look again: more may have been queued meanwhile

    async def _write(self, batch: list[NewEvent]) -> None:
        outcomes = await self._attempt(batch)
        if isinstance(outcomes, BaseException):
            if len(batch) > 1 and not isinstance(outcomes, _UNAVAILABLE):
                # one event's data fails the batch: write them one by one to find it
                outcomes = [
                    outcome
                    for item in batch
                    for outcome in _or_failed(await self._attempt([item], attempts=1), 1)
                ]
            else:
                outcomes = _or_failed(outcomes, len(batch))
        by_session: dict[str, list[SessionEvent]] = {}
        for item, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, SessionEvent):
                by_session.setdefault(outcome.session_id, []).append(outcome)
            if item.future is not None and not item.future.done():
                if isinstance(outcome, SessionEvent):
                    item.future.set_result(outcome)
                else:
                    item.future.set_exception(outcome)
        for session_id, events in by_session.items():
            self.sessions.hub.publish(session_id, events)

    async def _attempt(
        self, batch: list[NewEvent], attempts: int = 3
    ) -> list[SessionEvent | AgenticaError] | Exception:
        """Write ``batch`` (tried ``attempts`` times); what became of each event, or the
        error that kept the batch from being written."""
        for attempt in range(1, attempts + 1):
            try:
                return await self.sessions.write_batch(batch)
            except Exception as exc:
                if attempt < attempts:
                    await asyncio.sleep(0.2 * attempt)
                    continue
                log.error("%d session events could not be written: %s: %s", len(batch),
                          type(exc).__name__, redact(str(exc))[:500])  # fmt: skip
                return exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _settle(self) -> None:
        waiting = []
        for target, future in self._waiters:
            if target <= self._written:
                if not future.done():
                    future.set_result(None)
            else:
                waiting.append((target, future))
        self._waiters = waiting
