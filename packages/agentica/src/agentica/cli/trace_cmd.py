"""``agentica trace RUN``: a run's timeline in the terminal, from what storage already keeps.

Each line is one step of the run's ``SpanRecord`` tree: the model calls (context tokens, tokens
in and out, how many tool calls the reply asked for), compactions, tool calls (result size,
error) and subagent runs nested under the call that started them, with the time each started
(from the run's start), how long it took and a bar placing it in the run. ``RUN`` is a run id
(or its first characters), ``last`` (the user's latest run), or a JSON file: a stored run
(``dump_run``), an ``agentica eval`` attempt, or its ``results.json`` (``--attempt N|TASK``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentica.cli import sessions_cmd
from agentica.errors import UsageError
from agentica.storage import RunRecord, SpanRecord, Storage, load_run
from agentica.tracing import span_name

__all__ = ["add_parser", "find_run", "render_trace", "run"]

BAR = 20


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trace = commands.add_parser("trace", help="print a run's timeline (model and tool calls)")
    trace.add_argument("run_id", metavar="RUN", help="a run id (or its start), 'last', or a file")
    trace.add_argument("--session", help="look only in this session")
    trace.add_argument("--json", action="store_true", help="print the timeline as JSON")
    trace.add_argument(
        "--attempt",
        metavar="N|TASK",
        help="of an eval's results.json: the attempt with this index or task id",
    )
    sessions_cmd.add_storage_options(trace)


async def find_run(storage: Storage, user: str, run_id: str, session: str | None) -> RunRecord:
    """The stored run ``run_id`` (a unique prefix is enough; ``last``: the latest) of ``user``."""
    ids = [session] if session else [s.session_id for s in await storage.list_sessions(user)]
    found: list[RunRecord] = []
    for session_id in ids:
        data = await storage.load_session(user, session_id)
        if data is None:
            continue
        if run_id == "last" and data.runs:
            return data.runs[-1]
        found.extend(r for r in data.runs if r.run_id.startswith(run_id))
    if len(found) == 1:
        return found[0]
    where = f"session {session!r}" if session else f"the sessions of user {user!r}"
    if not found:
        raise UsageError(
            f"no run {run_id!r} in {where}: `agentica sessions show SESSION` lists the runs"
        )
    raise UsageError(f"{len(found)} runs in {where} start with {run_id!r}: give more of the id")


def _number(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


def _detail(span: SpanRecord) -> str:
    a = span.attributes
    if span.kind == "model":
        parts = [f"ctx {_number(a.get('agentica.context_tokens'))}"]
        parts.append(f"in {_number(a.get('gen_ai.usage.input_tokens'))}")
        parts.append(f"out {_number(a.get('gen_ai.usage.output_tokens'))}")
        calls = a.get("agentica.tool_calls")
        if calls:
            parts.append(f"-> {calls} call{'s' if calls != 1 else ''}")
        return "  ".join(parts)
    if span.kind == "tool":
        return f"{_number(a.get('agentica.result_chars'))} chars"
    if span.kind == "compaction":
        before, after = a.get("agentica.tokens_before"), a.get("agentica.tokens_after")
        return f"{_number(before)} -> {_number(after)} tokens"
    return f"{_number(a.get('agentica.requests'))} model calls"


def _bar(span: SpanRecord, root: SpanRecord) -> str:
    total = root.duration or 1e-9
    begin = max(0, min(BAR - 1, int((span.start - root.start) / total * BAR)))
    width = max(1, round(span.duration / total * BAR))
    return " " * begin + "█" * min(width, BAR - begin) + " " * max(0, BAR - begin - width)


def render_trace(trace: SpanRecord, console: Console) -> None:
    """Print ``trace`` as one line per step, indented by depth."""
    a = trace.attributes
    status = "failed" if trace.error else "completed"
    console.print(
        f"[bold]run {a.get('agentica.run_id', '?')}[/] · {escape(trace.name)} · {status} · "
        f"{trace.duration:.2f} s"
    )
    console.print(
        f"{_number(a.get('agentica.requests'))} model calls · "
        f"{_number(a.get('agentica.tool_calls'))} tool calls · "
        f"{_number(a.get('gen_ai.usage.input_tokens'))} tokens in · "
        f"{_number(a.get('gen_ai.usage.output_tokens'))} out (subagents included)"
    )
    console.print(f"[dim]{'start':>7} {'secs':>6} {'':{BAR}} step[/]")
    for depth, span in trace.walk():
        if span is trace:
            continue
        mark = "[red]✗[/]" if span.error else "[green]✓[/]"
        name = escape(span_name(span))
        indent = "  " * (depth - 1)
        line = (
            f"{span.start - trace.start:7.2f} {span.duration:6.2f} [dim]{_bar(span, trace)}[/] "
            f"{indent}{mark} {name}  [dim]{escape(_detail(span))}[/]"
        )
        console.print(line, highlight=False, no_wrap=True, overflow="ellipsis")
        if span.error:
            error = escape(span.error.splitlines()[0][:160])
            console.print(f"{'':36}{indent}  [red]{error}[/]", no_wrap=True, overflow="ellipsis")
    if trace.error:
        console.print(f"[red]{escape(trace.error)}[/]")


def _attempt(data: dict[str, Any], which: str | None, path: Path) -> dict[str, Any]:
    """The attempt ``which`` (an index or a task id; default: the first) of a results.json."""
    attempts: list[dict[str, Any]] = data["attempts"]
    if not attempts:
        raise UsageError(f"{path} holds no attempts")
    if which is None:
        return attempts[0]
    if which.isdigit() and int(which) < len(attempts):
        return attempts[int(which)]
    for attempt in attempts:
        if attempt.get("task") == which:
            return attempt
    raise UsageError(f"{path} has no attempt {which!r} (0-{len(attempts) - 1} or a task id)")


def _from_file(path: Path, which: str | None = None) -> SpanRecord:
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read {path}: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("attempts"), list):  # an eval's results
        data = _attempt(data, which, path)
    if isinstance(data, dict) and data.get("format") == "agentica.run":
        trace = load_run(data, where=str(path)).trace
    elif isinstance(data, dict) and isinstance(data.get("trace"), dict):  # an eval attempt
        from pydantic import TypeAdapter

        trace = TypeAdapter(SpanRecord).validate_python(data["trace"])
    else:
        raise UsageError(f"{path} holds neither a stored run nor an eval attempt")
    if trace is None:
        raise UsageError(f"{path}: the run was stored without a timeline")
    return trace


async def _load(args: argparse.Namespace) -> SpanRecord:
    storage = sessions_cmd.storage_from(args)
    try:
        record = await find_run(storage, args.user, args.run_id, args.session)
    finally:
        await storage.aclose()
    if record.trace is None:
        raise UsageError(f"run {record.run_id} was stored without a timeline (an older version)")
    return record.trace


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    path = Path(args.run_id)
    if path.suffix == ".json" and path.is_file():
        trace = _from_file(path, args.attempt)
    else:
        trace = asyncio.run(_load(args))
    if args.json:
        from pydantic import TypeAdapter

        console.print_json(TypeAdapter(SpanRecord).dump_json(trace).decode())
    else:
        render_trace(trace, console)
    return 0
