"""What a tool call did, as the checks read it: its arguments, the file it wrote, one line for it.

The checks judge a run by its calls (a file written, code run); these readings of a
``FunctionCall`` are shared by ``AnswerCheck``, its send-backs and ``NumberCheck``.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from agentica.tools.call import FunctionCall

# Where a written number must come from a tool: reports and data, not code or configuration
# (a port or a version there is the model's to choose).
DATA_SUFFIXES = frozenset({".md", ".txt", ".rst", ".csv", ".tsv", ".json", ".html", ".log"})
_WRITTEN_KEYS = ("content", "new_string", "new_text", "text")
_PATH_KEYS = ("path", "file_path", "filename")


def arguments(call: FunctionCall) -> dict[str, Any]:
    """The call's arguments as a dict (empty when they are no JSON object)."""
    try:
        parsed = json.loads(call.call.arguments or "{}")
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def written(
    call: FunctionCall, *, data_only: bool = True, done: bool = True
) -> tuple[str, str] | None:
    """(path, text) of a successful call that wrote text into a file (a data or prose file
    when ``data_only``); of a call that is to write one when not ``done``."""
    if call.status != ("success" if done else "pending"):
        return None
    given = arguments(call)
    path = next((given[k] for k in _PATH_KEYS if isinstance(given.get(k), str)), None)
    text = next((given[k] for k in _WRITTEN_KEYS if isinstance(given.get(k), str)), None)
    if path is None or text is None:
        return None
    if data_only and PurePosixPath(path).suffix.lower() not in DATA_SUFFIXES:
        return None
    return path, text


def short(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with "..." when longer."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(call: FunctionCall) -> str:
    """One line per call: ``write_file(path="a.txt", ...) -> wrote 3 characters``."""
    outcome = "error: " if call.status != "success" else ""
    return (
        f"{call.name}({short(call.call.arguments, 80)}) -> "
        f"{outcome}{short(call.content, 80) or '(no output)'}"
    )
