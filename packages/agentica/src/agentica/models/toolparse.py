"""Text tool calls: tool calls a model wrote as text instead of using native tool calling.

Small local models (the embedded Qwen2.5-Coder ones among them) answer tool calls as text, in
many loose forms. ``parse_tool_calls`` splits a reply into prose, calls and ``MalformedCall``s
(whose ``reason`` is written for the model); ``ToolCallStreamSplitter`` does it for a stream,
showing prose early. Nothing here raises on any input, and scanning work is bounded.
"""

from __future__ import annotations

import ast
import bisect
import functools
import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from agentica.messages import ToolCall
from agentica.models.base import new_tool_call_id

__all__ = [
    "MalformedCall",
    "ParsedReply",
    "ToolCallStreamSplitter",
    "as_tool_calls",
    "parse_tool_calls",
]


@dataclass(slots=True, frozen=True)
class MalformedCall:
    """A tool call the model attempted in its text that cannot be used."""

    name: str | None  # the tool name, if it could be recovered
    raw: str  # the text of the attempted call
    reason: str  # what is wrong, written so that a small model can send the call again


@dataclass(slots=True, frozen=True)
class ParsedReply:
    """A reply split into its prose (call snippets removed), its calls and failed attempts."""

    text: str
    calls: list[ToolCall]
    malformed: list[MalformedCall]


_Item: TypeAlias = ToolCall | MalformedCall
_Tools: TypeAlias = dict[str, str]  # a written name (exact, or folded to lower case) -> the tool

# a call's first key written without quotes: {name: ..., {function: ..., {type: "function", ...
_BARE_OPENING = r"""(?:name|function)\s*+:|type\s*+:\s*+["']function["']"""
# "{" before a quoted key or a call's bare first key, "[" before "{"
_CALL_START = r"""\{(?=\s*(?:["']|""" + _BARE_OPENING + r"))|\[(?=\s*\{)"
_KEY_WORD = r"(?:[^\W\d]|\$)[\w$]*+"  # a key written without quotes, as in JavaScript
# a call's start, or (group "bare") "{" before any key without quotes: a call if name({...})
_START = re.compile(_CALL_START + r"|(?P<bare>\{)(?=\s*+" + _KEY_WORD + r"\s*+:)")
# a call written like a function, name({...}): the name before the object, the ")" after it
_FUNCTION = r"(?<![\w.])([A-Za-z_][\w.]{0,99})\(\s*"
_FUNCTION_PREFIX = re.compile(_FUNCTION + r"\Z")
_FUNCTION_CLOSE = re.compile(r"[\s}\]]*\)")  # stray closing brackets before ")" are dropped
_TRIGGER = re.compile(
    _FUNCTION + r"""(?=\{\s*["'])|""" + _CALL_START + r"|```|</?tool_call>|"
    # name({key: ...}): a possible call only when name is a tool's
    r"(?<![\w.])(?P<bare>[A-Za-z_][\w.]{0,99})\(\s*(?=\{\s*+" + _KEY_WORD + r"\s*+:)"
)
_PARTIAL_FUNCTION = re.compile(
    r"(?<![\w.])([A-Za-z_][\w.]{0,99})(?:\(\s*(?:\{\s*(?:[\w$]++\s*)?)?)?\Z"
)
_TOKEN = re.compile(r"""\"\"\"|'''|["'{}\[\]]""")
_DQ_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_SQ_REST = re.compile(r"[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'")  # a '...' string ends on its line
_LEX = re.compile(r"""\"\"\"|'''|["']|//[^\n]*+|\#[^\n]*+|,|\b(?:True|False|None)\b""")
# a word before ":", a key without quotes after "{" or ","; matched first ({None: 1} is a key)
_LEX_KEYS = re.compile(r"(?<![\w$])(" + _KEY_WORD + r")(?=\s*+:)|" + _LEX.pattern)
_TRAILING = re.compile(r"(?:\s++|//[^\n]*+|\#[^\n]*+)*+[}\]]")
_ANY_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|.)|"', re.DOTALL)
_NAME_KEY = re.compile(r"""(?:["']name["']|[{,]\s*+name)\s*+:\s*+["']([^"'\\\n]{1,200})["']""")
_ARGS_KEY = re.compile(
    r"""(?:["'](?:arguments|parameters)["']|[{,]\s*+(?:arguments|parameters))\s*+:"""
)
_OPENING = re.compile(
    r"""\{\s*+(?:["'](?:name|function|type["']\s*+:\s*+["']function)["']|""" + _BARE_OPENING + ")"
)
# the end of a text that may go on as the bare first key of a call: "{", "{nam", '{type: "fu'
_PARTIAL_OPENING = re.compile(r"""\{\s*+(?:(\w*+)\s*+|type\s*+:\s*+(?:["'](?:f\w*+["']?)?)?)\Z""")
_BARE_KEYS = ("name", "function", "type")  # the keys a call may start with
_FENCE_MARK = re.compile(r"```[\w.+-]*+")  # a code fence and its language
_TAG = re.compile(r"</?tool_call>")
_IGNORABLE = re.compile(r"(?:\s|,|</?tool_call>)*+")
_STRAY_CLOSERS = re.compile(r"(?:\s*+[}\]])++")  # closing brackets a call does not open
# what a code block or tag may hold besides calls and still be a call: stray brackets, quotes
# (a small model writes one "}" too many), comments; any other text makes a code block code
_CALL_ONLY = re.compile(r"""(?:\s|,|</?tool_call>|[{}\[\]()"']|//[^\n]*+|\#[^\n]*+)*+""")

_PY_CONSTANTS = {"True": "true", "False": "false", "None": "null"}
_JSON_ESCAPES = frozenset('"\\/bfnrt')
_PY_ESCAPES = frozenset("\\'\"abfnrtv01234567xNuU\n")
_CLOSES = {"}": "{", "]": "["}
_WRAPPER_KEYS = frozenset({"function", "type", "id", "index"})
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "type", "id", "index"})
_PARTIALS = {"`", "``", *(t[:n] for t in ("<tool_call>", "</tool_call>") for n in range(1, 12))}
_SCAN_BUDGET = 250_000  # tokens (plus characters / 64) the snippet scanner may spend on a text
_HOW = (
    'Reply with only the call, as one JSON object: {"name": "<tool name>", "arguments": {...}}, '
    "with every key and string in double quotes and newlines and quotes inside strings escaped "
    '(\\n, \\").'
)


def _index_tools(names: Collection[str]) -> _Tools:
    tools = {name: name for name in names}
    for name in sorted(tools):
        tools.setdefault(name.lower(), name)
    return tools


def _resolve(tools: _Tools, written: str) -> str | None:
    """The tool ``written`` names: exact, else case-insensitive, else without ``functions.``."""
    folded = written.strip().lower()
    return tools.get(written) or tools.get(folded) or tools.get(folded.removeprefix("functions."))


def _string_end(text: str, quote: str, pos: int) -> int:
    """The index just after the string whose opening ``quote`` ends at ``pos``; -1 if unclosed."""
    if len(quote) == 3:
        close = text.find(quote, pos)
        end = close + 3
        while close >= 0 and end < len(text) and text[end] == quote[0]:
            end += 1  # a fourth quote in a row is content: the string ends with a quote
        return end if close >= 0 else -1
    match = (_DQ_REST if quote == '"' else _SQ_REST).match(text, pos)
    return -1 if match is None else match.end()


def _as_json_string(quote: str, body: str, fix_escapes: bool) -> str:
    if len(quote) == 3:
        return json.dumps(body, ensure_ascii=False)

    def convert(match: re.Match[str]) -> str:
        escape = match.group(1)
        if escape is None or escape == "'":
            return "'" if escape else '\\"'  # \' in any string, " in a '...' string
        if len(escape) == 5 or escape in _JSON_ESCAPES or not fix_escapes:
            return match.group()
        return "\\\\" + escape  # an escape JSON does not know: keep the backslash as text

    return '"' + _ESCAPE.sub(convert, body) + '"'


def _normalize(raw: str, fix_escapes: bool, quote_keys: bool = False) -> str:
    """Rewrite lenient JSON (Python strings and constants, comments, trailing commas, and with
    ``quote_keys`` keys without quotes) as JSON. Text inside strings is never changed."""
    out: list[str] = []
    pos = 0
    lexer = _LEX_KEYS if quote_keys else _LEX
    while (match := lexer.search(raw, pos)) is not None:
        out.append(raw[pos : match.start()])
        token, pos = match.group(), match.end()
        if match.lastindex:  # a word before ":" (only _LEX_KEYS has a group)
            before = next((piece.rstrip()[-1] for piece in reversed(out) if piece.strip()), "")
            out.append(f'"{token}"' if before in ("{", ",") else token)
        elif token[0] in "\"'":
            end = _string_end(raw, token, pos)
            if end < 0 and token != "'":
                raise ValueError("a string is not closed")
            body = raw[pos : end - len(token)]
            out.append(token if end < 0 else _as_json_string(token, body, fix_escapes))
            pos = max(pos, end)  # a lone apostrophe stays as it is
        elif token == ",":
            out.append("" if _TRAILING.match(raw, pos) else token)
        elif token[0] not in "/#":
            out.append(_PY_CONSTANTS[token])
    out.append(raw[pos:])
    return "".join(out)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


_json = functools.partial(json.loads, strict=False, parse_constant=_reject_constant)


def _python_literal(text: str) -> Any:
    if any(m.group(1) not in _PY_ESCAPES for m in _ANY_ESCAPE.finditer(text)):
        raise ValueError("not a Python literal")  # and ast would warn about the escape
    return json.loads(json.dumps(ast.literal_eval(text.strip()), allow_nan=False))


def _close_brackets(text: str) -> str:
    """``text`` with the brackets it leaves open closed at the end: a small model often drops
    the last ``}`` of a call (``{"name": "f", "arguments": {"code": "..."}``). Text whose
    brackets do not nest, or that ends inside a string, is returned unchanged."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            closing = stack.pop() if stack else None
            if closing != ch:
                return text
    if in_string or not stack or len(stack) > 3:
        return text
    return text.rstrip() + "".join(reversed(stack))


def _load(raw: str) -> tuple[bool, Any, str]:
    """Parse JSON leniently: (parsed, value, the strict parser's error message)."""
    attempts: tuple[Callable[[], Any], ...] = (
        lambda: _json(raw),
        lambda: _json(_normalize(raw, fix_escapes=False)),
        lambda: _python_literal(raw),  # before fixing escapes: Python knows \x, \U, \a...
        lambda: _json(_normalize(raw, fix_escapes=True)),
        lambda: _json(_normalize(raw, fix_escapes=True, quote_keys=True)),
    )
    errors: list[str] = []
    for attempt in attempts:
        try:
            return True, attempt(), ""
        except Exception as exc:  # json and ast raise many kinds of error on hostile input
            errors.append(str(exc))
    return False, None, errors[0]


def _attempt(raw: str, tools: _Tools, *, opening_only: bool) -> tuple[bool, str | None]:
    """Whether unparsable ``raw`` is an attempted call, and the tool name it gives, if any."""
    found = _NAME_KEY.search(raw)
    written = found.group(1) if found else None
    resolved = _resolve(tools, written) if written else None
    has_args = _ARGS_KEY.search(raw) is not None
    if _OPENING.match(raw) and (has_args or resolved):
        return True, resolved or written
    return (resolved is not None and has_args and not opening_only), resolved


def _decode_arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        ok, decoded, _ = _load(arguments) if arguments.strip() else (True, None, "")
        arguments = decoded if ok and (decoded is None or isinstance(decoded, dict)) else arguments
    return arguments


def _make_call(name: str, arguments: Any, raw: str) -> _Item:
    arguments = _decode_arguments(arguments)
    for _ in range(8):  # the call written again as its own arguments: {"name": n, "arguments": ...}
        if not (isinstance(arguments, dict) and arguments.get("name") == name):
            break
        key = "arguments" if "arguments" in arguments else "parameters"
        if key not in arguments or not set(arguments) <= _CALL_KEYS:
            break
        arguments = _decode_arguments(arguments[key])
    if arguments is None or isinstance(arguments, dict):
        text = json.dumps(arguments or {}, ensure_ascii=False, separators=(",", ":"))
        return ToolCall(id=new_tool_call_id(), name=name, arguments=text)
    kind = {str: "a string that is not a JSON object", list: "an array", bool: "a boolean"}
    problem = kind.get(type(arguments), "a number")
    reason = f'the arguments of {name} must be a JSON object like {{"key": "value"}}, not {problem}'
    return MalformedCall(name, raw, f"{reason}. {_HOW}")


def _classify_object(value: Any, raw: str, tools: _Tools) -> _Item | None:
    """A call, a malformed call, or None for JSON that is not a call."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and set(value) <= _WRAPPER_KEYS:
        value = value["function"]
    written = value.get("name")
    if not isinstance(written, str):
        return None
    args_key = "arguments" if "arguments" in value else "parameters"
    exact_shape = set(value) <= _CALL_KEYS
    name = _resolve(tools, written)
    if name is None:
        if not exact_shape or args_key not in value:
            return None
        listing = ", ".join(sorted(set(tools.values()))) or "(none)"
        reason = f"there is no tool named {written!r}; the available tools are: {listing}. {_HOW}"
        return MalformedCall(written, raw, reason)
    if not exact_shape and ("arguments" not in value or "description" in value):
        return None  # a tool's description, or a record that happens to hold a tool's name
    return _make_call(name, value.get(args_key), raw)


def _classify(raw: str, tools: _Tools) -> list[_Item] | None:
    """The calls and malformed calls in a bracketed snippet; None if it is not a call."""
    ok, value, error = _load(raw)
    if not ok:
        attempted, name = _attempt(raw, tools, opening_only=False)
        reason = f"the tool call is not valid JSON ({error}). {_HOW}"
        return [MalformedCall(name, raw, reason)] if attempted else None
    if isinstance(value, dict) and set(value) == {"tool_calls"}:
        value = value["tool_calls"]
    if not isinstance(value, list):
        item = _classify_object(value, raw, tools)
        return None if item is None else [item]
    texts = [json.dumps(element, ensure_ascii=False) for element in value]
    items = [_classify_object(v, text, tools) for v, text in zip(value, texts, strict=True)]
    if all(item is None for item in items):
        return None
    reason = f"this item of the list of tool calls is not a call. {_HOW}"
    return [i or MalformedCall(None, text, reason) for i, text in zip(items, texts, strict=True)]


@dataclass(slots=True)
class _Span:  # a bracketed snippet of the text; ``items`` is None when it is not a call
    start: int
    end: int
    items: list[_Item] | None


class _Region(NamedTuple):  # a fenced block or a <tool_call> tag: its whole extent and its body
    start: int
    body_start: int
    body_end: int
    end: int  # equals body_end for a <tool_call> tag that is never closed


def _match_end(text: str, start: int) -> tuple[int, int]:
    """(end, work): the end of the bracketed span opening at ``start`` (-1 if it never closes)."""
    stack: list[str] = []
    pos, work = start, 0
    while (match := _TOKEN.search(text, pos)) is not None:
        token, pos, work = match.group(), match.end(), work + 1
        if token in "{[":
            stack.append(token)
        elif token in _CLOSES:  # the stack holds at least the opening bracket here
            opener = stack.pop()
            if opener != _CLOSES[token] or not stack:
                return (pos if opener == _CLOSES[token] else -1), work + (pos - start) // 64
        else:
            end = _string_end(text, token, pos)
            if end < 0 and token != "'":
                break
            pos = max(end, pos)
    return -1, work + (len(text) - start) // 64


def _incomplete_call(text: str, start: int, tools: _Tools) -> tuple[str, list[_Item]] | None:
    """A call that never closes, up to the next code fence or closing tag: (its text, the call
    with its missing closing brackets added, or a malformed call)."""
    if _OPENING.match(text, start) is None:
        return None
    ends = [i for i in (text.find("\n```", start), text.find("</tool_call>", start)) if i >= 0]
    raw = text[start : min(ends, default=len(text))].rstrip()
    repaired = _close_brackets(raw)
    if repaired != raw:
        items = _classify(repaired, tools)
        if items and all(isinstance(item, ToolCall) for item in items):
            return raw, items
    attempted, name = _attempt(raw, tools, opening_only=True)
    reason = f"the tool call is cut off or its brackets do not match. {_HOW}"
    return (raw, [MalformedCall(name, raw, reason)]) if attempted else None


def _function_form(text: str, pos: int, start: int, end: int, tools: _Tools) -> _Span | None:
    """The object at ``[start, end)`` as the arguments of ``name({...})``, when ``name`` is a
    tool (small models write the call they were shown in that form); None otherwise."""
    prefix = _FUNCTION_PREFIX.search(text, max(pos, start - 110), start)
    close = _FUNCTION_CLOSE.match(text, end)
    if prefix is None or close is None:
        return None
    name = _resolve(tools, prefix.group(1))
    if name is None:
        return None
    raw = text[start:end]
    ok, value, error = _load(raw)
    if ok:
        return _Span(prefix.start(), close.end(), [_make_call(name, value, raw)])
    reason = f"the arguments of {name} are not valid JSON ({error}). {_HOW}"
    return _Span(prefix.start(), close.end(), [MalformedCall(name, raw, reason)])


def _tool_before(text: str, pos: int, start: int, tools: _Tools) -> bool:
    """Whether the object at ``start`` follows ``name(`` for a tool's name."""
    prefix = _FUNCTION_PREFIX.search(text, max(pos, start - 110), start)
    return prefix is not None and _resolve(tools, prefix.group(1)) is not None


def _find_spans(text: str, tools: _Tools) -> list[_Span]:
    spans: list[_Span] = []
    pos, budget = 0, _SCAN_BUDGET
    while budget > 0 and (match := _START.search(text, pos)) is not None:
        start = match.start()
        if match.group("bare") and not _tool_before(text, pos, start, tools):
            pos = start + 1  # an object with keys without quotes, not the arguments of a tool
            continue
        end, work = _match_end(text, start)
        budget -= work
        if end >= 0:
            span = _Span(start, end, _classify(text[start:end], tools))
            if span.items is None and text[start] == "{":
                span = _function_form(text, pos, start, end, tools) or span
            if span.items and (stray := _STRAY_CLOSERS.match(text, span.end)) is not None:
                span.end = stray.end()  # the call is the whole attempt: its stray "}" goes too
            spans.append(span)
            pos = span.end
        elif text[start] == "{" and (found := _incomplete_call(text, start, tools)) is not None:
            raw, items = found
            spans.append(_Span(start, start + len(raw), items))
            pos = start + len(raw)
        else:
            pos = start + 1  # a stray bracket: look for calls inside it
    return spans


class _Snippets:  # the snippets of one text, for finding those inside a region
    def __init__(self, spans: list[_Span]) -> None:
        self.spans = spans
        self.starts = [span.start for span in spans]
        self.ends = [span.end for span in spans]

    def masks(self, pos: int) -> bool:  # more snippets start at or before pos than end there
        return bisect.bisect_right(self.starts, pos) > bisect.bisect_right(self.ends, pos)

    def within(self, lo: int, hi: int) -> list[_Span]:
        return self.spans[bisect.bisect_left(self.starts, lo) : bisect.bisect_right(self.ends, hi)]


def _outside(text: str, lo: int, hi: int, spans: list[_Span]) -> str:
    """The text of ``[lo, hi)`` without the given spans."""
    bounds = [lo, *(edge for span in spans for edge in (span.start, span.end)), hi]
    return "".join(text[a:b] for a, b in zip(bounds[::2], bounds[1::2], strict=True))


def _fences(text: str, snippets: _Snippets) -> list[_Region]:
    marks = [m for m in _FENCE_MARK.finditer(text) if not snippets.masks(m.start())]
    regions = []
    for opening, closing in zip(marks[::2], [*marks[1::2], None], strict=False):
        body_end = closing.start() if closing else len(text)  # the last block may be open
        regions.append(
            _Region(opening.start(), opening.end(), body_end, body_end + 3 * bool(closing))
        )
    return regions


def _tags(text: str, snippets: _Snippets) -> list[_Region]:
    regions: list[_Region] = []
    opening: re.Match[str] | None = None
    for mark in (m for m in _TAG.finditer(text) if not snippets.masks(m.start())):
        if mark.group() == "<tool_call>":
            opening = opening or mark
        elif opening is None:  # a stray closing tag
            regions.append(_Region(mark.start(), mark.end(), mark.end(), mark.end()))
        else:
            regions.append(_Region(opening.start(), opening.end(), mark.start(), mark.end()))
            opening = None
    if opening is not None:
        regions.append(_Region(opening.start(), opening.end(), len(text), len(text)))
    return regions


def _settle_fence(text: str, fence: _Region, inner: list[_Span]) -> bool:
    """Demote calls in a code block that holds more than calls; True if it holds only calls."""
    if not any(span.items for span in inner):
        return False
    if not _CALL_ONLY.fullmatch(_outside(text, fence.body_start, fence.body_end, inner)):
        for span in inner:
            span.items = None  # code that contains a dict, not a call
        return False
    return all(span.items for span in inner)


def _settle_tag(
    text: str, tag: _Region, inner: list[_Span], tools: _Tools
) -> tuple[int, _Item | None]:
    """Where the tag's text ends, and a malformed call for what in it is not a call."""
    calls = [span for span in inner if span.items]
    end, body_end = tag.end, tag.body_end
    if tag.end == body_end and calls:  # an unclosed tag ends with its last call; prose may follow
        end = body_end = calls[-1].end
    rest = _FENCE_MARK.sub("", _outside(text, tag.body_start, body_end, calls))
    if _CALL_ONLY.fullmatch(rest):
        return end, None
    name = _attempt(rest, tools, opening_only=False)[1]
    return end, MalformedCall(name, rest.strip(), f"the text in <tool_call> is not a call. {_HOW}")


def _assemble(text: str, removals: list[tuple[int, int]]) -> str:
    """The text without the removed ranges, whitespace tidied where something was removed."""
    pieces, pos = [], 0
    for start, end in sorted(removals):
        pieces.append(text[pos : max(pos, start)])
        pos = max(pos, end)
    pieces.append(text[pos:])
    out: list[str] = []
    gap = ""  # the whitespace since the last piece of text
    for index, piece in enumerate(pieces):
        if 0 < index < len(pieces) - 1 and _IGNORABLE.fullmatch(piece):
            piece = piece.replace(",", "")  # the comma between two calls
        if not piece.strip():
            gap += piece
            continue
        lead = piece[: len(piece) - len(piece.lstrip())]
        newlines = min(2, max(gap.count("\n"), lead.count("\n")))
        out += [("\n" * newlines or " " * bool(gap + lead)) if out else gap + lead, piece.strip()]
        gap = piece[len(piece.rstrip()) :]
    return "".join([*out, gap])


def _parse(text: str, tools: _Tools) -> tuple[str, list[ToolCall], list[MalformedCall]]:
    """(the text without calls, not stripped; the calls; the malformed calls)."""
    snippets = _Snippets(_find_spans(text, tools))
    removals: list[tuple[int, int]] = []
    for fence in _fences(text, snippets):
        if _settle_fence(text, fence, snippets.within(fence.body_start, fence.body_end)):
            removals.append((fence.start, fence.end))
    found: list[tuple[int, _Item]] = []
    for tag in _tags(text, snippets):
        end, item = _settle_tag(text, tag, snippets.within(tag.body_start, tag.body_end), tools)
        removals.append((tag.start, end))
        found += [(tag.start, item)] if item else []
    for span in snippets.spans:
        if span.items:
            removals.append((span.start, span.end))
            found += [(span.start, item) for item in span.items]
    found.sort(key=lambda pair: pair[0])
    calls = [item for _, item in found if isinstance(item, ToolCall)]
    malformed = [item for _, item in found if isinstance(item, MalformedCall)]
    return (_assemble(text, removals) if removals else text), calls, malformed


def parse_tool_calls(text: str, tool_names: Collection[str]) -> ParsedReply:
    """Split a model reply into its prose, the tool calls written in it, and failed attempts.

    Accepted: JSON ``{"name": ..., "arguments": {...}}``, bare, fenced or in ``<tool_call>``
    tags, one or several or a list, with Python triple-quoted strings (taken verbatim), raw
    newlines, trailing commas, comments, keys without quotes as in JavaScript
    (``{name: "f", arguments: {a: 1}}``), stray closing brackets (one "}" too many, fenced or
    not).

    Only JSON naming one of ``tool_names`` is a call; other JSON stays text. A call-shaped object
    naming an unknown tool, or an attempted call that cannot be parsed even leniently, is
    malformed rather than shown as the answer.
    """
    body, calls, malformed = _parse(text, _index_tools(tool_names))
    return ParsedReply(text=body.strip(), calls=calls, malformed=malformed)


def _next_trigger(text: str, tools: _Tools) -> tuple[str, int]:
    """The first code fence or possible call, else where a "{", "[", "`" or tag may be starting."""
    for match in _TRIGGER.finditer(text):
        if match.group("bare") is None or _resolve(tools, match.group("bare")) is not None:
            return ("fence" if match.group() == "```" else "call"), match.start()
    body = text.rstrip()
    if body.endswith(("{", "[")):
        at = len(body) - 1
    else:
        at = len(text) - next(
            (n for n in range(min(len(text), 11), 0, -1) if text[-n:] in _PARTIALS), 0
        )
    partial = _PARTIAL_FUNCTION.search(text)  # the start of name({...}) for a tool's name?
    if partial is not None and _may_name(tools, partial.group(1)):
        at = min(at, partial.start())
    opening = _PARTIAL_OPENING.search(text)  # the start of {name: ...}?
    if opening is not None and (
        opening.group(1) is None or any(k.startswith(opening.group(1)) for k in _BARE_KEYS)
    ):
        at = min(at, opening.start())
    return "text", at


def _may_name(tools: _Tools, word: str) -> bool:
    """Whether ``word`` may be the start of a name ``_resolve`` accepts."""
    folded = word.lower()
    if "functions.".startswith(folded):
        return True
    folded = folded.removeprefix("functions.")
    return any(name.startswith(folded) for name in tools)


class ToolCallStreamSplitter:
    """Split a streamed reply into text that is safe to show now and possible tool calls.

    ``feed`` returns the new text that is certainly not part of a call. Text is held back from
    the first place a call may start: a ``{`` before a quoted key or ``name:`` (a call's first
    key without quotes), a ``[`` before ``{``, ``name({`` before a key (a key without quotes only
    if ``name`` is a tool's), or a ``<tool_call>`` tag; a code block is held until it closes,
    and shown then if nothing in it could be a call. ``finish`` parses everything held back (and
    readies the splitter for the next reply): its ``text`` is only what ``feed`` has not
    returned, and its calls are the ones ``parse_tool_calls`` finds in the whole reply.
    """

    def __init__(self, tool_names: Collection[str]) -> None:
        self._tools = _index_tools(tool_names)
        self._mode = "text"  # "text": showing; "fence": in a code block; "hold": holding back
        self._parts: list[str] = []  # the code block, or everything held back
        self._tail = ""  # text whose fate depends on what comes next
        self._shown = False

    def feed(self, delta: str) -> str:
        """Take in the next piece of the reply; return the new text that is safe to show."""
        if self._mode == "hold":
            self._parts.append(delta)
            return ""
        shown: list[str] = []
        rest, self._tail = self._tail + delta, ""
        while rest:
            rest = self._advance(rest, shown)
        self._shown = self._shown or any(shown)
        return "".join(shown)

    def _advance(self, text: str, shown: list[str]) -> str:
        """Take in ``text``; return what is left of it after a code fence opens or closes."""
        kind, at = _next_trigger(text, self._tools)
        if self._mode == "text":
            shown.append(text[:at])
            self._parts, text, at = [], text[at:], 0
        if kind == "fence":
            self._parts.append(text[: at + 3])
            if self._mode == "fence":  # the block closed with nothing that could be a call
                shown.append("".join(self._parts))
                self._parts = []
            self._mode = "text" if self._mode == "fence" else "fence"
            return text[at + 3 :]
        if kind == "call":
            self._mode = "hold"
        self._parts.append(text if kind == "call" else text[:at])
        self._tail = "" if kind == "call" else text[at:]
        return ""

    def finish(self) -> ParsedReply:
        """The calls in the whole reply, and the text that ``feed`` has not returned."""
        body, calls, malformed = _parse("".join(self._parts) + self._tail, self._tools)
        text = body.rstrip() if self._shown else body.strip()
        self._mode, self._parts, self._tail, self._shown = "text", [], "", False
        return ParsedReply(text=text, calls=calls, malformed=malformed)


def _raw_arguments(raw: str) -> str:
    """The arguments of an attempted call as the model wrote them: the text after its
    ``"arguments"`` key, without the call's own closing brace. Kept verbatim, so the history
    shows the call as written (a whole call kept as the arguments would be shown back to the
    model nested in another call, and a small model then nests deeper on every retry)."""
    found = _ARGS_KEY.search(raw)
    if found is None:
        return raw
    rest = raw[found.end() :].strip()
    closes = raw.startswith("{") and _match_end(raw, 0)[0] == len(raw)
    if closes and rest.endswith("}"):  # the call itself closes: drop its brace
        rest = rest[:-1].rstrip().removesuffix(",").rstrip()
    return rest


def as_tool_calls(parsed: ParsedReply, *, first_only: bool = False) -> list[ToolCall]:
    """The calls to hand to the engine: the recognised ones, then each malformed attempt as a call
    the engine refuses with an explanation (unknown tool, arguments that are not JSON), so the
    model learns what to fix and an attempted call never ends up as the answer. ``first_only``
    keeps just the first (for models told to make one call per reply)."""
    calls = list(parsed.calls)
    for bad in parsed.malformed:
        if bad.name:
            arguments = _raw_arguments(bad.raw) or "{"
            calls.append(ToolCall(id=new_tool_call_id(), name=bad.name, arguments=arguments))
        else:
            arguments = json.dumps({"reply": bad.raw[:300]})
            calls.append(
                ToolCall(id=new_tool_call_id(), name="invalid_tool_call", arguments=arguments)
            )
    return calls[:1] if first_only else calls
