"""``Workflow``: typed steps in a graph, run durably, resumed after a crash, failure or pause.

A workflow is a declaration (its state type, steps and ways out, its store); each run lives in
the store under its run id, so one ``Workflow`` object serves any number of runs at once, and a
new process that declares the same workflow resumes them. ``run_stream`` / ``resume_stream``
yield events; ``run`` / ``resume`` consume them and return the ``WorkflowResult``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing, suppress
from pathlib import Path
from typing import Any, Generic, Protocol, Self, TypeAlias, TypeVar, overload

from agentica.errors import UsageError
from agentica.workflows.engine import Execution, Lane, Record, StepContext, result_of
from agentica.workflows.events import (
    WorkflowCompleted,
    WorkflowEvent,
    WorkflowPaused,
    WorkflowStarted,
)
from agentica.workflows.graph import Fork, Graph, Route, StepSpec, WorkflowGraphError
from agentica.workflows.records import Approval, WorkflowResult
from agentica.workflows.state import StateCodec, Update
from agentica.workflows.store import InMemoryWorkflowStore, WorkflowStore, open_workflow_store

__all__ = ["Runnable", "Workflow"]

S = TypeVar("S")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

StepFunction: TypeAlias = (
    "Callable[[S, StepContext], Awaitable[Update[S]]] | Callable[[S], Awaitable[Update[S]]]"
)


class Runnable(Protocol[R_co]):
    """Anything with ``async run(input)``: an ``Agent``, a team, another runner."""

    def run(self, input: str, /) -> Awaitable[R_co]: ...


class Workflow(Generic[S]):
    """A graph of typed steps over a state of type ``state_type`` (pydantic model or dataclass).

    ```python
    flow = Workflow("triage", Ticket, store="workflows.db")
    flow.step("classify", classify)                       # async (state[, ctx]) -> update
    flow.step("answer", agent, prompt=lambda s: s.text, update=lambda s, r: {"reply": r.content})
    flow.approval("review", "Send this reply?", apply=lambda s, a: {"approved": a.approved})
    flow.route("classify", lambda s: s.kind, {"question": "answer", "spam": END})
    flow.edge("answer", "review")
    result = await flow.run(Ticket(text="..."))
    ```

    The first step added is the start; a step with no way out ends the run. ``store`` is a
    ``WorkflowStore``, ``"memory"`` (the default: this process only), a database URL or a
    ``.db`` path. Steps are async: a plain ``def`` would block the event loop.
    """

    def __init__(
        self,
        name: str,
        state_type: type[S],
        *,
        store: WorkflowStore | str | os.PathLike[str] | None = None,
    ) -> None:
        if not name or len(name) > 200:
            raise UsageError("a workflow needs a name of 1 to 200 characters")
        self.name = name
        self.codec = StateCodec(state_type)
        if store is None:
            store = InMemoryWorkflowStore()
        elif isinstance(store, str | os.PathLike):
            store = open_workflow_store(store)
        self.store: WorkflowStore = store
        self._graph = Graph()
        self._checked = False

    def __repr__(self) -> str:
        steps = list(self._graph.steps)
        return f"Workflow({self.name!r}, {self.codec.state_type.__name__}, steps={steps})"

    # -- building -------------------------------------------------------------------------------

    @overload
    def step(
        self, name: str, fn: StepFunction[S], *, max_iterations: int | None = None
    ) -> Self: ...

    @overload
    def step(
        self,
        name: str,
        fn: Runnable[R],
        *,
        prompt: Callable[[S], str],
        update: Callable[[S, R], Update[S]],
        max_iterations: int | None = None,
    ) -> Self: ...

    def step(
        self,
        name: str,
        fn: Any,
        *,
        prompt: Callable[[S], str] | None = None,
        update: Callable[[S, Any], Update[S]] | None = None,
        max_iterations: int | None = None,
    ) -> Self:
        """Add a step that runs ``fn``.

        - an async function ``(state)`` or ``(state, ctx: StepContext)`` returning the new
          state, a dict of changed fields, or ``None`` (the state as it is now);
        - or an agent or team (anything with ``async run(input)``): ``prompt(state)`` is its
          input, ``update(state, response)`` maps its answer back into the state. An agent
          (or team) runs as its ``clone(session_id="<run_id>/<step>")``: one conversation per
          run and step (its loop iterations continue it; other runs never see it; with a
          storage on the agent it survives a crash).

        ``max_iterations`` bounds how often the step may run in one run; every cycle of the
        graph needs one bounded step.
        """
        if _is_async_callable(fn):
            if prompt is not None or update is not None:
                raise UsageError(
                    f"step {name!r}: prompt= and update= are for agents and teams; a function "
                    "step reads and returns the state itself"
                )
            spec = StepSpec(name=name, kind="function", call=fn, takes_context=_arity(fn) >= 2,
                            max_iterations=max_iterations)  # fmt: skip
        elif _is_async_callable(getattr(fn, "run", None)):
            if prompt is None or update is None:
                raise UsageError(
                    f"step {name!r} runs {type(fn).__name__}: give prompt=lambda state: '...' "
                    "(its input) and update=lambda state, response: {...} (what goes back into "
                    "the state)"
                )
            spec = StepSpec(name=name, kind="runnable", call=fn, prompt=prompt, update=update,
                            max_iterations=max_iterations)  # fmt: skip
        else:
            raise UsageError(
                f"step {name!r}: give an async function (state[, ctx]) -> new state | dict | "
                f"None, or an agent/team with async run(), not {fn!r}; a plain def would block "
                "the event loop (make it async def, and use asyncio.to_thread inside for "
                "blocking work)"
            )
        return self._add(spec)

    def approval(
        self,
        name: str,
        question: str | Callable[[S], str],
        *,
        apply: Callable[[S, Approval], Update[S]],
        max_iterations: int | None = None,
    ) -> Self:
        """Add a human approval step: the run pauses there (status ``"paused"``, stored) until
        ``resume(run_id, approval=Approval(...))``, possibly from another process; then
        ``apply(state, approval)`` puts the decision into the state (a route can follow it)."""
        spec = StepSpec(name=name, kind="approval", question=question, update=apply,
                        max_iterations=max_iterations)  # fmt: skip
        return self._add(spec)

    def edge(self, source: str, target: str) -> Self:
        """After ``source``, run ``target`` (or ``END``)."""
        self._graph.add_exit(source, target)
        return self._changed()

    def route(self, source: str, choose: Callable[[S], str], targets: Mapping[str, str]) -> Self:
        """After ``source``, ``choose(state)`` returns a label; ``targets[label]`` (a step or
        ``END``) runs next. ``choose`` should be quick and pure: it runs on the event loop."""
        self._graph.add_exit(source, Route(choose, dict(targets)))
        return self._changed()

    def parallel(
        self,
        source: str,
        branches: Sequence[str],
        *,
        join: str,
        merge: Callable[[S, list[S]], S] | None = None,
    ) -> Self:
        """After ``source``, run the ``branches`` concurrently, each on its own copy of the state
        and along its own edges until it reaches ``join``; then merge and run ``join``.

        A failing branch does not stop its siblings. Default merge: every field a branch
        changed, and a failure when two branches changed one field differently;
        ``merge(state_before, [branch states in order])`` returns the merged state instead.
        """
        self._graph.add_exit(source, Fork(list(branches), join, merge))
        return self._changed()

    def _add(self, spec: StepSpec) -> Self:
        self._graph.add_step(spec)
        return self._changed()

    def _changed(self) -> Self:
        self._checked = False
        return self

    def validate(self) -> None:
        """Raise ``WorkflowGraphError`` if the graph cannot run (runs do this first)."""
        if not self._checked:
            self._graph.validate()
            self._checked = True

    def mermaid(self) -> str:
        """The graph as Mermaid flowchart text."""
        self.validate()
        return self._graph.mermaid()

    def draw_png(self, path: str | os.PathLike[str]) -> Path:
        """Draw the graph into a PNG file (needs matplotlib: ``pip install 'agentica[eval]'``);
        blocking: call it with ``asyncio.to_thread`` from async code."""
        from agentica.workflows.draw import draw_png

        self.validate()
        return draw_png(self._graph, Path(path), title=self.name)

    # -- running --------------------------------------------------------------------------------

    async def run(self, state: S, *, run_id: str | None = None) -> WorkflowResult[S]:
        """Start a run from ``state``; it ends completed or paused (``WorkflowFailed`` if a step
        failed: the run is stored and ``resume`` continues it after a fix)."""
        return await _final(self.run_stream(state, run_id=run_id))

    async def resume(
        self, run_id: str, *, approval: Approval | Mapping[str, Approval] | None = None
    ) -> WorkflowResult[S]:
        """Continue a stored run from its last completed step: after a crash (also ``kill -9``),
        a failure (once fixed) or a pause (give ``approval``; a dict by step name when several
        approval steps wait). A completed run's result is returned as it is."""
        return await _final(self.resume_stream(run_id, approval=approval))

    def run_stream(
        self, state: S, *, run_id: str | None = None
    ) -> AsyncGenerator[WorkflowEvent, None]:
        """``run`` as events (use ``contextlib.aclosing`` if you may stop early)."""
        self.validate()
        run_id = run_id or uuid.uuid4().hex
        _check_run_id(run_id)
        encoded = self.codec.encode(state)
        record = Record(run_id=run_id, workflow=self.name, status="running",
                        main=Lane(self._graph.start, encoded))  # fmt: skip

        async def start(emit: Callable[[WorkflowEvent], None]) -> WorkflowEvent:
            revision = await self.store.save_run(
                run_id, self.name, "running", record.to_json(), expected_revision=0
            )
            emit(WorkflowStarted(run_id, self.name, resumed=False))
            return await self._drive(record, revision, emit)

        return _events(start)

    def resume_stream(
        self, run_id: str, *, approval: Approval | Mapping[str, Approval] | None = None
    ) -> AsyncGenerator[WorkflowEvent, None]:
        """``resume`` as events."""
        self.validate()

        async def start(emit: Callable[[WorkflowEvent], None]) -> WorkflowEvent:
            record, revision = await self._load(run_id)
            if record.status == "completed":
                return WorkflowCompleted(await self._result(record))
            _prepare_resume(record, approval)
            revision = await self.store.save_run(
                run_id, self.name, "running", record.to_json(), expected_revision=revision
            )
            emit(WorkflowStarted(run_id, self.name, resumed=True))
            return await self._drive(record, revision, emit)

        return _events(start)

    async def inspect(self, run_id: str) -> WorkflowResult[S]:
        """The stored run ``run_id``: status, state, next steps, pending approvals, history."""
        record, _ = await self._load(run_id)
        return await self._result(record)

    async def _load(self, run_id: str) -> tuple[Record, int]:
        stored = await self.store.load_run(run_id)
        if stored is None:
            raise UsageError(f"there is no workflow run {run_id!r} in {self.store!r}")
        if stored.workflow != self.name:
            raise UsageError(
                f"run {run_id!r} belongs to workflow {stored.workflow!r}, not {self.name!r}"
            )
        record = await asyncio.to_thread(Record.from_json, stored.record)
        for lane in record.lanes():
            if lane.next is not None and lane.next not in self._graph.steps:
                raise UsageError(
                    f"run {run_id!r} stopped before step {lane.next!r}, which this workflow no "
                    f"longer has: add the step back to resume it (steps: "
                    f"{list(self._graph.steps)})"
                )
        return record, stored.revision

    async def _drive(
        self, record: Record, revision: int, emit: Callable[[WorkflowEvent], None]
    ) -> WorkflowEvent:
        execution = Execution(self._graph, self.codec, self.store, record, revision, emit)
        await execution.drive()
        result = await self._result(record)
        return WorkflowPaused(result) if record.status == "paused" else WorkflowCompleted(result)

    async def _result(self, record: Record) -> WorkflowResult[S]:
        return result_of(record, self.codec, await self.store.load_steps(record.run_id))


def _prepare_resume(record: Record, approval: Approval | Mapping[str, Approval] | None) -> None:
    """Apply the decisions and count a new attempt of every step that may have started."""
    waiting = [lane for lane in record.lanes() if lane.waiting]
    join = record.main.next if record.section is not None else None
    for lane in record.lanes():
        if lane.next is not None and lane.next != join and not lane.waiting:
            key = record.key(lane.next)
            record.attempts[key] = record.attempts.get(key, 1) + 1
    if approval is None and waiting:
        steps = [lane.next for lane in waiting]
        where = "is paused" if record.status == "paused" else "also waits"
        raise UsageError(
            f"run {record.run_id!r} {where} at approval step(s) {steps} (inspect() shows the "
            "questions): resume it with approval=Approval(approved=True or False, comment=...)"
        )
    if approval is not None and not waiting:
        raise UsageError(f"run {record.run_id!r} is {record.status}, not waiting for an approval")
    decisions: Mapping[str, Approval]
    if isinstance(approval, Approval):
        if len(waiting) > 1:
            raise UsageError(
                f"{len(waiting)} approval steps wait ({[lane.next for lane in waiting]}): give "
                "approval={step: Approval(...)} for each"
            )
        decisions = {str(waiting[0].next): approval}
    else:
        decisions = approval or {}
    for lane in waiting:
        assert lane.next is not None
        decision = decisions.get(lane.next)
        if decision is None:
            raise UsageError(f"no approval given for step {lane.next!r}")
        record.decisions[record.key(lane.next)] = {
            "approved": decision.approved,
            "comment": decision.comment,
        }
        lane.waiting = False
    record.status = "running"
    record.errors = []
    record.pending = []


async def _events(
    start: Callable[[Callable[[WorkflowEvent], None]], Awaitable[WorkflowEvent]],
) -> AsyncGenerator[WorkflowEvent, None]:
    """Run ``start(emit)`` in a task and yield what it emits, then its final event."""
    queue: asyncio.Queue[WorkflowEvent | None] = asyncio.Queue()
    final: list[WorkflowEvent] = []

    async def body() -> None:
        try:
            final.append(await start(queue.put_nowait))
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(body())
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task  # raises WorkflowFailed, StorageError, ...
        yield final[0]
    finally:
        if not task.done():  # the consumer stopped early or was cancelled: stop the run
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task


async def _final(stream: AsyncGenerator[WorkflowEvent, None]) -> WorkflowResult[Any]:
    async with aclosing(stream) as events:
        async for event in events:
            if isinstance(event, WorkflowCompleted | WorkflowPaused):
                return event.result
    raise AssertionError("a workflow stream ends with its result")  # pragma: no cover


def _check_run_id(run_id: str) -> None:
    if not run_id or len(run_id) > 200 or "/" in run_id:
        raise UsageError(f"run_id {run_id!r}: give 1 to 200 characters without '/'")


def _is_async_callable(fn: object) -> bool:
    if fn is None:
        return False
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    return not inspect.isfunction(fn) and inspect.iscoroutinefunction(call)


def _arity(fn: Callable[..., Any]) -> int:
    """How many positional arguments ``fn`` takes (2 or more: it gets the ``StepContext``)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return 2
    count = sum(1 for p in parameters if p.kind in kinds)
    if count not in (1, 2):
        raise WorkflowGraphError(
            f"a step function takes (state) or (state, ctx), not {count} arguments: {fn!r}"
        )
    return count
