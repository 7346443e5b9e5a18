"""The tasks of ``benchmarks/local_tasks.py``: prompts, files, checkers and reference solutions.

Five kinds (``KINDS``), each task phrased as a user would type it (no tool names, no call syntax):
``answer`` (answer a question from a file: the checker reads the final answer), ``edit`` (change
or derive a file exactly), ``script`` (write and run a script, compute and save a result), ``fix``
(a module with a bug and a standard-library test file; the checker runs the tests, unchanged,
plus a few hidden cases) and ``multi`` (read or change two to four files). ``check(root, answer)``
looks at the workspace afterwards; ``solve(root)`` does the task directly (the answer text for
``answer`` tasks). ``tests/test_local_tasks.py`` checks that every checker fails on the untouched
workspace and passes after ``solve``.
"""

from __future__ import annotations

import ast
import configparser
import csv
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentica.cli.demo import SALES, TOTALS

Kind = Literal["answer", "edit", "script", "fix", "multi"]
KINDS: dict[Kind, str] = {
    "answer": "answer from a file",
    "edit": "edit a file exactly",
    "script": "write and run a script",
    "fix": "fix a bug so tests pass",
    "multi": "work across several files",
}


@dataclass(frozen=True, slots=True)
class Task:
    """One task: what the user types, the files it starts with, how to check and solve it."""

    name: str
    kind: Kind
    prompt: str
    files: dict[str, str]
    check: Callable[[Path, str], bool]  # (workspace, final answer) -> solved
    solve: Callable[[Path], str]  # does the task; returns the answer text ("" if none)

    def setup(self, root: Path) -> None:
        """Write the task's starting files into ``root``."""
        for name, text in self.files.items():
            _write(root, name, text)


# ----------------------------------------------------------------------------------- helpers


def _read(root: Path, name: str) -> str:
    path = root / name
    return path.read_text(errors="replace") if path.is_file() else ""


def _write(root: Path, name: str, text: str) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _python(root: Path, *args: str, timeout: float = 30.0) -> str:
    """What ``python *args`` prints in ``root`` ("" when it runs longer than ``timeout``)."""
    try:
        out = subprocess.run(
            [sys.executable, "-E", "-B", *args],
            cwd=root, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return ""
    return out.stdout


def _save(name: str, compute: Callable[[Path], object]) -> Callable[[Path], str]:
    """A solution that writes what ``compute`` returns to ``name``."""

    def solve(root: Path) -> str:
        _write(root, name, f"{compute(root)}\n")
        return ""

    return solve


def _lines(text: str) -> list[str]:
    """The non-blank lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def _same_text(got: str, want: str) -> bool:
    """Equal up to trailing whitespace on lines and blank lines at either end."""

    def norm(text: str) -> list[str]:
        lines = [line.rstrip() for line in text.splitlines()]
        while lines and not lines[-1]:
            lines.pop()
        while lines and not lines[0]:
            lines.pop(0)
        return lines

    return norm(got) == norm(want)


_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")
_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def _numbers(text: str) -> list[float]:
    """Every number in ``text`` (``1,234.5`` is one number; 165 and 165.0 are equal)."""
    return [float(m.replace(",", "")) for m in _NUMBER.findall(text)]


def _says(answer: str, value: float, tolerance: float = 1e-6) -> bool:
    """Whether ``answer`` states ``value`` (as a number, or a small integer as a word)."""
    if any(abs(n - value) <= tolerance for n in _numbers(answer)):
        return True
    if float(value).is_integer() and 0 <= value < len(_WORDS):
        return re.search(rf"\b{_WORDS[int(value)]}\b", answer, re.I) is not None
    return False


def _number(text: str) -> float | None:
    try:
        return float(text.strip().replace(",", ""))
    except ValueError:
        return None


def _json(root: Path, name: str) -> Any:
    try:
        return json.loads(_read(root, name))
    except ValueError:
        return None


def _ini(text: str) -> dict[str, dict[str, str]] | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return {section: dict(parser[section]) for section in parser.sections()}


def _csv(root: Path, name: str) -> list[list[str]]:
    """The non-blank rows of a CSV file, cells stripped."""
    rows = csv.reader(io.StringIO(_read(root, name)))
    return [[cell.strip() for cell in row] for row in rows if any(c.strip() for c in row)]


def _functions(root: Path, name: str) -> set[str] | None:
    """The names of the top-level functions of a Python file (``None``: missing or invalid)."""
    if not (root / name).is_file():
        return None
    try:
        tree = ast.parse(_read(root, name))
    except SyntaxError:
        return None
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def _first_match(answer: str, patterns: dict[str, str]) -> str | None:
    """The key of the pattern that matches earliest in ``answer`` (case-insensitive)."""
    found = [(m.start(), key) for key, pattern in patterns.items()
             if (m := re.search(pattern, answer, re.I))]  # fmt: skip
    return min(found)[1] if found else None


def _person(name: str) -> str:
    """A pattern for a person named by their first or last name."""
    return "|".join(rf"\b{re.escape(part)}\b" for part in name.split())


def _version(version: str) -> str:
    """A pattern for the dotted ``version`` (not part of a longer one)."""
    return rf"(?<![\d.]){re.escape(version)}(?!\.?\d)"


# ------------------------------------------------------------------ answer: from a file

SETTINGS_INI = """[database]
host = db.internal
port = 5432
user = app

[server]
host = 0.0.0.0
port = 8080
workers = 4
"""

PORTS = {"8080": r"(?<![\d.])8,?080(?![\d])", "5432": r"(?<![\d.])5,?432(?![\d])"}

ORDERS = """id,customer,amount,status
1041,Acme,120.50,shipped
1042,Birch & Co,89.99,pending
1043,Acme,15.00,cancelled
1044,Delta Ltd,250.00,pending
1045,Elm Foods,42.10,shipped
1046,Birch & Co,300.00,pending
1047,Acme,64.75,shipped
"""

SCORES = """student,score
Amara,91
Ben,78
Chloe,85
Dev,66
Erin,92.5
"""

PEOPLE = """[
  {"name": "Marta Koval", "born": 1948},
  {"name": "Jonas Berg", "born": 1952},
  {"name": "Ines Duarte", "born": 1939},
  {"name": "Tom Okafor", "born": 1961}
]
"""
PEOPLE_NAMES = {n: _person(n) for n in ("Marta Koval", "Jonas Berg", "Ines Duarte", "Tom Okafor")}

PYPROJECT = """[project]
name = "inventory-tool"
description = "Track stock from the command line"
dependencies = [
    "requests>=2.31.0",
    "rich==13.7.1",
]
version = "2.4.1"
requires-python = ">=3.10"
"""
VERSIONS = {v: _version(v) for v in ("2.31.0", "13.7.1", "2.4.1", "3.10")}

TIMESHEET = """date,person,hours
2024-03-04,Priya,7.5
2024-03-04,Sam,8
2024-03-05,Priya,6
2024-03-05,Sam,7.25
2024-03-06,Priya,4
2024-03-06,Sam,8
"""


def _solve_port(root: Path) -> str:
    config = configparser.ConfigParser()
    config.read_string(_read(root, "settings.ini"))
    return f"The web server listens on port {config['server']['port']}."


def _solve_pending(root: Path) -> str:
    rows = list(csv.DictReader(io.StringIO(_read(root, "orders.csv"))))
    return f"{sum(r['status'] == 'pending' for r in rows)} orders are still pending."


def _solve_average(root: Path) -> str:
    rows = csv.DictReader(io.StringIO(_read(root, "scores.csv")))
    return f"The average score is {statistics.mean(float(r['score']) for r in rows):g}."


def _solve_oldest(root: Path) -> str:
    people = json.loads(_read(root, "people.json"))
    oldest = min(people, key=lambda p: p["born"])
    return f"{oldest['name']} is the oldest (born {oldest['born']})."


def _solve_version(root: Path) -> str:
    return f"Version {tomllib.loads(_read(root, 'pyproject.toml'))['project']['version']}."


def _solve_hours(root: Path) -> str:
    rows = csv.DictReader(io.StringIO(_read(root, "timesheet.csv")))
    return f"Priya logged {sum(float(r['hours']) for r in rows if r['person'] == 'Priya'):g} hours."


ANSWER_TASKS = [
    Task("server-port", "answer", "What port does the web server listen on? It's set in "
         "settings.ini.", {"settings.ini": SETTINGS_INI},
         lambda r, a: _first_match(a, PORTS) == "8080", _solve_port),
    Task("pending-orders", "answer", "How many orders in orders.csv are still pending?",
         {"orders.csv": ORDERS}, lambda r, a: _says(a, 3), _solve_pending),
    Task("average-score", "answer", "What's the average score in scores.csv?",
         {"scores.csv": SCORES}, lambda r, a: _says(a, 82.5, 0.005), _solve_average),
    Task("oldest-person", "answer", "Who is the oldest person in people.json?",
         {"people.json": PEOPLE}, lambda r, a: _first_match(a, PEOPLE_NAMES) == "Ines Duarte",
         _solve_oldest),
    Task("package-version", "answer", "Which version of the package does pyproject.toml "
         "declare?", {"pyproject.toml": PYPROJECT},
         lambda r, a: _first_match(a, VERSIONS) == "2.4.1", _solve_version),
    Task("hours-logged", "answer", "How many hours did Priya log in total? The data is in "
         "timesheet.csv.", {"timesheet.csv": TIMESHEET},
         lambda r, a: _says(a, 17.5, 0.005), _solve_hours),
]  # fmt: skip


# ------------------------------------------------------------------- edit: a file exactly

SETUP_CFG = """[metadata]
name = weather-cli
version = 1.4.2
description = Forecasts in your terminal

[options]
python_requires = >=3.9
"""

README = """# Palette

Palette picks a colour for every day of the week.
You can change the colour of the header in the settings.
The default colour is blue.
"""

CONFIG_INI = """[app]
name = shop
debug = true
log_level = info

[db]
url = sqlite:///shop.db
"""


def _check_json_config(root: Path, answer: str) -> bool:
    data = _json(root, "config.json")
    if not isinstance(data, dict) or set(data) != {"name", "version"}:
        return False
    version = data["version"]
    return data["name"] == "agentica" and not isinstance(version, bool) and version in (1, "1")


def _check_rename(root: Path, answer: str) -> bool:
    out = _python(root, "-c", "import util; print(util.compute(3), hasattr(util, 'calc'))")
    return out.split() == ["9", "False"]


def _check_debug_off(root: Path, answer: str) -> bool:
    got, want = _ini(_read(root, "config.ini")), _ini(CONFIG_INI)
    if got is None or want is None or "debug" not in got.get("app", {}):
        return False
    debug = got["app"].pop("debug")
    want["app"].pop("debug")
    return debug.strip().lower() in ("false", "no", "off", "0") and got == want


def _replace_in(root: Path, name: str, old: str, new: str) -> str:
    _write(root, name, _read(root, name).replace(old, new))
    return ""


def _solve_lines(
    source: str, target: str, change: Callable[[list[str]], list[str]]
) -> Callable[[Path], str]:
    def solve(root: Path) -> str:
        _write(root, target, "\n".join(change(_read(root, source).splitlines())) + "\n")
        return ""

    return solve


EDIT_TASKS = [
    Task("json-config", "edit", "Create config.json with name set to agentica and version set "
         "to 1.", {}, _check_json_config,
         _save("config.json", lambda r: json.dumps({"name": "agentica", "version": 1}))),
    Task("reverse-lines", "edit", "Write the lines of lines.txt in reverse order to "
         "reversed.txt.", {"lines.txt": "one\ntwo\nthree\n"},
         lambda r, a: _lines(_read(r, "reversed.txt")) == ["three", "two", "one"],
         _solve_lines("lines.txt", "reversed.txt", lambda lines: lines[::-1])),
    Task("uppercase", "edit", "Write the names from names.txt in upper case, one per line, to "
         "upper.txt.", {"names.txt": "ada\ngrace\nlinus\n"},
         lambda r, a: _lines(_read(r, "upper.txt")) == ["ADA", "GRACE", "LINUS"],
         _solve_lines("names.txt", "upper.txt", lambda lines: [n.upper() for n in lines])),
    Task("rename", "edit", "In util.py rename the function calc to compute, keeping its "
         "behaviour.", {"util.py": "def calc(x):\n    return x * x\n"}, _check_rename,
         lambda r: _replace_in(r, "util.py", "def calc", "def compute")),
    Task("bump-version", "edit", "Bump the version in setup.cfg to 1.5.0.",
         {"setup.cfg": SETUP_CFG},
         lambda r, a: _ini(_read(r, "setup.cfg")) == _ini(SETUP_CFG.replace("1.4.2", "1.5.0")),
         lambda r: _replace_in(r, "setup.cfg", "1.4.2", "1.5.0")),
    Task("american-spelling", "edit", "Change the British spelling colour to color in "
         "README.md.", {"README.md": README},
         lambda r, a: _same_text(_read(r, "README.md"), README.replace("colour", "color")),
         lambda r: _replace_in(r, "README.md", "colour", "color")),
    Task("debug-off", "edit", "Turn off debug mode in config.ini.", {"config.ini": CONFIG_INI},
         _check_debug_off, lambda r: _replace_in(r, "config.ini", "debug = true",
                                                 "debug = false")),
]  # fmt: skip


# ---------------------------------------------------------- script: write, run, compute, save

FIB_PY = """def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a
"""


def _solve_totals(root: Path) -> str:
    totals: dict[str, float] = {}
    for row in csv.DictReader(io.StringIO(_read(root, "sales.csv"))):
        totals[row["region"]] = totals.get(row["region"], 0) + float(row["amount"])
    _write(root, "totals.json", json.dumps(totals))
    return ""


def _solve_primes(root: Path) -> str:
    primes = [n for n in range(2, 30) if all(n % d for d in range(2, n))]
    _write(root, "primes.txt", "\n".join(map(str, primes)) + "\n")
    return ""


SCRIPT_TASKS = [
    Task("hello", "script", "Create hello.py that prints exactly: Hello, world!", {},
         lambda r, a: _python(r, "hello.py").strip() == "Hello, world!",
         _save("hello.py", lambda r: "print('Hello, world!')")),
    Task("greet", "script", "Write greet.py that takes a name on the command line and greets "
         "it, e.g. python greet.py Ada prints Hello, Ada!", {},
         lambda r, a: _python(r, "greet.py", "Grace").strip() == "Hello, Grace!",
         _save("greet.py", lambda r: "import sys\n\nprint(f'Hello, {sys.argv[1]}!')")),
    Task("fibonacci", "script", "Write fib.py with a function fib(n) that returns the n-th "
         "Fibonacci number (fib(0) = 0, fib(1) = 1).", {},
         lambda r, a: _python(r, "-c", "import fib; print(fib.fib(10), fib.fib(20))").split()
         == ["55", "6765"], _save("fib.py", lambda r: FIB_PY)),
    Task("csv-totals", "script", "sales.csv has columns region, product, amount. Compute the "
         "total amount per region and write the totals to totals.json as an object mapping "
         "region to total.", {"sales.csv": SALES},
         lambda r, a: _json(r, "totals.json") == TOTALS,
         _solve_totals),
    Task("word-count", "script", "Count the words in notes.txt and write only the number to "
         "count.txt.",
         {"notes.txt": "the quick brown fox jumps over the lazy dog and runs away fast\n"},
         lambda r, a: _numbers(_read(r, "count.txt")) == [13],
         _save("count.txt", lambda r: len(_read(r, "notes.txt").split()))),
    Task("primes", "script", "Write primes.txt listing every prime number below 30, one per "
         "line.", {},
         lambda r, a: _numbers(_read(r, "primes.txt")) == [2, 3, 5, 7, 11, 13, 17, 19, 23, 29],
         _solve_primes),
    Task("multiply", "script", "Compute 1234 * 5678 and write only the result to answer.txt.",
         {}, lambda r, a: _numbers(_read(r, "answer.txt")) == [7006652],
         _save("answer.txt", lambda r: 1234 * 5678)),
    Task("maximum", "script", "numbers.txt has one number per line. Write only the largest to "
         "max.txt.", {"numbers.txt": "12\n97\n-4\n55\n"},
         lambda r, a: _numbers(_read(r, "max.txt")) == [97],
         _save("max.txt", lambda r: max(_numbers(_read(r, "numbers.txt"))))),
]  # fmt: skip


# ------------------------------------------------------------ fix: a bug, so the tests pass


def _fix_task(
    name: str, prompt: str, module: str, source: str, bug: tuple[str, str], tests: str,
    hidden: str,
) -> Task:  # fmt: skip
    """A ``fix`` task: ``module``.py with ``source`` (``bug``: the buggy text and its fix),
    ``test_<module>.py`` with ``tests``; solved when the unchanged tests pass and the
    ``hidden`` assertions (other inputs of the same contract) hold."""
    test_file = f"test_{module}.py"

    def check(root: Path, answer: str) -> bool:
        if not _same_text(_read(root, test_file), tests):
            return False  # the tests are the contract: changing them solves nothing
        code = (
            "import unittest\n"
            f"result = unittest.main(module={test_file[:-3]!r}, argv=['check'], exit=False)\n"
            "assert result.result.testsRun and result.result.wasSuccessful()\n"
            f"{hidden}\nprint('checked')\n"
        )
        return _lines(_python(root, "-c", code))[-1:] == ["checked"]

    def solve(root: Path) -> str:
        return _replace_in(root, f"{module}.py", *bug)

    assert bug[0] in source
    files = {f"{module}.py": source, test_file: tests}
    return Task(name, "fix", prompt, files, check, solve)


def _tests(module: str, names: str, body: str) -> str:
    return (
        f"import unittest\n\nfrom {module} import {names}\n\n\n"
        f"class Test(unittest.TestCase):\n{body}\n\nif __name__ == '__main__':\n"
        "    unittest.main()\n"
    )


FIX_TASKS = [
    _fix_task("fix-bug", "buggy.py has a bug: add(2, 3) should return 5. Fix the file.",
              "buggy", "def add(a, b):\n    return a - b\n", ("a - b", "a + b"),
              _tests("buggy", "add", "    def test_add(self):\n"
                     "        self.assertEqual(add(2, 3), 5)\n"
                     "        self.assertEqual(add(-1, 1), 0)\n"),
              "from buggy import add\nassert add(10, -4) == 6"),
    _fix_task("fix-mean", "The tests in test_stats.py fail. Fix stats.py so they pass.",
              "stats", 'def mean(values):\n    """The arithmetic mean of a non-empty list of '
              'numbers."""\n    total = 0\n    for value in values[1:]:\n        total += value\n'
              "    return total / len(values)\n", ("values[1:]", "values"),
              _tests("stats", "mean", "    def test_mean(self):\n"
                     "        self.assertEqual(mean([2, 4, 6]), 4)\n"
                     "        self.assertEqual(mean([5]), 5)\n"
                     "        self.assertEqual(mean([1.5, 2.5]), 2.0)\n"),
              "from stats import mean\nassert mean([10, 20, 30, 40]) == 25"),
    _fix_task("fix-slugify", "slugify in text.py gives the wrong result for 'Hello World'. "
              "Please fix it; test_text.py has the expected results.", "text",
              'def slugify(title):\n    """A URL slug: lower case, words joined by hyphens."""\n'
              '    return "_".join(title.split())\n',
              ('"_".join(title.split())', '"-".join(title.lower().split())'),
              _tests("text", "slugify", "    def test_slugify(self):\n"
                     "        self.assertEqual(slugify('Hello World'), 'hello-world')\n"
                     "        self.assertEqual(slugify('  Many   spaces here '), "
                     "'many-spaces-here')\n"),
              "from text import slugify\nassert slugify('Local Tasks Run') == 'local-tasks-run'"),
    _fix_task("fix-leap-year", "is_leap in dates.py says 2000 is not a leap year. Fix it so the "
              "tests pass.", "dates", "def is_leap(year):\n"
              "    return year % 4 == 0 and year % 100 != 0\n",
              ("year % 100 != 0", "(year % 100 != 0 or year % 400 == 0)"),
              _tests("dates", "is_leap", "    def test_leap_years(self):\n"
                     "        self.assertTrue(is_leap(2024))\n"
                     "        self.assertFalse(is_leap(2023))\n"
                     "        self.assertFalse(is_leap(1900))\n"
                     "        self.assertTrue(is_leap(2000))\n"),
              "from dates import is_leap\n"
              "assert is_leap(2400) and not is_leap(2100) and is_leap(1996)"),
    _fix_task("fix-page-count", "Some tests in test_paging.py fail. Find out why and fix "
              "paging.py.", "paging", "def page_count(total_items, per_page):\n"
              '    """How many pages it takes to show total_items, per_page at a time."""\n'
              "    return total_items // per_page\n",
              ("total_items // per_page", "-(-total_items // per_page)"),
              _tests("paging", "page_count", "    def test_page_count(self):\n"
                     "        self.assertEqual(page_count(10, 3), 4)\n"
                     "        self.assertEqual(page_count(9, 3), 3)\n"
                     "        self.assertEqual(page_count(0, 5), 0)\n"
                     "        self.assertEqual(page_count(1, 20), 1)\n"),
              "from paging import page_count\n"
              "assert page_count(101, 10) == 11 and page_count(100, 10) == 10"),
    _fix_task("fix-unique", "unique() in lists.py should drop duplicates but keep the original "
              "order. The tests fail, can you fix it?", "lists",
              'def unique(items):\n    """The items without repeats, in the order they first '
              'appear."""\n    return list(set(items))\n',
              ("return list(set(items))", "return list(dict.fromkeys(items))"),
              _tests("lists", "unique", "    def test_unique(self):\n"
                     "        self.assertEqual(unique([3, 1, 3, 2, 1]), [3, 1, 2])\n"
                     "        self.assertEqual(unique(['b', 'a', 'b']), ['b', 'a'])\n"
                     "        self.assertEqual(unique([]), [])\n"),
              "from lists import unique\nassert unique([5, 5, 4, 5, 3, 4]) == [5, 4, 3]"),
    _fix_task("fix-price", "parse_price in money.py crashes on prices like $1,299.99. Fix it; "
              "test_money.py has the cases.", "money",
              'def parse_price(text):\n    """A price such as "$4.50" as a number."""\n'
              '    return float(text.strip().lstrip("$"))\n',
              ('text.strip().lstrip("$")', 'text.strip().lstrip("$").replace(",", "")'),
              _tests("money", "parse_price", "    def test_parse_price(self):\n"
                     "        self.assertEqual(parse_price('$4.50'), 4.5)\n"
                     "        self.assertEqual(parse_price('$1,299.99'), 1299.99)\n"
                     "        self.assertEqual(parse_price(' $12 '), 12.0)\n"),
              "from money import parse_price\n"
              "assert parse_price('$12,345,678.00') == 12345678.0"),
]  # fmt: skip


# -------------------------------------------------------------- multi: several files at once

HELPERS_PY = """def fmt_money(amount):
    return f"${amount:,.2f}"
"""
REPORT_PY = """from helpers import fmt_money


def summary(items):
    total = sum(price for _, price in items)
    lines = [f"{name}: {fmt_money(price)}" for name, price in items]
    lines.append(f"total: {fmt_money(total)}")
    return "\\n".join(lines)
"""
MAIN_PY = """from report import summary

print(summary([("lamp", 49.5), ("desk", 1200)]))
"""
APP_PY = """import json

with open("config.json") as f:
    config = json.load(f)

print(f"{config['greeting']}, {config['name']}!")
"""
SLUG_MAIN_PY = """def slugify(title):
    return "-".join(title.lower().split())


titles = ["Hello World", "Local Models Are Fun"]
for title in titles:
    print(slugify(title))
"""
JAN = """date,item,amount
2024-01-03,coffee,4.50
2024-01-17,books,23.00
2024-01-28,coffee,4.50
"""
FEB = """date,item,amount
2024-02-02,lunch,12.80
2024-02-14,flowers,30.00
"""
STOCK = "item,qty\napples,40\npears,25\nplums,10\nfigs,8\n"
STOCK_ORDERS = "item,qty\napples,15\nplums,10\napples,5\nfigs,3\n"
DATA = {"data/a.txt": "12\n7\n", "data/b.txt": "30\n-5\n", "data/c.txt": "100\n"}


def _check_rename_across(root: Path, answer: str) -> bool:
    if any("fmt_money" in p.read_text(errors="replace") for p in root.rglob("*.py")):
        return False
    code = (
        "import runpy, helpers\n"
        "print(hasattr(helpers, 'format_money'), hasattr(helpers, 'fmt_money'))\n"
        "runpy.run_path('main.py', run_name='__main__')\n"
    )
    out = _lines(_python(root, "-c", code))
    return out == ["True False", "lamp: $49.50", "desk: $1,200.00", "total: $1,249.50"]


def _solve_rename_across(root: Path) -> str:
    for name in ("helpers.py", "report.py"):
        _replace_in(root, name, "fmt_money", "format_money")
    return ""


def _cells(rows: list[list[str]]) -> list[tuple[str, ...]]:
    """Rows with numbers normalised (4.50 and 4.5 are the same amount), sorted."""
    return sorted(tuple(str(n) if (n := _number(c)) is not None else c for c in r) for r in rows)


def _check_merge(root: Path, answer: str) -> bool:
    rows = _csv(root, "all.csv")
    parts = [list(csv.reader(io.StringIO(text))) for text in (JAN, FEB)]
    want = parts[0][1:] + parts[1][1:]
    return bool(rows) and rows[0] == parts[0][0] and _cells(rows[1:]) == _cells(want)


def _solve_merge(root: Path) -> str:
    feb = _read(root, "feb.csv").splitlines(keepends=True)[1:]
    _write(root, "all.csv", _read(root, "jan.csv") + "".join(feb))
    return ""


def _greetings(root: Path) -> int:
    return _python(root, "app.py").count("Hello, team!")


def _check_repeat(root: Path, answer: str) -> bool:
    config = _json(root, "config.json")
    if not isinstance(config, dict) or isinstance(config.get("repeat"), bool):
        return False
    if config.get("repeat") not in (3, "3") or config.get("greeting") != "Hello":
        return False
    if config.get("name") != "team" or _greetings(root) != 3:
        return False
    with tempfile.TemporaryDirectory() as tmp:  # the code must read the setting
        copy = Path(tmp) / "workspace"
        shutil.copytree(root, copy)
        _write(copy, "config.json", json.dumps({**config, "repeat": 2}))
        return _greetings(copy) == 2


def _solve_repeat(root: Path) -> str:
    config = json.loads(_read(root, "config.json"))
    _write(root, "config.json", json.dumps({**config, "repeat": 3}, indent=2))
    code = _read(root, "app.py").replace(
        "print(f\"{config['greeting']}", "for _ in range(int(config['repeat'])):\n"
        "    print(f\"{config['greeting']}"
    )  # fmt: skip
    _write(root, "app.py", code)
    return ""


def _check_move(root: Path, answer: str) -> bool:
    main, lib = _functions(root, "main.py"), _functions(root, "textutils.py")
    if main is None or lib is None or "slugify" in main or "slugify" not in lib:
        return False
    if not re.search(r"^\s*(from\s+textutils\s+import|import\s+textutils)", _read(root, "main.py"),
                     re.M):  # fmt: skip
        return False
    return _lines(_python(root, "main.py")) == ["hello-world", "local-models-are-fun"]


def _solve_move(root: Path) -> str:
    function, rest = _read(root, "main.py").split("\n\n\n", 1)
    _write(root, "textutils.py", function + "\n")
    _write(root, "main.py", "from textutils import slugify\n\n" + rest)
    return ""


def _check_restock(root: Path, answer: str) -> bool:
    rows = _csv(root, "stock.csv")
    if not rows or rows[0] != ["item", "qty"] or any(len(r) != 2 for r in rows):
        return False
    stock = {item: _number(qty) for item, qty in rows[1:]}
    return len(rows) == 5 and stock == {"apples": 20, "pears": 25, "plums": 0, "figs": 5}


def _solve_restock(root: Path) -> str:
    stock = {item: int(qty) for item, qty in _csv(root, "stock.csv")[1:]}
    for item, qty in _csv(root, "orders.csv")[1:]:
        stock[item] -= int(qty)
    _write(root, "stock.csv", "item,qty\n" + "".join(f"{i},{q}\n" for i, q in stock.items()))
    return ""


def _solve_sum(root: Path) -> str:
    total = sum(sum(_numbers(p.read_text())) for p in sorted((root / "data").glob("*.txt")))
    _write(root, "total.txt", f"{total:g}\n")
    return ""


MULTI_TASKS = [
    Task("rename-across", "multi", "Rename fmt_money to format_money everywhere in this "
         "project. main.py should still print the same thing.",
         {"helpers.py": HELPERS_PY, "report.py": REPORT_PY, "main.py": MAIN_PY},
         _check_rename_across, _solve_rename_across),
    Task("merge-csv", "multi", "Combine jan.csv and feb.csv into one file, all.csv, with the "
         "header only once.", {"jan.csv": JAN, "feb.csv": FEB}, _check_merge, _solve_merge),
    Task("config-repeat", "multi", "Add a repeat setting to config.json, set to 3, and make "
         "app.py print the greeting that many times.",
         {"config.json": '{"greeting": "Hello", "name": "team"}\n', "app.py": APP_PY},
         _check_repeat, _solve_repeat),
    Task("move-function", "multi", "Move slugify out of main.py into a new module textutils.py "
         "and import it from there. main.py should print the same as before.",
         {"main.py": SLUG_MAIN_PY}, _check_move, _solve_move),
    Task("sum-files", "multi", "Add up all the numbers in the files in the data folder and "
         "write the total to total.txt.", DATA,
         lambda r, a: _numbers(_read(r, "total.txt")) == [144], _solve_sum),
    Task("restock", "multi", "Subtract the quantities in orders.csv from stock.csv and save "
         "the updated stock back to stock.csv, same columns.",
         {"stock.csv": STOCK, "orders.csv": STOCK_ORDERS}, _check_restock, _solve_restock),
]  # fmt: skip

TASKS: list[Task] = [*ANSWER_TASKS, *EDIT_TASKS, *SCRIPT_TASKS, *FIX_TASKS, *MULTI_TASKS]
