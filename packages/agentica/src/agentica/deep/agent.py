"""``DeepAgent``: an ``Agent`` with the harness that long, multi-step work needs.

```python
agent = DeepAgent(workspace="project/")           # the embedded model unless model=...
response = await agent.run("Add a --verbose flag to cli.py and test it")
```

It is an ordinary ``Agent`` whose tools and capabilities are assembled from the harness:

- file tools (``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``) over a
  ``FileBackend``: the workspace directory (``FilesystemBackend``) when one is given, else files
  kept in the session's state;
- ``execute`` and ``run_python`` in the workspace (``Shell``), optionally sandboxed, plus the
  background ``start/wait/stop_command`` operations when ``background_commands=True``;
- ``Heartbeat`` checkpoints (and ``Reflection`` when asked for), the ``RepetitionGuard``, and
  the context management every ``Agent`` has (``context=ContextPolicy(...)``);
- ``write_todos`` / ``read_todos`` (``Todos``), the ``task`` tool for subagents (``SubAgents``),
  skills (``Skills``), web tools (``Web``), human approval (``interrupt_on``), and the final
  ``AnswerCheck``.

Every part can be switched off or replaced by passing ``False`` or an object; the harness adds
one short paragraph to the instructions. Its fixed prompt cost (system prompt and tool schemas)
is measured in ``benchmarks/deep_prompt.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agentica.agent import Agent
from agentica.deep.backends import FilesystemBackend
from agentica.deep.checks import AnswerCheck
from agentica.deep.files import BackendSource, FileTools, WorkspaceOverview
from agentica.deep.heartbeat import Heartbeat, Reflection
from agentica.deep.shell import CodeNotRun, Shell
from agentica.deep.skills import Skills
from agentica.deep.subagents import SubAgent, SubAgents
from agentica.deep.todos import Todos
from agentica.deep.web import Web
from agentica.errors import UsageError
from agentica.models.base import Model
from agentica.run.approval import HumanApproval, Rule
from agentica.run.capability import Capability
from agentica.run.repetition import RepetitionGuard
from agentica.tools.toolkit import ToolLike

__all__ = ["HARNESS_INSTRUCTIONS", "DeepAgent"]

HARNESS_INSTRUCTIONS = (
    "You work in a workspace through tools. For a task with several steps, first list the "
    "steps with write_todos and mark each one done as you finish it. Read files before you "
    "change them, run code to compute and to check results, and use task to hand a "
    "self-contained subtask to a subagent. When every step is done and checked, answer with a "
    "short summary."
)


class DeepAgent(Agent):
    """An ``Agent`` with file tools, shell, todos, subagents and checks for multi-step work.

    Args:
        workspace: a directory the agent works in (file tools and commands); without one, files
            live in the session's state and there is no shell.
        backend: the file tools' backend instead (a ``FileBackend``, e.g. a ``CompositeBackend``
            routing ``/memories/`` to a ``StoreBackend``, or a function of the run context).
        shell: ``True`` (a ``Shell`` in the workspace with ``run_python``), ``False``, or a
            ``Shell``.
        sandbox: the default shell's sandbox: ``"none"``, ``"bwrap"`` or ``"auto"``.
        background_commands: give the default shell ``start/wait/stop/list_command``.
        todos: keep a todo list (``write_todos`` / ``read_todos``).
        subagents: custom ``SubAgent`` kinds for the ``task`` tool, ``True`` for the general
            purpose one only, or ``False`` for no ``task`` tool.
        max_subagent_depth: how deep subagents may nest.
        skills: a ``Skills`` capability (skills from Markdown files), or ``None``.
        web: ``True`` for ``fetch_url`` (and ``web_search`` when a provider is configured), or a
            ``Web`` capability.
        interrupt_on: tools whose calls wait for a person's approval (see ``HumanApproval``).
        answer_check: ask the model to check its work before it finishes (``AnswerCheck``).
        overview: list the top of the file area in the system prompt at the start of each run
            (``WorkspaceOverview``), so the model uses real paths instead of guessing.
        repetition: warn when the model repeats a tool call and refuse a tool it keeps
            repeating (``RepetitionGuard``), or your own guard.
        heartbeat: a checkpoint every few model calls (open todos, unverified changes) and a
            bounded "continue" when the model answers too early (``Heartbeat``).
        reflection: a one-sentence self-assessment after tool results every few calls
            (``Reflection``; off by default).
        instructions: your instructions; the harness paragraph comes first.
        tools, capabilities: added to the harness's.
        Other keyword arguments are ``Agent``'s (``model``, ``storage``, ``limits``, ...).
    """

    __slots__ = ()

    def __init__(
        self,
        *,
        model: Model | str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        backend: BackendSource | None = None,
        shell: Shell | bool = True,
        sandbox: Literal["none", "bwrap", "auto"] = "none",
        background_commands: bool = False,
        todos: bool = True,
        subagents: Sequence[SubAgent] | bool = True,
        max_subagent_depth: int = 1,
        skills: Skills | None = None,
        web: Web | bool = False,
        interrupt_on: Mapping[str, Rule] | None = None,
        answer_check: bool = True,
        overview: bool = True,
        repetition: RepetitionGuard | bool = True,
        heartbeat: Heartbeat | bool = True,
        reflection: Reflection | bool = False,
        instructions: str | None = None,
        tools: Sequence[ToolLike] = (),
        capabilities: Sequence[Capability] = (),
        name: str = "deep-agent",
        **agent_options: Any,
    ) -> None:
        if workspace is not None and not os.path.isdir(workspace):
            raise UsageError(
                f"DeepAgent workspace {os.fspath(workspace)!r} is not a directory; create it first"
            )
        if backend is None and workspace is not None:
            backend = FilesystemBackend(workspace)
        files = FileTools(backend)
        harness_tools: list[ToolLike] = [files]
        shared: list[Capability] = []  # what subagents get too
        if overview:
            shared.append(WorkspaceOverview(files))
        if isinstance(repetition, RepetitionGuard):
            shared.append(repetition)
        elif repetition:
            shared.append(RepetitionGuard())
        harness: list[Capability] = list(shared)
        if isinstance(shell, Shell):
            harness.append(shell)
        elif shell and workspace is not None:
            harness.append(
                Shell(workspace, python=True, sandbox=sandbox, background=background_commands)
            )
        if todos:
            harness.append(Todos())
        if isinstance(heartbeat, Heartbeat):
            harness.append(heartbeat)
        elif heartbeat:  # open todos are nudged by Todos itself
            harness.append(Heartbeat(check_todos=not todos))
        if isinstance(reflection, Reflection):
            harness.append(reflection)
        elif reflection:
            harness.append(Reflection())
        if subagents is not False:
            kinds = list(subagents) if not isinstance(subagents, bool) else []
            # subagents get the shell's tools (by privilege) but not the Shell: it reminds them
            # to run code they only wrote down
            children = [*shared, CodeNotRun()] if shell else shared
            harness.append(SubAgents(kinds, max_depth=max_subagent_depth, shared=children))
        if skills is not None:
            harness.append(skills)
        if isinstance(web, Web):
            harness.append(web)
        elif web:
            harness.append(Web())
        if interrupt_on:
            harness.append(HumanApproval(interrupt_on))
        if answer_check:
            harness.append(AnswerCheck())
        text = (
            HARNESS_INSTRUCTIONS
            if not instructions
            else f"{HARNESS_INSTRUCTIONS}\n\n{instructions}"
        )
        super().__init__(
            model=model,
            tools=[*harness_tools, *tools],
            instructions=text,
            name=name,
            capabilities=[*harness, *capabilities],
            **agent_options,
        )
