"""Run inside the sandbox before the command: ``python -I -S -c SOURCE NPROC DATA ARGV...``.

Lowers the resource limits for good (no capability is left to raise them): processes (and
threads), bytes of data memory per process, no core files; gives SIGPIPE and SIGXFSZ back their
default action (Python ignores them, and an ignored signal stays ignored across exec); then
executes the command. The sandbox shows no agentica file, so the source text is passed with
``-c``: standard library only.
"""

from __future__ import annotations

import os
import resource
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal  # what signal wraps, without its enums (they cost 5 ms a command)


def lower(kind: int, value: int) -> None:
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def main(args: list[str]) -> None:
    lower(resource.RLIMIT_NPROC, int(args[0]))
    lower(resource.RLIMIT_DATA, int(args[1]))
    lower(resource.RLIMIT_CORE, 0)
    for signum in (_signal.SIGPIPE, _signal.SIGXFSZ):
        _signal.signal(signum, _signal.SIG_DFL)
    try:
        os.execv(args[2], args[2:])
    except OSError as exc:
        sys.stderr.write(f"could not start {args[2]}: {exc}\n")
        sys.exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
