"""Approval modes: how much a coding agent may do without asking (``ApprovalMode``).

``read-only`` offers only the tools that read and plan; ``ask`` pauses the run before every
write (described by its diff) and every other call that is not a read (a command by its command
line; an MCP server's tool too); ``auto-edit`` writes freely and asks before the rest;
``full-auto`` asks nothing. Subagents (``task``) work unasked: only ``full-auto`` offers them.
A tool allowed "always" is not asked about again in this session. The run pauses through
``agentica.run.approval``; the caller (``agentica code``) shows each ``PendingCall.description``
and answers with decisions; a rejected call never runs and the model reads the reason.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection
from typing import Any, Literal, get_args

from agentica.deep.files import plan_edit
from agentica.errors import AgenticaError, ToolError, UsageError
from agentica.run.approval import PendingCall
from agentica.run.capability import Capability
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext

__all__ = ["EDIT_TOOLS", "READ_TOOLS", "RUN_TOOLS", "UNSUPERVISED", "ApprovalMode", "Mode"]

Mode = Literal["read-only", "ask", "auto-edit", "full-auto"]
MODES: tuple[Mode, ...] = get_args(Mode)
EDIT_TOOLS = frozenset({"write_file", "edit_file"})
"""Tools that change files (asked about in ``ask``; free in ``auto-edit``)."""
READ_TOOLS = frozenset(
    {"ls", "read_file", "glob", "grep", "read_todos", "write_todos", "wait_command",
     "list_commands", "search_knowledge_base"}
)  # fmt: skip
"""Tools that only read (or keep the plan): never asked about. Every other tool (commands,
code, MCP servers' tools, ...) is asked about in ``ask`` and ``auto-edit``."""
RUN_TOOLS = frozenset({"execute", "run_python", "start_command", "stop_command", "run_cell"})
"""The built-in tools that run code (asked about in ``ask`` and ``auto-edit``)."""
UNSUPERVISED = frozenset({"task"})
"""Tools whose work cannot be asked about call by call (a subagent's own writes and commands):
offered only in ``full-auto``."""
_DIFF_LINES = 60


def _arguments(call: FunctionCall) -> dict[str, Any]:
    try:
        value = json.loads(call.call.arguments or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ApprovalMode(Capability):
    """Ask before writes and commands according to ``mode`` (switch it with ``set_mode``)."""

    name = "approval_mode"

    def __init__(self, mode: Mode = "ask") -> None:
        self.mode: Mode = "ask"
        self.set_mode(mode)
        self.always: set[str] = set()

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise UsageError(f"unknown approval mode {mode!r}; the modes are {', '.join(MODES)}")
        self.mode = mode

    def allow_always(self, tool: str) -> None:
        """Do not ask about ``tool`` again (the person answered "always")."""
        self.always.add(tool)

    def asks(self, tool: str) -> bool:
        """Whether a call of ``tool`` waits for a decision in the current mode."""
        if tool in self.always or self.mode == "full-auto" or tool in READ_TOOLS:
            return False
        return not (tool in EDIT_TOOLS and self.mode == "auto-edit")

    async def allowed_tools(self, ctx: RunContext[Any]) -> Collection[str] | None:
        if self.mode == "full-auto":
            return None
        if self.mode == "read-only":
            return [name for name in ctx.functions if name in READ_TOOLS]
        return [name for name in ctx.functions if name not in UNSUPERVISED]

    async def needs_approval(self, ctx: RunContext[Any], call: FunctionCall) -> PendingCall | None:
        if not self.asks(call.name):
            return None
        arguments = _arguments(call)
        return PendingCall(
            call_id=call.id,
            tool=call.name,
            arguments=arguments,
            decisions=("approve", "reject"),
            description=await _describe(ctx, call.name, arguments),
        )


async def _describe(ctx: RunContext[Any], tool: str, arguments: dict[str, Any]) -> str:
    """What the person approves: a write's diff, a command's command line."""
    if tool in ("execute", "start_command"):
        return f"$ {arguments.get('command', '')}"
    if tool in ("run_python", "run_cell"):
        return f"{tool}:\n{arguments.get('code', '')}"
    if tool == "task":
        return f"a subagent ({arguments.get('agent', 'general-purpose')}): " + str(
            arguments.get("description", "")
        )
    path = str(arguments.get("path") or arguments.get("file_path") or "")
    before = await _current(ctx, path)
    if tool == "write_file":
        after = str(arguments.get("content", ""))
    else:  # edit_file: the replacement the tool will make (it matches as plan_edit does)
        old, new = str(arguments.get("old_string", "")), str(arguments.get("new_string", ""))
        try:
            edit = plan_edit(path, before, old, new, replace_all=bool(arguments.get("replace_all")))
        except ToolError as exc:  # the tool will refuse it: say why, with what it was given
            return f"edit_file {path} will fail: {exc}\nreplace\n{old}\nwith\n{new}"
        after = edit.text
    name = path.lstrip("/")
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), f"a/{name}", f"b/{name}", lineterm=""
    )
    diff = list(lines)
    if len(diff) > _DIFF_LINES:
        diff = [*diff[:_DIFF_LINES], f"... ({len(diff) - _DIFF_LINES} more diff lines)"]
    return "\n".join(diff) or f"{tool} {path}: no change"


async def _current(ctx: RunContext[Any], path: str) -> str:
    backend = ctx.files
    if backend is None or not path:
        return ""
    try:
        return await backend.read(path) if await backend.stat(path) is not None else ""
    except AgenticaError:
        return ""
