"""``Agent``: configuration plus the memory of one conversation (the agent is its own session).

```python
agent = Agent(model=OpenAILike(id="qwen2.5", base_url="http://127.0.0.1:8000/v1"),
              tools=[fetch], instructions="Answer briefly.")
print((await agent.run("What is on example.org?")).content)
print((await agent.run("And in one word?")).content)   # remembers the first turn
```

One agent object is one conversation (runs one at a time); ``clone()`` gives a fresh one with the
same configuration, ``as_tool()`` lets another agent delegate to it. ``Agent`` says how several
writers share a stored session.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, Self, cast, overload

from pydantic import TypeAdapter

from agentica._http import aclose_loop_sessions
from agentica.context import ContextPolicy, HistoryPolicy
from agentica.errors import ConcurrentRunError, SessionConflictError, UsageError
from agentica.limits import RunBudget, RunLimits
from agentica.messages import RunUsage
from agentica.models.base import Model, ModelSettings, OutputSchema
from agentica.models.registry import resolve_model
from agentica.run.approval import Decision, PendingCall, pending_calls
from agentica.run.capability import Capability
from agentica.run.child import run_child
from agentica.run.handoff import Handoff
from agentica.run.loop import run_events
from agentica.run.output import OutputSpec
from agentica.run.result import AgentMemory, OutT, RunRecord, RunResponse
from agentica.run.state import RunInput
from agentica.run.stream import RunStream
from agentica.storage.base import Storage, merge_state
from agentica.storage.factory import open_storage
from agentica.storage.records import SessionInfo
from agentica.tools.context import RunContext
from agentica.tools.execution import ToolSettings
from agentica.tools.function import Function
from agentica.tools.guardrails import AgentGuardrails, AnyGuardrail
from agentica.tools.toolkit import Tool, ToolLike, resolve_functions

__all__ = ["Agent", "Instructions"]

Instructions = str | Callable[[RunContext[Any]], str | Awaitable[str]]

_DEFAULT_LIMITS = RunLimits()
_DEFAULT_TOOL_SETTINGS = ToolSettings()
_DEFAULT_HISTORY = HistoryPolicy()
_DEFAULT_CONTEXT = ContextPolicy()
_DEFAULT_MODEL_SETTINGS = ModelSettings()
_SAVE_ATTEMPTS = 5  # merges in a row before giving up (another writer saved each time)


def _update_in_place(target: dict[str, Any], source: Mapping[str, Any], *, drop: bool) -> None:
    """Make ``target`` hold ``source``'s values, keeping the dicts and lists it already has.

    Capabilities may hold a dict of the session state (``StateBackend(agent.memory.state
    .setdefault("files", {}))``): loading or merging must update that very dict, not replace it
    with a copy the capability never sees (its later writes would silently not be saved). Dicts
    and lists present on both sides are updated in place, recursively; with ``drop`` keys that
    ``source`` lacks are removed (a merge), without it they are kept (a load).
    """
    if drop:
        for key in [key for key in target if key not in source]:
            del target[key]
    for key, value in source.items():
        old = target.get(key, _MISSING)
        if isinstance(old, dict) and isinstance(value, Mapping):
            _update_in_place(old, value, drop=drop)
        elif isinstance(old, list) and isinstance(value, list):
            if old != value:
                old[:] = value
        elif old is _MISSING or old != value or type(old) is not type(value):
            target[key] = value


_MISSING: Any = object()


def _same(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


class Agent(Generic[OutT]):
    """An LLM agent: a model, tools and instructions, plus the memory of its conversation.

    An agent holds no per-run state: each run keeps its own state inside the run loop, so the same
    model and tools serve any number of agents at once. One agent object is one conversation: a
    second run while one is in progress raises ``ConcurrentRunError``; ``clone()`` gives a fresh
    conversation with the same configuration, and ``as_tool()`` lets another agent delegate to this
    one.

    Several agents (in one process or several) may share a stored session. Each save states the
    session revision the agent last loaded or saved; when another writer saved in between, the agent
    reloads the session and merges: the other writer's runs come first, state keys (and files of the
    state backend) only one side changed are kept from that side. Only a value both changed
    differently fails the save with ``SessionConflictError``, which carries the unsaved run; the
    agent then reloads the stored session before its next run.

    ``Agent[OutT]`` is generic in its output type: ``Agent(output_type=Invoice)`` is an
    ``Agent[Invoice]`` whose ``run()`` returns a ``RunResponse[Invoice]``; without
    ``output_type`` it is an ``Agent[str]``.

    Args:
        model: the model to call: a model object (``OpenAIChat``, ``OpenAILike``, ``Claude``,
            ``LocalModel``, a scripted model), a model string (``"deepseek:deepseek-chat"``,
            ``"local"``), or nothing: then ``$AGENTICA_MODEL`` or the embedded local model; or
            a ``ModelRule`` choosing one per model call (``Escalate(cheap, strong)``,
            ``ByTask``). ``agent.model = ...`` switches models between runs.
        tools: functions, ``Function`` objects (``@tool``) and ``Tool`` groups.
        instructions: the system prompt, or a function of the ``RunContext`` returning it.
        name: a short name (used in events, logs and as the tool name of ``as_tool()``).
        description: what the agent does (the tool description of ``as_tool()``).
        model_settings: settings for every model call of this agent.
        limits: ``RunLimits`` for every run (a run may pass its own).
        tool_settings: how a turn's tool calls are executed (concurrency cap, timeout).
        history: how much of earlier runs is replayed (``HistoryPolicy``).
        context: how a run keeps inside the model's context window: result eviction,
            compaction with two thresholds, forced answer, repair (``ContextPolicy``; on by
            default, ``ContextPolicy.off()`` for none).
        output_type: a type the final answer must validate against (a pydantic model, a
            dataclass, ``list[int]``, ...); the run's ``output`` is then the validated value.
        capabilities: ``Capability`` objects adding tools, prompt text and hooks (workspace
            memory, the variable space, the deep-agent harness's features).
        storage: where the conversation is kept: a ``Storage`` or what ``open_storage`` takes
            (``"memory"``, ``"sqlite"`` for the default SQLite file, a ``.db`` path, a
            ``postgresql://`` URL, a directory of JSON files); with it, the agent loads
            the session ``(user_id, session_id)`` on first use and saves every run, so a new
            process with the same ids continues the conversation.
        user_id, session_id: who the conversation belongs to and which one it is (defaults:
            ``"default"`` and a fresh id).
        guardrails: ``@input_guardrail`` / ``@output_guardrail`` checks on the run and
            ``@tool_input_guardrail`` / ``@tool_output_guardrail`` checks on every tool call
            (``agentica.guardrails``).
        handoffs: agents this one may hand the conversation to (``Agent`` or ``Handoff``): each
            is a ``transfer_to_<name>`` tool; when the model calls one, the run goes on with
            that agent's instructions, tools and model, in this conversation. The next run
            starts with the agent active when the last one ended. Assignable
            (``billing.handoffs = [triage]`` for a way back).
    """

    __slots__ = (
        "__weakref__",
        "_functions",
        "_handoffs",
        "_loaded",
        "_model",
        "_output",
        "_revision",
        "_revisions",
        "_running",
        "_saved",
        "_tool_groups",
        "_tools",
        "capabilities",
        "context",
        "description",
        "guardrails",
        "history",
        "instructions",
        "limits",
        "memory",
        "model_settings",
        "name",
        "output_type",
        "session_id",
        "storage",
        "tool_settings",
        "user_id",
    )

    @overload
    def __init__(
        self: Agent[str],
        *,
        model: Model | str | None = ...,
        tools: Sequence[ToolLike] = ...,
        instructions: Instructions | None = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: None = None,
        capabilities: Sequence[Capability] = ...,
        storage: Storage | str | None = ...,
        user_id: str | None = ...,
        session_id: str | None = ...,
        guardrails: Sequence[AnyGuardrail] = ...,
        handoffs: Sequence[Agent[Any] | Handoff] = ...,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[OutT],
        *,
        model: Model | str | None = ...,
        tools: Sequence[ToolLike] = ...,
        instructions: Instructions | None = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: type[OutT],
        capabilities: Sequence[Capability] = ...,
        storage: Storage | str | None = ...,
        user_id: str | None = ...,
        session_id: str | None = ...,
        guardrails: Sequence[AnyGuardrail] = ...,
        handoffs: Sequence[Agent[Any] | Handoff] = ...,
    ) -> None: ...

    @overload
    def __init__(
        self: Agent[Any],
        *,
        model: Model | str | None = ...,
        tools: Sequence[ToolLike] = ...,
        instructions: Instructions | None = ...,
        name: str = ...,
        description: str | None = ...,
        model_settings: ModelSettings | None = ...,
        limits: RunLimits | None = ...,
        tool_settings: ToolSettings | None = ...,
        history: HistoryPolicy | None = ...,
        context: ContextPolicy | None = ...,
        output_type: Any,
        capabilities: Sequence[Capability] = ...,
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
        tools: Sequence[ToolLike] = (),
        instructions: Instructions | None = None,
        name: str = "agent",
        description: str | None = None,
        model_settings: ModelSettings | None = None,
        limits: RunLimits | None = None,
        tool_settings: ToolSettings | None = None,
        history: HistoryPolicy | None = None,
        context: ContextPolicy | None = None,
        output_type: Any = None,
        capabilities: Sequence[Capability] = (),
        storage: Storage | str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
        guardrails: Sequence[AnyGuardrail] = (),
        handoffs: Sequence[Agent[Any] | Handoff] = (),
    ) -> None:
        self.model = model  # resolved and checked by the setter
        if not isinstance(tools, list | tuple):
            raise UsageError("tools must be a list of functions, Function objects or Tool groups")
        self._tools = tuple(tools)
        self.instructions = instructions
        self.name = name
        self.description = description
        self.model_settings = model_settings or _DEFAULT_MODEL_SETTINGS
        self.limits = limits or _DEFAULT_LIMITS
        self.tool_settings = tool_settings or _DEFAULT_TOOL_SETTINGS
        self.history = history or _DEFAULT_HISTORY
        self.context = context or _DEFAULT_CONTEXT
        self.output_type = None if output_type is str else output_type
        self.capabilities = tuple(capabilities)
        self.storage = open_storage(storage) if isinstance(storage, str) else storage
        self.user_id: str = user_id if user_id is not None else "default"
        self.session_id: str = session_id if session_id is not None else uuid.uuid4().hex
        self.guardrails = AgentGuardrails.of(guardrails)
        self.handoffs = handoffs  # checked by the setter
        self.memory = AgentMemory()
        self._loaded = storage is None
        self._revision = 0  # of the stored session, as last loaded or saved
        self._saved: tuple[str | None, str] = (None, "{}")  # its summary and state (JSON)
        self._functions: Mapping[str, Function] | None = None
        self._revisions: tuple[int, ...] = ()
        self._tool_groups: tuple[Tool, ...] | None = None
        self._output: OutputSpec | None = None
        self._running = False

    # ----------------------------------------------------------------- configuration

    @property
    def model(self) -> Model:
        """The model the next model call uses: a model object, or a ``ModelRule`` choosing one
        per call (``Escalate``, ``ByTask``).

        Assign a model, a model string or a rule to switch models (``None``: the default
        model): the next run (or, during a run, the next model call) uses it, with the whole
        conversation so far. Messages are provider-neutral, so a conversation started on an
        OpenAI-compatible model goes on on Claude and back; a stored session keeps no model,
        so a new process may continue it on any model.
        """
        return self._model

    @model.setter
    def model(self, model: Model | str | None) -> None:
        resolved = resolve_model(model)
        if not callable(getattr(resolved, "response", None)):
            raise UsageError(
                f"Agent(model=...) needs a model, not {type(resolved).__name__}: e.g. "
                "OpenAILike(id='qwen2.5', base_url='http://127.0.0.1:8000/v1'), "
                "'deepseek:deepseek-chat', or nothing for the embedded local model"
            )
        self._model = resolved

    @property
    def tools(self) -> tuple[ToolLike, ...]:
        """The tools as given (use ``clone(tools=...)`` for an agent with other tools)."""
        return self._tools

    @property
    def toolkits(self) -> tuple[Tool, ...]:
        """The ``Tool`` groups among the tools."""
        return tuple(t for t in self._tools if isinstance(t, Tool))

    @property
    def handoffs(self) -> tuple[Handoff, ...]:
        """The agents this one may hand the conversation to, as ``Handoff`` values."""
        return self._handoffs

    @handoffs.setter
    def handoffs(self, targets: Sequence[Agent[Any] | Handoff]) -> None:
        if not isinstance(targets, list | tuple):
            raise UsageError("handoffs must be a list of Agent or Handoff objects")
        handoffs = []
        for target in targets:
            if isinstance(target, Agent):
                target = Handoff(target)
            if not isinstance(target, Handoff):
                raise UsageError(
                    f"handoffs takes Agent or Handoff objects, not {type(target).__name__} (a "
                    "Team is offered as a tool: tools=[team.as_tool()])"
                )
            handoffs.append(target)
        self._handoffs = tuple(handoffs)
        self._functions = None  # the transfer tools are among the functions

    @property
    def functions(self) -> Mapping[str, Function]:
        """Every tool function by name, the capabilities' included (resolved once, and again
        when a group's functions changed: an MCP server's tool list)."""
        groups = self._groups()
        revisions = tuple(g.revision for g in groups)
        if self._functions is None or revisions != self._revisions:
            extra = [t for c in self.capabilities for t in c.tools()]
            extra.extend(h.function() for h in self._handoffs)
            self._functions = resolve_functions([*self._tools, *extra])
            self._revisions = revisions
        return self._functions

    def _groups(self) -> tuple[Tool, ...]:
        """The ``Tool`` groups of the tools and the capabilities (found once)."""
        if self._tool_groups is None:
            extra = [t for c in self.capabilities for t in c.tools()]
            self._tool_groups = tuple(t for t in (*self._tools, *extra) if isinstance(t, Tool))
        return self._tool_groups

    async def prepare_tools(self) -> Mapping[str, Function]:
        """Make the tool groups ready (an MCP server connected and its tools listed: each
        group's ``prepare``, concurrently) and return every function by name. A run does this
        when it starts; call it to see the tools before a run."""
        waiting = [g for g in self._groups() if type(g).prepare is not Tool.prepare]
        if len(waiting) == 1:
            await waiting[0].prepare()
        elif waiting:  # each to its end; the first failure (in tool order) is raised
            outcomes = await asyncio.gather(*(g.prepare() for g in waiting), return_exceptions=True)
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
        return self.functions

    def output_adapter(self) -> tuple[TypeAdapter[Any], OutputSchema]:
        """The validator and schema for ``output_type`` (built once)."""
        spec = self.output_spec()
        if spec is None:
            raise UsageError(f"agent {self.name!r} has no output_type")
        return spec.adapter, spec.schema

    def output_spec(self) -> OutputSpec | None:
        """``output_type`` ready for runs (built once), or ``None`` for a text answer."""
        if self.output_type is None:
            return None
        if self._output is None:
            self._output = OutputSpec.of(self.output_type)
        return self._output

    @property
    def is_running(self) -> bool:
        return self._running

    @contextmanager
    def _run_scope(self) -> Iterator[None]:
        """Hold this conversation for one run (the run loop enters it): ``ConcurrentRunError``
        when a run holds it already."""
        if self._running:
            raise ConcurrentRunError(
                f"agent {self.name!r} is already running: an agent is one conversation. Await "
                "the running run first, or use agent.clone() for an independent session."
            )
        self._running = True
        try:
            yield
        finally:
            self._running = False

    @property
    def usage(self) -> RunUsage:
        """Totals of every run of this conversation."""
        return self.memory.usage

    def _config(self) -> dict[str, Any]:
        """The constructor arguments that rebuild this agent's configuration (``clone()``); a
        subclass with its own constructor returns its own arguments."""
        return {
            "model": self.model,
            "tools": self._tools,
            "instructions": self.instructions,
            "name": self.name,
            "description": self.description,
            "model_settings": self.model_settings,
            "limits": self.limits,
            "tool_settings": self.tool_settings,
            "history": self.history,
            "context": self.context,
            "output_type": self.output_type,
            "capabilities": self.capabilities,
            "storage": self.storage,
            "user_id": self.user_id,
            "session_id": self.session_id,
            "guardrails": self.guardrails.all,
            "handoffs": self._handoffs,
        }

    def _run_context(
        self,
        run_id: str,
        *,
        deps: Any,
        usage: RunUsage,
        input: str = "",
        budget: RunBudget | None = None,
    ) -> RunContext[Any]:
        """The ``RunContext`` of run ``run_id`` of this agent: the typed view its capabilities
        and tools get (session state, functions, model, storage, files, budget)."""
        return RunContext(
            run_id=run_id, deps=deps, usage=usage, agent=self, user_id=self.user_id,
            session_id=self.session_id, storage=self.storage, input=input, budget=budget,
            model=self.model, functions=self.functions, session_state=self.memory.state,
            toolkits=self.toolkits,
        )  # fmt: skip

    def _rebuilt(self, config: dict[str, Any]) -> Self:
        """An agent of this class from ``config``; a subclass with its own constructor that does
        not say how to rebuild it (``_config``) gets a plain ``Agent``, as ``clone()`` always
        gave before subclasses could rebuild themselves."""
        cls = type(self)
        if cls.__init__ is not Agent.__init__ and cls._config is Agent._config:
            return cast(Self, Agent(**config))
        return cls(**config)

    def clone(self, **changes: Any) -> Self:
        """A new agent of the same class (a fresh conversation: a new ``session_id`` unless
        given) with this configuration and ``changes`` applied."""
        config = self._config()
        unknown = set(changes) - set(config)
        if unknown:
            raise UsageError(f"clone() got unknown settings: {', '.join(sorted(unknown))}")
        config["session_id"] = uuid.uuid4().hex
        config.update(changes)
        twin = self._rebuilt(config)
        if (
            _same(twin._tools, self._tools)
            and _same(twin.capabilities, self.capabilities)
            and _same(twin._handoffs, self._handoffs)
        ):
            twin._functions = self.functions  # the same tool objects: resolved once
            twin._revisions = self._revisions
        if "output_type" not in changes:
            twin._output = self._output
        return twin

    # ----------------------------------------------------------------- persistence

    def _ids(self) -> tuple[str, str]:
        return self.user_id, self.session_id

    async def load(self) -> None:
        """Load the session from storage (done automatically before the first run)."""
        if self._loaded or self.storage is None:
            return
        data = await self.storage.load_session(*self._ids())
        if data is not None:
            self.memory.runs[:0] = data.runs
            self.memory.summary = data.summary
            _update_in_place(self.memory.state, data.state, drop=False)
            self._revision = data.revision
            self._saved = (data.summary, json.dumps(data.state))
        self._loaded = True

    async def save(self, record: RunRecord) -> None:
        """Append one finished run to storage (done automatically after every run).

        If another agent or process saved the session since this one loaded it, the two are
        merged (see the module's docstring); ``SessionConflictError`` when they cannot be.
        """
        if self.storage is None:
            return
        for _ in range(_SAVE_ATTEMPTS):
            try:
                self._revision = await self.storage.append_run(
                    *self._ids(), record, summary=self.memory.summary, state=self.memory.state,
                    expected_revision=self._revision,
                )  # fmt: skip
            except SessionConflictError as error:
                conflict = error
                await self._merge_stored(record, conflict)
            else:
                self._saved = (self.memory.summary, json.dumps(self.memory.state))
                return
        raise self._unsaved(
            record, conflict, f"other writers saved it {_SAVE_ATTEMPTS} times in a row while "
            "this agent merged their changes"
        )  # fmt: skip

    async def _merge_stored(self, record: RunRecord, conflict: SessionConflictError) -> None:
        """Take in what another writer saved: its runs before ``record``, its state merged with
        this agent's changes since the last load or save; raise if both changed one value."""
        assert self.storage is not None
        data = await self.storage.load_session(*self._ids())
        if data is None:
            raise self._unsaved(record, conflict, "another agent or process deleted it")
        if any(run.run_id == record.run_id for run in data.runs):
            raise self._unsaved(
                record, conflict, f"another agent or process saved it, and this run resumes "
                f"paused run {record.run_id!r}: a resumed run is only saved on top of the "
                "session it paused in"
            )  # fmt: skip
        base_summary, base_state = self._saved[0], json.loads(self._saved[1])
        summary, summary_clash = merge_state(base_summary, self.memory.summary, data.summary)
        mine = json.loads(json.dumps(self.memory.state))  # as stored: tuples are lists
        state, clashes = merge_state(base_state, mine, data.state)
        clashes = [*(["the summary"] if summary_clash else []), *(f"state{c}" for c in clashes)]
        if clashes:
            raise self._unsaved(
                record, conflict, "another agent or process saved it and both changed "
                f"{', '.join(clashes[:5])}{' ...' if len(clashes) > 5 else ''}"
            )  # fmt: skip
        self.memory.runs[:] = [*data.runs, record]
        self.memory.summary = summary
        _update_in_place(self.memory.state, state, drop=True)  # capabilities may hold parts
        self._revision = data.revision
        self._saved = (data.summary, json.dumps(data.state))

    def _unsaved(
        self, record: RunRecord, conflict: SessionConflictError, why: str
    ) -> SessionConflictError:
        """The error for a run that could not be saved; the agent reloads before its next run."""
        self.memory.clear()
        self._loaded = False
        self._revision = 0
        self._saved = (None, "{}")
        user_id, session_id = self._ids()
        return SessionConflictError(
            f"session {session_id!r} of user {user_id!r} was not saved: {why} since this agent "
            f"loaded it. This run ({record.run_id!r}) is not in the session: it is in this "
            "error's .run (output, messages, tool calls). The agent reloads the stored session "
            "before its next run: call run() again to redo it on top of the other writer's "
            "changes, or give each process its own session_id",
            user_id=user_id, session_id=session_id, expected=conflict.expected,
            found=conflict.found, run=record,
        )  # fmt: skip

    async def fork(
        self, *, at: int | None = None, session_id: str | None = None, title: str | None = None
    ) -> Self:
        """A new agent with this configuration on a new branch of this conversation.

        The branch holds the first ``at`` runs (``None``: all) with the summary and state as
        they were after run ``at``, and the session's variables as they are now; it is stored
        under ``session_id`` (default: a new id) and names this session as its parent
        (``storage.branches``). Both conversations then go on independently.
        """
        storage = self._storage_for("fork")
        await self.load()
        new_id = session_id if session_id is not None else uuid.uuid4().hex
        await storage.fork_session(*self._ids(), new_id, title=title, at=at)
        twin = self.clone(session_id=new_id)
        await twin.load()
        return twin

    async def rewind(self, *, to: int, branch_id: str | None = None) -> SessionInfo:
        """Drop this conversation's runs after run ``to``, keeping them in a new branch
        session; the branch's info (``branch.session_id``: ``<session_id>.<revision>`` unless
        ``branch_id`` is given).

        The agent's memory is reloaded: its first ``to`` runs, with the summary and state as
        they were after run ``to``. Another agent holding the session as it was gets a
        ``SessionConflictError`` on its next save and merges its run on top of the rewound
        session. If another writer saved since this agent loaded, nothing is rewound: the
        agent reloads and raises ``SessionConflictError`` (check the runs, and rewind again).
        """
        storage = self._storage_for("rewind")
        await self.load()
        try:
            branch = await storage.rewind_session(
                *self._ids(), to, branch_id=branch_id, expected_revision=self._revision
            )
        except SessionConflictError:
            await self._reload(storage)
            raise
        await self._reload(storage)
        return branch

    def _storage_for(self, action: str) -> Storage:
        if self.storage is None:
            raise UsageError(
                f"agent.{action}() works on a stored session: give the agent a storage "
                "(Agent(storage='memory'), a .db path or a URL)"
            )
        if self._running:
            raise ConcurrentRunError(
                f"agent {self.name!r} is running: await the run before agent.{action}()"
            )
        return self.storage

    async def _reload(self, storage: Storage) -> None:
        """Replace the memory with the stored session (keeping the state's dicts and lists)."""
        data = await storage.load_session(*self._ids())
        self.memory.runs[:] = data.runs if data is not None else []
        self.memory.summary = data.summary if data is not None else None
        state = data.state if data is not None else {}
        _update_in_place(self.memory.state, state, drop=True)
        self._revision = data.revision if data is not None else 0
        self._saved = (self.memory.summary, json.dumps(state))
        self._loaded = True

    # ----------------------------------------------------------------- running

    def run_stream(
        self,
        input: RunInput,
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        model_settings: ModelSettings | None = None,
        stream_model: bool = True,
    ) -> RunStream[OutT]:
        """Start a run and return its ``RunStream`` of events (the run starts when iterated)."""
        return RunStream(
            run_events(
                self,
                input,
                deps=deps,
                limits=limits,
                model_settings=model_settings,
                stream=stream_model,
            )
        )

    async def run(
        self,
        input: RunInput,
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResponse[OutT]:
        """Run to completion and return the ``RunResponse`` (consumes ``run_stream``)."""
        stream = self.run_stream(
            input, deps=deps, limits=limits, model_settings=model_settings, stream_model=False
        )
        async with stream:
            async for _ in stream:
                pass
        return stream.response

    def run_sync(
        self,
        input: RunInput,
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResponse[OutT]:
        """``run()`` for scripts: starts an event loop, runs, closes the loop's connections."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise UsageError(
                "run_sync() cannot be used inside a running event loop (async code, Jupyter): "
                "use `await agent.run(...)` instead"
            )

        async def main() -> RunResponse[OutT]:
            try:
                return await self.run(
                    input, deps=deps, limits=limits, model_settings=model_settings
                )
            finally:
                await aclose_loop_sessions()

        return asyncio.run(main())

    def resume_stream(
        self,
        decisions: Mapping[str, Decision],
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        model_settings: ModelSettings | None = None,
        stream_model: bool = True,
    ) -> RunStream[OutT]:
        """Continue the paused run with a ``Decision`` per pending call id (streamed)."""
        return RunStream(
            run_events(
                self,
                None,
                deps=deps,
                limits=limits,
                model_settings=model_settings,
                stream=stream_model,
                decisions=decisions,
            )
        )

    async def resume(
        self,
        decisions: Mapping[str, Decision],
        *,
        deps: Any = None,
        limits: RunLimits | None = None,
        model_settings: ModelSettings | None = None,
    ) -> RunResponse[OutT]:
        """Continue the paused run with a ``Decision`` per pending call id.

        Works in a new process too: the paused run is part of the saved session.
        """
        stream = self.resume_stream(
            decisions, deps=deps, limits=limits, model_settings=model_settings, stream_model=False
        )
        async with stream:
            async for _ in stream:
                pass
        return stream.response

    async def pending(self) -> list[PendingCall]:
        """The calls the paused run waits on (empty when the last run is not paused)."""
        return await pending_calls(self)

    def as_tool(self, *, name: str | None = None, description: str | None = None) -> Function:
        """This agent as a tool another agent can call; each call runs in a fresh conversation.

        Sub-agent calls run in the same TaskGroup as the caller's other tools, their usage is
        added to the calling run's usage, and they share the calling run's limits (the budget of
        its whole tree, ``RunLimits``).
        """
        template = self

        async def delegate(ctx: RunContext[Any], task: str) -> str:
            """Give a task to the agent.

            Args:
                task: the complete task, with every detail the agent needs to do it alone.
            """
            response = await run_child(template.clone(), task, ctx)
            return response.content or ""

        tool_name = name or re.sub(r"[^a-zA-Z0-9_-]", "_", self.name)[:64] or "agent"
        return Function.from_callable(
            delegate,
            name=tool_name,
            description=description
            or self.description
            or f"Give a self-contained task to the '{self.name}' agent and get its final answer.",
        )

    def __repr__(self) -> str:
        return (
            f"Agent(name={self.name!r}, model={self.model!r}, tools={list(self.functions)}, "
            f"runs={len(self.memory.runs)})"
        )
