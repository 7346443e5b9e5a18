"""``agentica code [DIR]``: the deep agent as a coding agent in a folder, from the terminal.

``-p "task"`` (or the task on stdin) runs one task without questions: progress on stderr, only
the final message on stdout (``--output text``), one JSON object (``json``) or one JSON line per
event and a last ``result`` line (``stream-json``); exit codes 0 done, 1 failed, 2 usage error,
3 a limit was reached. ``--approval`` (``read-only``, ``auto-edit``: the default here, commands
are refused; ``full-auto``: commands run, sandboxed by bubblewrap where it works). Every session
is stored and tied to its folder: ``--continue`` takes up the latest, ``--resume ID`` a given
one. Without a task it is interactive (``code_prompt.py``). The folder's ``AGENTS.md``,
``.agentica/config.toml`` and skills are loaded; file changes are checkpointed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from agentica.errors import UsageError

__all__ = ["APPROVAL_MODES", "add_parser", "run"]

APPROVAL_MODES = ("read-only", "ask", "auto-edit", "full-auto")
"""``agentica.deep.modes.MODES``, named here so that parsing does not import the agent stack."""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    code = commands.add_parser("code", help="a coding agent in a folder (DeepAgent)")
    code.add_argument("folder", nargs="?", default=".", help="the project folder (default: .)")
    code.add_argument(
        "-p",
        "--print",
        dest="task",
        metavar="TASK",
        help="run this task without questions and print the answer",
    )
    code.add_argument("--output", choices=["text", "json", "stream-json"], default="text")
    code.add_argument(
        "--approval",
        choices=APPROVAL_MODES,
        help="what may run without asking (default: auto-edit with -p)",
    )
    code.add_argument(
        "--sandbox",
        choices=["none", "bwrap", "auto"],
        help="where commands run (default: auto in full-auto, else none)",
    )
    code.add_argument("--max-turns", type=int, help="model calls per task (default 40)")
    code.add_argument("--temperature", type=float, help="sampling temperature (default: config)")
    code.add_argument("--model", help="a model string, or a model id with --base-url/--gateway")
    code.add_argument("--base-url", help="an OpenAI-compatible API root")
    code.add_argument("--api-key", help="its key (default: $AGENTICA_API_KEY)")
    code.add_argument(
        "--gateway",
        default=os.environ.get("AGENTICA_GATEWAY"),
        help="a class's agentica serve address: its gateway, your token",
    )
    code.add_argument(
        "--token",
        default=os.environ.get("AGENTICA_TOKEN"),
        help="your token for --gateway (default: $AGENTICA_TOKEN)",
    )
    code.add_argument("--kernel", action="store_true", help="offer a persistent Python kernel")
    code.add_argument(
        "--trust-mcp",
        action="store_true",
        help="start the MCP servers .agentica/config.toml names (and trust them)",
    )
    code.add_argument(
        "--storage",
        default=os.environ.get("AGENTICA_STORAGE"),
        help="where sessions are stored (default: the SQLite file in the data dir)",
    )
    group = code.add_mutually_exclusive_group()
    group.add_argument(
        "--continue",
        dest="resume_latest",
        action="store_true",
        help="take up the latest session in this folder",
    )
    group.add_argument("--resume", metavar="ID", help="take up this session")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    task = args.task
    if task is None and not sys.stdin.isatty():
        task = sys.stdin.read().strip()
    if task is None:
        from agentica.cli.code_prompt import interactive

        return asyncio.run(interactive(args))
    if not task:
        raise UsageError("the task is empty: give it with -p TASK or on stdin")
    from agentica.cli.code_session import noninteractive

    return asyncio.run(noninteractive(args, task, sys.stdout))
