"""``Knowledge``: a searchable knowledge base over files.

``add(paths)`` loads, chunks, embeds and stores files; a file whose content (and chunking) did
not change since it was indexed costs one hash and nothing else, and a file gone from a folder
that was indexed is removed. ``search(query)`` ranks chunks by hybrid retrieval: the nearest
vectors and the best BM25 matches, fused by reciprocal rank (``mode="vector"`` or ``"bm25"``
use one of them), then optionally re-ranked by a ``reranker`` function.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentica.errors import UsageError
from agentica.knowledge.chunking import (
    MAX_FILE_BYTES,
    TEXT_SUFFIXES,
    Chunk,
    Document,
    chunk_document,
    document_from_bytes,
)
from agentica.knowledge.embedders import Embedder
from agentica.knowledge.stores import KnowledgeStore, SQLiteKnowledgeStore

__all__ = ["Hit", "IndexReport", "Knowledge", "SearchMode"]

SearchMode = Literal["hybrid", "vector", "bm25"]
Progress = Callable[[str, int, int], None]  # (source, files done, files in all)
Reranker = Callable[[str, list["Hit"]], Awaitable[list["Hit"]]]

RRF_K = 60  # reciprocal rank fusion's damping constant (Cormack et al., 2009)
_SKIP_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", "dist"})


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the chunk, its fused score (higher is better) and its rank in each
    retriever that found it (1 is best; ``None``: not found by that one)."""

    chunk: Chunk
    score: float
    vector_rank: int | None = None
    bm25_rank: int | None = None

    @property
    def citation(self) -> str:
        """``docs/guide.md, lines 12-30``: where the text is."""
        return f"{self.chunk.source}, {self.chunk.location}"


@dataclass
class IndexReport:
    """What ``add`` did: sources indexed anew or again, left as they were, removed, and the
    chunks written."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # source -> why
    chunks: int = 0


class Knowledge:
    """A knowledge base: files in, ranked chunks out.

    Args:
        store: a ``KnowledgeStore``, or a path for the SQLite store (default
            ``knowledge.db``).
        embedder: the ``Embedder``; default ``MiniLM()`` (offline, the ``knowledge`` extra).
        max_chars: the longest chunk, in characters.
        overlap_chars: the most text repeated from one chunk at the start of the next
            (default: a sixth of ``max_chars``, 200 for the default).
        reranker: an async function ``(query, hits) -> hits`` applied to hybrid results.
    """

    def __init__(
        self,
        store: KnowledgeStore | str | Path = "knowledge.db",
        *,
        embedder: Embedder | None = None,
        max_chars: int = 1200,
        overlap_chars: int | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        if embedder is None:
            from agentica.knowledge.embedders import MiniLM

            embedder = MiniLM()
        self.store: KnowledgeStore = (
            store if isinstance(store, KnowledgeStore) else SQLiteKnowledgeStore(store)
        )
        self.embedder = embedder
        if overlap_chars is None:
            overlap_chars = max_chars // 6
        empty = Document("", "markdown", ("",))
        chunk_document(empty, max_chars=max_chars, overlap_chars=overlap_chars)  # (checks them)
        self.max_chars = max_chars
        self.overlap_chars = overlap_chars
        self.reranker = reranker
        self._opened = False

    async def _open(self) -> None:
        if not self._opened:
            await self.store.open(self.embedder.name, self.embedder.dimensions)
            self._opened = True

    def _hash(self, data: bytes) -> str:
        """The content hash, with the chunking settings (other settings, other chunks)."""
        digest = hashlib.sha256(data)
        digest.update(f"|{self.max_chars}|{self.overlap_chars}|1".encode())
        return digest.hexdigest()

    async def add(
        self, *paths: str | Path, root: str | Path | None = None, progress: Progress | None = None
    ) -> IndexReport:
        """Index files and folders (recursively: text, Markdown, HTML, PDF and code files).

        A source is named by its path relative to ``root`` (default: the current folder when
        the path is inside it, else the absolute path). Files of an indexed folder that are
        gone are removed from the knowledge base."""
        await self._open()
        files, folders = await asyncio.to_thread(_collect, paths, root)
        report = IndexReport()
        known = await self.store.sources()
        for done, (source, path) in enumerate(files.items(), start=1):
            await self._index_file(source, path, known, report)
            if progress is not None:
                progress(source, done, len(files))
        for source in known:
            if source not in files and any(source.startswith(f) for f in folders):
                await self.store.remove(source)
                report.removed.append(source)
        return report

    async def _index_file(
        self, source: str, path: Path, known: dict[str, str], report: IndexReport
    ) -> None:
        """Index one file unless its content is as ``known`` says; what happened goes into
        ``report`` (an unreadable or unloadable file is skipped with the reason)."""
        try:
            data = await _read_bytes(path)
        except (OSError, UsageError) as exc:
            report.skipped[source] = str(exc)
            return
        content_hash = self._hash(data)
        if known.get(source) == content_hash:
            report.unchanged.append(source)
            return
        try:
            chunks = await asyncio.to_thread(self._chunks_of_bytes, path.name, data, source)
        except UsageError as exc:
            report.skipped[source] = str(exc)
            return
        vectors = await self.embedder.embed([c.for_embedding() for c in chunks])
        await self.store.replace(source, content_hash, chunks, vectors)
        (report.updated if source in known else report.added).append(source)
        report.chunks += len(chunks)

    async def add_bytes(self, source: str, data: bytes, *, name: str | None = None) -> int:
        """Index a file's content (an upload) as ``source``, its kind told by ``name``'s
        suffix (default: ``source``'s); again only if it changed. Returns the chunks written
        (0: unchanged)."""
        await self._open()
        content_hash = self._hash(data)
        if (await self.store.sources()).get(source) == content_hash:
            return 0
        chunks = await asyncio.to_thread(self._chunks_of_bytes, name or source, data, source)
        vectors = await self.embedder.embed([c.for_embedding() for c in chunks])
        await self.store.replace(source, content_hash, chunks, vectors)
        return len(chunks)

    def _chunks_of_bytes(self, name: str, data: bytes, source: str) -> list[Chunk]:
        document = document_from_bytes(name, data, source=source)
        return chunk_document(document, max_chars=self.max_chars, overlap_chars=self.overlap_chars)

    async def add_text(self, source: str, text: str) -> int:
        """Index ``text`` as a Markdown document named ``source`` (again only if it changed);
        returns the chunks written (0: unchanged)."""
        await self._open()
        content_hash = self._hash(text.encode())
        if (await self.store.sources()).get(source) == content_hash:
            return 0
        document = Document(source, "markdown", (text,))
        chunks = await asyncio.to_thread(
            chunk_document, document, max_chars=self.max_chars, overlap_chars=self.overlap_chars
        )
        vectors = await self.embedder.embed([c.for_embedding() for c in chunks])
        await self.store.replace(source, content_hash, chunks, vectors)
        return len(chunks)

    async def remove(self, source: str) -> None:
        await self._open()
        await self.store.remove(source)

    async def sources(self) -> list[str]:
        await self._open()
        return sorted(await self.store.sources())

    async def search(self, query: str, k: int = 5, *, mode: SearchMode = "hybrid") -> list[Hit]:
        """The ``k`` best chunks for ``query``."""
        if not query.strip():
            raise UsageError("the search query is empty")
        if k < 1:
            raise UsageError(f"k must be at least 1, not {k}")
        await self._open()
        depth = max(k * 4, 20)  # candidates from each retriever
        vector_hits: list[tuple[Chunk, float]] = []
        word_hits: list[tuple[Chunk, float]] = []
        if mode in ("hybrid", "vector"):
            [vector] = await self.embedder.embed([query])
            vector_hits = await self.store.vector_search(vector, depth)
        if mode in ("hybrid", "bm25"):
            word_hits = await self.store.text_search(query, depth)
        hits = fuse(vector_hits, word_hits)
        if self.reranker is not None and mode == "hybrid":
            hits = await self.reranker(query, hits)
        return hits[:k]

    async def aclose(self) -> None:
        """Close the store (a later call opens it again)."""
        self._opened = False
        await self.store.aclose()

    async def __aenter__(self) -> Knowledge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def fuse(
    vector_hits: Sequence[tuple[Chunk, float]], word_hits: Sequence[tuple[Chunk, float]]
) -> list[Hit]:
    """Reciprocal rank fusion: each chunk scores the sum of ``1 / (60 + rank)`` over the
    retrievers that found it."""
    ranks: dict[tuple[str, int], dict[str, int]] = {}
    chunks: dict[tuple[str, int], Chunk] = {}
    for name, hits in (("vector", vector_hits), ("bm25", word_hits)):
        for rank, (chunk, _) in enumerate(hits, start=1):
            key = (chunk.source, chunk.position)
            chunks[key] = chunk
            ranks.setdefault(key, {}).setdefault(name, rank)
    fused = [
        Hit(
            chunks[key],
            sum(1.0 / (RRF_K + r) for r in found.values()),
            found.get("vector"),
            found.get("bm25"),
        )
        for key, found in ranks.items()
    ]
    fused.sort(key=lambda h: (-h.score, h.chunk.source, h.chunk.position))
    return fused


def _collect(
    paths: Sequence[str | Path], root: str | Path | None
) -> tuple[dict[str, Path], list[str]]:
    """The files to index by source name, and the folders given (as ``name/``)."""
    base = Path(root).resolve() if root is not None else Path.cwd().resolve()
    files: dict[str, Path] = {}
    folders: list[str] = []
    for given in paths:
        path = Path(given).resolve()
        if path.is_dir():
            named = _name(path, base)
            folders.append("" if named == "." else named + "/")  # ("": the root, all of it)
            for found in sorted(path.rglob("*")):
                if found.is_file() and _wanted(found, path):
                    files[_name(found, base)] = found
        elif path.is_file():
            files[_name(path, base)] = path
        else:
            raise UsageError(f"{given} does not exist")
    return files, folders


def _name(path: Path, base: Path) -> str:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def _wanted(path: Path, folder: Path) -> bool:
    parts = path.relative_to(folder).parts
    if any(p in _SKIP_DIRS or p.startswith(".") for p in parts):
        return False
    return path.suffix.lower() in TEXT_SUFFIXES and path.suffix != ""


async def _read_bytes(path: Path) -> bytes:
    """The file's bytes (``UsageError`` for one larger than a document may be, unread)."""

    def read() -> bytes:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"larger than {MAX_FILE_BYTES // 1_000_000} MB; split it first")
        return path.read_bytes()

    return await asyncio.to_thread(read)
