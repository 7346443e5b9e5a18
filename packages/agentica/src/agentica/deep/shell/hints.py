"""What the model is told about its commands: refused input (``check_command``,
``check_python``), advice after a failure (``hint``), and Python code put right before it runs:
mistyped brackets (``repair_brackets``), missing standard-library imports (``missing_imports``),
stand-ins for the file tools called as functions (``tool_stand_ins``), remarks on the data files
code wrote or read (``data_remarks``) and the code's lines shown in its tracebacks
(``source_lines``)."""

from __future__ import annotations

import ast
import csv
import io
import json
import os
import re
import stat as stat_module
import tokenize
from pathlib import Path, PurePosixPath

_SHELL_START = re.compile(r"^(?:\$\s|python3?\s|pip3?\s|sh\s|bash\s|cd\s)")
_PYTHON_START = re.compile(
    r"^\s*(import\s+[\w.]+|from\s+[\w.]+\s+import\s|def\s+\w+\s*\(|class\s+\w+|print\s*\()"
)


def check_command(command: str) -> str | None:
    """Why ``command`` is no shell command to run (for the model), or None."""
    if not command.strip():
        return "The command is empty. Pass a shell command, e.g. execute('ls -la')."
    if "\0" in command:
        return "The command contains a NUL character; remove it."
    if _PYTHON_START.match(command):
        return (
            "This is Python code, not a shell command. Write it to a file and run "
            "`python file.py`, or pass it as `python -c '...'`."
        )
    return None


def check_python(code: str) -> str | None:
    """Why ``code`` is no Python source to run (for the model), or None."""
    stripped = code.strip()
    if not stripped:
        return "The code is empty. Pass Python source code, e.g. print(1 + 1)."
    if _SHELL_START.match(stripped):
        return (
            "run_python takes Python source code, not a shell command. Pass the code itself "
            "(e.g. print(open('data.csv').read())), or run the command with execute."
        )
    if "\0" in code:
        return "The code contains a NUL character; remove it."
    return None


def hint(code: int | None, output: str) -> str:
    """Advice for a small model about a failed command."""
    if code == 127:
        return (
            "\nThe command was not found (exit code 127): check its spelling, or the program is "
            "not installed here (check with: which NAME)."
        )
    if code == 126:
        return (
            "\nThe file could not be executed (exit code 126): run scripts as `sh file.sh` or "
            "`python file.py`, or make them executable with chmod +x."
        )
    if code == 2 and "syntax error" in output.lower():
        return "\nThe shell could not parse the command: check quotes and brackets."
    if not code:
        return ""
    for error, advice in _PYTHON_ERRORS:
        if (found := error.search(output)) is not None:
            return "\n" + advice.format(*found.groups())
    return ""


# Python errors small models make and then repeat unchanged, with what to do about each (the
# first that matches is shown; ``{0}`` is the pattern's group)
_PYTHON_ERRORS = tuple(
    (re.compile(pattern), advice)
    for pattern, advice in (
        (
            r"No such file or directory: '/([^'/]+(?:/[^'/]+){0,2})'",
            "'/{0}' starts at the root of the machine. The file tools show workspace files as "
            "/{0}, but code runs inside the workspace: there the path is '{0}' (no leading /).",
        ),
        (
            r"KeyError: '([^'\n]{1,40})'",
            "The data has no key {0!r}: print it, or its keys (print(data[0].keys()) for a "
            "list of objects), to see the names it has, then use one of those.",
        ),
        (
            r"No module named '(\w+)",
            "The Python module {0!r} is not installed here. Rewrite the code with the standard "
            "library instead (for a CSV file, the csv module).",
        ),
        (
            # seen: a whole script sent as one line, "import csv; with open(...) as f: ..." or
            # "with open(...) as f: lines = f.readlines() count = 0 for line in lines: ..."
            r'File "<string>", line 1\n(?:[^\n]*;\s*(?:with|for|if|while|def|try|class)\b'
            r"|\s*(?:with|for|if|while|def|try|class)\b[^\n]*:[ \t]+\S[^\n]*\b"
            r"(?:for|if|while|with|def|print|return)\b)[^\n]*\n(?:[^\n]*\n)?SyntaxError",
            "The code is all on one line, but with, for, if and def need lines of their own: "
            "put each statement on its own line (a newline, \\n in the JSON string) and indent "
            "the lines inside each block by four spaces, like this: "
            '{{"code": "import csv\\nwith open(\'data.csv\') as f:\\n    rows = '
            'list(csv.reader(f))\\nprint(len(rows))"}}',
        ),
        (
            r"SyntaxError",
            "The code has a syntax error: fix the line shown, then run the corrected code.",
        ),
        (
            # seen: code using a name it expected from read_file or an earlier call
            r"NameError: name '(\w+)' is not defined",
            "{0!r} is not defined in this code. Every run_python call starts afresh: nothing "
            "from read_file or from earlier calls exists in it. Define it in the code itself "
            "(load a file with open(), json.load or csv.reader) or import it.",
        ),
        (
            r"(?:invalid literal for int\(\) with base 10|could not convert string to float): "
            r"'([A-Za-z_][\w ]{0,40})'",
            "{0!r} is text, not a number. If it is a column name, the code read the header row "
            "as data: skip it (next(reader)) or use csv.DictReader.",
        ),
        (
            r"TypeError: list indices must be integers or slices, not str",
            "A list was indexed with a string (row['amount'] on a row from csv.reader, which is "
            "a list): index it by position (row[2]), or read the rows with csv.DictReader to use "
            "the column names.",
        ),
        (
            r"ValueError: too many values to unpack",
            "A row has more values than the names it was unpacked into (a, b = row on a row of "
            "three): unpack every column (a, b, c = row) or index the row (row[0], row[2]).",
        ),
    )
)
_MISMATCH = re.compile(r"closing parenthesis '(.)' does not match opening parenthesis '(.)'")
_NEVER_CLOSED = re.compile(r"'(.)' was never closed")
_UNMATCHED = re.compile(r"unmatched '([)\]}])'")


def _is_last(line: str, offset: int | None) -> bool:
    """Whether the character at ``offset`` (1-based) is the last one of ``line`` but spaces."""
    column = (offset or 0) - 1
    return 0 <= column < len(line) and not line[column + 1 :].strip()


_CLOSER = {"(": ")", "[": "]", "{": "}"}
_MAX_REPAIR = 20_000  # characters of code the bracket repair parses (on the event loop: ~ms)
COMMON_PACKAGES = ("numpy", "pandas")
"""Packages models often assume; ``run_python``'s description names those not installed."""


def repair_brackets(code: str) -> tuple[str, list[str]]:
    """``code`` with mistyped closing brackets put right, and one note per change.

    Small models write ``print(f(x)}`` for ``print(f(x))`` (a ``}`` that belongs to the JSON
    of their tool call ends up inside the code string): a closing bracket that does not match
    its opening one is replaced by the matching one, and a bracket left open on the last line is
    closed at the end, but only when the code then parses. Anything else, and code that already
    parses, is returned unchanged with no notes. Parsing only: nothing is run.
    """
    if len(code) > _MAX_REPAIR:
        return code, []
    fixed, notes = code, []
    for _ in range(3):
        try:
            ast.parse(fixed)
        except SyntaxError as exc:
            lines = fixed.splitlines(keepends=True)
            number = exc.lineno or 0
            if not 0 < number <= len(lines):
                return code, []
            line = lines[number - 1]
            message = str(exc.msg)
            if (found := _MISMATCH.search(message)) is not None:
                closer, opener = found.groups()
                column = (exc.offset or 0) - 1
                if not (0 <= column < len(line) and line[column] == closer):
                    return code, []
                right = _CLOSER[opener]
                lines[number - 1] = line[:column] + right + line[column + 1 :]
                notes.append(f"line {number} had {closer!r} where {right!r} belongs")
            elif (found := _NEVER_CLOSED.search(message)) is not None and not "".join(
                lines[number:]
            ).strip():
                right = _CLOSER.get(found.group(1), "")
                if not right:
                    return code, []
                stripped = line.rstrip()
                lines[number - 1] = stripped + right + line[len(stripped) :]
                notes.append(f"line {number} left {found.group(1)!r} open; {right!r} was added")
            elif (found := _UNMATCHED.search(message)) is not None and _is_last(line, exc.offset):
                closer = found.group(1)  # a stray closer at the end of a line: the JSON's }
                column = (exc.offset or 0) - 1
                lines[number - 1] = line[:column] + line[column + 1 :]
                notes.append(f"line {number} ended with a stray {closer!r}, which was removed")
            else:
                return code, []
            fixed = "".join(lines)
        except (ValueError, OverflowError, RecursionError, MemoryError):
            return code, []
        else:
            return (fixed, notes) if notes else (code, [])
    return code, []


# Standard-library modules small models use without importing them (seen: csv.reader with no
# `import csv`, the same failing call sent four times)
_STDLIB_MODULES = frozenset({
    "csv", "json", "math", "re", "os", "sys", "statistics", "collections", "datetime",
    "itertools", "functools", "random", "string", "time", "pathlib", "decimal", "fractions",
    "heapq", "bisect", "operator", "textwrap", "shutil", "glob",
})  # fmt: skip


def _parsed(code: str) -> ast.Module | None:
    """``code`` parsed, or None when it does not parse or is too long to repair."""
    if len(code) > _MAX_REPAIR:
        return None
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError, OverflowError, RecursionError, MemoryError):
        return None


def _names(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
    """The names ``tree`` uses as ``name.attribute``, the names it calls (``name(...)``) and
    the names it defines (assigned, imported, defined, arguments, exceptions caught)."""
    used: set[str] = set()
    called: set[str] = set()
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            used.add(node.value.id)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            called.add(node.func.id)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            defined.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            defined.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    return used, called, defined


def missing_imports(code: str) -> tuple[str, list[str]]:
    """``code`` with ``import m`` added as its first line for each standard-library module
    ``m`` it uses as ``m.name`` without importing or defining it, and those modules' names.
    Code that does not parse, or needs nothing, is returned unchanged. Parsing only."""
    tree = _parsed(code)
    if tree is None:
        return code, []
    used, _, defined = _names(tree)
    missing = sorted((used & _STDLIB_MODULES) - defined)
    if not missing or code.startswith("from __future__"):  # (it must stay first)
        return code, []
    return f"import {', '.join(missing)}\n{code}", missing


# one line, so that a traceback's line numbers move by one only
_STAND_INS = {
    "read_file": "read_file = lambda path, *_, **__: open(str(path).lstrip('/'), "
    "encoding='utf-8').read()",
    "write_file": "write_file = lambda path, content='', *_, **__: open(str(path).lstrip('/'), "
    "'w', encoding='utf-8').write(str(content))",
}


def tool_stand_ins(code: str) -> tuple[str, list[str]]:
    """``code`` with a first line defining ``read_file`` and ``write_file`` when it calls them
    without defining them, and the names defined. The file tools are not Python functions, but
    a small model calls them in its code (word-count: ``len(read_file("/notes.txt").split())``,
    a NameError, then a run that only defined read_file, and the count answered from its head).
    Parsing only; code that does not parse is returned unchanged."""
    if not any(f"{name}(" in code for name in _STAND_INS) or (tree := _parsed(code)) is None:
        return code, []
    _, called, defined = _names(tree)
    wanted = [name for name in _STAND_INS if name in called and name not in defined]
    if not wanted or code.startswith("from __future__"):
        return code, []
    return "; ".join(_STAND_INS[name] for name in wanted) + "\n" + code, wanted


def workspace_paths(code: str, root: Path) -> tuple[str, list[str]]:
    """``code`` with workspace paths written the file tools' way (``'/scores.csv'``) made
    relative (``'scores.csv'``), and the paths changed.

    The file tools name a workspace file ``/scores.csv``; code runs inside the workspace, where
    that path is the machine's root, and small models do not take the hint. A string literal is
    changed only when it is an absolute path that does not exist on the machine and either
    names a single file (nobody means the machine's root) or starts with a name the workspace
    has. Anything that does not tokenize is returned unchanged. Blocking (it stats files).
    """
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError):
        return code, []
    lines = code.splitlines(keepends=True)
    changed: list[str] = []
    for token in reversed(tokens):  # from the end: earlier positions stay valid
        value = _absolute_literal(token)
        if value is None or not _means_workspace(value, root):
            continue
        (row, col), (end_row, end_col) = token.start, token.end
        if row != end_row:
            continue
        text = token.string
        cut = text.index("/")
        line = lines[row - 1]
        lines[row - 1] = line[:col] + text[:cut] + text[cut + 1 :] + line[end_col:]
        changed.append(value)
    return "".join(lines), list(reversed(changed))


def _absolute_literal(token: tokenize.TokenInfo) -> str | None:
    if token.type != tokenize.STRING:
        return None
    prefix = token.string[: len(token.string) - len(token.string.lstrip("rRbBuU"))]
    if not set(prefix) <= set("rRuU"):
        return None
    try:
        value = ast.literal_eval(token.string)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(value, str) or not value.startswith("/") or value.startswith("//"):
        return None
    return value if "\n" not in value and len(value) < 300 else None


def _means_workspace(value: str, root: Path) -> bool:
    parts = PurePosixPath(value).parts[1:]
    if not parts or Path(value).exists():
        return False
    return len(parts) == 1 or (root / parts[0]).exists()


_DATA_LITERAL = re.compile(r"""['"]([\w./-]{1,200}\.(json|csv))['"]""")
_SPLIT_BLANK = re.compile(r"\.split\(\s*\)")
_MAX_CHECKED = 1 << 20  # bytes of a written JSON file parsed to check it
NOT_A_NUMBER = re.compile(
    r"(?:invalid literal for int\(\) with base 10|could not convert string to float): "
    r"'([^'\n]{1,80})'"
)
"""Python's error for text taken for a number; its group is that text as Python shows it."""


_FILE_LITERAL = re.compile(r"""['"]([\w./-]{1,200}\.[A-Za-z]{1,8})['"]""")
_SHOWN_BYTES = 1500  # a file the code wrote is shown whole up to this size
_SHOWN_FILES = 2


def file_states(code: str, root: Path) -> dict[str, tuple[int, int] | None]:
    """The files inside ``root`` that ``code`` names in a string literal ("report.md"), each
    with its (modification time in ns, size), ``None`` for one that does not exist yet.
    Blocking (it stats files)."""
    top = root.resolve()
    states: dict[str, tuple[int, int] | None] = {}
    for match in _FILE_LITERAL.finditer(code):
        name = match.group(1).lstrip("/")
        try:
            path = (root / name).resolve()
            if not path.is_relative_to(top) or name in states:
                continue
            stat = path.stat()
            states[name] = (stat.st_mtime_ns, stat.st_size) if path.is_file() else None
        except FileNotFoundError:
            states[name] = None
        except (OSError, ValueError):
            continue
    return states


def written_files(
    before: dict[str, tuple[int, int] | None], root: Path
) -> list[tuple[str, str | None]]:
    """Of the files ``before`` (``file_states`` taken before the code ran), those the code
    created or changed: (name, text), the text ``None`` when it is long or not text. Blocking."""
    top = root.resolve()
    written: list[tuple[str, str | None]] = []
    for name, state in before.items():
        path = (root / name).resolve()
        try:
            stat = path.stat()
            if not path.is_file() or not path.is_relative_to(top):
                continue
            if state == (stat.st_mtime_ns, stat.st_size):
                continue
            text = _read_inside(path, top) if stat.st_size <= _SHOWN_BYTES else None
        except (OSError, ValueError):
            continue
        written.append((name, text))
    return written


def _read_inside(path: Path, top: Path) -> str | None:
    """The UTF-8 text of ``path`` (at most ``_SHOWN_BYTES``), read only if the file opened is
    inside ``top``: no symbolic link at its end, and the descriptor's own path checked after
    opening (a process the code left running may swap a folder for a link meanwhile)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        opened = Path(os.readlink(f"/proc/self/fd/{fd}"))
        if not opened.is_relative_to(top) or not stat_module.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _SHOWN_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8") if len(data) <= _SHOWN_BYTES else None
    except UnicodeDecodeError:
        return None


def show_written(written: list[tuple[str, str | None]]) -> str:
    """What to tell a model whose code printed nothing about the files it wrote: each short
    text file's text, the others by name (seen: the code wrote the right totals into
    report.md, printed nothing, and the model wrote its own wrong ones over them)."""
    parts: list[str] = []
    for name, text in written[:_SHOWN_FILES]:
        if text is None:
            parts.append(f"it wrote {name}")
        else:
            body = text.rstrip("\n")
            parts.append(
                f"it wrote {name}, which now reads:\n{body}" if body else f"it wrote {name} (empty)"
            )
    more = len(written) - _SHOWN_FILES
    if more > 0:
        parts.append(f"and {more} more file{'s' if more > 1 else ''}")
    return "; ".join(parts)


_WROTE = re.compile(
    r"it wrote (?P<name>[^\s,;]+), which now reads:\n(?P<text>.*?)"
    r"(?=; it wrote [^\s,;]+(?:, which now reads:\n|;|\n| \(empty\)|\Z)|; and \d+ more files?"
    r"|\n\(|\Z)",
    re.S,
)


def written_texts(output: str) -> list[tuple[str, str]]:
    """The (name, text) pairs ``show_written`` put in a ``run_python`` result."""
    if "the code printed nothing, and it wrote " not in output:
        return []
    return [(m.group("name"), m.group("text")) for m in _WROTE.finditer(output)]


def data_remarks(code: str, root: Path, since: float, output: str = "") -> list[str]:
    """Remarks on how ``code`` (which has run, printing ``output``) handled the data files it
    names: a JSON file in the workspace it wrote (changed after ``since``, a ``time.time()``)
    that does not parse (seen: a dict written with ``str()``, so single quotes), a CSV file's
    lines split on blanks (seen: ``line.split()[1]`` on "2024-03-04,Priya,7.5"), and text
    taken for a number that is a value of a CSV's column (seen: ``split(',')[1]``, the person,
    for the hours in column 2). Blocking (it reads files)."""
    remarks: list[str] = []
    if (wrong := wrong_result(code)) is not None:
        remarks.append(wrong[0])
    named = {m.group(1).lstrip("/"): m.group(2) for m in _DATA_LITERAL.finditer(code)}
    top = root.resolve()
    not_number = NOT_A_NUMBER.search(output)
    for name, kind in named.items():
        if kind == "csv":
            if _SPLIT_BLANK.search(code):
                remarks.append(
                    f"Your code names {name} and splits text with .split(), which splits on "
                    "blanks; the fields of a CSV line are separated by commas: read it with "
                    "csv.DictReader(open(...)) or split with .split(',')."
                )
            elif not_number is not None:
                remarks += _column_remark(root / name, top, name, not_number.group(1).strip())
            continue
        path = (root / name).resolve()
        try:
            stat = path.stat()
            old = stat.st_mtime < since - 1  # (file times are coarser than time.time())
            if not path.is_relative_to(top) or old or stat.st_size > _MAX_CHECKED:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        try:
            json.loads(text)
        except ValueError as exc:
            remarks.append(
                f"Your code wrote {name}, which is not valid JSON ({exc}). Write it with "
                "json.dump(value, file) (str() of a dict gives single quotes, not JSON)."
            )
    if (missing := _MISSING_FILE.search(output)) is not None:
        remarks += _folder_remark(root, top, missing.group(1))
    return list(dict.fromkeys(remarks))


_MISSING_FILE = re.compile(
    r"FileNotFoundError: \[Errno 2\] No such file or directory: '([^'\n/][^'\n]*)'"
)
_MAX_LISTED = 12


def _folder_remark(root: Path, top: Path, name: str) -> list[str]:
    """What the folder of a file the code could not open holds, when that folder exists in
    the workspace (seen: data/numbers.txt made up for "the files in the data folder", which
    holds a.txt, b.txt and c.txt, opened five times over)."""
    folder = (root / name).parent.resolve()
    try:
        if not folder.is_relative_to(top) or not folder.is_dir():
            return []
        files = sorted(p.name for p in folder.iterdir() if p.is_file())
    except OSError:
        return []
    if not files:
        return []
    where = str(PurePosixPath(name).parent)
    shown = ", ".join(files[:_MAX_LISTED]) + (", ..." if len(files) > _MAX_LISTED else "")
    if where == ".":
        return [f"There is no {name} in the workspace; its files are {shown}."]
    return [
        f"There is no {name}: {where} holds {shown}. Open one of those; to use every file in "
        f"it, loop over them: for name in sorted(os.listdir({where!r})): ... "
        f"open(os.path.join({where!r}, name))"
    ]


_DICT_READER = re.compile(r"\b(\w+)\s*=\s*(?:csv\.)?DictReader\(")
_EXTREME = re.compile(r"(?m)^\s*(\w+)\s*=\s*(max|min)\((.*)$")
_DATE_KEY = re.compile(r"""(?i)['"](born|birth\w*|\w*year\w*|\w*date\w*|founded|created\w*)['"]""")
_EARLY, _LATE = ("oldest", "earliest", "eldest"), ("youngest", "newest", "latest")


def wrong_result(code: str) -> tuple[str, str | None] | None:
    """What makes the result of ``code`` wrong, when a reading of the code alone shows it:
    (the remark, the code put right or None). Pure: the answer check reads it again from a
    call's code to send back an answer taken from that result."""
    if (inverted := _inverted_extreme(code)) is not None:
        return inverted
    if (skipped := _dict_reader_skipped(code)) is not None:
        name, right = skipped
        remark = (
            f"Your code reads the CSV file with csv.DictReader, which takes the header row "
            f"itself, and also calls next({name}): that skips the first row of data. "
            f"Remove next({name})."
        )
        return remark, right
    return None


def _inverted_extreme(code: str) -> tuple[str, str] | None:
    """A remark on ``oldest = max(..., key=... 'born')`` (or ``newest = min(...)`` of a date):
    the largest year is the latest one (seen: "Who is the oldest person?" computed as the
    max of the birth years, the youngest, twice), with the code put right."""
    for match in _EXTREME.finditer(code):
        name, function, key = match.group(1), match.group(2), _DATE_KEY.search(match.group(3))
        words = _EARLY if function == "max" else _LATE
        if key is None or not any(word in name.lower() for word in words):
            continue
        field = key.group(1)
        right = "min" if function == "max" else "max"
        at = match.start(2)
        fixed = f"{code[:at]}{right}{code[at + len(function) :]}"
        line = fixed[match.start(1) :].split("\n", 1)[0]
        return (
            f"Your code sets {name} to the {function}() of {field!r}, a year or date: the "
            f"largest {field} is the latest one, so the oldest or earliest has the smallest "
            f"(min), the youngest or newest the largest (max). Use {right}() for {name}: "
            f"{line.strip()}.",
            fixed,
        )
    return None


def _dict_reader_skipped(code: str) -> tuple[str, str | None] | None:
    """The name of a ``csv.DictReader`` the code also calls ``next()`` on (seen: told "skip
    it (next(reader)) or use csv.DictReader", the code did both, and summed one row short),
    with the code without the line that is only that call, if one is."""
    for match in _DICT_READER.finditer(code):
        name = match.group(1)
        call = re.compile(rf"\bnext\(\s*{re.escape(name)}\s*\)")
        if not call.search(code):
            continue
        alone = re.compile(rf"\s*next\(\s*{re.escape(name)}\s*\)\s*")
        lines = code.splitlines()
        at = next((n for n, text in enumerate(lines) if alone.fullmatch(text)), None)
        return name, None if at is None else "\n".join(lines[:at] + lines[at + 1 :])
    return None


def _column_remark(path: Path, top: Path, name: str, value: str) -> list[str]:
    """Where ``value`` (text the code took for a number) is in the CSV file ``path``: a value
    of one of its columns (the columns with their positions), or a gap in a column of numbers;
    nothing for its header (the error's hint covers that)."""
    try:
        path = path.resolve()
        if not path.is_relative_to(top) or path.stat().st_size > _MAX_CHECKED:
            return []
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))
    except (OSError, UnicodeDecodeError, ValueError, csv.Error):
        return []
    if len(rows) < 2 or not value:
        return []
    header = [cell.strip() for cell in rows[0]]
    columns = ", ".join(f"{cell} (row[{i}])" for i, cell in enumerate(header))
    if value in header:
        return []  # (the error's own hint says it: the header read as data; seen, a second
        # remark saying the same made the model send the same code again)
    for row in rows[1:]:
        for at, cell in enumerate(row[: len(header)]):
            if cell.strip() != value:
                continue
            column = [r[at].strip() for r in rows[1:] if len(r) > at]
            if sum(map(_is_number, column)) * 2 > len(column):  # (a number column: one gap)
                return [
                    f"{value!r} in the {header[at]} column of {name} (row[{at}]) is not a "
                    "number: skip the rows whose value is not a number."
                ]
            return [
                f"Your code took {value!r} for a number, but it is the {header[at]} column "
                f"of {name} (row[{at}]): it used the wrong column. The columns of {name} are "
                f"{columns}; take the number from the column that holds it."
            ]
    return []


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_STRING_FRAME = re.compile(r'^(\s*)File "<string>", line (\d+)(?:, in .*)?$')


def source_lines(output: str, code: str) -> str:
    """``output`` with the line of ``code`` shown under each traceback frame of it, as Python
    shows a file's lines (code run with ``-c`` has none: seen, the 1.5B model sent the same
    failing code four times, told only "line 6 ... IndexError")."""
    if 'File "<string>"' not in output:
        return output
    lines = code.splitlines()
    output_lines = output.splitlines(keepends=True)
    shown: list[str] = []
    for at, line in enumerate(output_lines):
        shown.append(line)
        match = _STRING_FRAME.match(line.rstrip("\n"))
        if match is None or not 0 < int(match.group(2)) <= len(lines):
            continue
        source = lines[int(match.group(2)) - 1].strip()
        following = output_lines[at + 1].strip() if at + 1 < len(output_lines) else ""
        if source and following != source:  # (a SyntaxError shows its line itself)
            shown.append(f"{match.group(1)}  {source}\n")
    return "".join(shown)
