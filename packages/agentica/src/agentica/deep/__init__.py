"""The deep-agent harness: ``DeepAgent`` and the capabilities and tools for long, multi-step work.

- ``DeepAgent``: an ``Agent`` assembled from the parts below (agent.py)
- ``FileBackend`` and its implementations ``StateBackend``, ``FilesystemBackend``,
  ``StoreBackend``, ``CompositeBackend`` (backends.py); ``FileTools``: ``ls``, ``read_file``,
  ``write_file``, ``edit_file``, ``glob``, ``grep`` over a backend (files.py)
- ``Shell``: ``execute``, ``run_python`` and interruptible ``start/wait/stop_command`` in a
  workspace, optionally sandboxed with bubblewrap, never leaving a process behind; ``CodeNotRun``:
  an answer that shows code instead of running it is sent back (shell.py)
- ``Todos``: a structured task list in the session, shown to the model each turn (todos.py)
- ``SubAgents`` / ``SubAgent``: the ``task`` tool, subagents with typed privileges (subagents.py)
- ``Skills``: Markdown skills with YAML front matter, activated by a trigger (skills.py)
- ``Web``: ``fetch_url`` and, when a search provider is configured, ``web_search`` (web.py)
- ``AnswerCheck``: before a run ends, the model checks its work against the task and the tool
  calls it made (checks.py)
- ``Heartbeat``: a checkpoint every few steps and a bounded "continue" on an early answer;
  ``Reflection``: a short self-assessment after tool results (heartbeat.py)

Human approval (``HumanApproval``, ``Decision``), the ``RepetitionGuard`` and context management
(eviction, dual-threshold compaction, ``ContextPolicy``) live below, in ``agentica.run`` and
``agentica.context``: every ``Agent`` has them; guardrails are in ``agentica.guardrails``.
"""

from agentica.deep.agent import HARNESS_INSTRUCTIONS, DeepAgent
from agentica.deep.backends import (
    BackendError,
    CompositeBackend,
    FileBackend,
    FileInfo,
    FilesystemBackend,
    StateBackend,
    StoreBackend,
)
from agentica.deep.checks import AnswerCheck
from agentica.deep.files import FileTools, WorkspaceOverview, session_state_backend
from agentica.deep.heartbeat import Heartbeat, Reflection
from agentica.deep.shell import CodeNotRun, Shell
from agentica.deep.skills import Skill, SkillError, Skills, load_skill
from agentica.deep.subagents import SubAgent, SubAgents
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
    "HARNESS_INSTRUCTIONS",
    "AnswerCheck",
    "BackendError",
    "BraveProvider",
    "CodeNotRun",
    "CompositeBackend",
    "DeepAgent",
    "FileBackend",
    "FileInfo",
    "FileTools",
    "FilesystemBackend",
    "Heartbeat",
    "Reflection",
    "SearchProvider",
    "SearchResult",
    "SearxngProvider",
    "Shell",
    "Skill",
    "SkillError",
    "Skills",
    "StateBackend",
    "StoreBackend",
    "SubAgent",
    "SubAgents",
    "TavilyProvider",
    "TodoItem",
    "Todos",
    "Web",
    "WorkspaceOverview",
    "load_skill",
    "provider_from_env",
    "session_state_backend",
]
