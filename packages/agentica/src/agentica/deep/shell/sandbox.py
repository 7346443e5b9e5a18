"""The bubblewrap sandbox: bwrap's options (mounts, namespaces, limits), the commands'
environment, the pids cgroup, and the check that bwrap works here."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import stat
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# What a sandboxed command sees of the host, read-only (the rest of the file system is absent).
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
# bwrap's options that need user namespaces (``--disable-userns``: no nested namespaces inside);
# without them where bwrap cannot create a user namespace itself (a setuid bwrap).
_USERNS_OPTIONS = ("--unshare-user", "--disable-userns")


def minimal_env(root: Path, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The commands' environment: never the parent's (it holds API keys)."""
    env = {
        "PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(root),
        "LANG": os.environ.get("LANG") or "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        # no __pycache__ in the workspace, and no stale bytecode: a file edited in the second
        # a test run compiled it, to the same size, ran as it was
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.update(extra or {})
    return env


def hidden(top: str) -> list[tuple[str, bool]]:
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


def python_dirs() -> list[str]:
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
        inside = (*SYSTEM_DIRS, *kept)
        if not any(d == top or d.startswith(top + "/") for top in inside):
            kept.append(d)
    return kept


def _pids_candidates() -> list[str]:
    """The cgroup directories of this process whose children may use the pids controller."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
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
    return candidates


def pids_cgroup() -> str | None:
    """A cgroup directory this process may create pids-limited groups under, or None (cgroup v1
    ``pids`` hierarchy, or cgroup v2 with ``pids`` enabled below our group; usually root only)."""
    for folder in _pids_candidates():
        probe = os.path.join(folder, f"agentica-probe-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.mkdir(probe)
            os.rmdir(probe)
        except OSError:
            continue
        return folder
    return None


AGENTICA_DIR = str(Path(__file__).resolve().parents[2])
"""The installed ``agentica`` package (the supervisor the host runs for every command is in it)."""


def _inside(folder: str, workspace: str) -> bool:
    return os.path.realpath(folder).startswith(workspace + "/")


def sandbox_mounts(
    root: Path, allow_network: bool, *, protected: Sequence[str] | None = None
) -> list[str]:
    """bwrap's file system options: the system directories read-only (``/etc`` without what
    not everyone may read), the interpreter, a fresh ``/dev``, ``/proc`` and ``/tmp``, the
    workspace writable, and nothing else (no ``/home``, ``/root``, ``/run``, ``/var``, ``/sys``).

    ``protected`` (default: the interpreter's directories and agentica's package) stay read-only
    even inside the workspace (a project's ``.venv``, an editable install): the host runs them
    for the next command, so a command able to change them would escape the sandbox."""
    if protected is None:
        protected = [*python_dirs(), AGENTICA_DIR]
    argv: list[str] = []
    for top in SYSTEM_DIRS:
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    for path, is_dir in hidden("/etc"):
        argv += (
            ["--tmpfs", path, "--remount-ro", path] if is_dir else ["--ro-bind", "/dev/null", path]
        )
    if allow_network and os.path.islink("/etc/resolv.conf"):  # e.g. systemd-resolved's, in /run
        target = os.path.realpath("/etc/resolv.conf")
        if os.path.isfile(target) and not target.startswith("/etc/"):
            argv += ["--ro-bind", target, target]
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for folder in python_dirs():
        argv += ["--ro-bind", folder, folder]
    workspace = os.path.realpath(root)
    argv += ["--bind", workspace, workspace]
    for folder in protected:  # after the workspace: a later mount covers an earlier one
        if _inside(folder, workspace) and os.path.isdir(folder):
            real = os.path.realpath(folder)
            argv += ["--ro-bind", real, real]
    argv += ["--remount-ro", "/", "--chdir", workspace]
    return argv


@functools.cache
def _limits_source() -> str:
    return Path(__file__).with_name("rlimits.py").read_text()


@dataclass(frozen=True, kw_only=True)
class SandboxOptions:
    """What a sandboxed command may use (see ``BwrapCommands``)."""

    allow_network: bool
    max_processes: int
    max_memory: int


def bwrap_argv(
    bwrap: str, mounts: Sequence[str], options: SandboxOptions, *, userns: bool
) -> list[str]:
    """bwrap with its options, then the resource limits: the command's argv follows."""
    argv = [bwrap, "--unshare-all"]
    if userns:
        argv += _USERNS_OPTIONS
    if options.allow_network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", *mounts]
    limits = [str(options.max_processes), str(options.max_memory)]
    return [*argv, sys.executable or "python3", "-I", "-S", "-c", _limits_source(), *limits]


@dataclass(frozen=True)
class Sandbox:
    """A working sandbox: the argv to put before a command's, and the supervisor's pids cgroup
    argument (``DIRECTORY:MAX``, or empty)."""

    argv: list[str]
    cgroup: str


async def probe(
    bwrap: str, root: Path, options: SandboxOptions, env: Mapping[str, str]
) -> Sandbox | str:
    """The sandbox when bwrap can create its namespaces here (tried with and without a user
    namespace of its own), else why not."""
    mounts, cgroup = await asyncio.to_thread(
        lambda: (sandbox_mounts(root, options.allow_network), pids_cgroup())
    )
    reason = ""
    for userns in (True, False):
        argv = bwrap_argv(bwrap, mounts, options, userns=userns)
        works, reason = await _try_bwrap(argv, env)
        if works:
            break
    else:
        return reason
    if cgroup is not None:
        return Sandbox(argv, f"{cgroup}:{options.max_processes}")
    if os.geteuid() == 0:
        logger.warning(
            "Shell sandbox: running as root and no pids cgroup can be created here, so "
            "max_processes does not hold (the kernel does not apply RLIMIT_NPROC to root): "
            "run agentica as another user, or give it a cgroup with the pids controller"
        )
    return Sandbox(argv, "")


async def _try_bwrap(argv: list[str], env: Mapping[str, str]) -> tuple[bool, str]:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, "/bin/sh", "-c", "exit 0",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=dict(env),
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
