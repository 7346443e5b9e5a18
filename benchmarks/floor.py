"""The floor: a hand-written agent loop posting JSON with one pooled aiohttp session.

It does the minimum any framework must do per step (build the request, post it, parse the reply,
run the tools, append the results) and nothing else, so its figures are what a framework's
overhead is measured against.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp


async def run_floor(
    session: aiohttp.ClientSession,
    url: str,
    model: str,
    prompt: str,
    tool: Callable[[int], Any],
    *,
    blocking: bool = False,
    pool: ThreadPoolExecutor | None = None,
) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    tools = [{"type": "function", "function": {
        "name": "fetch", "description": "Fetch item i.",
        "parameters": {"type": "object", "properties": {"i": {"type": "integer"}},
                       "required": ["i"]}}}]  # fmt: skip
    loop = asyncio.get_running_loop()
    while True:
        async with session.post(url, data=json.dumps({
            "model": model, "messages": messages, "tools": tools
        }), headers={"Content-Type": "application/json"}) as resp:  # fmt: skip
            data = json.loads(await resp.read())
        message = data["choices"][0]["message"]
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return str(message.get("content"))

        def arg(c: dict[str, Any]) -> int:
            return int(json.loads(c["function"]["arguments"])["i"])

        if blocking:
            results = await asyncio.gather(
                *(loop.run_in_executor(pool, tool, arg(c)) for c in calls)
            )
        else:
            coroutine_tool: Callable[[int], Awaitable[Any]] = tool
            results = await asyncio.gather(*(coroutine_tool(arg(c)) for c in calls))
        for c, result in zip(calls, results, strict=True):
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": str(result)})
