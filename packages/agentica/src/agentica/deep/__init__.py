"""The deep-agent harness: capabilities and tools for long, multi-step work.

- ``AnswerCheck``: before a run ends, the model is asked to check its work against the task
  and the tool calls it made (checks.py)
- ``Todos``: a structured task list in the session, shown to the model each turn (todos.py)
- ``Skills``: Markdown skills with YAML front matter, activated by a trigger (skills.py)
- ``Shell``: ``execute`` and interruptible ``start/wait/stop_command`` in a workspace, optionally
  sandboxed with bubblewrap, never leaving a process behind (shell.py)
- ``Web``: ``fetch_url`` and, when a search provider is configured, ``web_search`` (web.py)

File backends and tools, shell execution, subagents and ``DeepAgent`` are being added by the
deep-agent issue; context management by the context-management issue.
"""

from agentica.deep.checks import AnswerCheck
from agentica.deep.shell import Shell
from agentica.deep.skills import Skill, SkillError, Skills, load_skill
from agentica.deep.todos import TodoItem, Todos
from agentica.deep.web import (
    BraveProvider,
    SearchProvider,
    SearchResult,
    SearxngProvider,
    TavilyProvider,
    Web,
    provider_from_env,
)

__all__ = [
    "AnswerCheck",
    "BraveProvider",
    "SearchProvider",
    "SearchResult",
    "SearxngProvider",
    "Shell",
    "Skill",
    "SkillError",
    "Skills",
    "TavilyProvider",
    "TodoItem",
    "Todos",
    "Web",
    "load_skill",
    "provider_from_env",
]
