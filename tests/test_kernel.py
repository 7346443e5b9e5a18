"""PythonKernel: a real IPython kernel per session (jupyter_client + ipykernel), no mocks."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentica import Agent
from agentica.deep.kernel import PythonKernel
from agentica.messages import RunUsage
from agentica.testing import ScriptedModel, call, tool_calls
from agentica.tools.context import RunContext

pytest.importorskip("ipykernel", reason="PythonKernel needs the kernel extra")
pytest.importorskip("jupyter_client.manager")  # (imported before a loop runs: it is slow)


def _ctx(session: str = "s1") -> RunContext[None]:
    return RunContext(run_id="r", deps=None, usage=RunUsage(), user_id="u", session_id=session)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is gone too
        return stat.read().split()[2] != "Z"


def _pid(kernel: PythonKernel) -> int:
    (session,) = kernel._sessions.values()
    pid = session.manager.provisioner.pid  # type: ignore[union-attr]
    assert isinstance(pid, int)
    return pid


async def test_state_survives_between_cells_and_outputs_come_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-shown")
    kernel = PythonKernel(tmp_path)
    try:
        first = await kernel.run(_ctx(), "rows = [3, 4, 5]\nprint('loaded', len(rows))\nsum(rows)")
        assert first == "loaded 3\nOut[1]: 12"
        assert await kernel.run(_ctx(), "max(rows)") == "Out[2]: 5"
        seen = await kernel.run(
            _ctx(), "import os; (os.getcwd(), os.environ.get('OPENAI_API_KEY'))"
        )
        assert seen == f"Out[3]: ('{tmp_path}', None)"
        # another session has its own kernel: nothing of the first one's
        other = await kernel.run(_ctx("s2"), "rows")
        assert "NameError: name 'rows' is not defined" in other
        # IPython's and matplotlib's files stay in one hidden folder of the workspace
        assert {p.name for p in tmp_path.iterdir()} <= {".agentica"}  # noqa: ASYNC240
    finally:
        await kernel.aclose()


async def test_errors_are_trimmed_to_the_last_frames_without_colour(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path)
    code = textwrap.dedent("""
        def a(n):
            return b(n)
        def b(n):
            return c(n)
        def c(n):
            return 1 / n
        a(0)
    """)
    try:
        error = await kernel.run(_ctx(), code)
    finally:
        await kernel.aclose()
    assert error.endswith("ZeroDivisionError: division by zero")
    assert "outer frame(s) left out" in error and "\x1b[" not in error
    assert "return 1 / n" in error  # the frame where it happened is kept


async def test_a_long_cell_is_interrupted_and_the_kernel_keeps_its_state(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path, timeout=1.5)
    try:
        await kernel.run(_ctx(), "kept = 'yes'")
        result = await kernel.run(_ctx(), "import time\nwhile True:\n    time.sleep(0.05)")
        assert "ran longer than 1.5 s and was interrupted" in result
        assert await kernel.run(_ctx(), "kept") == "Out[3]: 'yes'"
    finally:
        await kernel.aclose()


async def test_a_cancelled_run_interrupts_the_cell(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path)
    try:
        await kernel.run(_ctx(), "n = 0")
        task = asyncio.ensure_future(
            kernel.run(_ctx(), "import time\nwhile True:\n    n += 1; time.sleep(0.01)")
        )
        await asyncio.sleep(1.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        first = await kernel.run(_ctx(), "n")
        await asyncio.sleep(0.3)
        assert await kernel.run(_ctx(), "n") == first.replace("Out[3]", "Out[4]")  # stopped
    finally:
        await kernel.aclose()


@pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None, reason="the plot needs matplotlib"
)
async def test_images_are_saved_as_png_files_in_the_workspace(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path)
    try:
        result = await kernel.run(
            _ctx(), "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
        )
    finally:
        await kernel.aclose()
    assert result == "[image saved: kernel_output/cell1_1.png]"
    assert (tmp_path / "kernel_output/cell1_1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


async def test_long_output_is_bounded(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path, max_output=400)
    try:
        result = await kernel.run(_ctx(), "for i in range(10_000): print('line', i)")
    finally:
        await kernel.aclose()
    assert len(result) < 500 and result.startswith("line 0") and result.endswith("line 9999")
    assert "characters left out" in result


async def test_an_agent_uses_it_and_aclose_stops_the_kernel(tmp_path: Path) -> None:
    kernel = PythonKernel(tmp_path)
    model = ScriptedModel([
        tool_calls(call("run_cell", code="import statistics\ndata = [2, 4, 9]")),
        tool_calls(call("run_cell", code="statistics.mean(data)")),
        "The mean is 5.",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[kernel])
    response = await agent.run("What is the mean of 2, 4 and 9?")
    assert response.content == "The mean is 5."
    assert [c.content for c in response.tool_calls] == ["(the cell ran and printed nothing)",
                                                        "Out[2]: 5"]  # fmt: skip
    pid = _pid(kernel)
    assert _alive(pid)
    await kernel.aclose()
    assert not _alive(pid)


def test_no_kernel_outlives_the_process(tmp_path: Path) -> None:
    """A program that never calls aclose(): its kernel is stopped when it exits."""
    script = textwrap.dedent(f"""
        import asyncio
        from agentica.deep.kernel import PythonKernel
        from agentica.messages import RunUsage
        from agentica.tools.context import RunContext

        async def main():
            kernel = PythonKernel({str(tmp_path)!r})
            ctx = RunContext(run_id="r", deps=None, usage=RunUsage())
            await kernel.run(ctx, "1")
            (session,) = kernel._sessions.values()
            print(session.manager.provisioner.pid, flush=True)
            globals()["kept"] = kernel  # alive until the interpreter exits

        asyncio.run(main())
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    assert not _alive(pid)
