"""``agentica models``: list, pull (assemble and verify) and locate the embedded models, and
serve a model over an OpenAI-compatible HTTP endpoint."""

from __future__ import annotations

import argparse
import asyncio
import os

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn
from rich.table import Table

from agentica.errors import UsageError
from agentica.models.local import DEFAULT_LOCAL_MODEL
from agentica.models.registry import PRESETS, model_from_string
from agentica.models.weights import (
    EMBEDDED_MODELS,
    NOTICE,
    cache_dir,
    ensure_weights,
    weights_status,
)

__all__ = ["add_parser", "run"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = commands.add_parser("models", help="the embedded models and provider presets")
    sub = models.add_subparsers(dest="models_command", required=True)
    sub.add_parser("list", help="embedded models, their state, and provider presets")
    pull = sub.add_parser("pull", help="assemble and verify an embedded model's weights")
    pull.add_argument("name", nargs="?", default=DEFAULT_LOCAL_MODEL)
    where = sub.add_parser("where", help="print the path of an embedded model's weights")
    where.add_argument("name", nargs="?", default=DEFAULT_LOCAL_MODEL)
    serve = sub.add_parser("serve", help="serve a model at an OpenAI-compatible endpoint")
    serve.add_argument("--model", default="local", help="a model string (default: local)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8080)
    serve.add_argument("--api-key", default=os.environ.get("AGENTICA_SERVE_API_KEY"),
                       help="require this bearer token")  # fmt: skip


def _weights(name: str) -> str:
    if name not in EMBEDDED_MODELS:
        raise UsageError(f"unknown embedded model {name!r}: one of {', '.join(EMBEDDED_MODELS)}")
    return name


def _list(console: Console) -> None:
    table = Table(title="Embedded models", title_justify="left")
    for column in ("name", "size", "state", "license"):
        table.add_column(column)
    for name, weights in EMBEDDED_MODELS.items():
        label = f"{name} (default)" if name == DEFAULT_LOCAL_MODEL else name
        size = f"{weights.size / 1e9:.2f} GB"
        table.add_row(label, size, weights_status(weights), weights.license)
    console.print(table)
    console.print(f"cache: {cache_dir()}\nlicence notice: {NOTICE}\n")
    presets = Table(title="Provider presets (model strings 'provider:model-id')",
                    title_justify="left")  # fmt: skip
    for column in ("provider", "base URL", "key variable", "key set"):
        presets.add_column(column)
    for preset in PRESETS.values():
        key_set = (
            "yes"
            if preset.api_key_env and os.environ.get(preset.api_key_env)
            else ("not needed" if not preset.key_required else "no")
        )
        presets.add_row(preset.name, preset.base_url or "(in process)", preset.api_key_env or "-",
                        key_set)  # fmt: skip
    console.print(presets)


def _pull(console: Console, name: str) -> None:
    weights = EMBEDDED_MODELS[_weights(name)]
    with Progress(
        "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
        TimeRemainingColumn(), console=console, transient=True,
    ) as progress:  # fmt: skip
        task = progress.add_task(f"assembling {name}", total=weights.size)
        path = ensure_weights(
            weights, progress=lambda done, _: progress.update(task, completed=done)
        )
    console.print(f"{name}: verified (sha256 {weights.sha256[:16]}...) at {path}")


async def _serve(console: Console, args: argparse.Namespace) -> None:
    from aiohttp import web

    from agentica.cli.serve import build_app

    model = model_from_string(args.model)
    start = getattr(model, "start", None)
    if start is not None:
        console.print(f"loading {model.id} ...")
        await start()
    runner = web.AppRunner(build_app(model, api_key=args.api_key), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, args.host, args.port).start()
    console.print(f"serving {model.id} at http://{args.host}:{args.port}/v1 (Ctrl-C stops)")
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
        await model.aclose()


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    command = args.models_command
    if command == "list":
        _list(console)
    elif command == "pull":
        _pull(console, args.name)
    elif command == "where":
        weights = EMBEDDED_MODELS[_weights(args.name)]
        print(cache_dir() / weights.filename, weights_status(weights))
    elif command == "serve":
        asyncio.run(_serve(console, args))
    return 0
