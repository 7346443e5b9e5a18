"""``Shell``: shell commands in the workspace, and background commands (operations) that can be
waited for and stopped.

```python
shell = Shell("workspace/", timeout=60, sandbox="auto")
agent = Agent(model=..., capabilities=[shell])
...
await shell.aclose()  # stops the background commands that are still running
```

Tools: ``execute`` (run a command and return its output and exit code), ``start_command`` (start
a long command in the background and return its id), ``wait_command`` (its output so far, or its
final output once it finished), ``stop_command`` and ``list_commands``. Background commands belong
to the session (``RunContext.user_id``, ``session_id``) that started them: another session can
neither see nor stop them. With ``operations_end="run"`` they are stopped when the run that
started them ends; with ``"session"`` they live until ``aclose()``.

Processes. Every command runs under a small supervisor (a Python ``-I -S -c`` script, given its
arguments as argv, never through another shell layer) that:

- asks the kernel to signal it when its parent dies (``PR_SET_PDEATHSIG``) and to adopt the
  command's orphans (``PR_SET_CHILD_SUBREAPER``); it also notices its parent's death when its stdin
  pipe closes or it is re-parented (other platforms, where ``prctl`` is missing);
- starts ``/bin/sh -c COMMAND`` in a new session (its own process group), with stdin from
  ``/dev/null`` and stdout and stderr merged into one pipe;
- when told to stop (SIGTERM), when its parent dies, or when the shell exits leaving background
  jobs behind, sends SIGTERM to the command's process group and to every descendant (found through
  ``/proc``, so ``setsid`` and double forks are included), waits ``kill_grace`` seconds, then sends
  SIGKILL until none is left, reaps them and exits with the command's exit status.

So a command never outlives its tool call (``execute``), its operation, or the Python process that
started it, even when that process is killed with SIGKILL.

Output is capped while it is read: the first and last ``max_output // 2`` bytes are kept and the
rest is only counted, so a command printing gigabytes costs no memory; the result says how much was
cut.

Environment. Commands do not inherit the parent's environment (which holds API keys): they get
``PATH`` (the parent's), ``HOME`` (the workspace), ``LANG`` (the parent's, else ``C.UTF-8``),
``PYTHONUNBUFFERED=1`` (so background Python programs show their output as they go), and the
``env=`` mapping, which adds to or replaces these.

Sandbox. ``sandbox="bwrap"`` runs every command under bubblewrap, in new user, PID, IPC, UTS,
cgroup and network namespaces (the network only with ``allow_network=True``; it also exposes the
host's abstract unix sockets), with every capability dropped, no new privileges (setuid programs
gain nothing), no nested user namespaces, ``--die-with-parent`` and ``--new-session``. The command
sees only: ``/usr``, ``/bin``, ``/sbin``, ``/lib*`` and ``/etc`` read-only, where every entry of
``/etc`` that not everyone may read (``/etc/shadow``, ``/etc/gshadow``, private keys) is empty; the
interpreter's directories (``sys.prefix``, ``sys.base_prefix``: ``run_python`` runs it), read-only;
a fresh ``/dev`` (``null``, ``zero``, ``random``, ``tty``...) and ``/proc`` (its own processes
only); a private ``/tmp``; and the workspace, writable. ``/home``, ``/root``, ``/run``, ``/var``,
``/opt``, ``/sys`` and the host's other files are absent, and the rest of ``/`` is read-only.
Inside, the command is uid 0 of its own user namespace, mapped to the user running agentica: when
that is root, a root-only file under the shown system directories is readable (``/etc`` is checked
once per ``Shell``, the other directories not at all), so keep secrets out of them. Resource
limits, set inside the sandbox before the command starts: ``max_processes`` (``RLIMIT_NPROC``,
processes and threads) and ``max_memory`` (``RLIMIT_DATA``, bytes per process), no core files. The
kernel never applies ``RLIMIT_NPROC`` to root, so when agentica runs as root each command also gets
its own pids cgroup (``pids.max = max_processes``) where one can be created (a cgroup v1 ``pids``
hierarchy, or cgroup v2 with ``pids`` enabled below agentica's group); where none can, a warning
says that the process limit does not hold. ``tests/test_sandbox_escapes.py`` and
``benchmarks/hostile_sandbox.py`` try the known escapes.

``"auto"`` uses bubblewrap when it is installed and can create namespaces here (checked once per
``Shell``) and otherwise runs commands unsandboxed with a logged warning; ``"none"`` never
sandboxes. The default is ``"none"`` (for ``DeepAgent`` too): commands run as the user running
agentica, with the network, the whole file system and no resource limits. Pass ``"auto"`` to
sandbox wherever bubblewrap works; a sandboxed command then has no network (``pip install``
fails unless ``allow_network=True``), sees no file outside the directories above (tools in
``~/.local/bin`` or ``/opt`` are missing) and starts some 50-100 ms later. On Debian and Ubuntu
the package is ``bubblewrap``.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib.util
import itertools
import logging
import os
import re
import shutil
import signal
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agentica.errors import ToolError, UsageError
from agentica.messages import AssistantMessage
from agentica.run.capability import Capability
from agentica.storage.records import RunRecord
from agentica.tools.context import RunContext
from agentica.tools.function import Function
from agentica.tools.toolkit import ToolLike

__all__ = ["CodeNotRun", "Shell"]

logger = logging.getLogger(__name__)

SessionKey = tuple[str | None, str | None]

_CODE_BLOCK = re.compile(r"```[ \t]*(python3?|py|bash|sh|shell|console)[ \t]*\n", re.IGNORECASE)
_PYTHON_FENCES = frozenset({"python", "python3", "py"})
_SHELL_FENCES = frozenset({"bash", "sh", "shell", "console"})

# The supervisor every command runs under (see the module docstring). argv: the parent's pid, the
# grace period in seconds, a pids cgroup ("DIRECTORY:MAX" or "": the command runs in a new cgroup
# under DIRECTORY with pids.max MAX, removed at the end), then the command's argv. It imports only
# the standard library.
_SUPERVISOR = r"""
import os, select, signal, sys, time

def descendants(root):
    # Living descendants of root (zombies excluded), from /proc; [] where /proc is missing.
    children = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found, stack = [], [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.append(pid)
            stack.append(pid)
    return found

def make_cgroup(spec):
    base, _, limit = spec.rpartition(":")
    path = os.path.join(base, "agentica-%d-%s" % (os.getpid(), os.urandom(4).hex()))
    os.mkdir(path)
    try:
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(limit)
    except BaseException:
        os.rmdir(path)
        raise
    return path

def remove_cgroup(path):
    for _ in range(200):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)  # the killed processes are still being released

def main():
    parent, grace, spec, argv = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:]
    me = os.getpid()
    cgroup = None
    if spec:
        try:
            cgroup = make_cgroup(spec)
        except OSError as exc:
            os.write(2, ("could not create the pids cgroup: %s\n" % exc).encode())
            return 126
    try:
        return supervise(parent, grace, argv, me, cgroup)
    finally:
        if cgroup is not None:
            remove_cgroup(cgroup)

def supervise(parent, grace, argv, me, cgroup):
    prctl = None
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            def prctl(option, value):
                zero = ctypes.c_ulong(0)
                return libc.prctl(option, ctypes.c_ulong(value), zero, zero, zero)
        except Exception:
            prctl = None
    stop = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda signum, frame: stop.append(signum))
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    if prctl is not None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: SIGTERM when the parent dies
        prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: orphans of the command are re-parented to us
    if os.getppid() != parent:
        return 128 + signal.SIGTERM  # the parent died before it could be watched
    try:
        import fcntl
        fcntl.fcntl(1, 1031, 1 << 20)  # F_SETPIPE_SZ: fewer, larger reads for the parent
    except Exception:
        pass
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD,
                           signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            if prctl is not None:
                prctl(1, signal.SIGKILL)
            if os.getppid() != me:
                os._exit(137)
            if cgroup is not None:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write("0")
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execv(argv[0], argv)
        except BaseException as exc:
            try:
                os.write(2, ("could not start %s: %s\n" % (argv[0], exc)).encode())
            finally:
                os._exit(127)
    status = None

    def reap():
        nonlocal status
        while True:
            try:
                done, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if done == 0:
                return
            if done == pid:
                status = st

    def signal_all(signum):
        try:
            os.killpg(pid, signum)
        except OSError:
            pass
        for other in descendants(me):
            try:
                os.kill(other, signum)
            except OSError:
                pass

    while True:
        reap()
        if status is not None or stop or os.getppid() != parent:
            break
        try:
            ready = select.select([0, wake_r], [], [], 0.5)[0]
        except OSError:
            ready = []
        if wake_r in ready:
            try:
                os.read(wake_r, 4096)
            except OSError:
                pass
        if 0 in ready:
            try:
                data = os.read(0, 4096)
            except OSError:
                data = b""
            if not data:
                break  # stdin closed: the parent is gone
    if status is None or descendants(me):
        signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            reap()
            if status is not None and not descendants(me):
                break
            time.sleep(0.02)
    for _ in range(500):
        reap()
        if status is not None and not descendants(me):
            break
        signal_all(signal.SIGKILL)
        time.sleep(0.01)
    reap()
    if status is None:
        return 128 + signal.SIGKILL
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code

sys.exit(main())
"""

_SHELL_START = re.compile(r"^(?:\$\s|python3?\s|pip3?\s|sh\s|bash\s|cd\s)")
_PYTHON_START = re.compile(
    r"^\s*(import\s+[\w.]+|from\s+[\w.]+\s+import\s|def\s+\w+\s*\(|class\s+\w+|print\s*\()"
)
_PIPE_GUARD = 5.0  # seconds to wait for the output pipe to close once the supervisor exited


def _descendants(root: int) -> list[int]:
    """Living descendants of ``root`` (for the last-resort kill); [] where /proc is missing."""
    children: dict[int, list[int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) >= 2 and fields[0] not in (b"Z", b"X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.append(pid)
            stack.append(pid)
    return found


def _kill_tree(root: int) -> None:
    """SIGKILL ``root`` and its descendants (when the supervisor itself does not answer)."""
    for pid in [*_descendants(root), root]:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


class _CappedOutput:
    """Keeps the first and last bytes of a stream and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data or self.tail_limit == 0:
            return
        if len(data) >= self.tail_limit:
            self.tail = bytearray(data[-self.tail_limit :])
        else:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit + 65536:
                del self.tail[: -self.tail_limit]

    def text(self) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        omitted = self.total - len(self.head) - len(tail)
        if omitted <= 0:
            return (bytes(self.head) + tail).decode(errors="replace")
        return (
            self.head.decode(errors="replace")
            + f"\n[... output cut: {omitted:,} of {self.total:,} bytes omitted; showing the "
            f"first {len(self.head):,} and the last {len(tail):,} bytes. To see more, write "
            "the output to a file (command > out.txt) and read parts of it with grep, head or "
            "tail ...]\n" + tail.decode(errors="replace")
        )


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, output: _CappedOutput) -> None:
        self.output = output
        self.done = asyncio.Event()
        self.transport: asyncio.SubprocessTransport | None = None
        self._guard: asyncio.TimerHandle | None = None
        self.ended: float | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.output.feed(data if isinstance(data, bytes) else data.encode())

    def process_exited(self) -> None:
        # the supervisor killed every descendant before it exited, so the pipe closes at once;
        # should something still hold it, stop reading after a while
        self._guard = asyncio.get_running_loop().call_later(_PIPE_GUARD, self._close_pipes)

    def _close_pipes(self) -> None:
        if self.transport is None:
            return
        for fd in (0, 1):
            pipe = self.transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()

    def connection_lost(self, exc: Exception | None) -> None:
        # the supervisor exited and the pipes are closed: release the transport
        if self._guard is not None:
            self._guard.cancel()
        if self.transport is not None:
            self.transport.close()
        self.ended = time.monotonic()
        self.done.set()


class _Process:
    """One supervised command: its output, its end, and how to stop it."""

    def __init__(
        self, transport: asyncio.SubprocessTransport, protocol: _Protocol, grace: float
    ) -> None:
        self.transport = transport
        self.protocol = protocol
        self.grace = grace
        self.started = time.monotonic()
        self.stop_reason: str | None = None

    @classmethod
    async def start(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        max_output: int,
        grace: float,
        cgroup: str = "",
    ) -> _Process:
        loop = asyncio.get_running_loop()
        supervisor = [sys.executable or "python3", "-I", "-S", "-c", _SUPERVISOR]
        transport, protocol = await loop.subprocess_exec(
            lambda: _Protocol(_CappedOutput(max_output)),
            *supervisor, str(os.getpid()), f"{grace:g}", cgroup, *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, cwd=cwd, env=dict(env), start_new_session=True,
        )  # fmt: skip
        return cls(transport, protocol, grace)

    @property
    def finished(self) -> bool:
        return self.protocol.done.is_set()

    @property
    def returncode(self) -> int | None:
        return self.transport.get_returncode()

    @property
    def elapsed(self) -> float:
        return (self.protocol.ended or time.monotonic()) - self.started

    def output(self) -> str:
        return self.protocol.output.text()

    async def wait(self, timeout: float | None) -> bool:
        """Wait until the command ended (True) or ``timeout`` passed (False)."""
        if not self.finished:
            try:
                async with asyncio.timeout(timeout):
                    await self.protocol.done.wait()
            except TimeoutError:
                return False
        return True

    def request_stop(self, reason: str) -> None:
        """Tell the supervisor to stop the command (it goes on alone if we are cancelled)."""
        if self.transport.get_returncode() is not None or self.stop_reason is not None:
            return
        self.stop_reason = reason
        with contextlib.suppress(OSError):  # ProcessLookupError: it just ended
            self.transport.send_signal(signal.SIGTERM)

    async def stop(self, reason: str) -> None:
        """Stop the command and wait until it and its children are gone."""
        self.request_stop(reason)
        if await self.wait(self.grace + 5.0):
            return
        # the supervisor does not answer: kill it and what it started ourselves
        logger.warning("the shell supervisor %s did not stop; killing it", self.transport.get_pid())
        await asyncio.to_thread(_kill_tree, self.transport.get_pid())
        await self.wait(_PIPE_GUARD + 5.0)

    def status(self) -> str:
        """One line: how the command ended (or that it is still running)."""
        code = self.returncode
        if not self.finished or code is None:
            return f"still running after {self.elapsed:.0f} s"
        if self.stop_reason is not None:
            return f"{self.stop_reason} (exit code {code})"
        if code > 128 and code - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
            return f"exit code {code} (killed by {signal.Signals(code - 128).name})"
        return f"exit code {code}"


@dataclass(eq=False, kw_only=True)
class _Operation:
    id: str
    command: str
    run_id: str
    process: _Process


def _hint(code: int | None, output: str) -> str:
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
            r"No module named '(\w+)",
            "The Python module {0!r} is not installed here. Rewrite the code with the standard "
            "library instead (for a CSV file, the csv module).",
        ),
        (
            r"SyntaxError",
            "The code has a syntax error: fix the line shown, then run the corrected code.",
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
            else:
                return code, []
            fixed = "".join(lines)
        except (ValueError, OverflowError, RecursionError, MemoryError):
            return code, []
        else:
            return (fixed, notes) if notes else (code, [])
    return code, []


class CodeNotRun(Capability):
    """Send back an answer that shows code instead of running it, with the call that runs it.

    Small models often answer with a fenced Python or shell block and stop, so nothing ran. The
    advice depends on the tools the agent has: ``run_python`` for Python, ``execute`` for shell
    commands (and for Python saved to a file); an agent with neither is left alone. ``Shell``
    does this for its agent; ``DeepAgent`` also gives it to its subagents, which get the shell's
    tools but not the ``Shell`` itself.

    Args:
        max_nudges: how many times per run (0: never).
    """

    name = "code_not_run"

    def __init__(self, *, max_nudges: int = 2) -> None:
        self.max_nudges = max_nudges

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        nudged = int(ctx.state.get(self.name, 0))
        if nudged >= self.max_nudges:
            return None
        found = _CODE_BLOCK.search(message.content or "")
        if found is None:
            return None
        functions = getattr(ctx.agent, "functions", {})
        language = found.group(1).lower()
        if language in _PYTHON_FENCES and "run_python" in functions:
            how = "call run_python with the code"
        elif "execute" not in functions:
            return None
        elif language in _SHELL_FENCES:
            how = "call execute with the command"
        else:
            how = "save it with a file tool and run it with execute (python file.py)"
        ctx.state[self.name] = nudged + 1
        return (
            f"You wrote code in your reply but did not run it, so nothing happened. To run it, "
            f"{how}; the standard library is there, third-party packages may not be. Then "
            "go on with the task."
        )


# ---------------------------------------------------------------------- sandbox (bubblewrap)

# What a sandboxed command sees of the host, read-only (the rest of the file system is absent).
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# bwrap's options that need user namespaces (``--disable-userns``: no nested namespaces inside);
# without them where bwrap cannot create a user namespace itself (a setuid bwrap).
_USERNS_OPTIONS = ("--unshare-user", "--disable-userns")

# Run inside the sandbox before the command: lowers the resource limits for good (no capability is
# left to raise them), then executes the command. argv: the most processes (and threads), the most
# bytes of data memory per process, then the command's argv.
_LIMITS = r"""
import os, resource, sys
def lower(kind, value):
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))
lower(resource.RLIMIT_NPROC, int(sys.argv[1]))
lower(resource.RLIMIT_DATA, int(sys.argv[2]))
lower(resource.RLIMIT_CORE, 0)
try:
    os.execv(sys.argv[3], sys.argv[3:])
except OSError as exc:
    sys.stderr.write("could not start %s: %s\n" % (sys.argv[3], exc))
    sys.exit(127)
"""


def _hidden(top: str) -> list[tuple[str, bool]]:
    """Entries under ``top`` that not everyone may read, such as ``/etc/shadow``: (path, is a
    directory). A host's secrets are exactly these; the sandbox shows them empty."""
    found: list[tuple[str, bool]] = []
    for folder, dirs, files in os.walk(top):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                continue
            is_dir = stat.S_ISDIR(mode)
            need = stat.S_IROTH | (stat.S_IXOTH if is_dir else 0)
            if mode & need != need:
                found.append((path, is_dir))
                if is_dir:
                    dirs.remove(name)
    return found


def _python_dirs() -> list[str]:
    """The directories of the interpreter running agentica (its prefix, its virtual environment),
    outside the system directories: ``run_python`` and the resource limits run it."""
    candidates = {sys.base_prefix, sys.prefix, sys.exec_prefix, sys.base_exec_prefix}
    if sys.executable:
        candidates |= {
            os.path.dirname(sys.executable),
            os.path.dirname(os.path.realpath(sys.executable)),
        }
    dirs = sorted(d for d in candidates if d and os.path.isdir(d) and d != "/")
    kept: list[str] = []
    for d in dirs:
        inside = (*_SYSTEM_DIRS, *kept)
        if not any(d == top or d.startswith(top + "/") for top in inside):
            kept.append(d)
    return kept


def _pids_cgroup() -> str | None:
    """A cgroup directory this process may create pids-limited groups under, or None (cgroup v1
    ``pids`` hierarchy, or cgroup v2 with ``pids`` enabled below our group; usually root only)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if not controllers:  # cgroup v2, at /sys/fs/cgroup or (hybrid) /sys/fs/cgroup/unified
            for mount in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
                folder = mount + path.rstrip("/")
                with contextlib.suppress(OSError):
                    if "pids" in Path(folder, "cgroup.subtree_control").read_text().split():
                        candidates.append(folder)
        elif "pids" in controllers.split(","):
            candidates.append(f"/sys/fs/cgroup/{controllers}{path.rstrip('/')}")
    for folder in candidates:
        probe = os.path.join(folder, f"agentica-probe-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError:
            continue
        return folder
    return None


def _sandbox_mounts(root: Path, allow_network: bool) -> list[str]:
    """bwrap's file system options: the system directories read-only (``/etc`` without what
    not everyone may read), the interpreter, a fresh ``/dev``, ``/proc`` and ``/tmp``, the
    workspace writable, and nothing else (no ``/home``, ``/root``, ``/run``, ``/var``, ``/sys``)."""
    argv: list[str] = []
    for top in _SYSTEM_DIRS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path, is_dir in _hidden("/etc"):
        argv += (
            ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
        )
    if allow_network and os.path.islink("/etc/resolv.conf"):  # e.g. systemd-resolved's, in /run
        target = os.path.realpath("/etc/resolv.conf")
        if os.path.isfile(target) and not target.startswith("/etc/"):
            argv += ["--ro-bind", target, target]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in _python_dirs():
        argv += ["--ro-bind", folder, folder]
    workspace = str(root)
    argv += ["--bind", workspace, workspace, "--remount-ro", "/", "--chdir", workspace]
    return argv


def _minimal_env(root: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
    }
    env.update(extra or {})
    return env


class Shell(Capability):
    """Shell commands in a workspace directory, and background commands that can be stopped.

    Args:
        root: the workspace: the commands' working directory and ``HOME``.
        timeout: default seconds an ``execute`` command may run before it is stopped.
        max_timeout: the most seconds a model may ask for (``execute`` and ``wait_command``).
        max_output: characters (bytes) of output kept per command: the first and last halves.
        env: environment variables for the commands, added to the minimal environment (``PATH``,
            ``HOME``, ``LANG``, ``PYTHONUNBUFFERED``); the parent's environment is never passed.
        sandbox: ``"none"``, ``"bwrap"`` (bubblewrap, required) or ``"auto"`` (bubblewrap when it
            is installed and works here).
        allow_network: keep the network in the sandbox (without a sandbox it is always there).
        max_processes: the most processes and threads a sandboxed command may have at once (see
            the module docstring for where this holds).
        max_memory: the most bytes of data memory each process of a sandboxed command may use.
        operations_end: ``"run"``: background commands are stopped when the run that started them
            ends; ``"session"``: they run until ``aclose()``.
        kill_grace: seconds between SIGTERM and SIGKILL when a command is stopped.
        max_operations: background commands one session may have running at once.
        background: offer ``start_command``, ``wait_command``, ``stop_command`` and
            ``list_commands`` (leave them out to keep a small model's prompt short).
        python: also offer ``run_python(code)``, which runs Python source with the interpreter
            running agentica (``sys.executable``), the same way as ``execute``.
        max_code_nudges: how often per run a model that answers with a code block instead of
            running it is told to run it (0: never).
    """

    name = "shell"

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 60.0,
        max_timeout: float = 600.0,
        max_output: int = 10_000,
        env: Mapping[str, str] | None = None,
        sandbox: Literal["none", "bwrap", "auto"] = "none",
        allow_network: bool = False,
        max_processes: int = 1024,
        max_memory: int = 4 * 2**30,
        operations_end: Literal["run", "session"] = "run",
        kill_grace: float = 2.0,
        max_operations: int = 8,
        background: bool = True,
        python: bool = False,
        max_code_nudges: int = 2,
    ) -> None:
        self.root = Path(root).resolve()
        if not self.root.is_dir():
            raise UsageError(f"Shell root {str(self.root)!r} is not a directory; create it first")
        if not 0 < timeout <= max_timeout:
            raise UsageError("Shell needs 0 < timeout <= max_timeout")
        if max_output < 100:
            raise UsageError("Shell max_output must be at least 100 characters")
        if sandbox not in ("none", "bwrap", "auto"):
            raise UsageError(f"Shell sandbox must be 'none', 'bwrap' or 'auto', not {sandbox!r}")
        if operations_end not in ("run", "session"):
            raise UsageError(
                f"Shell operations_end must be 'run' or 'session', not {operations_end!r}"
            )
        if kill_grace < 0 or max_operations < 1:
            raise UsageError("Shell needs kill_grace >= 0 and max_operations >= 1")
        if max_processes < 4 or max_memory < 64 * 2**20:
            raise UsageError(
                "Shell needs max_processes >= 4 and max_memory >= 64 MiB (67108864 bytes): a "
                "command needs a few processes and Python itself some memory"
            )
        self._bwrap = shutil.which("bwrap")
        if sandbox == "bwrap" and self._bwrap is None:
            raise UsageError(
                "Shell(sandbox='bwrap') needs bubblewrap, which is not installed: install it "
                "(apt-get install bubblewrap, dnf install bubblewrap) or use sandbox='auto'"
            )
        self.max_code_nudges = max_code_nudges
        self.timeout = timeout
        self.max_timeout = max_timeout
        self.max_output = max_output
        self.env = _minimal_env(self.root, env)
        self.sandbox = sandbox
        self.allow_network = allow_network
        self.max_processes = max_processes
        self.max_memory = max_memory
        self.operations_end = operations_end
        self.kill_grace = kill_grace
        self.max_operations = max_operations
        self._sandboxed: bool | None = False if sandbox == "none" else None
        self._sandbox_error: str | None = None
        self._sandbox_argv: list[str] = []  # bwrap and its options, once the probe passed
        self._cgroup = ""  # the supervisor's pids cgroup argument ("DIRECTORY:MAX" or "")
        self._operations: dict[SessionKey, dict[str, _Operation]] = {}
        self._ids = itertools.count(1)
        self.background = background
        self.python = python
        self._code_not_run = CodeNotRun(max_nudges=max_code_nudges)
        self._tools = self._build_tools()

    # ------------------------------------------------------------------ sandbox

    def _bwrap_argv(self, mounts: Sequence[str], userns: bool) -> list[str]:
        assert self._bwrap is not None
        argv = [self._bwrap, "--unshare-all"]
        if userns:
            argv += _USERNS_OPTIONS
        if self.allow_network:
            argv.append("--share-net")
        argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", *mounts]
        limits = [str(self.max_processes), str(self.max_memory)]
        return [*argv, sys.executable or "python3", "-I", "-S", "-c", _LIMITS, *limits]

    async def sandboxed(self) -> bool:
        """Whether commands run under bubblewrap (checked once, on first use).

        Raises ``UsageError`` for ``sandbox="bwrap"`` when bubblewrap cannot run here.
        """
        if self._sandboxed is not None:
            return self._sandboxed
        if self._sandbox_error is None:
            works, reason = False, "bubblewrap (bwrap) is not installed"
            if self._bwrap is not None:
                works, reason = await self._probe_bwrap()
            if works:
                self._sandboxed = True
                return True
            self._sandbox_error = reason
        if self.sandbox == "bwrap":
            raise UsageError(
                f"Shell(sandbox='bwrap') cannot run commands: {self._sandbox_error}. Allow "
                "unprivileged user namespaces on this host, or use sandbox='auto' or 'none'."
            )
        logger.warning(
            "Shell(sandbox='auto'): running commands without a sandbox: %s", self._sandbox_error
        )
        self._sandboxed = False
        return False

    async def _probe_bwrap(self) -> tuple[bool, str]:
        mounts, cgroup = await asyncio.to_thread(
            lambda: (_sandbox_mounts(self.root, self.allow_network), _pids_cgroup())
        )
        reason = ""
        for userns in (True, False):
            argv = self._bwrap_argv(mounts, userns)
            works, reason = await self._try_bwrap(argv)
            if works:
                break
        else:
            return False, reason
        self._sandbox_argv = argv
        if cgroup is not None:
            self._cgroup = f"{cgroup}:{self.max_processes}"
        elif os.geteuid() == 0:
            logger.warning(
                "Shell sandbox: running as root and no pids cgroup can be created here, so "
                "max_processes does not hold (the kernel does not apply RLIMIT_NPROC to root): "
                "run agentica as another user, or give it a cgroup with the pids controller"
            )
        return True, ""

    async def _try_bwrap(self, argv: list[str]) -> tuple[bool, str]:
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, "/bin/sh", "-c", "exit 0",
                stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=self.env,
            )  # fmt: skip
        except OSError as exc:
            return False, f"bwrap could not start: {exc}"
        try:
            out, _ = await asyncio.wait_for(process.communicate(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()
            return False, "bwrap did not answer within 10 s"
        if process.returncode != 0:
            message = out.decode(errors="replace").strip()
            return False, f"bwrap cannot create namespaces here ({message})"
        return True, ""

    # ------------------------------------------------------------------ processes

    def _check_command(self, command: str) -> str:
        if not command.strip():
            raise ToolError("The command is empty. Pass a shell command, e.g. execute('ls -la').")
        if "\0" in command:
            raise ToolError("The command contains a NUL character; remove it.")
        if _PYTHON_START.match(command):
            raise ToolError(
                "This is Python code, not a shell command. Write it to a file and run "
                "`python file.py`, or pass it as `python -c '...'`."
            )
        return command

    async def _spawn(self, command: str, argv: list[str] | None = None) -> _Process:
        argv = argv or ["/bin/sh", "-c", command]
        cgroup = ""
        if await self.sandboxed():
            argv, cgroup = [*self._sandbox_argv, *argv], self._cgroup
        try:
            return await _Process.start(
                argv, cwd=self.root, env=self.env, max_output=self.max_output,
                grace=self.kill_grace, cgroup=cgroup,
            )  # fmt: skip
        except OSError as exc:
            raise ToolError(
                f"The command could not be started: {exc}. If it is very long, write it to a "
                "script file and run `sh script.sh`."
            ) from None

    def _limit(self, timeout: float | None) -> float:
        if timeout is None or timeout <= 0:
            return self.timeout
        return min(float(timeout), self.max_timeout)

    def _result(self, process: _Process, header: str) -> str:
        output = process.output()
        text = f"{header}\n{output}" if output else f"{header} (no output)"
        return text + _hint(process.returncode, output)

    async def execute(self, command: str, timeout: float | None = None) -> str:
        """Run ``command`` with ``/bin/sh -c`` in the workspace; its exit code and output.

        Raises ``ToolError`` for a command that cannot run. Cancelling the caller stops the
        command and everything it started.
        """
        self._check_command(command)
        return await self._run(command, None, timeout)

    async def run_python(self, code: str, timeout: float | None = None) -> str:
        """Run Python source ``code`` in the workspace; its exit code and output."""
        stripped = code.strip()
        if not stripped:
            raise ToolError("The code is empty. Pass Python source code, e.g. print(1 + 1).")
        if _SHELL_START.match(stripped):
            raise ToolError(
                "run_python takes Python source code, not a shell command. Pass the code itself "
                "(e.g. print(open('data.csv').read())), or run the command with execute."
            )
        code, repairs = repair_brackets(code)
        result = await self._run("python -c ...", [sys.executable, "-E", "-s", "-c", code], timeout)
        if result.endswith("(no output)"):
            result += "; the code printed nothing: print() the values you need to see"
        if repairs:
            result += (
                f"\n(Your code was run with a bracket fixed: {'; '.join(repairs)}. Write the "
                "right bracket yourself next time.)"
            )
        return result

    async def _run(self, command: str, argv: list[str] | None, timeout: float | None) -> str:
        limit = self._limit(timeout)
        process = await self._spawn(command, argv)
        try:
            if not await process.wait(limit):
                await process.stop(f"killed after {limit:g} s timeout")
        except BaseException:
            process.request_stop("cancelled")
            await asyncio.shield(process.wait(self.kill_grace + _PIPE_GUARD + 5.0))
            raise
        header = process.status()
        if process.stop_reason is not None and process.stop_reason.startswith("killed after"):
            return self._result(
                process, f"{header}. The command did not finish in time; for long commands use "
                "start_command, then wait_command."
            )  # fmt: skip
        return self._result(process, header)

    # ------------------------------------------------------------------ operations

    def _session(self, ctx: RunContext[Any]) -> dict[str, _Operation]:
        return self._operations.setdefault((ctx.user_id, ctx.session_id), {})

    def _find(self, ctx: RunContext[Any], id: str) -> _Operation:
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        operation = operations.get(id.strip())
        if operation is None:
            known = ", ".join(operations) or "none"
            raise ToolError(
                f"There is no background command {id!r} in this session (ids: {known}). "
                "Use the id start_command returned, or call list_commands."
            )
        return operation

    def _prune(self, operations: dict[str, _Operation]) -> None:
        finished = [op for op in operations.values() if op.process.finished]
        for op in finished[: max(0, len(finished) - 16)]:
            del operations[op.id]

    async def start_command(self, ctx: RunContext[Any], command: str) -> str:
        """Start ``command`` in the background; a message with its id."""
        self._check_command(command)
        operations = self._session(ctx)
        self._prune(operations)
        running = [op.id for op in operations.values() if not op.process.finished]
        if len(running) >= self.max_operations:
            raise ToolError(
                f"{len(running)} background commands are already running ({', '.join(running)}). "
                "Stop one with stop_command first."
            )
        process = await self._spawn(command)
        op_id = f"cmd{next(self._ids)}"
        operations[op_id] = _Operation(
            id=op_id, command=command, run_id=ctx.run_id, process=process
        )
        return (
            f"Started background command {op_id}. Call wait_command(id={op_id!r}) to see its "
            f"output, stop_command(id={op_id!r}) to stop it."
        )

    async def wait_command(self, ctx: RunContext[Any], id: str, timeout: float = 30) -> str:
        """Wait up to ``timeout`` s for a background command; its output so far or its result."""
        operation = self._find(ctx, id)
        limit = min(max(float(timeout), 0.0), self.max_timeout)
        if not await operation.process.wait(limit):
            return self._result(
                operation.process,
                f"{operation.id} is still running (after {operation.process.elapsed:.0f} s). "
                "Output so far:",
            )
        return self._result(
            operation.process, f"{operation.id} finished: {operation.process.status()}"
        )

    async def stop_command(self, ctx: RunContext[Any], id: str) -> str:
        """Stop a background command and everything it started; its final output."""
        operation = self._find(ctx, id)
        already = operation.process.finished
        await operation.process.stop("stopped by stop_command")
        state = "had already finished" if already else "was stopped"
        return self._result(
            operation.process, f"{operation.id} {state}: {operation.process.status()}"
        )

    def list_commands(self, ctx: RunContext[Any]) -> str:
        """The background commands of the run's session, one line each."""
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        if not operations:
            return "No background commands. Start one with start_command."
        return "\n".join(
            f"{op.id}: {op.process.status()}: {op.command[:100]}" for op in operations.values()
        )

    async def aclose(self, user_id: str | None = None, session_id: str | None = None) -> None:
        """Stop the background commands (of one user or session when given) and forget them."""
        stops = []
        for key in list(self._operations):
            if (user_id is None or key[0] == user_id) and (
                session_id is None or key[1] == session_id
            ):
                operations = self._operations.pop(key)
                stops += [
                    op.process.stop("stopped: the session was closed") for op in operations.values()
                ]
        await asyncio.gather(*stops)

    # ------------------------------------------------------------------ capability hooks

    async def after_run(self, ctx: RunContext[Any], record: RunRecord) -> None:
        if self.operations_end != "run":
            return
        operations = self._operations.get((ctx.user_id, ctx.session_id), {})
        ended = [op for op in operations.values() if op.run_id == ctx.run_id]
        await asyncio.gather(*(op.process.stop("stopped: the run ended") for op in ended))
        for op in ended:
            operations.pop(op.id, None)

    async def review_answer(self, ctx: RunContext[Any], message: AssistantMessage) -> str | None:
        """A model that shows code in its answer instead of running it is told to run it
        (at most ``max_code_nudges`` times per run; see ``CodeNotRun``)."""
        return await self._code_not_run.review_answer(ctx, message)

    def tools(self) -> Sequence[ToolLike]:
        return self._tools

    def _build_tools(self) -> list[Function]:
        shell = self
        slack = self.max_timeout + self.kill_grace + 30.0  # the engine's limit: after ours

        async def execute(ctx: RunContext[Any], command: str, timeout: float | None = None) -> str:
            """Run a shell command in the workspace; returns its exit code and output.

            Args:
                command: the command, e.g. "ls -la" or "python script.py".
                timeout: seconds before it is stopped (optional).
            """
            return await shell.execute(command, timeout)

        async def start_command(ctx: RunContext[Any], command: str) -> str:
            """Start a long-running shell command in the background; returns its id.

            Args:
                command: the command, e.g. "python train.py".
            """
            return await shell.start_command(ctx, command)

        async def wait_command(ctx: RunContext[Any], id: str, timeout: float = 30) -> str:
            """Wait for a background command; returns its output and whether it finished.

            Args:
                id: the id start_command returned.
                timeout: seconds to wait.
            """
            return await shell.wait_command(ctx, id, timeout)

        async def stop_command(ctx: RunContext[Any], id: str) -> str:
            """Stop a background command; returns its final output.

            Args:
                id: the id start_command returned.
            """
            return await shell.stop_command(ctx, id)

        async def list_commands(ctx: RunContext[Any]) -> str:
            """List the background commands."""
            return shell.list_commands(ctx)

        async def run_python(ctx: RunContext[Any], code: str) -> str:
            """Run Python code in the workspace; returns what it printed.

            Args:
                code: Python source code (not a shell command); print() what you need.
            """
            return await shell.run_python(code)

        tools = [Function.from_callable(execute, timeout=slack)]
        if self.python:
            described = Function.from_callable(run_python, timeout=slack)
            missing = [m for m in COMMON_PACKAGES if importlib.util.find_spec(m) is None]
            if missing:  # models reach for pandas first; say so before the ImportError
                described = described.with_options(
                    description=f"{described.description} Not installed here: "
                    f"{', '.join(missing)} (use the standard library)."
                )
            tools.append(described)
        if self.background:
            tools += [
                Function.from_callable(start_command),
                Function.from_callable(wait_command, timeout=slack),
                Function.from_callable(stop_command, timeout=slack),
                Function.from_callable(list_commands),
            ]
        return tools
