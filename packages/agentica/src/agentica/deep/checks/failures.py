"""What a failed test run says failed, in the words a small model can act on.

A test run's output is long (a traceback, a summary); the model needs its one line: the test's
assertion and the value the code gave beside the one expected ("page_count(10, 3) gives 3; the
test expects 4"). Used by ``AnswerCheck`` for its notes and its send-backs.
"""

from __future__ import annotations

import ast
import re

# a call that runs tests: "python3 -m unittest test_stats", "pytest -q", "test_text.py"
RUNS_TESTS = re.compile(r"unittest|pytest|\btest_\w+|\b\w+_test\b")
FAILED_RUN = re.compile(r"exit code [1-9]")
# the line of a test run that says what failed: "AssertionError: 3.33 != 4", "E   assert ..."
_FAILURE_LINE = re.compile(r"(?m)^(?:E\s+)?(?:\w+(?:Error|Exception)\b.*|assert .+)$")
_NOT_EQUAL = re.compile(r"AssertionError: (.{1,80}) != (.{1,80})")


def failure(output: str) -> str:
    """What a failed test run says failed: its first error line, after the line of the test
    that raised it when the traceback shows one (told only "AssertionError: 3 != 4", the
    model edited the test's assertion into paging.py), else its last line."""
    found = _failed_line(output)
    if found is None:
        lines = [line for line in output.strip().splitlines() if line.strip()]
        return (lines[-1] if lines else "the run failed")[:300]
    code, error = found
    if not code:
        return error[:300]
    expected = _expected(code, error)
    return f"{code[:200]} -> {error[:200]}" + (f" ({expected})" if expected else "")


def mismatch(output: str) -> str:
    """What the first failed ``assertEqual`` of a test run says, in words ("page_count(10, 3)
    gives 3; the test expects 4"), or ""."""
    found = _failed_line(output)
    return _expected(*found) if found is not None else ""


def _failed_line(output: str) -> tuple[str, str] | None:
    """The first error line of a test run and the line of code above it that raised it ("" when
    the traceback shows none), or None."""
    found = _FAILURE_LINE.search(output)
    if found is None:
        return None
    error = re.sub(r"^E\s+", "", found.group(0).strip())
    above = [
        line.strip().lstrip(">").strip()
        for line in output[: found.start()].splitlines()
        if line.strip() and not set(line.strip()) <= set("^~ ")
    ]
    code = above[-1] if above else ""
    if code.startswith(("File ", "Traceback", "---", "===")):
        code = ""
    return code, error


def _expected(code: str, error: str) -> str:
    """``self.assertEqual(page_count(10, 3), 4)`` failed with ``3 != 4``: "page_count(10, 3)
    gives 3; the test expects 4"."""
    values = _NOT_EQUAL.fullmatch(error)
    if values is None or "assertEqual" not in code:
        return ""
    try:
        node = ast.parse(code, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    if (
        not isinstance(node, ast.Call)
        or not isinstance(node.func, ast.Attribute)
        or node.func.attr != "assertEqual"
        or len(node.args) < 2
    ):
        return ""
    tested = ast.unparse(node.args[0])
    given = re.sub(r"^\w+ differ: ", "", values.group(1))  # ("Lists differ: [1, 2] != ...")
    return f"{tested} gives {given}; the test expects {values.group(2)}"
