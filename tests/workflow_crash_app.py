"""A workflow for the crash tests: ``python tests/workflow_crash_app.py STORE FOLDER RUN_ID``.

Steps: ``prepare`` (logs each execution), ``charge`` (records a charge once with ``ctx.once``,
logs each attempt; while FOLDER/crash exists, its first attempt writes FOLDER/ready and hangs
there, for the test to kill the process with SIGKILL) and ``ship`` (logs). The test imports
``build`` to resume the run in its own process.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentica.workflows import StepContext, Workflow


@dataclass
class Order:
    item: str
    receipt: str = ""
    shipped: bool = False
    log: list[str] = field(default_factory=list)


def _append(path: Path, line: str) -> None:
    with path.open("a") as file:
        file.write(line + "\n")


def build(store: str, folder: Path) -> Workflow[Order]:
    log = folder / "log.txt"

    async def prepare(order: Order) -> dict[str, Any]:
        await asyncio.to_thread(_append, log, "prepare")
        return {"log": [*order.log, "prepared"]}

    async def charge(order: Order, ctx: StepContext) -> dict[str, Any]:
        async def effect() -> str:
            await asyncio.to_thread(_append, folder / "charges.txt", f"charged {ctx.key}")
            return f"receipt for {order.item}"

        receipt = await ctx.once("charge", effect)
        await asyncio.to_thread(_append, log, f"charge attempt {ctx.attempt}")
        if ctx.attempt == 1 and await asyncio.to_thread((folder / "crash").exists):
            await asyncio.to_thread((folder / "ready").touch)
            await asyncio.sleep(3600)  # killed here
        return {"receipt": receipt}

    async def ship(order: Order) -> dict[str, Any]:
        await asyncio.to_thread(_append, log, "ship")
        return {"shipped": True}

    flow = Workflow("orders", Order, store=store)
    flow.step("prepare", prepare).step("charge", charge).step("ship", ship)
    return flow.edge("prepare", "charge").edge("charge", "ship")


async def _main(store: str, folder: str, run_id: str) -> None:
    flow = build(store, Path(folder))
    await flow.run(Order(item="a lamp"), run_id=run_id)


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:4]))
