"""Versioned serialisation of stored records (JSON), shared by every storage backend.

Every stored run is an envelope ``{"format": "agentica.run", "version": N, "run": {...}}``.
Loading checks the envelope: an older version is upgraded, a newer one or a damaged record raises
``SessionFormatError`` saying what was found and what to do, never a bare ``KeyError``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentica.errors import SessionFormatError
from agentica.storage.records import RunRecord

__all__ = [
    "RUN_FORMAT_VERSION", "decode_run", "dump_run", "encode_run", "load_run", "warm_codec",
]  # fmt: skip

RUN_FORMAT_VERSION = 1
_FORMAT = "agentica.run"


@functools.cache
def _adapter() -> TypeAdapter[RunRecord]:
    """Built on first use: building it costs tens of milliseconds, not paid at import."""
    return TypeAdapter(RunRecord)


def warm_codec() -> None:
    """Build the validator now (a backend calls this in a worker thread, so that its first
    save does not build it on the event loop)."""
    _adapter()


def dump_run(record: RunRecord) -> dict[str, Any]:
    """The JSON-compatible envelope of ``record``."""
    return {
        "format": _FORMAT,
        "version": RUN_FORMAT_VERSION,
        "run": _adapter().dump_python(record, mode="json"),
    }


def encode_run(record: RunRecord) -> str:
    """``dump_run`` as compact JSON text."""
    return json.dumps(dump_run(record), ensure_ascii=False, separators=(",", ":"))


def _upgrade(version: int, run: dict[str, Any]) -> dict[str, Any]:
    """Bring an older run body up to ``RUN_FORMAT_VERSION`` (no older versions exist yet)."""
    return run


def load_run(data: Any, *, where: str = "a stored run") -> RunRecord:
    """The ``RunRecord`` in an envelope produced by ``dump_run`` (any supported version)."""
    if not isinstance(data, dict) or data.get("format") != _FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise SessionFormatError(
            f"{where} is not an agentica run record (format {found!r}): the storage was written "
            "by something else or is damaged"
        )
    version = data.get("version")
    if not isinstance(version, int) or version < 1:
        raise SessionFormatError(f"{where} has no valid format version ({version!r})")
    if version > RUN_FORMAT_VERSION:
        raise SessionFormatError(
            f"{where} was written by a newer agentica (run format v{version}; this version reads "
            f"up to v{RUN_FORMAT_VERSION}): upgrade agentica to load this session"
        )
    try:
        return _adapter().validate_python(_upgrade(version, data.get("run") or {}))
    except ValidationError as exc:
        raise SessionFormatError(
            f"{where} is damaged: {exc.error_count()} problem(s), first: "
            f"{exc.errors()[0]['loc']}: {exc.errors()[0]['msg']}"
        ) from None


def decode_run(text: str | bytes, *, where: str = "a stored run") -> RunRecord:
    """``load_run`` on JSON text; truncated or invalid JSON raises ``SessionFormatError``."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SessionFormatError(
            f"{where} is not valid JSON (truncated or corrupted): {exc}"
        ) from None
    return load_run(data, where=where)
