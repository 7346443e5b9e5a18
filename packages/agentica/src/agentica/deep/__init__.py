"""The deep-agent harness: capabilities for long, multi-step work.

- ``AnswerCheck``: before a run ends, the model is asked once to check that every step the user
  asked for was done with the tools (checks.py)

The rest of the harness (file backends and tools, shell, subagents, todos, skills, human
approval, guardrails, context management, heartbeat, repetition detection) arrives with the
deep-agent and context-management issues.
"""

from agentica.deep.checks import AnswerCheck

__all__ = ["AnswerCheck"]
