"""Team-service benchmarks, one after another: ``uv run python benchmarks/team.py [--quick]``.

Runs ``team_admission.py`` (admissions per second on one budget), ``team_audit.py`` (audit
writes per second, verify speed), ``team_gateway.py`` (gateway overhead per request against the
scripted upstream called directly), ``team_streaming.py`` (students streaming agent runs at
once), ``team_runtimes.py`` (tokens each session runtime spends on one event sequence) and
``team_executors.py`` (500 connected executors, operations through them), ``team_reaction.py``
and ``team_failover.py`` (event to reaction, a worker killed) and ``team_web.py`` (the web UI's
first load and first streamed token in Chromium), each a process of its own, and prints their
markdown tables; ``make bench`` runs it after the framework-core benchmarks. The figures and
the commands are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = (
    "team_admission",
    "team_audit",
    "team_gateway",
    "team_streaming",
    "team_runtimes",
    "team_executors",
    "team_reaction",
    "team_failover",
    "team_web",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="the short form of each benchmark")
    parser.add_argument("--only", choices=SUITE, action="append", help="run only these")
    args = parser.parse_args()
    failed = []
    for name in args.only or SUITE:
        command = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py")]
        command += ["--quick"] if args.quick else []
        print(f"\n## {name}  ({' '.join(['python', *command[1:]])})\n", flush=True)
        started = time.perf_counter()
        done = subprocess.run(command, cwd=ROOT, check=False)
        print(f"\n({name}: {time.perf_counter() - started:.0f} s)", flush=True)
        if done.returncode:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
