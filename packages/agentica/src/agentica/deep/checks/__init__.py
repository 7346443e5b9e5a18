"""The checks of a run's work before it ends: ``AnswerCheck`` and ``NumberCheck``.

``answer``: the general "check your work" request and what the run's calls showed;
``send_backs``: the things sent back one at a time (a wrong result, a word left to change,
failing tests, ...); ``numbers``: numbers written or answered that no tool showed;
``failures``: what a failed test run says; ``calls``: how the checks read a tool call.
"""

from agentica.deep.checks.answer import AnswerCheck
from agentica.deep.checks.numbers import NumberCheck

__all__ = ["AnswerCheck", "NumberCheck"]
