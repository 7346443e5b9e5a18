"""Pooled HTTP clients: one ``aiohttp.ClientSession`` per owner object and event loop.

A model adapter (or a web tool) owns one ``HttpClientPool``. The session is created lazily inside
the running loop on first use and reused by every agent and run that shares the owner, which is
what keeps a model call at well under a millisecond of CPU. Sessions are keyed by loop, so an
owner used from ``asyncio.run`` twice (as ``Agent.run_sync`` does) never touches a session bound
to a closed loop. ``aclose()`` closes the session of the current loop explicitly.

aiohttp is imported on first use, not at ``import agentica``: it costs ~150 ms to import.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import aiohttp
    from aiohttp.abc import AbstractResolver

__all__ = ["HttpClientPool", "aclose_loop_sessions"]

# Which pools opened a session in which loop, so that the code that owns a loop's lifetime
# (``Agent.run_sync``) can close them before the loop ends. Keyed weakly by loop and pool: it
# holds no data of any user or run, and an entry disappears with its loop.
_OPENED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, weakref.WeakSet[HttpClientPool]] = (
    weakref.WeakKeyDictionary()
)


class HttpClientPool:
    """Lazily created, per-event-loop pooled ``aiohttp.ClientSession``."""

    __slots__ = (
        "__weakref__",
        "_connect_timeout",
        "_keepalive",
        "_max_connections",
        "_resolver",
        "_sessions",
    )

    def __init__(
        self,
        *,
        max_connections: int = 1000,
        connect_timeout: float = 10.0,
        keepalive: bool = True,
        resolver: Callable[[], AbstractResolver] | None = None,
    ) -> None:
        """``resolver`` makes the DNS resolver of each new session (aiohttp's default if None)."""
        self._resolver = resolver
        self._keepalive = keepalive
        self._max_connections = max_connections
        self._connect_timeout = connect_timeout
        self._sessions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, aiohttp.ClientSession
        ] = weakref.WeakKeyDictionary()

    def session(self) -> aiohttp.ClientSession:
        """The session for the running loop, created on first use."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            import aiohttp

            connector = aiohttp.TCPConnector(
                limit=self._max_connections,
                limit_per_host=0,
                ttl_dns_cache=300,
                force_close=not self._keepalive,
                resolver=self._resolver() if self._resolver is not None else None,
            )
            session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self._connect_timeout),
                auto_decompress=True,
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "agentica"},
            )
            self._sessions[loop] = session
            _OPENED.setdefault(loop, weakref.WeakSet()).add(self)
        return session

    async def aclose(self) -> None:
        """Close the session of the running loop (a later call opens a new one)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.pop(loop, None)
        if session is not None and not session.closed:
            await session.close()


async def aclose_loop_sessions() -> None:
    """Close every pooled session opened in the running loop (call before the loop ends)."""
    pools = _OPENED.pop(asyncio.get_running_loop(), None)
    for pool in list(pools or ()):
        await pool.aclose()
