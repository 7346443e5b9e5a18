"""The floor of a Python hop: ``python -m benchmarks.bare_proxy UPSTREAM_URL`` prints ``PORT n``.

uvicorn with a raw ASGI app that forwards every POST body to ``UPSTREAM_URL`` + the request's
path (after ``/v1``) with one pooled aiohttp session and passes the answer (JSON or streamed
chunks) back: no framework, no authentication, no database. ``team_gateway.py`` measures it
beside the gateway, so the gateway's own cost is the difference between the two.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import aiohttp
import uvicorn


def app_for(upstream: str) -> Any:
    session: aiohttp.ClientSession | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal session
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if session is None:
            session = aiohttp.ClientSession()
        path = scope["path"].removeprefix("/v1")
        headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
        async with session.post(upstream + path, data=body, headers=headers) as answer:
            kind = answer.headers.get("Content-Type", "application/json").encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": answer.status,
                    "headers": [(b"content-type", kind)],
                }
            )
            async for chunk in answer.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


async def main(upstream: str) -> None:
    config = uvicorn.Config(app_for(upstream), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 (uvicorn's Server has a flag, no event)
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
