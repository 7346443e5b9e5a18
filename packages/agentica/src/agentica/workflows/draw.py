"""A workflow graph drawn as a PNG with matplotlib (offline; no Mermaid renderer needed).

Layered layout: steps are placed top-down by their longest distance from the start (edges that
close a loop are drawn curved on the side), boxes are shaped by kind (function, agent or team,
human approval), route labels sit on their arrows and parallel fan-outs are bold. matplotlib is
imported on use only, with an error that says how to install it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentica.errors import UsageError
from agentica.workflows.graph import END, Graph

__all__ = ["draw_png", "layers"]

_START = "__start__"
_COLORS = {"function": "#dbeafe", "runnable": "#dcfce7", "approval": "#fef3c7"}


def layers(graph: Graph) -> dict[str, int]:
    """Each node's layer (start 0, ``END`` last): the longest path from the start, loops cut."""
    order: list[str] = []
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}  # 1: on the DFS path, 2: done

    def visit(root: str) -> None:
        stack: list[tuple[str, list[str]]] = [(root, _children(graph, root))]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            if not children:
                stack.pop()
                state[node] = 2
                order.append(node)
                continue
            child = children.pop(0)
            if state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, _children(graph, child)))

    visit(_START)
    level = dict.fromkeys(order, 0)
    for node in reversed(order):  # a topological order of the graph without its back edges
        for child in _children(graph, node):
            if (node, child) not in back:
                level[child] = max(level[child], level[node] + 1)
    if END in level:  # the end is the last row
        level[END] = max(v for k, v in level.items() if k != END) + 1
    return level


def _children(graph: Graph, node: str) -> list[str]:
    if node == _START:
        return [graph.start]
    if node == END:
        return []
    return graph.successors(node)


def draw_png(graph: Graph, path: Path, *, title: str = "") -> Path:
    """Render ``graph`` into ``path`` (a PNG); the path."""
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    except ImportError:
        raise UsageError(
            "drawing a workflow needs matplotlib: pip install 'agentica[eval]' (or matplotlib); "
            "workflow.mermaid() gives the graph as text without it"
        ) from None
    level = layers(graph)
    rows: dict[int, list[str]] = {}
    for node, row in level.items():
        rows.setdefault(row, []).append(node)
    width = max(len(nodes) for nodes in rows.values())
    place = _place(graph, rows)
    figure = Figure(figsize=(max(4.0, width * 2.6), max(3.0, len(rows) * 1.1)), dpi=100)
    axes = figure.add_subplot()
    axes.set_axis_off()
    for source, target, label, style in _arrows(graph):
        _arrow(axes, FancyArrowPatch, place, source, target, label, style, level)
    for node, (x, y) in place.items():
        _box(axes, FancyBboxPatch, graph, node, x, y)
    xs = [x for x, _ in place.values()]
    ys = [y for _, y in place.values()]
    axes.set_xlim(min(xs) - 2.0, max(xs) + 2.0)
    axes.set_ylim(min(ys) - 1.0, max(ys) + 1.0)
    if title:
        axes.set_title(title)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", bbox_inches="tight")
    return path


def _place(graph: Graph, rows: dict[int, list[str]]) -> dict[str, tuple[float, float]]:
    """Positions, row by row; a row's nodes ordered by their parents' mean position."""
    parents: dict[str, list[str]] = {}
    for source, target, _, _ in _arrows(graph):
        parents.setdefault(target, []).append(source)
    place: dict[str, tuple[float, float]] = {}
    for row in sorted(rows):

        def mean_x(node: str) -> float:
            xs = [place[p][0] for p in parents.get(node, []) if p in place]
            return sum(xs) / len(xs) if xs else 0.0

        nodes = sorted(rows[row], key=mean_x)
        for index, node in enumerate(nodes):
            place[node] = ((index - (len(nodes) - 1) / 2) * 2.8, -row * 1.3)
    return place


def _arrows(graph: Graph) -> list[tuple[str, str, str, str]]:
    return [(_START, graph.start, "", "edge"), *graph.arrows()]


def _box(axes: Any, patch: Any, graph: Graph, node: str, x: float, y: float) -> None:
    if node in (_START, END):
        label, color, shape = node.strip("_"), "#e5e7eb", "round,pad=0.08,rounding_size=0.25"
    else:
        spec = graph.steps[node]
        label = node if spec.max_iterations is None else f"{node}\n≤{spec.max_iterations}×"
        if spec.kind == "approval":
            label += "\n(approval)"
        color = _COLORS[spec.kind]
        shape = "sawtooth,pad=0.08" if spec.kind == "approval" else "round,pad=0.08"
    axes.add_patch(patch((x - 0.95, y - 0.22), 1.9, 0.44, boxstyle=shape, facecolor=color,
                         edgecolor="#374151", linewidth=1.2, zorder=2))  # fmt: skip
    axes.text(x, y, label, ha="center", va="center", fontsize=9, zorder=3)


def _arrow(
    axes: Any,
    patch: Any,
    place: dict[str, tuple[float, float]],
    source: str,
    target: str,
    label: str,
    style: str,
    level: dict[str, int],
) -> None:
    (x1, y1), (x2, y2) = place[source], place[target]
    loop = level[target] <= level[source]
    arrow = patch((x1, y1 - 0.31) if not loop else (x1 + 1.04, y1),
                  (x2, y2 + 0.31) if not loop else (x2 + 1.04, y2),
                  arrowstyle="-|>", mutation_scale=14, shrinkA=0, shrinkB=0,
                  connectionstyle="arc3,rad=0.5" if loop else "arc3,rad=0.0",
                  linewidth=2.4 if style == "fork" else 1.2, color="#4b5563", zorder=1)  # fmt: skip
    axes.add_patch(arrow)
    if label:
        mx, my = ((x1 + x2) / 2 + (1.45 if loop else 0.0), (y1 + y2) / 2)
        axes.text(mx, my, label, ha="center", va="center", fontsize=8, color="#1f2937",
                  bbox={"facecolor": "white", "edgecolor": "none", "pad": 1}, zorder=3)  # fmt: skip
