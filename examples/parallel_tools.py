"""Parallel tools over the real OpenAI wire format, offline.

A scripted OpenAI-compatible server (on 127.0.0.1) plays the model: it asks for three page
fetches at once, then summarises. The three 300 ms fetches run together, so the run takes about
0.3 s of tool time instead of 0.9 s. Run: `uv run python examples/parallel_tools.py`.
"""

import asyncio
import json
import time
from typing import Any

from agentica import Agent, OpenAILike, tool
from agentica.messages import AssistantMessage, ToolCall
from agentica.run.events import TextDelta, ToolCallCompleted, ToolCallStarted
from agentica.testing import FakeOpenAIServer

PAGES = {"a": "Alpha page", "b": "Beta page", "c": "Gamma page"}


@tool
async def fetch_page(name: str) -> str:
    """Fetch a page by name.

    Args:
        name: the page name: a, b or c.
    """
    await asyncio.sleep(0.3)
    return PAGES[name]


def scripted_model(body: dict[str, Any]) -> Any:
    results = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    if not results:
        return AssistantMessage(
            tool_calls=[
                ToolCall(id="", name="fetch_page", arguments=json.dumps({"name": n})) for n in PAGES
            ]
        )
    return "The pages say: " + "; ".join(results) + "."


async def main() -> None:
    async with (
        FakeOpenAIServer(scripted_model, latency=0.05) as server,
        OpenAILike(id="scripted", base_url=server.base_url) as model,
    ):
        agent = Agent(model=model, tools=[fetch_page])
        start = time.perf_counter()
        async for event in agent.run_stream("Read pages a, b and c."):
            if isinstance(event, ToolCallStarted):
                print(f"-> {event.call.name}({event.call.call.arguments})")
            elif isinstance(event, ToolCallCompleted):
                print(f"<- {event.call.content} ({event.call.duration:.2f} s)")
            elif isinstance(event, TextDelta):
                print(event.text, end="", flush=True)
        print(f"\nrun took {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
