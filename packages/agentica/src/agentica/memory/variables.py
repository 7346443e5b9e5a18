"""The variable space and evidence archive (the Synthos design): results the agent can cite.

``VariableSpace`` is a capability that gives the agent ``var_*`` tools over JSON values kept in
the agent's storage, shows it a directory of them each turn, and archives every tool call's output
as read-only evidence, so a conclusion can cite the exact output it rests on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from agentica.context.tokens import estimate_tokens
from agentica.errors import StorageError, ToolError, UsageError
from agentica.run.capability import Capability
from agentica.storage.base import Storage, VariableInfo
from agentica.storage.memory import InMemoryStorage
from agentica.tools.call import FunctionCall
from agentica.tools.context import RunContext
from agentica.tools.function import Function, tool
from agentica.tools.toolkit import ToolLike

__all__ = ["EVIDENCE_PREFIX", "VariableSpace"]

EVIDENCE_PREFIX = "evidence."
_ARCHIVE = "evidence.tool_call."
_VARIABLE_TOOLS = frozenset({"var_set", "var_get", "var_list", "var_delete"})


def _preview(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class VariableSpace(Capability):
    """Variables and archived tool outputs the agent can list, read and cite.

    The agent gets four tools (``var_set``, ``var_get``, ``var_list``, ``var_delete``) over JSON
    values kept in the storage, per (user, session). Before every model call a system-message
    slot shows the directory of variables (keys and summaries, within ``directory_tokens``); it
    is replaced each turn, never appended to the history.

    With ``archive=True`` (the default) every tool call's output is archived automatically as
    ``evidence.tool_call.<id>`` (tool, arguments, success, output or error, time) and the tool
    message the model sees ends with ``[__ref: evidence.tool_call.<id>]``, so a conclusion can
    cite the exact output it rests on, and ``var_get(ref)`` returns that original output even
    after the conversation was compacted. Evidence is read-only for the model. With
    ``require_archive=True`` a call whose output could not be archived fails instead of
    producing an unauditable result.

    Args:
        storage: where values live; default: the agent's storage, or a private in-memory store.
        archive: archive every tool call's output as evidence.
        require_archive: fail a call whose output could not be archived.
        directory_tokens: the token budget of the directory shown each turn.
    """

    name = "variables"

    def __init__(
        self,
        *,
        storage: Storage | None = None,
        archive: bool = True,
        require_archive: bool = False,
        directory_tokens: int = 400,
    ) -> None:
        if require_archive and not archive:
            raise UsageError("require_archive=True needs archive=True")
        self.storage = storage
        self.archive = archive
        self.require_archive = require_archive
        self.directory_tokens = directory_tokens
        self._fallback = InMemoryStorage()
        self._tools = self._build_tools()

    def _store(self, ctx: RunContext[Any]) -> tuple[Storage, str, str]:
        storage = self.storage or ctx.storage or self._fallback
        return storage, ctx.user_id or "default", ctx.session_id or "default"

    # ----------------------------------------------------------------- tools

    def tools(self) -> Sequence[ToolLike]:
        return self._tools

    def _build_tools(self) -> list[Function]:
        space = self

        async def var_set(ctx: RunContext[Any], key: str, value: Any, summary: str = "") -> str:
            """Save a JSON value under a key, to reuse or cite it later.

            Args:
                key: a short dotted name, e.g. "sales.totals".
                value: any JSON value (text, number, list, object).
                summary: one line saying what the value is (shown in the variable list).
            """
            if key.startswith(EVIDENCE_PREFIX):
                raise ToolError(f"keys starting with {EVIDENCE_PREFIX!r} are archived evidence "
                                "and cannot be changed; choose another key")  # fmt: skip
            storage, user, session = space._store(ctx)
            try:
                info = await storage.set_variable(
                    user, session, key, value, summary=summary or _preview(value)
                )
            except StorageError as exc:
                raise ToolError(str(exc)) from None
            return f"saved {key} ({info.size} bytes)"

        async def var_get(ctx: RunContext[Any], key: str) -> Any:
            """Read the value of a variable or of archived evidence (a __ref).

            Args:
                key: the variable's key, or a reference like "evidence.tool_call.call_1".
            """
            storage, user, session = space._store(ctx)
            variable = await storage.get_variable(user, session, key.strip())
            if variable is None:
                raise ToolError(f"no variable {key!r}; call var_list to see the keys")
            return variable.value

        async def var_list(ctx: RunContext[Any], prefix: str = "", limit: int = 50) -> str:
            """List variables (keys and summaries), optionally only those starting with prefix.

            Args:
                prefix: only keys starting with this text, e.g. "evidence.".
                limit: the most keys to list (1-200).
            """
            storage, user, session = space._store(ctx)
            infos = await storage.list_variables(
                user, session, prefix=prefix, limit=max(1, min(limit, 200))
            )
            if not infos:
                return f"no variables{f' starting with {prefix!r}' if prefix else ''}"
            return "\n".join(f"{i.key}: {i.summary or ''} ({i.size} bytes)" for i in infos)

        async def var_delete(ctx: RunContext[Any], key: str) -> str:
            """Delete a variable.

            Args:
                key: the variable's key.
            """
            if key.startswith(EVIDENCE_PREFIX):
                raise ToolError("archived evidence cannot be deleted")
            storage, user, session = space._store(ctx)
            if not await storage.delete_variable(user, session, key):
                raise ToolError(f"no variable {key!r}; call var_list to see the keys")
            return f"deleted {key}"

        return [tool(fn) for fn in (var_set, var_get, var_list, var_delete)]

    # ----------------------------------------------------------------- hooks

    async def instructions(self, ctx: RunContext[Any]) -> str | None:
        text = (
            "Variables: var_set saves a value under a key, var_get reads it, var_list lists keys."
        )
        if self.archive:
            text += (
                " Every tool result ends with [__ref: KEY]: cite that key when a conclusion rests "
                "on the result, and var_get(KEY) shows the full original output again."
            )
        return text

    async def system_slot(self, ctx: RunContext[Any]) -> str | None:
        storage, user, session = self._store(ctx)
        own = await storage.list_variables(user, session, limit=200)
        own = [i for i in own if not i.key.startswith(EVIDENCE_PREFIX)]
        evidence = await storage.list_variables(user, session, prefix=EVIDENCE_PREFIX, limit=201)
        if not own and not evidence:
            return None
        lines = ["Variables (read with var_get):"]
        used = estimate_tokens(lines[0])
        shown = 0
        for info in own:
            line = f"- {info.key}: {info.summary or ''} ({info.size} bytes)"
            cost = estimate_tokens(line)
            if used + cost > self.directory_tokens:
                break
            lines.append(line)
            used += cost
            shown += 1
        if shown < len(own):
            lines.append(f"- ... {len(own) - shown} more: var_list(prefix) shows them")
        if evidence:
            count = f"{len(evidence)}" if len(evidence) <= 200 else "more than 200"
            lines.append(f"- {count} archived tool outputs under {EVIDENCE_PREFIX}*")
        return "\n".join(lines)

    async def after_tools(self, ctx: RunContext[Any], calls: Sequence[FunctionCall]) -> None:
        if not self.archive:
            return
        storage, user, session = self._store(ctx)
        now = time.time()
        for call in calls:
            if call.name in _VARIABLE_TOOLS:
                continue
            key = f"{_ARCHIVE}{call.id}"
            try:
                arguments: Any = json.loads(call.call.arguments or "{}")
            except ValueError:
                arguments = call.call.arguments
            record = {
                "tool": call.name,
                "arguments": arguments,
                "success": call.status == "success",
                "output" if call.status == "success" else "error": call.content,
                "time": now,
                "duration": round(call.duration, 6),
            }
            try:
                info: VariableInfo = await storage.set_variable(
                    user, session, key, record, summary=f"{call.name} {_preview(call.content, 40)}"
                )
            except StorageError as exc:
                if self.require_archive:
                    call.fail(
                        f"The result of '{call.name}' could not be archived ({exc}), so it cannot "
                        "be used: archiving is required for every tool result."
                    )
                continue
            call.ref = info.key
