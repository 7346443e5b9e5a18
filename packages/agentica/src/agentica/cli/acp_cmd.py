"""``agentica acp``: the deep agent for editors over the Agent Client Protocol (stdio).

An editor (Zed, a JetBrains IDE, a Neovim plugin) starts ``agentica acp`` as its agent; each of
its sessions is a ``DeepAgent`` in the editor's folder on the chosen model, stored in the
framework's session storage so a session can be loaded again later.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from agentica.errors import AgenticaError

__all__ = ["add_parser", "run"]


def add_parser(commands: Any) -> None:
    acp = commands.add_parser(
        "acp", help="serve the deep agent to an editor (Agent Client Protocol)"
    )
    acp.add_argument("--model", help="model string, e.g. deepseek:deepseek-chat or local")
    acp.add_argument("--base-url", help="OpenAI-compatible API root for --model")
    acp.add_argument("--api-key", help="API key (default: the provider's variable)")
    acp.add_argument("--instructions", help="added to the agent's instructions")
    acp.add_argument(
        "--mode",
        choices=["ask", "auto"],
        default="ask",
        help="ask before edits and commands (default), or not",
    )
    from agentica.cli.sessions_cmd import add_storage_options

    add_storage_options(acp)


def run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(_serve(args))
    except AgenticaError as exc:
        print(f"agentica acp: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


async def _serve(args: argparse.Namespace) -> None:
    from agentica.acp import ACPServer, SessionSetup, serve_stdio
    from agentica.cli.main import build_model
    from agentica.deep import DeepAgent, Shell
    from agentica.storage import open_storage

    model = build_model(args.model, args.base_url, args.api_key)
    storage = open_storage(args.storage)

    def new_agent(setup: SessionSetup) -> DeepAgent[str]:
        shell: Shell | bool = True
        if setup.commands is not None:
            shell = Shell(backend=setup.commands, python=True, background=False)
        return DeepAgent(
            model=model,
            workspace=setup.cwd,
            backend=setup.files,
            shell=shell,
            tools=list(setup.tools),
            capabilities=list(setup.capabilities),
            storage=storage,
            user_id=args.user,
            session_id=setup.session_id,
            instructions=args.instructions,
        )

    server = ACPServer(new_agent, mode=args.mode)
    try:
        await serve_stdio(server)
    finally:
        await server.aclose()
        await model.aclose()
        await storage.aclose()
