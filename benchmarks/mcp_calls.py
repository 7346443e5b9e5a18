"""MCP: ``uv run python benchmarks/mcp_calls.py [--quick]`` (``make bench`` runs it).

1. Per-call overhead: one ``add(a, b)`` tool called through the framework's tool engine
   (``FunctionCall.execute``, what a run does for each call), directly and as an MCP tool of a
   stdio server on the official SDK (``agentica mcp serve --no-agent --tool ...``, its own
   process); N calls one after another (p50, p95), then 16 at a time (calls per second). The
   npm reference server ``server-everything``'s ``get-sum`` is measured the same way.
2. Time to connect to a stdio server and list its tools (``MCPServer.stdio(...).connect()``,
   a new process each time): the npm filesystem and everything servers and an agentica server.

Prints markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Function, RunContext, tool  # noqa: E402
from agentica.mcp import MCPServer  # noqa: E402
from agentica.messages import RunUsage, ToolCall  # noqa: E402
from agentica.tools.call import FunctionCall  # noqa: E402

PEERS = ROOT / "tests" / "mcp_peers" / "node_modules"
FILESYSTEM = PEERS / ".bin" / "mcp-server-filesystem"
EVERYTHING = PEERS / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def agentica_server() -> MCPServer:
    return MCPServer.stdio(
        sys.executable,
        [
            "-m",
            "agentica.cli.main",
            "mcp",
            "serve",
            "--no-agent",
            "--tool",
            "benchmarks.mcp_calls:add",
        ],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        name="agentica",
    )


def everything() -> MCPServer:
    return MCPServer.stdio("node", [str(EVERYTHING), "stdio"], errlog=_null(), name="everything")


def filesystem() -> MCPServer:
    return MCPServer.stdio(str(FILESYSTEM), [str(ROOT)], errlog=_null(), name="filesystem")


_NULLS: list[Any] = []


def _null() -> Any:
    if not _NULLS:
        _NULLS.append(open("/dev/null", "w"))  # noqa: SIM115 - kept for the process
    return _NULLS[0]


async def one_call(function: Function, arguments: str) -> float:
    call = FunctionCall(
        ToolCall(id=uuid.uuid4().hex, name=function.name, arguments=arguments), function
    )
    ctx = RunContext(run_id="bench", deps=None, usage=RunUsage())
    started = time.perf_counter()
    await call.execute(ctx)
    elapsed = time.perf_counter() - started
    assert call.status == "success", call.error
    return elapsed


async def calls(function: Function, arguments: str, n: int) -> tuple[list[float], float]:
    """Seconds per call one after another, and calls per second 16 at a time."""
    for _ in range(20):  # warm up
        await one_call(function, arguments)
    sequential = [await one_call(function, arguments) for _ in range(n)]
    started = time.perf_counter()
    for _ in range(n // 16):
        await asyncio.gather(*(one_call(function, arguments) for _ in range(16)))
    rate = (n // 16) * 16 / (time.perf_counter() - started)
    return sequential, rate


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def connect_times(make: Any, times: int) -> list[float]:
    found = []
    for _ in range(times):
        server = make()
        started = time.perf_counter()
        await server.connect()
        found.append(time.perf_counter() - started)
        assert server.functions
        await server.aclose()
    return found


async def main(quick: bool) -> int:
    n = 200 if quick else 1000
    rows: list[tuple[str, list[float], float]] = []
    rows.append(("direct (the same function, no MCP)", *await calls(add, '{"a": 2, "b": 40}', n)))
    async with agentica_server() as server:
        rows.append(
            (
                "MCP, stdio, agentica mcp serve",
                *await calls(server.functions["add"], '{"a": 2, "b": 40}', n),
            )
        )
    have_npm = EVERYTHING.exists() and FILESYSTEM.exists()
    if have_npm:
        async with everything() as server:
            rows.append(
                (
                    "MCP, stdio, npm server-everything get-sum",
                    *await calls(server.functions["get-sum"], '{"a": 2, "b": 40}', n),
                )
            )
    print(f"| per call ({n} one after another; 16 at a time) | p50 | p95 | calls/s at 16 |")
    print("|---|---|---|---|")
    for name, times, rate in rows:
        p50, p95 = statistics.median(times) * 1e6, _p(times, 0.95) * 1e6
        print(f"| {name} | {p50:,.0f} µs | {p95:,.0f} µs | {rate:,.0f} |")
    overhead = (statistics.median(rows[1][1]) - statistics.median(rows[0][1])) * 1e6
    print(f"\nMCP overhead per call (p50, agentica server): {overhead:,.0f} µs")

    times = 3 if quick else 7
    servers = [("agentica mcp serve (Python)", agentica_server)]
    if have_npm:
        servers = [
            ("npm server-filesystem", filesystem),
            ("npm server-everything", everything),
            *servers,
        ]
    print(f"\n| connect and list tools, stdio ({times} new processes) | p50 | max |")
    print("|---|---|---|")
    for name, make in servers:
        found = await connect_times(make, times)
        print(f"| {name} | {statistics.median(found) * 1000:.0f} ms | {max(found) * 1000:.0f} ms |")
    if not have_npm:
        print("\n(the npm servers are not installed: make test installs them in tests/mcp_peers)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    sys.exit(asyncio.run(main(parser.parse_args().quick)))
