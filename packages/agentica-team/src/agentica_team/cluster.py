"""Several workers on one database: the bus between them and the per-session leases (Redis).

With one process (the default) the supervisor hands events to its loops directly and needs none
of this. With several worker processes or machines on one PostgreSQL database, ``Cluster``
connects them through Redis:

- **The bus**: one Redis stream (``PREFIX:bus``) every worker reads from where it started. A
  message says to which session it belongs and is either a ``wake`` (a ``RuntimeEvent`` for the
  session's loop, wherever it runs: a new message, a cancel) or ``committed`` (a worker wrote
  events ``first..last`` of a session: the other workers' live subscribers read them from the
  database). The database stays the truth: a wake only says "look at the log", so a wake that is
  lost (a worker starting, Redis trimming) costs latency, never a message; each worker's sweep
  finds work nobody runs.
- **Leases**: a session's loop runs on the worker holding its lease (``PREFIX:lease:SESSION``,
  ``SET NX`` with an expiry of ``lease_seconds``), renewed every third of it in one script call
  for all the worker's sessions and released when the loop ends. When a worker dies (``kill
  -9``) its leases expire and another worker's sweep takes the sessions over. A lease found lost
  at renewal (the worker stalled longer than the expiry) is reported through ``on_lost`` so the
  worker stops that loop.

Writes are not fenced: a worker that stalls past its lease while writing can overlap the next
owner for one renewal period. Keep ``lease_seconds`` well above the longest event-loop stall.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from redis.asyncio import Redis
from redis.exceptions import RedisError

from agentica_team.errors import ServiceUnavailable

__all__ = ["BusMessage", "Cluster"]

log = logging.getLogger("agentica_team.cluster")

_RENEW = """
local lost = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then
    redis.call('PEXPIRE', key, ARGV[2])
  else
    table.insert(lost, key)
  end
end
return lost
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_STREAM_LENGTH = 100_000
"""About how many messages the bus keeps (older ones are trimmed; nobody needs them)."""


@dataclass(frozen=True, slots=True)
class BusMessage:
    """One message on the bus: which ``worker`` sent it, its ``kind``, the session and data."""

    worker: str
    kind: Literal["wake", "committed"]
    session_id: str
    data: dict[str, Any]


class Cluster:
    """This worker's connection to the others (see the module docstring).

    ``start(on_message, on_lost)`` connects (``ServiceUnavailable`` when Redis cannot be
    reached) and starts reading the bus, handing each message to ``on_message`` in order;
    ``post`` sends one without waiting (in order); ``acquire`` / ``release`` take and give
    back a session's lease; ``aclose`` sends what is queued and disconnects (leases still
    held expire)."""

    def __init__(self, url: str, *, prefix: str = "agentica", lease_seconds: float = 3.0) -> None:
        self.url = url
        self.prefix = prefix
        self.lease_ms = max(300, int(lease_seconds * 1000))
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.owned: set[str] = set()
        self._redis: Redis | None = None
        self._outbox: asyncio.Queue[BusMessage] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._stream = f"{prefix}:bus"

    def _lease(self, session_id: str) -> str:
        return f"{self.prefix}:lease:{session_id}"

    @property
    def redis(self) -> Redis:
        if self._redis is None:
            raise RuntimeError("the cluster is not started")
        return self._redis

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(
        self,
        on_message: Callable[[BusMessage], Awaitable[None]],
        on_lost: Callable[[str], None],
    ) -> None:
        redis = Redis.from_url(self.url, decode_responses=True, health_check_interval=30)
        try:
            await redis.ping()
            newest = await redis.xrevrange(self._stream, count=1)
        except (RedisError, OSError) as exc:
            await redis.aclose()
            raise ServiceUnavailable(
                f"cannot reach Redis at {_safe(self.url)}: {exc}; start it or fix redis_url"
            ) from None
        self._redis = redis
        after = str(newest[0][0]) if newest else "0-0"
        self._tasks = [
            asyncio.create_task(self._read(after, on_message), name="agentica-team bus reader"),
            asyncio.create_task(self._send(), name="agentica-team bus sender"),
            asyncio.create_task(self._renew(on_lost), name="agentica-team lease renewer"),
        ]

    async def aclose(self) -> None:
        """Send what is queued, stop reading and disconnect."""
        if self._redis is None:
            return
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self._outbox.join()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._redis.aclose()
        self._redis = None

    # -- the bus -----------------------------------------------------------------------------

    def post(
        self, kind: Literal["wake", "committed"], session_id: str, data: dict[str, Any]
    ) -> None:
        """Send a message to every worker (this one too), without waiting."""
        self._outbox.put_nowait(BusMessage(self.worker, kind, session_id, data))

    async def _send(self) -> None:
        """Send the queued messages, as many as are waiting in one round trip."""
        while True:
            batch = [await self._outbox.get()]
            while not self._outbox.empty():
                batch.append(self._outbox.get_nowait())
            try:
                async with self.redis.pipeline(transaction=False) as pipe:
                    for message in batch:
                        fields: dict[Any, Any] = {
                            "w": message.worker,
                            "k": message.kind,
                            "s": message.session_id,
                            "d": json.dumps(message.data),
                        }
                        pipe.xadd(self._stream, fields, maxlen=_STREAM_LENGTH, approximate=True)
                    await pipe.execute()
            except (RedisError, OSError) as exc:  # the sweep finds what a lost wake said
                log.warning("could not send %d bus messages: %s", len(batch), exc)
            finally:
                for _ in batch:
                    self._outbox.task_done()

    async def _read(self, after: str, on_message: Callable[[BusMessage], Awaitable[None]]) -> None:
        while True:
            try:
                replies: Any = await self.redis.xread({self._stream: after}, count=500, block=1000)
            except (RedisError, OSError) as exc:
                log.warning("reading the bus failed: %s; retrying", exc)
                await asyncio.sleep(1.0)
                continue
            for _stream, entries in replies or ():
                for entry_id, fields in entries:
                    after = entry_id
                    message = _decode(fields)
                    if message is None:
                        continue
                    try:
                        await on_message(message)
                    except Exception as exc:
                        log.error("handling a bus message failed: %s: %s",
                                  type(exc).__name__, exc)  # fmt: skip

    # -- leases ------------------------------------------------------------------------------

    async def acquire(self, session_id: str) -> bool:
        """Take ``session_id``'s lease; whether this worker got it."""
        try:
            got = await self.redis.set(
                self._lease(session_id), self.worker, nx=True, px=self.lease_ms
            )
        except (RedisError, OSError) as exc:
            log.warning("could not take a lease: %s", exc)
            return False
        if got:
            self.owned.add(session_id)
        return bool(got)

    async def release(self, session_id: str) -> None:
        """Give ``session_id``'s lease back (when this worker still holds it)."""
        self.owned.discard(session_id)
        try:
            await self.redis.eval(_RELEASE, 1, self._lease(session_id), self.worker)
        except (RedisError, OSError) as exc:  # it expires by itself
            log.warning("could not release a lease: %s", exc)

    async def held(self, session_ids: list[str]) -> list[bool]:
        """Whether some worker holds each session's lease now."""
        if not session_ids:
            return []
        counts = await self.redis.mget([self._lease(s) for s in session_ids])
        return [value is not None for value in counts]

    async def _renew(self, on_lost: Callable[[str], None]) -> None:
        """Renew every lease this worker holds, every third of the expiry."""
        prefix = len(self._lease(""))
        while True:
            await asyncio.sleep(self.lease_ms / 3000)
            owned = list(self.owned)
            if not owned:
                continue
            try:
                lost = await self.redis.eval(
                    _RENEW, len(owned), *[self._lease(s) for s in owned], self.worker,
                    str(self.lease_ms),
                )  # fmt: skip
            except (RedisError, OSError) as exc:
                log.warning("could not renew %d leases: %s", len(owned), exc)
                continue
            for key in lost:
                session_id = key[prefix:]
                if session_id in self.owned:
                    self.owned.discard(session_id)
                    log.warning("lost the lease of session %s to another worker", session_id)
                    on_lost(session_id)


def _decode(fields: dict[str, str]) -> BusMessage | None:
    kind: Literal["wake", "committed"]
    if fields.get("k") == "wake":
        kind = "wake"
    elif fields.get("k") == "committed":
        kind = "committed"
    else:
        return None
    try:
        data = json.loads(fields.get("d", "{}"))
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    return BusMessage(fields.get("w", ""), kind, fields.get("s", ""), data)


def _safe(url: str) -> str:
    """``url`` without its password."""
    head, at, tail = url.rpartition("@")
    if not at:
        return url
    scheme, _, _ = head.partition("://")
    return f"{scheme}://***@{tail}"
