"""The supervisor every local shell command runs under, a program run by path:
``python -I -S supervisor.py PARENT_PID GRACE CGROUP ARGV...``.

Isolated (``-I -S``), it cannot import agentica: standard library only, imported lazily (it
starts with every command). ``Supervisor`` says what it does.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import FrameType
    from typing import NoReturn

    Prctl = Callable[[int, int], int]

_PR_SET_PDEATHSIG = 1  # the kernel signals us when our parent dies
_PR_SET_CHILD_SUBREAPER = 36  # orphans of the command are re-parented to us
_F_SETPIPE_SZ = 1031
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_DEFAULT_SIGNALS = (*_STOP_SIGNALS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ)


def _quietly(call: Callable[[int, int], object], first: int, second: int) -> None:
    """``call(first, second)``, ignoring ``OSError`` (contextlib costs 1 ms a command)."""
    try:
        call(first, second)
    except OSError:
        return


def descendants(root: int) -> list[int]:
    """Living descendants of ``root`` (zombies excluded), from /proc; [] where /proc is missing."""
    children: dict[int, list[int]] = {}
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
        fields = data[data.rfind(b")") + 2 :].split()
        if len(fields) < 2 or fields[0] in (b"Z", b"X"):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    stack = [root]
    while stack:
        for pid in children.get(stack.pop(), ()):
            found.append(pid)
            stack.append(pid)
    return found


def make_cgroup(spec: str) -> str:
    """A new cgroup for the command: ``spec`` is ``DIRECTORY:MAX`` (``pids.max`` = MAX)."""
    base, _, limit = spec.rpartition(":")
    path = os.path.join(base, f"agentica-{os.getpid()}-{os.urandom(4).hex()}")
    os.mkdir(path)
    try:
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(limit)
    except BaseException:
        os.rmdir(path)
        raise
    return path


def remove_cgroup(path: str) -> None:
    for _ in range(200):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)  # the killed processes are still being released


def load_prctl() -> Prctl | None:
    """``prctl(option, value)`` through libc on Linux; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)

        def prctl(option: int, value: int) -> int:
            zero = ctypes.c_ulong(0)
            return int(libc.prctl(option, ctypes.c_ulong(value), zero, zero, zero))

    except Exception:
        return None
    return prctl


class Supervisor:
    """Runs one command and makes sure nothing it started outlives it or its parent.

    - asks the kernel to signal it when its parent dies (``PR_SET_PDEATHSIG``) and to adopt the
      command's orphans (``PR_SET_CHILD_SUBREAPER``); it also notices its parent's death when its
      stdin pipe closes or it is re-parented (other platforms, where ``prctl`` is missing);
    - starts ``argv`` (``/bin/sh -c COMMAND``, maybe inside bubblewrap) in a new session (its own
      process group), with stdin from ``/dev/null`` and stdout and stderr as given (one pipe),
      in the pids ``cgroup`` when there is one;
    - when told to stop (SIGTERM), when its parent dies, or when the command exits leaving
      background jobs behind, sends SIGTERM to the command's process group and to every
      descendant (found through ``/proc``, so ``setsid`` and double forks are included), waits
      ``grace`` seconds, then sends SIGKILL until none is left, reaps them and exits with the
      command's exit status (``128 + N`` when signal ``N`` killed it).
    """

    def __init__(self, parent: int, grace: float, argv: list[str], cgroup: str | None) -> None:
        self.parent = parent
        self.grace = grace
        self.argv = argv
        self.cgroup = cgroup
        self.me = os.getpid()
        self.prctl: Prctl | None = None
        self.stop: list[int] = []
        self.pid = 0
        self.status: int | None = None
        self.wake_r = -1

    def run(self) -> int:
        self.prctl = load_prctl()
        self.install_signals()
        if self.prctl is not None:
            self.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
            self.prctl(_PR_SET_CHILD_SUBREAPER, 1)
        if os.getppid() != self.parent:
            return 128 + signal.SIGTERM  # the parent died before it could be watched
        try:
            import fcntl

            fcntl.fcntl(1, _F_SETPIPE_SZ, 1 << 20)  # fewer, larger reads for the parent
        except Exception:
            pass
        self.pid = os.fork()
        if self.pid == 0:
            self.exec_command()
        self.watch()
        return self.finish()

    def install_signals(self) -> None:
        def on_stop(signum: int, frame: FrameType | None) -> None:
            self.stop.append(signum)

        for signum in _STOP_SIGNALS:
            signal.signal(signum, on_stop)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)

    def exec_command(self) -> NoReturn:
        """In the forked child: become the command."""
        try:
            os.setsid()
            signal.set_wakeup_fd(-1)
            for signum in _DEFAULT_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            if self.prctl is not None:
                self.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != self.me:
                os._exit(137)
            if self.cgroup is not None:
                with open(os.path.join(self.cgroup, "cgroup.procs"), "w") as f:
                    f.write("0")
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.execv(self.argv[0], self.argv)
        except BaseException as exc:
            try:
                os.write(2, f"could not start {self.argv[0]}: {exc}\n".encode())
            finally:
                os._exit(127)

    def reap(self) -> None:
        while True:
            try:
                done, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if done == 0:
                return
            if done == self.pid:
                self.status = status

    def signal_all(self, signum: int) -> None:
        _quietly(os.killpg, self.pid, signum)
        for other in descendants(self.me):
            _quietly(os.kill, other, signum)

    def watch(self) -> None:
        """Until the command exits, we are told to stop, or our parent is gone."""
        while True:
            self.reap()
            if self.status is not None or self.stop or os.getppid() != self.parent:
                return
            try:
                ready = select.select([0, self.wake_r], [], [], 0.5)[0]
            except OSError:
                ready = []
            if self.wake_r in ready:
                _quietly(os.read, self.wake_r, 4096)
            if 0 in ready and not self.parent_listens():
                return

    def parent_listens(self) -> bool:
        """False once stdin closed: the parent is gone."""
        try:
            return bool(os.read(0, 4096))
        except OSError:
            return False

    def finished(self) -> bool:
        return self.status is not None and not descendants(self.me)

    def finish(self) -> int:
        """Kill what is left (SIGTERM, ``grace``, then SIGKILL); the command's exit status."""
        if self.status is None or descendants(self.me):
            self.signal_all(signal.SIGTERM)
            deadline = time.monotonic() + self.grace
            while time.monotonic() < deadline:
                self.reap()
                if self.finished():
                    break
                time.sleep(0.02)
        for _ in range(500):
            self.reap()
            if self.finished():
                break
            self.signal_all(signal.SIGKILL)
            time.sleep(0.01)
        self.reap()
        if self.status is None:
            return 128 + signal.SIGKILL
        code = os.waitstatus_to_exitcode(self.status)
        return code if code >= 0 else 128 - code


def main(args: list[str]) -> int:
    """argv: the parent's pid, the grace period in seconds, a pids cgroup (``DIRECTORY:MAX``, or
    empty: the command runs in a new cgroup under DIRECTORY with ``pids.max`` MAX, removed at
    the end), then the command's argv."""
    parent, grace, spec, argv = int(args[0]), float(args[1]), args[2], args[3:]
    cgroup = None
    if spec:
        try:
            cgroup = make_cgroup(spec)
        except OSError as exc:
            os.write(2, f"could not create the pids cgroup: {exc}\n".encode())
            return 126
    try:
        return Supervisor(parent, grace, argv, cgroup).run()
    finally:
        if cgroup is not None:
            remove_cgroup(cgroup)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
