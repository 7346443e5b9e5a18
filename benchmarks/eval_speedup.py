"""Wall-clock speed-up of concurrent tool calls, measured with ``agentica.evals`` (paper D.2.3).

``uv run python benchmarks/eval_speedup.py [--write-docs]``

One task per k in 1..8: a scripted model (``FunctionModel``, no waiting of its own) asks for k
shell commands in one turn, each ``sleep 0.25`` (a real subprocess in the workspace: a search,
a test run, a download stand-in), then answers. Every task runs under the ``deep`` configuration
and its ``-TaskGroup`` ablation (one call at a time), 3 seeds each, through ``run_eval``; the
speed-up is the ablation's wall time over the full configuration's, per k (median), and the
turn's speed-up read from the timelines (the calls' summed durations over the span from the first
start to the last end). Plot: ``docs/img/eval_speedup.png``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from agentica.evals import CommandCheck, EvalConfig, EvalTask, ablations, run_eval, speedups  # noqa: E402
from agentica.messages import AssistantMessage, Message, ToolMessage, UserMessage  # noqa: E402
from agentica.models.base import ModelRequest  # noqa: E402
from agentica.testing import FunctionModel, call, text, tool_calls  # noqa: E402
from benchmarks.docs import write_section  # noqa: E402

SLEEP = 0.25
KS = (1, 2, 3, 4, 6, 8)
PLOT = ROOT / "docs" / "img" / "eval_speedup.png"


def _model(messages: list[Message], request: ModelRequest) -> AssistantMessage:
    if any(isinstance(m, ToolMessage) for m in messages):
        return text("done")
    task = next(m.text for m in reversed(messages) if isinstance(m, UserMessage))
    k = int(task.split()[1])  # "Run k commands."
    return tool_calls(*(call("execute", command=f"sleep {SLEEP}") for _ in range(k)))


async def measure(repeats: int) -> dict[int, dict[str, float]]:
    tasks = [
        EvalTask(id=f"k{k}", prompt=f"Run {k} commands.", check=CommandCheck("true")) for k in KS
    ]
    full, sequential = ablations(EvalConfig(name="deep"), ["-TaskGroup"])
    attempts = await run_eval(
        tasks, [full, sequential], repeats=repeats, model_factory=lambda c: FunctionModel(_model)
    )
    result: dict[int, dict[str, float]] = {}
    for k in KS:
        mine = [a for a in attempts if a.task == f"k{k}"]
        walls = {
            c.name: statistics.median(a.wall_time for a in mine if a.config == c.name)
            for c in (full, sequential)
        }
        turns = speedups([a for a in mine if a.config == full.name]).get(k, [1.0])
        result[k] = {
            "parallel_s": walls[full.name],
            "sequential_s": walls[sequential.name],
            "speedup": walls[sequential.name] / walls[full.name],
            "turn_speedup": statistics.median(turns),
            "solved": sum(a.passed for a in mine),
        }
    return result


def markdown(result: dict[int, dict[str, float]], repeats: int) -> str:
    lines = [
        f"k shell commands of {SLEEP} s in one turn, {repeats} runs each (median wall time of the "
        "whole run: two model calls, the commands, the harness):",
        "",
        "| calls per turn | one at a time (s) | concurrent (s) | speed-up | turn speed-up "
        "(timeline) |",
        "|---|---|---|---|---|",
    ]
    for k, r in result.items():
        lines.append(
            f"| {k} | {r['sequential_s']:.2f} | {r['parallel_s']:.2f} | {r['speedup']:.2f}x "
            f"| {r['turn_speedup']:.2f}x |"
        )
    lines += ["", "![speed-up](img/eval_speedup.png)"]
    return "\n".join(lines)


def plot(result: dict[int, dict[str, float]]) -> None:
    figure, axes = plt.subplots(figsize=(5.5, 3.6))
    ks = list(result)
    axes.plot(ks, [result[k]["speedup"] for k in ks], "o-", label="whole run")
    axes.plot(ks, [result[k]["turn_speedup"] for k in ks], "s-", label="the turn's calls")
    axes.plot(ks, ks, "--", color="grey", label="ideal")
    axes.set_xlabel("tool calls in the turn")
    axes.set_ylabel("speed-up over one at a time")
    axes.set_title(f"Concurrent tool calls ({SLEEP} s commands)", fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    PLOT.parent.mkdir(exist_ok=True)
    figure.savefig(PLOT, dpi=120)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.repeats))
    plot(result)
    text_ = markdown(result, args.repeats)
    print(text_)
    if args.write_docs:
        command = "uv run python " + " ".join(["benchmarks/eval_speedup.py", *sys.argv[1:]])
        write_section("eval-speedup", command, text_, heading="Evaluation (agentica eval)")


if __name__ == "__main__":
    main()
