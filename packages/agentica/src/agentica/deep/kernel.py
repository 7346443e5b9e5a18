"""``PythonKernel``: a persistent Python (IPython) kernel per session, for data work.

The ``run_cell`` tool runs code in a Jupyter kernel (``jupyter_client`` + ``ipykernel``, the
``agentica[kernel]`` extra) started in the workspace on the session's first call: variables,
imports and loaded data survive between calls. A cell that runs past its timeout (or whose run
is cancelled) is interrupted, and the kernel keeps its state. What comes back is bounded: text
output (first and last halves kept), the value of the last expression, a traceback trimmed to
its last frames without colour codes, and each image saved as a PNG file in the workspace and
named. The kernel sees only a minimal environment (never the parent's API keys) and is shut down
with ``aclose()`` (or when the process exits).
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import importlib
import importlib.util
import os
import re
import subprocess
import time
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentica.deep.shell.sandbox import minimal_env
from agentica.errors import UsageError
from agentica.run.capability import Capability
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager

__all__ = ["PythonKernel"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_FRAMES_KEPT = 2
_GRACE = 10.0  # seconds an interrupted cell has to stop


def _require() -> None:
    if not all(importlib.util.find_spec(n) for n in ("ipykernel", "jupyter_client")):
        raise UsageError(
            "PythonKernel needs jupyter_client and ipykernel: pip install 'agentica[kernel]'"
        )


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n...[{len(text) - 2 * half} characters left out]...\n{text[-half:]}"


def _traceback(content: Mapping[str, Any]) -> str:
    """The error as the model needs it: the last frames (the ones in its own code, usually) and
    the error line, without colour codes."""
    frames = [_ANSI.sub("", str(f)) for f in content.get("traceback", [])]
    frames = [f for f in frames if f.strip() and not f.lstrip().startswith("-" * 10)]
    error = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
    if len(frames) > _FRAMES_KEPT + 1:
        left = len(frames) - _FRAMES_KEPT - 1
        frames = [f"[{left} outer frame(s) left out]", *frames[-_FRAMES_KEPT - 1 : -1]]
    else:
        frames = frames[:-1]
    return "\n".join([*frames, error]).strip()


@dataclass(slots=True)
class _Cell:
    """What one execution produced, as it arrives."""

    number: int
    text: list[str] = field(default_factory=list)
    result: str | None = None
    error: str | None = None
    images: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Session:
    manager: AsyncKernelManager
    client: AsyncKernelClient
    lock: asyncio.Lock
    cells: int = 0


class PythonKernel(Capability):
    """A Jupyter kernel per session in ``root``; the agent gets ``run_cell(code)``.

    ```python
    kernel = PythonKernel("workspace/")
    agent = DeepAgent(workspace="workspace/", capabilities=[kernel])
    ...
    await kernel.aclose()  # shuts the kernels down
    ```

    Args:
        root: the working directory of the kernels (and ``HOME``); images are saved under
            ``root/kernel_output/``.
        timeout: seconds a cell may run before it is interrupted (the kernel keeps its state).
        max_output: characters of a cell's output returned (the first and last halves).
        startup_timeout: seconds a new kernel has to become ready.
        env: variables added to the kernel's minimal environment (``PATH``, ``HOME``, ``LANG``).
        max_kernels: kernels kept at once; the least recently used one is shut down beyond it.
    """

    name = "python_kernel"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 120.0,
        max_output: int = 8_000,
        startup_timeout: float = 60.0,
        env: Mapping[str, str] | None = None,
        max_kernels: int = 4,
    ) -> None:
        _require()
        if timeout <= 0 or max_output < 100 or max_kernels < 1:
            raise UsageError("PythonKernel: timeout > 0, max_output >= 100, max_kernels >= 1")
        self.root = Path(root).resolve()
        self.timeout = timeout
        self.max_output = max_output
        self.startup_timeout = startup_timeout
        self.env = dict(env or {})
        self.max_kernels = max_kernels
        self._sessions: dict[tuple[str | None, str | None], _Session] = {}
        self._starting = asyncio.Lock()
        self._finalizer = weakref.finalize(self, _kill_all, self._sessions)
        atexit.register(self._finalizer)

    def tools(self) -> Sequence[ToolLike]:
        kernel = self

        async def run_cell(ctx: RunContext[Any], code: str) -> str:
            """Run Python code in a persistent kernel: variables, imports and data you load
            stay for the next call. Returns what it printed, the value of the last line, or
            the error.

            Args:
                code: Python source (several lines are fine).
            """
            return await kernel.run(ctx, code)

        # the engine's own limit comes after the cell's timeout and the interrupt's grace
        return [Function.from_callable(run_cell, timeout=self.timeout + _GRACE + 30.0)]

    async def run(self, ctx: RunContext[Any], code: str) -> str:
        """Run ``code`` in the kernel of ``ctx``'s session (started if needed)."""
        session = await self._session(ctx)
        async with session.lock:
            session.cells += 1
            cell = _Cell(session.cells)
            msg_id = session.client.execute(code, store_history=True, allow_stdin=False)
            try:
                finished = await self._collect(session, msg_id, cell)
            except asyncio.CancelledError:
                await asyncio.shield(self._interrupt(session, msg_id, cell))
                raise
            if not finished:
                await self._interrupt(session, msg_id, cell)
                cell.error = (
                    f"The cell ran longer than {self.timeout:g} s and was interrupted "
                    "(variables defined before that are kept)."
                )
        return self._render(cell)

    async def _session(self, ctx: RunContext[Any]) -> _Session:
        key = (ctx.user_id, ctx.session_id)
        async with self._starting:
            session = self._sessions.pop(key, None)
            if session is None or not await session.manager.is_alive():
                session = await self._start()
            self._sessions[key] = session  # (most recently used last)
            while len(self._sessions) > self.max_kernels:
                oldest = next(iter(self._sessions))
                await _shutdown(self._sessions.pop(oldest))
            return session

    async def _start(self) -> _Session:
        # (imported in a thread: the first import takes a few hundred milliseconds)
        managers = await asyncio.to_thread(importlib.import_module, "jupyter_client.manager")
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        manager: AsyncKernelManager = managers.AsyncKernelManager(kernel_name="python3")
        private = self.root / ".agentica" / "kernel"  # IPython's, matplotlib's caches
        env = {
            **minimal_env(self.root, None), "IPYTHONDIR": str(private / "ipython"),
            "MPLCONFIGDIR": str(private / "matplotlib"), "XDG_CACHE_HOME": str(private / "cache"),
            "XDG_CONFIG_HOME": str(private / "config"), **self.env,
        }  # fmt: skip
        await manager.start_kernel(
            cwd=str(self.root), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = manager.client()
        client.start_channels()
        try:
            await client.wait_for_ready(timeout=self.startup_timeout)
        except BaseException as exc:  # a failed or cancelled start leaves no kernel behind
            client.stop_channels()
            await asyncio.shield(manager.shutdown_kernel(now=True))
            if isinstance(exc, RuntimeError):
                raise UsageError(f"the Python kernel did not start: {exc}") from None
            raise
        return _Session(manager, client, asyncio.Lock())

    async def _collect(
        self, session: _Session, msg_id: str, cell: _Cell, timeout: float | None = None
    ) -> bool:
        """Read the cell's messages until the kernel is idle again; ``False`` on timeout."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                message = await session.client.get_iopub_msg(timeout=left)
            except Exception:  # queue.Empty: the deadline passed
                return False
            if message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "status" and content.get("execution_state") == "idle":
                return True
            await self._add(cell, kind, content)

    async def _add(self, cell: _Cell, kind: str, content: Mapping[str, Any]) -> None:
        if kind == "stream":
            cell.text.append(str(content.get("text", "")))
        elif kind == "error":
            cell.error = _traceback(content)
        elif kind in ("execute_result", "display_data"):
            data: Mapping[str, Any] = content.get("data", {})
            if "image/png" in data:
                cell.images.append(await self._save_png(cell, str(data["image/png"])))
            elif kind == "execute_result" and "text/plain" in data:
                cell.result = str(data["text/plain"])
            elif "text/plain" in data:
                cell.text.append(str(data["text/plain"]) + "\n")

    async def _save_png(self, cell: _Cell, encoded: str) -> str:
        name = f"kernel_output/cell{cell.number}_{len(cell.images) + 1}.png"
        target = self.root / name

        def write() -> None:
            target.parent.mkdir(exist_ok=True)
            target.write_bytes(base64.b64decode(encoded))

        await asyncio.to_thread(write)
        return name

    async def _interrupt(self, session: _Session, msg_id: str, cell: _Cell) -> None:
        """Interrupt the running cell and wait (briefly) for the kernel to be idle again."""
        await session.manager.interrupt_kernel()
        await self._collect(session, msg_id, cell, _GRACE)

    def _render(self, cell: _Cell) -> str:
        parts = []
        text = "".join(cell.text).strip("\n")
        if text:
            parts.append(text)
        if cell.result is not None:
            parts.append(f"Out[{cell.number}]: {cell.result}")
        parts.extend(f"[image saved: {name}]" for name in cell.images)
        if cell.error:
            parts.append(cell.error)
        rendered = "\n".join(parts) or "(the cell ran and printed nothing)"
        return _cut(rendered, self.max_output)

    async def aclose(self) -> None:
        """Shut every kernel down."""
        while self._sessions:
            _, session = self._sessions.popitem()
            await _shutdown(session)


async def _shutdown(session: _Session) -> None:
    session.client.stop_channels()
    try:
        await session.manager.shutdown_kernel(now=True)
    except Exception:  # already gone
        return


def _kill_all(sessions: dict[tuple[str | None, str | None], _Session]) -> None:
    """At exit (or when the capability is collected): no kernel outlives the process."""
    for session in sessions.values():
        process = getattr(session.manager, "provisioner", None)
        pid = getattr(process, "pid", None)
        if pid:
            try:
                os.kill(pid, 9)
            except OSError:
                continue
