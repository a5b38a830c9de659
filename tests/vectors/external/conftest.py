"""Real llama-index vector stores for the ``LlamaIndexVectors`` tests, and the brute-force oracle.

Each store is built by a code snippet (``SPECS``) run both here and, for the persistence test, in
a fresh Python process, so "reopen" means what a user gets after a restart. A store whose
packages are missing is skipped.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pytest

from llama_index_e2rag.vectors.base import VectorHit, VectorRecord
from llama_index_e2rag.vectors.external import LlamaIndexVectors

DIM = 16
KINDS = ("chunk", "entity", "event")
DOCS = ("doc-a", "doc-b", "doc 'c\" \\d")  # quotes and a backslash: filters must escape them


# ------------------------------------------------------------------------------------------
# store specs: the one list of real stores, for the adapter's contract and for the index
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """A snippet run with ``PATH`` (a folder of its own) and ``DIM`` defined, here and again in a
    child process ("reopen" means what a user gets after a restart). It defines ``store`` (or,
    ``per_kind``, ``stores``: ``{kind: store}``) and ``close()``; with ``native_count(live)`` (the
    store's own count of what it holds, ``live`` being the store objects in use) the index tests
    (``test_adapter_index.py``) run it too."""

    name: str
    modules: tuple[str, ...]
    code: str
    #: the marker of the store's optional dependency (``tests/dependencies.py``)
    marker: Optional[str] = None
    file_based: bool = True
    per_kind: bool = False
    #: the index gets it through ``StorageContext.from_defaults(vector_store=...)``
    via_storage_context: bool = False

    @property
    def counts(self) -> bool:
        return "def native_count" in self.code

    def param(self) -> Any:
        marks = [getattr(pytest.mark, self.marker)] if self.marker else []
        return pytest.param(self, marks=marks, id=self.name)


_QDRANT = ("qdrant_client", "llama_index.vector_stores.qdrant")
SPECS = [
    Spec(
        "qdrant",
        _QDRANT,
        """
        from qdrant_client import QdrantClient
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        client = QdrantClient(path=PATH + "/qdrant")
        store = QdrantVectorStore(collection_name="e2rag", client=client)
        def native_count(live):
            return client.count("e2rag", exact=True).count
        def close():
            client.close()  # local mode: one process per path
        """,
        "qdrant",
    ),
    Spec(
        "qdrant-async",
        _QDRANT,
        """
        from qdrant_client import AsyncQdrantClient
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        aclient = AsyncQdrantClient(path=PATH + "/qdrant")
        store = QdrantVectorStore(collection_name="e2rag", aclient=aclient)
        def close():
            from llama_index_e2rag.vectors.external.aio import on_io_loop
            on_io_loop(aclient.close())
        """,
        "qdrant",
    ),
    Spec(
        "qdrant-memory",
        _QDRANT,
        """
        from qdrant_client import QdrantClient
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        client = QdrantClient(location=":memory:")
        store = QdrantVectorStore(collection_name="e2rag", client=client)
        def close():
            client.close()
        """,
        "qdrant",
        file_based=False,
    ),
    Spec(  # one collection per kind, entity and event sharing one
        "qdrant-per-kind",
        _QDRANT,
        """
        from qdrant_client import QdrantClient
        from llama_index.vector_stores.qdrant import QdrantVectorStore
        from llama_index_e2rag.index import EMBEDDED_KINDS
        client = QdrantClient(path=PATH + "/qdrant")
        shared = QdrantVectorStore(collection_name="e2rag_entity_event", client=client)
        stores = {kind.value: QdrantVectorStore(collection_name="e2rag_" + kind.value, client=client)
                  for kind in EMBEDDED_KINDS}
        stores.update(entity=shared, event=shared)
        def native_count(live):
            names = {s.collection_name for s in live.values()}
            return sum(client.count(n, exact=True).count for n in names if client.collection_exists(n))
        def close():
            client.close()
        """,
        "qdrant",
        per_kind=True,
    ),
    Spec(  # no special case in the adapter: the generic llama-index path
        "simple",
        ("llama_index.core",),
        """
        from llama_index.core.vector_stores import SimpleVectorStore
        store = SimpleVectorStore()
        def close():
            pass
        """,
    ),
    Spec(
        "chroma",
        ("chromadb", "llama_index.vector_stores.chroma"),
        """
        import chromadb
        from llama_index.vector_stores.chroma import ChromaVectorStore
        client = chromadb.PersistentClient(path=PATH + "/chroma")
        # embedding_function=None: chroma must never fetch its default ONNX model
        collection = client.get_or_create_collection("e2rag", embedding_function=None)
        store = ChromaVectorStore(chroma_collection=collection)
        def native_count(live):
            return collection.count()
        def close():
            client.close()
        """,
        "chroma",
        via_storage_context=True,
    ),
    Spec(
        "lancedb",
        ("lancedb", "llama_index.vector_stores.lancedb"),
        """
        from llama_index.vector_stores.lancedb import LanceDBVectorStore
        store = LanceDBVectorStore(uri=PATH + "/lance", table_name="e2rag")
        def native_count(live):
            return live["all"].table.count_rows()
        def close():
            pass
        """,
        "lancedb",
    ),
    Spec(  # FAISS keeps no ids: the persist dir holds the row -> node id map; L2 on purpose
        "faiss",
        ("faiss", "llama_index.vector_stores.faiss"),
        """
        import faiss
        from llama_index.vector_stores.faiss import FaissVectorStore
        store = FaissVectorStore(faiss_index=faiss.IndexFlatL2(DIM))
        def native_count(live):
            return live["all"].client.ntotal  # the persisted index replaced the empty one
        def close():
            pass
        """,
        "faiss",
    ),
    Spec(
        "milvus",
        ("pymilvus", "milvus_lite", "llama_index.vector_stores.milvus"),
        """
        from llama_index.vector_stores.milvus import MilvusVectorStore
        uri = PATH + "/milvus.db"
        store = MilvusVectorStore(uri=uri, collection_name="e2rag", dim=DIM)
        def native_count(live):
            rows = store.client.query("e2rag", filter="", output_fields=["count(*)"])
            return rows[0]["count(*)"]
        def close():
            from milvus_lite.server_manager import server_manager_instance
            store.client.close()
            server_manager_instance.release_server(uri)  # else its flock bars other processes
        """,
        "milvus",
    ),
]


def open_spec(spec: Spec, path: Path, dim: int = DIM) -> dict[str, Any]:
    for module in spec.modules:
        pytest.importorskip(module)
    ns: dict[str, Any] = {"PATH": str(path), "DIM": dim}
    exec(textwrap.dedent(spec.code), ns)
    return ns


@pytest.fixture(params=[s.param() for s in SPECS if not s.per_kind])
def spec(request) -> Spec:
    return request.param


@pytest.fixture
def opened(spec: Spec, tmp_path: Path):
    ns = open_spec(spec, tmp_path)
    yield ns
    try:
        ns["close"]()
    except Exception:
        pass


# ------------------------------------------------------------------------------------------
# data and the brute-force oracle
# ------------------------------------------------------------------------------------------


def make_records(seed: int = 7, per_kind: int = 24) -> list[VectorRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for k, kind in enumerate(KINDS):
        for i in range(per_kind):
            v = rng.normal(size=DIM).astype(np.float32)
            v *= rng.uniform(0.2, 5.0)  # not unit: the ranking must still be cosine
            out.append(
                VectorRecord(
                    id=f"{kind}:{i}",
                    kind=kind,
                    doc_id=DOCS[(i + k) % len(DOCS)],
                    text=f"{kind} number {i}",
                    vector=v,
                    metadata={"ordinal": i, "chunk_id": f"c{i % 5}"} if kind == "chunk" else {},
                )
            )
    return out


def make_queries(seed: int = 11, n: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=DIM).astype(np.float32) for _ in range(n)]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def brute_force(live: dict[str, VectorRecord], kind: str, q: np.ndarray, k: int) -> list[tuple[str, float]]:
    scored = [(r.id, cos(q, r.vector)) for r in live.values() if r.kind == kind]
    scored.sort(key=lambda t: -t[1])
    return scored[:k]


def assert_ranking(hits: list[VectorHit], live: dict[str, VectorRecord], kind: str, q, k) -> None:
    expected = brute_force(live, kind, q, k)
    assert [h.id for h in hits] == [e[0] for e in expected]
    for hit, (_, score) in zip(hits, expected):
        assert hit.score == pytest.approx(score, abs=2e-4)


def new_vectors(ns: dict[str, Any], **kw: Any) -> LlamaIndexVectors:
    return LlamaIndexVectors(ns["store"], dim=DIM, **kw)


def have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True
