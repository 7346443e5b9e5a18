"""``QdrantKnowledgeStore``: a knowledge store in Qdrant, in local mode or on a server.

Each chunk is a point with two vectors: the embedding (cosine) and a sparse vector of its words
weighted by BM25's term-frequency part, with Qdrant's IDF modifier supplying the rest, so the
word search ranks by BM25 (the average chunk length is taken as ``AVERAGE_WORDS``). Sources and
their hashes, and the embedder the collection was made for, are points of a second collection.
The client is Qdrant's synchronous one, used from a worker thread (local mode computes in
Python; it would otherwise hold the event loop). Qdrant has no transactions: a search running
while a source is replaced may see part of its old chunks.
"""

from __future__ import annotations

import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentica.errors import UsageError
from agentica.knowledge.chunking import Chunk
from agentica.knowledge.stores import (
    ThreadedClient,
    check_batch,
    check_query,
    other_embedder,
    words,
)

__all__ = ["QdrantKnowledgeStore"]

T = TypeVar("T")
K1, B, AVERAGE_WORDS = 1.2, 0.75, 180.0  # BM25's constants; a 1,200-character chunk's words
_NAMESPACE = uuid.UUID("5b1f3c52-8f0e-4f7a-9a57-6b0c1d2e3f40")
_META_ID = str(uuid.uuid5(_NAMESPACE, "\x00meta"))


def _word_vector(text: str) -> tuple[list[int], list[float]]:
    """The sparse BM25 term-frequency vector of ``text``: hashed word -> weight."""
    counts = Counter(zlib.crc32(w.encode()) for w in words(text))
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / AVERAGE_WORDS)
    indices = sorted(counts)
    return indices, [counts[i] * (K1 + 1) / (counts[i] + norm) for i in indices]


class QdrantKnowledgeStore:
    """Args:
    path: a folder for Qdrant's local mode (``None``: in memory).
    url: a Qdrant server instead (``http://127.0.0.1:6333``); ``api_key`` for it.
    collection: the collection's name (another for the sources and settings, ``_sources``
        appended).
    """

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        url: str | None = None,
        api_key: str | None = None,
        collection: str = "knowledge",
    ) -> None:
        self.path = None if path is None else str(path)
        self.url = url
        self.api_key = api_key
        self.collection = collection
        self.sources_collection = f"{collection}_sources"
        self._thread = ThreadedClient()
        self._dimensions = 0

    def _models(self) -> Any:
        from qdrant_client import models

        return models

    async def _run(self, work: Callable[[Any], T]) -> T:
        return await self._thread.run(work)

    async def open(self, embedder: str, dimensions: int) -> None:
        await self._thread.open(
            self._connect, lambda client: self._create(client, embedder, dimensions)
        )
        self._dimensions = dimensions

    def _connect(self) -> Any:
        try:
            from qdrant_client import QdrantClient
        except ImportError:
            raise UsageError(
                "the Qdrant knowledge store needs qdrant-client: pip install 'agentica[qdrant]'"
            ) from None
        if self.url is not None:
            return QdrantClient(url=self.url, api_key=self.api_key)
        if self.path is None:
            return QdrantClient(":memory:")
        Path(self.path).mkdir(parents=True, exist_ok=True)
        return QdrantClient(path=self.path)

    def _create(self, client: Any, embedder: str, dimensions: int) -> None:
        models = self._models()
        if client.collection_exists(self.sources_collection):
            [meta] = client.retrieve(self.sources_collection, [_META_ID]) or [None]
            found = meta.payload if meta is not None else {}
            if refusal := other_embedder(found, embedder, dimensions, "another collection"):
                raise UsageError(refusal)
            return
        client.create_collection(
            self.collection,
            vectors_config={
                "dense": models.VectorParams(size=dimensions, distance=models.Distance.COSINE)
            },
            sparse_vectors_config={
                "words": models.SparseVectorParams(modifier=models.Modifier.IDF)
            },
        )
        client.create_collection(
            self.sources_collection,
            vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT),
        )
        if self.url is not None:  # (local mode has no payload indexes, and says so)
            client.create_payload_index(self.collection, "source", models.PayloadSchemaType.KEYWORD)
        client.upsert(
            self.sources_collection,
            [models.PointStruct(id=_META_ID, vector=[0.0],
                                payload={"embedder": embedder, "dimensions": dimensions})],
        )  # fmt: skip

    def _source_filter(self, source: str) -> Any:
        models = self._models()
        return models.Filter(
            must=[models.FieldCondition(key="source", match=models.MatchValue(value=source))]
        )

    async def sources(self) -> dict[str, str]:
        def work(client: Any) -> dict[str, str]:
            found: dict[str, str] = {}
            offset = None
            while True:
                points, offset = client.scroll(
                    self.sources_collection, limit=1000, offset=offset, with_payload=True
                )
                for point in points:
                    if "source" in point.payload:
                        found[point.payload["source"]] = point.payload["hash"]
                if offset is None:
                    return found

        return await self._run(work)

    async def replace(
        self,
        source: str,
        content_hash: str,
        chunks: Sequence[Chunk],
        vectors: Sequence[Sequence[float]],
    ) -> None:
        check_batch(source, chunks, vectors, self._dimensions)
        models = self._models()
        points = []
        for chunk, vector in zip(chunks, vectors, strict=True):
            indices, values = _word_vector(f"{chunk.heading}\n{chunk.text}")
            points.append(
                models.PointStruct(
                    id=str(uuid.uuid5(_NAMESPACE, f"{source}\x00{chunk.position}")),
                    vector={
                        "dense": list(vector),
                        "words": models.SparseVector(indices=indices, values=values),
                    },
                    payload={"source": source, "position": chunk.position, "text": chunk.text,
                             "location": chunk.location, "heading": chunk.heading},
                )
            )  # fmt: skip
        record = models.PointStruct(
            id=str(uuid.uuid5(_NAMESPACE, source)),
            vector=[0.0],
            payload={"source": source, "hash": content_hash},
        )

        def work(client: Any) -> None:
            # the new chunks overwrite the old ones of the same positions; then the rest go
            if points:
                client.upsert(self.collection, points)
            stale = models.Filter(
                must=[models.FieldCondition(key="source", match=models.MatchValue(value=source))],
                must_not=[models.HasIdCondition(has_id=[p.id for p in points])],
            )
            client.delete(self.collection, models.FilterSelector(filter=stale))
            client.upsert(self.sources_collection, [record])

        await self._run(work)

    async def remove(self, source: str) -> None:
        models = self._models()

        def work(client: Any) -> None:
            selector = models.FilterSelector(filter=self._source_filter(source))
            client.delete(self.collection, selector)
            client.delete(
                self.sources_collection,
                models.PointIdsList(points=[str(uuid.uuid5(_NAMESPACE, source))]),
            )

        await self._run(work)

    @staticmethod
    def _chunk(payload: dict[str, Any]) -> Chunk:
        return Chunk(payload["source"], payload["position"], payload["text"],
                     payload["location"], payload["heading"])  # fmt: skip

    async def vector_search(self, vector: Sequence[float], k: int) -> list[tuple[Chunk, float]]:
        check_query(vector, self._dimensions)

        def work(client: Any) -> list[tuple[Chunk, float]]:
            found = client.query_points(
                self.collection, query=list(vector), using="dense", limit=int(k),
                with_payload=True,
            )  # fmt: skip
            return [(self._chunk(p.payload), float(p.score)) for p in found.points]

        return await self._run(work)

    async def text_search(self, query: str, k: int) -> list[tuple[Chunk, float]]:
        unique = sorted({zlib.crc32(w.encode()) for w in words(query)})
        if not unique:
            return []
        models = self._models()
        sparse = models.SparseVector(indices=unique, values=[1.0] * len(unique))

        def work(client: Any) -> list[tuple[Chunk, float]]:
            found = client.query_points(
                self.collection, query=sparse, using="words", limit=int(k), with_payload=True
            )
            return [(self._chunk(p.payload), float(p.score)) for p in found.points if p.score > 0]

        return await self._run(work)

    async def count(self) -> int:
        return int(await self._run(lambda client: client.count(self.collection).count))

    async def aclose(self) -> None:
        await self._thread.aclose()
