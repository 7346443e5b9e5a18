"""A workflow's graph: its steps, the ways out of each step, and the checks it must pass.

Each step has at most one way out: an edge (``a -> b``), a route (a function of the state picks
a label, a label names the next step or ``END``) or a parallel fan-out (branches that run
concurrently and meet at a join step). A step with no way out ends the workflow. ``validate``
rejects, with ``WorkflowGraphError`` naming the steps and the fix: unknown steps, unreachable
steps, a cycle none of whose steps has ``max_iterations``, and branches that leave their parallel
section (end the workflow, enter another branch, or fan out again). ``mermaid`` prints the graph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from agentica.errors import UsageError

__all__ = ["END", "Fork", "Graph", "Route", "StepSpec", "WorkflowGraphError"]

END: Final = "__end__"
"""The target that ends the workflow (``route(a, fn, {"done": END})``)."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,99}")
_MERMAID_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MERMAID_RESERVED = {"end", "graph", "subgraph", "flowchart", "style", "class", "click", "default"}

StepKind = Literal["function", "runnable", "approval"]


class WorkflowGraphError(UsageError):
    """The workflow's graph is wrong (unknown or unreachable steps, an unbounded cycle, ...);
    the message names the steps and how to fix the graph."""


@dataclass(slots=True, kw_only=True)
class StepSpec:
    """One step: what it runs (``kind``) and its options."""

    name: str
    kind: StepKind
    call: Any = None  # the async function, or the object with ``async run(input)``
    takes_context: bool = False
    prompt: Callable[[Any], str] | None = None
    update: Callable[[Any, Any], Any] | None = None
    question: str | Callable[[Any], str] | None = None
    max_iterations: int | None = None


@dataclass(slots=True)
class Route:
    choose: Callable[[Any], str]
    targets: dict[str, str]


@dataclass(slots=True)
class Fork:
    branches: list[str]
    join: str
    merge: Callable[[Any, list[Any]], Any] | None


@dataclass(slots=True)
class Graph:
    """The steps (the first added is the start) and their ways out."""

    steps: dict[str, StepSpec] = field(default_factory=dict)
    edges: dict[str, str] = field(default_factory=dict)
    routes: dict[str, Route] = field(default_factory=dict)
    forks: dict[str, Fork] = field(default_factory=dict)

    @property
    def start(self) -> str:
        if not self.steps:
            raise WorkflowGraphError("the workflow has no steps: add one with .step(name, fn)")
        return next(iter(self.steps))

    def add_step(self, spec: StepSpec) -> None:
        if not _NAME.fullmatch(spec.name) or spec.name == END:
            raise WorkflowGraphError(
                f"step name {spec.name!r}: use letters, digits, '_', '.' and '-' (at most 100, "
                "starting with a letter or '_')"
            )
        if spec.name in self.steps:
            raise WorkflowGraphError(f"there is already a step named {spec.name!r}")
        if spec.max_iterations is not None and spec.max_iterations < 1:
            raise WorkflowGraphError(f"step {spec.name!r}: max_iterations must be at least 1")
        self.steps[spec.name] = spec

    def add_exit(self, source: str, exit: str | Route | Fork) -> None:
        """Give ``source`` its one way out (an edge target, a ``Route`` or a ``Fork``)."""
        existing = self._exit_of(source)
        if existing:
            raise WorkflowGraphError(
                f"step {source!r} already has {existing}; a step has one way out: one edge, "
                "one route (to choose among several steps) or one parallel fan-out"
            )
        if isinstance(exit, Route):
            self.routes[source] = exit
        elif isinstance(exit, Fork):
            self.forks[source] = exit
        else:
            self.edges[source] = exit

    def _exit_of(self, source: str) -> str:
        if source in self.edges:
            return f"an edge to {self.edges[source]!r}"
        if source in self.routes:
            return f"a route to {sorted(set(self.routes[source].targets.values()))}"
        if source in self.forks:
            return f"a parallel fan-out to {self.forks[source].branches}"
        return ""

    def successors(self, name: str) -> list[str]:
        """Every step ``name`` may lead to (``END`` included), in declaration order."""
        if name in self.edges:
            return [self.edges[name]]
        if name in self.routes:
            return list(dict.fromkeys(self.routes[name].targets.values()))
        if name in self.forks:
            return list(self.forks[name].branches)
        return [END]

    # -- checks ---------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``WorkflowGraphError`` if the graph cannot run as declared."""
        start = self.start
        self._check_targets()
        for source, fork in self.forks.items():
            self._check_fork_shape(source, fork)
        reachable = self._reachable(start)
        unreachable = [name for name in self.steps if name not in reachable]
        if unreachable:
            raise WorkflowGraphError(
                f"steps {unreachable} cannot be reached from the start step {start!r}: add an "
                "edge, route or parallel fan-out that leads to them, or remove them"
            )
        for source, fork in self.forks.items():
            self._check_fork(source, fork)
        self._check_cycles()

    def _check_targets(self) -> None:
        exits: list[tuple[str, str, str]] = [(s, t, "an edge") for s, t in self.edges.items()]
        for source, route in self.routes.items():
            if not route.targets:
                raise WorkflowGraphError(f"the route out of {source!r} has no targets")
            exits += [(source, t, f"route label {label!r}") for label, t in route.targets.items()]
        for source, fork in self.forks.items():
            exits += [(source, t, "a parallel branch") for t in fork.branches]
            exits.append((source, fork.join, "a parallel join"))
        for source, target, what in exits:
            if source not in self.steps:
                raise WorkflowGraphError(
                    f"{what} leaves {source!r}, which is not a step: add it with .step()"
                )
            if target == END and what not in ("a parallel branch", "a parallel join"):
                continue
            if target not in self.steps:
                raise WorkflowGraphError(
                    f"{what} of step {source!r} leads to {target!r}, which is not a step (a "
                    f"dangling edge): add .step({target!r}, ...) or fix the name; steps: "
                    f"{list(self.steps)}"
                )

    def _reachable(self, start: str) -> set[str]:
        seen = {start}
        todo = [start]
        while todo:
            for nxt in self.successors(todo.pop()):
                if nxt != END and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    def branch_steps(self, source: str) -> dict[str, str]:
        """The steps of the parallel section after ``source``: step -> its branch head."""
        fork = self.forks[source]
        owner: dict[str, str] = {}
        for head in fork.branches:
            todo = [head]
            while todo:
                name = todo.pop()
                if name == fork.join or owner.get(name) == head:
                    continue
                self._check_branch_step(source, head, name, owner)
                owner[name] = head
                todo.extend(self.successors(name))
        return owner

    def _check_branch_step(self, source: str, head: str, name: str, owner: dict[str, str]) -> None:
        fork = self.forks[source]
        where = f"branch {head!r} of the parallel section after {source!r}"
        if name == END:
            raise WorkflowGraphError(
                f"{where} can end the workflow before reaching the join {fork.join!r}: every "
                f"path of a branch must lead to the join (add an edge to {fork.join!r})"
            )
        if name in owner:
            raise WorkflowGraphError(
                f"step {name!r} is in both branch {owner[name]!r} and branch {head!r} of the "
                f"parallel section after {source!r}: branches must not share steps"
            )
        if name == source or name in self.forks:
            raise WorkflowGraphError(
                f"{where} reaches {name!r}, which fans out in parallel: a branch cannot fan out "
                f"again or loop back before the join {fork.join!r}; nest the work in one step"
            )

    def _check_fork_shape(self, source: str, fork: Fork) -> None:
        if len(fork.branches) < 2 or len(set(fork.branches)) != len(fork.branches):
            raise WorkflowGraphError(
                f"the parallel fan-out after {source!r} needs at least two different branches, "
                f"not {fork.branches}"
            )
        if fork.join in fork.branches or fork.join == source:
            raise WorkflowGraphError(
                f"the join {fork.join!r} of the parallel section after {source!r} must be a step "
                "after the branches"
            )

    def _check_fork(self, source: str, fork: Fork) -> None:
        owner = self.branch_steps(source)
        for name in self.steps:
            if name in owner:
                continue
            for nxt in self.successors(name):
                if nxt in owner and not (name == source and nxt in fork.branches):
                    raise WorkflowGraphError(
                        f"step {name!r} leads into {nxt!r}, inside branch {owner[nxt]!r} of the "
                        f"parallel section after {source!r}: a branch is entered only by its "
                        "fan-out"
                    )

    def _check_cycles(self) -> None:
        for component in _strongly_connected(self):
            if any(self.steps[name].max_iterations for name in component):
                continue
            cycle = _a_cycle(self, component)
            path = " -> ".join([*cycle, cycle[0]])
            raise WorkflowGraphError(
                f"the steps {path} form a cycle with no bound: give one of them max_iterations "
                f"(e.g. .step({cycle[0]!r}, fn, max_iterations=5)) so the loop cannot run "
                "forever; a route out of the loop then decides when it normally ends"
            )

    # -- drawing --------------------------------------------------------------------------------

    def mermaid(self) -> str:
        """The graph as a Mermaid flowchart (text)."""
        ids = _mermaid_ids(self)
        lines = ["flowchart TD", "    __start__([start])"]
        shapes = {"function": ('["', '"]'), "runnable": ('[["', '"]]'), "approval": ('{{"', '"}}')}
        for name, spec in self.steps.items():
            open_, close = shapes[spec.kind]
            label = name if spec.max_iterations is None else f"{name} ≤{spec.max_iterations}×"
            lines.append(f"    {ids[name]}{open_}{label}{close}")
        lines.append("    __end__([end])")
        lines.append(f"    __start__ --> {ids[self.start]}")
        for source, target, label, style in self.arrows():
            arrow = {"edge": "-->", "route": "-->", "fork": "==>"}[style]
            text = f"|{label}|" if label else ""
            lines.append(f"    {ids[source]} {arrow}{text} {ids.get(target, '__end__')}")
        return "\n".join(lines) + "\n"

    def arrows(self) -> Iterator[tuple[str, str, str, str]]:
        """(source, target, label, style) for every way out; style is edge, route or fork."""
        for name in self.steps:
            if name in self.routes:
                for label, target in self.routes[name].targets.items():
                    yield name, target, label, "route"
            elif name in self.forks:
                for branch in self.forks[name].branches:
                    yield name, branch, "", "fork"
            else:
                yield name, self.edges.get(name, END), "", "edge"


def _mermaid_ids(graph: Graph) -> dict[str, str]:
    ids: dict[str, str] = {END: "__end__"}
    for number, name in enumerate(graph.steps):
        plain = _MERMAID_ID.fullmatch(name) and name.lower() not in _MERMAID_RESERVED
        ids[name] = name if plain and not name.startswith("__") else f"s{number}"
    return ids


def _strongly_connected(graph: Graph) -> list[list[str]]:
    """The components of ``graph`` that contain a cycle (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph.steps:
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(_next_steps(graph, root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    found.append(_pop_component(stack, on_stack, node))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(_next_steps(graph, child))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return [c for c in found if len(c) > 1 or c[0] in _next_steps(graph, c[0])]


def _next_steps(graph: Graph, name: str) -> list[str]:
    return [s for s in graph.successors(name) if s != END]


def _pop_component(stack: list[str], on_stack: set[str], root: str) -> list[str]:
    component: list[str] = []
    while True:
        node = stack.pop()
        on_stack.discard(node)
        component.append(node)
        if node == root:
            return component[::-1]


def _a_cycle(graph: Graph, component: list[str]) -> list[str]:
    """One cycle through the first step of ``component``, for the error message."""
    members = set(component)
    start = component[0]
    paths: dict[str, list[str]] = {start: [start]}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for nxt in _next_steps(graph, node):
            if nxt == start:
                return paths[node]
            if nxt in members and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                todo.append(nxt)
    return component  # pragma: no cover - a component with a cycle always has one through start


def route_target(route: Route, source: str, label: object) -> str:
    """The step ``route`` sends the workflow to for ``label`` (``UsageError`` if unknown)."""
    if not isinstance(label, str) or label not in route.targets:
        raise UsageError(
            f"the route out of {source!r} chose {label!r}, which is not one of its labels "
            f"{list(route.targets)}"
        )
    return route.targets[label]
