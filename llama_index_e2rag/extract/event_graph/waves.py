"""What E²GraphRAG's event pass walks, and in which order (paper 001, §3.1; plan §2.3).

``EgoInput`` is one document's entities, chunks and their edge weights; from it come the
entities that get a pass (mention count descending), each entity's chunks (T_v, heaviest first),
the neighbour relation, and the *waves*: greedy sets of entities, no two of them neighbours,
that the pass (``events_llm``) runs concurrently. Pure data and ordering, no LLM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Iterable, Mapping, Optional, Sequence

from llama_index_e2rag.schema import GraphNode


@dataclass
class EgoInput:
    """What the event pass needs of one document, filled by the builder from its staging graph.

    ``entities`` are the document's fused ``entity`` nodes (plan §3.1); their ``attrs["mentions"]``
    (mention count; the number of their chunks when absent) and ``pos`` order them, ``name`` and
    ``attrs["aliases"]`` identify an answer's source entity.

    ``chunk_weights[entity id][chunk id]`` is the *edge weight* of the entity in that chunk: the
    number of its mentions in the chunk plus the number of ``participates`` edges of those
    mentions (how much of the entity's graph comes from the chunk; the paper orders T_v by it).
    An entity without an entry has no chunks and gets no call.

    ``chunks`` are the document's ``chunk`` nodes by id (text, ``pos`` = story order, ``span``).

    ``neighbours[entity id]``: the entities sharing a chunk with it (the ``co_mention`` edges);
    None derives them from ``chunk_weights``. The relation is made symmetric.
    """

    doc_id: str
    entities: Sequence[GraphNode]
    chunk_weights: Mapping[str, Mapping[str, int]]
    chunks: Mapping[str, GraphNode]
    neighbours: Optional[Mapping[str, AbstractSet[str]]] = None



def mention_count(entity: GraphNode, ego: EgoInput) -> int:
    """``attrs["mentions"]``, or the number of the entity's chunks when the attr is missing."""
    count = entity.attrs.get("mentions")
    return int(count) if count is not None else len(ego.chunk_weights.get(entity.id, {}))


def entity_order(ego: EgoInput, min_mentions: int = 1) -> list[GraphNode]:
    """The entities that get a pass: mention count descending, ties by first appearance."""
    kept = [e for e in ego.entities if mention_count(e, ego) >= min_mentions]
    return sorted(kept, key=lambda e: (-mention_count(e, ego), e.pos, e.id))


def entity_chunks(
    ego: EgoInput, entity_id: str, max_chunks: Optional[int] = None
) -> list[GraphNode]:
    """T_v: the entity's chunks by edge weight descending, ties in story order."""
    weights = ego.chunk_weights.get(entity_id, {})
    chunks = [ego.chunks[c] for c in weights if c in ego.chunks]
    chunks.sort(key=lambda c: (-weights[c.id], c.pos, c.id))
    return chunks if max_chunks is None else chunks[:max_chunks]


def neighbour_sets(ego: EgoInput) -> dict[str, set[str]]:
    """Symmetric neighbour sets: ``ego.neighbours``, or entities sharing a chunk."""
    found: dict[str, set[str]] = {e.id: set() for e in ego.entities}
    if ego.neighbours is not None:
        pairs: Iterable[tuple[str, str]] = (
            (a, b) for a, others in ego.neighbours.items() for b in others
        )
    else:
        by_chunk: dict[str, list[str]] = {}
        for entity_id, weights in ego.chunk_weights.items():
            for chunk_id in weights:
                by_chunk.setdefault(chunk_id, []).append(entity_id)
        pairs = ((a, b) for members in by_chunk.values() for a in members for b in members)
    for a, b in pairs:
        if a != b:
            found.setdefault(a, set()).add(b)
            found.setdefault(b, set()).add(a)
    return found


def waves(
    order: Sequence[GraphNode], neighbours: Mapping[str, AbstractSet[str]], wave_size: int
) -> list[list[GraphNode]]:
    """Greedy waves: each takes, in entity order, up to ``wave_size`` entities that are not
    neighbours of one already taken; the rest wait for the next wave."""
    if wave_size < 1:
        raise ValueError(f"wave_size must be at least 1, got {wave_size}")
    remaining = list(order)
    result = []
    while remaining:
        wave: list[GraphNode] = []
        taken: set[str] = set()
        blocked: set[str] = set()
        rest = []
        for entity in remaining:
            if len(wave) < wave_size and entity.id not in blocked:
                wave.append(entity)
                taken.add(entity.id)
                blocked |= neighbours.get(entity.id, set()) | {entity.id}
            else:
                rest.append(entity)
        result.append(wave)
        remaining = rest
    return result
