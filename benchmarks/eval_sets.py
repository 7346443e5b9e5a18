"""The shipped task sets on the embedded model with the paper's ablations (``agentica eval``).

``uv run python benchmarks/eval_sets.py [--write-docs]`` runs, on the default embedded model
(Qwen2.5-Coder-1.5B, temperature 0, seed 0), the ``docs`` set under the ``deep`` configuration
and its ablations -DualThreshold, -HEARTBEAT, -DeepPrompt, -Repetition and ``base``, and the
``files`` set under ``deep`` and ``base`` (-TaskGroup and -AgentAsSession change
nothing here: the small model asks for one call per turn and the tasks have one turn). Attempts
are cached in ``.bench-out/eval-cache``; ``--results DIR ...`` renders earlier ``agentica eval``
reports (their ``results.json``) instead of running. Reports go to ``.bench-out/eval-<set>/``,
plots to ``docs/img/eval_<set>_*.png`` and, with ``--write-docs``, the ``eval-sets`` block of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentica.evals import (  # noqa: E402
    Attempt,
    EvalConfig,
    ablations,
    load_tasks,
    markdown,
    run_eval,
    task_set,
    write_report,
)
from benchmarks.docs import write_section  # noqa: E402

OUT = ROOT / ".bench-out"
IMG = ROOT / "docs" / "img"
PLAN = {
    "docs": ["DualThreshold", "HEARTBEAT", "DeepPrompt", "Repetition", "base"],
    "files": ["base"],
}


async def run_set(name: str) -> list[Attempt]:
    configs = ablations(EvalConfig(name="deep"), PLAN[name])
    return await run_eval(
        load_tasks(task_set(name)), configs, cache_dir=OUT / "eval-cache",
        on_attempt=lambda a: print(f"  {'✓' if a.passed else '✗'} {a.task} ({a.config})"),
    )  # fmt: skip


def load_results(folder: Path) -> tuple[str, list[Attempt]]:
    data = json.loads((folder / "results.json").read_text())
    title = str(data["title"]).rsplit(" ", 1)[-1]
    return title, [Attempt.from_json(a) for a in data["attempts"]]


def render(name: str, attempts: list[Attempt]) -> str:
    out = OUT / f"eval-{name}"
    files = write_report(attempts, out, title=f"agentica eval {name}", baseline="deep")
    for path in files:
        if path.suffix == ".png":
            shutil.copy(path, IMG / f"eval_{name}_{path.name}")
    body = markdown(attempts, title=name, baseline="deep").split("\n", 2)[2]
    body = body.replace("## Per task", f"Per task ({name}):")
    plots = [f"![{name}: {p.stem}](img/eval_{name}_{p.name})" for p in files if p.suffix == ".png"]
    return f"**`{name}`** ({len({a.task for a in attempts})} tasks)\n\n{body}\n" + " ".join(plots)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--results", nargs="*", type=Path, help="render these reports' results")
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    if args.results:
        found = dict(load_results(folder) for folder in args.results)
    else:
        found = {name: asyncio.run(run_set(name)) for name in PLAN}
    text = "\n\n".join(render(name, attempts) for name, attempts in found.items())
    print(text)
    if args.write_docs:
        command = "uv run python " + " ".join(["benchmarks/eval_sets.py", *sys.argv[1:]])
        write_section("eval-sets", command, text, heading="Evaluation (agentica eval)")


if __name__ == "__main__":
    main()
