"""Run the team service for a test: ``async with serve_team(settings) as (url, team): ...``.

The app runs under a real uvicorn server on 127.0.0.1 (a free port) in the test's event loop, on
its own ``Team`` opened from ``settings``; leaving the block stops the server and closes the team.
``client(url, token=...)`` is an aiohttp session that sends the token.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn

from agentica_team.app import create_app
from agentica_team.service import Team
from agentica_team.settings import TeamSettings

__all__ = ["client", "message_text", "serve_team", "sqlite_settings"]


def message_text(message: dict[str, Any]) -> str:
    """The text of a chat message as the OpenAI wire format carries it (a string or parts)."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content)
    return str(content or "")


def sqlite_settings(tmp_path: Path, **overrides: object) -> TeamSettings:
    """Settings for a fresh SQLite database under ``tmp_path``."""
    return TeamSettings(
        database_url=f"sqlite:///{tmp_path / 'team.db'}", data_dir=tmp_path, **overrides
    )


@asynccontextmanager
async def serve_team(settings: TeamSettings) -> AsyncIterator[tuple[str, Team]]:
    team = await Team.open(settings)
    app = await asyncio.to_thread(create_app, team=team)  # building the routes takes ~0.2 s
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", team
    finally:
        server.should_exit = True
        await task
        await team.aclose()


def client(url: str, token: str | None = None) -> aiohttp.ClientSession:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return aiohttp.ClientSession(
        base_url=url, headers=headers, cookie_jar=aiohttp.CookieJar(unsafe=True)
    )
