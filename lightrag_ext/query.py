"""The ``e2rag`` query mode: cues -> seeds -> one hop -> ranked chunks -> story-ordered context.

E²RAG §4 on LightRAG's storages, step for step as llama_index_e2rag's ``EntityEventRetriever``
and with the same ranking code (``llama_index_e2rag.ranking``), so both packages rank alike:

1. Cues ``g(q)``: LightRAG's ``keyword`` role LLM answers the shared ``QUERY_CUE_TEXT``
   (cached under ``CUE_CACHE_TYPE``); a caller's ``ll_keywords`` / ``hl_keywords`` are used
   instead when given. An unusable answer or one past LightRAG's LLM timeout means no cues.
2. Seeds: each entity cue looks up ``top_k * mention_pool`` mentions, each event cue ``top_k``
   events (the query itself seeds both when there are no cues). Mentions sharing a name are
   re-ranked by their events' similarity to the query, and the best ``top_k`` kept.
3. One hop over the bipartite edges gives ``V_q+``.
4. Every chunk behind ``V_q+`` is ranked by its similarity to the query; ``chunk_top_k`` of them
   are kept, within the token budget.

Steps 2-4 are ``ranking.e2rag_ranking`` with its defaults (``EVENT_WEIGHT``, ``MENTION_POOL``),
the very call ``EntityEventRetriever`` makes.

The context is assembled as in llama_index_e2rag (``context.assemble_context``): passages in
story order with positions, then the linearised subgraph of ``V_q+`` inside them; the answer
is written by ``lightrag_ext.answer``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Collection, Optional, Sequence

import numpy as np
from lightrag.base import QueryParam
from lightrag.constants import DEFAULT_QUERY_PRIORITY
from lightrag.operate import QueryProgress
from lightrag.prompt import PROMPTS

from llama_index_e2rag import ranking
from llama_index_e2rag.ranking.e2rag import EVENT_WEIGHT, MENTION_POOL, clean_cues
from llama_index_e2rag.context.evidence import ContextBundle, Passage, assemble_context
from llama_index_e2rag.errors import LLMOutputError
from llama_index_e2rag.extract.prompts import QUERY_CUE_TEXT, QueryCues
from llama_index_e2rag.graph import NetworkXGraphStore
from llama_index_e2rag.llm.prompt_text import fill
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind

from lightrag_ext.cached_llm import CachedStructuredLLM
from lightrag_ext.storage import EventLayerStore

if TYPE_CHECKING:
    from lightrag import LightRAG

logger = logging.getLogger(__name__)

E2RAG_MODE = "e2rag"
CUE_CACHE_TYPE = "e2rag_query_cues"
#: Tokens kept free for the answer's reference list and safety (LightRAG's naive mode: 200).
ANSWER_RESERVE_TOKENS = 200
#: LightRAG's query progress callback (``/query/stream`` with ``include_progress``).
ProgressCallback = Optional[Callable[[str], Awaitable[None]]]


async def report(progress: ProgressCallback, event: str) -> None:
    """Send a ``QueryProgress`` event, as LightRAG's own modes do, when someone listens."""
    if progress is not None:
        await progress(event)


@dataclass
class Retrieved:
    """What the e2rag mode found: the context bundle and the scores behind it."""

    bundle: ContextBundle
    scores: dict[str, float] = field(default_factory=dict)
    chunk_records: dict[str, dict[str, Any]] = field(default_factory=dict)
    seeds: list[str] = field(default_factory=list)
    cues: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    def render(self) -> str:
        return self.bundle.render()


def _cosine(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1) * (np.linalg.norm(query) or 1.0)
    return (matrix @ query) / np.where(norms == 0, 1.0, norms)


class LayerSource:
    """``ranking.E2RAGSource`` over LightRAG's storages: the event layer's mention and event
    vector stores, the chunk store, and the layer's graph around the hits. Scores are our own
    cosine of the stored vectors, so every LightRAG backend ranks alike."""

    def __init__(self, rag: "LightRAG", layer: EventLayerStore) -> None:
        self._layer = layer
        self._vdbs = {
            NodeKind.MENTION: layer.mentions_vdb,
            NodeKind.EVENT: layer.events_vdb,
            NodeKind.CHUNK: rag.chunks_vdb,
        }

    async def lookup(self, kind: NodeKind, vector: np.ndarray, top_k: int) -> dict[str, float]:
        hits = await self._vdbs[kind].query("", top_k=top_k, query_embedding=vector)
        return await self.similarities(kind, vector, [hit["id"] for hit in hits])

    async def similarities(
        self, kind: NodeKind, vector: np.ndarray, ids: Collection[str]
    ) -> dict[str, float]:
        wanted = list(ids)
        if not wanted:
            return {}
        vectors = await self._vdbs[kind].get_vectors_by_ids(wanted)
        found = [i for i in wanted if i in vectors]
        if not found:
            return {}
        matrix = np.asarray([vectors[i] for i in found], dtype=np.float64)
        return dict(zip(found, _cosine(matrix, np.asarray(vector, dtype=np.float64)).tolist()))

    async def neighbourhood(self, ids: Sequence[str]) -> NetworkXGraphStore:
        """The nodes ``ids`` with their bipartite neighbours and the edges between them, in
        three batched calls (only neighbours of the other kind: co-occurrence and ``next``
        edges join nodes of one kind)."""
        layer = self._layer
        hop = await layer.neighbor_ids(ids)
        pairs = [(i, n) for i in ids for n in hop.get(i, []) if _kind(n) not in (_kind(i), None)]
        nodes = await layer.get_nodes([*ids, *(n for _, n in pairs)])
        edges = await layer.get_edges(pairs)
        graph = NetworkXGraphStore()
        graph.upsert_nodes(nodes.values())
        graph.upsert_edges(e for e in edges if e.source in nodes and e.target in nodes)
        return graph


def _kind(node_id: str) -> Optional[str]:
    """Node kind from its id (``make_id`` prefixes ids with the kind)."""
    kind = node_id.split("-", 1)[0]
    return kind if kind in (NodeKind.MENTION.value, NodeKind.EVENT.value) else None


def _doc_ranks(records: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Document order for positions: LightRAG insertion time (chapters inserted in order keep
    story order across documents), then doc id."""
    created = {
        doc_id: str((rec.get("metadata") or {}).get("doc_created_at") or "")
        for doc_id, rec in records.items()
    }
    ordered = sorted(created, key=lambda d: (created[d], d))
    return {doc_id: rank for rank, doc_id in enumerate(ordered)}


def _with_doc_rank(node: GraphNode, rank: int) -> GraphNode:
    return node.model_copy(update={"pos": (rank, node.pos[1], node.pos[2])})


async def extract_cues(
    rag: "LightRAG", query: str, param: QueryParam
) -> tuple[list[str], list[str]]:
    """``g(q)``: the query's entity and event phrases (E²RAG step 1).

    The caller's ``ll_keywords`` / ``hl_keywords``, when given, are the entity / event cues (as
    LightRAG's own modes skip keyword extraction when they are given). Otherwise LightRAG's
    ``keyword`` role LLM answers the shared ``QUERY_CUE_TEXT``, parsed as ``QueryCues`` and
    cached under ``CUE_CACHE_TYPE``; an unusable answer (``LLMOutputError``: any parse
    failure, after the repair round) or a timed-out call means no cues, and the query itself
    seeds retrieval.
    """
    if param.ll_keywords or param.hl_keywords:
        return clean_cues(param.ll_keywords), clean_cues(param.hl_keywords)
    llm = CachedStructuredLLM(
        rag, role="keyword", mode=E2RAG_MODE, llm_kwargs={"_priority": DEFAULT_QUERY_PRIORITY}
    )
    try:
        cues, _ = await llm.structured(
            fill(QUERY_CUE_TEXT, query=query), QueryCues, cache_type=CUE_CACHE_TYPE
        )
    except (LLMOutputError, TimeoutError) as exc:  # TimeoutError: LightRAG's queue gave up
        logger.warning("e2rag query cue extraction failed (%s); seeding from the query", exc)
        return [], []
    return clean_cues(cues.entities), clean_cues(cues.events)


def _take_within(items: list[str], cost: dict[str, int], budget: int, limit: int) -> list[str]:
    """Items in order while their summed cost fits the budget (the first one always fits)."""
    kept, used = [], 0
    for item in items[:limit]:
        if kept and used + cost[item] > budget:
            break
        kept.append(item)
        used += cost[item]
    return kept


async def retrieve(
    rag: "LightRAG",
    layer: EventLayerStore,
    query: str,
    param: QueryParam,
    *,
    event_weight: float = EVENT_WEIGHT,
    mention_pool: int = MENTION_POOL,
    progress: ProgressCallback = None,
) -> Optional[Retrieved]:
    """Run E²RAG retrieval; None when the event layer has nothing near the query.

    The steps are llama_index_e2rag's (``EntityEventRetriever``), with the ranking itself the
    shared ``ranking.e2rag_ranking``: cues, seeds (``top_k`` per cue, contested mentions
    re-ranked by their events), one hop, then every chunk behind ``V_q+`` ranked by its
    similarity to the query (``chunk_top_k`` of them). Token budget: the subgraph gets
    ``max_entity_tokens``; passages get what remains of ``max_total_tokens`` after it, the
    answer prompt and the query.
    """
    query_vec = np.asarray((await rag.embedding_func([query], context="query"))[0], dtype=float)
    await report(progress, QueryProgress.EXTRACTING_KEYWORDS)
    cues = await extract_cues(rag, query, param)
    entity_cues, event_cues = cues
    cue_vecs: list[np.ndarray] = []
    if entity_cues or event_cues:
        cue_vecs = [
            np.asarray(v, dtype=float)
            for v in await rag.embedding_func([*entity_cues, *event_cues], context="query")
        ]
    await report(progress, QueryProgress.RETRIEVING_ENTITIES)
    found = await ranking.e2rag_ranking(
        LayerSource(rag, layer),
        query_vec,
        cue_vecs[: len(entity_cues)],
        cue_vecs[len(entity_cues) :],
        param.top_k,
        mention_pool,
        event_weight,
    )
    if not found.seeds:
        return None
    await report(progress, QueryProgress.RETRIEVING_CHUNKS)
    passages, records, ranks = await _passages(rag, layer, query, param, found)
    context_nodes, edges = await _subgraph(rag, layer, param, found, passages, ranks)
    return Retrieved(
        bundle=assemble_context(passages, context_nodes, edges),
        scores={**found.seeds, **found.chunks},
        chunk_records={p.chunk_id: records[p.chunk_id] for p in passages},
        seeds=list(found.seeds),
        cues=cues,
    )


async def _passages(
    rag: "LightRAG",
    layer: EventLayerStore,
    query: str,
    param: QueryParam,
    found: ranking.E2RAGRanking,
) -> tuple[list[Passage], dict[str, dict[str, Any]], dict[str, int]]:
    """The chunks behind ``V_q+``, best first, while they fit what ``max_total_tokens`` leaves
    after the subgraph, the answer prompt and the query (at most ``chunk_top_k``); with their
    ``text_chunks`` records and the documents' story ranks."""
    chunk_ids = list(dict.fromkeys(n.chunk_id for n in found.expanded if n.chunk_id))
    rows = await rag.text_chunks.get_by_ids(chunk_ids)
    records = {c: r for c, r in zip(chunk_ids, rows) if r}
    doc_records = await layer.get_records(r["full_doc_id"] for r in records.values())
    ranks = _doc_ranks(doc_records)
    positions = {c: _chunk_position(records[c], doc_records, ranks, c) for c in records}
    scores = found.chunks
    ranked_chunks = sorted(records, key=lambda c: (-scores.get(c, 0.0), positions[c]))
    count = _token_counter(rag)
    overhead = count(PROMPTS["naive_rag_response"]) + count(query) + ANSWER_RESERVE_TOKENS
    kept = _take_within(
        ranked_chunks,
        {c: count(r["content"]) for c, r in records.items()},
        param.max_total_tokens - overhead - param.max_entity_tokens,
        param.chunk_top_k,
    )
    passages = [
        Passage(
            chunk_id=chunk_id,
            doc_id=records[chunk_id]["full_doc_id"],
            pos=positions[chunk_id],
            text=records[chunk_id]["content"],
            score=scores.get(chunk_id),
        )
        for chunk_id in kept
    ]
    return passages, records, ranks


async def _subgraph(
    rag: "LightRAG",
    layer: EventLayerStore,
    param: QueryParam,
    found: ranking.E2RAGRanking,
    passages: list[Passage],
    ranks: dict[str, int],
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """The subgraph of ``V_q+`` inside the passages: seeds by score, then their neighbours in
    story order, while they fit ``max_entity_tokens``; and the edges among those nodes."""
    kept = {p.chunk_id for p in passages}
    seeds = found.seeds
    order = sorted(
        (n for n in found.expanded if n.chunk_id in kept),
        key=lambda n: (n.id not in seeds, -seeds.get(n.id, 0.0), n.pos, n.id),
    )
    by_id = {n.id: n for n in order}
    count = _token_counter(rag)
    shown = _take_within(
        [n.id for n in order],
        {n.id: count(n.text) for n in order},
        param.max_entity_tokens,
        len(order),
    )
    context_nodes = [_with_doc_rank(by_id[i], ranks.get(by_id[i].doc_id, 0)) for i in shown]
    shown_set = set(shown)
    links = await layer.neighbor_ids(shown)
    pairs = [(a, b) for a in shown for b in links.get(a, []) if b in shown_set]
    return context_nodes, await layer.get_edges(pairs)


def _token_counter(rag: "LightRAG") -> Callable[[str], int]:
    """Tokens of a text by the rag's tokenizer (LightRAG's budgets are in its tokens)."""
    return lambda text: len(rag.tokenizer.encode(text))


def _chunk_position(
    record: dict[str, Any],
    doc_records: dict[str, dict[str, Any]],
    ranks: dict[str, int],
    chunk_id: str,
) -> tuple[int, int, int]:
    """(document rank, offset in the document, 0): the story position of a chunk."""
    doc_id = record["full_doc_id"]
    offsets = (doc_records.get(doc_id, {}).get("metadata") or {}).get("chunk_offsets", {})
    return (ranks.get(doc_id, 0), int(offsets.get(chunk_id, 0)), 0)
