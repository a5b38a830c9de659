"""E²RAG retrieval (paper §4, Alg. 3) steps 3-5, the one implementation both front ends run.

No llama-index imports: ``find_seeds`` and ``rank_chunks`` read an ``E2RAGSource`` (vector
look-ups and the graph around the hits), which ``retrievers/entity_event.py`` implements over
``Stores`` and ``lightrag_ext`` over LightRAG's storages, so both rank identically. Cue
extraction, budgets and context assembly stay with each front end.

``e2rag_ranking(source, query_vec, entity_vecs, event_vecs, top_k, mention_pool, event_weight)``
    Steps 3-5 in one call, what both front ends run: ``find_seeds``, ``one_hop``,
    ``rank_chunks``; returns an ``E2RAGRanking`` (the graph read, ``V_q``, ``V_q+``, the chunk
    scores). The defaults (``SEED_TOP_K``, ``MENTION_POOL``, ``EVENT_WEIGHT``) are both front
    ends' defaults; ``clean_cues`` tidies the cue phrases either front end's extractor returns.

``find_seeds(source, query_vec, entity_vecs, event_vecs, top_k, mention_pool, event_weight)``
    ``V_q``: each entity cue looks up ``top_k * mention_pool`` mentions and each event cue
    ``top_k`` events (the query seeds both when there are no cues at all); contested mentions
    are re-ranked by their events and the best ``top_k`` kept. Returns the graph read around the
    seeds and ``{seed_id: score}``.

Helpers::

    one_hop(graph: GraphStore, seeds: Iterable[str]) -> list[GraphNode]
        V_q+: the seed nodes plus their neighbours over bipartite ``participates`` edges,
        deduplicated, in story order (``pos``, then id). Unknown seed ids are skipped.

    mention_events(graph: GraphStore, mention_scores: Mapping[str, float]) -> dict[str, list[str]]
        For every *contested* mention (another scored mention has the same normalised name):
        the ids of the events it takes part in. Mentions of an uncontested name are absent.
        The caller scores these events against z_q and passes the result to ``rerank_mentions``.

    rerank_mentions(graph, mention_scores, linked, event_sims, event_weight, top_k)
        -> dict[str, float]
        A contested mention with at least one scored event gets
        ``(1 - event_weight) * score + event_weight * max(event_sims of its events)``; the others
        keep their score. Returns the best ``top_k`` (score desc, then story position) as
        ``{mention_id: score}`` in that rank order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Iterable, Mapping, Protocol, Sequence

import numpy as np

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, normalize_text


class E2RAGSource(Protocol):
    """What E²RAG retrieval reads; every score is a cosine similarity."""

    async def lookup(self, kind: NodeKind, vector: np.ndarray, top_k: int) -> dict[str, float]:
        """The ``top_k`` nodes of ``kind`` nearest to ``vector``."""
        ...

    async def similarities(
        self, kind: NodeKind, vector: np.ndarray, ids: Collection[str]
    ) -> dict[str, float]:
        """Similarity of ``vector`` to the given nodes only (those with a stored vector)."""
        ...

    async def neighbourhood(self, ids: Sequence[str]) -> GraphStore:
        """A graph holding ``ids`` and their ``participates`` neighbours (may be larger)."""
        ...


#: Seeds kept per cue and namespace (the final mention seeds are capped at it too).
SEED_TOP_K = 10
#: Mentions fetched per entity cue = ``top_k * MENTION_POOL``, so that near-tied mentions of one
#: name compete in the event-based re-ranking.
MENTION_POOL = 3
#: Weight of the events' similarity in a contested mention's score:
#: ``(1 - w) * sim(mention, cue) + w * max sim(its events, query)``.
EVENT_WEIGHT = 0.5


@dataclass(frozen=True)
class E2RAGRanking:
    """Steps 3-5 of one query: what the front ends turn into passages and context."""

    #: The graph read around the seeds (holds ``expanded``).
    graph: GraphStore
    #: ``V_q``: seed id -> score, mention seeds best first, then the event seeds.
    seeds: dict[str, float]
    #: ``V_q+``: the seeds and their bipartite neighbours, in story order.
    expanded: list[GraphNode]
    #: Chunk id -> similarity to ``z_q``, for every chunk behind ``V_q+``.
    chunks: dict[str, float]


async def e2rag_ranking(
    source: E2RAGSource,
    query_vec: np.ndarray,
    entity_vecs: Sequence[np.ndarray],
    event_vecs: Sequence[np.ndarray],
    top_k: int = SEED_TOP_K,
    mention_pool: int = MENTION_POOL,
    event_weight: float = EVENT_WEIGHT,
) -> E2RAGRanking:
    """Seeds, one hop, chunks ranked (§4 steps 3-5): the one E²RAG pipeline of both packages."""
    graph, seeds = await find_seeds(
        source, query_vec, entity_vecs, event_vecs, top_k, mention_pool, event_weight
    )
    expanded = one_hop(graph, seeds)
    return E2RAGRanking(graph, seeds, expanded, await rank_chunks(source, query_vec, expanded))


def clean_cues(phrases: Iterable[str]) -> list[str]:
    """Cue phrases stripped, without empty ones and repeats, in their order."""
    return list(dict.fromkeys(p.strip() for p in phrases if p and p.strip()))


async def find_seeds(
    source: E2RAGSource,
    query_vec: np.ndarray,
    entity_vecs: Sequence[np.ndarray],
    event_vecs: Sequence[np.ndarray],
    top_k: int,
    mention_pool: int,
    event_weight: float,
) -> tuple[GraphStore, dict[str, float]]:
    """``V_q`` (steps 3 and 5 of §4): seeds per cue, contested mentions re-ranked by events."""
    if not entity_vecs and not event_vecs:
        entity_vecs, event_vecs = [query_vec], [query_vec]
    mentions: dict[str, float] = {}
    events: dict[str, float] = {}
    for vector in entity_vecs:
        _offer(mentions, await source.lookup(NodeKind.MENTION, vector, top_k * mention_pool))
    for vector in event_vecs:
        _offer(events, await source.lookup(NodeKind.EVENT, vector, top_k))
    graph = await source.neighbourhood([*mentions, *events])
    linked = mention_events(graph, mentions)
    event_ids = {e for ids in linked.values() for e in ids}
    event_sims = await source.similarities(NodeKind.EVENT, query_vec, event_ids)
    seeds = rerank_mentions(graph, mentions, linked, event_sims, event_weight, top_k)
    seeds.update(events)
    return graph, seeds


async def rank_chunks(
    source: E2RAGSource, query_vec: np.ndarray, expanded: Sequence[GraphNode]
) -> dict[str, float]:
    """Every chunk behind ``V_q+`` scored by ``<f(p), z_q>`` (Alg. 3 lines 11-14)."""
    chunk_ids = {n.chunk_id for n in expanded if n.chunk_id}
    return await source.similarities(NodeKind.CHUNK, query_vec, chunk_ids)


def _offer(best: dict[str, float], hits: Mapping[str, float]) -> None:
    """Keep each node's best score over several cues."""
    for node_id, score in hits.items():
        if score > best.get(node_id, float("-inf")):
            best[node_id] = score


#: The node kinds of E²RAG's bipartite graph.
_BIPARTITE = (NodeKind.MENTION, NodeKind.EVENT)


def one_hop(graph: GraphStore, seeds: Iterable[str]) -> list[GraphNode]:
    """``V_q+``: the seeds plus their neighbours over bipartite ``participates`` edges.

    Only mentions and events are E²RAG's bipartite ends: other layers (E²GraphRAG's entities
    and their events) use the same edge kind and are not followed."""
    found: dict[str, GraphNode] = {n.id: n for n in graph.get_nodes(seeds)}
    for seed_id in list(found):
        for neighbour in graph.neighbors(seed_id, [EdgeKind.PARTICIPATES]):
            if neighbour.kind in _BIPARTITE:
                found.setdefault(neighbour.id, neighbour)
    return sorted(found.values(), key=lambda n: (n.pos, n.id))


def mention_events(graph: GraphStore, mention_scores: Mapping[str, float]) -> dict[str, list[str]]:
    """Events of each contested mention (same normalised name as another scored mention).

    Mentions of one entity are near-ties for an entity cue; only their events tell them apart
    (paper §4 step 5), so only those need the extra event similarities.
    """
    groups: dict[str, list[GraphNode]] = {}
    for mention in graph.get_nodes(mention_scores):
        groups.setdefault(normalize_text(mention.name or mention.text), []).append(mention)
    contested = [m for group in groups.values() if len(group) > 1 for m in group]
    return {
        m.id: [
            e.id for e in graph.neighbors(m.id, [EdgeKind.PARTICIPATES]) if e.kind == NodeKind.EVENT
        ]
        for m in contested
    }


def rerank_mentions(
    graph: GraphStore,
    mention_scores: Mapping[str, float],
    linked: Mapping[str, list[str]],
    event_sims: Mapping[str, float],
    event_weight: float,
    top_k: int,
) -> dict[str, float]:
    """Blend contested mentions' scores with their best event similarity; keep the top ``top_k``."""
    rescored = dict(mention_scores)
    for mention_id, event_list in linked.items():
        sims = [event_sims[e] for e in event_list if e in event_sims]
        if sims and mention_id in mention_scores:
            rescored[mention_id] = (1.0 - event_weight) * mention_scores[
                mention_id
            ] + event_weight * max(sims)
    position = {m.id: m.pos for m in graph.get_nodes(mention_scores)}
    kept = sorted(
        (m for m in rescored if m in position), key=lambda m: (-rescored[m], position[m])
    )
    return {m: rescored[m] for m in kept[:top_k]}
