"""``benchmarks/code_tasks.py --scripted``: ``agentica code -p`` carries out the task suite's
reference solutions through its own tools (a scripted server on 127.0.0.1 asks for the calls),
and the suite's checkers pass: one task of each kind here, the whole suite in the benchmark."""

from __future__ import annotations

import argparse

import aiohttp.web  # noqa: F401  (imported here: the server's first start must not import it)
import pytest

from agentica.testing import FakeOpenAIServer
from benchmarks.code_tasks import run_task, scripted_responder
from benchmarks.local_task_data import KINDS, TASKS, Task

ONE_PER_KIND = [next(t for t in TASKS if t.kind == kind) for kind in KINDS]


@pytest.mark.parametrize("task", ONE_PER_KIND, ids=lambda t: t.name)
async def test_the_cli_carries_out_a_reference_solution(task: Task) -> None:
    args = argparse.Namespace(model=None, temperature=0.0, sandbox="none")
    async with FakeOpenAIServer(scripted_responder([task])) as server:
        outcome = await run_task(task, args, server.base_url)
    assert outcome.ok, (outcome.error, outcome.error_message, outcome.answer, outcome.files)
    assert outcome.error == "" and outcome.malformed == 0
    changed = [c for c in outcome.tool_calls if c["name"] == "write_file"]
    assert all(c["status"] == "success" for c in changed)
