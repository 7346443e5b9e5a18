"""Agent configurations of an evaluation (``EvalConfig``) and the paper's ablation matrix.

A configuration is a TOML file (or the built-in ``deep`` / ``base``): which agent (``deep``: the
full ``DeepAgent`` harness; ``base``: the same file tools and shell with every harness feature
off), which model, sampling and limits, and the switches the ablations turn off
(``concurrent_tools``, ``context``, ``heartbeat``, ``deep_prompt``, ``repetition``,
``reflection``, ``session_history``). ``ablations(config)`` derives the matrix of section 4.4 /
appendix D.2.2 from one configuration; ``threshold_sweep(config)`` the soft x hard grid of 4.5.
``fingerprint()`` names a configuration's content: results are cached by it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from agentica import __version__
from agentica.context import ContextPolicy, HistoryPolicy
from agentica.deep import DeepAgent
from agentica.errors import UsageError
from agentica.limits import RunLimits
from agentica.models.base import Model, ModelSettings
from agentica.tools.execution import ToolSettings

__all__ = ["STANDARD_PROMPT", "EvalConfig", "ablations", "load_config", "threshold_sweep"]

STANDARD_PROMPT = "You are a helpful assistant. Use the tools to complete the user's task."
"""The prompt ``deep_prompt = false`` puts in place of the harness's instructions."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalConfig:
    """One agent configuration under evaluation.

    Attributes:
        name: how reports call it.
        kind: ``"deep"`` (``DeepAgent``) or ``"base"`` (its file tools and shell, no harness).
        model: a model string (``local``, ``deepseek:deepseek-chat``, ...); ``None``: the
            embedded model. ``base_url`` makes it a model id on that OpenAI-compatible server.
        temperature, max_tokens: sampling (the seed comes from the attempt).
        parallel_tool_calls: let the model ask for several calls per turn (off for small models).
        max_turns, max_wall_time: the run's limits (the whole run tree's).
        instructions: added to the agent's instructions.
        concurrent_tools: ``False``: one tool call at a time (``-TaskGroup``).
        context: ``"dual"`` (soft and hard thresholds), ``"single"`` (one threshold, at
            ``soft``) or ``"off"`` (no context management: ``-DualThreshold``).
        soft, hard: the thresholds, as fractions of the usable window.
        heartbeat, repetition, reflection: the harness's checkpoints, repetition guard and
            step reflection.
        deep_prompt: ``False``: a standard one-line prompt instead of the harness's.
        session_history: ``False``: earlier turns are not replayed (``-AgentAsSession``; matters
            for tasks with follow-up turns).
    """

    name: str = "deep"
    kind: Literal["deep", "base"] = "deep"
    model: str | None = None
    base_url: str | None = None
    temperature: float = 0.0
    max_tokens: int | None = 768
    parallel_tool_calls: bool = False
    max_turns: int = 40
    max_wall_time: float = 600.0
    instructions: str | None = None
    concurrent_tools: bool = True
    context: Literal["dual", "single", "off"] = "dual"
    soft: float = 0.6
    hard: float = 0.8
    heartbeat: bool = True
    repetition: bool = True
    reflection: bool = False
    deep_prompt: bool = True
    session_history: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ("deep", "base"):
            raise UsageError(
                f"config {self.name!r}: kind must be 'deep' or 'base', not {self.kind!r}"
            )
        if self.context not in ("dual", "single", "off"):
            raise UsageError(
                f"config {self.name!r}: context must be 'dual', 'single' or 'off', "
                f"not {self.context!r}"
            )
        if not 0 < self.soft < 1 or not 0 < self.hard <= 1 or self.soft >= self.hard:
            raise UsageError(
                f"config {self.name!r}: need 0 < soft < hard <= 1 (got {self.soft}, {self.hard})"
            )

    def fingerprint(self) -> str:
        """A short hash of everything but the name, and agentica's version: equal
        configurations share cached results (after changing agentica's code, ``--no-cache``)."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "name"}
        data["agentica"] = __version__
        if self.model is None:  # the default model is the environment's choice
            data["default_model"] = [os.environ.get(k) for k in ("AGENTICA_MODEL",
                                                                 "AGENTICA_BASE_URL")]  # fmt: skip
        text = json.dumps(data, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def policy(self) -> ContextPolicy:
        if self.context == "off":
            return ContextPolicy.off()
        if self.context == "single":
            return ContextPolicy.single(self.soft)
        return ContextPolicy(soft=self.soft, hard=self.hard)

    def settings(self, seed: int) -> ModelSettings:
        return ModelSettings(
            temperature=self.temperature, seed=seed, max_tokens=self.max_tokens,
            parallel_tool_calls=self.parallel_tool_calls,
        )  # fmt: skip

    def build(self, model: Model, workspace: Path, seed: int) -> DeepAgent[str]:
        """The agent of one attempt, working in ``workspace``."""
        deep = self.kind == "deep"
        agent: DeepAgent[str] = DeepAgent(
            model=model, workspace=workspace, name=self.name,
            todos=deep, subagents=deep, answer_check=deep, overview=deep,
            repetition=deep and self.repetition, heartbeat=deep and self.heartbeat,
            reflection=deep and self.reflection, instructions=self.instructions,
            model_settings=self.settings(seed),
            limits=RunLimits(max_turns=self.max_turns, max_wall_time=self.max_wall_time),
            tool_settings=ToolSettings(max_concurrency=32 if self.concurrent_tools else 1),
            context=self.policy(),
            history=HistoryPolicy() if self.session_history else HistoryPolicy(max_runs=0),
        )  # fmt: skip
        if not self.deep_prompt:
            agent.instructions = f"{STANDARD_PROMPT}\n\n{self.instructions or ''}".strip()
        return agent


def load_config(spec: str | os.PathLike[str]) -> EvalConfig:
    """A configuration from a TOML file, or a built-in one by name (``deep``, ``base``)."""
    text = os.fspath(spec)
    if text in ("deep", "base"):
        return EvalConfig(name=text, kind=text)  # type: ignore[arg-type]
    path = Path(text)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"no agent configuration {text!r}: give a TOML file or 'deep' / 'base'"
        ) from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read the configuration {path}: {exc}") from None
    known = {f.name for f in fields(EvalConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UsageError(
            f"{path}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    data.setdefault("name", path.stem)
    try:
        return EvalConfig(**data)
    except TypeError as exc:
        raise UsageError(f"{path}: {exc}") from None


_MATRIX: tuple[tuple[str, dict[str, Any]], ...] = (
    ("-TaskGroup", {"concurrent_tools": False}),
    ("-DualThreshold", {"context": "off"}),
    ("SingleThreshold", {"context": "single"}),
    ("-HEARTBEAT", {"heartbeat": False}),
    ("-DeepPrompt", {"deep_prompt": False}),
    ("-Repetition", {"repetition": False}),
    ("-AgentAsSession", {"session_history": False}),
    ("base", {"kind": "base"}),
)


def ablations(config: EvalConfig, only: list[str] | None = None) -> list[EvalConfig]:
    """``config`` and, for each ablation of the paper's matrix, a copy with that part removed
    (``only``: those named, with or without the leading ``-``: ``["HEARTBEAT", "base"]``)."""
    names = [name for name, _ in _MATRIX]
    wanted = None
    if only:
        wanted = {n if n in names else f"-{n}" for n in only}
        unknown = sorted(wanted - set(names))
        if unknown:
            raise UsageError(f"unknown ablation(s) {unknown}; known: {', '.join(names)}")
    chosen = [(n, c) for n, c in _MATRIX if wanted is None or n in wanted]
    return [config, *(replace(config, name=f"{config.name} {n}", **c) for n, c in chosen)]


def threshold_sweep(
    config: EvalConfig,
    soft: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7),
    hard: tuple[float, ...] = (0.7, 0.8, 0.9),
) -> list[EvalConfig]:
    """The dual threshold's parameter grid (section 4.5): every ``soft < hard`` pair."""
    return [
        dataclasses.replace(config, name=f"{config.name} {s}/{h}", context="dual", soft=s, hard=h)
        for s in soft
        for h in hard
        if s < h
    ]
