"""Grammar-constrained tool calls for llama.cpp: the tools of a turn as a lazy grammar.

The model may answer in free text; once it starts a call (``{"name"``), llama.cpp's sampler
(llguidance) lets it write only ``{"name": TOOL, "arguments": {...}}`` objects, one per line,
whose name is one of the tools offered and whose arguments match that tool's JSON schema. A
malformed or schema-invalid call then cannot be sampled. ``tool_grammar_fields`` gives the
request fields (``grammar``, ``grammar_lazy``, ``grammar_triggers``) for llama.cpp's
``/completion`` and ``/v1/chat/completions``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentica.errors import ModelError, ModelHTTPError
from agentica.messages import ToolDefinition

__all__ = [
    "TRIGGER",
    "is_grammar_error",
    "tool_call_grammar",
    "tool_grammar_fields",
    "tool_name_grammar",
]

# a call starts where an object names one of the tools (in a code fence or not): the grammar
# applies from there on, so other JSON in a free-text answer ({"name": "Ann"}) stays free
TRIGGER = r'[\s\S]*?(\{\s*"name"\s*:\s*"(?:{names})")'
_PATTERN_TRIGGER = 2  # llama.cpp's COMMON_GRAMMAR_TRIGGER_TYPE_PATTERN
_GRAMMAR_ERROR = re.compile(r"grammar|llguidance|json[_ ]schema", re.IGNORECASE)


def _closed(parameters: dict[str, Any], prefix: str, defs: dict[str, Any]) -> dict[str, Any]:
    """A tool's arguments schema with no room for arguments it does not name; its definitions
    (``$defs``, ``definitions``) moved into ``defs`` under ``prefix`` (the grammar's schema is
    one document: a ``#/$defs/...`` reference resolves at its root)."""
    schema = dict(parameters)
    for key in ("$defs", "definitions"):
        for name, definition in (schema.pop(key, None) or {}).items():
            defs[f"{prefix}{name}"] = _renamed(definition, prefix)
    schema = dict(_renamed(schema, prefix))
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    schema.setdefault("additionalProperties", False)
    return schema


def _renamed(value: Any, prefix: str) -> Any:
    """``value`` with its local references pointed at the prefixed definitions."""
    if isinstance(value, dict):
        out = {k: _renamed(v, prefix) for k, v in value.items()}
        ref = out.get("$ref")
        if isinstance(ref, str):
            for root in ("#/$defs/", "#/definitions/"):
                if ref.startswith(root):
                    out["$ref"] = f"#/$defs/{prefix}{ref[len(root) :]}"
        return out
    if isinstance(value, list):
        return [_renamed(v, prefix) for v in value]
    return value


def tool_call_grammar(tools: Sequence[ToolDefinition], *, parallel: bool = True) -> str:
    """An llguidance (Lark) grammar of the calls of ``tools``: one call, or with ``parallel``
    up to four, one per line (unbounded, a small model at temperature 0 was seen to repeat its
    calls until the token limit). Schema features llguidance does not know are ignored."""
    defs: dict[str, Any] = {}
    branches = [
        {
            "type": "object",
            "properties": {
                "name": {"const": t.name},
                "arguments": _closed(t.parameters, f"t{n}_", defs),
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for n, t in enumerate(tools)
    ]
    call: dict[str, Any] = {"x-guidance": {"lenient": True}, "anyOf": branches}
    if defs:
        call["$defs"] = defs
    start = 'start: call ("\\n" call){0,3}' if parallel else "start: call"
    return f"%llguidance {{}}\n{start}\ncall: %json {json.dumps(call, ensure_ascii=False)}\n"


def tool_name_grammar(tools: Sequence[ToolDefinition]) -> str:
    """An llguidance grammar for a reply that continues ``{"name": "`` (a required call opened
    for the model): it must go on with the name of one of ``tools`` and its closing quote, and
    is free after that. (Seen: a small model forced to call a tool named one not offered that
    turn, the todo tool it had just been kept from, six times over.)"""
    names = " | ".join(json.dumps(t.name + '"', ensure_ascii=False) for t in tools)
    return f"%llguidance {{}}\nstart: NAME REST\nNAME: {names}\nREST: /(.|\\n)*/\n"


def tool_grammar_fields(
    tools: Sequence[ToolDefinition], *, parallel: bool = True
) -> dict[str, Any]:
    """The request fields that constrain calls of ``tools`` (lazily: free text stays free)."""
    return {
        "grammar": tool_call_grammar(tools, parallel=parallel),
        "grammar_lazy": True,
        "grammar_triggers": [{"type": _PATTERN_TRIGGER, "value": _trigger(tools)}],
    }


def _trigger(tools: Sequence[ToolDefinition]) -> str:
    names = "|".join(re.escape(t.name) for t in tools)
    return TRIGGER.replace("{names}", names)


def is_grammar_error(error: ModelError) -> bool:
    """Whether the server refused a request because of its grammar (it cannot build one)."""
    if not isinstance(error, ModelHTTPError) or error.status not in (400, 422, 500):
        return False
    return bool(_GRAMMAR_ERROR.search(f"{error} {error.body}"))
