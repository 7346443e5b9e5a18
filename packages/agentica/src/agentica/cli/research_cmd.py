"""``agentica research "question" [--knowledge PATH ...] [--web]``: a cited report.

The files and folders given with ``--knowledge`` are indexed first (again only what changed)
into the knowledge base ``--db`` (default as for ``agentica knowledge``); ``DeepResearch`` then
plans, analyses the sub-questions in parallel and writes the report, printed as Markdown (and
saved with ``--out``), with the share of its claims whose citations resolve. ``--web`` lets the
analyses read web pages too (``fetch_url``; ``web_search`` when a search provider is set).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from agentica.errors import UsageError

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    research = commands.add_parser("research", help="a report on a question, every claim cited")
    research.add_argument("question")
    research.add_argument("--knowledge", nargs="+", default=[], metavar="PATH",
                          help="files or folders to index and search")  # fmt: skip
    research.add_argument("--db", type=Path, default=None, help="the knowledge base file")
    research.add_argument("--web", action="store_true", help="let the analyses read the web")
    research.add_argument("--model", help="model string (default: $AGENTICA_MODEL or local)")
    research.add_argument("--base-url", help="an OpenAI-compatible API root for --model")
    research.add_argument("--api-key", help="the API key for --base-url")
    research.add_argument("--subtasks", type=int, default=3, help="the most sub-questions")
    research.add_argument("--parallel", type=int, default=3, help="analyses at once")
    research.add_argument("--out", type=Path, help="also save the report here")


async def _research(args: argparse.Namespace, console: Console) -> int:
    from agentica.cli.knowledge_cmd import default_knowledge_path
    from agentica.cli.main import build_model
    from agentica.deep.research import DeepResearch
    from agentica.knowledge import Knowledge
    from agentica.run.capability import Capability

    db = args.db or default_knowledge_path()
    if not args.knowledge and not db.exists():
        raise UsageError(f"no knowledge base at {db}: give --knowledge DIR to index documents")
    capabilities: list[Capability] = []
    if args.web:
        from agentica.deep.web import Web

        capabilities.append(Web())
    api_key = args.api_key or os.environ.get("AGENTICA_API_KEY") or os.environ.get("OPENAI_API_KEY")
    model = build_model(args.model, args.base_url, api_key)
    async with Knowledge(db) as kb:
        if args.knowledge:
            with console.status("indexing ..."):
                report = await kb.add(*args.knowledge)
            console.print(f"[dim]indexed: {len(report.added) + len(report.updated)} new or "
                          f"changed, {len(report.unchanged)} unchanged[/]")  # fmt: skip
        research = DeepResearch(
            kb, model=model, max_subtasks=args.subtasks, max_parallel=args.parallel,
            capabilities=capabilities,
            on_event=lambda line: console.print(Text(f"· {line}", style="dim")),
        )  # fmt: skip
        try:
            result = await research.run(args.question)
        finally:
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()  # (its connection pool, and the embedded model's server)
    console.print()
    console.print(Markdown(result.markdown))
    check = result.citations
    console.print(
        f"\n[bold]{check.cited} of {check.claims} claims cite evidence that exists[/]"
        f" ({check.share:.0%}); {len(result.evidence)} sources archived; "
        f"{result.seconds:.0f} s"
    )
    for note in result.notes:
        console.print(Text.assemble(("note: ", "yellow"), note))
    if args.out is not None:
        args.out.write_text(result.markdown + "\n")
        console.print(f"saved {args.out}")
    return 0 if result.citations.cited else 1


def run(args: argparse.Namespace) -> int:
    return asyncio.run(_research(args, Console(highlight=False)))
