"""docs/benchmarks.md sections: each benchmark owns a block between ``<!-- name:start -->`` and
``<!-- name:end -->`` and replaces it with its newest figures."""

from __future__ import annotations

import re
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def write_section(name: str, command: str, markdown: str, *, heading: str | None = None) -> None:
    """Replace block ``name`` with ``markdown`` under a line naming ``command`` and today's
    date; a new block is appended (after ``heading``, if given)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = (
        f"{start}\nCommand: `{command}` · measured {time.strftime('%Y-%m-%d')}\n\n{markdown}\n{end}"
    )
    text = DOCS.read_text() if DOCS.exists() else ""
    if start in text and end in text:
        pattern = re.escape(start) + r".*?" + re.escape(end)
        text = re.sub(pattern, lambda _: block, text, count=1, flags=re.S)
    else:
        intro = f"\n## {heading}\n\n" if heading else "\n"
        text = text.rstrip("\n") + "\n" + intro + block + "\n"
    DOCS.write_text(text)
