"""The deep-agent harness: ``DeepAgent`` and the capabilities and tools for long, multi-step work.

- ``DeepAgent`` (agent.py): an ``Agent`` assembled from the parts below
- ``FileTools`` (files) over a ``FileBackend`` (the protocol: ``agentica.tools.files``; the
  built-in backends: ``backends/``)
- ``Shell`` over a ``CommandBackend`` (``agentica.tools.commands``), ``CodeNotRun`` (shell/)
- ``Todos`` (todos), ``SubAgents`` (subagents), ``Skills`` (skills), ``Web`` (web),
  ``AnswerCheck``, ``NumberCheck`` (checks), ``Heartbeat``, ``Reflection`` (heartbeat),
  ``DeepResearch`` and ``ResearchReport`` (research: a question to a cited report),
  ``PythonKernel`` (kernel: a persistent IPython kernel per session), ``Checkpoints`` (undo)

Human approval, the ``RepetitionGuard``, context management and guardrails are in every ``Agent``.
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
from agentica.deep.checkpoints import Checkpoints, UndoReport
from agentica.deep.checks import AnswerCheck, NumberCheck
from agentica.deep.files import FileTools, WorkspaceOverview, session_state_backend
from agentica.deep.heartbeat import Heartbeat, Reflection
from agentica.deep.kernel import PythonKernel
from agentica.deep.project import IgnoringBackend, Project, ProjectSettings, load_project
from agentica.deep.research import DeepResearch, ResearchReport
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
    "Checkpoints",
    "CodeNotRun",
    "CompositeBackend",
    "DeepAgent",
    "DeepResearch",
    "FileBackend",
    "FileInfo",
    "FileTools",
    "FilesystemBackend",
    "Heartbeat",
    "IgnoringBackend",
    "NumberCheck",
    "Project",
    "ProjectSettings",
    "PythonKernel",
    "Reflection",
    "ResearchReport",
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
    "UndoReport",
    "Web",
    "WorkspaceOverview",
    "load_project",
    "load_skill",
    "provider_from_env",
    "session_state_backend",
]
