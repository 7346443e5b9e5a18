"""Project context (``agentica.deep.project``): ``.agentica/config.toml``, ``AGENTS.md`` /
``CLAUDE.md``, the skills folder, and ``IgnoringBackend`` checked against real ``git
check-ignore`` on the same tree and against the file-backend conformance suite."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sys
from pathlib import Path

import pytest

from agentica.deep import IgnoringBackend, Project, ProjectSettings, load_project
from agentica.deep.backends import FilesystemBackend
from agentica.deep.project import ProjectMCPServer, parse_ignore, read_instructions
from agentica.errors import UsageError
from agentica.testing.conformance import (
    FILE_BACKEND_CHECKS,
    FileBackendCase,
    FileBackendCheck,
    NotApplicable,
)
from agentica.tools.files import BackendError
from tests.test_file_backend_conformance import RealFolder

# ------------------------------------------------------------------------------ settings


def write_config(root: Path, text: str) -> Path:
    path = root / ".agentica" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_folder_without_configuration_has_the_defaults(tmp_path: Path) -> None:
    project = load_project(tmp_path)
    assert project == Project(root=tmp_path.resolve())
    assert project.settings == ProjectSettings()
    assert project.settings.approval is None and project.settings.sandbox is None
    assert project.settings.kernel is False
    assert project.instructions is None and project.skills_dir is None
    assert project.config_file is None and project.mcp_servers == ()


def test_every_setting_is_read(tmp_path: Path) -> None:
    path = write_config(
        tmp_path,
        """
[agent]
model = "deepseek:deepseek-chat"
base_url = "http://127.0.0.1:8080/v1"
temperature = 0
max_turns = 60
approval = "auto-edit"
sandbox = "bwrap"
instructions = "Run make test before you finish."
kernel = true

[mcp.servers.files]
command = "npx -y @modelcontextprotocol/server-filesystem 'my dir'"
env = { LOG = "debug" }

[mcp.servers.git]
command = ["uvx", "mcp-server-git"]
args = ["--repository", "."]

[mcp.servers.remote]
url = "https://mcp.example.com/mcp"
""",
    )
    project = load_project(tmp_path)
    assert project.config_file == path.resolve()
    assert project.settings == ProjectSettings(
        model="deepseek:deepseek-chat",
        base_url="http://127.0.0.1:8080/v1",
        temperature=0.0,
        max_turns=60,
        approval="auto-edit",
        sandbox="bwrap",
        instructions="Run make test before you finish.",
        kernel=True,
        mcp_servers=(
            ProjectMCPServer(
                name="files",
                command=("npx", "-y", "@modelcontextprotocol/server-filesystem", "my dir"),
                env={"LOG": "debug"},
            ),
            ProjectMCPServer(name="git", command=("uvx", "mcp-server-git", "--repository", ".")),
            ProjectMCPServer(name="remote", url="https://mcp.example.com/mcp"),
        ),
    )
    assert isinstance(project.settings.temperature, float)
    assert project.mcp_servers == project.settings.mcp_servers


@pytest.mark.parametrize(
    ("text", "key", "where"),
    [
        ('[agent]\nmodle = "x"\n', "'modle'", "[agent]"),
        ('[agnet]\nmodel = "x"\n', "'agnet'", "the file"),
        ("[mcp]\nserver = {}\n", "'server'", "[mcp]"),
        ('[mcp.servers.a]\ncommand = "x"\ncwd = "."\n', "'cwd'", "[mcp.servers.a]"),
    ],
)
def test_an_unknown_key_names_the_file_the_key_and_the_known_keys(
    tmp_path: Path, text: str, key: str, where: str
) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_project(tmp_path)
    message = str(caught.value)
    assert str(path.resolve()) in message
    assert f"unknown key {key} in {where}" in message
    assert "known keys:" in message
    if where == "[agent]":
        assert (
            "known keys: approval, base_url, instructions, kernel, max_turns, model, sandbox, "
            "temperature" in message
        )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('temperature = "hot"', "agent.temperature must be a number, not a string ('hot')"),
        ("temperature = true", "agent.temperature must be a number, not a boolean (true)"),
        ("temperature = 5", "agent.temperature must be between 0 and 2"),
        ("max_turns = 1.5", "agent.max_turns must be an integer, not a number (1.5)"),
        ("max_turns = 0", "agent.max_turns must be at least 1"),
        ("model = 3", "agent.model must be a string, not an integer (3)"),
        ('model = " "', "agent.model is empty"),
        ('approval = "yolo"', "agent.approval must be one of 'read-only', 'ask', 'auto-edit'"),
        ('sandbox = "docker"', "agent.sandbox must be one of 'none', 'bwrap', 'auto'"),
        ('kernel = "yes"', "agent.kernel must be true or false, not a string ('yes')"),
        ('base_url = "localhost:8080"', "agent.base_url must be an http:// or https:// address"),
        ("instructions = ['a']", "agent.instructions must be a string, not a list"),
    ],
)
def test_a_wrong_type_or_value_names_the_file_and_the_key(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = write_config(tmp_path, f"[agent]\n{line}\n")
    with pytest.raises(UsageError) as caught:
        load_project(tmp_path)
    assert str(caught.value).startswith(f"{path.resolve()}: ")
    assert expected in str(caught.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("agent = 3\n", "[agent] must be a table, not an integer (3)"),
        ("[mcp.servers.a]\n", "[mcp.servers.a] needs either command"),
        ('[mcp.servers.a]\ncommand = "x"\nurl = "http://h"\n', "needs either command"),
        ("[mcp.servers.a]\ncommand = []\n", "[mcp.servers.a] command is empty"),
        ("[mcp.servers.a]\ncommand = [1]\n", "command must be a list of strings"),
        ('[mcp.servers.a]\ncommand = "x \'y"\n', "command is not a command line"),
        ('[mcp.servers.a]\nurl = "ftp://h"\n', "url must be an http:// or https:// address"),
        ('[mcp.servers.a]\nurl = "http://h"\nargs = ["x"]\n', "args go with command"),
        ('[mcp.servers.a]\ncommand = "x"\nenv = { A = 1 }\n', "env.A must be a string"),
        ("[agent\n", "not valid TOML"),
    ],
)
def test_malformed_configurations_are_usage_errors(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = write_config(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        load_project(tmp_path)
    assert str(path.resolve()) in str(caught.value)
    assert expected in str(caught.value)


def test_a_configuration_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    path = write_config(tmp_path, "")
    path.write_bytes(b'[agent]\nmodel = "\xff"\n')
    with pytest.raises(UsageError, match="not UTF-8"):
        load_project(tmp_path)


def test_the_root_must_be_a_folder(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a folder"):
        load_project(tmp_path / "missing")


# ------------------------------------------------------------------------------ instructions


def test_agents_md_alone_and_with_claude_md_each_under_its_name(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("# Rules\n\nUse tabs.\n")
    assert load_project(tmp_path).instructions == "## AGENTS.md\n\n# Rules\n\nUse tabs."
    (tmp_path / "CLAUDE.md").write_text("Never push.\n")
    assert load_project(tmp_path).instructions == (
        "## AGENTS.md\n\n# Rules\n\nUse tabs.\n\n## CLAUDE.md\n\nNever push."
    )
    (tmp_path / "AGENTS.md").unlink()
    assert load_project(tmp_path).instructions == "## CLAUDE.md\n\nNever push."


@pytest.mark.parametrize("kind", ["symlink", "same text", "import"])
def test_claude_md_that_repeats_agents_md_is_left_out(tmp_path: Path, kind: str) -> None:
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    claude = tmp_path / "CLAUDE.md"
    if kind == "symlink":
        claude.symlink_to("AGENTS.md")
    else:
        claude.write_text("Use tabs.\n" if kind == "same text" else "@AGENTS.md\n")
    assert load_project(tmp_path).instructions == "## AGENTS.md\n\nUse tabs."


def test_instructions_are_cut_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("a" * 15_000)
    (tmp_path / "CLAUDE.md").write_text("b" * 15_000)
    text = load_project(tmp_path).instructions
    assert text is not None
    body, note = text.split("\n\n[... ", 1)
    assert len(body) == 20_000
    assert note == "cut at 20,000 characters: read AGENTS.md and CLAUDE.md for the rest]"
    small = read_instructions(tmp_path, limit=100)
    assert small is not None and small.startswith("## AGENTS.md\n\naaa")
    assert load_project(tmp_path, max_instruction_chars=100).instructions == small
    (tmp_path / "CLAUDE.md").unlink()
    (tmp_path / "AGENTS.md").write_text("")
    assert load_project(tmp_path).instructions is None  # an empty file says nothing


def test_the_skills_folder_is_found_when_it_exists(tmp_path: Path) -> None:
    assert load_project(tmp_path).skills_dir is None
    (tmp_path / ".agentica").mkdir()
    (tmp_path / ".agentica" / "skills").write_text("not a folder")
    assert load_project(tmp_path).skills_dir is None
    (tmp_path / ".agentica" / "skills").unlink()
    (tmp_path / ".agentica" / "skills").mkdir()
    project = load_project(tmp_path)
    assert project.skills_dir == tmp_path.resolve() / ".agentica" / "skills"


# ------------------------------------------------------------------------------ .gitignore

ROOT_IGNORE = """\
# dependencies
node_modules/
*.log
!keep.log
/build
docs/**/*.tmp
\\#hash.txt
*.py[co]
!important/
secret[0-9].txt
[[:upper:]]*.bak
out/
!out/readme.md
trailing.txt   \n\
escaped\\ \n\
a**b.dat
**/cache
logs/**
!logs/keep/
[!a-c]z.dat
q?.dat
x[]]y.dat
bad[.dat
src/**/gen/
"""

SUB_IGNORE = """\
*.txt
!notes.txt
/only-here.md
deep/
!*.log
"""

FILES = [
    "a.py", "a.pyc", "b.pyo", "app.log", "keep.log", "debug/keep.log", "debug/x.log",
    "node_modules/pkg/index.js", "src/node_modules/x.js", "src/main.py", "build/out.js",
    "src/build/x.js", "build.md", "docs/a/b/c.tmp", "docs/c.tmp", "docs/readme.md", "#hash.txt",
    "important/x.log", "important/y.md", "secret1.txt", "secretA.txt", "README.bak", "readme.bak",
    "out/readme.md", "out/other.md", "trailing.txt", "escaped ", "axxb.dat", "ab.dat",
    "x/cache/y.txt", "cache/z.js", "logs/a.txt", "logs/keep/x.txt", "dz.dat", "az.dat",
    "q1.dat", "q12.dat", "x]y.dat", "bad[.dat", "src/a/gen/g.py", "src/gen/h.py", "gen/i.py",
    "sub/a.txt", "sub/notes.txt", "sub/only-here.md", "sub/x/only-here.md", "sub/deep/f.py",
    "sub/x/deep/g.py", "sub/app.log", "sub/b.md", "deep/h.py", "x.secret", "sub/y.secret",
    "ünï/cödé.log", "ünï/ok.md",
]  # fmt: skip


def _git_env(home: Path) -> dict[str, str]:
    """git without the machine's or the user's configuration (no global excludes file)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
    }


async def git(cwd: Path, *args: str, ok: tuple[int, ...] = (0,), stdin: bytes = b"") -> bytes:
    process = await asyncio.create_subprocess_exec(
        "git", *args, cwd=cwd, env=_git_env(cwd.parent), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await process.communicate(stdin)
    assert process.returncode in ok, err.decode()
    return out


def make_tree(repo: Path) -> None:
    for name in FILES:
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"needle in {name}\n")
    (repo / ".gitignore").write_text(ROOT_IGNORE)
    (repo / "sub" / ".gitignore").write_text(SUB_IGNORE)


@pytest.fixture
async def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    await git(root, "init", "-q")
    with (root / ".git" / "info" / "exclude").open("a") as file:
        file.write("*.secret\n")
    make_tree(root)
    return root


def tree(root: Path) -> tuple[set[str], set[str]]:
    """The files and the folders under ``root`` (relative, ``.git`` left out)."""
    files: set[str] = set()
    folders: set[str] = set()
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel = Path(folder).relative_to(root).as_posix()
        prefix = "" if rel == "." else rel + "/"
        folders |= {prefix + d for d in dirs}
        files |= {prefix + n for n in names}
    return files, folders


async def git_visible(repo: Path, paths: set[str], *, some: bool = True) -> set[str]:
    """The ``paths`` git shows: neither they nor a folder on their way is ignored, by ``git
    check-ignore`` (not by this module's idea of it)."""
    names = b"".join(p.encode() + b"\0" for p in sorted(paths))
    out = await git(repo, "check-ignore", "--no-index", "--stdin", "-z", ok=(0, 1), stdin=names)
    ignored = {p.decode() for p in out.split(b"\0") if p}
    assert ignored or not some, "git ignores nothing: the tree is wrong"

    def shown(path: str) -> bool:
        parts = path.split("/")
        return not any("/".join(parts[:i]) in ignored for i in range(1, len(parts) + 1))

    return {p for p in paths if shown(p)}


def backend(root: Path) -> IgnoringBackend:
    return IgnoringBackend(FilesystemBackend(root), root)


async def test_ls_glob_and_grep_hide_what_git_ignores(repo: Path) -> None:
    files, folders = tree(repo)
    visible = await git_visible(repo, files | folders)
    visible_files = {"/" + f for f in files & visible}
    assert "/keep.log" in visible_files and "/app.log" not in visible_files  # sanity
    assert "/sub/app.log" in visible_files and "/important/x.log" not in visible_files
    assert "/out/readme.md" not in visible_files and "/escaped " not in visible_files
    fs = backend(repo)

    found = await fs.glob("**")
    assert {f.path for f in found} == visible_files
    assert [f.path for f in found] == sorted((f.path for f in found), key=lambda p: p.split("/"))
    with_needle = visible_files - {"/.gitignore", "/sub/.gitignore"}
    assert {g.path for g in await fs.grep("needle")} == with_needle
    assert {g.path for g in await fs.grep("needle", glob="*.md")} == {
        p for p in visible_files if p.endswith(".md")
    }
    for folder in ["", *sorted(folders & visible)]:
        listed = await fs.ls("/" + folder)
        prefix = folder + "/" if folder else ""
        expected = {
            "/" + p for p in visible if p.startswith(prefix) and "/" not in p[len(prefix) :]
        }
        assert {e.path for e in listed} == expected, folder
    assert "/.git" not in {e.path for e in await fs.ls("/")}
    assert ".git" in {e.name for e in await FilesystemBackend(repo).ls("/")}


async def test_git_check_ignore_agrees_below_a_subfolder_of_the_repository(repo: Path) -> None:
    """The backend's root is a folder inside the repository: the ignore files above it count,
    with the paths from the repository's top."""
    files, folders = tree(repo)
    visible = await git_visible(repo, files | folders)
    expected = {"/" + p.removeprefix("sub/") for p in files & visible if p.startswith("sub/")}
    fs = backend(repo / "sub")
    assert {f.path for f in await fs.glob("**")} == expected
    assert "/app.log" in expected and "/y.secret" not in expected  # re-included; info/exclude


NAMES = ["a", "b", "ab", "a.b", "x", "foo", "[x]", "*", "a b", "é", "A", "-"]
ATOMS = [
    "a", "b", "x", "foo", "é", "A", ".", " ", "*", "**", "?", "/", "**/", "/**", "[ab]", "[!a]",
    "[^b]", "[a-c]", "[]a]", "[[:alpha:]]", "[:digit:]", "[", "]", "[a-", "\\", "\\*", "\\ ",
    "!", "#",
]  # fmt: skip


def random_pattern(rng: random.Random) -> str:
    text = "".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 4)))
    if rng.random() < 0.3:
        text = "!" + text
    if rng.random() < 0.3:
        text += "/"
    if rng.random() < 0.2:
        text = rng.choice(NAMES) + "/" + text
    return text


def random_tree(root: Path, rng: random.Random) -> None:
    folders: set[str] = set()
    for _ in range(30):
        parts = [rng.choice(NAMES) for _ in range(rng.randint(1, 4))]
        here = root
        for i, part in enumerate(parts):
            here = here / part
            if here.is_file():
                break
            if i == len(parts) - 1:
                if not here.exists():
                    here.write_text("needle\n")
            else:
                here.mkdir(exist_ok=True)
                folders.add(here.relative_to(root).as_posix())
    lines = [random_pattern(rng) for _ in range(8)]
    (root / ".gitignore").write_text("\n".join(lines) + "\n")
    if folders:
        sub = root / rng.choice(sorted(folders))
        (sub / ".gitignore").write_text("\n".join(random_pattern(rng) for _ in range(4)) + "\n")


@pytest.mark.parametrize("seed", range(12))
async def test_random_patterns_agree_with_git(tmp_path: Path, seed: int) -> None:
    """Random trees and ignore files (wildcards, classes, escapes, ``**``, ``!``, ``dir/``,
    nested files), each compared with ``git check-ignore``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "repo"
    root.mkdir()
    await git(root, "init", "-q")
    random_tree(root, random.Random(seed))
    files, folders = tree(root)
    visible = await git_visible(root, files | folders, some=False)
    assert {f.path for f in await backend(root).glob("**")} == {"/" + p for p in files & visible}


async def test_ignored_paths_can_still_be_named(repo: Path) -> None:
    fs = backend(repo)
    assert await fs.read("/app.log") == "needle in app.log\n"
    assert await fs.stat("/node_modules") is not None
    assert [e.path for e in await fs.ls("/node_modules")] == ["/node_modules/pkg"]
    assert [e.path for e in await fs.ls("/app.log")] == ["/app.log"]
    assert [g.path for g in await fs.grep("needle", "/build")] == ["/build/out.js"]
    assert [g.path for g in await fs.grep("needle", "/app.log")] == ["/app.log"]
    assert [f.path for f in await fs.glob("*", "/node_modules/pkg")] == [
        "/node_modules/pkg/index.js"
    ]
    # inside a named folder the rules still apply: *.log is hidden in /debug's listing
    assert [e.path for e in await fs.ls("/debug")] == ["/debug/keep.log"]
    written = await fs.write("/build/new.js", "needle\n")
    assert written.path == "/build/new.js"
    assert "/build/new.js" not in {f.path for f in await fs.glob("**/*.js")}


async def test_an_edited_ignore_file_is_read_again(repo: Path) -> None:
    fs = backend(repo)
    assert "/sub/b.md" in {e.path for e in await fs.ls("/sub")}
    await fs.write("/sub/.gitignore", SUB_IGNORE + "b.md\n")
    assert "/sub/b.md" not in {e.path for e in await fs.ls("/sub")}
    (repo / "sub" / ".gitignore").unlink()
    listed = {e.path for e in await fs.ls("/sub")}
    assert {"/sub/b.md", "/sub/a.txt", "/sub/deep"} <= listed


async def test_limits_count_what_is_shown(repo: Path) -> None:
    """More ignored than shown results: the inner backend is asked again for more."""
    for i in range(30):
        (repo / "node_modules" / f"m{i:02}.js").write_text("needle\n")
    (repo / "src" / "z.js").write_text("needle\n")
    fs = backend(repo)
    assert [f.path for f in await fs.glob("**/*.js", limit=2)] == ["/src/build/x.js", "/src/z.js"]
    shown = await fs.grep("needle", limit=3)
    assert len(shown) == 3 and not any("node_modules" in g.path for g in shown)
    with pytest.raises(BackendError, match="limit must be a positive integer"):
        await fs.glob("**", limit=0)
    with pytest.raises(BackendError, match="limit must be a positive integer"):
        await fs.grep("x", limit=0)


async def test_ignore_files_are_not_read_through_links_out_of_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (tmp_path / "outside").write_text("*\n")
    (root / "sub" / ".gitignore").symlink_to(tmp_path / "outside")
    (root / "sub" / "a.py").write_text("x\n")
    (root / ".gitignore").write_text("*.log\n")
    (root / "b.log").write_text("x\n")
    fs = backend(root)  # not a repository: .gitignore files count anyway
    assert [f.path for f in await fs.glob("**")] == ["/.gitignore", "/sub/a.py"]


def test_ignore_file_syntax() -> None:
    rules = parse_ignore(b"\xef\xbb\xbf# c\n\n  \n!\n/\nbad\\\nx[\n[[:nope:]]\r\n*.py\r\n")
    assert len(rules) == 1 and rules[0].regex.fullmatch(b"a.py")
    assert repr(backend(Path("/nowhere"))).startswith("IgnoringBackend(FilesystemBackend(")


# ------------------------------------------------------------------------------ conformance


async def ignoring_case(tmp: Path) -> FileBackendCase:
    folder = RealFolder(tmp / "root", tmp / "outside")
    inner = FilesystemBackend(folder.root)
    return FileBackendCase(
        IgnoringBackend(inner, folder.root),
        inner.max_write_bytes,
        max_read_bytes=inner.max_read_bytes,
        put_bytes=folder.put_bytes,
        symlinks=folder.symlinks(),
    )


@pytest.mark.parametrize("check", FILE_BACKEND_CHECKS, ids=lambda check: check.__name__)
async def test_ignoring_backend_conforms(tmp_path: Path, check: FileBackendCheck) -> None:
    case = await ignoring_case(tmp_path)
    if sys.platform != "win32":
        assert case.symlinks is not None
    try:
        await check(case)
    except NotApplicable as exc:
        pytest.skip(str(exc))
