"""Small file-and-code tasks on the embedded model: ``uv run python benchmarks/local_tasks.py``.

34 tasks of five kinds, phrased as a newcomer types them (``benchmarks/local_task_data.py``):
answer from a file, edit a file exactly, write and run a script, fix a bug so the shipped tests
pass, work across several files. Each runs in a fresh workspace and is checked afterwards by
looking at the files (and, for questions, the final answer); each checker fails on the untouched
workspace and passes on a reference solution (``tests/test_local_tasks.py``).

Variants (``--variants``; the default is the first four):
- ``deep``: ``DeepAgent(workspace=..., model=...)`` as ``agentica demo`` builds it (``demo_agent``:
  files, shell, todos, subagents, answer check; one call per step; its limits);
- ``plain``: a plain ``Agent`` with the demo's four tools (list/read/write files, run Python,
  calculator) on the default ``LocalModel`` (agentica renders the prompt and parses the calls);
- ``auto``, ``native``: the plain agent through ``OpenAILike(tool_mode="auto"|"native")`` against
  llama.cpp's own OpenAI endpoint of a second ``LocalModel`` (its jinja chat template, its
  server-side tool-call parser);
- ``check``: the plain agent with ``AnswerCheck`` (asked once to check its work), as ``agentica
  demo --simple`` runs it;
- ``grammar``: ``deep`` on a ``LocalModel(tool_grammar=True)`` (tool calls under a grammar).

Limits: plain, auto, native and check get at most 10 model calls and 180 s per task, as before.
``deep`` keeps ``demo_agent``'s 40 model calls and 600 s: they bound the whole tree (its subagents'
calls count too) and its todo bookkeeping costs calls the plain agent does not make, so the plain
limits would cut it off by construction; it is measured as a user gets it.

Options: ``--task``/``--kind`` select tasks; ``--repeats N`` runs each task N times with seed
``--seed + repeat`` (``ModelSettings(seed=...)``). Repeats are meant with ``--temperature`` > 0:
at the default temperature 0 every repeat is the same run. The report gives per variant and kind
the tasks solved with a 95% Wilson score interval, the mean seconds per run, the runs that ended
with an error (by type) and the tool calls refused as malformed ("Invalid arguments"/"Unknown
tool"; top-level calls only, not a deep agent's subagents'). The interval treats every run as an
independent trial; tasks differ in difficulty, so it is narrower than the truth across tasks.
``--verbose`` prints every tool call, ``--transcripts DIR`` writes one JSON file per run (calls,
conversation, answer, final files), ``--report DIR[=LABEL] ...`` runs nothing and puts saved runs
side by side (before/after), ``--write-docs`` replaces the ``tasks`` block of docs/benchmarks.md
(``--block NAME`` another one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica import Agent, ModelSettings, OpenAILike, RunLimits  # noqa: E402
from agentica.cli.demo import INSTRUCTIONS, WorkspaceTools, calculator, demo_agent  # noqa: E402
from agentica.deep import AnswerCheck  # noqa: E402
from agentica.evals import wilson  # noqa: E402
from agentica.messages import Message, UserMessage  # noqa: E402
from agentica.models.base import Model  # noqa: E402
from agentica.models.local import LocalModel  # noqa: E402
from benchmarks.local_task_data import KINDS, TASKS, Task  # noqa: E402

VARIANTS = ("deep", "plain", "auto", "native", "check", "grammar")
DEFAULT_VARIANTS = ["deep", "plain", "auto", "native"]
MALFORMED = ("Invalid arguments", "Unknown tool")
LIMITS = (
    "At most 10 model calls and 180 s per task (deep and grammar: 40 and 600 s, as `agentica "
    "demo`); solved with 95% Wilson intervals."
)


@dataclass(slots=True)
class Outcome:
    """One run of one task by one variant."""

    variant: str
    task: str
    kind: str
    repeat: int
    ok: bool
    seconds: float
    calls: int
    malformed: int
    error: str  # the error's type name ("" when the run ended with an answer)
    answer: str
    tool_calls: list[dict[str, str]]
    error_message: str = ""
    files: dict[str, str] = field(default_factory=dict)  # the workspace afterwards
    messages: list[dict[str, str]] = field(default_factory=list)  # the conversation, abridged
    tokens: int = 0  # output tokens of the whole run (subagents included)
    prompt_tokens: int = 0  # input tokens of every model call
    cached_tokens: int = 0  # of those, read from the server's prompt cache


def build_agent(variant: str, model: Model, root: Path, settings: ModelSettings) -> Agent:
    """The agent a variant runs in ``root`` (see the module docstring)."""
    if variant in ("deep", "grammar"):
        return demo_agent(model, root, deep=True, settings=settings)
    return Agent(
        model=model,
        tools=[WorkspaceTools(root), calculator],
        instructions=INSTRUCTIONS,
        model_settings=ModelSettings(max_tokens=768).merged(settings),
        limits=RunLimits(max_turns=10, max_wall_time=180),
        capabilities=[AnswerCheck()] if variant == "check" else [],
    )


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(errors="replace")[:4000]
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.stat().st_size < 100_000
    }


def _text(message: Message) -> str:
    return message.text if isinstance(message, UserMessage) else message.content or ""


async def run_task(
    variant: str, model: Model, task: Task, *, repeat: int, temperature: float, seed: int,
    verbose: bool = False,
) -> Outcome:  # fmt: skip
    """Run ``task`` once in a fresh workspace and check it."""
    root = Path(tempfile.mkdtemp(prefix=f"agentica-task-{task.name}-"))
    task.setup(root)
    settings = ModelSettings(temperature=temperature, seed=seed + repeat)
    agent = build_agent(variant, model, root, settings)
    answer = error = message = ""
    start = time.perf_counter()
    try:
        response = await agent.run(task.prompt)
        answer = response.content or ""
    except Exception as exc:  # an error ends the run; the workspace is still checked
        error, message = type(exc).__name__, str(exc)[:2000]
    seconds = time.perf_counter() - start
    calls = [
        {"name": c.name, "arguments": c.arguments, "status": c.status, "content": c.content[:2000]}
        for record in agent.memory.runs
        for c in record.tool_calls
    ]
    messages = [
        {"role": m.role, "text": _text(m)[:1500],
         "calls": " ".join(f"{c.name}({c.arguments[:2000]})" for c in getattr(m, "tool_calls", ()))}
        for record in agent.memory.runs
        for m in record.messages
    ]  # fmt: skip
    try:
        ok = await asyncio.to_thread(task.check, root, answer)
    except Exception as exc:  # a checker that crashes is a failed task
        ok, error = False, error or f"check {type(exc).__name__}"
    malformed = sum(c["status"] == "error" and c["content"].startswith(MALFORMED) for c in calls)
    outcome = Outcome(
        variant, task.name, task.kind, repeat, ok, seconds, agent.usage.tool_calls, malformed,
        error, answer, calls, message, _snapshot(root), messages, agent.usage.output_tokens,
        agent.usage.input_tokens, agent.usage.cache_read_tokens,
    )  # fmt: skip
    shutil.rmtree(root, ignore_errors=True)
    if verbose:
        for c in calls:
            print(
                f"  {c['status']:7} {c['name']}({c['arguments'][:300]}) -> {c['content'][:200]!r}"
            )
        print(f"  answer: {answer!r}")
    return outcome


def _rate(outcomes: list[Outcome], bold: bool = False) -> str:
    solved, n = sum(o.ok for o in outcomes), len(outcomes)
    if not n:
        return "not run"
    low, high = wilson(solved, n)
    count = f"**{solved}/{n}**" if bold else f"{solved}/{n}"
    return f"{count} ({low * 100:.0f}-{high * 100:.0f}%)"


def _errors(outcomes: list[Outcome]) -> str:
    kinds = Counter(o.error for o in outcomes if o.error)
    if not kinds:
        return "0"
    return f"{sum(kinds.values())}: " + ", ".join(f"{k} {n}" for k, n in kinds.most_common())


def _speed(outcomes: list[Outcome]) -> str:
    tokens, seconds = sum(o.tokens for o in outcomes), sum(o.seconds for o in outcomes)
    return f"{tokens / seconds:.1f}" if tokens and seconds else "not recorded"


def _uncached(outcomes: list[Outcome]) -> str:
    """Prompt tokens the model processed (not read from its cache) per run."""
    recorded = [o for o in outcomes if o.prompt_tokens]
    if not recorded:
        return "not recorded"
    fresh = sum(o.prompt_tokens - o.cached_tokens for o in recorded) / len(recorded)
    total = sum(o.prompt_tokens for o in recorded) / len(recorded)
    return f"{fresh:,.0f} of {total:,.0f}"


def _task_cell(runs: list[Outcome]) -> str:
    if not runs:
        return "not run"
    if len(runs) == 1:
        (o,) = runs
        return f"{'✓' if o.ok else '✗'} {o.seconds:.0f} s, {o.calls} calls {o.error}".strip()
    mean = sum(o.seconds for o in runs) / len(runs)
    return f"{sum(o.ok for o in runs)}/{len(runs)}, {mean:.0f} s"


def report(outcomes: list[Outcome], variants: list[str], header: str) -> str:
    """The Markdown report: per kind and overall, then per task, one column per variant."""
    runs = {v: [o for o in outcomes if o.variant == v] for v in variants}
    row = "| {} | " + " | ".join(["{}"] * len(variants)) + " |"
    lines = [header, "", row.format("kind", *variants), "|---|" + "---|" * len(variants)]
    for kind in KINDS:
        if any(o.kind == kind for o in outcomes):
            lines.append(row.format(kind, *(_rate([o for o in runs[v] if o.kind == kind])
                                             for v in variants)))  # fmt: skip
    lines.append(row.format("**all**", *(_rate(runs[v], bold=True) for v in variants)))
    mean = [f"{sum(o.seconds for o in runs[v]) / max(1, len(runs[v])):.0f} s" for v in variants]
    lines.append(row.format("mean time per run", *mean))
    lines.append(row.format("runs ended by an error", *(_errors(runs[v]) for v in variants)))
    malformed = [f"{sum(o.malformed for o in runs[v])} of {sum(len(o.tool_calls) for o in runs[v])}"
                 for v in variants]  # fmt: skip
    lines.append(row.format("malformed tool calls", *malformed))
    speed = [_speed(runs[v]) for v in variants]
    lines.append(row.format("output tokens per second of run time", *speed))
    uncached = [_uncached(runs[v]) for v in variants]
    lines.append(row.format("prompt tokens processed (not cached) per run", *uncached))
    lines += ["", "Kinds: " + "; ".join(f"{k}: {label}" for k, label in KINDS.items()) + ".", ""]
    lines += [row.format("task", *variants), "|---|" + "---|" * len(variants)]
    for task in TASKS:
        cells = [[o for o in runs[v] if o.task == task.name] for v in variants]
        if any(cells):
            lines.append(row.format(f"{task.name} ({task.kind})", *map(_task_cell, cells)))
    return "\n".join(lines)


async def start_models(variants: list[str], name: str) -> tuple[dict[str, Model], list[Model]]:
    """The model each variant runs on: one embedded model, and a second one served with
    llama.cpp's own template and tool-call parser for ``auto`` and ``native``; with the
    embedded models, which must stay referenced (a collected ``LocalModel`` stops its server)."""
    models: dict[str, Model] = {}
    local: list[Model] = []
    if {"deep", "plain", "check"} & set(variants):
        text = LocalModel(name)
        await text.start()
        models.update(deep=text, plain=text, check=text)
        local.append(text)
    if "grammar" in variants:
        constrained = LocalModel(name, tool_grammar=True)
        await constrained.start()
        models["grammar"] = constrained
        local.append(constrained)
    if {"auto", "native"} & set(variants):
        server = LocalModel(name, server_options={"use_jinja": True})
        url = await server.start()
        models["auto"] = OpenAILike(id=name, base_url=url + "/v1", tool_mode="auto")
        models["native"] = OpenAILike(id=name, base_url=url + "/v1", tool_mode="native")
        local.append(server)
    return models, local


def _write_transcript(directory: Path, outcome: Outcome, task: Task) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{outcome.variant}-{outcome.task}-{outcome.repeat}.json"
    path.write_text(json.dumps({"prompt": task.prompt, **asdict(outcome)}, indent=2))


def _write_docs(markdown: str, name: str = "tasks") -> None:
    """Replace the block ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->`` of benchmarks.md (or
    add it at the end)."""
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text()
    command = " ".join(["uv run python benchmarks/local_tasks.py", *sys.argv[1:]])
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = (
        f"{start}\nCommand: `{command}` · measured {time.strftime('%Y-%m-%d')}\n\n{markdown}\n{end}"
    )
    if start in text:
        text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text,
                      flags=re.S)  # fmt: skip
    else:
        text += "\n" + block + "\n"
    path.write_text(text)


def select(args: argparse.Namespace) -> list[Task]:
    tasks = [t for t in TASKS if (not args.task or t.name in args.task)]
    tasks = [t for t in tasks if (not args.kind or t.kind in args.kind)]
    unknown = set(args.task or ()) - {t.name for t in TASKS}
    if unknown or not tasks:
        raise SystemExit(f"no such task: {', '.join(sorted(unknown)) or 'none selected'}")
    return tasks


def load_transcripts(specs: list[str]) -> list[Outcome]:
    """The runs saved by ``--transcripts``: ``DIR`` or ``DIR=LABEL`` (the runs' variants get
    the label appended, e.g. ``deep before``), in the order given."""
    names = {f.name for f in fields(Outcome)}
    outcomes = []
    for spec in specs:
        directory, _, label = spec.partition("=")
        for path in sorted(Path(directory).glob("*.json")):
            data = json.loads(path.read_text())
            o = Outcome(**{k: v for k, v in data.items() if k in names})
            o.variant = f"{o.variant} {label}".strip()
            outcomes.append(o)
    if not outcomes:
        raise SystemExit(f"no transcripts in {', '.join(specs)}")
    return outcomes


async def main_async(args: argparse.Namespace) -> None:
    if args.report:
        outcomes = load_transcripts(args.report)
        variants = list(dict.fromkeys(o.variant for o in outcomes))
        header = (
            f"Model: {args.model}; {len({o.task for o in outcomes})} tasks; runs saved by "
            "`--transcripts` and put side by side. " + LIMITS
        )
        markdown = report(outcomes, variants, header)
        print(markdown)
        if args.write_docs:
            _write_docs(markdown, args.block)
        return
    tasks = select(args)
    if args.repeats > 1 and args.temperature == 0:
        print("note: at temperature 0 every repeat is the same run; pass --temperature 0.3")
    models, local = await start_models(args.variants, args.model)
    outcomes: list[Outcome] = []
    try:
        for variant in args.variants:
            for task in tasks:
                for repeat in range(args.repeats):
                    o = await run_task(
                        variant, models[variant], task, repeat=repeat,
                        temperature=args.temperature, seed=args.seed, verbose=args.verbose,
                    )  # fmt: skip
                    outcomes.append(o)
                    print(f"{variant:6} {task.name:17} #{repeat} {'ok ' if o.ok else 'FAIL'} "
                          f"{o.seconds:5.1f} s {o.calls:2} calls {o.malformed} malformed "
                          f"{o.error}".rstrip(), flush=True)  # fmt: skip
                    if args.transcripts:
                        _write_transcript(Path(args.transcripts), o, task)
    finally:
        for model in {id(m): m for m in [*models.values(), *local]}.values():
            await model.aclose()
    header = (
        f"Model: {args.model}; {len(tasks)} tasks x {args.repeats} run(s); temperature "
        f"{args.temperature:g}, seed {args.seed} + repeat. " + LIMITS
    )
    markdown = report(outcomes, args.variants, header)
    print(markdown)
    if args.write_docs:
        _write_docs(markdown, args.block)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS, choices=VARIANTS)
    parser.add_argument("--task", nargs="*", help="run only these tasks")
    parser.add_argument("--kind", nargs="*", choices=list(KINDS), help="run only these kinds")
    parser.add_argument("--repeats", type=int, default=1, help="runs per task and variant")
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0, help="the first repeat's seed")
    parser.add_argument("--verbose", action="store_true", help="print every tool call")
    parser.add_argument("--transcripts", metavar="DIR", help="write one JSON file per run")
    parser.add_argument(
        "--report",
        nargs="+",
        metavar="DIR[=LABEL]",
        help="run nothing: report the runs saved in these --transcripts folders",
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--block", default="tasks", metavar="NAME",
                        help="the block of docs/benchmarks.md --write-docs replaces")  # fmt: skip
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
