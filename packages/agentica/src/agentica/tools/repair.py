"""``repair_quotes``: tool-call arguments whose string values hold unescaped double quotes.

Small models write code into a JSON string as they would write it anywhere else: a docstring's
three double quotes inside ``"content": "..."`` make the arguments invalid JSON, and the same
call comes back unchanged after every error message. When the arguments do not parse,
the values of the tool's known string parameters are cut out between their keys and escaped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

__all__ = ["repair_quotes"]

_QUOTE = re.compile(r'(?<!\\)((?:\\\\)*)"')
_KEY_INSIDE = re.compile(r'"\s*,\s*"\w+"\s*:')
_EXTRA_BRACES = 3


def repair_quotes(arguments: str, strings: Collection[str], names: Collection[str]) -> str | None:
    """``arguments`` made valid JSON by escaping the double quotes inside the values of the
    string parameters ``strings`` (every parameter is in ``names``), or ``None`` when that does
    not give a JSON object with only known keys. Up to three closing braces too many at the
    end are dropped too (seen with a docstring: ``..."replace_all": false}}``, and
    ``false}}}``)."""
    text = arguments.strip()
    repaired = _repair(text, strings, names)
    for _ in range(_EXTRA_BRACES):
        if repaired is not None or not text.endswith("}}"):
            break
        text = text[:-1].rstrip()
        repaired = _repair(text, strings, names)
    return repaired


def _repair(text: str, strings: Collection[str], names: Collection[str]) -> str | None:
    if not (text.startswith("{") and text.endswith("}")) or not strings:
        return None
    keys = "|".join(re.escape(n) for n in names)
    # a key at the start, or after the end of the previous value (a quote, digit, letter or
    # bracket, then a comma)
    found = list(re.finditer(rf'(?:^\{{|(?<=["\w\]}}])\s*,)\s*"({keys})"\s*:\s*', text))
    if not found or found[0].start() != 0:
        return None
    parts = []
    for index, match in enumerate(found):
        end = found[index + 1].start() if index + 1 < len(found) else len(text) - 1
        value = text[match.end() : end].strip()
        if match.group(1) in strings and len(value) >= 2 and value[0] == value[-1] == '"':
            if _KEY_INSIDE.search(value[1:-1]):
                return None  # another key inside the value: an unknown argument, no guessing
            inner = _QUOTE.sub(lambda m: m.group(1) + '\\"', value[1:-1])
            value = f'"{inner}"'
        parts.append(f"{json.dumps(match.group(1))}: {value}")
    repaired = "{" + ", ".join(parts) + "}"
    try:
        parsed = json.loads(repaired)
    except ValueError:
        return None
    return repaired if isinstance(parsed, dict) and len(parsed) == len(found) else None
