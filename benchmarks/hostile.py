"""Hostile inputs: every ``benchmarks/hostile_<family>.py`` probe in one run, one table.

Each probe module has ``run() -> list[dict]`` returning rows ``{"family", "attempts", "failures",
"what"}``: what was tried as an attacker or a careless provider would, and how many attempts got
through (escapes, outside reads, untyped exceptions, silent losses; the target is 0 everywhere).

    uv run python benchmarks/hostile.py                 # all probes, table on the terminal
    uv run python benchmarks/hostile.py sandbox races   # some probes
    uv run python benchmarks/hostile.py --write-docs    # also the section in docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from benchmarks.docs import write_section  # noqa: E402

COMMAND = "uv run python benchmarks/hostile.py --write-docs"


def probes() -> list[str]:
    """Names of the probe modules (``hostile_<name>.py`` beside this file)."""
    here = Path(__file__).resolve().parent
    return sorted(p.stem.removeprefix("hostile_") for p in here.glob("hostile_*.py"))


def run_probe(name: str) -> tuple[list[dict[str, Any]], float]:
    """Run one probe; a probe that crashes is reported as one failed row, not hidden."""
    started = time.perf_counter()
    try:
        module = importlib.import_module(f"benchmarks.hostile_{name}")
        rows: list[dict[str, Any]] = list(module.run())
    except Exception as exc:  # a broken probe is a finding, not a reason to stop the others
        traceback.print_exc()
        rows = [
            {
                "family": f"{name} (probe crashed)",
                "attempts": 0,
                "failures": 1,
                "what": f"{type(exc).__name__}: {exc}",
            }
        ]
    return rows, time.perf_counter() - started


def markdown(results: list[tuple[str, list[dict[str, Any]], float]]) -> str:
    lines = [
        "| probe | family | attempts | failures | what was tried (failure = ...) |",
        "|---|---|---:|---:|---|",
    ]
    for name, rows, _ in results:
        for row in rows:
            what = str(row.get("what", "")).replace("|", "\\|").replace("\n", " ")
            lines.append(
                f"| {name} | {row['family']} | {row['attempts']:,} | {row['failures']:,} | {what} |"
            )
    total = sum(r["attempts"] for _, rows, _ in results for r in rows)
    failed = sum(r["failures"] for _, rows, _ in results for r in rows)
    seconds = sum(s for _, _, s in results)
    lines += ["", f"Total: {total:,} attempts, {failed:,} failures ({seconds:.0f} s)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help=f"probes to run (default: all of {probes()})")
    parser.add_argument("--write-docs", action="store_true", help="update docs/benchmarks.md")
    args = parser.parse_args()
    names = args.names or probes()
    unknown = sorted(set(names) - set(probes()))
    if unknown:
        parser.error(f"no such probe: {', '.join(unknown)}; known: {', '.join(probes())}")
    console = Console()
    results = []
    for name in names:
        with console.status(f"probe {name} ..."):
            rows, seconds = run_probe(name)
        console.print(f"{name}: {len(rows)} families in {seconds:.1f} s")
        results.append((name, rows, seconds))
    table = Table("probe", "family", "attempts", "failures", "what")
    for name, rows, _ in results:
        for row in rows:
            style = "red" if row["failures"] else ""
            table.add_row(
                name,
                str(row["family"]),
                f"{row['attempts']:,}",
                f"{row['failures']:,}",
                str(row.get("what", "")),
                style=style,
            )
    console.print(table)
    if args.write_docs:
        if args.names:
            parser.error("--write-docs needs every probe (run it without names)")
        write_section("hostile", COMMAND, markdown(results), heading="Hostile inputs")
    return 1 if any(r["failures"] for _, rows, _ in results for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
