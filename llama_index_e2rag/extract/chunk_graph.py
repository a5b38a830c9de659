"""One chunk's entity–event graph from the extraction answers: mentions, events and their edges.

Shared by the LlamaIndex extractor (``extract/e2rag.EntityEventExtractor``) and ``lightrag_ext``,
so both packages build identical graphs; it imports no llama-index, so ``lightrag_ext`` loads
without it.
"""

from __future__ import annotations

from typing import Any, Sequence

from llama_index_e2rag.extract.linking import (
    bipartite_edges,
    chunk_node_id,
    co_occurrence_edges,
    locate_name,
)
from llama_index_e2rag.extract.prompts import ExtractedEntity, ExtractedEvent
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, Position, normalize_text


def build_chunk_graph(
    entities: Sequence[ExtractedEntity],
    events: Sequence[ExtractedEvent],
    *,
    text: str,
    doc_id: str,
    chunk_id: str,
    doc_order: int = 0,
    chunk_start: int = 0,
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """Mention and event nodes of one chunk with their bipartite and co-occurrence edges.

    Framework-agnostic (``lightrag_ext`` calls it with LightRAG's chunk fields). Positions are
    absolute: a mention sits at the first occurrence of its name (or a short form) in the chunk,
    an event at the first occurrence of one of its participants; both fall back to the chunk
    start. Ids come from ``chunk_node_id`` over (doc, chunk, kind, position, text): rebuilding
    the same input with the same answers gives the same graph, and an event read by two
    overlapping chunks is two nodes, each linked only within its own chunk.
    """
    chunk_span = (chunk_start, chunk_start + len(text))
    mentions: list[GraphNode] = []
    seen: set[str] = set()
    types_by_name: dict[str, str] = {}
    for entity in entities:
        name = entity.name.strip()
        key = normalize_text(name)
        if not key or key in seen:
            continue
        seen.add(key)
        types_by_name[key] = entity.type
        found = locate_name([name], text, entity.type)
        span = (chunk_start + found[0], chunk_start + found[1]) if found else chunk_span
        pos = (doc_order, span[0] if found else chunk_start, len(mentions))
        description = entity.description.strip()
        mentions.append(
            _described_node(
                NodeKind.MENTION,
                name,
                description,
                doc_id=doc_id,
                chunk_id=chunk_id,
                pos=pos,
                span=span,
                attrs={"entity_type": entity.type, "description": description},
            )
        )

    event_nodes: list[GraphNode] = []
    for event in events:
        description = event.description.strip()
        title = event.title.strip() or " ".join(description.split()[:8])
        if not title:
            continue
        participants = [p.strip() for p in event.participants if p and p.strip()]
        offsets = [
            found[0]
            for p in participants
            if (found := locate_name([p], text, types_by_name.get(normalize_text(p))))
        ]
        pos = (doc_order, chunk_start + min(offsets, default=0), len(event_nodes))
        event_nodes.append(
            _described_node(
                NodeKind.EVENT,
                title,
                description,
                doc_id=doc_id,
                chunk_id=chunk_id,
                pos=pos,
                span=chunk_span,
                attrs={
                    "description": description,
                    "participants": participants,
                    "date": event.date,
                },
            )
        )
    edges = bipartite_edges(mentions, event_nodes) + co_occurrence_edges(mentions, event_nodes)
    return mentions + event_nodes, edges


def _described_node(
    kind: NodeKind,
    name: str,
    description: str,
    *,
    doc_id: str,
    chunk_id: str,
    pos: Position,
    span: tuple[int, int],
    attrs: dict[str, Any],
) -> GraphNode:
    """A mention or event of one chunk; ``"<name>: <description>"`` is the text that is embedded."""
    node_text = f"{name}: {description}" if description else name
    return GraphNode(
        id=chunk_node_id(doc_id, chunk_id, kind, pos, node_text),
        kind=kind,
        text=node_text,
        doc_id=doc_id,
        pos=pos,
        span=span,
        chunk_id=chunk_id,
        name=name,
        attrs=attrs,
    )
