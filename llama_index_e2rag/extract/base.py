"""The contract between extractors and the index: metadata keys and chunk positions.

Extractors are llama-index ``TransformComponent``s. They read chunk ``TextNode``s and write the
graph fragment they found into the chunk's metadata under ``GRAPH_NODES_KEY`` /
``GRAPH_EDGES_KEY`` (lists of JSON dicts of ``GraphNode`` / ``GraphEdge``); the index pops the keys
and writes the fragment to its graph store. A chunk whose extraction failed carries the reason under
``EXTRACTION_ERROR_KEY`` and stays indexed as text. Extractors chain: each appends to the keys.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable, Sequence

from llama_index.core.schema import BaseNode

from llama_index_e2rag.context.keys import (  # the keys' one registry; importable from here too
    DOC_ORDER_KEY,
    EXTRACTION_ERROR_KEY,
    GRAPH_EDGES_KEY,
    GRAPH_NODES_KEY,
    INTERNAL_METADATA_KEYS,
)
from llama_index_e2rag.schema import GraphEdge, GraphNode, NodeKind, Position, Span, make_id


def chunk_doc_id(node: BaseNode) -> str:
    """The source document id of a chunk (its own id when it has no source)."""
    return node.ref_doc_id or node.node_id


def chunk_offset(node: BaseNode) -> int:
    """Character offset of the chunk in its source document."""
    return int(getattr(node, "start_char_idx", None) or 0)


def chunk_position(node: BaseNode, ordinal: int = 0) -> Position:
    """Narrative position of a chunk (document order stamped by the index, char offset)."""
    return (int(node.metadata.get(DOC_ORDER_KEY, 0)), chunk_offset(node), ordinal)


def chunk_graph_node(node: BaseNode) -> GraphNode:
    """The ``chunk`` graph node of a chunk TextNode; its id is the TextNode's id."""
    text = node.get_content()
    start = chunk_offset(node)
    return GraphNode(
        id=node.node_id,
        kind=NodeKind.CHUNK,
        text=text,
        doc_id=chunk_doc_id(node),
        pos=chunk_position(node),
        span=(start, start + len(text)),
        chunk_id=node.node_id,
    )


def span_nodes(
    text: str,
    spans: Sequence[Span],
    *,
    doc_id: str,
    order: int,
    chunks: Sequence[BaseNode],
    kind: NodeKind,
    id_kind: str,
    attrs: Callable[[int], dict[str, Any]],
) -> list[GraphNode]:
    """One node per span of a document's text, in story order, each mapped to the extraction
    chunk holding its start (a builder's own units: sentences, fixed-length chunks).

    Ids depend on the span's number, offset and text only, so rebuilding a document gives the
    same ids; ``attrs(i)`` gives the ``i``-th node's attributes.
    """
    extraction = sorted((chunk_offset(c), c.node_id) for c in chunks)
    starts = [start for start, _ in extraction]
    nodes = []
    for i, (start, end) in enumerate(spans):
        piece = text[start:end]
        at = bisect.bisect_right(starts, start) - 1
        nodes.append(
            GraphNode(
                id=make_id(doc_id, id_kind, (i, start), piece),
                kind=kind,
                text=piece,
                doc_id=doc_id,
                pos=(order, start, 0),
                span=(start, end),
                chunk_id=extraction[at][1] if at >= 0 else None,
                attrs=attrs(i),
            )
        )
    return nodes


def attach_graph(node: BaseNode, nodes: Iterable[GraphNode], edges: Iterable[GraphEdge]) -> None:
    """Append a graph fragment to a chunk's metadata (extractors chain by appending)."""
    node.metadata.setdefault(GRAPH_NODES_KEY, []).extend(n.model_dump(mode="json") for n in nodes)
    node.metadata.setdefault(GRAPH_EDGES_KEY, []).extend(e.model_dump(mode="json") for e in edges)
    hide_internal_keys(node)


def record_failure(node: BaseNode, reason: str) -> None:
    """Mark a chunk whose extraction failed; it stays indexed as plain text."""
    previous = node.metadata.get(EXTRACTION_ERROR_KEY)
    node.metadata[EXTRACTION_ERROR_KEY] = f"{previous}; {reason}" if previous else reason
    hide_internal_keys(node)


def pop_graph(node: BaseNode) -> tuple[list[GraphNode], list[GraphEdge], str | None]:
    """Remove and return the fragment and failure reason an extractor left on a chunk."""
    nodes = [GraphNode.model_validate(n) for n in node.metadata.pop(GRAPH_NODES_KEY, [])]
    edges = [GraphEdge.model_validate(e) for e in node.metadata.pop(GRAPH_EDGES_KEY, [])]
    return nodes, edges, node.metadata.pop(EXTRACTION_ERROR_KEY, None)


def hide_internal_keys(node: BaseNode) -> None:
    """Keep our bookkeeping keys out of embedding and LLM views of the chunk."""
    for bucket in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
        for key in INTERNAL_METADATA_KEYS:
            if key not in bucket:
                bucket.append(key)
