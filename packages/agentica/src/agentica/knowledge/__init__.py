"""Knowledge (RAG): files in, cited chunks out.

- ``Knowledge``: load, chunk, embed, store and search files; incremental by content hash;
  hybrid retrieval (vectors + BM25, reciprocal rank fusion) (base.py)
- ``Chunk``, ``Document``, ``load_document``, ``chunk_document``: files as text, cut at
  headings, paragraphs and code blocks (chunking.py)
- ``Embedder``, ``MiniLM`` (offline, numpy), ``OpenAIEmbeddings`` (embedders.py)
- ``KnowledgeStore``, ``SQLiteKnowledgeStore`` (sqlite-vec + FTS5) (stores.py);
  ``QdrantKnowledgeStore``, ``LanceKnowledgeStore``, ``PostgresKnowledgeStore`` (*_store.py)
- ``KnowledgeTools``: the ``search_knowledge_base`` tool (tool.py)

The heavy parts (numpy, the model, sqlite-vec) are the ``knowledge`` extra, imported on use.
"""

from agentica.knowledge.base import Hit, IndexReport, Knowledge, SearchMode
from agentica.knowledge.chunking import Chunk, Document, chunk_document, load_document
from agentica.knowledge.embedders import Embedder, MiniLM, OpenAIEmbeddings
from agentica.knowledge.lance_store import LanceKnowledgeStore
from agentica.knowledge.postgres_store import PostgresKnowledgeStore
from agentica.knowledge.qdrant_store import QdrantKnowledgeStore
from agentica.knowledge.stores import KnowledgeStore, SQLiteKnowledgeStore
from agentica.knowledge.tool import KnowledgeTools

__all__ = [
    "Chunk",
    "Document",
    "Embedder",
    "Hit",
    "IndexReport",
    "Knowledge",
    "KnowledgeStore",
    "KnowledgeTools",
    "LanceKnowledgeStore",
    "MiniLM",
    "OpenAIEmbeddings",
    "PostgresKnowledgeStore",
    "QdrantKnowledgeStore",
    "SQLiteKnowledgeStore",
    "SearchMode",
    "chunk_document",
    "load_document",
]
