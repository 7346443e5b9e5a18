"""``agentica knowledge``: index files into a knowledge base and search it.

``agentica knowledge add docs/ README.md`` indexes (again only what changed, with a progress
bar); ``agentica knowledge search "how do I ..."`` prints the best chunks with their sources;
``agentica knowledge list`` names what is indexed. The base is ``--db`` (default
``$AGENTICA_KNOWLEDGE``, else ``knowledge.db`` beside the default storage).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from rich.console import Console

from agentica.errors import UsageError

__all__ = ["add_parser", "default_knowledge_path", "run"]


def default_knowledge_path() -> Path:
    """``$AGENTICA_KNOWLEDGE``, else ``knowledge.db`` in the folder of the default storage."""
    from agentica.storage.sql import default_sqlite_path

    given = os.environ.get("AGENTICA_KNOWLEDGE")
    return Path(given).expanduser() if given else default_sqlite_path().parent / "knowledge.db"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    knowledge = commands.add_parser("knowledge", help="index files and search them (RAG)")
    sub = knowledge.add_subparsers(dest="knowledge_command", required=True)
    add = sub.add_parser("add", help="index files and folders (again only what changed)")
    add.add_argument("paths", nargs="+", help="files or folders")
    search = sub.add_parser("search", help="the best chunks for a query")
    search.add_argument("query")
    search.add_argument("-k", type=int, default=5, help="how many results (default 5)")
    search.add_argument("--mode", choices=["hybrid", "vector", "bm25"], default="hybrid")
    sub.add_parser("list", help="the indexed sources")
    for command in sub.choices.values():
        command.add_argument("--db", type=Path, default=None, help="the knowledge base file")


async def _add(args: argparse.Namespace, console: Console) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from agentica.knowledge import Knowledge

    async with Knowledge(args.db) as kb:
        with Progress(
            TextColumn("[bold]indexing"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task("", total=None)

            def progress(source: str, done: int, total: int) -> None:
                bar.update(task, completed=done, total=total, description=source)

            report = await kb.add(*args.paths, progress=progress)
        total = await kb.store.count()
    console.print(
        f"{len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.unchanged)} unchanged, {len(report.removed)} removed; "
        f"{report.chunks} chunks written, {total} in {args.db}"
    )
    for source, why in report.skipped.items():
        console.print(f"[yellow]skipped[/] {source}: {why}")
    return 0


async def _search(args: argparse.Namespace, console: Console) -> int:
    from agentica.knowledge import Knowledge

    if not args.db.exists():
        raise UsageError(f"no knowledge base at {args.db}: run `agentica knowledge add DIR` first")
    async with Knowledge(args.db) as kb:
        hits = await kb.search(args.query, args.k, mode=args.mode)
    if not hits:
        console.print("nothing matches")
    for number, hit in enumerate(hits, start=1):
        heading = f" · {hit.chunk.heading}" if hit.chunk.heading else ""
        console.print(f"[bold cyan][{number}][/] [bold]{hit.citation}[/]{heading}")
        console.print(hit.chunk.text, markup=False, soft_wrap=True)
        console.print()
    return 0


async def _list(args: argparse.Namespace, console: Console) -> int:
    from agentica.knowledge import Knowledge

    if not args.db.exists():
        console.print(f"no knowledge base at {args.db}")
        return 0
    async with Knowledge(args.db) as kb:
        for source in await kb.sources():
            console.print(source, markup=False)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.db is None:
        args.db = default_knowledge_path()
    console = Console(highlight=False)
    command = {"add": _add, "search": _search, "list": _list}[args.knowledge_command]
    return asyncio.run(command(args, console))
