"""Embedded-model benchmarks: ``uv run python benchmarks/local_model.py [--write-docs]``.

- generation tokens/s and time to first token through agentica's ``LocalModel`` versus posting
  the same prompt to llama.cpp's server directly (same process, same loaded model, alternated,
  median of ``--repeat``): the adapter's overhead;
- the main job (``agentica demo``'s task) run ``--demo-runs`` times at temperature 0 and
  ``--sampled-runs`` times sampled at ``--temperature`` (seed N for run N): success rate, wall
  time, what it used.
  Each run's stream is written to ``.bench-out/<demo|sampled>-run-N.log``, its messages to
  ``.bench-out/<demo|sampled>-run-N.json``.
- ``--as-user``: the same runs with the task as a user puts it (``USER_TASK``: no tool names, no
  steps), without the adapter measurement; ``--write-docs`` writes the ``local-user`` block.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from rich.console import Console  # noqa: E402

from agentica.cli.demo import USER_TASK, prepare_workspace, run_demo  # noqa: E402
from agentica.messages import TextDelta, UserMessage  # noqa: E402
from agentica.models import ModelRequest, ModelSettings  # noqa: E402
from agentica.models.chat_template import CHATML_STOP, render_chatml  # noqa: E402
from agentica.models.local import LocalModel  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

PROMPT = "Write a Python function that checks whether a number is prime, with a docstring."
TOKENS = 128
console = Console()


async def direct(session: aiohttp.ClientSession, base: str, stream: bool) -> tuple[float, float]:
    """(tokens/s, seconds to first token) posting to llama.cpp directly."""
    body = {
        "prompt": render_chatml([UserMessage(content=PROMPT)]),
        "max_tokens": TOKENS, "temperature": 0.0, "ignore_eos": True, "cache_prompt": False,
        "stop": list(CHATML_STOP), "stream": stream,
    }  # fmt: skip
    start = time.perf_counter()
    first = 0.0
    async with session.post(f"{base}/v1/completions", json=body) as resp:
        if not stream:
            data = await resp.json()
            return data["usage"]["completion_tokens"] / (time.perf_counter() - start), 0.0
        tokens = 0
        async for line in resp.content:
            if line.startswith(b"data: {"):
                chunk = json.loads(line[6:])
                if any(c.get("text") for c in chunk.get("choices", ())):
                    first = first or time.perf_counter() - start
                    tokens += 1
        return tokens / (time.perf_counter() - start), first


async def through_agentica(model: LocalModel, stream: bool) -> tuple[float, float]:
    request = ModelRequest(
        messages=[UserMessage(content=PROMPT)],
        settings=ModelSettings(
            max_tokens=TOKENS, temperature=0.0,
            extra_body={"ignore_eos": True, "cache_prompt": False},
        ),
    )  # fmt: skip
    start = time.perf_counter()
    if not stream:
        response = await model.response(request)
        return response.usage.output_tokens / (time.perf_counter() - start), 0.0
    first = 0.0
    tokens = 0
    async for event in model.response_stream(request):
        if isinstance(event, TextDelta):
            first = first or time.perf_counter() - start
            tokens += 1
    return tokens / (time.perf_counter() - start), first


async def bench_adapter(model: LocalModel, repeat: int) -> dict[str, Any]:
    base = await model.start()
    out: dict[str, list[float]] = {}
    async with aiohttp.ClientSession() as session:
        await direct(session, base, False)  # warm up
        for _ in range(repeat):
            for stream in (False, True):
                kind = "stream" if stream else "json"
                rate, ttft = await direct(session, base, stream)
                out.setdefault(f"direct/{kind}/tps", []).append(rate)
                if stream:
                    out.setdefault("direct/ttft", []).append(ttft)
                rate, ttft = await through_agentica(model, stream)
                out.setdefault(f"agentica/{kind}/tps", []).append(rate)
                if stream:
                    out.setdefault("agentica/ttft", []).append(ttft)
                console.print(f"  {kind}: direct {out[f'direct/{kind}/tps'][-1]:.1f} tok/s, "
                              f"agentica {out[f'agentica/{kind}/tps'][-1]:.1f} tok/s")  # fmt: skip
    await model.aclose()
    return {key: statistics.median(values) for key, values in out.items()}


async def bench_demo(
    model: LocalModel,
    runs: int,
    deep: bool = True,
    temperature: float = 0.0,
    prefix: str = "demo",
    task: str | None = None,
    first_seed: int = 1,
) -> dict[str, Any]:
    """``runs`` demo runs; above temperature 0, run N samples with seed N (so runs differ),
    counting from ``first_seed``."""
    walls, successes, first_try = [], 0, 0
    used: dict[str, int] = {"task": 0, "edit_file": 0, "read_file": 0, "write_todos": 0}
    closed = 0  # runs whose todo list ended with every step completed
    logs = ROOT / ".bench-out"
    logs.mkdir(exist_ok=True)
    for number in range(first_seed - 1, first_seed - 1 + runs):
        root = prepare_workspace(tempfile.mkdtemp(prefix="agentica-bench-demo-"), deep=deep)
        start = time.perf_counter()
        # each run's stream goes to a log, to read why a run failed
        sampled = ModelSettings(temperature=temperature, seed=number + 1) if temperature else None
        with (logs / f"{prefix}-run-{number + 1}.log").open("w") as log:
            result = await run_demo(
                model, root, Console(file=log, width=120), deep=deep, settings=sampled, task=task,
                transcript=logs / f"{prefix}-run-{number + 1}.json",
            )  # fmt: skip
        walls.append(time.perf_counter() - start)
        ok = result is not None and result.problem is None
        first_try += ok and len(result.responses) == 1 if result is not None else 0
        successes += ok
        if result is not None:
            names = {
                c.name for r in result.responses for c in r.tool_calls if c.status == "success"
            }
            for name in used:
                used[name] += name in names
            todos = result.todos
            closed += bool(todos) and all(t.get("status") == "completed" for t in todos)
        console.print(
            f"  {prefix} run {number + 1}: {'ok' if ok else 'FAILED'} in {walls[-1]:.1f} s "
            f"(log: .bench-out/{prefix}-run-{number + 1}.log)"
        )
        shutil.rmtree(root, ignore_errors=True)
    return {
        f"{prefix}/runs": runs, f"{prefix}/successes": successes, f"{prefix}/first_try": first_try,
        f"{prefix}/wall_median_s": statistics.median(walls), f"{prefix}/wall_max_s": max(walls),
        f"{prefix}/deep": deep, f"{prefix}/todos_closed": closed,
        f"{prefix}/temperature": temperature,
        **{f"{prefix}/used/{name}": count for name, count in used.items()},
    }  # fmt: skip


def table(r: dict[str, Any], model: LocalModel) -> str:
    lines = [
        f"Model: {model.id} (Q4_K_M), n_ctx {model.n_ctx}, {model.threads} threads, "
        f"loaded in {model.load_seconds or 0:.1f} s; {TOKENS} generated tokens per request.",
    ]
    if "direct/json/tps" in r:
        lines += adapter_rows(r)
    demos = [prefix for prefix in ("demo", "sampled") if f"{prefix}/runs" in r]
    if demos:
        lines += demo_rows(r, demos, as_user=bool(r.get("as_user")))
    return "\n".join(lines)


def adapter_rows(r: dict[str, Any]) -> list[str]:
    overhead_json = 1 - r["agentica/json/tps"] / r["direct/json/tps"]
    overhead_stream = 1 - r["agentica/stream/tps"] / r["direct/stream/tps"]
    return [
        "",
        "| | llama.cpp directly | through agentica | adapter cost |",
        "|---|---|---|---|",
        f"| generation, JSON (tokens/s) | {r['direct/json/tps']:.1f} | "
        f"{r['agentica/json/tps']:.1f} | {overhead_json:+.1%} |",
        f"| generation, streamed (tokens/s) | {r['direct/stream/tps']:.1f} | "
        f"{r['agentica/stream/tps']:.1f} | {overhead_stream:+.1%} |",
        f"| time to first token, streamed (s) | {r['direct/ttft']:.2f} | "
        f"{r['agentica/ttft']:.2f} | |",
    ]


def demo_rows(r: dict[str, Any], demos: list[str], *, as_user: bool) -> list[str]:
    deep = r[f"{demos[0]}/deep"]
    flags = ("" if deep else " --simple") + (" --as-user" if as_user else "")
    asked = f' ("{USER_TASK}")' if as_user else ""
    lines = [
        "",
        f"Main job (`agentica demo{flags}`{asked}), model already loaded. "
        "At temperature 0 the runs are deterministic on an idle machine, so the same task "
        "is also sampled at a higher temperature with seeds 1, 2, ... (runs differ):",
        "",
        "| sampling | runs ok | ok without a follow-up | wall median / max (s) |"
        + (
            " planned with todos | all todos completed | delegated (`task`) | "
            "edited (`edit_file`) | read back |"
            if deep
            else ""
        ),
        "|---|---|---|---|" + ("---|---|---|---|---|" if deep else ""),
    ]
    for prefix in demos:
        v = {k.removeprefix(f"{prefix}/"): x for k, x in r.items() if k.startswith(prefix)}
        sampling = f"temperature {v['temperature']:g}" + (", seeds" if v["temperature"] else "")
        row = (
            f"| {sampling} | {v['successes']}/{v['runs']} | {v['first_try']} | "
            f"{v['wall_median_s']:.1f} / {v['wall_max_s']:.1f} |"
        )
        if deep:
            row += (
                f" {v['used/write_todos']} | {v['todos_closed']} | {v['used/task']} | "
                f"{v['used/edit_file']} | {v['used/read_file']} |"
            )
        lines.append(row)
    return lines


async def main_async(args: argparse.Namespace) -> None:
    model = LocalModel(args.model)
    console.print(f"loading {model.id} ...")
    await model.start()
    task = USER_TASK if args.as_user else None
    # the adapter's cost does not depend on the task: --as-user measures the main job only
    results: dict[str, Any] = {"as_user": True} if args.as_user else {}
    if not args.as_user:
        results |= await bench_adapter(model, args.repeat)
    if args.demo_runs:
        results |= await bench_demo(model, args.demo_runs, deep=not args.simple, task=task)
    if args.sampled_runs and args.temperature:
        results |= await bench_demo(
            model, args.sampled_runs, deep=not args.simple, temperature=args.temperature,
            prefix="sampled", task=task, first_seed=args.first_seed,
        )  # fmt: skip
    markdown = table(results, model)
    print(markdown)
    (ROOT / ".bench-out").mkdir(exist_ok=True)
    name = "local-user" if args.as_user else "local"
    (ROOT / ".bench-out" / f"{name}.json").write_text(json.dumps(results, indent=2))
    if args.write_docs:
        flags = (" --simple" if args.simple else "") + (" --as-user" if args.as_user else "")
        command = f"uv run python benchmarks/local_model.py{flags} --write-docs"
        write_section(name, command, markdown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--demo-runs", type=int, default=5)
    parser.add_argument("--simple", action="store_true", help="the demo with --simple")
    parser.add_argument(
        "--temperature", type=float, default=0.3,
        help="also sample demo runs at this temperature, seed N for run N (0: do not)",
    )  # fmt: skip
    parser.add_argument("--sampled-runs", type=int, default=10, help="how many sampled runs")
    parser.add_argument(
        "--first-seed", type=int, default=1, help="the seed of the first sampled run (to redo some)"
    )
    parser.add_argument(
        "--as-user", action="store_true",
        help="the task as a user puts it (agentica demo --as-user); the main job only",
    )  # fmt: skip
    parser.add_argument("--write-docs", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
