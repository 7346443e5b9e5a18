"""Start-up of ``agentica code`` with a remote model: ``uv run python benchmarks/code_startup.py``.

The interactive CLI is started in a real terminal (tmux) against a scripted OpenAI-compatible
server on 127.0.0.1 (no local model to load); the time from launching the process to its prompt
showing on the screen, and the process's resident memory then (``VmRSS``), median of
``--repeats`` starts. Also ``agentica code -p`` end to end on a one-call task (start, one model
call, answer on stdout, exit). With ``--write-docs``: the ``code-startup`` block of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.testing import FakeOpenAIServer  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402


async def _run(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    return out.decode()


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def _python_pid(shell_pid: int) -> int:
    children = (await _run("pgrep", "-P", str(shell_pid))).split()
    return int(children[0]) if children else shell_pid


async def start_once(base_url: str, folder: Path) -> tuple[float, int]:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    command = (
        f"AGENTICA_API_KEY=k AGENTICA_HOME={folder}/home {sys.executable} -m agentica.cli.main "
        f"code {folder} --model fake --base-url {base_url} --storage {folder}/s.db"
    )
    started = time.perf_counter()
    await _run("tmux", "new-session", "-d", "-s", name, "-x", "150", "-y", "40", command)
    try:
        for _ in range(6000):  # poll the screen (30 s at most)
            if "[ask] >" in await _run("tmux", "capture-pane", "-p", "-t", name):
                break
            await asyncio.sleep(0.005)
        elapsed = time.perf_counter() - started
        shell = int((await _run("tmux", "list-panes", "-t", name, "-F", "#{pane_pid}")).split()[0])
        rss = _rss_kb(await _python_pid(shell))
    finally:
        await _run("tmux", "kill-session", "-t", name)
    return elapsed, rss


async def print_once(base_url: str, folder: Path) -> float:
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentica.cli.main", "code", str(folder), "--model", "fake",
        "--base-url", base_url, "--storage", str(folder / "s.db"), "-p", "Hello?",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env={"AGENTICA_API_KEY": "k", "AGENTICA_HOME": str(folder / "home"), "PATH": "/usr/bin"},
    )  # fmt: skip
    await process.communicate()
    return time.perf_counter() - started


async def main_async(args: argparse.Namespace) -> None:
    async with FakeOpenAIServer(lambda body: "Hello.") as server:
        with tempfile.TemporaryDirectory() as folder:
            starts = [await start_once(server.base_url, Path(folder)) for _ in range(args.repeats)]
            prints = [await print_once(server.base_url, Path(folder)) for _ in range(args.repeats)]
    ready = statistics.median(s for s, _ in starts)
    rss = statistics.median(r for _, r in starts) / 1024
    answer = statistics.median(prints)
    text = (
        f"Median of {args.repeats} starts, a scripted server on 127.0.0.1 (no model to load):\n\n"
        "| measure | value |\n|---|---|\n"
        f"| interactive: launch to prompt on the screen | {ready * 1000:.0f} ms |\n"
        f"| resident memory at the prompt (VmRSS) | {rss:.0f} MB |\n"
        f"| `agentica code -p` one-call task, start to exit | {answer * 1000:.0f} ms |\n"
    )
    print(text)
    if args.write_docs:
        command = "uv run python " + " ".join(["benchmarks/code_startup.py", *sys.argv[1:]])
        write_section("code-startup", command, text, heading="agentica code")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
