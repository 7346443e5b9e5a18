"""Small file-and-code tasks on the embedded model: ``uv run python benchmarks/local_tasks.py``.

Twelve tasks of the kind a newcomer tries first (write and run a script, fix a bug, transform a
file, compute and save a result), each checked by looking at the workspace afterwards. Every task
runs with the same tools as ``agentica demo`` (list/read/write files, run Python, calculator) in a
fresh workspace, at temperature 0, at most 10 model calls and 180 s.

Variants (``--variants``):
- ``agentica``: the default ``LocalModel`` (agentica renders the prompt and parses tool calls
  from the reply text) with the ``AnswerCheck`` capability (the model is asked once to check its
  work before it finishes), as ``agentica demo`` runs it;
- ``plain``: the same without ``AnswerCheck``;
- ``native``: the same loaded model through llama.cpp's own chat endpoint with native tool
  calling (its template and its strict server-side parser), driven by the same agent loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, ModelSettings, OpenAILike, RunLimits  # noqa: E402
from agentica.cli.demo import INSTRUCTIONS, SALES, WorkspaceTools, calculator  # noqa: E402
from agentica.deep import AnswerCheck  # noqa: E402
from agentica.errors import AgenticaError  # noqa: E402
from agentica.models.base import Model  # noqa: E402
from agentica.models.local import LocalModel  # noqa: E402


def _run(root: Path, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, *args], cwd=root, capture_output=True, text=True, timeout=30
    )
    return out.stdout


def _read(root: Path, name: str) -> str:
    path = root / name
    return path.read_text() if path.is_file() else ""


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"-?\d+", text)]


@dataclass(slots=True)
class Task:
    name: str
    prompt: str
    check: Callable[[Path], bool]
    files: dict[str, str] = field(default_factory=dict)


TASKS = [
    Task("hello", "Create hello.py that prints exactly: Hello, world!",
         lambda r: _run(r, "hello.py").strip() == "Hello, world!"),
    Task("fibonacci", "Write fib.py with a function fib(n) that returns the n-th Fibonacci number "
         "(fib(0) = 0, fib(1) = 1).",
         lambda r: _run(r, "-c", "import fib; print(fib.fib(10), fib.fib(20))").split()
         == ["55", "6765"]),
    Task("csv-totals", "sales.csv has columns region, product, amount. Compute the total amount "
         "per region and write the totals to totals.json as an object mapping region to total.",
         lambda r: json.loads(_read(r, "totals.json") or "{}") == {"north": 165, "south": 180,
                                                                  "east": 90},
         {"sales.csv": SALES}),
    Task("word-count", "Count the words in notes.txt and write only the number to count.txt.",
         lambda r: _numbers(_read(r, "count.txt")) == [13],
         {"notes.txt": "the quick brown fox jumps over the lazy dog and runs away fast\n"}),
    Task("fix-bug", "buggy.py has a bug: add(2, 3) should return 5. Fix the file.",
         lambda r: _run(r, "-c", "import buggy; print(buggy.add(2, 3), buggy.add(-1, 1))").split()
         == ["5", "0"],
         {"buggy.py": "def add(a, b):\n    return a - b\n"}),
    Task("json-config", 'Create config.json containing {"name": "agentica", "version": 1}.',
         lambda r: json.loads(_read(r, "config.json") or "{}") == {"name": "agentica",
                                                                  "version": 1}),
    Task("reverse-lines", "Write the lines of lines.txt in reverse order to reversed.txt.",
         lambda r: _read(r, "reversed.txt").split() == ["three", "two", "one"],
         {"lines.txt": "one\ntwo\nthree\n"}),
    Task("primes", "Write primes.txt listing every prime number below 30, one per line.",
         lambda r: _numbers(_read(r, "primes.txt")) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]),
    Task("multiply", "Compute 1234 * 5678 and write only the result to answer.txt.",
         lambda r: _numbers(_read(r, "answer.txt").replace(",", "")) == [7006652]),
    Task("uppercase", "Write the names from names.txt in upper case, one per line, to upper.txt.",
         lambda r: _read(r, "upper.txt").split() == ["ADA", "GRACE", "LINUS"],
         {"names.txt": "ada\ngrace\nlinus\n"}),
    Task("maximum", "numbers.txt has one number per line. Write only the largest to max.txt.",
         lambda r: _numbers(_read(r, "max.txt")) == [97],
         {"numbers.txt": "12\n97\n-4\n55\n"}),
    Task("rename", "In util.py rename the function calc to compute, keeping its behaviour.",
         lambda r: _run(r, "-c", "import util; print(util.compute(3), hasattr(util, 'calc'))")
         .split() == ["9", "False"],
         {"util.py": "def calc(x):\n    return x * x\n"}),
]  # fmt: skip


async def run_task(
    model: Model, task: Task, verbose: bool = False, check: bool = True
) -> tuple[bool, float, int, str]:
    root = Path(tempfile.mkdtemp(prefix=f"agentica-task-{task.name}-"))
    for name, text in task.files.items():
        (root / name).write_text(text)
    agent = Agent(
        model=model,
        tools=[WorkspaceTools(root), calculator],
        instructions=INSTRUCTIONS,
        model_settings=ModelSettings(max_tokens=768, temperature=0.0),
        limits=RunLimits(max_turns=10, max_wall_time=180),
        capabilities=[AnswerCheck()] if check else [],
    )
    start = time.perf_counter()
    note = ""
    try:
        response = await agent.run(task.prompt)
        if verbose:
            print(f"  answer: {response.content!r}")
    except AgenticaError as exc:
        note = type(exc).__name__
    if verbose:
        for record in agent.memory.runs:
            for c in record.tool_calls:
                print(f"  {c.status:7} {c.name}({c.arguments[:300]}) -> {c.content[:200]!r}")
    seconds = time.perf_counter() - start
    try:
        ok = await asyncio.to_thread(task.check, root)
    except Exception as exc:  # a check that crashes is a failed task
        ok, note = False, note or type(exc).__name__
    shutil.rmtree(root, ignore_errors=True)
    return ok, seconds, agent.usage.tool_calls, note


async def main_async(args: argparse.Namespace) -> None:
    local = LocalModel(args.model)
    await local.start()
    assert local.base_url is not None
    variants: dict[str, Model] = {"agentica": local, "plain": local}
    if "native" in args.variants:  # a second server with llama.cpp's own chat template (jinja)
        native = LocalModel(args.model, server_options={"use_jinja": True})
        await native.start()
        assert native.base_url is not None
        variants["native"] = OpenAILike(id=args.model, base_url=native.base_url + "/v1")
    results: dict[str, dict[str, tuple[bool, float, int, str]]] = {}
    for name in args.variants:
        model = variants[name]
        results[name] = {}
        for task in TASKS:
            if args.task and task.name not in args.task:
                continue
            outcome = await run_task(model, task, args.verbose, check=name == "agentica")
            results[name][task.name] = outcome
            print(f"{name:9} {task.name:14} {'ok ' if outcome[0] else 'FAIL'} "
                  f"{outcome[1]:5.1f} s {outcome[2]:2} calls {outcome[3]}", flush=True)  # fmt: skip
        await model.aclose()
    lines = [
        f"Model: {args.model}; {len(results[args.variants[0]])} tasks; temperature 0; at most "
        "10 model calls and 180 s per task.",
        "",
        "| task | " + " | ".join(args.variants) + " |",
        "|---|" + "---|" * len(args.variants),
    ]
    for task in TASKS:
        if task.name not in results[args.variants[0]]:
            continue
        cells = []
        for name in args.variants:
            ok, seconds, calls, note = results[name][task.name]
            cells.append(f"{'✓' if ok else '✗'} {seconds:.0f} s, {calls} calls {note}".strip())
        lines.append(f"| {task.name} | " + " | ".join(cells) + " |")
    totals = []
    for name in args.variants:
        solved = sum(r[0] for r in results[name].values())
        wall = sum(r[1] for r in results[name].values())
        totals.append(f"**{solved}/{len(results[name])}** ({wall:.0f} s)")
    lines.append("| **solved** | " + " | ".join(totals) + " |")
    markdown = "\n".join(lines)
    print(markdown)
    if args.write_docs:
        path = ROOT / "docs" / "benchmarks.md"
        text = path.read_text()
        block = (
            "<!-- tasks:start -->\n"
            "Command: `uv run python benchmarks/local_tasks.py --write-docs` · measured "
            f"{time.strftime('%Y-%m-%d')}\n\n{markdown}\n<!-- tasks:end -->"
        )
        if "<!-- tasks:start -->" in text:
            text = re.sub(r"<!-- tasks:start -->.*?<!-- tasks:end -->", block, text, flags=re.S)
        else:
            text += "\n" + block + "\n"
        path.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--variants", nargs="+", default=["agentica", "plain", "native"],
                        choices=["agentica", "plain", "native"])  # fmt: skip
    parser.add_argument("--task", nargs="*", help="run only these tasks")
    parser.add_argument("--verbose", action="store_true", help="print every tool call")
    parser.add_argument("--write-docs", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
