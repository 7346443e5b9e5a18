"""The evaluation report's plots (matplotlib, the ``agentica[eval]`` extra; imported only when a
report is written): success rate per configuration with its Wilson interval, the context-token
trajectory of each run with compactions marked, and the speed-up of concurrent tool calls by the
number of calls in a turn.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: never a window (set before pyplot is imported)
import matplotlib.pyplot as plt

from agentica.evals.report import speedups, summarize, trajectory
from agentica.evals.runner import Attempt

__all__ = ["draw"]


def _success(attempts: Sequence[Attempt], path: Path, title: str) -> None:
    rows = summarize(attempts)
    figure, axes = plt.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2), 3.6))
    x = range(len(rows))
    rates = [r.rate * 100 for r in rows]
    below = [(r.rate - r.low) * 100 for r in rows]
    above = [(r.high - r.rate) * 100 for r in rows]
    axes.bar(x, rates, color="#4c78a8", yerr=[below, above], capsize=4)
    for i, r in enumerate(rows):  # (above the bar: a bar of 0 is not there)
        axes.text(i + 0.05, r.rate * 100 + 1.5, f"{r.solved}/{r.attempts}", ha="left", fontsize=8)
    axes.set_xticks(list(x), [r.config for r in rows], rotation=30, ha="right", fontsize=8)
    axes.set_ylabel("tasks solved (%)")
    axes.set_ylim(0, 100)
    axes.set_title(f"{title}: success rate (95% Wilson interval)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _context(attempts: Sequence[Attempt], path: Path, title: str) -> bool:
    runs = [a for a in attempts if a.trace is not None and a.model_calls > 1]
    if not runs:
        return False
    figure, axes = plt.subplots(figsize=(7, 3.6))
    configs = list(dict.fromkeys(a.config for a in runs))
    colours = plt.get_cmap("tab10")
    for attempt in runs:
        assert attempt.trace is not None
        tokens, compacted = trajectory(attempt.trace)
        colour = colours(configs.index(attempt.config) % 10)
        points = [(i + 1, t) for i, t in enumerate(tokens) if t is not None]
        if not points:
            continue
        axes.plot(*zip(*points, strict=True), color=colour, alpha=0.5, linewidth=1)
        for index in compacted:
            value = tokens[index] if index < len(tokens) else None
            if value is not None:
                axes.plot(index + 1, value, "v", color=colour, markersize=6)
    for i, config in enumerate(configs):
        axes.plot([], [], color=colours(i % 10), label=config)
    axes.plot([], [], "v", color="grey", label="after a compaction")
    axes.set_xlabel("model call")
    axes.set_ylabel("context tokens")
    axes.set_title(f"{title}: context per model call", fontsize=10)
    axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def _speedup(attempts: Sequence[Attempt], path: Path, title: str) -> bool:
    found = speedups(attempts)
    if not found:
        return False
    figure, axes = plt.subplots(figsize=(5.5, 3.6))
    ks = list(found)
    axes.plot(ks, [statistics.median(found[k]) for k in ks], "o-", label="measured (median)")
    axes.plot(ks, ks, "--", color="grey", label="ideal (k calls at once)")
    axes.set_xlabel("tool calls in the turn")
    axes.set_ylabel("speed-up over one at a time")
    axes.set_title(f"{title}: concurrent tool calls", fontsize=10)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def draw(attempts: Sequence[Attempt], out: Path, *, title: str) -> list[Path]:
    """The plots of ``attempts`` in ``out``; returns those drawn (blocking)."""
    drawn = [out / "success.png"]
    _success(attempts, drawn[0], title)
    if _context(attempts, out / "context.png", title):
        drawn.append(out / "context.png")
    if _speedup(attempts, out / "speedup.png", title):
        drawn.append(out / "speedup.png")
    return drawn
