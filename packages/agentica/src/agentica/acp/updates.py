"""What an editor is shown of a deep agent's run: ACP session updates from the framework's
events and records (pure: no I/O; the session sends them).

A tool call gets a kind (``read``, ``edit``, ``search``, ``execute``, ``fetch``, ``think``), a
title, the files it touches as absolute locations and, for an edit, a diff; the todo list
becomes the plan; a prompt's content blocks become the task's text; a stored session becomes
the updates that replay it (``load_session``).
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any, Literal

from acp import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_plan,
    update_tool_call,
    update_user_message_text,
)
from acp.schema import PlanEntry, ToolCallLocation

from agentica.messages import AssistantMessage, ToolMessage
from agentica.storage.records import RunRecord

__all__ = [
    "RESULT_CHARS",
    "arguments_of",
    "edit_preview",
    "host_path",
    "locations",
    "plan_of",
    "prompt_text",
    "replay",
    "tool_kind",
    "tool_title",
]

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
RESULT_CHARS = 20_000  # of a tool's result shown in the editor

_KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "ls": "search",
    "glob": "search",
    "grep": "search",
    "execute": "execute",
    "run_python": "execute",
    "start_command": "execute",
    "wait_command": "execute",
    "stop_command": "execute",
    "list_commands": "execute",
    "fetch_url": "fetch",
    "web_search": "fetch",
    "write_todos": "think",
    "read_todos": "think",
    "task": "think",
}
_PRIORITY: dict[str, Literal["high", "medium", "low"]] = {"in_progress": "high"}


def tool_kind(name: str) -> ToolKind:
    return _KINDS.get(name, "other")


def arguments_of(raw: str) -> dict[str, Any]:
    """A call's JSON arguments as a dict (``{}`` when the model's JSON was not an object)."""
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _clip(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_title(name: str, arguments: Mapping[str, Any]) -> str:
    """A short title: ``Read /src/app.py``, ``Run `pytest -q```, ``Search for "TODO"``."""
    path = arguments.get("path")
    if name in ("read_file", "ls") and path:
        return f"{'Read' if name == 'read_file' else 'List'} {path}"
    if name in ("write_file", "edit_file") and path:
        return f"{'Write' if name == 'write_file' else 'Edit'} {path}"
    if name in ("execute", "start_command") and arguments.get("command"):
        return f"Run `{_clip(arguments['command'])}`"
    if name in ("grep", "glob") and arguments.get("pattern"):
        return f"Search for {_clip(arguments['pattern'], 40)!r}"
    if name == "run_python":
        return "Run Python"
    if name == "write_todos":
        return "Update the plan"
    if name == "task" and arguments.get("description"):
        return f"Subtask: {_clip(arguments['description'])}"
    if name == "fetch_url" and arguments.get("url"):
        return f"Fetch {_clip(arguments['url'])}"
    return name


def host_path(root: str, path: str) -> str:
    """The absolute path on the editor's machine of the workspace's virtual ``path``."""
    inner = posixpath.normpath("/" + str(path).lstrip("/")).lstrip("/")
    return posixpath.join(root, inner) if inner and inner != "." else root


def locations(root: str, arguments: Mapping[str, Any]) -> list[ToolCallLocation]:
    path = arguments.get("path")
    if not isinstance(path, str) or not path:
        return []
    return [ToolCallLocation(path=host_path(root, path))]


def edit_preview(name: str, arguments: Mapping[str, Any], old: str | None) -> str | None:
    """The file's text after ``write_file``/``edit_file`` with ``arguments`` (``old``: its text
    before, ``None`` if new), or ``None`` when the edit cannot apply."""
    if name == "write_file":
        content = arguments.get("content")
        return content if isinstance(content, str) else None
    old_string, new_string = arguments.get("old_string"), arguments.get("new_string")
    if old is None or not isinstance(old_string, str) or not isinstance(new_string, str):
        return None
    if not old_string or old_string not in old:
        return None
    count = -1 if arguments.get("replace_all") else 1
    return old.replace(old_string, new_string, count)


def plan_of(items: object) -> list[PlanEntry]:
    """The todo list (``Todos``' session state) as ACP plan entries."""
    entries = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict) or not item.get("content"):
            continue
        found = item.get("status")
        status: Literal["pending", "in_progress", "completed"] = (
            found if found in ("in_progress", "completed") else "pending"
        )
        entries.append(
            plan_entry(
                str(item["content"]), priority=_PRIORITY.get(status, "medium"), status=status
            )
        )
    return entries


def prompt_text(blocks: list[Any]) -> str:
    """The text of a prompt: its text blocks, resources it embeds (with their URI) and links
    to files (named, for the agent to read)."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(f"[file: {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(f"<file uri={resource.uri!r}>\n{text}\n</file>")
            else:
                parts.append(f"[binary resource: {resource.uri}]")
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} attached: this agent reads text only]")
    return "\n\n".join(p for p in parts if p)


def replay(records: list[RunRecord], root: str, todos: object) -> Iterator[Any]:
    """The session updates that show a stored conversation again: each run's task, the
    agent's text, each tool call (completed or failed, with its result) and the plan."""
    for record in records:
        if record.input:
            yield update_user_message_text(record.input)
        calls: dict[str, tuple[str, dict[str, Any]]] = {}
        for message in record.messages:
            if isinstance(message, AssistantMessage):
                if message.content:
                    yield update_agent_message_text(str(message.content))
                for call in message.tool_calls:
                    arguments = arguments_of(call.arguments)
                    calls[call.id] = (call.name, arguments)
                    yield start_tool_call(
                        call.id,
                        tool_title(call.name, arguments),
                        kind=tool_kind(call.name),
                        status="pending",
                        locations=locations(root, arguments),
                        raw_input=arguments,
                    )
            elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
                yield update_tool_call(
                    message.tool_call_id,
                    status="failed" if message.is_error else "completed",
                    content=[tool_content(text_block(message.content[:RESULT_CHARS]))],
                )
    entries = plan_of(todos)
    if entries:
        yield update_plan(entries)


def diff(root: str, path: str, old: str | None, new: str) -> Any:
    """The diff content of an edit of the workspace's ``path``."""
    return tool_diff_content(host_path(root, path), new, old_text=old)
