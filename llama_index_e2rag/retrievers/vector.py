"""Plain chunk-vector retrieval over the stores (the "vanilla RAG" baseline of the papers).

Top-k chunk vectors by similarity to the query, with the same position metadata as the graph
retrievers so the same context assembly and answer step apply.
"""

from __future__ import annotations

from typing import Any, Iterable, Literal, Optional, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.retrievers.base import RetrievalIO, StoresRetriever
from llama_index_e2rag.context.keys import (
    EVIDENCE_TEXT_KEY,
    INTERNAL_METADATA_KEYS,
    POS_KEY,
    POSITION_KEY,
    bookkeeping_keys,
)
from llama_index_e2rag.context.evidence import ContextOrder, format_position
from llama_index_e2rag.retrievers.budget import budget_depth, within_budget
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.vectors.base import VectorHit

#: Words a chunk is assumed to hold at least when sizing the candidates for a budget.
CHUNK_WORDS_FLOOR = 50


class VectorChunkRetriever(StoresRetriever):
    """Top-k chunks by embedding similarity; ``order="story"`` returns them in narrative order.

    ``similarity_top_k`` counts chunks. With ``budget_words`` the best chunks fill that many
    words instead (the overlap two chunks share counts once; the last one is cut at a sentence
    end). ``order`` is also the order the answer LLM reads them in (``context_order``): by
    relevance, like the vanilla RAG baseline of the papers, or in story order. ``filters``
    (``MetadataFilters`` on document metadata) restricts the search to the matching documents.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        similarity_top_k: int = 5,
        order: Literal["relevance", "story"] = "relevance",
        budget_words: Optional[int] = None,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        if order not in ("relevance", "story"):
            raise ValueError(f"order must be 'relevance' or 'story', got {order!r}")
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self.similarity_top_k = similarity_top_k
        self.order = order

    @property
    def context_order(self) -> ContextOrder:
        """How the query engine presents the results: as ranked, or in story order."""
        return "retrieval" if self.order == "relevance" else "story"

    def _depth(self) -> int:
        if self.budget_words is None:
            return self.similarity_top_k
        return budget_depth(self.budget_words, CHUNK_WORDS_FLOOR, self.similarity_top_k)

    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        vector = await self._query_embedding(query, io)
        hits = await io.search(self._stores, self._scope(), NodeKind.CHUNK, vector, self._depth())
        return self._to_nodes(hits)

    def _to_nodes(self, hits: list[VectorHit]) -> list[NodeWithScore]:
        scores = {hit.id: hit.score for hit in hits}
        results = []
        for graph_chunk, chunk in self._stores.chunk_pairs(list(scores)):
            nws = chunk_result(chunk, graph_chunk, scores[chunk.node_id], {"retriever": "vector"})
            results.append((graph_chunk.pos, nws))
        ranked = [nws for _, nws in results]
        if self.budget_words is None:
            ranked = ranked[: self.similarity_top_k]
        else:
            ranked = within_budget(ranked, self.budget_words)
        if self.order == "story":
            position = {nws.node.node_id: pos for pos, nws in results}
            ranked.sort(key=lambda nws: position[nws.node.node_id])
        return ranked


def chunk_metadata(stores: Stores, chunk_ids: Iterable[Optional[str]]) -> dict[str, dict[str, Any]]:
    """User metadata (file name, title …) of chunks, by id, so results can cite their source."""
    chunks = stores.get_chunks(sorted({i for i in chunk_ids if i}))
    return {
        c.node_id: {k: v for k, v in c.metadata.items() if k not in INTERNAL_METADATA_KEYS}
        for c in chunks
    }


def chunk_result(
    chunk: TextNode,
    graph_chunk: GraphNode,
    score: float,
    extra: dict[str, Any],
    evidence: Optional[str] = None,
) -> NodeWithScore:
    """A retrieved chunk as a fresh TextNode: user metadata, readable position, bookkeeping.

    The position ("document 0, character 1234") and the ``evidence`` text are shown to the LLM
    because a plain ``RetrieverQueryEngine`` only sees text and metadata; the bookkeeping keys
    are hidden from it, and the evidence is kept out of the embedding view.
    """
    ours = {
        POSITION_KEY: format_position(graph_chunk.pos),
        POS_KEY: list(graph_chunk.pos),
        "doc_id": graph_chunk.doc_id,
        "chunk_id": chunk.node_id,
        **extra,
    }
    if evidence:
        ours[EVIDENCE_TEXT_KEY] = evidence
    metadata = {k: v for k, v in chunk.metadata.items() if k not in INTERNAL_METADATA_KEYS}
    metadata.update(ours)
    hidden = bookkeeping_keys(ours)
    node = TextNode(
        id_=chunk.node_id,
        text=chunk.get_content(),
        metadata=metadata,
        excluded_embed_metadata_keys=_merge(
            chunk.excluded_embed_metadata_keys, [*hidden, EVIDENCE_TEXT_KEY]
        ),
        excluded_llm_metadata_keys=_merge(chunk.excluded_llm_metadata_keys, hidden),
        start_char_idx=chunk.start_char_idx,
        end_char_idx=chunk.end_char_idx,
        relationships=dict(chunk.relationships),
    )
    return NodeWithScore(node=node, score=score)


def _merge(own: list[str], ours: Sequence[str]) -> list[str]:
    """The chunk's own exclusions (e.g. a file path) plus ours, without internal keys."""
    return [k for k in dict.fromkeys([*own, *ours]) if k not in INTERNAL_METADATA_KEYS]
