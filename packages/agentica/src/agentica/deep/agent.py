"""``DeepAgent``: an ``Agent`` with the harness that long, multi-step work needs.

```python
agent = DeepAgent(workspace="project/")           # the embedded model unless model=...
response = await agent.run("Add a --verbose flag to cli.py and test it")
```

An ordinary ``Agent`` whose tools and capabilities are assembled from the harness (files, shell,
todos, subagents, checks); every part can be switched off or replaced (see ``DeepAgent``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar, overload

from agentica.agent import Agent
from agentica.context import ContextPolicy, HistoryPolicy
from agentica.deep.backends import FilesystemBackend
from agentica.deep.checks import AnswerCheck, NumberCheck
from agentica.deep.files import BackendSource, FileTools, WorkspaceOverview
from agentica.deep.heartbeat import Heartbeat, Reflection
from agentica.deep.shell import CodeNotRun, Shell
from agentica.deep.skills import Skills
from agentica.deep.subagents import SubAgent, SubAgents
from agentica.deep.todos import Todos
from agentica.deep.web import Web
from agentica.errors import UsageError
from agentica.limits import RunLimits
from agentica.models.base import Model, ModelSettings
from agentica.run.approval import HumanApproval, Rule
from agentica.run.capability import Capability
from agentica.run.handoff import Handoff
from agentica.run.repetition import RepetitionGuard
from agentica.run.result import OutT
from agentica.storage.base import Storage
from agentica.tools.execution import ToolSettings
from agentica.tools.guardrails import AnyGuardrail
from agentica.tools.toolkit import ToolLike

__all__ = ["HARNESS_INSTRUCTIONS", "DeepAgent"]

HARNESS_INSTRUCTIONS = (
    "You work in a workspace through tools. For a task with several steps, first list the "
    "steps with write_todos and mark each one done as you finish it. Read files before you "
    "change them, run code to compute and to check results, and use task to hand a "
    "self-contained subtask to a subagent. When every step is done and checked, answer with a "
    "short summary."
)

C = TypeVar("C", bound=Capability)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Harness:
    """The arguments only ``DeepAgent`` takes, as given (``clone()`` rebuilds from them)."""

    workspace: str | os.PathLike[str] | None
    backend: BackendSource | None
    shell: Shell | bool
    sandbox: Literal["none", "bwrap", "auto"]
    background_commands: bool
    todos: Todos | bool
    subagents: Sequence[SubAgent] | bool
    max_subagent_depth: int
    skills: Skills | None
    web: Web | bool
    interrupt_on: Mapping[str, Rule] | None
    answer_check: bool
    overview: bool
    repetition: RepetitionGuard | bool
    heartbeat: Heartbeat | bool
    reflection: Reflection | bool
    instructions: str | None
    tools: Sequence[ToolLike]
    capabilities: Sequence[Capability]


def _part(option: C | bool, kind: type[C], default: Callable[[], C]) -> list[Capability]:
    """An optional part of the harness: the object given, ``default()`` for ``True``, or none."""
    if isinstance(option, kind):
        return [option]
    return [default()] if option else []


def _files(harness: _Harness) -> FileTools:
    """The file tools: over ``backend``, else the workspace, else the session's state."""
    workspace, backend = harness.workspace, harness.backend
    if workspace is not None and not os.path.isdir(workspace):
        raise UsageError(
            f"DeepAgent workspace {os.fspath(workspace)!r} is not a directory; create it first"
        )
    if backend is None and workspace is not None:
        backend = FilesystemBackend(workspace)
    return FileTools(backend)


def _shared(harness: _Harness, files: FileTools) -> list[Capability]:
    """The parts subagents get too: the workspace overview and the repetition guard."""
    overview: list[Capability] = [WorkspaceOverview(files)] if harness.overview else []
    return [*overview, *_part(harness.repetition, RepetitionGuard, RepetitionGuard)]


def _shell(harness: _Harness) -> list[Capability]:
    """The shell given, or a default one in the workspace (none without a workspace)."""
    if isinstance(harness.shell, Shell):
        return [harness.shell]
    if not harness.shell or harness.workspace is None:
        return []
    workspace = harness.workspace
    return [
        Shell(
            workspace,
            python=True,
            sandbox=harness.sandbox,
            background=harness.background_commands,
        )
    ]


def _checkpoints(harness: _Harness) -> list[Capability]:
    """The todo list, the heartbeat and the reflection."""
    # (a list of one step is the task itself: the answer's checks see to it)
    todos = _part(harness.todos, Todos, lambda: Todos(check_steps_from=2))
    # open todos are nudged by Todos itself
    heartbeat = _part(
        harness.heartbeat, Heartbeat, lambda: Heartbeat(check_todos=not harness.todos)
    )
    return [*todos, *heartbeat, *_part(harness.reflection, Reflection, Reflection)]


def _subagents(harness: _Harness, shared: list[Capability]) -> list[Capability]:
    """The ``task`` tool, unless ``subagents=False``."""
    if harness.subagents is False:
        return []
    kinds = list(harness.subagents) if not isinstance(harness.subagents, bool) else []
    # subagents get the shell's tools (by privilege) but not the Shell: it reminds them to run
    # code they only wrote down; their answers are the parent's evidence, so numbers are checked
    children = [*shared, CodeNotRun(), NumberCheck()] if harness.shell else shared
    return [SubAgents(kinds, max_depth=harness.max_subagent_depth, shared=children)]


def _extras(harness: _Harness) -> list[Capability]:
    """Skills, web tools, human approval and the final answer check."""
    skills: list[Capability] = [harness.skills] if harness.skills is not None else []
    web = _part(harness.web, Web, Web)
    approval: list[Capability] = (
        [HumanApproval(harness.interrupt_on)] if harness.interrupt_on else []
    )
    # the answer check first: its note on an unread input file (and its read_file choice) is
    # the one that matters when both would speak about the same write
    check: list[Capability] = [AnswerCheck(), NumberCheck()] if harness.answer_check else []
    return [*skills, *web, *approval, *check]


def _capabilities(harness: _Harness, files: FileTools) -> list[Capability]:
    """The harness's capabilities, in the order they act, then the caller's."""
    shared = _shared(harness, files)
    return [
        *shared,
        *_shell(harness),
        *_checkpoints(harness),
        *_subagents(harness, shared),
        *_extras(harness),
        *harness.capabilities,
    ]


def _instructions(harness: _Harness) -> str:
    if not harness.instructions:
        return HARNESS_INSTRUCTIONS
    return f"{HARNESS_INSTRUCTIONS}\n\n{harness.instructions}"


class DeepAgent(Agent[OutT]):
    """An ``Agent`` with file tools, shell, todos, subagents and checks for multi-step work.

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
      ``AnswerCheck`` and ``NumberCheck``.

    Every part can be switched off or replaced by passing ``False`` or an object; the harness adds
    one short paragraph to the instructions. Its fixed prompt cost (system prompt and tool schemas)
    is measured in ``benchmarks/deep_prompt.py``. ``clone()`` rebuilds the harness from the same
    arguments.

    Args:
        workspace: a directory the agent works in (file tools and commands); without one, files
            live in the session's state and there is no shell.
        backend: the file tools' backend instead (a ``FileBackend``, e.g. a ``CompositeBackend``
            routing ``/memories/`` to a ``StoreBackend``, or a function of the run context).
        shell: ``True`` (a ``Shell`` in the workspace with ``run_python``), ``False``, or a
            ``Shell``.
        sandbox: the default shell's sandbox: ``"none"``, ``"bwrap"`` or ``"auto"``.
        background_commands: give the default shell ``start/wait/stop/list_command``.
        todos: keep a todo list (``write_todos`` / ``read_todos``; the step of a one-step list
            is not checked when marked completed, ``Todos(check_steps_from=2)``), ``False``, or
            your own ``Todos``.
        subagents: custom ``SubAgent`` kinds for the ``task`` tool, ``True`` for the general
            purpose one only, or ``False`` for no ``task`` tool.
        max_subagent_depth: how deep subagents may nest.
        skills: a ``Skills`` capability (skills from Markdown files), or ``None``.
        web: ``True`` for ``fetch_url`` (and ``web_search`` when a provider is configured), or a
            ``Web`` capability.
        interrupt_on: tools whose calls wait for a person's approval (see ``HumanApproval``).
        answer_check: ask the model to check its work before it finishes (``AnswerCheck``),
            and to compute the numbers it writes or answers that no tool showed
            (``NumberCheck``).
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
        model, name, description, model_settings, limits, tool_settings, history, context,
            output_type, storage, user_id, session_id, guardrails, handoffs: as for ``Agent``
            (``DeepAgent(output_type=Report)`` is a ``DeepAgent[Report]``).
    """

    __slots__ = ("_harness",)

    @overload
    def __init__(
        self: DeepAgent[str],
        *,
        model: Model | str | None = ...,
        workspace: str | os.PathLike[str] | None = ...,
        backend: BackendSource | None = ...,
        shell: Shell | bool = ...,
        sandbox: Literal["none", "bwrap", "auto"] = ...,
        background_commands: bool = ...,
        todos: Todos | bool = ...,
        subagents: Sequence[SubAgent] | bool = ...,
        max_subagent_depth: int = ...,
        skills: Skills | None = ...,
        web: Web | bool = ...,
        interrupt_on: Mapping[str, Rule] | None = ...,
        answer_check: bool = ...,
        overview: bool = ...,
        repetition: RepetitionGuard | bool = ...,
        heartbeat: Heartbeat | bool = ...,
        reflection: Reflection | bool = ...,
        instructions: str | None = ...,
        tools: Sequence[ToolLike] = ...,
        capabilities: Sequence[Capability] = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: None = None,
        storage: Storage | str | None = ...,
        user_id: str | None = ...,
        session_id: str | None = ...,
        guardrails: Sequence[AnyGuardrail] = ...,
        handoffs: Sequence[Agent[Any] | Handoff] = ...,
    ) -> None: ...

    @overload
    def __init__(
        self: DeepAgent[OutT],
        *,
        model: Model | str | None = ...,
        workspace: str | os.PathLike[str] | None = ...,
        backend: BackendSource | None = ...,
        shell: Shell | bool = ...,
        sandbox: Literal["none", "bwrap", "auto"] = ...,
        background_commands: bool = ...,
        todos: Todos | bool = ...,
        subagents: Sequence[SubAgent] | bool = ...,
        max_subagent_depth: int = ...,
        skills: Skills | None = ...,
        web: Web | bool = ...,
        interrupt_on: Mapping[str, Rule] | None = ...,
        answer_check: bool = ...,
        overview: bool = ...,
        repetition: RepetitionGuard | bool = ...,
        heartbeat: Heartbeat | bool = ...,
        reflection: Reflection | bool = ...,
        instructions: str | None = ...,
        tools: Sequence[ToolLike] = ...,
        capabilities: Sequence[Capability] = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: type[OutT],
        storage: Storage | str | None = ...,
        user_id: str | None = ...,
        session_id: str | None = ...,
        guardrails: Sequence[AnyGuardrail] = ...,
        handoffs: Sequence[Agent[Any] | Handoff] = ...,
    ) -> None: ...

    @overload
    def __init__(
        self: DeepAgent[Any],
        *,
        model: Model | str | None = ...,
        workspace: str | os.PathLike[str] | None = ...,
        backend: BackendSource | None = ...,
        shell: Shell | bool = ...,
        sandbox: Literal["none", "bwrap", "auto"] = ...,
        background_commands: bool = ...,
        todos: Todos | bool = ...,
        subagents: Sequence[SubAgent] | bool = ...,
        max_subagent_depth: int = ...,
        skills: Skills | None = ...,
        web: Web | bool = ...,
        interrupt_on: Mapping[str, Rule] | None = ...,
        answer_check: bool = ...,
        overview: bool = ...,
        repetition: RepetitionGuard | bool = ...,
        heartbeat: Heartbeat | bool = ...,
        reflection: Reflection | bool = ...,
        instructions: str | None = ...,
        tools: Sequence[ToolLike] = ...,
        capabilities: Sequence[Capability] = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: Any,
        storage: Storage | str | None = ...,
        user_id: str | None = ...,
        session_id: str | None = ...,
        guardrails: Sequence[AnyGuardrail] = ...,
        handoffs: Sequence[Agent[Any] | Handoff] = ...,
    ) -> None: ...

    def __init__(
        self,
        *,
        model: Model | str | None = None,
        workspace: str | os.PathLike[str] | None = None,
        backend: BackendSource | None = None,
        shell: Shell | bool = True,
        sandbox: Literal["none", "bwrap", "auto"] = "none",
        background_commands: bool = False,
        todos: Todos | bool = True,
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
        description: str | None = None,
        model_settings: ModelSettings | None = None,
        limits: RunLimits | None = None,
        tool_settings: ToolSettings | None = None,
        history: HistoryPolicy | None = None,
        context: ContextPolicy | None = None,
        output_type: Any = None,
        storage: Storage | str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        guardrails: Sequence[AnyGuardrail] = (),
        handoffs: Sequence[Agent[Any] | Handoff] = (),
    ) -> None:
        harness = _Harness(
            workspace=workspace,
            backend=backend,
            shell=shell,
            sandbox=sandbox,
            background_commands=background_commands,
            todos=todos,
            subagents=subagents,
            max_subagent_depth=max_subagent_depth,
            skills=skills,
            web=web,
            interrupt_on=interrupt_on,
            answer_check=answer_check,
            overview=overview,
            repetition=repetition,
            heartbeat=heartbeat,
            reflection=reflection,
            instructions=instructions,
            tools=tools,
            capabilities=capabilities,
        )
        files = _files(harness)
        super().__init__(
            model=model,
            tools=[files, *tools],
            instructions=_instructions(harness),
            name=name,
            description=description,
            model_settings=model_settings,
            limits=limits,
            tool_settings=tool_settings,
            history=history,
            context=context,
            output_type=output_type,
            capabilities=_capabilities(harness, files),
            storage=storage,
            user_id=user_id,
            session_id=session_id,
            guardrails=guardrails,
            handoffs=handoffs,
        )
        self._harness = harness

    def _config(self) -> dict[str, Any]:
        harness = {f.name: getattr(self._harness, f.name) for f in fields(self._harness)}
        return {**super()._config(), **harness}
