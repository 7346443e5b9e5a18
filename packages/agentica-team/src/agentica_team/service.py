"""``Team``: one running service — its settings, database and the parts built on them.

``Team.open(settings)`` upgrades the database, releases reservations left open by a crash,
creates the first admin when there is none and starts the supervisor of agent sessions;
``aclose()`` stops them in reverse order. While it runs, a sweeper releases every minute the
budget reservations of calls that died (older than ``reservation_timeout``). The app keeps one
``Team`` in ``app.state``; nothing is process-global, so two ``Team`` objects (tests run
several) never share state. Alone, a ``Team`` is the only one on its database; with
``redis_url`` several (worker processes or machines) share one PostgreSQL database through a
``Cluster`` (see ``agentica_team.cluster``). Tracing (``otlp_endpoint``, or a tracer provider
given to ``open``) has one provider per ``Team``, flushed when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from agentica.tools.commands import CommandBackend
from agentica_team.accounts import Accounts, User
from agentica_team.audit import Audit
from agentica_team.budgets import Budgets
from agentica_team.cluster import Cluster
from agentica_team.course_knowledge import CourseKnowledge
from agentica_team.course_models import CourseModels
from agentica_team.db import Database
from agentica_team.errors import BadRequest
from agentica_team.executors import Executors, RemoteCommands, RemoteFiles
from agentica_team.runtime import LanesRuntime
from agentica_team.security import KeyBox
from agentica_team.sessions import AgentSession
from agentica_team.settings import TeamSettings
from agentica_team.supervisor import (
    BatchRuntime,
    RuntimeFactory,
    SerialRuntime,
    SessionRuntime,
    SessionScope,
    Supervisor,
    Workbench,
)
from agentica_team.telemetry import OFF, Telemetry, open_telemetry

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = ["RUNTIMES", "FirstAdmin", "Team", "workspace_folder"]

log = logging.getLogger("agentica_team")

RUNTIMES: dict[str, RuntimeFactory] = {
    "serial": SerialRuntime,
    "batch": BatchRuntime,
    "lanes": LanesRuntime,
}
"""The session runtimes by the name the ``agent_runtime`` setting gives."""


def _runtime_of(settings: TeamSettings) -> RuntimeFactory:
    """Each session's runtime: its own choice, else the server's ``agent_runtime``."""

    def runtime(scope: SessionScope) -> SessionRuntime:
        return RUNTIMES[scope.session.runtime or settings.agent_runtime](scope)

    return runtime


def workspace_folder(settings: TeamSettings, session_id: str) -> Path:
    """The session's folder on the server (``server_commands``): ``DATA_DIR/workspaces/ID``."""
    return settings.data_dir / "workspaces" / session_id


def _workbench(
    settings: TeamSettings, executors: Executors
) -> Callable[[AgentSession], Workbench | None]:
    """Where a session's agent works when its loop starts: the student's newest connected
    executor; else, with the ``server_commands`` setting, the session's folder under
    ``DATA_DIR/workspaces`` with commands in bubblewrap; else (``None``) the supervisor's
    default, files in the database and no commands."""
    from agentica.deep.backends import FilesystemBackend
    from agentica.deep.shell import BwrapCommands

    def workbench(session: AgentSession) -> Workbench | None:
        connection = executors.pick(session.user_id)
        if connection is not None:

            def others() -> list[tuple[str, str, CommandBackend]]:
                return [
                    (c.info.id, c.info.name, RemoteCommands(c))
                    for c in executors.connections(session.user_id)
                ]

            info = connection.info
            return Workbench(RemoteFiles(connection), RemoteCommands(connection), info.id, others)
        if not settings.server_commands:
            return None
        folder = workspace_folder(settings, session.id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return Workbench(FilesystemBackend(folder), BwrapCommands(folder), "server")

    return workbench


def _cluster(settings: TeamSettings) -> Cluster | None:
    """The connection to the other workers (``redis_url``), which needs PostgreSQL."""
    if not settings.redis_url:
        return None
    if not settings.database.startswith("postgresql"):
        raise BadRequest(
            "several workers (redis_url) share a PostgreSQL database: set database_url to "
            "postgresql://user@host/db, or leave redis_url empty to run one process on SQLite"
        )
    return Cluster(
        settings.redis_url, prefix=settings.redis_prefix, lease_seconds=settings.lease_seconds
    )


@dataclass(frozen=True, slots=True)
class FirstAdmin:
    """The admin account created on first start and its password (shown once)."""

    user: User
    password: str


@dataclass(slots=True)
class Team:
    settings: TeamSettings
    db: Database
    audit: Audit
    budgets: Budgets
    accounts: Accounts
    models: CourseModels
    supervisor: Supervisor
    executors: Executors
    knowledge: CourseKnowledge
    telemetry: Telemetry = field(default=OFF)
    first_admin: FirstAdmin | None = field(default=None)
    _sweeper: asyncio.Task[None] | None = field(default=None)

    @classmethod
    async def open(
        cls, settings: TeamSettings, *, tracer_provider: TracerProvider | None = None
    ) -> Team:
        """The service on ``settings``' database, upgraded and started; its spans go to
        ``tracer_provider`` (the caller's, flushed at close), else to ``otlp_endpoint`` (a
        provider of its own, shut down at close), else nowhere."""
        db = Database(settings.database)
        telemetry = OFF
        try:
            if tracer_provider is not None or settings.otlp_endpoint:
                telemetry = await asyncio.to_thread(
                    open_telemetry, settings.otlp_endpoint, tracer_provider
                )
            await db.upgrade()
            keys = await asyncio.to_thread(
                KeyBox.load,
                settings.secret_key.get_secret_value(),
                settings.data_dir / "secret.key",
            )
            audit = Audit(db)
            budgets = Budgets(db, audit=audit)
            released = await budgets.release_stale(older_than=settings.reservation_timeout)
            if released:
                log.warning("released %d budget reservations left open by a crash", released)
            accounts = Accounts(
                db,
                audit,
                token_ttl=settings.token_ttl_days * 86400.0,
                web_session_ttl=settings.web_session_hours * 3600.0,
                login_limit=settings.login_attempts_per_minute,
                base_url=settings.base_url,
                keys=keys,
            )
            models = CourseModels(settings, accounts, budgets, audit)
            executors = Executors(telemetry)
            knowledge = CourseKnowledge(settings, db, audit)
            cluster = _cluster(settings)
            supervisor = Supervisor(
                db,
                accounts=accounts,
                models=models,
                audit=audit,
                budgets=budgets,
                runtime=_runtime_of(settings),
                workbench=_workbench(settings, executors),
                cluster=cluster,
                prefers=lambda user_id: executors.pick(user_id) is not None,
                knowledge=knowledge,
                telemetry=telemetry,
            )
            team = cls(
                settings, db, audit, budgets, accounts, models, supervisor, executors, knowledge,
                telemetry,
            )  # fmt: skip
            created = await accounts.ensure_admin()
            if created is not None:
                team.first_admin = FirstAdmin(*created)
            await supervisor.start()
            team._sweeper = asyncio.create_task(team._sweep(), name="agentica-team sweeper")
        except BaseException:
            await db.aclose()
            await telemetry.aclose()
            raise
        return team

    async def _sweep(self, every: float = 60.0) -> None:
        """Release reservations of calls that died while the server runs, every minute."""
        while True:
            await asyncio.sleep(every)
            try:
                released = await self.budgets.release_stale(
                    older_than=self.settings.reservation_timeout
                )
            except Exception as exc:  # the sweeper must survive a database hiccup
                log.warning("releasing stale reservations failed: %s", type(exc).__name__)
                continue
            if released:
                log.warning("released %d budget reservations left open", released)

    async def delete_session(self, session: AgentSession, *, actor_id: str) -> None:
        """Delete ``session`` for good: stop its agent (waiting until it has stopped), delete
        its conversations and files in the framework's storage, its folder on the server
        (when it has one), then its rows (audited: ``session_deleted``), and end its live
        streams. A failure part way leaves the session listed: deleting it again finishes."""
        await self.supervisor.stop(session, "the session was deleted")
        await self.supervisor.forget(session)
        folder = workspace_folder(self.settings, session.id)
        if await asyncio.to_thread(folder.is_dir):
            await asyncio.to_thread(shutil.rmtree, folder)
        await self.supervisor.sessions.delete(session, actor_id=actor_id)
        self.supervisor.hub.end(session.id)  # its live streams end

    async def aclose(self) -> None:
        """Stop the supervisor (runs are marked interrupted), close models and the database,
        then send the spans still buffered."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        try:
            await self.supervisor.aclose()
            await self.knowledge.aclose()
            await self.models.aclose()
            await self.audit.aclose()
        finally:
            await self.db.aclose()
            await self.telemetry.aclose()
