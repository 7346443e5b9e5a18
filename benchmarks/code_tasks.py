"""``agentica code -p`` on the local task suite: ``uv run python benchmarks/code_tasks.py``.

Each task of ``benchmarks/local_task_data.py`` (phrased as a newcomer types it) runs as a user
runs it: a fresh folder with the task's files, then ``agentica code FOLDER -p PROMPT --output json
--approval full-auto`` in a subprocess (the embedded model by default: ``--model`` for another;
``--temperature`` 0), and the task's checker on the folder and the printed answer. The run's
calls and conversation come from the session the command stored. ``--scripted`` replaces the
model by a scripted OpenAI-compatible server on 127.0.0.1 that performs each task's reference
solution through the CLI's own tools (read the files it changes, write them, answer): it checks
the mechanics (tools, approvals, stdout, exit codes), so every task must pass.
``--transcripts DIR`` saves one JSON file per run in ``local_tasks.py``'s format (``local_tasks.py
--report`` puts them beside its variants); ``--write-docs`` replaces the ``code-tasks`` block of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.messages import AssistantMessage, ToolCall  # noqa: E402
from agentica.storage import open_storage  # noqa: E402
from agentica.testing import FakeOpenAIServer  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402
from benchmarks.local_task_data import KINDS, TASKS, Task  # noqa: E402
from benchmarks.local_tasks import (  # noqa: E402
    MALFORMED,
    Outcome,
    _snapshot,
    _text,
    _write_transcript,
    report,
)


def reference_plan(task: Task) -> tuple[list[tuple[str, dict[str, str]]], str]:
    """The calls that do ``task`` as its reference solution does (read each file it changes,
    then write it), and the answer."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        task.setup(root)
        before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        answer = task.solve(root)
        after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
        calls: list[tuple[str, dict[str, str]]] = []
        for path, data in sorted(after.items()):
            if "__pycache__" in path.parts or before.get(path) == data:
                continue
            name = str(path.relative_to(root))
            if path in before:
                calls.append(("read_file", {"path": name}))
            calls.append(("write_file", {"path": name, "content": data.decode()}))
    return calls, answer or "Done."


def scripted_responder(tasks: list[Task]) -> Any:
    """Reply to each task's conversation with the next call of its reference plan, then its
    answer (to any later request too: a check that sends the answer back gets it again)."""
    plans = {task.prompt: reference_plan(task) for task in tasks}

    def responder(body: dict[str, Any]) -> Any:
        messages = body["messages"]
        prompt = next(str(m["content"]) for m in messages if m["role"] == "user")
        calls, answer = next(plan for key, plan in plans.items() if key in prompt)
        done = sum(len(m.get("tool_calls") or []) for m in messages if m["role"] == "assistant")
        if done < len(calls):
            name, arguments = calls[done]
            call = ToolCall(id=f"call_{done}", name=name, arguments=json.dumps(arguments))
            return AssistantMessage(tool_calls=[call])
        return answer

    return responder


async def run_task(task: Task, args: argparse.Namespace, base_url: str | None) -> Outcome:
    """Run ``agentica code -p`` on ``task`` in a fresh folder and check the folder."""
    work = Path(tempfile.mkdtemp(prefix=f"agentica-code-{task.name}-"))
    root = work / "project"
    root.mkdir()
    task.setup(root)
    command = [sys.executable, "-m", "agentica.cli.main", "code", str(root), "-p", task.prompt,
               "--output", "json", "--approval", "full-auto", "--sandbox", args.sandbox,
               "--storage", str(work / "sessions.db"),
               "--temperature", str(args.temperature)]  # fmt: skip
    if base_url:
        command += ["--model", "scripted", "--base-url", base_url]
    elif args.model:
        command += ["--model", args.model]
    env = {**os.environ, "AGENTICA_HOME": str(work / "home"), "AGENTICA_API_KEY": "k"}
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await process.communicate()
    seconds = time.perf_counter() - start
    try:
        result = json.loads(out.decode() or "{}")
    except ValueError:
        result = {}
    answer = str(result.get("result") or "")
    error = (
        ""
        if process.returncode == 0
        else str(result.get("error", "")).split(":")[0] or (f"exit {process.returncode}")
    )
    calls, messages, tokens = await _session(work / "sessions.db", root, result.get("session_id"))
    try:
        ok = await asyncio.to_thread(task.check, root, answer)
    except Exception as exc:  # a checker that crashes is a failed task
        ok, error = False, error or f"check {type(exc).__name__}"
    malformed = sum(c["status"] == "error" and c["content"].startswith(MALFORMED) for c in calls)
    outcome = Outcome(
        "code scripted" if base_url else "code", task.name, task.kind, 0, ok, seconds,
        len(calls), malformed, error, answer, calls,
        "" if process.returncode == 0 else err.decode(errors="replace")[-2000:],
        _snapshot(root), messages, tokens,
    )  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return outcome


async def _session(
    database: Path, root: Path, session_id: str | None
) -> tuple[list[dict[str, str]], list[dict[str, str]], int]:
    """The calls, the abridged conversation and the output tokens the run stored."""
    if not session_id or not await asyncio.to_thread(database.exists):
        return [], [], 0
    from agentica.cli.code_session import folder_user

    storage = open_storage(str(database))
    try:
        user = folder_user(await asyncio.to_thread(root.resolve))
        data = await storage.load_session(user, session_id)
    finally:
        await storage.aclose()
    if data is None:
        return [], [], 0
    calls = [
        {"name": c.name, "arguments": c.arguments, "status": c.status, "content": c.content[:2000]}
        for record in data.runs
        for c in record.tool_calls
    ]
    messages = [
        {"role": m.role, "text": _text(m)[:1500],
         "calls": " ".join(f"{c.name}({c.arguments[:300]})" for c in getattr(m, "tool_calls", ()))}
        for record in data.runs
        for m in record.messages
    ]  # fmt: skip
    return calls, messages, sum(r.usage.output_tokens for r in data.runs)


async def main_async(args: argparse.Namespace) -> None:
    tasks = [t for t in TASKS if (not args.task or t.name in args.task)]
    tasks = [t for t in tasks if (not args.kind or t.kind in args.kind)]
    outcomes: list[Outcome] = []
    server = FakeOpenAIServer(scripted_responder(tasks)) if args.scripted else None
    if server is not None:
        await server.start()
    try:
        for number, task in enumerate(tasks, 1):
            outcome = await run_task(task, args, server.base_url if server else None)
            outcomes.append(outcome)
            mark = "✓" if outcome.ok else "✗"
            print(f"[{number}/{len(tasks)}] {mark} {task.name} {outcome.seconds:.0f} s "
                  f"{outcome.calls} calls {outcome.error}", flush=True)  # fmt: skip
            if args.transcripts:
                _write_transcript(Path(args.transcripts), outcome, task)
    finally:
        if server is not None:
            await server.stop()
    variant = outcomes[0].variant if outcomes else "code"
    model = (
        "a scripted model (reference solutions)"
        if args.scripted
        else (args.model or "the embedded model (default)")
    )
    header = (f"`agentica code -p` on {len(tasks)} tasks, {model}, temperature "
              f"{args.temperature}, approval full-auto, sandbox {args.sandbox}:")  # fmt: skip
    markdown = report(outcomes, [variant], header)
    print(markdown)
    if args.write_docs:
        command = "uv run python " + " ".join(["benchmarks/code_tasks.py", *sys.argv[1:]])
        write_section(args.block, command, markdown, heading="agentica code")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", help="a model string (default: the embedded model)")
    parser.add_argument("--scripted", action="store_true", help="reference solutions, no model")
    parser.add_argument("--task", nargs="*", help="run only these tasks")
    parser.add_argument("--kind", nargs="*", choices=list(KINDS), help="run only these kinds")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--sandbox", choices=["none", "bwrap", "auto"], default="auto")
    parser.add_argument("--transcripts", metavar="DIR", help="write one JSON file per run")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--block", default="code-tasks", metavar="NAME")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
