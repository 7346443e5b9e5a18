"""Branching: a session's branches as a tree, and its state as it was after an earlier run.

A fork or a rewind records the new branch's parent session and branch point (``forked_at``: the
number of runs it shares with its parent); ``SessionTree`` holds every session of one lineage.
Each stored run carries an *undo patch*: what turns the session's state and summary after that
run back into what they were before it. The state after run ``n`` is the current state with the
undo patches of the later runs applied, newest first (``state_at``); a patch holds only what the
run changed, so the history costs the size of the changes, not a snapshot per run.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentica.errors import UsageError
from agentica.storage.records import SessionInfo

__all__ = [
    "Branch",
    "SessionTree",
    "Snapshot",
    "branch_id_for",
    "check_turn",
    "encode_undo",
    "state_at",
    "undo_patch",
]

Snapshot = dict[str, Any]  # {"state": {...}, "summary": str | None}: what a run's undo restores


@dataclass(slots=True, kw_only=True)
class Branch:
    """One session of a tree: its info (``parent_id``, ``forked_at``) and the branches that
    part from it, in the order they were created."""

    info: SessionInfo
    children: list[Branch] = field(default_factory=list)

    @property
    def session_id(self) -> str:
        return self.info.session_id

    def walk(self, depth: int = 0) -> Iterator[tuple[int, Branch]]:
        """This branch and its descendants, depth first, with their depth."""
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


@dataclass(slots=True, kw_only=True)
class SessionTree:
    """Every session of one lineage (sessions forked from one another), as a tree.

    ``roots`` is one branch, the session every other one was forked from, unless that was
    deleted: its children are then roots themselves (their ``parent_id`` names the deleted one).
    """

    roots: list[Branch]

    @classmethod
    def of(cls, infos: Iterable[SessionInfo]) -> SessionTree:
        """The tree of ``infos`` (sessions of one lineage, in any order)."""
        ordered = sorted(infos, key=lambda info: (info.created_at, info.session_id))
        nodes = {info.session_id: Branch(info=info) for info in ordered}
        roots = []
        for node in nodes.values():
            parent = nodes.get(node.info.parent_id or "")
            if parent is None or parent is node:
                roots.append(node)
            else:
                parent.children.append(node)
        return cls(roots=roots)

    def walk(self) -> Iterator[tuple[int, Branch]]:
        """Every branch, depth first from each root, with its depth."""
        for root in self.roots:
            yield from root.walk()

    def find(self, session_id: str) -> Branch | None:
        return next((b for _, b in self.walk() if b.session_id == session_id), None)

    def __len__(self) -> int:
        return sum(1 for _ in self.walk())


def check_turn(value: int, runs: int, *, name: str, session_id: str, allow_all: bool) -> int:
    """``value`` if it is a valid run count to fork at (``0..runs``) or rewind to (``0..runs-1``,
    ``allow_all=False``: a rewind that drops nothing is refused); else ``UsageError``."""
    top = runs if allow_all else runs - 1
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        if not allow_all and runs == 0:
            raise UsageError(f"session {session_id!r} has no runs: there is nothing to rewind")
        if not allow_all and value == runs:
            raise UsageError(
                f"{name}={value} keeps all {runs} runs of session {session_id!r}: nothing to "
                f"rewind (give {name} between 0 and {top})"
            )
        raise UsageError(
            f"{name}={value!r} is not a run of session {session_id!r}: it has {runs} runs; give "
            f"{name} between 0 and {top} (the number of runs to keep)"
        )
    return value


def branch_id_for(session_id: str, revision: int, suffix: str = "") -> str:
    """The default id of the branch a rewind leaves: ``<session>.<revision before it>``."""
    return f"{session_id[:230]}.{revision}{suffix}"


# -- undo patches ------------------------------------------------------------------------------
# A patch is a list of operations on nested JSON objects: ``[path, value]`` sets the value at
# ``path`` (a list of keys; ``[]`` is the whole value), ``[path]`` deletes that key.


def _diff(source: Any, target: Any, path: list[str], ops: list[list[Any]]) -> None:
    if source == target:
        return
    if isinstance(source, dict) and isinstance(target, dict):
        for key in source:
            if key not in target:
                ops.append([[*path, key]])
        for key, value in target.items():
            if key in source:
                _diff(source[key], value, [*path, key], ops)
            else:
                ops.append([[*path, key], value])
        return
    ops.append([path, target])


def undo_patch(after: Snapshot, before: Snapshot) -> list[list[Any]]:
    """The operations that turn ``after`` (a run's result) back into ``before``."""
    ops: list[list[Any]] = []
    _diff(after, before, [], ops)
    return ops


def encode_undo(after: Snapshot, before: Snapshot | None) -> str | None:
    """``undo_patch`` as JSON text; ``None`` when ``before`` is unknown (a damaged state)."""
    if before is None:
        return None
    return json.dumps(undo_patch(after, before), ensure_ascii=False, separators=(",", ":"))


def _apply(value: Any, ops: Sequence[Any]) -> Any:
    for op in ops:
        if not isinstance(op, list) or not op or not isinstance(op[0], list):
            continue  # damaged: skipped
        path, rest = op[0], op[1:]
        if not path:
            value = copy.deepcopy(rest[0]) if rest else None
            continue
        target = value
        for key in path[:-1]:
            if not isinstance(target, dict):
                break
            target = target.setdefault(key, {})
        if not isinstance(target, dict):
            continue  # a patch that does not fit (damaged): the value stays as it is
        if rest:
            target[path[-1]] = copy.deepcopy(rest[0])
        else:
            target.pop(path[-1], None)
    return value


def state_at(current: Snapshot, undos: Iterable[str | list[Any] | None]) -> Snapshot:
    """The snapshot before the runs whose undo patches are ``undos`` (newest first; JSON text
    or parsed), given the snapshot ``current`` after them. A run stored without one (saved by
    an agentica that kept no history) is taken as having changed nothing."""
    value: Any = copy.deepcopy(current)
    for undo in undos:
        ops = undo
        if isinstance(undo, str):
            try:
                ops = json.loads(undo)
            except ValueError:
                continue
        if isinstance(ops, list):
            value = _apply(value, ops)
    if not isinstance(value, dict):
        return {"state": {}, "summary": None}
    state = value.get("state")
    summary = value.get("summary")
    return {
        "state": state if isinstance(state, dict) else {},
        "summary": summary if isinstance(summary, str) else None,
    }
