"""``agentica eval TASKS``: run a task set against agent configurations and write a report.

``TASKS`` is a shipped set (``files``, ``docs``), an agentica JSONL file, a GAIA directory
(``metadata.jsonl``) or SWE-bench-style instances (``--repos`` holds the repositories).
``--agent`` names configurations (TOML files or ``deep`` / ``base``; repeatable), ``--compare``
adds one to pair against the first, ``--ablations`` expands the first into the paper's ablation
matrix and ``--sweep`` into the threshold grid. Attempts are cached under ``--cache``, so an
interrupted evaluation picks up where it stopped; the report goes to ``--out`` (Markdown, JSON
and PNG plots) and its table to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agentica.errors import UsageError
from agentica.evals import (
    Attempt,
    EvalConfig,
    ablations,
    load_config,
    load_tasks,
    markdown,
    run_eval,
    task_set,
    task_sets,
    threshold_sweep,
    write_report,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ev = commands.add_parser("eval", help="evaluate agent configurations on a task set")
    ev.add_argument("tasks", help="a task set: 'files', 'docs', a JSONL file, a GAIA directory, "
                    "or SWE-bench-style instances")  # fmt: skip
    ev.add_argument("--agent", action="append", default=[], metavar="CONFIG",
                    help="a configuration: a TOML file, 'deep' or 'base' (repeatable; "
                    "default: deep)")  # fmt: skip
    ev.add_argument("--compare", metavar="CONFIG", help="pair this configuration with the first")
    ev.add_argument("--ablations", nargs="*", metavar="NAME",
                    help="the first configuration and its ablations (all, or those named: "
                    "TaskGroup DualThreshold SingleThreshold HEARTBEAT DeepPrompt Repetition "
                    "AgentAsSession base)")  # fmt: skip
    ev.add_argument("--sweep", action="store_true",
                    help="the soft x hard threshold grid of the first configuration")  # fmt: skip
    ev.add_argument("--repeats", type=int, default=1, help="attempts per task and configuration")
    ev.add_argument("--seed", type=int, default=0, help="the first attempt's seed")
    ev.add_argument("--temperature", type=float, help="override every configuration's")
    ev.add_argument("--model", help="override every configuration's model")
    ev.add_argument("--concurrency", type=int, default=1, help="attempts at the same time")
    ev.add_argument("--limit", type=int, help="only the first N tasks")
    ev.add_argument("--repos", help="SWE-bench-style tasks: the folder of owner__name repositories")
    ev.add_argument(
        "--cache",
        default=".agentica-eval/cache",
        help="where finished attempts are kept (default: .agentica-eval/cache)",
    )
    ev.add_argument("--no-cache", action="store_true", help="run every attempt again")
    ev.add_argument("--out", default=".agentica-eval/report", help="the report's folder")
    ev.add_argument("--title", help="the report's title (default: the task set's name)")


def _configs(args: argparse.Namespace) -> list[EvalConfig]:
    configs = [load_config(spec) for spec in (args.agent or ["deep"])]
    if args.compare:
        configs.append(load_config(args.compare))
    changes: dict[str, object] = {}
    if args.temperature is not None:
        changes["temperature"] = args.temperature
    if args.model:
        changes["model"] = args.model
    if changes:
        configs = [dataclasses.replace(c, **changes) for c in configs]  # type: ignore[arg-type]
    if args.ablations is not None:
        configs = ablations(configs[0], args.ablations or None) + configs[1:]
    if args.sweep:
        configs = [configs[0], *threshold_sweep(configs[0])]
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise UsageError(f"two configurations have the same name: {names}; rename one")
    return configs


def _tasks_path(spec: str) -> Path:
    """A shipped set by its bare name (``./docs`` for a folder of that name), else the path."""
    if spec in task_sets():
        return task_set(spec)
    path = Path(spec)
    if not path.exists():
        raise UsageError(
            f"no task set {spec!r}: give a file or folder, or one of {', '.join(task_sets())}"
        )
    return path


async def _evaluate(args: argparse.Namespace, err: Console) -> list[Attempt]:
    configs = _configs(args)
    tasks = load_tasks(_tasks_path(args.tasks), repos=args.repos, limit=args.limit)
    total = len(tasks) * len(configs) * args.repeats
    err.print(f"{len(tasks)} tasks x {len(configs)} configurations x {args.repeats} "
              f"repeats = {total} attempts")  # fmt: skip
    solved = 0
    with Progress(
        TextColumn("[bold]eval[/]"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
    ) as progress:  # fmt: skip
        bar = progress.add_task("", total=total)

        def done(attempt: Attempt) -> None:
            nonlocal solved
            solved += attempt.passed
            mark = "✓" if attempt.passed else "✗"
            progress.update(
                bar, advance=1,
                description=f"{solved} solved · last: {mark} {attempt.task} ({attempt.config})",
            )  # fmt: skip

        return await run_eval(
            tasks, configs, repeats=args.repeats, seed=args.seed, concurrency=args.concurrency,
            cache_dir=None if args.no_cache else Path(args.cache), on_attempt=done,
        )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    if args.repeats < 1 or args.concurrency < 1:
        raise UsageError("--repeats and --concurrency must be at least 1")
    attempts = asyncio.run(_evaluate(args, err))
    title = args.title or f"agentica eval {Path(args.tasks).stem}"
    baseline = attempts[0].config if attempts else None
    files = write_report(attempts, Path(args.out), title=title, baseline=baseline)
    print(markdown(attempts, title=title, baseline=baseline), file=sys.stdout)
    err.print("report: " + ", ".join(str(f) for f in files))
    console.file.flush()
    return 0
