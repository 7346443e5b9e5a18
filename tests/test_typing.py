"""Static typing as users see it: mypy (strict, the project's configuration) checks the files in
``tests/typecheck/``, whose ``assert_type`` lines state what an editor infers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["agent_output.py"])
def test_mypy_infers_the_documented_types(name: str) -> None:
    pytest.importorskip("mypy", reason="mypy is a development dependency")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "pyproject.toml",
         str(Path("tests") / "typecheck" / name)],
        cwd=ROOT, capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found in 1 source file" in result.stdout
