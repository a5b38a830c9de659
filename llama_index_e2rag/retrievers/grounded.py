"""GroundedKG-RAG retrieval (paper §3.4): query graph → top-K graph nodes → grounded sentences.

The query is parsed by the same LLM-free extractor that built the graph; every query node is
matched against the cached node-embedding matrix of the index's mention and event nodes, and the
sentences the top-K nodes are grounded in (``grounded_in`` edges) come back as ``TextNode``s with
their story positions. Optional filters follow the paper: ``vector_sim`` (VectorSim τ: keep a
sentence only if its cosine with the query is ≥ τ) and ``ret_count`` (RetCount: keep a sentence
only if at least n distinct selected graph nodes are grounded in it; the copies of one entity or
event that overlapping chunks each extracted count once). A sentence in the overlap of two chunks
is two sentence nodes; it comes back once, with the evidence of both.

Node embeddings are computed once per graph state from the vectors the index already stored, so a
query embeds only itself and its nodes; the rest is one matrix product.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Optional

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import (
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.vector_stores.types import MetadataFilters

from llama_index_e2rag.retrievers.filters import DocScope
from llama_index_e2rag.retrievers.base import RetrievalIO, StoresRetriever
from llama_index_e2rag.context.keys import POS_KEY, POSITION_KEY, bookkeeping_keys
from llama_index_e2rag.context.evidence import ContextOrder, format_position
from llama_index_e2rag.stores.grounded_layout import CANDIDATE_KINDS
from llama_index_e2rag.stores.node_embeddings import (
    EMBEDDING_VARIANTS,
    EmbeddingVariant,
    NodeEmbeddingCache,
    basic_embeddings,
    graph_cache,
    l2_normalize,
)
from llama_index_e2rag.retrievers.budget import within_budget
from llama_index_e2rag.retrievers.parsing import extractors_parser
from llama_index_e2rag.retrievers.vector import chunk_metadata
from llama_index_e2rag.schema import GraphNode, NodeKind
from llama_index_e2rag.stores.port import Stores

Order = Literal["relevance", "story"]
#: With a budget, K grows to one graph node per this many words of budget (a node's sentences
#: overlap other nodes', so this over-reaches on purpose and the budget cuts the rest).
BUDGET_WORDS_PER_NODE = 20

@dataclass
class _Hit:
    """A grounded text reached from one or more (query node, graph node) matches."""

    #: Best specificity-weighted similarity per query node (index) reaching this text.
    by_query: dict[int, float] = field(default_factory=dict)
    #: Best similarity per selected graph node grounded here.
    graph_nodes: dict[str, float] = field(default_factory=dict)
    #: Evidence units (``NodeEmbeddingCache.units``) of those graph nodes: RetCount counts these.
    units: set[int] = field(default_factory=set)

    def add(self, query: int, weighted: float, node_id: str, similarity: float, unit: int) -> None:
        self.by_query[query] = max(self.by_query.get(query, -1.0), weighted)
        self.graph_nodes[node_id] = max(self.graph_nodes.get(node_id, -1.0), similarity)
        self.units.add(unit)

    def merge(self, other: "_Hit") -> None:
        """Take in the evidence of a copy of the same sentence (from an overlapping chunk)."""
        for query, weighted in other.by_query.items():
            self.by_query[query] = max(self.by_query.get(query, -1.0), weighted)
        for node_id, similarity in other.graph_nodes.items():
            self.graph_nodes[node_id] = max(self.graph_nodes.get(node_id, -1.0), similarity)
        self.units |= other.units

    def score(self, query_count: int, text_sim: float) -> float:
        """Rank of a text: half query-graph coverage, half its own similarity to the query.

        Coverage is the mean over query nodes of their best match here, each match divided by
        ``1 + ln(number of sentences the matched entity or event is grounded in)``: a main
        character is named in dozens of sentences and is weak evidence for any one of them,
        while an event grounded in one sentence is strong evidence for it. Texts reached through
        the same frequent entity would tie; their own similarity to the query breaks the tie.
        (The paper returns the selected texts as an unordered set; this order only matters when a
        budget or ``max_sentences`` cuts the list.)
        """
        coverage = sum(self.by_query.values()) / query_count
        return 0.5 * coverage + 0.5 * text_sim


class _Candidate(NamedTuple):
    """A grounded text that passed the filters: its row in the cache and its scores."""

    row: int
    hit: _Hit
    score: float
    text_sim: float


class GroundedGraphRetriever(StoresRetriever):
    """Sentences grounded in the graph nodes most similar to the query's own graph nodes.

    Args:
        stores: the index's ``Stores`` (``index.as_retriever(mode="grounded")`` passes them).
        embed_model: the embedding the graph was embedded with.
        parser: the query parser (anything with ``query_nodes(text)``); default: a new
            ``GroundedExtractor`` (the index passes the one that built its graph).
        similarity_top_k: K, graph nodes taken per query node (the paper's K=10).
        embedding_variant: ``basic`` (α·name + (1−α)·grounded sentences), ``neighbor``
            (β·basic + (1−β)·mean of neighbours) or ``attention`` (neighbours weighted by the
            softmax of their similarity to the node).
        alpha, beta: the paper's α and β.
        vector_sim: VectorSim τ; ``None`` disables the filter.
        ret_count: RetCount threshold n; ``None`` disables the filter.
        order: ``relevance`` (best first) or ``story`` (narrative order; with ``max_sentences``
            the best sentences are chosen first, then put in story order).
        max_sentences: cap on returned sentences (``None``: all the top-K nodes lead to).
        budget_words: fill this many words with the best sentences instead (each sentence
            once); K is raised so that enough sentences are reached. Without a budget the
            result is every sentence the top-K nodes per query node are grounded in, so
            ``similarity_top_k=5`` may return anywhere from a few to dozens of sentences.
        filters: ``MetadataFilters`` on document metadata: the top-K nodes are chosen among
            the matching documents' nodes only.
    """

    def __init__(
        self,
        stores: Stores,
        embed_model: BaseEmbedding,
        parser: Any = None,
        similarity_top_k: int = 10,
        embedding_variant: EmbeddingVariant = "basic",
        alpha: float = 0.5,
        beta: float = 0.5,
        vector_sim: Optional[float] = None,
        ret_count: Optional[int] = None,
        order: Order = "relevance",
        max_sentences: Optional[int] = None,
        budget_words: Optional[int] = None,
        filters: Optional[MetadataFilters] = None,
        callback_manager: Optional[CallbackManager] = None,
        verbose: bool = False,
    ) -> None:
        if similarity_top_k < 1:
            raise ValueError(f"similarity_top_k must be at least 1, got {similarity_top_k}")
        if embedding_variant not in EMBEDDING_VARIANTS:
            raise ValueError(
                f"embedding_variant must be one of {EMBEDDING_VARIANTS}, got {embedding_variant!r}"
            )
        for name, value in (("alpha", alpha), ("beta", beta)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be between 0 and 1, got {value!r}")
        if vector_sim is not None and not -1.0 <= vector_sim <= 1.0:
            raise ValueError(f"vector_sim is a cosine threshold in [-1, 1], got {vector_sim!r}")
        if ret_count is not None and ret_count < 1:
            raise ValueError(f"ret_count must be at least 1, got {ret_count}")
        if order not in ("relevance", "story"):
            raise ValueError(f"order must be 'relevance' or 'story', got {order!r}")
        if max_sentences is not None and max_sentences < 1:
            raise ValueError(f"max_sentences must be at least 1, got {max_sentences}")
        super().__init__(stores, embed_model, budget_words, filters, callback_manager, verbose)
        self.similarity_top_k = similarity_top_k
        self.embedding_variant = embedding_variant
        self.alpha = alpha
        self.beta = beta
        self.vector_sim = vector_sim
        self.ret_count = ret_count
        self.order = order
        self.max_sentences = max_sentences
        self._parser = parser

    @property
    def context_order(self) -> ContextOrder:
        """How the query engine presents the results: as ranked, or in story order."""
        return "story" if self.order == "story" else "retrieval"

    # -- the retrieval ---------------------------------------------------------------------------
    async def _run(self, query: QueryBundle, io: RetrievalIO) -> list[NodeWithScore]:
        cache = await io.offload(graph_cache, self._stores)
        texts = self._texts_to_embed(query.query_str)
        given = [] if query.embedding is None else [query.embedding]  # the query sentence's
        texts = texts[len(given):]
        model = self._embed_model
        vectors = given + (
            await io.call(model.get_text_embedding_batch, model.aget_text_embedding_batch, texts)
            if texts else []
        )
        return self._select(cache, *_split_vectors(vectors))

    # -- steps ---------------------------------------------------------------------------------
    def _parse(self, query: str) -> list[GraphNode]:
        """The query graph's mention and event nodes (empty when nothing parses)."""
        if self._parser is None:
            self._parser = extractors_parser(())
        nodes = self._parser.query_nodes(query)
        return [n for n in nodes if n.kind in (NodeKind.MENTION, NodeKind.EVENT)]

    def _texts_to_embed(self, query: str) -> list[str]:
        """The query sentence, then its nodes' texts: one embedding call per query.

        As in the paper the query goes through the documents' pipeline, so its sentence is
        embedded as a text, like the sentences it is compared with.
        """
        return [query] + [_node_text(n) for n in self._parse(query)]

    def _query_matrix(self, query_vec: np.ndarray, name_vecs: np.ndarray) -> np.ndarray:
        """Embed query nodes like graph nodes: each is grounded in the query sentence itself.

        With no parsable node the whole query is the one query node (dense retrieval over the node
        matrix). ``query_nodes`` hands back nodes without the query graph's edges, so query nodes
        have no neighbours and the neighbour variants reduce to the basic embedding on this side.
        """
        query_vec = l2_normalize(query_vec.reshape(1, -1))
        if name_vecs.size == 0:
            return query_vec
        count = len(name_vecs)
        indptr = np.arange(count + 1, dtype=np.int64)
        return basic_embeddings(
            name_vecs, indptr, np.zeros(count, dtype=np.int64), query_vec, self.alpha
        )

    def _select(
        self, cache: NodeEmbeddingCache, query_vec: np.ndarray, name_vecs: np.ndarray
    ) -> list[NodeWithScore]:
        if cache.size == 0:
            return []
        matrix = cache.matrix(self.embedding_variant, self.alpha, self.beta)
        queries = self._query_matrix(query_vec, name_vecs)
        if matrix.shape[1] != queries.shape[1]:
            raise ValueError(
                f"the index's stored vectors have {matrix.shape[1]} dimensions but its embed "
                f"model returns {queries.shape[1]}; load the index with the embedding model it "
                "was built with"
            )
        copies: dict[int, _Hit] = {}
        for qi, row in enumerate(self._top_nodes(cache, matrix, queries)):
            for gi, score in row:
                weighted = score / cache.specificity(gi)
                node_id, unit = cache.node_ids[gi], int(cache.units[gi])
                for ti in cache.groundings(gi):
                    copies.setdefault(int(ti), _Hit()).add(qi, weighted, node_id, score, unit)
        hits = _merge_copies(cache, copies)
        text_sims = (
            cache.text_vectors(list(hits), len(query_vec)) @ l2_normalize(query_vec)
            if hits else []
        )
        kept = [
            _Candidate(row, hit, hit.score(len(queries), float(sim)), float(sim))
            for (row, hit), sim in zip(hits.items(), text_sims)
            if (self.ret_count is None or len(hit.units) >= self.ret_count)
            and (self.vector_sim is None or sim >= self.vector_sim)
        ]
        return self._to_nodes(cache, kept)

    def _top_nodes(
        self, cache: NodeEmbeddingCache, matrix: np.ndarray, queries: np.ndarray
    ) -> list[list[tuple[int, float]]]:
        """Per query node, its top-K graph nodes with their cosines: the default matrix's
        search when it has one (an HNSW graph from ``ANN_MIN_ROWS`` nodes on: no product with
        every row), else one product with every row (exact; a document filter's other
        documents' nodes are never among the top K)."""
        allowed = self._allowed(cache, self._scope())
        if (
            allowed is None
            and cache.search is not None
            and cache.is_persisted(self.embedding_variant, self.alpha)
        ):
            return cache.search.top(queries, self._top_k(), ties=cache.node_ids)
        sims = queries @ matrix.T  # (query nodes, graph nodes), all rows unit length
        if allowed is not None:
            sims[:, ~allowed] = -np.inf
        reachable = cache.size if allowed is None else int(allowed.sum())
        k = min(self._top_k(), reachable)
        if not k:
            return [[] for _ in range(len(queries))]
        top = np.argpartition(sims, cache.size - k, axis=1)[:, cache.size - k :]
        return [[(int(gi), float(sims[qi, gi])) for gi in row] for qi, row in enumerate(top)]

    def _to_nodes(self, cache: NodeEmbeddingCache, kept: list[_Candidate]) -> list[NodeWithScore]:
        """Rank, cut, order and wrap; texts deleted since the cache was built are skipped."""
        wanted = [cache.text_ids[c.row] for c in kept]
        texts = {n.id: n for n in self._stores.graph.get_nodes(wanted)}
        found = [(c, texts[node_id]) for c, node_id in zip(kept, wanted) if node_id in texts]
        found.sort(
            key=lambda pair: (-pair[0].score, -len(pair[0].hit.units), pair[1].pos, pair[1].id)
        )
        if self.max_sentences is not None:
            found = found[: self.max_sentences]
        chunk_meta = self._chunk_metadata(cache, {node.chunk_id for _, node in found})
        results = [
            NodeWithScore(
                node=_text_node(node, cand, chunk_meta.get(node.chunk_id or "", {})),
                score=cand.score,
            )
            for cand, node in found
        ]
        if self.budget_words is not None:
            results = within_budget(results, self.budget_words)
        if self.order == "story":
            position = {node.id: (node.pos, node.id) for _, node in found}
            results.sort(key=lambda item: position[item.node.node_id])
        return results

    def _allowed(
        self, cache: NodeEmbeddingCache, scope: Optional[DocScope]
    ) -> Optional[np.ndarray]:
        """Which graph nodes of the matrix belong to the filter's documents (``None``: all)."""
        if scope is None:
            return None
        ids = {i for kind in CANDIDATE_KINDS for i in scope.node_ids(self._stores, kind)}
        return np.fromiter((i in ids for i in cache.node_ids), bool, len(cache.node_ids))

    def _top_k(self) -> int:
        """K graph nodes per query node; with a budget, enough to reach that many words."""
        if self.budget_words is None:
            return self.similarity_top_k
        return max(self.similarity_top_k, self.budget_words // BUDGET_WORDS_PER_NODE)

    def _chunk_metadata(
        self, cache: NodeEmbeddingCache, chunk_ids: set[Optional[str]]
    ) -> dict[str, dict[str, Any]]:
        """User metadata of the source chunks (file name, title...) so answers can cite them.

        Kept in the graph-state cache: reading chunks back from the docstore costs more than the
        whole matrix search.
        """
        known = cache.chunk_metadata
        missing = [i for i in chunk_ids if i and i not in known]
        if missing:
            known.update(chunk_metadata(self._stores, missing))
        return known


def _merge_copies(cache: NodeEmbeddingCache, copies: dict[int, _Hit]) -> dict[int, _Hit]:
    """One hit per sentence: copies from overlapping chunks pool their evidence.

    The text returned is the whole sentence (a chunk may start or end inside one, and its cut-off
    copy is not worth reading); among whole copies, the one with the most evidence of its own.
    """
    groups: dict[int, list[int]] = {}
    for row in copies:
        groups.setdefault(int(cache.text_groups[row]), []).append(row)
    merged: dict[int, _Hit] = {}
    for head, rows in groups.items():
        whole = [r for r in rows if cache.text_lengths[r] == cache.text_lengths[head]]
        keep = min(whole, key=lambda r: (-sum(copies[r].by_query.values()), r), default=head)
        hit = _Hit()
        for row in rows:
            hit.merge(copies[row])
        merged[keep] = hit
    return merged


def _split_vectors(vectors: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """(query sentence vector, query node vectors) from one batch."""
    matrix = np.asarray(vectors, dtype=np.float32)
    return matrix[0], matrix[1:]


def _node_text(node: GraphNode) -> str:
    """A query node is embedded like graph nodes are: its ``text`` (entity span, clause)."""
    return node.text or node.name or ""


def _text_node(graph_node: GraphNode, cand: _Candidate, source_meta: dict[str, Any]) -> TextNode:
    ours = {
            "kind": graph_node.kind.value,
            POSITION_KEY: format_position(graph_node.pos),
            POS_KEY: list(graph_node.pos),
            "doc_id": graph_node.doc_id,
            "chunk_id": graph_node.chunk_id,
            "span": list(graph_node.span) if graph_node.span else None,
            "graph_nodes": sorted(cand.hit.graph_nodes, key=lambda i: -cand.hit.graph_nodes[i]),
            "ret_count": len(cand.hit.units),
            "query_hits": len(cand.hit.by_query),
            "query_similarity": round(cand.text_sim, 6),
    }
    metadata = {**source_meta, **ours}
    hidden = bookkeeping_keys(ours)
    return TextNode(
        id_=graph_node.id,
        text=graph_node.text,
        metadata=metadata,
        excluded_embed_metadata_keys=hidden,
        excluded_llm_metadata_keys=hidden,
        start_char_idx=graph_node.span[0] if graph_node.span else None,
        end_char_idx=graph_node.span[1] if graph_node.span else None,
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=graph_node.doc_id)},
    )
