"""Add document layers (ChronoRAG, SentGraph, E²GraphRAG) to documents already in the stores.

Indexing a book again to add a layer would repeat its extraction (an LLM bill, or minutes of
parsing) for nothing: document builders only read a document's staging graph (its chunks,
mentions, events, passages and earlier layers), and that graph is what the store committed.
So each stored document's staging graph is rebuilt from the graph store, only the new builders
run on it, only their new nodes are embedded (every other node keeps its stored vector), and the
index commits the batch as one write, like an insert (``E2RAGIndex.aadd_layers``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.ingest import node_vectors
from llama_index_e2rag.extract.builders import DocumentBuilder
from llama_index_e2rag.context.keys import INTERNAL_METADATA_KEYS
from llama_index_e2rag.extract.base import chunk_offset
from llama_index_e2rag.extract.passages import document_text
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.ingest.embedding import KeptVectors, RecordingEmbedding, embed_texts
from llama_index_e2rag.ingest.pipeline import StagedDoc, run_builders, vector_record
from llama_index_e2rag.stores.same_text import TEXT_HASH_KEY
from llama_index_e2rag.ingest.progress import doc_bar
from llama_index_e2rag.schema import GraphNode, NodeKind, embeddable
from llama_index_e2rag.stores.port import DocumentWrite, Stores

if TYPE_CHECKING:
    from llama_index_e2rag.llm.runner import LLMRunner


@dataclass
class LayersAdded:
    """What ``add_layers`` did: the builders it ran (``config_name`` or class name), on how
    many documents, and how many nodes they added."""

    names: list[str] = field(default_factory=list)
    documents: int = 0
    nodes: int = 0


def builder_name(builder: Any) -> str:
    return getattr(builder, "config_name", None) or type(builder).__name__


def missing_builders(
    present: Sequence[DocumentBuilder], wanted: Sequence[DocumentBuilder]
) -> list[DocumentBuilder]:
    """The builders of ``wanted`` whose layer the index does not build yet (same
    ``config_name``, or the same object for a builder without one), each name once."""
    names = {getattr(b, "config_name", None) for b in present} - {None}
    new: list[DocumentBuilder] = []
    for builder in wanted:
        name = getattr(builder, "config_name", None)
        if any(builder is b for b in present) or (name is not None and name in names):
            continue
        new.append(builder)
        if name is not None:
            names.add(name)
    return new


@dataclass
class LayerBuild:
    """The new layers of every stored document, staged and embedded, ready to commit."""

    staged: list[StagedDoc]
    new_ids: dict[str, set[str]]  # doc_id -> ids of the nodes the new builders added
    vectors: dict[str, np.ndarray]  # node id -> vector (stored, or embedded now)
    hashes: dict[str, dict[str, Any]]  # doc_id -> its stored record (hashes kept as they are)
    report: LayersAdded

    def writes(self) -> list[DocumentWrite]:
        """One write per document: its whole graph (the stored part unchanged), links and
        failures included, every embedded node with its vector."""
        out = []
        for stage in self.staged:
            nodes = stage.graph.nodes()
            out.append(
                DocumentWrite(
                    doc_id=stage.doc_id,
                    order=stage.order,
                    nodes=nodes,
                    edges=stage.graph.edges(),
                    records=[
                        vector_record(n, self.vectors[n.id]) for n in nodes if n.id in self.vectors
                    ],
                    chunks=stage.chunks,
                    failures=stage.failures,
                    doc_hash=self.hashes[stage.doc_id].get("hash"),
                    links=stage.links,
                    text_hash=self.hashes[stage.doc_id].get(TEXT_HASH_KEY),
                )
            )
        return out


async def stage_layers(
    stores: Stores,
    builders: Sequence[DocumentBuilder],
    embed_model: BaseEmbedding,
    llm_runner: Callable[[], Optional["LLMRunner"]],
    documents: Sequence[Document] = (),
    show_progress: bool = False,
) -> LayerBuild:
    """Run ``builders`` over every stored document and embed what they add.

    ``documents`` may give the source text of stored documents (e.g. the files ``e2rag index``
    read); one is used only when its hash is the stored one, else the text is rebuilt from the
    stored chunks. The caller holds the store's writer lock, so the graph read here is the one
    the commit replaces. ``show_progress``: a bar per stage, as a build shows (a novel's layers
    take about a minute).
    """
    graph = stores.graph
    records = graph.doc_records()
    given = {doc.id_: doc for doc in documents}
    failures_of: dict[str, list[dict[str, str]]] = {}
    for failure in graph.failures():
        failures_of.setdefault(failure["doc_id"], []).append(failure)
    recorder = RecordingEmbedding(embed_model)
    staged: list[StagedDoc] = []
    new_ids: dict[str, set[str]] = {}
    docs = doc_bar(
        sorted(graph.doc_orders().items(), key=lambda item: item[1]),
        "Building document layers",
        show_progress,
    )
    for doc_id, order in docs:
        docs.set_postfix_str("reading the stored graph")
        stage = _restage(stores, doc_id, order, failures_of.get(doc_id, []))
        doc_hash = (records.get(doc_id) or {}).get("hash")
        source = given.get(doc_id)
        document = source if source is not None and source.hash == doc_hash else None
        before = {n.id for n in stage.graph.nodes()}
        stage.failures.extend(await run_builders(
            document or _rebuilt_document(doc_id, stage.chunks), doc_id, stage.order,
            stage.chunks, stage.graph, builders, llm_runner, lambda: recorder,
            on_builder=docs.set_postfix_str,
        ))
        staged.append(stage)
        new_ids[doc_id] = {n.id for n in stage.graph.nodes()} - before
    known = recorder.take()
    try:
        vectors = await _vectors(stores, staged, new_ids, embed_model, known, show_progress)
    finally:
        known.close()
    report = LayersAdded(
        names=[builder_name(b) for b in builders],
        documents=len(staged),
        nodes=sum(len(ids) for ids in new_ids.values()),
    )
    hashes = {doc_id: records.get(doc_id) or {} for doc_id in new_ids}
    return LayerBuild(staged, new_ids, vectors, hashes, report)


def _restage(
    stores: Stores, doc_id: str, order: int, failures: list[dict[str, str]]
) -> StagedDoc:
    """A stored document as a staging graph: its nodes and own edges; edges reaching other
    documents are its links (kept, as the commit replaces the whole document)."""
    nodes = stores.graph.nodes(doc_id=doc_id)
    ids = {n.id for n in nodes}
    staging = NetworkXGraphStore()
    staging.upsert_nodes(nodes)
    edges = stores.graph.edges(doc_id=doc_id)
    staging.upsert_edges(e for e in edges if e.source in ids and e.target in ids)
    links = [e for e in edges if e.source not in ids or e.target not in ids]
    chunk_ids = [n.id for n in nodes if n.kind == NodeKind.CHUNK]
    chunks = [chunk for _, chunk in stores.chunk_pairs(chunk_ids)]
    return StagedDoc(None, doc_id, order, chunks, staging, list(failures), links)


def _rebuilt_document(doc_id: str, chunks: Sequence[TextNode]) -> Document:
    """The document's text from its stored chunks, at its original character offsets (the
    positions builders compute are offsets into it), with the chunks' source metadata."""
    offsets = [chunk_offset(c) for c in chunks]
    if len(set(offsets)) < len(offsets):
        raise ValueError(
            f"document {doc_id!r} was inserted as nodes without character offsets, so its text "
            "cannot be rebuilt for document builders; insert it again as a Document"
        )
    text, base = document_text(chunks)
    metadata: dict[str, Any] = {}
    excluded: list[str] = []
    if chunks:
        first = chunks[0]
        metadata = {k: v for k, v in first.metadata.items() if k not in INTERNAL_METADATA_KEYS}
        excluded = [k for k in first.excluded_llm_metadata_keys if k in metadata]
    return Document(
        text=" " * base + text,
        id_=doc_id,
        metadata=metadata,
        excluded_embed_metadata_keys=excluded,
        excluded_llm_metadata_keys=excluded,
    )


async def _vectors(
    stores: Stores,
    staged: Sequence[StagedDoc],
    new_ids: Mapping[str, set[str]],
    embed_model: BaseEmbedding,
    known: KeptVectors,
    show_progress: bool = False,
) -> dict[str, np.ndarray]:
    """Every embedded node's vector: the stored one for nodes that were there, embedded for the
    new ones (and for a stored node that lost its vector); texts the builders embedded while
    building (``known``) are not embedded twice."""
    wanted = [(stage, n) for stage in staged for n in stage.graph.nodes() if embeddable(n)]
    stored = stores.embeddings(
        [n.id for stage, n in wanted if n.id not in new_ids[stage.doc_id]]
    )
    todo: list[tuple[StagedDoc, GraphNode]] = [(s, n) for s, n in wanted if n.id not in stored]
    embedded = await embed_texts(
        embed_model,
        (t for stage, n in todo for t in node_vectors.sources(n, stage.graph)),
        show_progress,
        known=known,
    )
    vectors = dict(stored)
    for stage, node in todo:
        vectors[node.id] = node_vectors.vector(node, stage.graph, embedded.of)
    return vectors
