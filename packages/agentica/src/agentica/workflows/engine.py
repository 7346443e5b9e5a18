"""Running a workflow: one ``Execution`` drives one run from its stored record to its next stop.

The run's record (state, next step, visits, attempts, recorded side effects, decisions) is saved
after every step, together with that step's history row, so a run killed at any point resumes
from the last completed step. A step execution has the idempotency key
``<run_id>/<step>/<iteration>``: the same on every attempt, so ``ctx.once(name, effect)`` replays
an effect's stored result instead of running it again. Inside a parallel section every branch is
a lane running in a ``TaskGroup`` whose tasks catch their own failures (a failing branch never
cancels a sibling); when every lane reached the join their changes are merged.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentica.errors import AgenticaError, StorageError, UsageError
from agentica.workflows.events import StepCompleted, StepFailed, StepStarted, WorkflowEvent
from agentica.workflows.graph import END, Graph, StepSpec, route_target
from agentica.workflows.records import (
    Approval,
    PendingApproval,
    RunStatus,
    StepRecord,
    WorkflowResult,
)
from agentica.workflows.state import StateCodec, merge_changes
from agentica.workflows.store import WorkflowStore

__all__ = ["Execution", "Record", "StepContext", "WorkflowFailed"]

S = TypeVar("S")
T = TypeVar("T")

_FORMAT = 1


class WorkflowFailed(AgenticaError):
    """A step raised, a loop bound was reached or parallel branches could not be merged; the run
    is stored as failed at that step. Fix the cause and ``resume(run_id)``: the completed steps
    do not run again.

    Attributes:
        run_id: the run.
        steps: the steps that failed (several when parallel branches failed).
        errors: ``"step 'x': <type>: <message>"`` for each.
    """

    def __init__(self, message: str, *, run_id: str, steps: list[str], errors: list[str]) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.steps = steps
        self.errors = errors


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a step knows about its execution (the optional second argument of a step).

    Attributes:
        run_id, workflow, step: where it runs.
        iteration: which time this step runs in this run (1 unless it is in a loop).
        attempt: 1, or more when the run was resumed after a crash or failure at this step.
        key: the idempotency key ``<run_id>/<step>/<iteration>``, the same on every attempt:
            give it to an external service that deduplicates requests.
    """

    run_id: str
    workflow: str
    step: str
    iteration: int
    attempt: int
    key: str
    _execution: Execution[Any] = field(repr=False, compare=False)

    async def once(self, name: str, effect: Callable[[], Awaitable[T]]) -> T:
        """Run ``effect`` once for this step execution and store its result (JSON values).

        On a later attempt (after a crash or a failure of this step) the stored result is
        returned and ``effect`` does not run. The remaining window: a crash after ``effect``
        finished and before its result was stored runs it again; an effect that must never
        repeat also passes ``ctx.key`` to a service that deduplicates on it. The result comes
        back as JSON would give it (a tuple as a list), also the first time.
        """
        return await self._execution.once(f"{self.key}/{name}", name, effect)  # type: ignore[no-any-return]


# -- the stored record ----------------------------------------------------------------------------


@dataclass(slots=True)
class Lane:
    """A path of execution: the main path, or one branch of a parallel section."""

    next: str | None
    state: dict[str, Any]
    waiting: bool = False  # stopped at an approval step with no decision
    value: Any = field(default=None, repr=False)  # ``state`` decoded (not stored)

    def to_json(self) -> dict[str, Any]:
        return {"next": self.next, "state": self.state, "waiting": self.waiting}


@dataclass(slots=True)
class Section:
    """A running parallel section: the step it fanned out after and its branches' lanes."""

    after: str
    lanes: dict[str, Lane]


@dataclass(slots=True, kw_only=True)
class Record:
    """Everything a run needs to continue, as stored after every step."""

    run_id: str
    workflow: str
    status: RunStatus
    main: Lane
    section: Section | None = None
    visits: dict[str, int] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    once: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, dict[str, Any]] = field(default_factory=dict)
    pending: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seq: int = 0

    def lanes(self) -> list[Lane]:
        return list(self.section.lanes.values()) if self.section else [self.main]

    def to_json(self) -> str:
        section = None
        if self.section is not None:
            lanes = {head: lane.to_json() for head, lane in self.section.lanes.items()}
            section = {"after": self.section.after, "lanes": lanes}
        return json.dumps({
            "format": _FORMAT, "run_id": self.run_id, "workflow": self.workflow,
            "status": self.status, "main": self.main.to_json(), "section": section,
            "visits": self.visits, "attempts": self.attempts, "once": self.once,
            "decisions": self.decisions, "pending": self.pending, "errors": self.errors,
            "seq": self.seq,
        }, ensure_ascii=False)  # fmt: skip

    @classmethod
    def from_json(cls, text: str) -> Record:
        try:
            data = json.loads(text)
            if data.get("format") != _FORMAT:
                raise StorageError(
                    f"workflow record format {data.get('format')!r} is not {_FORMAT}: it was "
                    "written by another version of agentica"
                )
            section = None
            if data["section"] is not None:
                lanes = {head: Lane(**lane) for head, lane in data["section"]["lanes"].items()}
                section = Section(after=data["section"]["after"], lanes=lanes)
            return cls(
                run_id=data["run_id"], workflow=data["workflow"], status=data["status"],
                main=Lane(**data["main"]), section=section, visits=data["visits"],
                attempts=data["attempts"], once=data["once"], decisions=data["decisions"],
                pending=data["pending"], errors=data["errors"], seq=data["seq"],
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise StorageError(f"a stored workflow run is damaged: {exc!r}") from None

    def key(self, step: str) -> str:
        """The idempotency key of the next execution of ``step``."""
        return f"{self.run_id}/{step}/{self.visits.get(step, 0) + 1}"


# -- the execution ------------------------------------------------------------------------------


class Execution(Generic[S]):
    """Drives one run until it completes, pauses at approval steps or fails."""

    def __init__(
        self,
        graph: Graph,
        codec: StateCodec[S],
        store: WorkflowStore,
        record: Record,
        revision: int,
        emit: Callable[[WorkflowEvent], None],
    ) -> None:
        self.graph = graph
        self.codec = codec
        self.store = store
        self.rec = record
        self.revision = revision
        self.emit = emit
        self.lock = asyncio.Lock()
        self.failures: list[tuple[str, BaseException]] = []
        self.runners: dict[str, Any] = {}

    async def save(self, step: StepRecord | None = None) -> None:
        """Store the record (and ``step``); the caller holds ``self.lock``."""
        rec = self.rec
        self.revision = await self.store.save_run(
            rec.run_id, rec.workflow, rec.status, rec.to_json(),
            expected_revision=self.revision, step=step,
        )  # fmt: skip

    async def drive(self) -> None:
        """Run steps until the run stops; ``WorkflowFailed`` if it stopped on failures."""
        rec = self.rec
        while rec.status == "running":
            if rec.section is not None:
                join = self.graph.forks[rec.section.after].join
                await self._run_lanes(list(rec.section.lanes.values()), join)
            else:
                await self._run_lane(rec.main, None)
            await self._settle()

    async def _run_lanes(self, lanes: list[Lane], join: str) -> None:
        crashed: list[BaseException] = []

        async def guarded(lane: Lane) -> None:
            try:  # a step's own failure is recorded by _run_step; this catches the store's
                await self._run_lane(lane, join)
            except Exception as exc:
                crashed.append(exc)

        async with asyncio.TaskGroup() as group:
            for lane in lanes:
                group.create_task(guarded(lane))
        if crashed:
            raise crashed[0]

    async def _run_lane(self, lane: Lane, stop: str | None) -> None:
        while lane.next is not None and lane.next != stop and not lane.waiting:
            if not await self._run_step(lane, lane.next):
                return
            if lane is self.rec.main and self.rec.section is not None:
                return  # it fanned out: the section's lanes go on

    async def _settle(self) -> None:
        """After a round of lanes: fail, pause, join the parallel section, or complete."""
        rec = self.rec
        async with self.lock:
            waiting = [lane for lane in rec.lanes() if lane.waiting]
            rec.pending = [self._question(lane) for lane in waiting]  # a failed run's too
            if self.failures:
                rec.status = "failed"
                await self.save()
                raise self._failed()
            if waiting:
                rec.status = "paused"
                await self.save()
                return
            if rec.section is not None:
                join = self.graph.forks[rec.section.after].join
                if all(lane.next == join for lane in rec.section.lanes.values()):
                    await self._join()
                return  # else it has just fanned out: its lanes run next
            if rec.main.next is None:
                rec.status = "completed"
                await self.save()

    async def _join(self) -> None:
        """Merge the branches' states into the main state (the caller holds the lock)."""
        rec = self.rec
        assert rec.section is not None
        fork = self.graph.forks[rec.section.after]
        lanes = [rec.section.lanes[head] for head in fork.branches]
        try:
            if fork.merge is None:
                merged = merge_changes(
                    rec.main.state,
                    [(h, lane.state) for h, lane in zip(fork.branches, lanes, strict=True)],
                )
                value = self.codec.decode(merged)
            else:
                base = self.codec.decode(rec.main.state)
                value = fork.merge(base, [self.codec.decode(lane.state) for lane in lanes])
                merged = self.codec.encode(value)
                value = self.codec.decode(merged)
        except Exception as exc:
            key = rec.key(fork.join)
            now = time.time()
            await self._record_failure(fork.join, key, now, exc, what="merging the branches")
            rec.status = "failed"
            await self.save()
            raise self._failed() from exc
        rec.main.state, rec.main.value = merged, value
        rec.section = None
        await self.save()

    def _question(self, lane: Lane) -> dict[str, str]:
        assert lane.next is not None
        spec = self.graph.steps[lane.next]
        question = spec.question
        if callable(question):
            try:
                question = question(self._value(lane))
            except Exception as exc:  # the pause must still be stored
                question = f"(the question of step {spec.name!r} failed: {exc!r})"
        return {"step": lane.next, "key": self.rec.key(lane.next), "question": str(question)}

    def _value(self, lane: Lane) -> Any:
        if lane.value is None:
            lane.value = self.codec.decode(lane.state)
        return lane.value

    def _failed(self) -> WorkflowFailed:
        steps = [name for name, _ in self.failures]
        errors = list(self.rec.errors)
        message = (
            f"workflow {self.rec.workflow!r} run {self.rec.run_id!r} failed at "
            f"{', '.join(repr(s) for s in steps)}: {'; '.join(errors)}. Fix the cause and "
            f"resume({self.rec.run_id!r}): completed steps do not run again"
        )
        failed = WorkflowFailed(message, run_id=self.rec.run_id, steps=steps, errors=errors)
        failed.__cause__ = self.failures[0][1]
        return failed

    # -- one step -------------------------------------------------------------------------------

    async def _run_step(self, lane: Lane, name: str) -> bool:
        """Run step ``name`` of ``lane``; whether it completed (the lane may go on)."""
        rec = self.rec
        spec = self.graph.steps[name]
        iteration = rec.visits.get(name, 0) + 1
        key = f"{rec.run_id}/{name}/{iteration}"
        started = time.time()
        if spec.max_iterations is not None and iteration > spec.max_iterations:
            bound = UsageError(
                f"step {name!r} would run a {_ordinal(iteration)} time but has "
                f"max_iterations={spec.max_iterations}: route out of the loop earlier, or raise "
                "the bound and resume"
            )
            async with self.lock:
                await self._record_failure(name, key, started, bound)
            return False
        decision = rec.decisions.get(key)
        if spec.kind == "approval" and decision is None:
            lane.waiting = True
            return False
        attempt = rec.attempts.get(key, 1)
        self.emit(StepStarted(rec.run_id, name, key, iteration, attempt))
        clock = time.perf_counter()
        ctx = StepContext(rec.run_id, rec.workflow, name, iteration, attempt, key, self)
        try:
            state = self._value(lane)
            lane.value = None  # the step may change it in place, then fail
            update = await self._call(spec, state, ctx, decision)
            new, value = self.codec.apply(state, update, name)
            following = self._following(name, value)
        except Exception as exc:
            async with self.lock:
                await self._record_failure(name, key, started, exc)
            return False
        async with self.lock:
            changes = {k: v for k, v in new.items() if lane.state.get(k) != v}
            lane.state, lane.value, lane.next = new, value, following
            rec.visits[name] = iteration
            rec.attempts.pop(key, None)
            rec.decisions.pop(key, None)
            for done in [k for k in rec.once if k.startswith(key + "/")]:
                del rec.once[done]
            if lane is rec.main and name in self.graph.forks:
                heads = self.graph.forks[name].branches
                rec.section = Section(name, {h: Lane(h, dict(new)) for h in heads})
            rec.seq += 1
            record = StepRecord(
                seq=rec.seq, step=name, key=key, iteration=iteration, attempt=attempt,
                status="completed", started_at=started, finished_at=time.time(), changes=changes,
            )  # fmt: skip
            await self.save(record)
        self.emit(StepCompleted(rec.run_id, name, key, iteration, time.perf_counter() - clock,
                                changes))  # fmt: skip
        return True

    async def _call(
        self, spec: StepSpec, state: S, ctx: StepContext, decision: dict[str, Any] | None
    ) -> object:
        if spec.kind == "function":
            if spec.takes_context:
                return await spec.call(state, ctx)
            return await spec.call(state)
        assert spec.update is not None
        if spec.kind == "approval":
            assert decision is not None
            return spec.update(state, Approval(**decision))
        assert spec.prompt is not None
        response = await self._runner(spec).run(spec.prompt(state))
        if getattr(response, "stop_reason", None) == "paused":
            raise UsageError(
                f"the agent of step {spec.name!r} paused for tool approval, which a workflow "
                "step cannot wait for: put an approval step before it instead"
            )
        return spec.update(state, response)

    def _runner(self, spec: StepSpec) -> Any:
        """The agent (or team) of ``spec`` for this run: an agent's clone on the session
        ``<run_id>/<step>`` (one conversation per run and step, kept across the step's loop
        iterations, reloaded from the agent's storage when the run resumes elsewhere); an
        object without ``clone`` as it is."""
        runner = self.runners.get(spec.name)
        if runner is None:
            clone = getattr(spec.call, "clone", None)
            session = f"{self.rec.run_id}/{spec.name}"
            runner = clone(session_id=session) if callable(clone) else spec.call
            self.runners[spec.name] = runner
        return runner

    def _following(self, name: str, value: object) -> str | None:
        """The step after ``name`` given the new state (``None``: the end)."""
        graph = self.graph
        if name in graph.routes:
            target = route_target(graph.routes[name], name, graph.routes[name].choose(value))
        elif name in graph.forks:
            target = graph.forks[name].join
        else:
            target = graph.edges.get(name, END)
        return None if target == END else target

    async def _record_failure(
        self, name: str, key: str, started: float, exc: BaseException, *, what: str = ""
    ) -> None:
        """Store a failed execution of ``name`` (the caller holds the lock)."""
        rec = self.rec
        iteration = int(key.rsplit("/", 1)[1])
        error = f"{type(exc).__name__}: {exc}"
        rec.errors.append(f"step {name!r}{' (' + what + ')' if what else ''}: {error}")
        self.failures.append((name, exc))
        rec.seq += 1
        record = StepRecord(
            seq=rec.seq, step=name, key=key, iteration=iteration,
            attempt=rec.attempts.get(key, 1), status="failed", started_at=started,
            finished_at=time.time(), error=error,
        )  # fmt: skip
        await self.save(record)
        self.emit(StepFailed(rec.run_id, name, key, iteration, error))

    async def once(self, full_key: str, name: str, effect: Callable[[], Awaitable[Any]]) -> Any:
        if full_key in self.rec.once:
            return self.rec.once[full_key]
        value = await effect()
        try:
            stored = json.loads(json.dumps(value))
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"ctx.once({name!r}, ...) returned a value that is not JSON ({exc}); the effect "
                "ran but its result could not be stored: return str, numbers, lists or dicts"
            ) from None
        async with self.lock:
            self.rec.once[full_key] = stored
            await self.save()
        return stored

    # -- what the caller sees -------------------------------------------------------------------

    def result(self, steps: list[StepRecord]) -> WorkflowResult[S]:
        return result_of(self.rec, self.codec, steps)


def result_of(rec: Record, codec: StateCodec[S], steps: list[StepRecord]) -> WorkflowResult[S]:
    """The caller's view of a stored record."""
    following = [lane.next for lane in rec.lanes() if lane.next is not None]
    if rec.section is not None:
        join = rec.main.next
        following = [name for name in following if name != join] or ([join] if join else [])
    return WorkflowResult(
        run_id=rec.run_id, workflow=rec.workflow, status=rec.status,
        state=codec.decode(rec.main.state),
        next=following, pending=[PendingApproval(**p) for p in rec.pending],
        errors=list(rec.errors), steps=steps,
    )  # fmt: skip


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
