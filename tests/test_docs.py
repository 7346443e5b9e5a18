"""Every Python block in the docs and every example script runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    out = []
    for path in DOCS:
        for number, code in enumerate(BLOCK.findall(path.read_text()), 1):
            if "127.0.0.1:8000" in code:  # needs a real model server: shown, not run
                continue
            out.append((f"{path.name}#{number}", code))
    return out


@pytest.mark.parametrize(("name", "code"), blocks(), ids=[n for n, _ in blocks()])
def test_doc_block_runs(name: str, code: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stderr}"
    # the comments after print() say what it prints: check the first word of each
    for line in code.splitlines():
        comment = re.search(r"print\(.*\)\s+# (\S+)", line)
        if comment:
            assert comment.group(1) in result.stdout, f"{name}: expected {comment.group(1)!r}"


EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
