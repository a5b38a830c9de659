"""The stores port: the graph, the vectors, the chunks and the lexical index, as one typed object.

The index builds a ``Stores`` once and hands it to ingestion, retrievers and context assembly;
none of them sees the index. Reads cover what the methods need (nodes by id/doc/kind and
neighbours through ``graph``, vector search per node kind, ``embeddings`` of given nodes, chunk
``TextNode``s, the BM25 index of the passages); writes replace or delete one document at a time.

Consistency: the graph is the record of what the index holds. A write's vectors are written
(and, in a persisted index, flushed to disk) before its graph rows commit, and removed after, so
the graph never names a node without a vector; a whole batch of documents commits in one graph
transaction together with each document's record (hash, vector counts) and the index settings,
so after a crash at any point the graph says what every other file should hold. Chunk
``TextNode``s travel inside the graph (chunk nodes' ``attrs["node"]``), so results can cite their
source and llama-index's docstore can be rebuilt from the graph. ``locks`` keeps retrievals and
commits apart, in this process and across processes (``locks.py``).
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import (
    Any,
    AsyncIterator,
    Callable,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
    Optional,
    Sequence,
)

import numpy as np
from llama_index.core.schema import TextNode
from llama_index.core.storage.docstore.types import BaseDocumentStore

from llama_index_e2rag.graph.base import PAGE, DocRows, GraphStore, pages
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.lexical import LEXICAL_FORMAT, LexicalIndex, content_key
from llama_index_e2rag.stores.locks import StoreLocks
from llama_index_e2rag.stores.same_text import TEXT_HASH_KEY
from llama_index_e2rag.schema import (
    CHUNK_NODE_ATTR,
    GraphEdge,
    GraphNode,
    NodeKind,
    sort_by_position,
)
from llama_index_e2rag.vectors.base import VectorHit, VectorRecord, VectorStorage

#: The passages' BM25 index among the store's read models, keyed by the passages themselves
#: (``lexical.content_key``), not by the graph's state.
LEXICAL_MODEL = read_model_file.ReadModel("bm25.jsonl", LEXICAL_FORMAT)


def _decoded(stored: Any, ids: Sequence[str]) -> Optional[LexicalIndex]:
    """A stored BM25 read model, or None when there is none or it does not decode to ``ids``."""
    if stored is None:
        return None
    try:
        lexical = LexicalIndex.decode(stored)
    except Exception:  # noqa: BLE001 - a derived file that does not load is rebuilt
        return None
    return lexical if lexical.ids == list(ids) else None


@dataclass
class DocumentWrite:
    """Everything one document adds to the stores, computed before anything is written."""

    doc_id: str
    order: int
    #: re-iterable: a long document's are read from its staging graph each time they are
    #: walked (``pipeline.StagedRows``), so a commit never holds them all
    nodes: Iterable[GraphNode]
    edges: Iterable[GraphEdge]
    records: Iterable[VectorRecord]
    chunks: list[TextNode] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    doc_hash: Optional[str] = None
    #: edges to other documents' nodes, owned by this one (``DocRows.links``)
    links: list[GraphEdge] = field(default_factory=list)
    #: the hash of the document's text alone (``same_text``), when it came as a document
    text_hash: Optional[str] = None

    def rows(self, vectors: Mapping[str, int]) -> DocRows:
        """The graph's part, with the record the rest of the store is checked against
        (``vectors``: how many vectors of each kind the document has)."""
        record: dict[str, Any] = {"hash": self.doc_hash, "vectors": dict(sorted(vectors.items()))}
        if self.text_hash is not None:
            record[TEXT_HASH_KEY] = self.text_hash
        return DocRows(
            self.doc_id, self.order, self.nodes, self.edges, self.failures, record, self.links
        )


class Stores:
    """Graph + vectors (+ a local copy of the vectors when the vector store cannot return them)
    + llama-index docstore + the passages' BM25 index.

    Args:
        graph: any ``GraphStore`` (SQLite default, PostgreSQL, NetworkX).
        vectors: the ``VectorStorage`` searched at query time.
        docstore: llama-index's docstore, kept up to date for llama-index users.
        vector_copy: where the retrievers' maths read vectors when ``vectors`` cannot return
            them (a FAISS store, say); ``None`` reads them from ``vectors``.
        lexical: a persisted BM25 index; used while its passages match the graph's.
        locks: the store's locks (``locks.py``); a new in-process set when not given.
    """

    def __init__(
        self,
        graph: GraphStore,
        vectors: VectorStorage,
        docstore: BaseDocumentStore,
        vector_copy: Optional[VectorStorage] = None,
        lexical: Optional[LexicalIndex] = None,
        locks: Optional[StoreLocks] = None,
    ) -> None:
        self.graph = graph
        self.vectors = vectors
        self.docstore = docstore
        self.vector_copy = vector_copy
        self._lexical = lexical
        self._lexical_version: Optional[Hashable] = None
        self._lock = threading.Lock()
        self.locks = locks if locks is not None else StoreLocks()
        #: writes the vectors to the store's folder (set by ``persistence`` once it has one)
        self.flush: Optional[Callable[[], None]] = None
        self._seen_version: Optional[Hashable] = None

    # -- consistency ----------------------------------------------------------------------------
    @contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the stores still for one retrieval: no commit of any process lands meanwhile."""
        with self.locks.reading():
            self.sync()
            yield

    @asynccontextmanager
    async def areading(self) -> AsyncIterator[None]:
        async with self.locks.areading():
            await asyncio.to_thread(self.sync)
            yield

    def sync(self) -> None:
        """Catch up with commits another process made since we last looked (re-map the
        embedded vectors it rewrote); the graph and the read caches follow by themselves."""
        version = self.graph.version
        if version == self._seen_version:
            return
        with self._lock:
            for storage in self._vector_storages():
                refresh = getattr(storage, "refresh", None)
                if refresh is not None:
                    refresh()
            self._seen_version = version

    # -- reads ----------------------------------------------------------------------------------
    @property
    def home(self) -> Optional[Path]:
        """The store's ``e2rag/`` folder (None in memory): where derived read models persist."""
        return self.locks.home

    @property
    def version(self) -> Hashable:
        """Changes with every write to the graph (the key of every derived read model)."""
        return self.graph.version

    def search(self, kind: NodeKind, query: Sequence[float], top_k: int) -> list[VectorHit]:
        """The ``top_k`` nodes of ``kind`` nearest to ``query`` (cosine, best first)."""
        if top_k < 1:
            return []
        return self.vectors.search(kind.value, np.asarray(query, dtype=np.float32), top_k)

    async def asearch(
        self, kind: NodeKind, query: Sequence[float], top_k: int
    ) -> list[VectorHit]:
        if top_k < 1:
            return []
        return await self.vectors.asearch(kind.value, np.asarray(query, dtype=np.float32), top_k)

    def embeddings(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored unit vectors of ``ids`` (unknown or never-embedded ids are left out)."""
        source = self.vector_copy if self.vector_copy is not None else self.vectors
        return source.get_embeddings(list(ids))

    def matrix(self, nodes: Sequence[GraphNode]) -> np.ndarray:
        """Rows of unit vectors aligned with ``nodes``; a node without a vector gets zeros."""
        return self.matrix_of([n.id for n in nodes])

    def matrix_of(self, ids: Sequence[str]) -> np.ndarray:
        """Rows of unit vectors aligned with node ``ids``; an id without a vector gets zeros.

        The embedded store fills the result from its segments directly; any other store is
        read a page of ids at a time into the one result, so a story's whole kind (140k events
        at a million words) is never held twice, as a dict of rows and the matrix."""
        source = self.vector_copy if self.vector_copy is not None else self.vectors
        aligned = getattr(source, "matrix_of", None)  # the embedded store's, vectorised
        if aligned is not None:
            return aligned(list(ids))
        out: Optional[np.ndarray] = None
        for start in range(0, len(ids), PAGE):
            page = ids[start : start + PAGE]
            found = self.embeddings(page)
            if found and out is None:
                dim = len(next(iter(found.values())))
                out = np.zeros((len(ids), dim), dtype=np.float32)
            for row, node_id in enumerate(page, start=start):
                vector = found.get(node_id)
                if vector is not None:
                    out[row] = vector  # type: ignore[index]
        return out if out is not None else np.zeros((len(ids), 0), dtype=np.float32)

    def similarities(self, query: Sequence[float], ids: Sequence[str]) -> dict[str, float]:
        """Cosine of ``query`` with the stored vectors of ``ids`` (those that have one)."""
        found = self.embeddings(ids)
        if not found:
            return {}
        keys = list(found)
        q = np.asarray(query, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)
        scores = np.stack([found[k] for k in keys]) @ q
        return dict(zip(keys, (float(s) for s in scores)))

    def release_pages(self) -> None:
        """Let go of the vector file pages reads have brought into this process's memory
        (``EmbeddedVectors.release``), once a read of whole kinds is done with them."""
        for storage in self._vector_storages():
            release = getattr(storage, "release", None)
            if release is not None:
                release()

    def get_chunks(self, ids: Sequence[str]) -> list[TextNode]:
        """Chunk ``TextNode``s in the order asked, skipping unknown ids."""
        return [chunk for _, chunk in self.chunk_pairs(ids)]

    def chunk_pairs(self, ids: Sequence[str]) -> list[tuple[GraphNode, TextNode]]:
        """Each chunk's graph node (its position) with its ``TextNode``, in one graph read."""
        pairs = []
        for node in self.graph.get_nodes(ids):
            stored = node.attrs.get(CHUNK_NODE_ATTR)
            if stored is not None:
                pairs.append((node, TextNode.from_dict(stored)))
            else:  # converted from 0.1.0 before conversions stored chunks: the docstore has it
                found = self.docstore.get_node(node.id, raise_error=False)
                if isinstance(found, TextNode):
                    pairs.append((node, found))
        return pairs

    def lexical(self, passages: Optional[Sequence[GraphNode]] = None) -> LexicalIndex:
        """BM25 over the passages in story order, rebuilt only when the graph changed;
        ``passages``: those passages, when the caller has just read them from the graph.

        A derived read model: read from the store's folder when one was saved for exactly
        these passages, else built (O(passages)) and saved there for the next process."""
        version = self.version
        with self._lock:
            if self._lexical is not None and self._lexical_version == version:
                return self._lexical
            if passages is None:
                passages = sort_by_position(self.graph.nodes(NodeKind.PASSAGE))
            ids = [p.id for p in passages]
            if self._lexical is None or self._lexical.ids != ids:
                texts = [p.text for p in passages]
                key = content_key(ids, texts)
                stored = LEXICAL_MODEL.read(self, key)
                lexical = _decoded(stored, ids)
                if lexical is None:
                    lexical = LexicalIndex.build(ids, texts)
                    LEXICAL_MODEL.write(self, key, lexical.encode())
                self._lexical = lexical
            self._lexical_version = version
            return self._lexical

    # -- writes (the caller serialises them) ----------------------------------------------------
    async def areplace_documents(
        self, writes: Sequence[DocumentWrite], meta: Mapping[str, str] = {}
    ) -> None:
        """Replace documents as one commit: new vectors (flushed), then the graph and ``meta``
        in one transaction, then stale vectors and the docstore. A crash before the graph
        commit leaves only unnamed vectors; after it, only stale ones (both harmless)."""
        async with self.locks.acommitting():
            await asyncio.to_thread(self.sync)
            old: set[str] = set()
            for write in writes:
                old.update(await asyncio.to_thread(self._node_ids, write.doc_id))
            added: set[str] = set()
            counts: list[Counter[str]] = []
            for write in writes:
                counts.append(Counter())
                for page in pages(write.records):
                    for storage in self._vector_storages():
                        await storage.aadd(page)
                    added.update(r.id for r in page)
                    counts[-1].update(r.kind for r in page)
            stale = sorted(old - added)
            await self._aflush()
            rows = [write.rows(count) for write, count in zip(writes, counts)]
            await asyncio.to_thread(self.graph.commit_docs, rows, meta)
            self._seen_version = await asyncio.to_thread(lambda: self.graph.version)
            if stale:
                for storage in self._vector_storages():
                    await storage.adelete_ids(stale)
                await self._aflush()
            for write in writes:
                await self._adocstore_replace(write)

    async def areplace_document(self, write: DocumentWrite) -> None:
        await self.areplace_documents([write])

    async def _adocstore_replace(self, write: DocumentWrite) -> None:
        if await self.docstore.aget_ref_doc_info(write.doc_id) is not None:
            await self.docstore.adelete_ref_doc(write.doc_id, raise_error=False)
        await self.docstore.async_add_documents(write.chunks, allow_update=True)
        if write.doc_hash is not None:
            await self.docstore.aset_document_hash(write.doc_id, write.doc_hash)

    async def adelete_document(self, doc_id: str, docstore: bool = True) -> None:
        """Remove a document from the graph first (one transaction), then its vectors."""
        async with self.locks.acommitting():
            await asyncio.to_thread(self.sync)
            await asyncio.to_thread(self.graph.delete_doc, doc_id)
            self._seen_version = await asyncio.to_thread(lambda: self.graph.version)
            for storage in self._vector_storages():
                await storage.adelete_doc(doc_id)
            await self._aflush()
            if docstore and await self.docstore.aget_ref_doc_info(doc_id) is not None:
                await self.docstore.adelete_ref_doc(doc_id, raise_error=False)

    def delete_nodes(self, ids: Sequence[str]) -> None:
        """Remove single nodes (their edges go with them) and their vectors, as one commit."""
        with self.locks.writer(), self.locks.committing():
            self.graph.delete_nodes(ids)
            for storage in self._vector_storages():
                storage.delete_ids(list(ids))
            if self.flush is not None:
                self.flush()

    async def _aflush(self) -> None:
        if self.flush is not None:
            await asyncio.to_thread(self.flush)

    def reconcile_docstore(self) -> list[str]:
        """Make llama-index's docstore hold what the graph holds (it is saved only by
        ``persist``, so after a crash it may lag the graph); returns the documents fixed."""
        records = self.graph.doc_records()
        orders = self.graph.doc_orders()
        fixed = []
        known = self.docstore.get_all_ref_doc_info() or {}
        for doc_id in set(known) - set(orders):
            self.docstore.delete_ref_doc(doc_id, raise_error=False)
            fixed.append(doc_id)
        for doc_id in orders:
            expected = (records.get(doc_id) or {}).get("hash")
            if doc_id in known and self.docstore.get_document_hash(doc_id) == expected:
                continue
            chunks = [
                c for _, c in self.chunk_pairs(
                    [n.id for n in self.graph.nodes(NodeKind.CHUNK, doc_id)]
                )
            ]
            if doc_id in known:
                self.docstore.delete_ref_doc(doc_id, raise_error=False)
            self.docstore.add_documents(chunks, allow_update=True)
            if expected is not None:
                self.docstore.set_document_hash(doc_id, expected)
            fixed.append(doc_id)
        return sorted(fixed)

    def _node_ids(self, doc_id: str) -> list[str]:
        return [n.id for n in self.graph.nodes(doc_id=doc_id)]

    def _vector_storages(self) -> list[VectorStorage]:
        return [self.vectors] + ([self.vector_copy] if self.vector_copy is not None else [])
