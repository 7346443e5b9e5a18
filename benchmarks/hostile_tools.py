"""Hostile probe: tools that raise anything, malformed text calls, eviction notes.
``uv run python benchmarks/hostile_tools.py``

All on the real run loop with scripted models (``agentica.testing``), offline:

- tool-exceptions: a tool raises every kind of ``BaseException`` that is not Ctrl-C (``SystemExit``
  as ``sys.exit`` and argparse raise it, its own ``CancelledError``, ``GeneratorExit``, custom
  ``BaseException`` subclasses, exception groups, ``StopIteration`` and ``StopAsyncIteration``),
  as an async tool, a blocking tool (thread pool) and an async tool returning an awaitable,
  alone and beside an async and a blocking sibling. A failure: the run did not complete, a
  sibling's result was lost or marked an error, the raising call's result was not an error
  (``null``), or the run hung.
- run-cancellation: the run's task is cancelled from outside while its tools run (and re-raise
  the ``CancelledError``, or turn it into ``SystemExit``); a failure: the run did not end
  cancelled. And ``KeyboardInterrupt`` from a tool (in a subprocess): a failure is a program that
  did not stop.
- fenced-malformed-calls: a corpus of tool calls written as text with stray or missing brackets,
  bad quotes, wrong keys, Python literals, unknown tools..., each bare, with prose, fenced (with
  and without a language), in ``<tool_call>`` tags and in an unclosed fence, parsed whole and
  streamed in pieces. A failure: the reply names a tool in a call and yet gives no call and no
  malformed call (the run would end with it as the final answer), or the stream and the whole
  text disagree.
- eviction-notes: a deep agent evicts results of 5-300 KB with stores capped at 1-50 results
  and 10-200 KB; after each evicted result the model reads every path its note gives with the
  real ``read_file``. A failure: a note names a path that cannot be read then, or says nothing
  of a result it did not save.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, ContextPolicy, RunCancelled, tool  # noqa: E402
from agentica.deep import DeepAgent  # noqa: E402
from agentica.messages import Message, ToolMessage  # noqa: E402
from agentica.models.base import ModelRequest  # noqa: E402
from agentica.models.toolparse import (  # noqa: E402
    ToolCallStreamSplitter,
    as_tool_calls,
    parse_tool_calls,
)
from agentica.testing import FunctionModel, ScriptedModel, call, tool_calls  # noqa: E402

# ---- tool-exceptions -------------------------------------------------------------------------


class Custom(BaseException):
    pass


class CustomExit(SystemExit):
    pass


HANG = 5.0  # seconds after which a run that should take milliseconds counts as hung
RAISED: dict[str, Callable[[], BaseException]] = {
    "SystemExit()": SystemExit,
    "SystemExit(0)": lambda: SystemExit(0),
    "SystemExit(2) (argparse)": lambda: SystemExit(2),
    "SystemExit('msg')": lambda: SystemExit("fatal: bad input"),
    "SystemExit subclass": lambda: CustomExit(1),
    "CancelledError()": asyncio.CancelledError,
    "CancelledError('msg')": lambda: asyncio.CancelledError("gave up"),
    "GeneratorExit": GeneratorExit,
    "custom BaseException": lambda: Custom("odd"),
    "BaseExceptionGroup": lambda: BaseExceptionGroup("many", [SystemExit(1), ValueError("x")]),
    "ExceptionGroup": lambda: ExceptionGroup("many", [ValueError("x")]),
    "StopIteration": StopIteration,
    "StopAsyncIteration": StopAsyncIteration,
}


def _tools(make: Callable[[], BaseException]) -> dict[str, Any]:
    @tool
    async def raise_async() -> str:
        await asyncio.sleep(0.001)
        raise make()

    @tool
    def raise_blocking() -> str:
        raise make()

    async def failing() -> str:
        await asyncio.sleep(0.001)
        raise make()

    @tool
    def raise_awaitable() -> Any:
        return failing()  # a def tool that returns a coroutine: awaited by the engine

    @tool
    async def sibling_async() -> str:
        await asyncio.sleep(0.01)
        return "sibling ok"

    @tool
    def sibling_blocking() -> str:
        return "sibling ok"

    return {t.name: t for t in (raise_async, raise_blocking, raise_awaitable)} | {
        "siblings": [sibling_async, sibling_blocking]
    }


async def _one_exception_run(make: Callable[[], BaseException], mode: str, siblings: bool) -> str:
    """'' if the run held, else what went wrong."""
    tools = _tools(make)
    names = [mode, *(["sibling_async", "sibling_blocking"] if siblings else [])]
    model = ScriptedModel([tool_calls(*names), "done"])
    agent = Agent(model=model, tools=[tools[mode], *tools["siblings"]])
    try:
        async with asyncio.timeout(HANG):
            response = await agent.run("go")
    except TimeoutError:
        return f"hung for {HANG:g} s"
    except BaseException as exc:  # what the probe looks for: anything escaping the run
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"run aborted: {type(exc).__name__}"
    if response.content != "done":
        return f"run ended with {response.content!r}"
    results = [m for m in model.requests[-1].messages if isinstance(m, ToolMessage)]
    if len(results) != len(names):
        return "a result is missing"
    first, *rest = results
    if not first.is_error or first.content == "null":
        return f"the raising call's result: {first.content[:60]!r}"
    if any(m.is_error or m.content != "sibling ok" for m in rest):
        return "a sibling was lost"
    return ""


def _exception_attempts() -> tuple[int, list[str]]:
    failures: list[str] = []
    attempts = 0
    for (kind, make), mode, siblings in itertools.product(
        RAISED.items(), ("raise_async", "raise_blocking", "raise_awaitable"), (False, True)
    ):
        attempts += 1
        try:
            problem = asyncio.run(_one_exception_run(make, mode, siblings))
        except BaseException as exc:  # escaped even asyncio.run (the event loop died)
            if isinstance(exc, KeyboardInterrupt):
                raise
            problem = f"event loop died: {type(exc).__name__}"
        if problem:
            failures.append(f"{kind} / {mode} / siblings={siblings}: {problem}")
    return attempts, failures


async def _cancelled_run(blocking: bool, convert: bool) -> bool:
    """Whether cancelling the run's task from outside ended it cancelled."""

    @tool
    async def slow_async() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            if convert:
                raise SystemExit(1) from None
            raise
        return "never"

    @tool
    def slow_blocking() -> str:
        import time

        time.sleep(0.2)
        return "late"

    name = "slow_blocking" if blocking else "slow_async"
    agent = Agent(
        model=ScriptedModel([tool_calls(name, "slow_async"), "never"]),
        tools=[slow_async, slow_blocking],
    )
    task = asyncio.create_task(agent.run("go"))
    await asyncio.sleep(0.05)
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, RunCancelled):
        return True
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt):
            raise
        return False
    return False


INTERRUPTED = textwrap.dedent(
    """
    import asyncio
    from agentica import Agent, tool
    from agentica.testing import ScriptedModel, tool_calls

    @tool
    def stop_blocking() -> str:
        raise KeyboardInterrupt

    @tool
    async def stop_async() -> str:
        raise KeyboardInterrupt

    model = ScriptedModel([tool_calls({name!r}), "done"])
    print(asyncio.run(Agent(model=model, tools=[stop_blocking, stop_async]).run("go")).content)
    """
)


def _cancellation_attempts() -> tuple[int, list[str]]:
    failures: list[str] = []
    attempts = 0
    for blocking, convert in itertools.product((False, True), (False, True)):
        attempts += 1
        try:
            cancelled = asyncio.run(_cancelled_run(blocking, convert))
        except BaseException as exc:  # escaped even asyncio.run (the event loop died)
            if isinstance(exc, KeyboardInterrupt):
                raise
            cancelled = False
        if not cancelled:
            failures.append(f"cancel (blocking={blocking}, SystemExit={convert}) not cancelled")
    for name in ("stop_blocking", "stop_async"):
        attempts += 1
        done = subprocess.run(
            [sys.executable, "-c", INTERRUPTED.format(name=name)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=ROOT,
        )
        if done.returncode == 0 or "KeyboardInterrupt" not in done.stderr:
            failures.append(f"KeyboardInterrupt from {name} did not stop the program")
    return attempts, failures


# ---- fenced-malformed-calls ------------------------------------------------------------------

CALL = '{"name": "add", "arguments": {"a": 1, "b": 2}}'
BODIES: dict[str, str] = {
    "stray }": CALL + "}",
    "stray }}": CALL + "}}",
    "stray }}}": CALL + "}}}",
    "stray ]": CALL + "]",
    "stray }]": CALL + "}]",
    "stray } after a space": CALL + " }",
    "stray } on the next line": CALL + "\n}",
    "leading {": "{" + CALL,
    "doubled braces": "{" + CALL + "}",
    "leading [": "[" + CALL,
    "missing }": CALL[:-1],
    "missing }}": CALL[:-2],
    "] for }": CALL[:-2] + "]}",
    "list closed with }": "[" + CALL + "}",
    "list with a stray }": "[" + CALL + "}]",
    "list with a stray ]": "[" + CALL + "]]",
    "unclosed string": '{"name": "add", "arguments": {"a": "1, "b": 2}}',
    "missing comma": '{"name": "add" "arguments": {"a": 1, "b": 2}}',
    "missing colon": '{"name" "add", "arguments": {"a": 1, "b": 2}}',
    "missing value": '{"name": "add", "arguments": {"a": 1, "b": }}',
    "trailing comma and stray }": '{"name": "add", "arguments": {"a": 1, "b": 2,}}}',
    "single quotes and stray }": "{'name': 'add', 'arguments': {'a': 1, 'b': 2}}}",
    "Python True and stray }": '{"name": "add", "arguments": {"a": 1, "b": True}}}',
    "arguments as a string, stray }": '{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}}',
    "parameters key, stray }": '{"name": "add", "parameters": {"a": 1, "b": 2}}}',
    "function wrapper, stray }": (
        '{"type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 2}}}}'
    ),
    "two calls, one stray }": CALL + "}\n" + CALL,
    "comment and stray }": CALL + " // add them\n}",
    "function form, stray }": 'add({"a": 1, "b": 2}})',
    "function form, stray )": 'add({"a": 1, "b": 2}))',
    "unknown tool, stray }": '{"name": "sum", "arguments": {"a": 1, "b": 2}}}',
    "garbage key": '{"name": "add", "arguments": {"a": 1, "b": 2}, x}',
    "stray quote": CALL + '"',
    "raw newline in a string, stray }": '{"name": "add", "arguments": {"a": "1\n", "b": 2}}}',
    "cut off": '{"name": "add", "arguments": {"a": 1, "b": ',
    "unquoted keys": '{name: "add", arguments: {"a": 1, "b": 2}}',
    "unquoted keys everywhere": "{name: 'add', arguments: {a: 1, b: 2}}",
    "unquoted keys, bare value": '{name: "add", arguments: {a: 1, b: two}}',
    "function form, unquoted keys": "add({a: 1, b: 2})",
}
WRAPS: dict[str, str] = {
    "bare": "{}",
    "prose, bare": "Let me add them.\n{}",
    "fenced json": "```json\n{}\n```",
    "fenced": "```\n{}\n```",
    "fenced tool_call": "```tool_call\n{}\n```",
    "prose, fenced, prose": "Let me add them.\n```json\n{}\n```\nDone.",
    "tags": "<tool_call>\n{}\n</tool_call>",
    "unclosed fence": "```json\n{}",
}


def _outcome(text: str, streamed: bool) -> str:
    if streamed:
        splitter = ToolCallStreamSplitter(["add"])
        for at in range(0, len(text), 3):
            splitter.feed(text[at : at + 3])
        parsed = splitter.finish()
    else:
        parsed = parse_tool_calls(text, ["add"])
    if not as_tool_calls(parsed):
        return "answer"
    return "call" if parsed.calls and not parsed.malformed else "malformed"


def _malformed_attempts() -> tuple[int, list[str]]:
    failures: list[str] = []
    attempts = 0
    for (body_name, body), (wrap_name, wrap) in itertools.product(BODIES.items(), WRAPS.items()):
        head, tail = wrap.split("{}")
        text = head + body + tail
        attempts += 1
        whole, streamed = _outcome(text, False), _outcome(text, True)
        if whole == "answer" or streamed != whole:
            failures.append(f"{body_name} / {wrap_name}: {whole} (streamed: {streamed})")
    return attempts, failures


# ---- eviction-notes --------------------------------------------------------------------------


@tool
def dump(n: int, size: int) -> str:
    """Return report n, size characters long.

    Args:
        n: which report.
        size: its length.
    """
    line = f"report {n}: " + "lorem ipsum dolor sit amet " * 3
    return (line * (size // len(line) + 1))[:size]


SAVED = re.compile(r"was saved to (/\.results/[^\s;]+);")


async def _eviction_scenario(sizes: list[int], max_files: int, max_bytes: int) -> list[str]:
    """Problems seen: notes naming unreadable paths, or silent about a result not saved."""
    problems: list[str] = []
    made = 0

    def reply(messages: list[Message], request: ModelRequest) -> Any:
        nonlocal made
        results = [m for m in messages if isinstance(m, ToolMessage)]
        last = results[-1] if results else None
        if last is not None and last.name == "read_file":
            if last.is_error or "report" not in last.content:
                problems.append(f"reading a saved result failed: {last.content[:80]!r}")
        elif last is not None and last.name == "dump" and "characters omitted" in last.content:
            paths = SAVED.findall(last.content)
            if paths:
                return tool_calls(call("read_file", path=paths[0], limit=1))
            if "/.results/" in last.content or "not saved" not in last.content:
                problems.append("an unsaved result's note does not say so")
        if made == len(sizes):
            return "done"
        made += 1
        return tool_calls(call("dump", n=made, size=sizes[made - 1]))

    policy = ContextPolicy(evict_tokens=1_000, max_evicted=max_files, max_evicted_bytes=max_bytes)
    agent = DeepAgent(
        model=FunctionModel(reply, context_window=2_000_000),
        tools=[dump],
        subagents=False,
        answer_check=False,
        context=policy,
    )
    await agent.run("dump the reports")
    return problems


def _eviction_attempts() -> tuple[int, list[str], int]:
    rng = random.Random(16)
    failures: list[str] = []
    attempts = over = 0
    for max_files, max_bytes in itertools.product((1, 3, 50), (10_000, 50_000, 200_000)):
        sizes = [rng.choice((5_000, 9_000, 20_000, 60_000, 150_000, 300_000)) for _ in range(8)]
        attempts += len(sizes)
        over += sum(size > max_bytes for size in sizes)
        problems = asyncio.run(_eviction_scenario(sizes, max_files, max_bytes))
        failures += [f"cap {max_files} / {max_bytes} B: {p}" for p in problems]
    return attempts, failures, over


# ---- the rows --------------------------------------------------------------------------------


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    attempts, failures = _exception_attempts()
    rows.append(
        {
            "family": "tool-exceptions",
            "attempts": attempts,
            "failures": len(failures),
            "what": f"{len(RAISED)} BaseException kinds (SystemExit, a tool's own "
            "CancelledError, GeneratorExit, custom, groups, StopIteration...) raised by async, "
            "blocking and awaitable-returning tools, alone and beside 2 siblings; failure = run "
            "aborted or hung, sibling lost or the call's result not an error",
            "details": failures,
        }
    )
    attempts, failures = _cancellation_attempts()
    rows.append(
        {
            "family": "run-cancellation",
            "attempts": attempts,
            "failures": len(failures),
            "what": "the run's task cancelled from outside while tools run (re-raising, or "
            "turning the cancellation into SystemExit), and KeyboardInterrupt from a tool; "
            "failure = run not cancelled / program not stopped",
            "details": failures,
        }
    )
    attempts, failures = _malformed_attempts()
    rows.append(
        {
            "family": "fenced-malformed-calls",
            "attempts": attempts,
            "failures": len(failures),
            "what": f"{len(BODIES)} malformed text calls (stray/missing brackets, quotes, keys, "
            f"unknown tool...) x {len(WRAPS)} wrappings (bare, fenced, tags...), parsed and "
            "streamed; failure = no call and no malformed call (the final answer) or stream and "
            "whole text disagree",
            "details": failures,
        }
    )
    attempts, failures, over = _eviction_attempts()
    rows.append(
        {
            "family": "eviction-notes",
            "attempts": attempts,
            "failures": len(failures),
            "what": f"evicted results of 5-300 KB ({over} over the store's byte cap), stores "
            "capped at 1-50 results and 10-200 KB, each note's path read with read_file; "
            "failure = a path that cannot be read or a note silent about not saving",
            "details": failures,
        }
    )
    return rows


if __name__ == "__main__":
    for row in run():
        details = row.pop("details")
        print(row)
        for line in details:
            print("   ", line)
