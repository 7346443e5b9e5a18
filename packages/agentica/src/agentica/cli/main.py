"""``agentica`` command-line entry point: the argument parser and the ``run`` command.

```
agentica run "task" [--model M] [--base-url URL] [--api-key KEY] [--tool module:function ...]
             [--mcp "npx -y @modelcontextprotocol/server-filesystem DIR" ...]
agentica demo [--model M]                 an agent solves a small task on the embedded model
agentica mcp serve | list                 an agent offered over MCP; an MCP server's tools
agentica acp [--model M] [--mode ask|auto] the deep agent for editors (Agent Client Protocol)
agentica models list | pull | where | serve
agentica sessions list | show | rename | delete | fork   (stored conversations)
```
The other commands live in their own modules (``demo``, ``models_cmd``, ``sessions_cmd``,
``knowledge_cmd``, ``research_cmd``, ``mcp_cmd``, ``acp_cmd``).
Installed packages add commands through the ``agentica.commands`` entry-point group: each entry
point names an object whose ``add_parser(commands)`` adds its sub-parser and sets the default
``plugin_run``, a function of the parsed arguments returning the exit status (``agentica-team``
adds ``serve`` and ``team`` this way; ``agentica`` never imports it).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agentica import __version__
from agentica.cli import sessions_cmd as sessions_command
from agentica.errors import AgenticaError, UsageError

if TYPE_CHECKING:  # the agent stack is imported by the command that runs, not to parse
    from agentica.models.base import Model
    from agentica.run.approval import Decision, PendingCall
    from agentica.tracing import OpenTelemetry

__all__ = ["build_model", "load_tool", "main"]


def build_model(model: str | None, base_url: str | None, api_key: str | None) -> Model:
    """The model named on the command line; else the default-model rule (``resolve_model``)."""
    from agentica.models.openai import OpenAILike
    from agentica.models.registry import model_from_string, resolve_model

    if base_url:
        return OpenAILike(id=model or "default", base_url=base_url, api_key=api_key)
    if model and api_key:
        return model_from_string(model, api_key=api_key)
    return resolve_model(model)


def load_tool(spec: str) -> Any:
    """The object ``module:attribute`` names (``--tool``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise UsageError(f"--tool takes module:function, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r} for --tool {spec!r}: {exc}") from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        raise UsageError(f"module {module_name!r} has no attribute {attr!r}") from None


async def _run(args: argparse.Namespace) -> int:
    """``agentica run``: stream the run to the terminal (text as it arrives, one line per tool
    call, a summary line); 1 when the run failed (the typed error is printed), else 0.

    ``--model`` takes a model string (``deepseek:deepseek-chat``, ``local``) or, with
    ``--base-url``, a model id on that OpenAI-compatible server; without it, ``$AGENTICA_MODEL``
    or the embedded model is used (``build_model``).
    """
    from rich.console import Console

    from agentica.agent import Agent
    from agentica.cli import mcp_cmd as mcp_command
    from agentica.cli.render import EventPrinter
    from agentica.limits import RunLimits
    from agentica.models.base import ModelSettings
    from agentica.run.approval import HumanApproval
    from agentica.run.capability import Capability

    console = Console(highlight=False)
    err = Console(stderr=True, highlight=False)
    sys.path.insert(0, os.getcwd())
    model = build_model(args.model, args.base_url, args.api_key)
    storage = sessions_command.storage_from(args) if args.session else None
    approval: list[Capability] = (
        [HumanApproval(dict.fromkeys(args.approve, True))] if args.approve else []
    )
    tracing = _tracing(args.otlp)
    servers = [mcp_command.server_from_spec(spec) for spec in args.mcp]
    agent = Agent(
        model=model,
        tools=[*(load_tool(spec) for spec in args.tool), *servers],
        instructions=args.instructions,
        model_settings=ModelSettings(temperature=args.temperature, max_tokens=args.max_tokens),
        limits=RunLimits(max_turns=args.max_turns),
        storage=storage,
        user_id=args.user,
        session_id=args.session,
        capabilities=[*approval, *([tracing] if tracing else [])],
    )
    printer = EventPrinter(console, show_reasoning=args.reasoning)
    try:
        stream = agent.run_stream(args.task)
        while True:
            async with stream:
                async for event in stream:
                    printer(event)
            if stream.response.stop_reason != "paused":
                break
            decisions = {p.call_id: await _ask(console, p) for p in stream.response.pending}
            stream = agent.resume_stream(decisions)
    except AgenticaError as exc:
        printer._end_text()
        err.print(f"[bold red]{type(exc).__name__}[/]: {exc}", markup=True, highlight=False)
        return 1
    finally:
        await model.aclose()
        for server in servers:
            await server.aclose()
        if storage is not None:
            await storage.aclose()
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)
    return 0


def _tracing(endpoint: str | None) -> OpenTelemetry | None:
    """``--otlp URL`` (or the environment: ``AGENTICA_OTLP_ENDPOINT``) turns tracing on."""
    from agentica.tracing import OpenTelemetry

    return OpenTelemetry(endpoint=endpoint) if endpoint else OpenTelemetry.from_env()


async def _ask(console: Any, pending: PendingCall) -> Decision:
    """Ask on the terminal whether ``pending`` may run: yes, no (with a reason) or edit."""
    from agentica.run.approval import Decision

    console.print(f"\n[bold yellow]approve?[/] {pending.tool}({json.dumps(pending.arguments)})")
    while True:
        answer = (await asyncio.to_thread(input, "[y]es / [n]o / [e]dit > ")).strip().lower()
        if answer in ("y", "yes"):
            return Decision.approve()
        if answer in ("n", "no"):
            reason = await asyncio.to_thread(input, "why (told to the model) > ")
            return Decision.reject(reason.strip() or "The user did not approve this call.")
        if answer in ("e", "edit"):
            text = await asyncio.to_thread(input, "arguments as JSON > ")
            try:
                arguments = json.loads(text)
            except ValueError as exc:
                console.print(f"[red]not JSON: {exc}[/]")
                continue
            if isinstance(arguments, dict):
                return Decision.edit(arguments)
            console.print("[red]the arguments must be a JSON object[/]")


_COMMANDS = {
    "demo": "demo", "mcp": "mcp_cmd", "acp": "acp_cmd", "models": "models_cmd",
    "sessions": "sessions_cmd", "knowledge": "knowledge_cmd", "research": "research_cmd",
    "trace": "trace_cmd", "eval": "eval_cmd", "code": "code_cmd",
}  # fmt: skip
"""The commands' modules (under ``agentica.cli``): only the chosen one is imported."""


def _command(name: str) -> Any:
    return importlib.import_module(f"agentica.cli.{_COMMANDS[name]}")


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named in ``argv`` (its first word that is not an option)."""
    return next((word for word in argv if not word.startswith("-")), None)


def _parser(chosen: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentica", description="The agentica agent framework.")
    parser.add_argument("--version", action="version", version=f"agentica {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run an agent on a task and stream it")
    run.add_argument("task", help="what the agent should do")
    run.add_argument("--model", help="model string, e.g. deepseek:deepseek-chat or local")
    run.add_argument("--base-url", help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    run.add_argument("--api-key", help="API key (default: $AGENTICA_API_KEY or $OPENAI_API_KEY)")
    run.add_argument("--instructions", help="system prompt")
    run.add_argument(
        "--tool",
        action="append",
        default=[],
        metavar="MODULE:FUNCTION",
        help="a tool to give the agent (repeatable)",
    )
    run.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SERVER",
        help="an MCP server's tools: a command line to start it, or its URL (repeatable)",
    )
    run.add_argument("--temperature", type=float, default=None)
    run.add_argument("--max-tokens", type=int, default=None, help="output tokens per model call")
    run.add_argument("--max-turns", type=int, default=100, help="model calls per run")
    run.add_argument("--reasoning", action="store_true", help="show reasoning text")
    run.add_argument("--session", help="continue (or start) this stored session")
    run.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TOOL",
        help="ask before each call of this tool (repeatable)",
    )
    run.add_argument(
        "--otlp", metavar="URL",
        help="send the run's spans to this OTLP/HTTP collector (default: $AGENTICA_OTLP_ENDPOINT)",
    )  # fmt: skip
    sessions_command.add_storage_options(run)
    for name in [chosen] if chosen in _COMMANDS else _COMMANDS:
        _command(name).add_parser(commands)
    builtin = chosen in _COMMANDS or chosen == "run"
    for name, plugin in ({} if builtin else _plugins()).items():
        if name not in commands.choices:
            plugin.add_parser(commands)
    return parser


def _plugins() -> dict[str, Any]:
    """The commands installed packages add (entry-point group ``agentica.commands``)."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for point in entry_points(group="agentica.commands"):
        try:
            found[point.name] = point.load()
        except Exception as exc:  # a broken plugin must not break the other commands
            print(f"agentica: ignoring the {point.name!r} command: {exc}", file=sys.stderr)
    return found


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command in ``argv`` and exit with its status: 0 on success, 1 when the run
    failed, 2 on bad usage, 130 when interrupted."""
    words = sys.argv[1:] if argv is None else list(argv)
    args = _parser(_chosen(words)).parse_args(words)
    try:
        if args.command == "run":
            code = asyncio.run(_run(args))
        elif args.command in _COMMANDS:
            code = _command(args.command).run(args)
        else:
            code = int(args.plugin_run(args))
    except UsageError as exc:
        print(f"agentica: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
