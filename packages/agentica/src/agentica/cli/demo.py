"""``agentica demo``: the main job. A ``DeepAgent`` solves a small real task on the embedded model.

The workspace has a CSV of sales and a report template with a ``TODO`` line. The agent (file
tools, shell, todos, subagents, repetition guard, answer and number checks) is told the steps
and calls (``DEEP_TASK``); ``--as-user`` asks as a user would instead (``USER_TASK``), which the
1.5B model passes only sometimes. ``--simple`` gives the same data to a plain
``Agent`` with four tools (list/read/write files, run Python, a calculator) that writes
``report.md`` itself. The run streams to the terminal; at the end the demo checks the
report against the true totals and prints what the agent did, its plan, the tokens and the time.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import operator
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from agentica.agent import Agent
from agentica.deep import AnswerCheck, DeepAgent, Todos
from agentica.errors import AgenticaError, ToolError
from agentica.limits import RunLimits
from agentica.messages import RunUsage
from agentica.models.base import Model, ModelSettings
from agentica.models.registry import resolve_model
from agentica.run.result import RunResponse
from agentica.tools.function import Function, tool
from agentica.tools.toolkit import Tool

__all__ = [
    "DEEP_TASK",
    "DEMO_TASK",
    "USER_TASK",
    "WorkspaceTools",
    "add_parser",
    "check_report",
    "demo_agent",
    "prepare_workspace",
    "run",
    "run_demo",
]

SALES = """region,product,amount
north,apples,120
south,pears,80
north,pears,45
east,apples,60
south,apples,100
east,pears,30
"""
TOTALS = {"north": 165, "south": 180, "east": 90}
REPORT_TEMPLATE = "# Sales by region\n\n| region | total |\n|---|---|\nTODO\n"
DEEP_TASK = (
    "Fill in report.md with the total amount per region of sales.csv (columns region, product, "
    'amount). First plan with write_todos({"todos": ["compute totals", "edit report", '
    '"check report"]}), then do the steps in order: 1. compute totals: call the task tool with '
    "the description 'Compute the total amount per region in sales.csv (columns region, "
    "product, amount) with run_python and print the totals.' 2. edit report: in report.md, "
    "replace the line TODO with one table row per region (region and total) using edit_file. "
    "3. check report: read report.md."
)
# the same task as a user puts it (``--as-user``); the 1.5B model passes it only sometimes
USER_TASK = "Fill in report.md with the total amount per region from sales.csv."
DEMO_TASK = (
    "The file sales.csv in the workspace has columns region, product, amount. Compute the total "
    "amount for each region by running Python code, then write the totals to report.md as a "
    "Markdown table with columns region and total."
)
INSTRUCTIONS = (
    "You are a careful assistant working in a small workspace. Use the tools to do the "
    "work: run_python runs Python code in the workspace (standard library only; print what you "
    "need), write_file saves files. Do the steps one at a time and finish with a short summary "
    "of the result."
)


def _inside(root: Path, path: str) -> Path:
    target = (root / path).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"{path!r} is outside the workspace; use a relative path like 'notes.txt'")
    return target


class WorkspaceTools(Tool):
    """Files and Python inside one directory; paths that leave it are refused."""

    def __init__(self, root: Path, *, python_timeout: float = 30.0) -> None:
        self.root = root.resolve()
        self.python_timeout = python_timeout
        super().__init__("workspace")

    @tool
    def list_files(self) -> list[str]:
        """List the files in the workspace."""
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())

    @tool
    def read_file(self, path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: the file's path relative to the workspace, e.g. "sales.csv".
        """
        target = _inside(self.root, path)
        if not target.is_file():
            raise ToolError(f"no file {path!r}; call list_files to see what exists")
        return target.read_text(errors="replace")[:20_000]

    @tool
    def write_file(self, path: str, content: str) -> str:
        """Write a text file in the workspace (replacing it if it exists).

        Args:
            path: the file's path relative to the workspace, e.g. "report.md".
            content: the complete text to write.
        """
        target = _inside(self.root, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content)} characters to {path}"

    @tool(timeout=60)
    async def run_python(self, code: str) -> str:
        """Run Python code in the workspace directory and return what it printed.

        Only the standard library is available (csv, json, math, statistics); pandas and numpy
        are not installed.

        Args:
            code: Python source code (not a shell command); use print() to show results.
        """
        stripped = code.strip()
        if stripped.startswith(("python ", "python3 ", "$ ", "pip ")):
            raise ToolError(
                "run_python takes Python source code, not a shell command. Pass the code itself, "
                "e.g. import csv; print(open('sales.csv').read())"
            )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-E", "-s", "-c", code, cwd=self.root,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(process.communicate(), self.python_timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise ToolError(
                f"the code ran longer than {self.python_timeout:g} s and was stopped"
            ) from None
        text = out.decode(errors="replace")[-8000:]
        if process.returncode:
            hint = "Fix the error and run corrected code (not the same code again)."
            missing = re.search(r"No module named '([\w.]+)'", text)
            if missing and not (self.root / f"{missing.group(1).split('.')[0]}.py").exists():
                hint = (
                    f"The module {missing.group(1)!r} is not installed here: only the Python "
                    "standard library is available. Rewrite the code with the csv module."
                )
            return f"exit code {process.returncode}\n{text}\n{hint}"
        return text or "(the code printed nothing; use print() to show results)"


_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod,
    ast.FloorDiv: operator.floordiv, ast.USub: operator.neg, ast.UAdd: operator.pos,
}  # fmt: skip


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ToolError("exponent too large")
        return float(_OPERATORS[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return float(_OPERATORS[type(node.op)](_evaluate(node.operand)))
    raise ToolError("only numbers and + - * / // % ** and parentheses are allowed")


@tool
def calculator(expression: str) -> float | int:
    """Evaluate an arithmetic expression such as "(120 + 45) * 2".

    Args:
        expression: numbers with + - * / // % ** and parentheses.
    """
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError:
        raise ToolError(f"{expression!r} is not an arithmetic expression") from None
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def check_report(root: Path) -> str | None:
    """``None`` if report.md has the right total for every region (and no other total for
    one) and no TODO line left, else what is wrong."""
    report = root / "report.md"
    if not report.is_file():
        return "report.md was not written"
    text = report.read_text().lower()
    wrong = []
    for region, total in TOTALS.items():  # every row of a region must show its total
        shown = re.findall(rf"\b{region}\W+(\d+(?:\.\d+)?)", text)
        if not shown or any(float(n) != total for n in shown):
            wrong.append(region)
    todo = re.search(r"(?m)^\s*todo\s*$", text) is not None
    if not wrong and not todo:
        return None
    if not wrong:
        return "report.md still has the TODO line of the template"
    return f"report.md does not show the right total for {', '.join(wrong)}"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser(
        "demo", help="run a deep agent on a small real task (embedded model)"
    )
    demo.add_argument(
        "--model", help="a model string (default: $AGENTICA_MODEL or the embedded model)"
    )
    demo.add_argument("--workspace", help="directory for the demo files (default: a new temp dir)")
    demo.add_argument(
        "--as-user",
        action="store_true",
        help="ask as a user would, naming no tool (the 1.5B model passes it only sometimes)",
    )
    demo.add_argument(
        "--simple",
        action="store_true",
        help="a plain Agent with four tools writes the report (no todos, no subagent; faster)",
    )


def prepare_workspace(directory: str | None, *, deep: bool = True) -> Path:
    """The demo workspace with a fresh sales.csv, and the report template when ``deep``."""
    root = Path(directory or tempfile.mkdtemp(prefix="agentica-demo-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    (root / "sales.csv").write_text(SALES)
    (root / "report.md").unlink(missing_ok=True)
    if deep:
        (root / "report.md").write_text(REPORT_TEMPLATE)
    return root


def demo_agent(
    model: Model, root: Path, *, deep: bool = True, settings: ModelSettings | None = None
) -> Agent:
    """The demo's agent: a ``DeepAgent`` in ``root``, or the four-tool agent unless ``deep``.

    ``settings`` change the model settings (e.g. a temperature and seed, to sample runs).
    """
    if not deep:
        tools: list[Function | Tool] = [WorkspaceTools(root), calculator]
        return Agent(
            model=model,
            tools=tools,
            instructions=INSTRUCTIONS,
            model_settings=ModelSettings(max_tokens=768).merged(settings),
            limits=RunLimits(max_turns=12, max_wall_time=600),
            capabilities=[AnswerCheck()],
        )
    return DeepAgent(
        model=model,
        workspace=root,
        # one call per step: a small model that sends several calls at once writes results
        # it has not seen yet
        model_settings=ModelSettings(max_tokens=768, parallel_tool_calls=False).merged(settings),
        # the limits bound the whole tree: the subagent's model calls count too
        limits=RunLimits(max_turns=40, max_wall_time=600),
    )


@dataclass(slots=True)
class DemoResult:
    """What the demo did: every run of the conversation, the final check and the time."""

    responses: list[RunResponse]
    usage: RunUsage
    problem: str | None
    seconds: float
    todos: list[dict[str, Any]]


async def run_demo(
    model: Model,
    root: Path,
    console: Console,
    *,
    follow_ups: int = 2,
    deep: bool = True,
    settings: ModelSettings | None = None,
    task: str | None = None,
    transcript: Path | None = None,
) -> DemoResult | None:
    """Run the demo task with ``model`` in ``root``, streaming to ``console``; with
    ``transcript``, every message of the conversation is written there as JSON at the end.

    After the agent answers, the report is checked; if it is wrong the agent is told what the
    check found (which regions are wrong, not their totals) and continues the same
    conversation (at most ``follow_ups`` times), as a user would. ``None`` when a run failed
    with an error.
    """
    from agentica.cli.render import EventPrinter

    console.print(f"[bold]agentica demo[/] · model [cyan]{model.id}[/] · workspace {root}")
    start = getattr(model, "start", None)
    if start is not None:
        begin = time.perf_counter()
        with console.status(f"loading {model.id} ..."):
            await start()
        console.print(f"[dim]model loaded in {time.perf_counter() - begin:.1f} s[/]")
    task = task or (DEEP_TASK if deep else DEMO_TASK)
    console.print(f"[bold]task:[/] {task}\n")
    agent = demo_agent(model, root, deep=deep, settings=settings)
    printer = EventPrinter(console)
    responses: list[RunResponse] = []
    began = time.perf_counter()
    prompt = task
    problem: str | None = None
    try:
        for attempt in range(follow_ups + 1):
            async with agent.run_stream(prompt) as stream:
                async for event in stream:
                    printer(event)
            responses.append(stream.response)
            problem = await asyncio.to_thread(check_report, root)
            if problem is None or attempt == follow_ups:
                break
            console.print(f"[yellow]check: {problem}; telling the agent[/]")
            prompt = f"I checked: {problem}. Please fix it."
    except AgenticaError as exc:
        console.print(f"[bold red]{type(exc).__name__}[/]: {exc}")
        return None
    finally:
        await model.aclose()
        if transcript is not None:
            await asyncio.to_thread(_write_transcript, transcript, agent)
    todos = agent.memory.state.get("todos")
    plan = [t for t in todos if isinstance(t, dict)] if isinstance(todos, list) else []
    return DemoResult(responses, agent.usage, problem, time.perf_counter() - began, plan)


def _write_transcript(path: Path, agent: Agent) -> None:
    """The conversation of ``agent`` (each message's role, text and calls) as JSON."""
    messages = [
        {
            "role": m.role,
            "text": m.content if isinstance(m.content, str) else str(m.content),
            "calls": [f"{c.name}({c.arguments})" for c in getattr(m, "tool_calls", ())],
        }
        for record in agent.memory.runs
        for m in record.messages
    ]
    path.write_text(json.dumps(messages, indent=1, ensure_ascii=False))


def run(args: argparse.Namespace) -> int:

    console = Console(highlight=False)
    root = prepare_workspace(args.workspace, deep=not args.simple)
    model = resolve_model(args.model)
    task = USER_TASK if getattr(args, "as_user", False) else None
    result = asyncio.run(run_demo(model, root, console, deep=not args.simple, task=task))
    if result is None:
        return 1
    console.print("\n[bold]what the agent did:[/]")
    for response in result.responses:
        for call in response.tool_calls:
            mark = "[green]✓[/]" if call.status == "success" else "[red]✗[/]"
            console.print(f"  {mark} {call.name}({call.call.arguments[:80]})")
    if result.todos:
        console.print(Text.assemble(("its plan: ", "bold"), Todos.render(result.todos)))
    if result.problem is None:
        console.print(f"[bold green]✓ report.md has the right totals[/] ({root / 'report.md'})")
    else:
        console.print(f"[bold red]✗ {result.problem}[/]")
    usage = result.usage
    console.print(
        f"[dim]{len(result.responses)} run(s) · {usage.requests} model calls · "
        f"{usage.tool_calls} tool calls · {usage.input_tokens} in / {usage.output_tokens} out "
        f"tokens · {result.seconds:.1f} s[/]"
    )
    return 0 if result.problem is None else 1
