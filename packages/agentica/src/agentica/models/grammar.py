"""Grammar-constrained tool calls for llama.cpp: a call, once begun, can only be well formed.

The model may answer in free text. llama.cpp applies an llguidance grammar from the first token
(its lazy triggers work only for GBNF grammars), so a reply is sampled in two requests: the
first under a lazy GBNF grammar (``call_start_fields``) that ends the reply where a call of an
offered tool begins (``{"name": "read_file"``); the second continues that text under the
llguidance grammar of that tool's arguments (``arguments_grammar``: its JSON schema). A required
call is sampled whole under ``tool_call_grammar``. Malformed or schema-invalid calls then cannot
be sampled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from agentica.errors import ModelError, ModelHTTPError
from agentica.messages import ToolDefinition

__all__ = [
    "arguments_grammar",
    "call_start_fields",
    "is_grammar_error",
    "opened_call",
    "tool_call_grammar",
    "tool_name_grammar",
]

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


def call_start_fields(tools: Sequence[ToolDefinition]) -> dict[str, Any]:
    """Request fields that leave the reply free until it starts a call of one of ``tools``,
    and end it right after the tool's name (a lazy GBNF grammar: llama.cpp's triggers work for
    GBNF only). ``opened_call`` finds that start; ``arguments_grammar`` continues it."""
    # The trigger ends at the name's first letter: llama.cpp feeds the grammar the whole token
    # that completed the match, and one that ran past the name (``",``) failed the request.
    names = " | ".join(_gbnf_literal(t.name) for t in tools)
    grammar = (
        'root ::= "{" space "\\"name\\"" space ":" space "\\"" name "\\"" space ","?\n'
        f"name ::= {names}\n"
        "space ::= [ \\t\\n]*\n"
    )
    firsts = "|".join(sorted({re.escape(t.name[:1]) for t in tools if t.name}))
    trigger = r'[\s\S]*?(\{\s*"name"\s*:\s*"(?:' + firsts + "))"
    return {
        "grammar": grammar,
        "grammar_lazy": True,
        "grammar_triggers": [{"type": _PATTERN_TRIGGER, "value": trigger}],
    }


_OPENED = re.compile(r'\{\s*"name"\s*:\s*"([^"\\]*)"\s*(,?)\Z')


def opened_call(text: str, tools: Sequence[ToolDefinition]) -> tuple[ToolDefinition, bool] | None:
    """The tool whose call ``text`` ends by opening (``... {"name": "read_file"``), and whether
    the comma after the name is written already; ``None`` if it opens none."""
    match = _OPENED.search(text)
    if match is None:
        return None
    tool = next((t for t in tools if t.name == match.group(1)), None)
    return None if tool is None else (tool, bool(match.group(2)))


def arguments_grammar(tool: ToolDefinition, *, comma: bool = False) -> str:
    """An llguidance grammar for the rest of a call of ``tool`` after its name: ``, "arguments":
    {...}}`` with arguments that match the tool's schema (nothing after the call); ``comma``:
    the text has the comma already."""
    defs: dict[str, Any] = {}
    closed = _closed(tool.parameters, "t_", defs)
    schema: dict[str, Any] = {"x-guidance": {"lenient": True}, **closed}
    if defs:
        schema["$defs"] = defs
    return (
        "%llguidance {}\n"
        "start: SEP args END\n"
        f'SEP: /[ \\t\\n]*{"" if comma else ","}[ \\t\\n]*"arguments"[ \\t\\n]*:[ \\t\\n]*/\n'
        "END: /[ \\t\\n]*\\}/\n"
        f"args: %json {json.dumps(schema, ensure_ascii=False)}\n"
    )


def _gbnf_literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def is_grammar_error(error: ModelError) -> bool:
    """Whether the server refused a request because of its grammar (it cannot build one)."""
    if not isinstance(error, ModelHTTPError) or error.status not in (400, 422, 500):
        return False
    return bool(_GRAMMAR_ERROR.search(f"{error} {error.body}"))
