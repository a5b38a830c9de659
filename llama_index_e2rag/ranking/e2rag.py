"""Framework-free ranking steps of E²RAG retrieval, shared by every front end.

No llama-index imports: these functions work on a ``GraphStore`` and plain score dicts, so the
llama-index retriever (``retrievers/entity_event.py``) and ``lightrag_ext`` rank identically. The
caller does the vector look-ups; the functions here only combine their scores with the graph.

Signatures::

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

from typing import Iterable, Mapping

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import EdgeKind, GraphNode, NodeKind, normalize_text


def one_hop(graph: GraphStore, seeds: Iterable[str]) -> list[GraphNode]:
    """``V_q+``: the seeds plus their neighbours over bipartite ``participates`` edges."""
    found: dict[str, GraphNode] = {n.id: n for n in graph.get_nodes(seeds)}
    for seed_id in list(found):
        for neighbour in graph.neighbors(seed_id, [EdgeKind.PARTICIPATES]):
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
