"""What a tool-call grammar costs the embedded model: ``uv run python benchmarks/tool_grammar.py``.

The same requests on one loaded ``LocalModel``, with its tool-call grammar on and off
(alternated, median of ``--repeat``; the prompt is cached, so the time is the reply's): output
tokens per second of

- a required call (``tool_choice="write_file"``: a module of ~150 tokens as a JSON string), under
  the grammar of that tool's call against the call's start written into the prompt;
- a free-text answer with the deep agent's tools offered (the lazy grammar is not triggered);
- a call the model starts by itself (the lazy grammar constrains it from ``{"name"`` on).

Also counts, per mode, the calls that did not parse or match their tool's schema. How often
calls were malformed in whole runs is in the task suite's tables (``benchmarks/local_tasks.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jsonschema  # noqa: E402

from agentica.messages import SystemMessage, ToolDefinition, UserMessage  # noqa: E402
from agentica.models import ModelRequest, ModelSettings  # noqa: E402
from agentica.models.local import LocalModel  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

SYSTEM = "You are a coding agent working in a workspace. Use the tools to do the user's task."
TOOLS = [
    ToolDefinition(
        name="write_file",
        description="Create or overwrite a file with the given text.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    ),
    ToolDefinition(
        name="read_file",
        description="Read a text file.",
        parameters={
            "type": "object",
            "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["path"],
        },
    ),
    ToolDefinition(
        name="run_python",
        description="Run Python code and return what it prints.",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    ),
]
CASES: dict[str, tuple[str, str | None]] = {
    "required call (write_file)": (
        "Create primes.py with a function is_prime(n) and a docstring, and a main block that "
        "prints the primes below 50.",
        "write_file",
    ),
    "free text, tools offered": ("In two sentences, what is a prime number?", None),
    "call started by the model": ("Run Python code that prints the sum of 1 to 100.", None),
}


def _malformed(calls: list[Any]) -> int:
    """Calls whose arguments are not JSON or do not match their tool's schema."""
    schemas = {t.name: t.parameters for t in TOOLS}
    bad = 0
    for call in calls:
        try:
            jsonschema.validate(json.loads(call.arguments), schemas[call.name])
        except (KeyError, ValueError, jsonschema.ValidationError):
            bad += 1
    return bad


async def one(model: LocalModel, prompt: str, choice: str | None) -> tuple[float, int, int]:
    """(output tokens per second, tokens, malformed calls) of one reply."""
    request = ModelRequest(
        messages=[SystemMessage(content=SYSTEM), UserMessage(content=prompt)],
        tools=TOOLS,
        settings=ModelSettings(max_tokens=400, temperature=0.0, tool_choice=choice),
    )
    start = time.perf_counter()
    response = await model.response(request)
    seconds = time.perf_counter() - start
    tokens = response.usage.output_tokens
    return tokens / seconds, tokens, _malformed(list(response.message.tool_calls))


async def bench(name: str, repeat: int) -> dict[str, dict[str, Any]]:
    model = LocalModel(name)
    await model.start()
    results: dict[str, dict[str, Any]] = {}
    try:
        for case, (prompt, choice) in CASES.items():
            rates: dict[bool, list[float]] = {True: [], False: []}
            tokens: dict[bool, int] = {}
            malformed = {True: 0, False: 0}
            for grammar in (False, True):  # warm the prompt cache for both
                model.tool_grammar = grammar
                await one(model, prompt, choice)
            for _ in range(repeat):
                for grammar in (False, True):
                    model.tool_grammar = grammar
                    rate, n, bad = await one(model, prompt, choice)
                    rates[grammar].append(rate)
                    tokens[grammar] = n
                    malformed[grammar] += bad
            results[case] = {
                "off": statistics.median(rates[False]),
                "on": statistics.median(rates[True]),
                "tokens_off": tokens[False],
                "tokens_on": tokens[True],
                "malformed_off": malformed[False],
                "malformed_on": malformed[True],
            }
            print(f"{case}: off {results[case]['off']:.1f} tok/s, on {results[case]['on']:.1f}")
    finally:
        await model.aclose()
    return results


def table(results: dict[str, dict[str, Any]], name: str, repeat: int) -> str:
    rows = [
        f"Model: {name}; output tokens per second of the reply (prompt cached), median of "
        f"{repeat}, temperature 0.",
        "",
        "| reply | grammar off | grammar on | ratio | tokens off / on | malformed off / on |",
        "|---|---|---|---|---|---|",
    ]
    for case, r in results.items():
        rows.append(
            f"| {case} | {r['off']:.1f} | {r['on']:.1f} | {r['on'] / r['off']:.2f} | "
            f"{r['tokens_off']} / {r['tokens_on']} | {r['malformed_off']} / {r['malformed_on']} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    results = asyncio.run(bench(args.model, args.repeat))
    markdown = table(results, args.model, args.repeat)
    print(markdown)
    if args.write_docs:
        command = "uv run python benchmarks/tool_grammar.py --write-docs"
        write_section("tool-grammar", command, markdown)


if __name__ == "__main__":
    main()
