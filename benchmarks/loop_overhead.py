"""The run loop's own CPU per turn, against an earlier commit: ``uv run python
benchmarks/loop_overhead.py --against REV [--write-docs]``.

A scripted model (no HTTP, no tokenizer) asks for 20 tool calls in a row and then answers; the
figure is the minimum CPU time per model turn over many runs, so it is what agentica itself
spends per turn (run loop, context accounting, tool execution). ``--against REV`` checks REV
out in a temporary git worktree and measures both trees in alternating fresh processes, since
only ratios of one session mean anything on a noisy machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.docs import write_section  # noqa: E402

TURNS = 21  # 20 tool turns and the answer
COMMAND = "uv run python benchmarks/loop_overhead.py --against REV --write-docs"

MEASURE = """
import asyncio, sys, time
from agentica import Agent, RunLimits, tool
from agentica.testing import ScriptedModel, call, tool_calls

@tool
async def fetch(i: int) -> str:
    "Fetch item i."
    return str(i)

async def once() -> float:
    replies = [tool_calls(call("fetch", i=i)) for i in range(20)] + ["done"]
    agent = Agent(model=ScriptedModel(replies), tools=[fetch], limits=RunLimits(max_turns=50))
    started = time.process_time()
    await agent.run("go")
    return (time.process_time() - started) / TURNS * 1e6

async def main() -> None:
    for _ in range(20):
        await once()
    print(min([await once() for _ in range(RUNS)]))

asyncio.run(main())
"""


def measure(tree: Path, runs: int) -> float:
    """Microseconds of CPU per turn for the agentica source in ``tree`` (a fresh process)."""
    code = f"TURNS = {TURNS}; RUNS = {runs}\n{MEASURE}"
    env_path = str(tree / "packages" / "agentica" / "src")
    result = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {env_path!r})\n{code}"],
        capture_output=True, text=True, check=True, cwd=tree,
    )  # fmt: skip
    return float(result.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="HEAD", help="the commit to compare with")
    parser.add_argument("--pairs", type=int, default=4, help="alternating measurements per tree")
    parser.add_argument("--runs", type=int, default=200, help="runs per measurement")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.against],
            cwd=ROOT, check=True, capture_output=True,
        )  # fmt: skip
        try:
            figures: dict[str, list[float]] = {"before": [], "after": []}
            with Progress() as progress:
                task = progress.add_task("loop overhead", total=2 * args.pairs)
                for _ in range(args.pairs):
                    for name, tree in (("before", base), ("after", ROOT)):
                        figures[name].append(measure(tree, args.runs))
                        progress.advance(task)
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False
            )
    before, after = min(figures["before"]), min(figures["after"])
    rows = [
        "| tree | CPU µs per turn (best of each measurement) | best | after ÷ before |",
        "|---|---|---|---|",
        f"| before ({args.against}) | {', '.join(f'{v:.0f}' for v in figures['before'])} "
        f"| {before:.0f} | |",
        f"| after (working tree) | {', '.join(f'{v:.0f}' for v in figures['after'])} "
        f"| {after:.0f} | {after / before:.2f} |",
    ]
    spread = statistics.pstdev(figures["after"]) / statistics.mean(figures["after"])
    markdown = "\n".join(rows) + (
        f"\n\nA scripted model, {TURNS - 1} tool turns then the answer; the minimum CPU time per "
        f"turn over {args.runs} runs, measured {args.pairs} times per tree in alternating fresh "
        f"processes (spread of the after figures: {spread:.0%})."
    )
    print(markdown)
    if args.write_docs:
        markdown = markdown.replace(f"({args.against})", f"(`{args.against}`)")
        write_section(
            "loop-overhead", COMMAND.replace("REV", args.against), markdown,
            heading="Run loop overhead",
        )  # fmt: skip


if __name__ == "__main__":
    main()
