"""Running an evaluation: every task x configuration x seed once (``run_eval``), as ``Attempt``s.

Each attempt gets a fresh temporary workspace (the task's files written, its repository copied),
a fresh agent from its configuration (``EvalConfig.build``) with the attempt's seed, the task's
prompt (and follow-up turns, if it has any), then the task's check on what the agent left and
what it answered. Attempts run concurrently up to ``concurrency``; one that crashes is recorded as
failed with the reason, never cancelling the others. With ``cache_dir`` every finished attempt
is saved under (configuration fingerprint, task content, seed) and not run again. The run's
timeline (``SpanRecord``) is kept: tokens, context size per model call, compactions and tool
calls per turn come from it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agentica.errors import AgenticaError
from agentica.evals.config import EvalConfig
from agentica.evals.tasks import EvalTask
from agentica.models.base import Model
from agentica.models.openai import OpenAILike
from agentica.models.registry import resolve_model
from agentica.storage.records import SpanRecord

__all__ = ["Attempt", "ModelFactory", "default_model", "run_eval", "task_digest"]

ModelFactory = Callable[[EvalConfig], Model]


@dataclass(slots=True, kw_only=True)
class Attempt:
    """One run of one task under one configuration with one seed, and how it went.

    Attributes:
        passed: the task's check passed.
        detail: the check's explanation (why it failed).
        error: the run's error (``"LimitExceeded: ..."``), if it ended with one.
        wall_time: seconds from the first prompt to the last answer.
        model_calls, tool_calls, compactions: counted over the run tree.
        max_context: the largest request of the top-level run, in tokens, when counted.
        trace: the timeline of the (last) run.
        cached: loaded from the cache instead of run.
    """

    task: str
    config: str
    fingerprint: str
    seed: int
    repeat: int
    passed: bool
    detail: str = ""
    answer: str = ""
    error: str | None = None
    wall_time: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None
    model_calls: int = 0
    tool_calls: int = 0
    compactions: int = 0
    max_context: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    trace: SpanRecord | None = None
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["trace"] = _SPAN.dump_python(self.trace, mode="json") if self.trace else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        data = dict(data)
        trace = data.pop("trace", None)
        attempt = cls(**data)
        attempt.trace = _SPAN.validate_python(trace) if trace else None
        return attempt


_SPAN: TypeAdapter[SpanRecord] = TypeAdapter(SpanRecord)


def default_model(config: EvalConfig) -> Model:
    """The model a configuration names: on ``base_url`` when given, else by the model string
    (``None``: the default rule, the embedded model unless ``$AGENTICA_MODEL`` says otherwise)."""
    if config.base_url:
        return OpenAILike(id=config.model or "default", base_url=config.base_url)
    return resolve_model(config.model)


def task_digest(task: EvalTask) -> str:
    """A hash of what the task asks, starts with and is checked by: a changed task (its answer
    or check command too) is run again."""
    files = {
        name: content if isinstance(content, str) else content.hex()
        for name, content in task.files.items()
    }
    data = [task.id, task.prompt, files, str(task.source), task.revision, repr(task.check),
            dict(task.metadata)]  # fmt: skip
    text = json.dumps(data, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _cache_path(cache_dir: Path, task: EvalTask, config: EvalConfig, seed: int) -> Path:
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", task.id)[:80]
    return cache_dir / config.fingerprint() / f"{safe}-{task_digest(task)}-s{seed}.json"


def _measure(attempt: Attempt, trace: SpanRecord) -> None:
    """Counts from the run's timeline."""
    attempt.trace = trace
    contexts: list[int] = []
    for depth, span in trace.walk():
        if span.kind == "model":
            attempt.model_calls += 1
            tokens = span.attributes.get("agentica.context_tokens")
            if depth == 1 and isinstance(tokens, int):
                contexts.append(tokens)
        elif span.kind == "tool":
            attempt.tool_calls += 1
        elif span.kind == "compaction":
            attempt.compactions += 1
    attempt.max_context = max(contexts) if contexts else None


async def _run_agent(
    task: EvalTask, config: EvalConfig, model: Model, workspace: Path, seed: int, attempt: Attempt
) -> None:
    agent = config.build(model, workspace, seed)
    prompts = [task.prompt, *(str(p) for p in task.metadata.get("followups", ()))]
    started = time.monotonic()
    try:
        for prompt in prompts:
            response = await agent.run(prompt)
            attempt.answer = response.content or ""
    except AgenticaError as exc:
        attempt.error = f"{type(exc).__name__}: {exc}"
    finally:
        attempt.wall_time = time.monotonic() - started
        for record in agent.memory.runs:
            attempt.input_tokens += record.usage.input_tokens
            attempt.output_tokens += record.usage.output_tokens
            cost = record.usage.cost
            attempt.cost = None if cost is None else (attempt.cost or 0.0) + cost
        last = agent.memory.runs[-1] if agent.memory.runs else None
        if last is not None and last.trace is not None:
            _measure(attempt, last.trace)


async def _attempt(
    task: EvalTask, config: EvalConfig, model: Model, seed: int, repeat: int
) -> Attempt:
    attempt = Attempt(
        task=task.id, config=config.name, fingerprint=config.fingerprint(), seed=seed,
        repeat=repeat, passed=False, metadata=dict(task.metadata),
    )  # fmt: skip
    workspace = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="agentica-eval-"))
    try:
        await asyncio.to_thread(task.setup, workspace)
        await _run_agent(task, config, model, workspace, seed, attempt)
        result = await asyncio.to_thread(task.check, workspace, attempt.answer)
        attempt.passed, attempt.detail = result.passed, result.detail
    except Exception as exc:  # a crash of one attempt is its failure, not the evaluation's
        attempt.error = attempt.error or f"{type(exc).__name__}: {exc}"
        attempt.detail = attempt.detail or "the attempt crashed"
    finally:
        await asyncio.to_thread(shutil.rmtree, workspace, True)
    return attempt


async def run_eval(
    tasks: Sequence[EvalTask],
    configs: Sequence[EvalConfig],
    *,
    repeats: int = 1,
    seed: int = 0,
    concurrency: int = 1,
    cache_dir: Path | None = None,
    model_factory: ModelFactory = default_model,
    on_attempt: Callable[[Attempt], None] | None = None,
) -> list[Attempt]:
    """Every task under every configuration, ``repeats`` times with seeds ``seed``,
    ``seed + 1``, ...; at most ``concurrency`` attempts at once. Configurations naming the
    same model share one model object (closed at the end). ``on_attempt`` is called as each
    attempt finishes (cached ones first). Returns the attempts in (configuration, task, seed)
    order."""
    if repeats < 1 or concurrency < 1:
        raise ValueError("repeats and concurrency must be at least 1")
    names = [c.name for c in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"configuration names must differ: {names}")
    plan = [(c, t, seed + r, r) for c in configs for t in tasks for r in range(repeats)]
    results = await _cached(plan, cache_dir, on_attempt)
    todo = [i for i in range(len(plan)) if i not in results]
    models: dict[tuple[str | None, str | None], Model] = {}
    try:
        for index in todo:  # (a bad model string fails here, before anything runs)
            config = plan[index][0]
            if (config.model, config.base_url) not in models:
                models[(config.model, config.base_url)] = model_factory(config)
        limiter = asyncio.Semaphore(concurrency)

        async def one(index: int) -> None:
            config, task, s, repeat = plan[index]
            async with limiter:
                attempt = await _attempt(task, config, models[(config.model, config.base_url)],
                                         s, repeat)  # fmt: skip
            results[index] = attempt
            if cache_dir is not None:
                try:
                    await _save(cache_dir, task, config, s, attempt)
                except OSError as exc:  # the result stands; only its cache entry is lost
                    attempt.detail += f" (not cached: {exc})"
            if on_attempt is not None:
                on_attempt(attempt)

        async with asyncio.TaskGroup() as group:
            for index in todo:
                group.create_task(one(index))
    finally:
        for model in models.values():
            await model.aclose()
    return [results[i] for i in range(len(plan))]


async def _cached(
    plan: Sequence[tuple[EvalConfig, EvalTask, int, int]],
    cache_dir: Path | None,
    on_attempt: Callable[[Attempt], None] | None,
) -> dict[int, Attempt]:
    """The attempts of ``plan`` found in the cache, by their index."""
    found: dict[int, Attempt] = {}
    if cache_dir is None:
        return found
    for index, (config, task, seed, _) in enumerate(plan):
        cached = await _load_cached(cache_dir, task, config, seed)
        if cached is not None:
            cached.config = config.name
            found[index] = cached
            if on_attempt is not None:
                on_attempt(cached)
    return found


async def _load_cached(
    cache_dir: Path, task: EvalTask, config: EvalConfig, seed: int
) -> Attempt | None:
    path = _cache_path(cache_dir, task, config, seed)

    def read() -> Attempt | None:
        try:
            attempt = Attempt.from_json(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None  # absent or unreadable: run it again
        attempt.cached = True
        return attempt

    return await asyncio.to_thread(read)


async def _save(
    cache_dir: Path, task: EvalTask, config: EvalConfig, seed: int, attempt: Attempt
) -> None:
    path = _cache_path(cache_dir, task, config, seed)

    def write() -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(attempt.to_json()), encoding="utf-8")
        temporary.replace(path)

    await asyncio.to_thread(write)
