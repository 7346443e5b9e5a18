"""One ``agentica code`` process's setup (``Setup``: folder, project, model, storage, session,
agent, checkpoints, approval mode) and the non-interactive run (``-p``).

The command's parser and entry are in ``code_cmd`` (cheap to import); this module loads the
agent stack. Trust of a folder's MCP servers and model endpoint is remembered in the data
directory (``code_trusted_mcp.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from rich.console import Console

from agentica._paths import data_dir
from agentica.deep import Checkpoints, DeepAgent, PythonKernel, Skills, load_project
from agentica.deep.backends import FilesystemBackend
from agentica.deep.modes import ApprovalMode
from agentica.deep.project import IgnoringBackend, Project, ProjectMCPServer
from agentica.errors import AgenticaError, LimitExceeded, StorageError, UsageError
from agentica.limits import RunLimits
from agentica.mcp import MCPServer
from agentica.models.base import Model, ModelSettings
from agentica.models.openai import OpenAILike
from agentica.run.approval import Decision
from agentica.run.capability import Capability
from agentica.run.events import RunEvent
from agentica.run.result import RunResponse
from agentica.storage import Storage, open_storage

__all__ = [
    "EXIT_DONE", "EXIT_FAILED", "EXIT_LIMIT", "EXIT_USAGE", "Setup", "folder_user", "model_for",
    "noninteractive", "project_endpoint_trusted", "save_checkpoints", "settings_for", "setup",
    "trust_project",
    "trust_servers", "untrusted_servers",
]  # fmt: skip

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_LIMIT = 0, 1, 2, 3


def folder_user(root: Path) -> str:
    """The storage user a folder's sessions belong to (one per folder)."""
    return "code:" + hashlib.sha256(str(root).encode()).hexdigest()[:16]


@dataclass(slots=True)
class Setup:
    """What one ``agentica code`` process works with."""

    root: Path
    project: Project
    model: Model
    storage: Storage
    agent: DeepAgent[str]
    checkpoints: Checkpoints
    mode: ApprovalMode
    kernel: PythonKernel | None
    session_id: str
    servers: list[MCPServer]
    sandbox: str = "none"

    async def aclose(self) -> None:
        if self.kernel is not None:
            await self.kernel.aclose()
        for server in self.servers:
            await server.aclose()
        await self.model.aclose()
        await self.storage.aclose()


def model_for(args: argparse.Namespace, project: Project) -> Model:
    settings = project.settings
    name = args.model or settings.model
    if args.gateway:
        if not args.token:
            raise UsageError("--gateway needs --token (or $AGENTICA_TOKEN): your class token")
        base = args.gateway.rstrip("/")
        return OpenAILike(id=name or "default", base_url=f"{base}/v1", api_key=args.token)
    # a folder's config may name a server only once trusted: a key would be sent there
    base_url = args.base_url or (settings.base_url if project_endpoint_trusted(project) else None)
    from agentica.cli.main import build_model

    return build_model(name, base_url, args.api_key)


async def _session(args: argparse.Namespace, storage: Storage, user: str) -> str:
    if args.resume:
        if await storage.load_session(user, args.resume) is None:
            raise UsageError(f"no session {args.resume!r} in this folder")
        return str(args.resume)
    if args.resume_latest:
        sessions = await storage.list_sessions(user, limit=1)
        if not sessions:
            raise UsageError("no earlier session in this folder to continue")
        return sessions[0].session_id
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]


def _trust_file() -> Path:
    return data_dir() / "code_trusted_mcp.json"


def _fingerprint(root: Path, server: ProjectMCPServer) -> str:
    data = [str(root), server.name, list(server.command), server.url, sorted(server.env.items())]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:24]


def _trusted_set() -> set[str]:
    try:
        return set(json.loads(_trust_file().read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        return set()


def trust_servers(root: Path, servers: Sequence[ProjectMCPServer]) -> None:
    """Remember that the person trusts ``servers`` of this folder (as they are configured)."""
    path = _trust_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    known = _trusted_set() | {_fingerprint(root, s) for s in servers}
    path.write_text(json.dumps(sorted(known)), encoding="utf-8")


def untrusted_servers(project: Project) -> list[ProjectMCPServer]:
    """The project's MCP servers the person has not trusted yet (changed ones included)."""
    known = _trusted_set()
    return [s for s in project.mcp_servers if _fingerprint(project.root, s) not in known]


def _mcp_server(root: Path, server: ProjectMCPServer) -> MCPServer:
    if server.url:
        return MCPServer.http(server.url, name=server.name)
    command, *rest = server.command
    return MCPServer.stdio(command, rest, env=dict(server.env) or None, cwd=root,
                           name=server.name)  # fmt: skip


_STRICTNESS = {"read-only": 0, "ask": 1, "auto-edit": 2, "full-auto": 3}


def _mode(args: argparse.Namespace, project: Project, default: str) -> str:
    """The approval mode: the command line's; else the project's if it is not looser than the
    default (a cloned folder cannot turn the questions off); else the default."""
    if args.approval:
        return str(args.approval)
    wanted = project.settings.approval
    if wanted and _STRICTNESS[wanted] <= _STRICTNESS[default]:
        return wanted
    return default


def _endpoint_key(project: Project) -> str:
    data = [str(project.root), "base_url", project.settings.base_url]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()[:24]


def project_endpoint_trusted(project: Project) -> bool:
    """Whether the project's ``base_url`` (if any) was trusted."""
    return not project.settings.base_url or _endpoint_key(project) in _trusted_set()


def trust_project(project: Project) -> None:
    """Trust the project's MCP servers and model endpoint, as they are configured."""
    trust_servers(project.root, project.mcp_servers)
    if project.settings.base_url:
        path = _trust_file()
        path.write_text(json.dumps(sorted(_trusted_set() | {_endpoint_key(project)})))


async def setup(args: argparse.Namespace, default_mode: str) -> Setup:
    """The agent for ``args``: its folder's project context, model, storage and session; of the
    project's MCP servers only those the person trusted (``--trust-mcp``, or a yes once)."""
    root = await asyncio.to_thread(lambda: Path(args.folder).expanduser().resolve())
    if not await asyncio.to_thread(root.is_dir):
        raise UsageError(f"{args.folder} is not a folder")
    project = await asyncio.to_thread(load_project, root)
    if args.trust_mcp:
        await asyncio.to_thread(trust_project, project)
    settings = project.settings
    mode = ApprovalMode(_mode(args, project, default_mode))  # type: ignore[arg-type]
    chosen = settings.sandbox if settings.sandbox != "none" else None  # (only a stricter one)
    sandbox: Literal["none", "bwrap", "auto"] = (
        args.sandbox or chosen or ("auto" if mode.mode == "full-auto" else "none")
    )
    storage = open_storage(args.storage)
    model: Model | None = None
    try:
        user = folder_user(root)
        session_id = await _session(args, storage, user)
        model = model_for(args, project)
        checkpoints = await _checkpoints(storage, user, session_id, root)
        kernel = PythonKernel(root) if args.kernel or settings.kernel else None
        capabilities: list[Capability] = [mode, *([kernel] if kernel else [])]
        untrusted = await asyncio.to_thread(untrusted_servers, project)
        servers = [_mcp_server(root, m) for m in project.mcp_servers if m not in untrusted]
        skills = Skills(project.root) if project.skills_dir else None
        instructions = "\n\n".join(t for t in (project.instructions, settings.instructions) if t)
        max_turns = args.max_turns or settings.max_turns or 40
        temperature = settings.temperature if args.temperature is None else args.temperature
        agent: DeepAgent[str] = DeepAgent(
            model=model, workspace=root, backend=IgnoringBackend(checkpoints, root),
            sandbox=sandbox, skills=skills, tools=servers,
            instructions=instructions or None, capabilities=capabilities, name="agentica-code",
            model_settings=settings_for(model, temperature),
            limits=RunLimits(max_turns=max_turns), storage=storage, user_id=user,
            session_id=session_id,
        )  # fmt: skip
        await agent.load()  # (a resumed session's turns, todos and cost show before a task)
    except BaseException:
        if model is not None:
            await model.aclose()
        await storage.aclose()  # (a bad --resume id or model leaves nothing open)
        raise
    return Setup(root, project, model, storage, agent, checkpoints, mode, kernel, session_id,
                 servers, sandbox)  # fmt: skip


def settings_for(model: Model, temperature: float | None) -> ModelSettings:
    """The agent's model settings: on the embedded model one call per step and short replies
    (as ``agentica demo``: a small model that sends several calls at once writes results it
    has not seen yet, and a long reply costs minutes on a CPU)."""
    from agentica.models.local import LocalModel

    chosen = ModelSettings(temperature=temperature)
    if isinstance(model, LocalModel):
        return ModelSettings(max_tokens=768, parallel_tool_calls=False).merged(chosen)
    return chosen


_CHECKPOINTS_KEY = "agentica.code.checkpoints"


async def _checkpoints(storage: Storage, user: str, session_id: str, root: Path) -> Checkpoints:
    """The session's checkpoints: those saved with it (undo works after ``--resume``), or new."""
    files = FilesystemBackend(root)  # (undo deletes through it)
    saved = await storage.get_variable(user, session_id, _CHECKPOINTS_KEY)
    if saved is not None:
        with contextlib.suppress(UsageError):  # (an unreadable snapshot: start afresh)
            return Checkpoints.restore(files, saved.value)
    return Checkpoints(files)


async def save_checkpoints(s: Setup) -> str | None:
    """Store the session's checkpoints with it; why not, if they could not be."""
    try:
        await s.storage.set_variable(
            s.agent.user_id, s.session_id, _CHECKPOINTS_KEY, s.checkpoints.snapshot(),
            summary="the originals of the files agentica code changed, per turn (for /undo)",
        )  # fmt: skip
    except StorageError as exc:
        return f"undo will not work after --resume: {exc}"
    return None


def _event_json(event: RunEvent) -> dict[str, Any] | None:
    """One ``stream-json`` line for ``event`` (``None``: not shown)."""
    kind = event.kind
    if kind == "text_delta":
        return {"type": kind, "text": event.text}  # type: ignore[union-attr]
    if kind == "tool_call_started":
        call = event.call  # type: ignore[union-attr]
        return {"type": kind, "id": call.id, "tool": call.name, "arguments": call.call.arguments}
    if kind == "tool_call_completed":
        call = event.call  # type: ignore[union-attr]
        return {"type": kind, "id": call.id, "tool": call.name, "status": call.status,
                "result": call.content[:2000]}  # fmt: skip
    if kind == "model_request_started":
        return {"type": kind, "turn": event.turn, "context_tokens": event.context_tokens}  # type: ignore[union-attr]
    if kind in ("run_started", "answer_sent_back", "context_compacted"):
        return {"type": kind}
    return None


class _Output:
    """Where a non-interactive run reports: progress to stderr, results to stdout."""

    def __init__(self, kind: str, stdout: TextIO) -> None:
        from agentica.cli.render import EventPrinter

        self.kind = kind
        self.stdout = stdout
        self.printer = EventPrinter(Console(stderr=True, highlight=False))

    def event(self, event: RunEvent) -> None:
        self.printer(event)
        if self.kind == "stream-json":
            line = _event_json(event)
            if line is not None:
                self.stdout.write(json.dumps(line) + "\n")
                self.stdout.flush()

    def result(self, data: dict[str, Any]) -> None:
        if self.kind == "text":
            if data.get("result"):
                self.stdout.write(str(data["result"]).rstrip("\n") + "\n")
        else:
            self.stdout.write(json.dumps({"type": "result", **data}) + "\n")
        self.stdout.flush()


async def _run_task(s: Setup, task: str, out: _Output) -> RunResponse[str]:
    """Run ``task``; a call that would need a person's decision is refused with the reason."""
    s.checkpoints.begin_turn(task[:60])
    stream = s.agent.run_stream(task)
    while True:
        async with stream:
            async for event in stream:
                out.event(event)
        response = stream.response
        if response.stop_reason != "paused":
            return response
        decisions = {
            p.call_id: Decision.reject(
                f"{p.tool} was not run: this is a non-interactive run in {s.mode.mode} mode. "
                "Do without it, or say what should be run."
            )
            for p in response.pending
        }
        stream = s.agent.resume_stream(decisions)


async def noninteractive(args: argparse.Namespace, task: str, stdout: TextIO) -> int:
    out = _Output(args.output, stdout)
    s = await setup(args, "auto-edit")
    err = Console(stderr=True, highlight=False)
    for server in await asyncio.to_thread(untrusted_servers, s.project):
        err.print(
            f"MCP server {server.name!r} of .agentica/config.toml not started: it is not "
            "trusted yet (answer yes once in `agentica code`, or pass --trust-project)"
        )
    if not await asyncio.to_thread(project_endpoint_trusted, s.project):
        err.print(
            "the base_url of .agentica/config.toml is not used: it is not trusted yet "
            "(answer yes once in `agentica code`, or pass --trust-project)"
        )
    started = time.monotonic()
    data: dict[str, Any] = {"session_id": s.session_id}
    code = EXIT_DONE
    first_turn = s.checkpoints.turn + 1  # (a resumed session's earlier turns are not this run's)
    try:
        response = await _run_task(s, task, out)
        data.update(result=response.content or "", stop_reason=response.stop_reason,
                    usage=_usage(response), is_error=False)  # fmt: skip
    except LimitExceeded as exc:
        code = EXIT_LIMIT
        data.update(result="", is_error=True, error=f"{type(exc).__name__}: {exc}")
    except AgenticaError as exc:
        code = EXIT_FAILED
        data.update(result="", is_error=True, error=f"{type(exc).__name__}: {exc}")
    finally:
        data.update(duration_s=round(time.monotonic() - started, 2),
                    changed_files=[p.lstrip("/") for p in s.checkpoints.changed(first_turn)],
                    exit_code=code,
                    resume=f"agentica code {s.root} --resume {s.session_id}")  # fmt: skip
        note = await save_checkpoints(s)
        if note:
            err.print(note, highlight=False)
        await s.aclose()
    if data.get("error"):
        err.print(f"[bold red]{data['error']}[/]", highlight=False)
    out.result(data)
    await _summary(s.root, data, err)
    return code


def _usage(response: RunResponse[str]) -> dict[str, Any]:
    u = response.usage
    return {"requests": u.requests, "tool_calls": u.tool_calls, "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens, "cost_usd": u.cost}  # fmt: skip


async def _summary(root: Path, data: dict[str, Any], err: Console) -> None:
    """The exit lines on stderr: what changed (``git diff --stat`` in a repository) and how to
    resume."""
    changed = data.get("changed_files") or []
    if changed:
        err.print(f"changed: {', '.join(changed)}", highlight=False)
    if await asyncio.to_thread((root / ".git").exists):
        process = await asyncio.create_subprocess_exec(
            "git", "-C", str(root), "diff", "--stat",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        stat, _ = await process.communicate()
        if stat.strip():
            err.print(stat.decode(errors="replace").rstrip(), highlight=False, markup=False)
    err.print(f"resume: {data['resume']}", highlight=False)
