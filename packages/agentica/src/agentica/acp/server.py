"""``ACPServer``: a deep agent inside an editor over the Agent Client Protocol (``agentica acp``),
on the official SDK (``acp``).

Each ACP session is a ``DeepAgent`` conversation working in the editor's folder, stored with
the framework's sessions (``load_session`` replays one after a restart). A prompt streams the
answer as message chunks, each tool call as a ``tool_call`` and its updates (kind, status,
locations, a diff for edits), and the todo list as the plan. In the ``ask`` mode edits and
commands wait for the editor's permission request (``auto``: they do not). Files and commands
go through the editor when it offers ``fs`` and ``terminal``, else the local workspace.
``session/cancel`` stops the turn; the prompt answers ``cancelled``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    ClientCapabilities,
    Implementation,
    McpCapabilities,
    PermissionOption,
    PromptCapabilities,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

from agentica.acp import updates
from agentica.acp.editor import EditorCommands, EditorFiles
from agentica.agent import Agent
from agentica.errors import AgenticaError, LimitExceeded
from agentica.mcp import MCPServer
from agentica.messages import ReasoningDelta, TextDelta
from agentica.run.approval import Decision, HumanApproval, PendingCall
from agentica.run.capability import Capability
from agentica.run.events import ModelResponseReceived, ToolCallCompleted, ToolCallStarted
from agentica.tools.call import FunctionCall
from agentica.tools.commands import CommandBackend
from agentica.tools.context import RunContext
from agentica.tools.files import FileBackend

__all__ = ["GUARDED_TOOLS", "MODES", "ACPServer", "SessionSetup"]

log = logging.getLogger(__name__)

# edits, commands, and a subtask (a subagent works with the same tools, unasked)
GUARDED_TOOLS = ("write_file", "edit_file", "execute", "run_python", "start_command", "task")
MODES = (
    SessionMode(id="ask", name="Ask", description="Ask before each edit and command"),
    SessionMode(id="auto", name="Auto", description="Edit files and run commands without asking"),
)
_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow this tool", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
]


@dataclass(frozen=True, slots=True)
class SessionSetup:
    """What a session's agent is built from: the editor's folder, the session's id, its file
    backend and command backend (the editor's, or ``None`` for local commands), the tools of
    the MCP servers the editor named, and the capability that asks the editor's permission."""

    cwd: str
    session_id: str
    files: FileBackend
    commands: CommandBackend | None
    tools: Sequence[MCPServer]
    capabilities: Sequence[Capability]


AgentFactory = Callable[[SessionSetup], Agent[Any]]


@dataclass(slots=True)
class _Session:
    id: str
    cwd: str
    agent: Agent[Any]
    files: FileBackend
    mode: str
    servers: list[MCPServer]
    allowed: set[str] = field(default_factory=set)
    turn: asyncio.Task[PromptResponse] | None = None


class _EditorApproval(Capability):
    """Edits and commands wait for the editor's permission in the ``ask`` mode (unless the
    user allowed that tool for the session)."""

    name = "editor_approval"

    def __init__(self) -> None:
        self.session: _Session | None = None
        self.rules = HumanApproval(dict.fromkeys(GUARDED_TOOLS, True))

    async def needs_approval(self, ctx: RunContext[Any], call: FunctionCall) -> PendingCall | None:
        session = self.session
        if session is None or session.mode != "ask" or call.name in session.allowed:
            return None
        return await self.rules.needs_approval(ctx, call)


class ACPServer:
    """The ACP agent side (``acp.run_agent(ACPServer(...))``): sessions, prompts, cancellation.

    Args:
        new_agent: builds a session's agent from its ``SessionSetup`` (``agentica acp`` builds
            a ``DeepAgent`` on the chosen model with the framework's storage).
        storage: where sessions are kept (to check that a session to load exists).
        mode: the mode of new sessions, ``"ask"`` or ``"auto"``.
    """

    def __init__(
        self, new_agent: AgentFactory, *, mode: str = "ask", name: str = "agentica"
    ) -> None:
        if mode not in {m.id for m in MODES}:
            raise ValueError(f"mode {mode!r}: use one of {[m.id for m in MODES]}")
        self.new_agent = new_agent
        self.mode = mode
        self.name = name
        self.conn: Any = None
        self.client = ClientCapabilities()
        self.sessions: dict[str, _Session] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # ----------------------------------------------------------------- lifecycle

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **_: Any,
    ) -> InitializeResponse:
        from agentica import __version__

        self.client = client_capabilities or ClientCapabilities()
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
            ),
            agent_info=Implementation(name=self.name, title="agentica", version=__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None

    async def new_session(
        self,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: list[Any] | None = None,
        **_: Any,
    ) -> NewSessionResponse:
        session = await self._open(uuid.uuid4().hex, cwd, mcp_servers or [])
        return NewSessionResponse(session_id=session.id, modes=self._modes(session))

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: list[Any] | None = None,
        additional_directories: list[str] | None = None,
        **_: Any,
    ) -> LoadSessionResponse:
        session = self.sessions.get(session_id) or await self._open(
            session_id, cwd, mcp_servers or []
        )
        await session.agent.load()
        if not session.agent.memory.runs:
            self.sessions.pop(session_id, None)
            raise RequestError.resource_not_found(f"session:{session_id}")
        for update in updates.replay(
            session.agent.memory.runs, session.cwd, session.agent.memory.state.get("todos")
        ):
            await self.conn.session_update(session_id=session.id, update=update)
        return LoadSessionResponse(modes=self._modes(session))

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> None:
        session = self._session(session_id)
        if mode_id not in {m.id for m in MODES}:
            raise RequestError.invalid_params({"modeId": mode_id, "modes": [m.id for m in MODES]})
        session.mode = mode_id

    async def _open(self, session_id: str, cwd: str, servers: list[Any]) -> _Session:
        if not os.path.isabs(cwd) or not await asyncio.to_thread(os.path.isdir, cwd):
            raise RequestError.invalid_params(
                {"cwd": cwd, "reason": "not an existing absolute folder"}
            )
        fs = self.client.fs
        files: FileBackend = EditorFiles(
            self.conn,
            session_id,
            cwd,
            read=bool(fs and fs.read_text_file),
            write=bool(fs and fs.write_text_file),
        )
        commands = EditorCommands(self.conn, session_id, cwd) if self.client.terminal else None
        tools = [_mcp_server(spec) for spec in servers]
        approval = _EditorApproval()
        setup = SessionSetup(cwd, session_id, files, commands, tools, [approval])
        session = _Session(session_id, cwd, self.new_agent(setup), files, self.mode, tools)
        approval.session = session
        self.sessions[session_id] = session
        return session

    def _modes(self, session: _Session) -> SessionModeState:
        return SessionModeState(current_mode_id=session.mode, available_modes=list(MODES))

    def _session(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "reason": "unknown session"}
            )
        return session

    async def aclose(self) -> None:
        """Stop the turns still running and close the sessions' MCP servers."""
        for session in self.sessions.values():
            if session.turn is not None:
                session.turn.cancel()
            for server in session.servers:
                await server.aclose()

    # ----------------------------------------------------------------- prompts

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> PromptResponse:
        session = self._session(session_id)
        text = updates.prompt_text(prompt)
        if not text.strip():
            raise RequestError.invalid_params({"reason": "the prompt has no text"})
        running = session.turn
        if running is not None and not running.done():
            if not running.cancelling():
                raise RequestError.invalid_request(
                    {"reason": "a prompt of this session is running"}
                )
            await asyncio.wait({running})  # a cancelled turn still unwinding: this one follows
        turn = asyncio.create_task(_Turn(self, session).run(text))
        session.turn = turn
        try:
            return await turn
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if turn.cancelled() and (current is None or not current.cancelling()):
                return PromptResponse(stop_reason="cancelled")
            turn.cancel()  # this handler itself was cancelled (the editor went away)
            raise
        finally:
            if session.turn is turn:
                session.turn = None

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.turn is not None:
            session.turn.cancel()


class _Turn:
    """One prompt of a session: the run streamed to the editor, pauses asked about."""

    def __init__(self, server: ACPServer, session: _Session) -> None:
        self.server = server
        self.session = session
        self.texted = False
        self.shown: set[str] = set()

    async def send(self, update: Any) -> None:
        await self.server.conn.session_update(session_id=self.session.id, update=update)

    async def run(self, text: str) -> PromptResponse:
        agent = self.session.agent
        stream = agent.run_stream(text)
        try:
            while True:
                async with stream:
                    async for event in stream:
                        await self.show(event)
                response = stream.response
                if response.stop_reason != "paused":
                    break
                decisions = {p.call_id: await self.ask(p) for p in response.pending}
                stream = agent.resume_stream(decisions)
        except LimitExceeded as exc:
            await self.send(update_agent_message_text(f"\n\n[stopped: {exc}]"))
            if "token" in exc.limit:
                return PromptResponse(stop_reason="max_tokens")
            return PromptResponse(stop_reason="max_turn_requests")
        except AgenticaError as exc:
            raise RequestError.internal_error({"details": f"{type(exc).__name__}: {exc}"}) from None
        return PromptResponse(stop_reason="end_turn")

    async def show(self, event: object) -> None:
        if isinstance(event, TextDelta):
            self.texted = True
            await self.send(update_agent_message_text(event.text))
        elif isinstance(event, ReasoningDelta):
            await self.send(update_agent_thought_text(event.text))
        elif isinstance(event, ModelResponseReceived):
            if not self.texted and event.message.content:  # a reply that did not stream
                await self.send(update_agent_message_text(str(event.message.content)))
            self.texted = False
        elif isinstance(event, ToolCallStarted):
            await self.started(event.call)
        elif isinstance(event, ToolCallCompleted):
            await self.completed(event.call)

    async def _diff(self, name: str, arguments: dict[str, Any]) -> list[Any]:
        """An edit's diff against the file as it is now (before the call runs)."""
        path = arguments.get("path")
        if updates.tool_kind(name) != "edit" or not isinstance(path, str):
            return []
        try:
            old: str | None = await self.session.files.read(path)
        except Exception:
            old = None
        new = updates.edit_preview(name, arguments, old)
        return [] if new is None else [updates.diff(self.session.cwd, path, old, new)]

    async def started(self, call: FunctionCall) -> None:
        arguments = updates.arguments_of(call.call.arguments)
        if call.id in self.shown:  # asked about already (a rejected call is not run)
            if call.status == "pending":
                await self.send(update_tool_call(call.id, status="in_progress"))
            return
        self.shown.add(call.id)
        await self.send(
            start_tool_call(
                call.id,
                updates.tool_title(call.name, arguments),
                kind=updates.tool_kind(call.name),
                status="in_progress",
                locations=updates.locations(self.session.cwd, arguments),
                raw_input=arguments,
                content=await self._diff(call.name, arguments),
            )
        )

    async def completed(self, call: FunctionCall) -> None:
        failed = call.status == "error"
        content = [tool_content(text_block(call.content[: updates.RESULT_CHARS]))]
        if updates.tool_kind(call.name) == "edit" and not failed:
            content = []  # the diff shown when it started stays
        await self.send(
            update_tool_call(
                call.id,
                status="failed" if failed else "completed",
                content=content or None,
            )
        )
        if call.name == "write_todos" and not failed:
            entries = updates.plan_of(self.session.agent.memory.state.get("todos"))
            await self.send(update_plan(entries))

    async def ask(self, pending: PendingCall) -> Decision:
        """The editor's permission for one paused call."""
        arguments = pending.arguments
        title = updates.tool_title(pending.tool, arguments)
        kind = updates.tool_kind(pending.tool)
        where = updates.locations(self.session.cwd, arguments)
        diff = await self._diff(pending.tool, arguments)
        if pending.call_id not in self.shown:
            self.shown.add(pending.call_id)
            await self.send(
                start_tool_call(
                    pending.call_id,
                    title,
                    kind=kind,
                    status="pending",
                    locations=where,
                    raw_input=arguments,
                    content=diff,
                )
            )
        answer = await self.server.conn.request_permission(
            session_id=self.session.id,
            tool_call=ToolCallUpdate(
                tool_call_id=pending.call_id,
                title=title,
                kind=kind,
                status="pending",
                locations=where,
                raw_input=arguments,
                content=diff or None,
            ),
            options=_OPTIONS,
        )
        outcome = answer.outcome
        if getattr(outcome, "outcome", None) != "selected":  # the turn was cancelled
            raise asyncio.CancelledError
        chosen = getattr(outcome, "option_id", "")
        if chosen == "allow_always":
            self.session.allowed.add(pending.tool)
        if chosen in ("allow_once", "allow_always"):
            return Decision.approve()
        return Decision.reject("The user rejected this call in the editor; do something else.")


def _mcp_server(spec: Any) -> MCPServer:
    """An MCP server the editor asked the session to use."""
    kind = getattr(spec, "type", None)
    if kind == "http":
        return MCPServer.http(
            spec.url, headers={h.name: h.value for h in spec.headers}, name=spec.name
        )
    if kind == "sse":
        return MCPServer.sse(
            spec.url, headers={h.name: h.value for h in spec.headers}, name=spec.name
        )
    env = {e.name: e.value for e in getattr(spec, "env", None) or []}
    return MCPServer.stdio(spec.command, list(spec.args), env=env, name=spec.name)
