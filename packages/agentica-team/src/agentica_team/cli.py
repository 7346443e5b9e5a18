"""The service's commands in the ``agentica`` CLI: ``agentica serve`` and ``agentica team ...``.

```
agentica serve [--host H] [--port P] [--database-url URL] [--config team.toml] [--model M]
agentica team add-user EMAIL [--role teacher] [--name N]        (prints a one-time password)
agentica team create-course NAME --teacher EMAIL [--title T]
agentica team add-students COURSE students.csv [--out tokens.csv]
agentica team reset-password EMAIL
agentica team audit verify [--course NAME]  |  audit export --course NAME [--format csv]
agentica team usage --course NAME
```
``team`` commands work on the server's database directly (same settings as ``serve``), so they
run on the server's machine. This module is the ``agentica.commands`` entry point: it imports
nothing heavy until a command runs.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentica_team.settings import TeamSettings

__all__ = ["connect_command", "serve_command", "team_command"]


def _settings_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="a TOML settings file (default $AGENTICA_TEAM_CONFIG)")
    parser.add_argument(
        "--database-url", help="sqlite:///path.db or postgresql://user@host/db (default: SQLite)"
    )


def _settings(args: argparse.Namespace, **more: Any) -> TeamSettings:
    from agentica_team.settings import TeamSettings

    overrides = {k: v for k, v in more.items() if v is not None}
    if args.database_url:
        overrides["database_url"] = args.database_url
    return TeamSettings.load(args.config, **overrides)


def _fail(message: str) -> int:
    print(f"agentica: {message}", file=sys.stderr)
    return 1


def _guarded(body: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``body``; a service error or invalid setting is one line on stderr and status 1."""
    from pydantic import ValidationError

    from agentica.errors import AgenticaError

    try:
        return asyncio.run(body())
    except AgenticaError as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        return _fail(f"invalid settings: {exc}")


# -- agentica serve -------------------------------------------------------------------------------


class _ServeCommand:
    def add_parser(self, commands: Any) -> None:
        serve = commands.add_parser(
            "serve", help="run the team service (accounts, gateway, agents)"
        )
        serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
        serve.add_argument("--port", type=int, help="port (default 8000)")
        serve.add_argument("--model", help="the default model of courses (default: local)")
        serve.add_argument(
            "--redis-url",
            help="redis://host:6379/0: run as one of several workers on a PostgreSQL database",
        )
        _settings_options(serve)
        serve.set_defaults(plugin_run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        more = {"host": args.host, "port": args.port, "model": args.model,
                "redis_url": args.redis_url}  # fmt: skip
        return _guarded(lambda: serve(_settings(args, **more)))


async def serve(settings: TeamSettings) -> int:
    """Open the service, print where it listens (and the first admin's password), serve until
    interrupted."""
    import uvicorn

    from agentica_team.app import create_app
    from agentica_team.service import Team

    team = await Team.open(settings)
    try:
        print(f"agentica team service on {settings.base_url}  (database: {team.db!r})")
        if team.first_admin is not None:
            print(
                f"first start: admin account {team.first_admin.user.email} with password "
                f"{team.first_admin.password}\n(shown once; change it after logging in, or "
                "`agentica team reset-password EMAIL`)"
            )
        app = await asyncio.to_thread(create_app, team=team)  # building routes takes ~0.3 s
        config = uvicorn.Config(
            app,
            host=settings.host,
            port=settings.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=5,
        )
        await uvicorn.Server(config).serve()
    finally:
        await team.aclose()
    return 0


serve_command = _ServeCommand()


# -- agentica connect -----------------------------------------------------------------------------


class _ConnectCommand:
    def add_parser(self, commands: Any) -> None:
        connect = commands.add_parser(
            "connect",
            help="run your agent's commands and file work on this computer, in one folder",
        )
        connect.add_argument("--server", required=True, help="the team service's URL")
        connect.add_argument("--token", required=True, help="your personal token (agt_...)")
        connect.add_argument("--workspace", required=True, help="the folder the agent works in")
        connect.add_argument("--name", default="", help="this computer's name (default: host)")
        connect.add_argument(
            "--no-sandbox", action="store_true", help="run commands without bubblewrap"
        )
        connect.set_defaults(plugin_run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        from agentica_team.connect import ConnectRefused, Executor

        async def body() -> int:
            executor = Executor(args.server, args.token, args.workspace, name=args.name,
                                sandbox=not args.no_sandbox)  # fmt: skip
            try:
                await executor.run()
            except ConnectRefused as exc:
                return _fail(str(exc))
            return 0

        try:
            return _guarded(body)
        except KeyboardInterrupt:
            return 130


connect_command = _ConnectCommand()

# -- agentica team ...  ---------------------------------------------------------------------------


class _TeamCommand:
    def add_parser(self, commands: Any) -> None:
        team = commands.add_parser("team", help="manage the team service's accounts and audit")
        sub = team.add_subparsers(dest="team_command", required=True)
        user = sub.add_parser("add-user", help="create an account (prints a one-time password)")
        user.add_argument("email")
        user.add_argument("--role", choices=["admin", "teacher", "student"], default="teacher")
        user.add_argument("--name", default="")
        course = sub.add_parser("create-course", help="create a course taught by --teacher")
        course.add_argument("name")
        course.add_argument("--teacher", required=True, help="the teacher's e-mail")
        course.add_argument("--title", default="")
        students = sub.add_parser(
            "add-students", help="add students from a CSV (email[,name]) and print their tokens"
        )
        students.add_argument("course", help="the course's name")
        students.add_argument("roster", type=Path, help="CSV file or a file of e-mails")
        students.add_argument("--out", type=Path, help="also write email,name,token,connect CSV")
        reset = sub.add_parser("reset-password", help="set a new random password (printed)")
        reset.add_argument("email")
        audit = sub.add_parser("audit", help="verify or export the audit")
        audit_sub = audit.add_subparsers(dest="audit_command", required=True)
        verify = audit_sub.add_parser("verify", help="check the hash chains (exit 1 on damage)")
        verify.add_argument("--course", help="one course's name (default: every chain)")
        export = audit_sub.add_parser("export", help="write a course's records to stdout")
        export.add_argument("--course", required=True)
        export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
        usage = sub.add_parser("usage", help="a course's usage per student and day")
        usage.add_argument("--course", required=True)
        for parser in (user, course, students, reset, verify, export, usage):
            _settings_options(parser)
        team.set_defaults(plugin_run=self.run)

    def run(self, args: argparse.Namespace) -> int:
        name = args.team_command.replace("-", "_")
        action = _AUDIT[args.audit_command] if name == "audit" else _ACTIONS[name]
        return _guarded(lambda: _with_parts(args, action))


class _Parts:
    """What a ``team`` command needs: the database, audit, accounts and budgets (no agents)."""

    def __init__(self, settings: TeamSettings) -> None:
        from agentica_team.accounts import Accounts
        from agentica_team.audit import Audit
        from agentica_team.budgets import Budgets
        from agentica_team.db import Database

        self.db = Database(settings.database)
        self.audit = Audit(self.db)
        self.budgets = Budgets(self.db)
        self.accounts = Accounts(self.db, self.audit, base_url=settings.base_url)


async def _with_parts(
    args: argparse.Namespace, action: Callable[[_Parts, argparse.Namespace], Awaitable[int]]
) -> int:
    parts = _Parts(_settings(args))
    try:
        await parts.db.upgrade(framework=False)
        return await action(parts, args)
    finally:
        await parts.audit.aclose()
        await parts.db.aclose()


async def _add_user(parts: _Parts, args: argparse.Namespace) -> int:
    from agentica_team.security import new_password

    password = new_password()
    user = await parts.accounts.create_user(
        args.email, name=args.name, role=args.role, password=password
    )
    print(f"{user.role} {user.email} created; password: {password} (shown once)")
    return 0


async def _create_course(parts: _Parts, args: argparse.Namespace) -> int:
    from agentica_team.principal import Principal

    teacher = await parts.accounts.user_by_email(args.teacher)
    if teacher is None or teacher.role not in ("teacher", "admin"):
        return _fail(f"no teacher {args.teacher!r}: create one with `agentica team add-user`")
    owner = Principal(teacher.id, teacher.email, teacher.name, teacher.role, "system")
    course = await parts.accounts.create_course(owner, args.name, title=args.title)
    print(f"course {course.name} ({course.id}) taught by {teacher.email}")
    return 0


async def _add_students(parts: _Parts, args: argparse.Namespace) -> int:
    from agentica_team.accounts import parse_roster

    course = await parts.accounts.course_by_name(args.course)
    try:
        text = await asyncio.to_thread(args.roster.read_text, encoding="utf-8-sig")
    except OSError as exc:
        return _fail(f"cannot read the roster {str(args.roster)!r}: {exc.strerror}")
    done = await parts.accounts.add_students(course, parse_roster(text), actor="")
    rows = [(s.user.email, s.user.name, s.token or "", s.connect or "") for s in done]
    if args.out:
        try:
            await asyncio.to_thread(_write_csv, args.out, rows)
        except FileExistsError:
            return _fail(f"{str(args.out)!r} exists: give a new file for the tokens")
    for email, _, _, connect in rows:
        print(f"{email}\n    {connect or 'already in the course: its token is unchanged'}")
    created = sum(1 for s in done if s.created)
    print(f"{len(done)} students in {course.name} ({created} new accounts)", file=sys.stderr)
    return 0


def _write_csv(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """Write the tokens to a new file that only its owner can read (never an existing one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["email", "name", "token", "connect"])
        writer.writerows(rows)


async def _reset_password(parts: _Parts, args: argparse.Namespace) -> int:
    from agentica_team.security import new_password

    user = await parts.accounts.user_by_email(args.email)
    if user is None:
        return _fail(f"no account {args.email!r}")
    password = new_password()
    await parts.accounts.set_password(user.id, password)
    print(f"new password of {user.email}: {password} (shown once)")
    return 0


async def _audit_verify(parts: _Parts, args: argparse.Namespace) -> int:
    course_id = (await parts.accounts.course_by_name(args.course)).id if args.course else None
    reports = await parts.audit.verify(course_id)
    for report in reports:
        where = report.chain or "server"
        state = "ok" if report.ok else f"DAMAGED at seq {report.first_bad_seq}: {report.problem}"
        print(f"{where}: {report.records} records, {state}")
    return 0 if all(report.ok for report in reports) else 1


async def _audit_export(parts: _Parts, args: argparse.Namespace) -> int:
    course = await parts.accounts.course_by_name(args.course)
    async for chunk in parts.audit.export(course_id=course.id, fmt=args.format):
        sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
    return 0


async def _usage(parts: _Parts, args: argparse.Namespace) -> int:
    course = await parts.accounts.course_by_name(args.course)
    rows = await parts.budgets.usage(course.id)
    names = {m.user.id: m.user.email for m in await parts.accounts.members(course.id)}
    print(
        f"{'day':10}  {'student':30}  {'source':7}  {'requests':>8}  {'tokens':>9}  "
        f"{'cached':>8}  {'saved':>8}  {'USD':>8}"
    )
    for r in rows:
        tokens = r.input_tokens + r.output_tokens
        print(
            f"{r.day:10}  {names.get(r.user_id, r.user_id)[:30]:30}  {r.source:7}  "
            f"{r.requests:8}  {tokens:9}  {r.cached_tokens:8}  {r.compaction_saved_tokens:8}  "
            f"{r.cost_micros / 1e6:8.4f}"
        )
    print(
        "cached: prompt tokens served from the provider's prefix cache; saved: tokens "
        "compaction kept out of later requests",
        file=sys.stderr,
    )
    return 0


_ACTIONS: dict[str, Callable[[_Parts, argparse.Namespace], Awaitable[int]]] = {
    "add_user": _add_user,
    "create_course": _create_course,
    "add_students": _add_students,
    "reset_password": _reset_password,
    "usage": _usage,
}
_AUDIT = {"verify": _audit_verify, "export": _audit_export}

team_command = _TeamCommand()
