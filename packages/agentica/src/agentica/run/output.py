"""Structured output: the schema the model is asked to follow for an agent's ``output_type``, and
the validation of its final answer against it (pure: no I/O)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentica.errors import UsageError
from agentica.models.base import OutputSchema
from agentica.tools.function import _strip_titles

__all__ = ["OutputMismatch", "OutputSpec", "output_schema_for"]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n(.*?)\n?```\s*$", re.S)


def output_schema_for(output_type: Any) -> tuple[TypeAdapter[Any], OutputSchema]:
    """The validator and the JSON schema the model is asked to follow for ``output_type``."""
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        schema = _strip_titles(adapter.json_schema())
    except Exception as exc:
        raise UsageError(f"cannot use {output_type!r} as output_type: {exc}") from exc
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", getattr(output_type, "__name__", "output"))[:64]
    if schema.get("type") != "object":  # providers want an object at the top
        schema = {"type": "object", "properties": {"value": schema}, "required": ["value"]}
    return adapter, OutputSchema(name=name or "output", schema=schema)


class OutputMismatch(ValueError):
    """A final answer that does not match the output type; ``str(error)`` is what the model is
    told before it answers again."""


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """An ``output_type`` ready for runs: its validator and the schema sent to the model.

    Attributes:
        type: the output type as the agent was given it.
        adapter: its pydantic validator.
        schema: the schema the model is asked to follow (a non-object type is wrapped in
            ``{"value": ...}``, which the provider wants at the top).
    """

    type: Any
    adapter: TypeAdapter[Any]
    schema: OutputSchema

    @classmethod
    def of(cls, output_type: Any) -> OutputSpec:
        """The spec of ``output_type``; ``UsageError`` when pydantic cannot validate it."""
        adapter, schema = output_schema_for(output_type)
        return cls(output_type, adapter, schema)

    @property
    def wrapped(self) -> bool:
        """True when the value travels as ``{"value": ...}``."""
        schema = self.schema.schema
        return "value" in schema.get("required", ()) and schema.get("properties", {}).keys() == {
            "value"
        }

    def parse(self, text: str | None) -> Any:
        """The validated value of the answer ``text`` (a Markdown code fence around it is
        accepted); ``OutputMismatch`` when it does not match."""
        raw = (text or "").strip()
        fenced = _FENCE.match(raw)
        if fenced:
            raw = fenced.group(1)
        try:
            if self.wrapped:
                data = json.loads(raw)
                return self.adapter.validate_python(
                    data["value"] if isinstance(data, dict) else data
                )
            return self.adapter.validate_json(raw)
        except (ValidationError, ValueError, KeyError) as exc:
            raise OutputMismatch(
                f"Your final answer does not match the required output schema: {exc}. "
                "Reply again with only a JSON value that matches the schema."
            ) from exc
