"""The vector side of the stores port: what ingestion and retrievers need from any vector storage.

Two families implement it: the embedded default (binary, memory-mapped files in the index's own
directory) and an adapter over any llama-index vector store (Qdrant, Chroma, LanceDB, FAISS,
Milvus, ...). Retrievers never see which one they got. Vectors are float32 rows; scores are
cosine similarities (higher is better) so every backend ranks alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class VectorRecord:
    """One embedded graph node: its id, node kind, document and the vector of its text."""

    id: str
    kind: str
    doc_id: str
    text: str
    vector: np.ndarray
    #: flat, JSON-safe values only (chunk_id, doc_order, char_offset, ordinal)
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VectorHit:
    """A search result: the graph node id and its cosine similarity to the query."""

    id: str
    score: float


@runtime_checkable
class VectorStorage(Protocol):
    """Vectors of graph nodes, searchable per node kind.

    ``add`` of a known id replaces it; ``delete_doc`` of an unknown document is a no-op (never an
    error, even before the first ``add``). ``get_embeddings`` returns what it has and leaves
    unknown ids out.
    """

    def add(self, records: Sequence[VectorRecord]) -> None: ...

    async def aadd(self, records: Sequence[VectorRecord]) -> None: ...

    def delete_doc(self, doc_id: str) -> None: ...

    def delete_ids(self, ids: Sequence[str]) -> None:
        """Remove these node ids (unknown ids are ignored)."""
        ...

    async def adelete_ids(self, ids: Sequence[str]) -> None: ...

    async def adelete_doc(self, doc_id: str) -> None: ...

    def search(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]: ...

    async def asearch(self, kind: str, query: np.ndarray, top_k: int) -> list[VectorHit]: ...

    def get_embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]: ...

    def count(self, kind: Optional[str] = None) -> int: ...

    def check(self) -> None:
        """Fail fast (``VectorStoreError`` with the fix) if this storage cannot work."""
        ...

    def check_dim(self, dim: int) -> None:
        """Refuse vectors of ``dim`` dimensions (before extraction) if they cannot be stored."""
        ...

    def persist(self, folder: Path) -> None:
        """Write file-based state under ``folder`` (a no-op for server-backed stores)."""
        ...
