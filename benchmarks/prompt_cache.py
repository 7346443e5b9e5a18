"""Where per-turn context goes: ``uv run python benchmarks/prompt_cache.py [--write-docs]``.

A deep agent's conversation (its instructions and tool schemas, a task, eight tool turns with
results) is sent to the embedded model five times, each time with the todo list one step
further on. The todo list is a per-turn slot: agentica sends it at the end of the request; before
this change it sat right after the instructions. Measured: wall time per request and the prompt
tokens llama.cpp took from its KV cache, for both placements, in the same process. The first
request of each placement starts cold (another prompt is in the cache) and is reported apart.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.deep import HARNESS_INSTRUCTIONS, DeepAgent  # noqa: E402
from agentica.messages import (  # noqa: E402
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agentica.models.base import ModelRequest, ModelSettings, ToolDefinition  # noqa: E402
from agentica.models.local import LocalModel  # noqa: E402
from agentica.testing import ScriptedModel  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

STEPS = ["read the data", "compute totals", "edit report", "check report", "summarise"]
REQUESTS = 5


def conversation() -> tuple[SystemMessage, list[Message], list[ToolDefinition]]:
    agent = DeepAgent(model=ScriptedModel([]), workspace=tempfile.mkdtemp())
    tools = [f.definition for f in agent.functions.values()]
    system = SystemMessage(content=HARNESS_INSTRUCTIONS)
    messages: list[Message] = [UserMessage(content="Fill in report.md from sales.csv.")]
    for turn in range(8):
        call = ToolCall(id=f"c{turn}", name="read_file", arguments=f'{{"path": "part{turn}.csv"}}')
        rows = "\n".join(
            f"{i},region{i % 3},{i * 7 % 100}" for i in range(turn * 20, turn * 20 + 20)
        )
        messages += [
            AssistantMessage(tool_calls=[call]),
            ToolMessage(tool_call_id=call.id, name="read_file", content=rows),
        ]
    return system, messages, tools


def slot(done: int) -> SystemMessage:
    marks = ["[x]" if i < done else "[ ]" for i in range(len(STEPS))]
    return SystemMessage(
        content="Todos: " + "  ".join(f"{m} {s}" for m, s in zip(marks, STEPS, strict=True))
    )


async def measure(model: LocalModel, placement: str) -> list[tuple[float, int, int]]:
    system, messages, tools = conversation()
    settings = ModelSettings(max_tokens=4, temperature=0)
    out = []
    for done in range(REQUESTS):
        if placement == "end":
            request = [system, *messages, slot(done)]
        else:
            request = [system, slot(done), *messages]
        began = time.perf_counter()
        response = await model.response(
            ModelRequest(messages=request, tools=tools, settings=settings)
        )
        usage = response.usage
        out.append((time.perf_counter() - began, usage.input_tokens, usage.cache_read_tokens))
        print(f"  {placement} #{done + 1}: {out[-1][0]:.2f} s, {usage.input_tokens} tokens, "
              f"{usage.cache_read_tokens} from the cache")  # fmt: skip
        messages = [*messages, UserMessage(content=f"Step {done + 1} done.")]
    return out


def table(results: dict[str, list[tuple[float, int, int]]], model: LocalModel) -> str:
    lines = [
        f"Model: {model.id}, n_ctx {model.n_ctx}, {model.threads} threads. A deep agent's "
        f"conversation of ~{results['end'][-1][1]:,} tokens (instructions, tool schemas, 8 tool "
        f"turns); {REQUESTS} requests, the todo slot one step further each time.",
        "",
        "| todo slot | first request (s) | later requests, median (s) | "
        "prompt tokens from the KV cache, later requests |",
        "|---|---|---|---|",
    ]
    names = {"end": "at the end (agentica)", "front": "after the instructions (before)"}
    for placement, rows in results.items():
        later = rows[1:]
        cached = sum(r[2] for r in later) / max(sum(r[1] for r in later), 1)
        lines.append(
            f"| {names[placement]} | {rows[0][0]:.1f} | "
            f"{statistics.median(r[0] for r in later):.2f} | {cached:.0%} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    model = LocalModel(args.model)
    await model.start()
    try:
        results = {p: await measure(model, p) for p in ("front", "end")}
    finally:
        await model.aclose()
    results = {"end": results["end"], "front": results["front"]}
    markdown = table(results, model)
    print(markdown)
    if args.write_docs:
        write_section(
            "prompt-cache",
            "uv run python benchmarks/prompt_cache.py --write-docs",
            markdown,
            heading="Prompt cache: where per-turn context goes",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--write-docs", action="store_true")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
