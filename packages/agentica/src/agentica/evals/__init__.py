"""Evaluation: tasks an agent is run on, and the checks that score what it did.

``agentica.evals.tasks`` holds ``EvalTask`` and ``load_tasks`` (agentica's JSONL task files,
GAIA's layout, SWE-bench instances) and the task sets shipped with agentica (``task_set``);
``agentica.evals.checks`` holds the checks (a shell command, the final answer scored like GAIA,
a SWE-bench instance's tests). ``EvalConfig`` (config.py) is an agent configuration and
``ablations`` / ``threshold_sweep`` derive the paper's matrix from one; ``run_eval`` (runner.py)
runs tasks x configurations x seeds into ``Attempt``s; report.py scores them (Wilson intervals,
McNemar's test) and writes the report. ``agentica eval`` is the command line.
"""

from agentica.evals.checks import (
    AllChecks,
    Check,
    CheckResult,
    CommandCheck,
    ExpectedAnswer,
    NoReferenceCheck,
    SWEBenchCheck,
    answers_match,
)
from agentica.evals.config import EvalConfig, ablations, load_config, threshold_sweep
from agentica.evals.report import (
    Comparison,
    Summary,
    compare,
    markdown,
    mcnemar,
    speedups,
    summarize,
    wilson,
    write_report,
)
from agentica.evals.runner import Attempt, run_eval
from agentica.evals.tasks import EvalTask, load_tasks, task_set, task_sets

__all__ = [
    "AllChecks",
    "Attempt",
    "Check",
    "CheckResult",
    "CommandCheck",
    "Comparison",
    "EvalConfig",
    "EvalTask",
    "ExpectedAnswer",
    "NoReferenceCheck",
    "SWEBenchCheck",
    "Summary",
    "ablations",
    "answers_match",
    "compare",
    "load_config",
    "load_tasks",
    "markdown",
    "mcnemar",
    "run_eval",
    "speedups",
    "summarize",
    "task_set",
    "task_sets",
    "threshold_sweep",
    "wilson",
    "write_report",
]
