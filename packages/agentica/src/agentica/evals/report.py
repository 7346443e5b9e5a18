"""Evaluation reports: success rates with Wilson intervals, paired comparisons, and plots.

``summarize`` gives one row per configuration (solved / attempts, the 95% Wilson interval,
tokens, cost, wall time, tool calls, compactions); ``compare`` pairs two configurations'
attempts on the same (task, seed) and applies McNemar's exact test to the pairs where they
differ; ``speedups`` reads from the timelines how much faster each turn's tool calls ran together
than one after another would have. ``write_report`` writes ``report.md``, ``results.json`` and,
with matplotlib (``agentica[eval]``), ``success.png``, ``context.png`` and ``speedup.png``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentica.evals.runner import Attempt
from agentica.storage.records import SpanRecord

__all__ = [
    "Comparison",
    "Summary",
    "compare",
    "markdown",
    "mcnemar",
    "speedups",
    "summarize",
    "trajectory",
    "wilson",
    "write_report",
]


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); ``(0, 1)`` when ``n == 0``."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar(only_a: int, only_b: int) -> float:
    """McNemar's exact test: the two-sided p-value that pairs solved only by A (``only_a``) and
    only by B (``only_b``) are this unbalanced by chance (a binomial test at 1/2)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True, slots=True)
class Summary:
    """One configuration's results."""

    config: str
    solved: int
    attempts: int
    low: float
    high: float
    errors: int
    input_tokens: float
    output_tokens: float
    cost: float | None
    wall_time: float
    tool_calls: float
    compactions: float

    @property
    def rate(self) -> float:
        return self.solved / self.attempts if self.attempts else 0.0


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def summarize(attempts: Sequence[Attempt]) -> list[Summary]:
    """One ``Summary`` per configuration, in the order they first appear."""
    groups: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        groups[attempt.config].append(attempt)
    rows = []
    for config, group in groups.items():
        solved = sum(a.passed for a in group)
        low, high = wilson(solved, len(group))
        costs = [a.cost for a in group]
        rows.append(
            Summary(
                config=config,
                solved=solved,
                attempts=len(group),
                low=low,
                high=high,
                errors=sum(a.error is not None for a in group),
                input_tokens=_mean([a.input_tokens for a in group]),
                output_tokens=_mean([a.output_tokens for a in group]),
                cost=None if any(c is None for c in costs) else sum(c or 0.0 for c in costs),
                wall_time=_mean([a.wall_time for a in group]),
                tool_calls=_mean([a.tool_calls for a in group]),
                compactions=_mean([a.compactions for a in group]),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class Comparison:
    """Two configurations on the same (task, seed) pairs: how often each solved what the other
    did not, and McNemar's exact p-value."""

    a: str
    b: str
    pairs: int
    both: int
    only_a: int
    only_b: int
    p_value: float


def compare(attempts: Sequence[Attempt], a: str, b: str) -> Comparison:
    """Pair the attempts of configurations ``a`` and ``b`` by (task, seed)."""
    first = {(x.task, x.seed): x.passed for x in attempts if x.config == a}
    second = {(x.task, x.seed): x.passed for x in attempts if x.config == b}
    keys = sorted(first.keys() & second.keys())
    only_a = sum(first[k] and not second[k] for k in keys)
    only_b = sum(second[k] and not first[k] for k in keys)
    both = sum(first[k] and second[k] for k in keys)
    return Comparison(a, b, len(keys), both, only_a, only_b, mcnemar(only_a, only_b))


def _turns(run: SpanRecord) -> dict[int, list[SpanRecord]]:
    calls: dict[int, list[SpanRecord]] = defaultdict(list)
    for span in run.children:
        turn = span.attributes.get("agentica.turn")
        if span.kind == "tool" and isinstance(turn, int):
            calls[turn].append(span)
    return calls


def speedups(attempts: Sequence[Attempt]) -> dict[int, list[float]]:
    """For turns with k tool calls (k >= 2, over every run in the timelines): the sum of the
    calls' durations (one after another) over the time from the first start to the last end
    (as they ran)."""
    found: dict[int, list[float]] = defaultdict(list)
    for attempt in attempts:
        if attempt.trace is None:
            continue
        for _, run in attempt.trace.walk():
            if run.kind != "run":
                continue
            for calls in _turns(run).values():
                if len(calls) < 2:
                    continue
                elapsed = max(c.start + c.duration for c in calls) - min(c.start for c in calls)
                if elapsed > 0:
                    found[len(calls)].append(sum(c.duration for c in calls) / elapsed)
    return dict(sorted(found.items()))


def trajectory(trace: SpanRecord) -> tuple[list[int | None], list[int]]:
    """The top-level run's context tokens per model call, and the indexes of the calls that a
    compaction came just before."""
    tokens: list[int | None] = []
    compacted: list[int] = []
    for span in trace.children:
        if span.kind == "compaction":
            compacted.append(len(tokens))
        elif span.kind == "model":
            value = span.attributes.get("agentica.context_tokens")
            tokens.append(value if isinstance(value, int) else None)
    return tokens, compacted


def _money(value: float | None) -> str:
    return "n/a" if value is None else f"${value:.4f}"


def markdown(
    attempts: Sequence[Attempt], *, title: str = "Evaluation", baseline: str | None = None
) -> str:
    """The report as Markdown: the summary table, comparisons with ``baseline`` (default: the
    first configuration) and the task x configuration matrix."""
    rows = summarize(attempts)
    lines = [f"# {title}", ""]
    lines += [
        "| configuration | solved | rate | 95% CI (Wilson) | errors | tokens in | tokens out "
        "| cost | wall time (s) | tool calls | compactions |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.config} | {r.solved}/{r.attempts} | {r.rate:.0%} | {r.low:.0%}-{r.high:.0%} "
            f"| {r.errors} | {r.input_tokens:,.0f} | {r.output_tokens:,.0f} | {_money(r.cost)} "
            f"| {r.wall_time:.1f} | {r.tool_calls:.1f} | {r.compactions:.1f} |"
        )
    base = baseline or (rows[0].config if rows else None)
    others = [r.config for r in rows if r.config != base]
    if base is not None and others:
        lines += ["", f"Paired with `{base}` on the same (task, seed); McNemar's exact test:", ""]
        lines += ["| configuration | pairs | both solved | only it | only baseline | p |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for other in others:
            c = compare(attempts, other, base)
            lines.append(
                f"| {other} | {c.pairs} | {c.both} | {c.only_a} | {c.only_b} | {c.p_value:.3f} |"
            )
    lines += ["", "## Per task", ""]
    configs = [r.config for r in rows]
    tasks = list(dict.fromkeys(a.task for a in attempts))
    lines += ["| task | " + " | ".join(configs) + " |", "|---" * (len(configs) + 1) + "|"]
    cells: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for a in attempts:
        cells[(a.task, a.config)].append(a.passed)
    for task in tasks:
        marks = [
            f"{sum(cells[(task, c)])}/{len(cells[(task, c)])}" if cells[(task, c)] else "-"
            for c in configs
        ]
        lines.append(f"| {task} | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"


def write_report(
    attempts: Sequence[Attempt],
    out: Path,
    *,
    title: str = "Evaluation",
    baseline: str | None = None,
) -> list[Path]:
    """Write ``report.md``, ``results.json`` and the plots into ``out`` (blocking); returns the
    files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "report.md", out / "results.json"]
    written[0].write_text(markdown(attempts, title=title, baseline=baseline), encoding="utf-8")
    summary = [{**dataclasses.asdict(r), "rate": r.rate} for r in summarize(attempts)]
    data = {"title": title, "summary": summary, "attempts": [a.to_json() for a in attempts]}
    written[1].write_text(json.dumps(data, indent=1), encoding="utf-8")
    try:
        from agentica.evals import plots
    except ImportError:  # matplotlib is the eval extra's
        return written
    written += plots.draw(attempts, out, title=title)
    return written
