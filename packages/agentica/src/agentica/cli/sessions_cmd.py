"""``agentica sessions``: list, show, rename, delete, fork and rewind stored conversations, and
show a session's branches as a tree.

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

from agentica.errors import StorageError, UsageError

if TYPE_CHECKING:  # storage is imported when a command runs (every command adds these options)
    from agentica.storage import Branch, SessionData, Storage

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
        ("fork", "copy a session (or its first runs) under a new id", ("session", "new_session")),
        ("rewind", "drop the runs after one, keeping them in a new branch", ("session",)),
        ("branches", "a session's forks and rewinds as a tree", ("session",)),
    ):
        command = sub.add_parser(name, help=help_text)
        for argument in extra:
            command.add_argument(argument)
        if name == "fork":
            command.add_argument("--at", type=int, metavar="N",
                                 help="copy only the first N runs (default: all)")  # fmt: skip
        elif name == "rewind":
            command.add_argument("--to", type=int, metavar="N", required=True,
                                 help="keep the first N runs")  # fmt: skip
            command.add_argument("--branch-id", metavar="ID",
                                 help="the id of the branch keeping the dropped runs "
                                 "(default: SESSION.REVISION)")  # fmt: skip
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


def _first_words(text: str, words: int = 8) -> str:
    """The first ``words`` words of ``text`` (at most 60 characters), ``…`` if cut."""
    parts = text.split()
    short = " ".join(parts[:words])
    cut = len(parts) > words or len(short) > 60
    return f"{short[:59].rstrip()}…" if cut else short


async def _branches(storage: Storage, user: str, session: str, console: Console) -> int:
    from rich.markup import escape
    from rich.tree import Tree

    tree = await storage.branches(user, session)
    loaded: dict[str, SessionData | None] = {}
    for _, branch in tree.walk():
        loaded[branch.session_id] = await storage.load_session(user, branch.session_id)

    def input_after(session_id: str, runs: int) -> str | None:
        """The first words of the input of run ``runs + 1`` of the session (``None``: none)."""
        data = loaded.get(session_id)
        if data is None or len(data.runs) <= runs:
            return None
        return _first_words(data.runs[runs].input)

    def label(branch: Branch) -> str:
        info = branch.info
        mark = " [bold]◀[/]" if info.session_id == session else ""
        text = f"[bold cyan]{escape(info.session_id)}[/] · {escape(info.title)} · {info.runs} runs"
        if info.parent_id is None or info.forked_at is None:
            return text + mark
        mine = input_after(info.session_id, info.forked_at)
        theirs = input_after(info.parent_id, info.forked_at)
        gone = "" if info.parent_id in loaded else f" of {escape(info.parent_id)} (deleted)"
        parts = f"parts after run {info.forked_at}{gone}: "
        parts += f"“{escape(mine)}”" if mine is not None else "no run of its own yet"
        if theirs is not None:
            parts += f" (parent: “{escape(theirs)}”)"
        return f"{text} · {parts}{mark}"

    def add(node: Tree, branch: Branch) -> None:
        for child in branch.children:
            add(node.add(label(child)), child)

    for root in tree.roots:
        top = Tree(label(root), guide_style="dim")
        add(top, root)
        console.print(top)
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
            info = await storage.fork_session(args.user, args.session, args.new_session,
                                              at=args.at)  # fmt: skip
            where = "" if args.at is None else f" at run {args.at}"
            console.print(f"forked {args.session}{where} into {info.session_id} ({info.runs} runs)")
        elif command == "rewind":
            branch = await storage.rewind_session(args.user, args.session, args.to,
                                                  branch_id=args.branch_id)  # fmt: skip
            first = args.to + 1
            dropped = (
                f"run {first} is" if branch.runs == first else f"runs {first}-{branch.runs} are"
            )
            console.print(f"rewound {args.session} to run {args.to}; {dropped} kept in branch "
                          f"{branch.session_id}")  # fmt: skip
        elif command == "branches":
            return await _branches(storage, args.user, args.session, console)
        return 0
    finally:
        await storage.aclose()


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False)
    try:
        return asyncio.run(_dispatch(args, console))
    except StorageError as exc:  # no such session, an id already taken, an unreachable database
        raise UsageError(str(exc)) from None
