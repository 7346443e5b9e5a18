"""A workflow's typed state: ``StateCodec`` owns its JSON form.

The state is a pydantic model or a dataclass the user defines. The codec turns it into JSON (what
the store keeps) and back, applies what a step returned (the whole state, a dict of changed
fields, or ``None`` for "as it is now", mutated in place or not) and validates the result, so a
step that writes a wrong type fails at that step. ``merge_changes`` is the default join of
parallel branches: each branch's changed fields, and an error when two branches changed one
field to different values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeAlias, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from agentica.errors import UsageError

__all__ = ["StateCodec", "Update", "merge_changes"]

S = TypeVar("S")

Update: TypeAlias = "S | Mapping[str, Any] | None"
"""What a step returns: the new state, a dict of the fields it changed, or ``None``."""


class StateCodec(Generic[S]):
    """JSON form of the state type ``state_type`` (a pydantic model or a dataclass)."""

    __slots__ = ("_adapter", "fields", "state_type")

    def __init__(self, state_type: type[S]) -> None:
        if isinstance(state_type, type) and issubclass(state_type, BaseModel):
            fields = tuple(state_type.model_fields)
        elif isinstance(state_type, type) and dataclasses.is_dataclass(state_type):
            fields = tuple(f.name for f in dataclasses.fields(state_type))
        else:
            raise UsageError(
                f"a workflow's state type must be a pydantic model or a dataclass, not "
                f"{state_type!r}: define e.g. `class State(BaseModel): ...`"
            )
        self.state_type = state_type
        self.fields = fields
        self._adapter: TypeAdapter[S] = TypeAdapter(state_type)

    def encode(self, state: S) -> dict[str, Any]:
        """The state as a JSON object (field name -> JSON value)."""
        if not isinstance(state, self.state_type):
            raise UsageError(
                f"the workflow's state must be a {self.state_type.__name__}, not "
                f"{type(state).__name__}"
            )
        data = self._adapter.dump_python(state, mode="json", warnings=False)
        assert isinstance(data, dict)
        return data

    def decode(self, data: Mapping[str, Any]) -> S:
        return self._adapter.validate_python(data)

    def apply(self, state: S, update: object, step: str) -> tuple[dict[str, Any], S]:
        """The state after step ``step`` returned ``update``: (its JSON, the validated value).

        Raises ``UsageError`` for a return value of the wrong kind or unknown fields, and
        pydantic's ``ValidationError`` when a field got a value of the wrong type.
        """
        if update is None:
            new = state
        elif isinstance(update, self.state_type):
            new = update
        elif isinstance(update, Mapping):
            unknown = sorted(set(update) - set(self.fields))
            if unknown:
                raise UsageError(
                    f"step {step!r} returned unknown fields {unknown}; "
                    f"{self.state_type.__name__} has {list(self.fields)}"
                )
            new = self._replace(state, dict(update))
        else:
            raise UsageError(
                f"step {step!r} returned a {type(update).__name__}: return the new "
                f"{self.state_type.__name__}, a dict of the fields it changed, or None"
            )
        data = self.encode(new)
        try:
            return data, self.decode(data)
        except ValidationError as exc:
            raise UsageError(f"step {step!r} left the state invalid: {exc}") from None

    def _replace(self, state: S, changes: dict[str, Any]) -> S:
        if isinstance(state, BaseModel):
            return state.model_copy(update=changes)
        return dataclasses.replace(state, **changes)  # type: ignore[type-var]


def merge_changes(
    base: Mapping[str, Any], branches: Sequence[tuple[str, Mapping[str, Any]]]
) -> dict[str, Any]:
    """``base`` with every branch's changed fields, in branch order.

    Raises ``UsageError`` naming the branches and the field when two branches changed the same
    field to different values (``parallel(..., merge=...)`` combines such changes).
    """
    merged = dict(base)
    changed_by: dict[str, str] = {}
    for branch, data in branches:
        for key, value in data.items():
            if key in base and base[key] == value:
                continue
            if key in changed_by and merged[key] != value:
                raise UsageError(
                    f"parallel branches {changed_by[key]!r} and {branch!r} both changed the "
                    f"field {key!r} to different values: give parallel(..., merge=fn) to "
                    "combine them, or let each branch write its own fields"
                )
            merged[key] = value
            changed_by[key] = branch
    return merged
