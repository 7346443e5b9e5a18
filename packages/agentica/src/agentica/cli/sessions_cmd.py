"""``agentica sessions``: list, show, rename, delete and fork stored conversations.

Sessions live in the storage named by ``--storage`` (a URL or path; ``$AGENTICA_STORAGE``;
default: the SQLite file under the user's data directory) and belong to ``--user`` (default
``$AGENTICA_USER`` or ``default``). ``agentica run --session ID`` continues one.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
from typing import TYPE_CHECKING

from rich.console import Console

from agentica.errors import UsageError

if TYPE_CHECKING:  # storage is imported when a command runs (every command adds these options)
    from agentica.storage import Storage

__all__ = ["add_parser", "add_storage_options", "run", "storage_from"]


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--storage",
        default=os.environ.get("AGENTICA_STORAGE"),
        help="storage URL or path (default: the SQLite file in the data dir)",
    )
    parser.add_argument("--user", default=os.environ.get("AGENTICA_USER", "default"),
                        help="whose sessions (default: $AGENTICA_USER or 'default')")  # fmt: skip


def storage_from(args: argparse.Namespace) -> Storage:
    from agentica.storage import open_storage

    return open_storage(args.storage)


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = commands.add_parser("sessions", help="stored conversations")
    sub = sessions.add_subparsers(dest="sessions_command", required=True)
    for name, help_text, extra in (
        ("list", "the user's sessions, most recent first", ()),
        ("show", "one session's runs", ("session",)),
        ("rename", "change a session's title", ("session", "title")),
        ("delete", "delete a session, its runs and variables", ("session",)),
        ("fork", "copy a session under a new id", ("session", "new_session")),
    ):
        command = sub.add_parser(name, help=help_text)
        for argument in extra:
            command.add_argument(argument)
        add_storage_options(command)


def _when(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M")


async def _list(storage: Storage, user: str, console: Console) -> int:
    from rich.table import Table

    sessions = await storage.list_sessions(user)
    if not sessions:
        console.print(f"no sessions for user {user!r}")
        return 0
    table = Table("session", "title", "runs", "updated")
    for info in sessions:
        table.add_row(info.session_id, info.title, str(info.runs), _when(info.updated_at))
    console.print(table)
    return 0


async def _show(storage: Storage, user: str, session: str, console: Console) -> int:
    from agentica.storage import SessionNotFound

    data = await storage.load_session(user, session)
    if data is None:
        raise SessionNotFound(f"no session {session!r} for user {user!r}")
    console.print(f"[bold]{data.info.title}[/] · {session} · {len(data.runs)} runs")
    for number, record in enumerate(data.runs, 1):
        console.print(f"\n[bold cyan]#{number}[/] {_when(record.started_at)} · {record.status} · "
                      f"{record.duration:.1f} s · {record.usage.total_tokens} tokens")  # fmt: skip
        console.print(f"[bold]user:[/] {record.input}", markup=True, highlight=False)
        for call in record.tool_calls:
            mark = "✓" if call.status == "success" else "✗"
            console.print(f"  {mark} {call.name}({call.arguments[:100]})", markup=False)
        if record.output:
            console.print(f"[bold]agent:[/] {record.output}", highlight=False)
        if record.error:
            console.print(f"[red]{record.error}[/]")
    return 0


async def _dispatch(args: argparse.Namespace, console: Console) -> int:
    from agentica.storage import SessionNotFound

    storage = storage_from(args)
    try:
        command = args.sessions_command
        if command == "list":
            return await _list(storage, args.user, console)
        if command == "show":
            return await _show(storage, args.user, args.session, console)
        if command == "rename":
            await storage.rename_session(args.user, args.session, args.title)
            console.print(f"renamed {args.session} to {args.title!r}")
        elif command == "delete":
            if not await storage.delete_session(args.user, args.session):
                raise SessionNotFound(f"no session {args.session!r} for user {args.user!r}")
            console.print(f"deleted {args.session}")
        elif command == "fork":
            info = await storage.fork_session(args.user, args.session, args.new_session)
            console.print(f"forked {args.session} into {info.session_id} ({info.runs} runs)")
        return 0
    finally:
        await storage.aclose()


def run(args: argparse.Namespace) -> int:
    from agentica.storage import SessionNotFound

    console = Console(highlight=False)
    try:
        return asyncio.run(_dispatch(args, console))
    except SessionNotFound as exc:
        raise UsageError(str(exc)) from None
