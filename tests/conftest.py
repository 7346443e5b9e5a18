"""Shared test fixtures.

- Network: pytest-socket allows loopback only (see ``addopts`` in pyproject.toml).
- Blocking calls: every async test runs its loop in debug mode and fails if a callback blocked
  the loop for longer than ``SLOW_CALLBACK`` seconds. The objects that exist once the tests are
  collected (modules, classes), and again what survives each test module, are frozen out of the
  garbage collector, so a full collection of the whole process (0.2-0.5 s here once the service's
  tests have run) does not land inside some test's callback.
- ``fake_openai``: start a ``FakeOpenAIServer`` on 127.0.0.1 for the test.
- ``pg_cluster``: one throw-away PostgreSQL cluster for the session's framework tests (the
  storage conformance and the knowledge stores; the service's tests have their own).
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest

from agentica.testing import FakeAnthropicServer, FakeOpenAIServer
from tests.postgres import Cluster, throwaway_cluster, why_no_postgres

SLOW_CALLBACK = 0.3


class _SlowCallbackCatcher(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing") and "took" in message:
            self.messages.append(message)


def pytest_collection_finish(session: pytest.Session) -> None:
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True, scope="module")
def _freeze_survivors() -> None:
    """Before each test module: collect, then freeze what survives (the earlier modules' web
    servers, models and caches), so a full collection inside a test scans only its module's
    objects instead of the whole grown process."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
async def _no_blocking_calls(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    if request.node.get_closest_marker("allow_blocking"):
        yield
        return
    loop = asyncio.get_running_loop()
    loop.set_debug(True)
    loop.slow_callback_duration = SLOW_CALLBACK
    catcher = _SlowCallbackCatcher()
    logger = logging.getLogger("asyncio")
    logger.addHandler(catcher)
    try:
        yield
    finally:
        logger.removeHandler(catcher)
    assert not catcher.messages, f"the event loop was blocked: {catcher.messages}"


@pytest.fixture
async def fake_openai() -> AsyncIterator[Callable[..., Awaitable[FakeOpenAIServer]]]:
    """``server = await fake_openai(responder, latency=...)``; stopped after the test."""
    servers: list[FakeOpenAIServer] = []

    async def start(responder: Any, **kwargs: Any) -> FakeOpenAIServer:
        server = FakeOpenAIServer(responder, **kwargs)
        await server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture
async def fake_anthropic() -> AsyncIterator[Callable[..., Awaitable[FakeAnthropicServer]]]:
    """``server = await fake_anthropic(responder, **options)``; stopped after the test."""
    servers: list[FakeAnthropicServer] = []

    async def start(responder: Any, **kwargs: Any) -> FakeAnthropicServer:
        server = await FakeAnthropicServer(responder, **kwargs).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.stop()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    reason = why_no_postgres()
    if reason:
        pytest.skip(reason)
    with throwaway_cluster() as cluster:
        cluster.create_database("conformance")
        cluster.create_database("knowledge")
        yield cluster
