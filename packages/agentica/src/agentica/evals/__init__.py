"""Evaluation: tasks an agent is run on, and the checks that score what it did.

``agentica.evals.tasks`` holds ``EvalTask`` and ``load_tasks`` (agentica's JSONL task files,
GAIA's layout, SWE-bench instances) and the task sets shipped with agentica (``task_set``);
``agentica.evals.checks`` holds the checks (a shell command, the final answer scored like GAIA,
a SWE-bench instance's tests).
"""

from agentica.evals.checks import (
    AllChecks,
    AnswerCheck,
    Check,
    CheckResult,
    CommandCheck,
    NoReferenceCheck,
    SWEBenchCheck,
    answer_candidates,
    answers_match,
    normalize_answer,
)
from agentica.evals.tasks import EvalTask, TaskFormat, load_tasks, task_set, task_sets

__all__ = [
    "AllChecks",
    "AnswerCheck",
    "Check",
    "CheckResult",
    "CommandCheck",
    "EvalTask",
    "NoReferenceCheck",
    "SWEBenchCheck",
    "TaskFormat",
    "answer_candidates",
    "answers_match",
    "load_tasks",
    "normalize_answer",
    "task_set",
    "task_sets",
]
