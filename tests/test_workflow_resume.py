"""Workflows resume from the last completed step: after a real ``kill -9`` in the middle of a
step (SQLite and PostgreSQL), and after a step that raised once its code is fixed.

The crashed process is ``tests/workflow_crash_app.py``; a side effect recorded with
``ctx.once`` must have happened exactly once however often its step ran.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from agentica.workflows import SQLWorkflowStore, StepContext, Workflow, WorkflowFailed
from tests.postgres import Cluster
from tests.workflow_crash_app import Order, build

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "workflow_crash_app.py"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'workflows.db'}"
    cluster: Cluster = request.getfixturevalue("pg_cluster")
    return cluster.create_database(f"wf_crash_{os.getpid()}_{random.randrange(10**9)}")


async def wait_for(path: Path, process: asyncio.subprocess.Process) -> None:
    async with asyncio.timeout(90):
        while not await asyncio.to_thread(path.exists):
            if process.returncode is not None:
                raise AssertionError(f"the workflow process ended early ({process.returncode})")
            await asyncio.sleep(0.05)


async def lines(path: Path) -> list[str]:
    text = await asyncio.to_thread(path.read_text)
    return text.splitlines()


async def test_kill_9_in_the_middle_of_a_step_resumes_from_the_last_completed_step(
    store_url: str, tmp_path: Path
) -> None:
    await asyncio.to_thread((tmp_path / "crash").touch)
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(APP), store_url, str(tmp_path), "order-7", cwd=ROOT
    )
    try:
        await wait_for(tmp_path / "ready", process)  # charge's first attempt is running
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    assert process.returncode == -signal.SIGKILL
    await asyncio.to_thread((tmp_path / "crash").unlink)

    flow = build(store_url, tmp_path)
    try:
        crashed = await flow.inspect("order-7")
        assert (crashed.status, crashed.next) == ("running", ["charge"])
        assert [(s.step, s.status) for s in crashed.steps] == [("prepare", "completed")]
        assert crashed.state.log == ["prepared"]

        result = await flow.resume("order-7")
    finally:
        await flow.store.aclose()
    assert result.status == "completed"
    assert result.state == Order(item="a lamp", receipt="receipt for a lamp", shipped=True,
                                 log=["prepared"])  # fmt: skip
    # prepare ran once (completed before the crash), charge twice, ship once
    assert await lines(tmp_path / "log.txt") == [
        "prepare", "charge attempt 1", "charge attempt 2", "ship"
    ]  # fmt: skip
    # the charge recorded with ctx.once happened exactly once
    assert await lines(tmp_path / "charges.txt") == ["charged order-7/charge/1"]
    assert [(s.step, s.attempt) for s in result.steps] == [
        ("prepare", 1), ("charge", 2), ("ship", 1)
    ]  # fmt: skip


async def test_a_step_that_raises_fails_the_run_there_and_resumes_after_the_fix(
    store_url: str, tmp_path: Path
) -> None:
    ran: list[str] = []

    def version(fixed: bool) -> Workflow[Order]:
        async def prepare(order: Order) -> dict[str, Any]:
            ran.append("prepare")
            return {"log": ["prepared"]}

        async def charge(order: Order, ctx: StepContext) -> dict[str, Any]:
            ran.append(f"charge {ctx.attempt}")
            if not fixed:
                raise KeyError("price")
            return {"receipt": "paid"}

        flow = Workflow("orders", Order, store=SQLWorkflowStore(store_url))
        flow.step("prepare", prepare).step("charge", charge)
        return flow.edge("prepare", "charge")

    broken = version(fixed=False)
    try:
        with pytest.raises(WorkflowFailed, match=r"failed at 'charge': step 'charge': KeyError"):
            await broken.run(Order(item="pen"), run_id="o-1")
    finally:
        await broken.store.aclose()
    fixed = version(fixed=True)  # the fixed code, as a new process would declare it
    try:
        failed = await fixed.inspect("o-1")
        assert (failed.status, failed.next) == ("failed", ["charge"])
        assert failed.errors == ["step 'charge': KeyError: 'price'"]
        result = await fixed.resume("o-1")
    finally:
        await fixed.store.aclose()
    assert (result.status, result.state.receipt, result.state.log) == ("completed", "paid",
                                                                       ["prepared"])  # fmt: skip
    assert ran == ["prepare", "charge 1", "charge 2"]
    assert [(s.step, s.status, s.attempt) for s in result.steps] == [
        ("prepare", "completed", 1), ("charge", "failed", 1), ("charge", "completed", 2)
    ]  # fmt: skip
