"""Shell: commands and background commands in real subprocesses, and that none outlives its owner.

Every test runs real processes. "Gone" means: no living process (zombies count as dead: PID 1 of a
container may never reap them) whose command line carries the test's marker, or whose pid the
command printed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

import pytest

from agentica import Agent
from agentica.deep.shell import Shell
from agentica.deep.shell.hints import file_states, written_files, written_texts, wrong_result
from agentica.errors import ToolError, UsageError
from agentica.messages import RunUsage
from agentica.testing import ScriptedModel, call, tool_calls
from agentica.tools.context import RunContext

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc")


def _bwrap_works() -> tuple[bool, str]:
    try:
        probe = subprocess.run(
            ["bwrap", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--unshare-pid",
             "--unshare-net", "--die-with-parent", "--new-session", "/bin/true"],
            capture_output=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"bubblewrap is not installed ({exc})"
    if probe.returncode != 0:
        return False, f"bwrap cannot create namespaces here: {probe.stderr.decode().strip()}"
    return True, ""


BWRAP, BWRAP_REASON = _bwrap_works()
needs_bwrap = pytest.mark.skipif(not BWRAP, reason=BWRAP_REASON or "bwrap works")


def context(session: str = "s1", run: str = "r1", user: str = "u1") -> RunContext[None]:
    return RunContext(run_id=run, deps=None, usage=RunUsage(), user_id=user, session_id=session)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    return data[data.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def with_marker(marker: str, *, starts: bool = False) -> list[int]:
    """Living processes whose command line contains (or ``starts`` with) ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        matches = cmdline.startswith(marker) if starts else marker in cmdline
        if matches and alive(int(name)):
            found.append(int(name))
    return found


async def gone_within(pids: Iterable[int], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    pids = list(pids)
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def numbers(text: str) -> list[int]:
    return [int(line) for line in text.splitlines() if line.strip().isdigit()]


@pytest.fixture
async def shell(tmp_path: Path) -> AsyncIterator[Shell]:
    shell = Shell(tmp_path, timeout=10, kill_grace=0.3, operations_end="session")
    yield shell
    await shell.aclose()


# ------------------------------------------------------------------------------ execute


async def test_exit_code_and_output_in_order(shell: Shell) -> None:
    result = await shell.execute("echo out; echo err >&2; echo again; exit 3")
    assert result == "exit code 3\nout\nerr\nagain\n"
    assert await shell.execute("true") == "exit code 0 (no output)"
    assert (await shell.execute("pwd")).endswith(f"{shell.root}\n")


async def test_errors_are_explained_for_a_small_model(shell: Shell) -> None:
    missing = await shell.execute("no_such_program_xyz --help")
    assert missing.startswith("exit code 127") and "not found" in missing
    with pytest.raises(ToolError, match="empty"):
        await shell.execute("   ")
    for code in ("import os\nprint(os.getcwd())", "print('hi')", "def f():\n    return 1"):
        with pytest.raises(ToolError, match=r"python file\.py.*python -c"):
            await shell.execute(code)
    assert "hi" in await shell.execute("python3 -c 'print(\"hi\")'")


async def test_output_is_capped_while_reading(tmp_path: Path) -> None:
    shell = Shell(tmp_path, timeout=60, max_output=2000)
    small = await shell.execute("seq 1 100000")
    assert small.startswith("exit code 0\n1\n2\n3\n") and small.endswith("\n99999\n100000\n")
    assert "output cut" in small and len(small) < 2600
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    started = time.monotonic()
    result = await shell.execute("yes | head -c 1000000000")
    assert time.monotonic() - started < 20
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 100, f"reading 1 GB of output grew the peak memory by {grown_mib:.0f} MiB"
    assert result.startswith("exit code 0\ny\ny\n")
    assert "output cut: 999,998,000 of 1,000,000,000 bytes omitted" in result
    assert len(result) < 2600


async def test_a_timeout_kills_the_whole_process_group(shell: Shell) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"  # a sleep duration no other test uses
    started = time.monotonic()
    result = await shell.execute(
        f"echo $$; sleep {marker} & echo $!; sleep {marker} & sleep {marker}", timeout=1
    )
    assert time.monotonic() - started < 5
    assert result.startswith("killed after 1 s timeout") and "start_command" in result
    pids = numbers(result)
    assert len(pids) == 2
    assert not with_marker(f"sleep {marker}") and not any(alive(p) for p in pids)


async def test_forked_and_daemonised_children_die_too(shell: Shell) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"
    command = (
        f"sleep {marker} & sleep {marker} & "
        f"setsid sleep {marker} & echo $!; "  # its own session: outside the process group
        f"( (sleep {marker} & echo $!) & ); "  # a double fork
        "wait"
    )
    result = await shell.execute(command, timeout=1)
    assert "killed after 1 s timeout" in result and len(numbers(result)) == 2
    assert not with_marker(f"sleep {marker}")
    # a command that ends leaving background jobs behind does not leave them running either
    result = await shell.execute(f"sleep {marker} & setsid sleep {marker} & echo $!")
    assert result.startswith("exit code 0") and not with_marker(f"sleep {marker}")


async def test_cancelling_the_tool_call_kills_its_processes(shell: Shell) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"
    task = asyncio.create_task(shell.execute(f"sleep {marker} & sleep {marker}", timeout=60))
    deadline = time.monotonic() + 5
    while len(pids := with_marker(f"sleep {marker}", starts=True)) < 2:
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(0.05)
    assert len(pids) == 2
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not any(alive(p) for p in pids) and not with_marker(f"sleep {marker}")


async def test_a_command_runs_once_exactly_as_given(shell: Shell) -> None:
    command = (
        "printf '%s|' \"it's\" \"$(echo sub)\" 'a;b' '$(touch pwned)'; echo; "
        'echo ran >> count.txt; echo "; touch pwned2" `echo back`'
    )
    result = await shell.execute(command)
    assert result == "exit code 0\nit's|sub|a;b|$(touch pwned)|\n; touch pwned2 back\n"
    ctx = context()
    await shell.start_command(ctx, command)
    assert "finished: exit code 0" in await shell.wait_command(ctx, "cmd1", timeout=10)
    assert (shell.root / "count.txt").read_text() == "ran\nran\n"
    assert not (shell.root / "pwned").exists() and not (shell.root / "pwned2").exists()


async def test_the_parents_secrets_are_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-456")
    shell = Shell(tmp_path, env={"GREETING": "hello"})
    result = await shell.execute("env")
    assert "sk-secret-123" not in result and "aws-secret-456" not in result
    assert "OPENAI_API_KEY" not in result and "AWS_SECRET" not in result
    assert f"HOME={shell.root}" in result and "GREETING=hello" in result
    assert "PATH=" in result
    assert await shell.execute("echo ${OPENAI_API_KEY:-unset}") == "exit code 0\nunset\n"


# ------------------------------------------------------------------------------ operations


async def test_start_wait_and_stop_a_background_command(shell: Shell) -> None:
    ctx = context()
    started = await shell.start_command(ctx, "echo begin; echo $$; exec sleep 300")
    assert "cmd1" in started and "wait_command" in started
    partial = await shell.wait_command(ctx, "cmd1", timeout=0.5)
    assert partial.startswith("cmd1 is still running") and "begin" in partial
    (pid,) = numbers(partial)
    assert alive(pid)
    assert "cmd1: still running" in shell.list_commands(ctx)
    stopped = await shell.stop_command(ctx, "cmd1")
    assert stopped.startswith("cmd1 was stopped") and "begin" in stopped
    assert not alive(pid)
    await shell.start_command(ctx, "echo done")
    finished = await shell.wait_command(ctx, "cmd2", timeout=10)
    assert finished == "cmd2 finished: exit code 0\ndone\n"
    assert "had already finished" in await shell.stop_command(ctx, "cmd2")
    with pytest.raises(ToolError, match="list_commands"):
        await shell.wait_command(ctx, "cmd9")


async def test_another_session_cannot_see_or_stop_an_operation(shell: Shell) -> None:
    mine, other, other_user = context("s1"), context("s2"), context("s1", user="u2")
    await shell.start_command(mine, "echo $$; exec sleep 300")
    for ctx in (other, other_user):
        with pytest.raises(ToolError, match="no background command 'cmd1'"):
            await shell.wait_command(ctx, "cmd1", timeout=0)
        with pytest.raises(ToolError, match="no background command 'cmd1'"):
            await shell.stop_command(ctx, "cmd1")
        assert shell.list_commands(ctx).startswith("No background commands")
    await shell.aclose(session_id="s2")  # closing another session leaves it alone
    output = await shell.wait_command(mine, "cmd1", timeout=0.5)
    assert "still running" in output
    (pid,) = numbers(output)
    await shell.aclose(user_id="u1", session_id="s1")
    assert not alive(pid)


@pytest.mark.parametrize("operations_end", ["run", "session"])
async def test_operations_end_with_the_run_or_the_session(
    tmp_path: Path, operations_end: str
) -> None:
    shell = Shell(tmp_path, kill_grace=0.3, operations_end=operations_end)  # type: ignore[arg-type]
    model = ScriptedModel([
        tool_calls(call("start_command", command="echo $$; exec sleep 300")),
        tool_calls(call("wait_command", id="cmd1", timeout=0.3)),
        "It is running.",
    ])  # fmt: skip
    agent = Agent(model=model, capabilities=[shell], user_id="u", session_id="s")
    response = await agent.run("Start a server.")
    assert response.content == "It is running."
    waited = response.tool_calls[-1]
    assert waited.status == "success" and "still running" in str(waited.result)
    (pid,) = numbers(str(waited.result))
    ctx = context("s", user="u")
    if operations_end == "run":
        assert not alive(pid)
        assert shell.list_commands(ctx).startswith("No background commands")
    else:
        assert alive(pid) and "cmd1: still running" in shell.list_commands(ctx)
        await shell.aclose(user_id="u", session_id="s")
        assert not alive(pid)


async def test_a_session_may_run_only_so_many_operations(tmp_path: Path) -> None:
    shell = Shell(tmp_path, kill_grace=0.3, max_operations=1)
    ctx = context()
    await shell.start_command(ctx, "sleep 300")
    with pytest.raises(ToolError, match="stop_command"):
        await shell.start_command(ctx, "sleep 300")
    await shell.start_command(context("s2"), "sleep 300")  # another session has its own limit
    await shell.aclose()
    assert shell.list_commands(ctx).startswith("No background commands")


_ORPHAN_SCRIPT = """
import asyncio, sys
from agentica.deep.shell import Shell
from agentica.messages import RunUsage
from agentica.tools.context import RunContext

async def main():
    shell = Shell(sys.argv[1], kill_grace=0.3, operations_end="session")
    ctx = RunContext(run_id="r", deps=None, usage=RunUsage(), user_id="u", session_id="s")
    await shell.start_command(
        ctx, "sleep 300 & echo $!; setsid sleep 300 & echo $!; echo $$; exec sleep 300"
    )
    while True:
        out = await shell.wait_command(ctx, "cmd1", timeout=0.1)
        pids = [line for line in out.splitlines() if line.strip().isdigit()]
        if len(pids) == 3:
            print(" ".join(pids), flush=True)
            break
    await asyncio.sleep(1000)

asyncio.run(main())
"""


async def test_killing_the_python_process_with_sigkill_leaves_no_orphan(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(_ORPHAN_SCRIPT)
    owner = await asyncio.create_subprocess_exec(
        sys.executable, str(script), str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    assert owner.stdout is not None
    try:
        line = await asyncio.wait_for(owner.stdout.readline(), 20)
        pids = [int(p) for p in line.split()]
        assert len(pids) == 3 and all(alive(p) for p in pids)
    finally:
        owner.send_signal(signal.SIGKILL)
        await owner.wait()
    assert owner.returncode == -signal.SIGKILL
    assert await gone_within(pids, 5), [p for p in pids if alive(p)]


# ------------------------------------------------------------------------------ sandbox


async def test_sandbox_bwrap_fails_clearly_when_bubblewrap_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap on this PATH
    with pytest.raises(UsageError, match="apt-get install bubblewrap"):
        Shell(tmp_path, sandbox="bwrap")
    shell = Shell(tmp_path, sandbox="auto", env={"PATH": "/usr/bin:/bin"})
    with caplog.at_level(logging.WARNING, logger="agentica.deep.shell"):
        assert not await shell.sandboxed()  # falls back to no sandbox, with a warning
    assert "without a sandbox: bubblewrap (bwrap) is not installed" in caplog.text
    assert await shell.execute("echo plain") == "exit code 0\nplain\n"


@needs_bwrap
async def test_the_sandbox_protects_the_host(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    beside = tmp_path / "beside.txt"  # under /tmp, which the sandbox replaces by its own
    name = f"agentica-{uuid.uuid4().hex}"
    host = Path("/var/tmp") / name  # /var is not in the sandbox, whose / is read-only
    private = Path("/tmp") / name
    shell = Shell(workspace, sandbox="auto", kill_grace=0.3)
    assert await shell.sandboxed()
    result = await shell.execute(
        f"echo inside > in.txt; echo x > {host}; echo y > {beside}; echo t > {private}; "
        f"cat {private}; cat /proc/net/dev"
    )
    assert (workspace / "in.txt").read_text() == "inside\n"
    assert "/var/tmp/agentica-" in result and "Directory nonexistent" in result
    assert not host.exists()
    assert not beside.exists()
    assert "\nt\n" in result and not private.exists()  # a private /tmp
    interfaces = re.findall(r"^\s*(\w+):", result, re.M)
    assert interfaces == ["lo"]  # no network


@needs_bwrap
async def test_sandboxed_commands_are_killed_too(tmp_path: Path) -> None:
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}"
    shell = Shell(tmp_path, sandbox="bwrap", kill_grace=0.3)
    result = await shell.execute(f"sleep {marker} & setsid sleep {marker} & wait", timeout=1)
    assert "killed after 1 s timeout" in result
    assert not with_marker(f"sleep {marker}") and not with_marker("bwrap --unshare-all")


async def test_run_python_runs_code_and_explains_shell_commands(tmp_path: Path) -> None:
    shell = Shell(tmp_path, python=True, background=False)
    names = [f.name for f in shell.tools()]  # type: ignore[union-attr]
    assert names == ["execute", "run_python"]
    out = await shell.run_python("import os\nprint(os.getcwd(), 6 * 7)")
    assert f"{tmp_path} 42" in out and "exit code 0" in out
    failed = await shell.run_python("print(1 +)")
    assert "SyntaxError" in failed and "exit code 1" in failed and "fix the line" in failed
    missing = await shell.run_python("import pandas_is_not_here")
    assert "'pandas_is_not_here' is not installed here" in missing and "csv" in missing
    silent = await shell.run_python("x = 6 * 7")
    assert "printed nothing: print() the values" in silent
    for command in ("python hello.py", "$ ls", "pip install x"):
        with pytest.raises(ToolError, match=r"not a shell command.*execute"):
            await shell.run_python(command)
    assert [f.name for f in Shell(tmp_path).tools()] == [  # type: ignore[union-attr]
        "execute", "start_command", "wait_command", "stop_command", "list_commands",
    ]  # fmt: skip


async def test_run_python_that_prints_nothing_shows_the_files_its_code_wrote(
    tmp_path: Path,
) -> None:
    """As measured on the 1.5B model (the user-phrased demo): the code wrote the right totals
    into report.md and printed nothing; told only "print() the values", the model wrote its own
    wrong ones over them."""
    shell = Shell(tmp_path, python=True, background=False)
    (tmp_path / "sales.csv").write_text("region,amount\nsouth,80\nsouth,100\n")
    (tmp_path / "big.txt").write_text("old")
    code = (
        "rows = open('sales.csv').read().splitlines()[1:]\n"
        "total = sum(int(r.split(',')[1]) for r in rows)\n"
        "open('/report.md', 'w').write(f'| south | {total} |\\n')\n"
        "open('big.txt', 'w').write('x' * 5000)\n"
    )
    out = await shell.run_python(code)
    assert "it wrote report.md, which now reads:\n| south | 180 |" in out
    assert "it wrote big.txt" in out and "xxx" not in out  # (a long file: by name)
    assert written_texts(out) == [("report.md", "| south | 180 |")]
    assert "sales.csv" not in out  # (read, not written)
    assert "print() the values" not in out
    again = await shell.run_python("open('report.md').read()")  # (named, not changed)
    assert "print() the values you need to see" in again and "which now reads" not in again


def test_the_files_code_wrote_are_read_only_inside_the_workspace(tmp_path: Path) -> None:
    """A link the code made (or a folder swapped for one after the check) is not followed out
    of the workspace when its files are shown."""
    from agentica.deep.shell.hints import _read_inside

    top, outside = tmp_path / "ws", tmp_path / "outside"
    top.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("s3cret")
    (top / "report.md").write_text("ok")
    assert _read_inside(top / "report.md", top) == "ok"
    (top / "link.md").symlink_to(outside / "secret.txt")
    with pytest.raises(OSError, match="Too many levels of symbolic links"):
        _read_inside(top / "link.md", top)  # (a link at the end: not opened)
    (top / "d").symlink_to(outside)  # (a folder swapped for a link after resolve())
    assert _read_inside(top / "d" / "secret.txt", top) is None
    before = file_states("open('link.md', 'w')", top)
    (outside / "secret.txt").write_text("s3cret, changed")
    assert written_files(before, top) == []


async def test_run_python_adds_a_missing_standard_library_import_and_says_so(
    tmp_path: Path,
) -> None:
    """As measured on the 1.5B model: csv.reader with no `import csv`, the same failing call
    sent four times (NameError each time) before the run ended on an answer from its head."""
    (tmp_path / "t.csv").write_text("person,hours\nPriya,7.5\nPriya,6\n")
    shell = Shell(tmp_path, python=True, background=False)
    code = "rows = list(csv.reader(open('t.csv')))[1:]\nprint(sum(float(r[1]) for r in rows))"
    out = await shell.run_python(code)
    assert "exit code 0" in out and "13.5" in out
    assert "used csv without importing it; it was run with `import csv` added as line 1" in out
    # a name the code defines itself, and code that imports it, are left alone
    for own in ("csv = 1\nprint(csv.real)", "import csv\nprint(csv.QUOTE_ALL)"):
        assert "without importing" not in await shell.run_python(own)
    undefined = await shell.run_python("print(pandas.DataFrame)")  # (not the standard library)
    assert "NameError" in undefined and "without importing" not in undefined


async def test_run_python_gives_code_that_calls_the_file_tools_stand_ins_for_them(
    tmp_path: Path,
) -> None:
    """As measured on word-count: ``len(read_file("/notes.txt").split())`` in run_python (a
    NameError), then code that only defined read_file, and the count answered from its head."""
    (tmp_path / "notes.txt").write_text("the quick brown fox\n")
    shell = Shell(tmp_path, python=True, background=False)
    code = (
        'count = len(read_file("/notes.txt").split())\nwrite_file("/count.txt", count)\n'
        "print(count)"
    )
    out = await shell.run_python(code)
    assert out.startswith("exit code 0") and "4" in out, out
    assert (tmp_path / "count.txt").read_text() == "4"
    assert "called read_file and write_file, which are tools, not Python functions" in out
    failing = await shell.run_python('read_file("/notes.txt")\nprint(1 / 0)')
    assert "ZeroDivisionError" in failing and "line 3" in failing  # (the added line counts)
    own = "def read_file(p):\n    return 'mine'\nprint(read_file('x'))"
    mine = await shell.run_python(own)
    assert "mine" in mine and "stand-ins" not in mine


async def test_run_python_says_what_the_folder_of_a_missing_file_holds(tmp_path: Path) -> None:
    """As measured on sum-files: data/numbers.txt made up for "the files in the data folder"
    (a.txt, b.txt, c.txt), opened five times over, FileNotFoundError each time."""
    workspace = tmp_path / "ws"
    (workspace / "data").mkdir(parents=True)
    for name, text in (("b.txt", "30\n"), ("a.txt", "12\n"), ("c.txt", "100\n")):
        (workspace / "data" / name).write_text(text)
    (tmp_path / "secret.txt").write_text("outside\n")
    shell = Shell(workspace, python=True, background=False)
    missing = await shell.run_python("print(sum(map(int, open('/data/numbers.txt'))))")
    assert "FileNotFoundError" in missing
    assert (
        "There is no data/numbers.txt: data holds a.txt, b.txt, c.txt. Open one of those; to "
        "use every file in it, loop over them: for name in sorted(os.listdir('data')): ... "
        "open(os.path.join('data', name))"
    ) in missing
    root = await shell.run_python("open('numbers.txt')")
    assert "There is no numbers.txt in the workspace; its files are" not in root  # (no files)
    outside = await shell.run_python("open('../nothing.txt')")
    assert "FileNotFoundError" in outside and "secret.txt" not in outside
    loop = (
        "import os\nprint(sum(int(open(os.path.join('data', n)).read())"
        " for n in sorted(os.listdir('data'))))"
    )
    assert "142" in await shell.run_python(loop)


async def test_run_python_remarks_on_invalid_json_it_wrote_and_csv_split_on_blanks(
    tmp_path: Path,
) -> None:
    """As measured on the 1.5B model: totals written into totals.json with str() of a dict
    (single quotes), the run ended on it; lines of a CSV split with .split() (IndexError four
    times in a row)."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "t.csv").write_text("date,person,hours\n2024-03-04,Priya,7.5\n")
    (workspace / "old.json").write_text("{'written': 'before'}")
    os.utime(workspace / "old.json", (1, 1))  # (an invalid file the code did not write)
    shell = Shell(workspace, python=True, background=False)
    wrote = await shell.run_python(
        "open('/totals.json', 'w').write(str({'north': 165}))\nprint(open('old.json').read())"
    )
    assert "(Your code wrote totals.json, which is not valid JSON (Expecting property name" in wrote
    assert "json.dump(value, file)" in wrote and "old.json" not in wrote.split("{'written'")[1]
    good = await shell.run_python(
        "import json\njson.dump({'north': 165}, open('totals.json', 'w'))\nprint('ok')"
    )
    assert "not valid JSON" not in good
    split = await shell.run_python("for line in open('t.csv'):\n    print(line.split()[1])")
    assert "IndexError" in split
    assert "Your code names t.csv and splits text with .split()" in split
    read = await shell.run_python("import csv\nprint(list(csv.reader(open('t.csv')))[1][2])")
    assert read.startswith("exit code 0") and "7.5" in read and "splits" not in read
    # (seen: told "skip it (next(reader)) or use csv.DictReader", the code did both)
    both = (
        "import csv\nrows = csv.DictReader(open('t.csv'))\nnext(rows)\nprint(sum(1 for r in rows))"
    )
    skipped = await shell.run_python(both)
    assert (
        "reads the CSV file with csv.DictReader, which takes the header row itself, and also "
        in (skipped)
        and "Remove next(rows)." in skipped
    )
    remark, right = wrong_result(both) or ("", "")
    assert remark in skipped and right == both.replace("next(rows)\n", "")
    assert wrong_result(both.replace("next(rows)", "header = next(rows)")) == (remark, None)
    plain = "import csv\nrows = csv.reader(open('t.csv'))\nnext(rows)\nprint(sum(1 for r in rows))"
    assert "DictReader" not in await shell.run_python(plain)
    # (seen: "Who is the oldest person?" computed as the max of the birth years, twice)
    people = "people = [{'n': 'a', 'born': 1948}, {'n': 'b', 'born': 1961}]\n"
    oldest = await shell.run_python(people + "oldest = max(people, key=lambda p: p['born'])\n"
                                    "print(oldest['n'])")  # fmt: skip
    assert "Your code sets oldest to the max() of 'born', a year or date" in oldest
    assert "Use min() for oldest: oldest = min(people, key=lambda p: p['born'])." in oldest
    newest = await shell.run_python(people + "latest_year = min(p['born'] for p in people)\n"
                                    "print(latest_year)")  # fmt: skip
    assert "Use max() for latest_year: latest_year = max(" in newest
    for fine in ("oldest = min(people, key=lambda p: p['born'])", "oldest = max(people, "
                 "key=lambda p: p['age'])", "total = max(p['born'] for p in people)"):  # fmt: skip
        assert "a year or date" not in await shell.run_python(people + fine + "\nprint(1)")
    outside = await shell.run_python("open('../x.json', 'w').write('{bad')\nprint(1)")
    assert (tmp_path / "x.json").exists() and "not valid JSON" not in outside  # (not read)


async def test_run_python_names_the_column_of_text_taken_for_a_number(tmp_path: Path) -> None:
    """As measured on the 1.5B model: ``line.split(',')[1]`` (the person) summed as the hours,
    told only that 'Priya' is text and maybe a header; it then wrote ``next(reader)`` with no
    reader, twice."""
    (tmp_path / "t.csv").write_text("date,person,hours\n2024-03-04,Priya,7.5\n2024-03-05,Sam,6\n")
    shell = Shell(tmp_path, python=True, background=False)
    wrong = await shell.run_python(
        "total = 0\nfor line in open('t.csv').readlines()[1:]:\n"
        "    total += float(line.split(',')[1])\nprint(total)"
    )
    assert "ValueError" in wrong
    assert "'Priya' for a number, but it is the person column of t.csv (row[1])" in wrong
    assert "date (row[0]), person (row[1]), hours (row[2])" in wrong
    header = await shell.run_python(
        "rows = list(open('t.csv'))\nprint(float(rows[0].split(',')[2].strip()))"
    )
    assert "the code read the header row as data: skip it (next(reader))" in header
    assert "Your code" not in header  # (one advice: a second saying the same was resent code)
    # a value that is no number in a column of numbers: skip it, not "the wrong column"
    (tmp_path / "h.csv").write_text("person,hours\nPriya,7.5\nSam,N/A\nAda,6\n")
    gap = await shell.run_python(
        "import csv\nrows = list(csv.reader(open('h.csv')))[1:]\n"
        "print(sum(float(r[1]) for r in rows))"
    )
    assert "'N/A' in the hours column of h.csv (row[1]) is not a number: skip the rows" in gap
    assert "wrong column" not in gap
    # text that is in no column of a named CSV gets no remark
    other = await shell.run_python("open('t.csv')\nprint(float('abc'))")
    assert "ValueError" in other and "Your code" not in other


SUMS = (
    "# Read the sales.csv file\nwith open('sales.csv', 'r') as file:\n    lines = "
    "file.readlines()\n\ntotals = {}\nfor line in lines:\n    parts = line.strip().split(',')\n"
    "    amount = int(parts[2])\n    totals[parts[0]] = totals.get(parts[0], 0) + amount\n"
    "print(totals)"
)


@pytest.mark.parametrize(
    ("code", "loop", "printed"),
    [
        # seen: the 1.5B model sampled at 0.3 sent this four times, told the header was data
        (
            SUMS,
            "line 6 changed to skip that row, `for line in lines[1:]:`",
            "{'north': 120, 'south': 45}",
        ),
        (
            "import csv\nwith open('sales.csv') as f:\n    rows = csv.reader(f)\n"
            "    print(sum(float(r[2]) for r in rows))",
            "line 4 changed to skip that row, `print(sum(float(r[2]) for r in list(rows)[1:]))`",
            "\n165.0\n",
        ),
        (
            "for row in open('sales.csv'):\n    print(int(row.split(',')[2]) * 2)",
            "line 1 changed to skip that row, `for row in list(open('sales.csv'))[1:]:`",
            "\n240\n90\n",
        ),
    ],
    ids=["readlines", "csv-reader-in-a-generator", "file-lines"],
)
async def test_run_python_skips_the_header_row_its_code_read_as_data_and_says_so(
    tmp_path: Path, code: str, loop: str, printed: str
) -> None:
    (tmp_path / "sales.csv").write_text("region,product,amount\nnorth,pen,120\nsouth,ink,45\n")
    shell = Shell(tmp_path, python=True, background=False)
    out = await shell.run_python(code)
    assert out.startswith("exit code 0") and "ValueError" not in out, out
    assert printed in out
    assert "Your code read the header row of sales.csv as data ('amount' is a column name" in out
    assert loop in out


async def test_run_python_runs_no_header_fix_after_a_run_that_wrote_a_file(
    tmp_path: Path,
) -> None:
    """Running the code again must not do twice what it did before it failed."""
    (tmp_path / "sales.csv").write_text("region,product,amount\nnorth,pen,120\n")
    shell = Shell(tmp_path, python=True, background=False)
    out = await shell.run_python(
        "open('log.txt', 'a').write('x')\nfor line in open('sales.csv'):\n"
        "    print(int(line.split(',')[2]))"
    )
    assert "ValueError" in out and "run again" not in out
    assert (tmp_path / "log.txt").read_text() == "x"
    sliced = await shell.run_python(  # already skipping a row: nothing to put right
        "for line in list(open('sales.csv'))[0:]:\n    print(int(line.split(',')[2]))"
    )
    assert "ValueError" in sliced and "run again" not in sliced


async def test_run_python_tracebacks_show_the_failing_lines_of_the_code(tmp_path: Path) -> None:
    """Code run with -c has no file, so Python's traceback names line 6 without showing it
    (seen: the same failing code sent four times). The line is shown as for a file, once."""
    shell = Shell(tmp_path, python=True, background=False)
    out = await shell.run_python("def f(row):\n    return row.split()[1]\n\nprint(f('a,b'))")
    assert (
        "  File \"<string>\", line 4, in <module>\n    print(f('a,b'))\n"
        '  File "<string>", line 2, in f\n    return row.split()[1]\n'
    ) in out
    syntax = await shell.run_python("x = 1\nprint(x +)")
    assert syntax.count("print(x +)") == 1 and "SyntaxError" in syntax


async def test_run_python_puts_a_mistyped_closing_bracket_right_and_says_so(
    tmp_path: Path,
) -> None:
    shell = Shell(tmp_path, python=True, background=False)
    # seen on the embedded model: the "}" of the JSON call ends up inside the code string
    out = await shell.run_python("import json\nprint(json.dumps({'north': 165}, indent=4)}")
    assert "exit code 0" in out and '"north": 165' in out
    assert "line 2 had '}' where ')' belongs" in out and "Write the right bracket" in out
    still_wrong = await shell.run_python("print(1 +)")  # not a bracket slip: Python reports it
    assert "SyntaxError" in still_wrong and "bracket fixed" not in still_wrong


@pytest.mark.parametrize(
    ("code", "fixed", "notes"),
    [
        ("print(max([1, 2)])", "print(max([1, 2]))", 2),
        ("x = 1\nprint(len([x]", "x = 1\nprint(len([x]))", 2),
        ('print("a"}\nprint(2}', 'print("a")\nprint(2)', 2),
        ("print('})')", "print('})')", 0),  # brackets inside strings are code, left alone
        ("x = (1,\ny = 2", "x = (1,\ny = 2", 0),  # left open before the last line: no guess
        ("for x in y print(x)", "for x in y print(x)", 0),
        ("print(1)", "print(1)", 0),
        # seen: sum(...)} with the JSON's } at the end of the line
        ("print(sum([1, 2]))}", "print(sum([1, 2]))", 1),
        ("x = {1: 2}}\nprint(x)", "x = {1: 2}\nprint(x)", 1),
        ("print(1)} + 2", "print(1)} + 2", 0),  # not at the end of its line: no guess
    ],
)
def test_repair_brackets_only_changes_what_makes_the_code_parse(
    code: str, fixed: str, notes: int
) -> None:
    from agentica.deep.shell import repair_brackets

    result, changes = repair_brackets(code)
    assert (result, len(changes)) == (fixed, notes)


def test_run_python_names_the_common_packages_that_are_missing(tmp_path: Path) -> None:
    import importlib.util

    from agentica.deep.shell import COMMON_PACKAGES

    tools = {f.name: f for f in Shell(tmp_path, python=True).tools()}  # type: ignore[union-attr]
    description = tools["run_python"].description
    for package in COMMON_PACKAGES:
        missing = importlib.util.find_spec(package) is None
        assert (package in description) == missing, description


READ = "import csv\nreader = csv.reader(open('sales.csv'))\n"


@pytest.mark.parametrize(
    ("code", "error", "advice"),
    [
        (
            # the header row read as data, with no loop to skip it in (else the code is run
            # again put right, see the test below)
            READ + "rows = list(reader)\nprint(int(rows[0][2]))",
            "invalid literal for int()",
            "'amount' is text, not a number",
        ),
        (
            READ + "next(reader)\nprint(sum(int(r['amount']) for r in reader))",
            "list indices must be integers or slices, not str",
            "index it by position (row[2]), or read the rows with csv.DictReader",
        ),
        (
            READ + "next(reader)\nprint({region: int(amount) for region, amount in reader})",
            "too many values to unpack",
            "unpack every column (a, b, c = row) or index the row",
        ),
        (
            # a workspace path written the file tools' way, in a string the fix leaves alone
            "name = 'sales'\nprint(open(f'/{name}.csv').read())",
            "No such file or directory: '/sales.csv'",
            "there the path is 'sales.csv' (no leading /)",
        ),
        (
            # seen: people.json has "born", the 1.5B model assumed "age" twice
            "rows = [{'name': 'Ada', 'born': 1815}]\nprint(max(rows, key=lambda r: r['age']))",
            "KeyError: 'age'",
            "The data has no key 'age': print it, or its keys",
        ),
        (
            # seen: a script flattened onto one line by the 1.5B model
            "import csv; with open('sales.csv') as f: rows = list(csv.reader(f)) print(rows)",
            "SyntaxError",
            "The code is all on one line, but with, for, if and def need lines of their own",
        ),
        (
            # seen: the same without a semicolon: "with ...: ... count = 0 for line in lines:"
            "with open('orders.csv') as f: lines = f.readlines() count = 0 for line in lines: "
            "count += 1 print(count)",
            "SyntaxError",
            'by four spaces, like this: {"code": "import csv\\nwith open(\'data.csv\') as f:',
        ),
        (
            # seen: people.json read with read_file, then used as a variable in run_python
            "import json\nprint(max(people, key=lambda p: p['born']))",
            "NameError: name 'people' is not defined",
            "'people' is not defined in this code. Every run_python call starts afresh",
        ),
    ],
    ids=[
        "header-as-number",
        "row-indexed-by-name",
        "too-few-names",
        "workspace-path-as-root",
        "missing-key",
        "script-on-one-line",
        "script-on-one-line-without-semicolons",
        "name-from-an-earlier-call",
    ],
)
async def test_the_csv_mistakes_small_models_repeat_are_explained(
    tmp_path: Path, code: str, error: str, advice: str
) -> None:
    (tmp_path / "sales.csv").write_text("region,product,amount\nnorth,pen,120\n")
    shell = Shell(tmp_path, python=True, background=False)
    out = await shell.run_python(code)
    assert error in out and advice in out


async def test_workspace_paths_written_the_file_tools_way_run_inside_the_workspace(
    tmp_path: Path,
) -> None:
    """As measured on the 1.5B model: read_file showed /scores.csv, the code opened
    '/scores.csv' (the machine's root), the hint did not help, and the model wrote a new
    scores.csv over the data."""
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,120\n")
    shell = Shell(tmp_path, python=True, background=False)
    out = await shell.run_python(
        "print(open('/sales.csv').read().splitlines()[1])\nopen('/out.txt', 'w').write('x')"
    )
    assert out.startswith("exit code 0\nnorth,120") and "named /sales.csv, /out.txt" in out
    assert (tmp_path / "out.txt").read_text() == "x"
    out = await shell.run_python("import os\nprint(os.path.exists('/etc'))")
    assert "True" in out and "the file tools do" not in out  # a real absolute path stays


async def test_python_run_in_the_workspace_leaves_no_bytecode(tmp_path: Path) -> None:
    """A module edited within the second a test run compiled it, to the same size, ran as it
    was (its stale .pyc); and __pycache__ folders littered the workspace."""
    shell = Shell(tmp_path)
    (tmp_path / "m.py").write_text("X = 'a_b'\n")
    assert "a_b" in await shell.execute("python3 -c 'import m; print(m.X)'")
    (tmp_path / "m.py").write_text("X = 'a-b'\n")  # (same size, same second)
    assert "a-b" in await shell.execute("python3 -c 'import m; print(m.X)'")
    assert not (tmp_path / "__pycache__").exists()


async def test_a_failed_assert_equal_in_a_test_run_is_traced_line_by_line(tmp_path: Path) -> None:
    """As measured on the deep agent (fix-mean): told "mean([2, 4, 6]) gives 3.33; the test
    expects 4", the 1.5B model edited the return line; the trace shows the loop's first value
    is 4, so 2 was skipped. Only the workspace's code is traced, not the test's; a run that
    passes, or fails otherwise, gets no trace."""
    (tmp_path / "stats.py").write_text(
        "def mean(values):\n    total = 0\n    for value in values[1:]:\n        total += value\n"
        "    return total / len(values)\n"
    )
    (tmp_path / "test_stats.py").write_text(
        "import unittest\nfrom stats import mean\n\n\nclass T(unittest.TestCase):\n"
        "    def test_mean(self):\n        self.assertEqual(mean([2, 4, 6]), 4)\n"
    )
    shell = Shell(tmp_path, python=True, background=False)
    ran = await shell.execute("python3 -m unittest test_stats")
    assert "AssertionError: 3.3333333333333335 != 4" in ran
    trace = ran.split("[trace] ", 1)[1]
    assert trace.startswith("What mean([2, 4, 6]) did, line by line, in the code under test:\n")
    steps = trace.splitlines()[1:7]
    assert steps == [
        "call mean(values = [2, 4, 6])  [stats.py]",
        "  line 2: total = 0    -> total = 0",
        "  line 3: for value in values[1:]:    -> value = 4",
        "  line 4: total += value    -> total = 4",
        "  line 3: for value in values[1:]:    -> value = 6",
        "  line 4: total += value    -> total = 10",
    ]
    assert "  line 5: return total / len(values)    -> returns 3.3333333333333335" in trace
    assert "test_stats.py" not in trace
    code = (
        "import subprocess, sys\nr = subprocess.run([sys.executable, '-m', 'unittest', "
        "'test_stats'], capture_output=True, text=True)\nprint(r.stderr)"
    )
    assert "-> value = 4" in await shell.run_python(code)
    (tmp_path / "stats.py").write_text("def mean(values):\n    return sum(values) / len(values)\n")
    assert "[trace]" not in await shell.execute("python3 -m unittest test_stats")
    (tmp_path / "stats.py").write_text("def mean(values):\n    raise ValueError('no')\n")
    assert "[trace]" not in await shell.execute("python3 -m unittest test_stats")
