"""The write path of ``E2RAGIndex`` after validation (``validation``) and chunking
(``chunking``): stage, embed, then hand the stores a write.

A build runs in two phases so that a failure never leaves a half-written index: everything of a
document is first computed in a staging graph (``stage_document``) and embedded
(``embedding.embed_staged``); only then does ``document_write`` turn it into the one ``DocumentWrite`` the
stores commit. Links between documents (``link_staged``) are the exception: they depend on the
committed graph, so the index computes them under its write lock, just before the commit.
``DocOrders`` and ``WriteLock`` make concurrent inserts (coroutines of one loop, or threads each
running their own loop) safe: distinct story orders, one commit at a time.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Optional,
    Sequence,
)

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.ingest import node_vectors
from llama_index_e2rag.extract.builders import DocumentBuilder, split_result
from llama_index_e2rag.extract.linking import story_order_edges
from llama_index_e2rag.extract.passages import (
    DEFAULT_PASSAGE_WORDS,
    build_passages,
    document_text,
)
from llama_index_e2rag.graph.base import GraphStore, pages
from llama_index_e2rag.ingest.embedding import StagedVectors, embeddable_nodes
from llama_index_e2rag.stores.same_text import text_hash
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind
from llama_index_e2rag.stores.port import CHUNK_NODE_ATTR, DocumentWrite
from llama_index_e2rag.vectors.base import VectorRecord

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner

logger = logging.getLogger(__name__)

#: How long a waiting commit yields to its event loop between tries of the write lock.
_LOCK_POLL_SECONDS = 0.005


class DocOrders:
    """Story order of documents, handed out atomically so concurrent inserts never share one.

    An order is reserved before extraction starts and recorded by the graph store when the
    document commits; a failed insert releases its reservation. Orders only have to increase
    with insertion, not be contiguous, so an order released after a later one was handed out
    leaves a harmless gap. ``committed`` returns the graph's ``doc_id -> order``.
    """

    def __init__(self, committed: Callable[[], dict[str, int]]) -> None:
        self._committed = committed
        self._lock = threading.Lock()
        self._reserved: dict[str, tuple[int, int]] = {}  # doc_id -> (order, holders)

    def reserve(self, doc_ids: Sequence[str]) -> dict[str, int]:
        """Orders for ``doc_ids``: a known document keeps its place, new ones go to the end."""
        with self._lock:
            known = self._committed()
            taken = [*known.values(), *(order for order, _ in self._reserved.values())]
            next_order = max(taken, default=-1) + 1
            orders: dict[str, int] = {}
            for doc_id in doc_ids:
                if doc_id in orders:
                    continue
                if doc_id in known:
                    order = known[doc_id]
                elif doc_id in self._reserved:
                    order = self._reserved[doc_id][0]
                else:
                    order, next_order = next_order, next_order + 1
                holders = self._reserved.get(doc_id, (order, 0))[1]
                self._reserved[doc_id] = (order, holders + 1)
                orders[doc_id] = order
            return orders

    def release(self, orders: dict[str, int]) -> None:
        """End the reservations of one insert (after its commit, or after it failed)."""
        with self._lock:
            for doc_id in orders:
                order, holders = self._reserved.get(doc_id, (0, 1))
                if holders > 1:
                    self._reserved[doc_id] = (order, holders - 1)
                else:
                    self._reserved.pop(doc_id, None)


class WriteLock:
    """Serialises commits across threads (sync ``insert``) and coroutines (``ainsert``).

    A ``threading.Lock`` cannot be awaited and an ``asyncio.Lock`` belongs to one event loop,
    while every sync call runs its own loop. So a coroutine tries the thread lock without blocking
    and yields to its loop between tries; holding it across awaits then never blocks a loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        while not self._lock.acquire(blocking=False):
            await asyncio.sleep(_LOCK_POLL_SECONDS)
        try:
            yield
        finally:
            self._lock.release()


# -- phase 1: staging ----------------------------------------------------------------------------
@dataclass
class StagedDoc:
    """One document computed in its staging graph (``staging``), ready to commit."""

    document: Optional[Document]
    doc_id: str
    order: int
    chunks: list[TextNode]
    graph: GraphStore
    failures: list[dict[str, str]]
    #: edges to other documents' nodes, owned by this one (set by ``link_staged``)
    links: list[GraphEdge] = field(default_factory=list)


async def stage_document(
    document: Optional[Document],
    doc_id: str,
    order: int,
    chunks: list[TextNode],
    graph: GraphStore,
    failures: list[dict[str, str]],
    builders: Sequence[DocumentBuilder],
    llm_runner: Callable[[], Optional["LLMRunner"]],
    passage_words: int = DEFAULT_PASSAGE_WORDS,
    embed_model: Optional[Callable[[], BaseEmbedding]] = None,
    on_builder: Optional[Callable[[str], None]] = None,
) -> StagedDoc:
    """Complete one document's staging ``graph``, which holds its chunks and their fragments
    (``staging.stage_fragments``; ``failures``: theirs): story edges, passages, layers.

    ``llm_runner`` is called only when a builder wants the index's runner, so building without
    LLM-using builders never resolves an LLM; ``embed_model`` likewise, for a builder that
    compares texts while it builds (``use_embed_model``). ``on_builder`` is told each
    builder's name as it starts (the progress bar's label: one book's layers take minutes).
    """
    graph.upsert_edges(story_order_edges(graph, doc_id))
    if document is not None:
        text, base = document.text, 0
    else:
        text, base = document_text(chunks)
    passages, passage_edges = build_passages(doc_id, order, text, chunks, passage_words, base)
    graph.upsert_nodes(passages)
    graph.upsert_edges(passage_edges)
    failures = list(failures)
    if document is not None:
        failures += await run_builders(
            document, doc_id, order, chunks, graph, builders, llm_runner, embed_model, on_builder
        )
    return StagedDoc(document, doc_id, order, chunks, graph, failures)


async def run_builders(
    document: Document,
    doc_id: str,
    order: int,
    chunks: Sequence[TextNode],
    graph: GraphStore,
    builders: Sequence[DocumentBuilder],
    llm_runner: Callable[[], Optional["LLMRunner"]],
    embed_model: Optional[Callable[[], BaseEmbedding]] = None,
    on_builder: Optional[Callable[[str], None]] = None,
) -> list[dict[str, str]]:
    """Run ``builders`` in order over one document's staging ``graph``, adding what each
    builds (a later builder sees the earlier ones' layers); returns their failures. Shared by
    indexing and by adding layers to stored documents (``layers``)."""
    failures: list[dict[str, str]] = []
    for builder in builders:
        if on_builder is not None:
            on_builder(getattr(builder, "config_name", None) or type(builder).__name__)
        adopt = getattr(builder, "use_llm_runner", None)
        if adopt is not None:
            adopt(llm_runner())
        adopt_embedding = getattr(builder, "use_embed_model", None)
        if adopt_embedding is not None and embed_model is not None:
            adopt_embedding(embed_model())
        new_nodes, new_edges, problems = split_result(
            await builder.abuild(document, order, chunks, graph)
        )
        for node_page in pages(new_nodes):
            graph.upsert_nodes(node_page)
        for edge_page in pages(new_edges):
            graph.upsert_edges(edge_page)
        failures.extend(
            {"doc_id": doc_id, "chunk_id": p.get("chunk_id", ""), "reason": p["reason"]}
            for p in problems
        )
    return failures


async def link_staged(
    staged: Sequence[StagedDoc],
    builders: Sequence[DocumentBuilder],
    committed: GraphStore,
    llm_runner: Callable[[], Optional["LLMRunner"]],
) -> None:
    """Run every builder's ``alink`` over the batch (``builders.py``) and hand each staged
    document its links and failures.

    Call it holding the write lock: links join the batch to the graph *as committed*, so a
    concurrent batch committed just before is seen. A link that breaks the rules of
    ``_check_links`` is a builder bug and raises ``ValueError`` before anything is written.
    """
    by_doc = {stage.doc_id: stage for stage in staged}
    for builder in builders:
        alink = getattr(builder, "alink", None)
        if alink is None:
            continue
        adopt = getattr(builder, "use_llm_runner", None)
        if adopt is not None:
            adopt(llm_runner())
        links_by_doc, problems = await alink([(s.doc_id, s.graph) for s in staged], committed)
        for doc_id, links in links_by_doc.items():
            owner = _batch_doc(by_doc, doc_id, builder)
            _check_links(links, owner, by_doc, committed)
            owner.links.extend(links)
        for problem in problems:
            owner = _failure_owner(problem, staged, by_doc, builder)
            owner.failures.append(
                {"doc_id": owner.doc_id, "chunk_id": problem.get("chunk_id", ""),
                 "reason": problem["reason"]}
            )


def _check_links(
    links: Sequence[GraphEdge],
    owner: StagedDoc,
    batch: dict[str, StagedDoc],
    committed: GraphStore,
) -> None:
    """Each link is owned by ``owner`` (``doc_id``) and has an end among its nodes; every end is
    in a batch document or in a committed document outside the batch (a batch document's
    committed nodes are about to be replaced, so a link to them would dangle)."""
    for link in links:
        if link.doc_id != owner.doc_id or not (
            owner.graph.has_node(link.source) or owner.graph.has_node(link.target)
        ):
            raise ValueError(
                f"link {link.kind.value} {link.source} -> {link.target} must be owned by "
                f"{owner.doc_id!r} (doc_id) and start or end at one of its nodes"
            )
    outside = {
        end
        for link in links
        for end in (link.source, link.target)
        if not any(stage.graph.has_node(end) for stage in batch.values())
    }
    found = {node.id: node for node in committed.get_nodes(sorted(outside))}
    for end in sorted(outside):
        if end not in found or found[end].doc_id in batch:
            raise ValueError(
                f"a link of {owner.doc_id!r} ends at {end!r}, which is in neither the batch nor "
                "a committed document outside it"
            )


def _failure_owner(
    problem: dict[str, str], staged: Sequence[StagedDoc], by_doc: dict[str, StagedDoc], builder: Any
) -> StagedDoc:
    """The batch document a link failure belongs to: the one it names (``doc_id``), else the
    one holding its ``chunk_id``, else the batch's last document (links go to the later one)."""
    if "doc_id" in problem:
        return _batch_doc(by_doc, problem["doc_id"], builder)
    chunk_id = problem.get("chunk_id")
    holder = [s for s in staged if chunk_id and s.graph.has_node(chunk_id)]
    return holder[0] if holder else staged[-1]


def _batch_doc(by_doc: dict[str, StagedDoc], doc_id: str, builder: Any) -> StagedDoc:
    if doc_id not in by_doc:
        raise ValueError(
            f"{type(builder).__name__}.alink returned links or failures for {doc_id!r}, "
            "which is not a document of the batch"
        )
    return by_doc[doc_id]


# -- phase 2: what the stores write ------------------------------------------------------------
def document_write(stage: StagedDoc, vectors: StagedVectors) -> DocumentWrite:
    """The stores' write of one staged document: graph, vector records, chunks, failures.

    Nodes, edges and records are read from the staging graph a page at a time each time the
    commit iterates them (``StagedRows``). Chunk graph nodes carry their ``TextNode``
    (``CHUNK_NODE_ATTR``) so results can cite the source from the graph alone.
    """
    chunk_nodes = {c.node_id: c for c in stage.chunks}
    graph = stage.graph

    def nodes() -> Iterator[GraphNode]:
        for page in graph.scan_nodes():
            for node in page:
                chunk = chunk_nodes.get(node.id) if node.kind == NodeKind.CHUNK else None
                if chunk is not None:
                    node.attrs[CHUNK_NODE_ATTR] = chunk.to_dict()
                yield node

    def edges() -> Iterator[GraphEdge]:
        for page in graph.scan_edges():
            yield from page

    def records() -> Iterator[VectorRecord]:
        for node in embeddable_nodes(graph):
            yield vector_record(node, node_vectors.vector(node, graph, vectors.of))

    return DocumentWrite(
        doc_id=stage.doc_id,
        order=stage.order,
        nodes=StagedRows(nodes),
        edges=StagedRows(edges),
        records=StagedRows(records),
        chunks=stage.chunks,
        failures=stage.failures,
        doc_hash=stage.document.hash if stage.document is not None else None,
        links=stage.links,
        text_hash=text_hash(stage.document) if stage.document is not None else None,
    )


class StagedRows(Iterable[Any]):
    """Rows read afresh from a staging graph each time they are iterated (the commit walks
    them more than once, never holding them all)."""

    def __init__(self, read: Callable[[], Iterator[Any]]) -> None:
        self._read = read

    def __iter__(self) -> Iterator[Any]:
        return self._read()


def vector_record(node: GraphNode, embedding: Sequence[float]) -> VectorRecord:
    """The vector of a graph node: same id, kind and document, flat position metadata."""
    return VectorRecord(
        id=node.id,
        kind=node.kind.value,
        doc_id=node.doc_id,
        text=node.text,
        vector=np.asarray(embedding, dtype=np.float32),  # a row view when already float32
        metadata={
            "chunk_id": node.chunk_id or "",
            "doc_order": node.pos[0],
            "char_offset": node.pos[1],
            "ordinal": node.pos[2],
        },
    )


def add_stats(totals: dict[str, Any], after: dict[str, Any], before: dict[str, Any]) -> None:
    """Add LLM spending since ``before`` (``after - before``) to the running totals."""
    for key, value in after.items():
        if isinstance(value, dict):
            add_stats(totals.setdefault(key, {}), value, before.get(key, {}))
        elif isinstance(value, (int, float)):
            totals[key] = totals.get(key, 0) + value - before.get(key, 0)
