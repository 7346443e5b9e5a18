"""The header row read as data: Python code that failed converting a data file's column name
to a number (``int('amount')``), and that code with its loop over the rows skipping the first
one (``header_skipped``).

Small models loop over every line of a CSV file and convert a column; told that the header was
read as data, the 1.5B model sampled at 0.3 sent the same failing code four times and then
answered with totals from its head. ``Shell.run_python`` runs the code put right instead and
says so. Parsing and a read of each named file's first line only; nothing is run here.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from agentica.deep.shell.hints import NOT_A_NUMBER

__all__ = ["HeaderSkip", "header_skipped"]

_FRAME = re.compile(r'File "<string>", line (\d+)')
_DATA_FILE = re.compile(r"""['"]([\w./-]{1,200}\.(?:csv|tsv|txt|dat))['"]""")
_SEPARATOR = re.compile(r"[,;\t|]")
_FIRST_LINE = 4096  # bytes of a data file read to find its header
_MAX_CODE = 20_000
# calls that return a list, so that ``x[1:]`` skips its first row (anything else: list(x)[1:])
_LISTS = frozenset({"readlines", "splitlines", "split", "list", "sorted"})


@dataclass(frozen=True, slots=True)
class HeaderSkip:
    """Code whose loop over a data file's rows now skips the first row."""

    code: str
    """The code put right."""
    file: str
    """The data file whose header row the code read as data (as the code names it)."""
    value: str
    """The column name the code took for a number."""
    line: int
    """The line of the loop that was changed (1-based)."""
    loop: str
    """That line as it now is."""


def header_skipped(code: str, output: str, root: Path) -> HeaderSkip | None:
    """``code`` put right when its ``output`` shows it failed converting a column name of a
    data file it names (inside ``root``) to a number, inside a loop whose rows can be skipped:
    the outermost loop or comprehension around the failing line has its iterable sliced
    (``for line in lines[1:]:``, ``list(reader)[1:]``). ``None`` for anything else, and when
    that iterable is already sliced. Blocking (it reads the first line of each named file)."""
    found = NOT_A_NUMBER.search(output)
    frames = _FRAME.findall(output)
    if found is None or not frames or len(code) > _MAX_CODE:
        return None
    try:  # the text as Python shows it: 'amount\n' is the last cell of its line
        value = str(ast.literal_eval(f"'{found.group(1)}'")).strip().strip("\"'")
    except (ValueError, SyntaxError):
        return None
    file = _header_file(code, value, root)
    if not value or file is None:
        return None
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return None
    rows = _outermost_loop(tree, int(frames[-1]))
    if rows is None or rows.lineno != rows.end_lineno or isinstance(rows, ast.Subscript):
        return None
    segment = ast.get_source_segment(code, rows)
    if segment is None:
        return None
    sliced = f"{segment}[1:]" if _is_list(rows, tree) else f"list({segment})[1:]"
    lines = code.splitlines(keepends=True)
    raw = lines[rows.lineno - 1].encode()
    start, end = rows.col_offset, rows.end_col_offset or rows.col_offset
    changed = (raw[:start] + sliced.encode() + raw[end:]).decode()
    lines[rows.lineno - 1] = changed
    fixed = "".join(lines)
    try:
        ast.parse(fixed)
    except (SyntaxError, ValueError):
        return None
    return HeaderSkip(fixed, file, value, rows.lineno, changed.strip())


def _header_file(code: str, value: str, root: Path) -> str | None:
    """The first data file named in ``code`` (inside ``root``) whose first line has ``value``
    as one of its cells."""
    top = root.resolve()
    for match in _DATA_FILE.finditer(code):
        name = match.group(1)
        try:
            path = (root / name.lstrip("/")).resolve()
            if not path.is_relative_to(top) or not path.is_file():
                continue
            with path.open("rb") as data:
                first = data.read(_FIRST_LINE).split(b"\n", 1)[0].decode("utf-8", "replace")
        except (OSError, ValueError):
            continue
        split = _SEPARATOR.split(first) if _SEPARATOR.search(first) else first.split()
        if value in {cell.strip().strip("\"'") for cell in split}:
            return name
    return None


def _outermost_loop(tree: ast.Module, line: int) -> ast.expr | None:
    """The iterable of the outermost ``for`` loop or one-generator comprehension whose lines
    hold ``line``."""
    best: tuple[int, ast.expr] | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.For | ast.AsyncFor):
            iterable = node.iter
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            if len(node.generators) != 1:
                continue
            iterable = node.generators[0].iter
        else:
            continue
        last = node.end_lineno or node.lineno
        if node.lineno <= line <= last and (best is None or last - node.lineno > best[0]):
            best = (last - node.lineno, iterable)
    return None if best is None else best[1]


def _is_list(rows: ast.expr, tree: ast.Module) -> bool:
    """Whether ``rows`` is surely a list: a call of one of ``_LISTS``, or a name only ever
    assigned such a call or a list comprehension."""
    if isinstance(rows, ast.Call):
        func = rows.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name in _LISTS
    if isinstance(rows, ast.ListComp):
        return True
    if not isinstance(rows, ast.Name):
        return False
    values = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == rows.id for t in node.targets)
    ]
    return bool(values) and all(
        isinstance(v, ast.ListComp) or (isinstance(v, ast.Call) and _is_list(v, tree))
        for v in values
    )
