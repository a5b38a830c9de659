"""The ``DocumentBuilder`` protocol: document-level graph builders run by the index.

Chunk extractors see one chunk at a time; some methods (ChronoRAG's fact layer, SentGraph's topic
bridges) need the whole document. They implement this protocol and the index runs them once per
document, after chunk extraction, then upserts and embeds what they return like any other node.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import GraphEdge, GraphNode


@runtime_checkable
class DocumentBuilder(Protocol):
    """Adds document-level nodes and edges.

    ``abuild`` receives the source document, its document order (the first element of every
    ``pos`` it creates), the document's chunk TextNodes in story order (their ids are the ``chunk``
    graph node ids) and a graph holding this document's chunk and extracted nodes. It returns new
    nodes and edges; edges may point at any node of that graph or at the returned nodes. Builders
    must not write to the graph themselves: the index commits everything of a document at once, so
    a failing build leaves nothing half-written. A builder that calls an LLM may also define
    ``use_llm_runner(runner)``: the index then hands it its own runner (cache, retries, accounting).
    """

    async def abuild(
        self,
        document: Document,
        doc_order: int,
        chunks: Sequence[TextNode],
        graph: GraphStore,
    ) -> tuple[list[GraphNode], list[GraphEdge]]: ...
