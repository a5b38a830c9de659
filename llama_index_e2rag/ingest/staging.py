"""Where a document's graph is computed before it commits (phase 1 of ``pipeline``).

A short document stages in memory (NetworkX). A long one stages in a private temporary SQLite
file, filled a group of chunks at a time as extraction goes, so neither the extracted fragments
nor the finished graph of a book sit in memory whole: builders read the kinds they need from
it, embedding reads it a kind and a page at a time, and the commit streams its rows from it. The
file is the build's own (a fresh temporary directory) and is deleted when the build ends,
committed or not; a killed build leaves it in the system's temporary folder, never in a store.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.extract.base import chunk_graph_node, pop_graph
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.graph.networkx_store import NetworkXGraphStore
from llama_index_e2rag.graph.sqlite_store import SQLiteGraphStore
from llama_index_e2rag.schema import GraphEdge, GraphNode
from llama_index_e2rag.text import count_words, word_runs

#: Documents of more words than this stage on disk. Below it SQLite's round trips cost more
#: than the memory they save (a 20k-word document's staging graph is ~0.1 GB in memory).
STAGE_ON_DISK_WORDS = 20_000
#: Words of chunks per extractor call: their fragments move into the staging graph before the
#: next group is extracted, so a book's fragments are never all in memory.
EXTRACT_GROUP_WORDS = 20_000


def chunk_words(chunks: Sequence[TextNode]) -> list[int]:
    """Each chunk's length in words, counted once for both ``words_of`` and
    ``extraction_groups``."""
    return [count_words(chunk.get_content()) for chunk in chunks]


def words_of(document: Optional[Document], chunk_words: Sequence[int]) -> int:
    """A document's length in words (its chunks' ``chunk_words`` when it came as nodes)."""
    if document is not None:
        return count_words(document.text)
    return sum(chunk_words)


def staging_graph(words: int) -> GraphStore:
    """An empty staging graph for a document of ``words`` words."""
    if words > STAGE_ON_DISK_WORDS:
        return SQLiteGraphStore()
    return NetworkXGraphStore()


def discard(graph: GraphStore) -> None:
    """Delete a staging graph's file now (an in-memory one goes with its last reference)."""
    if isinstance(graph, SQLiteGraphStore):
        graph.discard()


def extraction_groups(
    chunks: Sequence[TextNode], words: Sequence[int], extractors: Sequence[Any]
) -> Iterator[list[TextNode]]:
    """The runs of ``chunks`` (of ``words`` words each) to extract per call: groups of
    ``EXTRACT_GROUP_WORDS`` when every extractor works chunk by chunk (``chunk_local``), else
    all in one call (a llama-index metadata extractor may read a document's first chunks for
    every chunk, like a title)."""
    if all(getattr(extractor, "chunk_local", False) for extractor in extractors):
        yield from word_runs(chunks, words, EXTRACT_GROUP_WORDS)
    elif chunks:
        yield list(chunks)


def stage_fragments(
    graph: GraphStore, doc_id: str, chunks: Sequence[TextNode]
) -> list[dict[str, str]]:
    """Move what the extractors left on ``chunks`` (one document's) into its staging graph:
    the chunk nodes, then the fragments' nodes, then their edges; returns the chunks'
    extraction failures."""
    nodes: list[GraphNode] = [chunk_graph_node(c) for c in chunks]
    edges: list[GraphEdge] = []
    failures = []
    for chunk in chunks:
        chunk_nodes, chunk_edges, reason = pop_graph(chunk)
        nodes.extend(chunk_nodes)
        edges.extend(chunk_edges)
        if reason:
            failures.append({"doc_id": doc_id, "chunk_id": chunk.node_id, "reason": reason})
    graph.upsert_nodes(nodes)
    graph.upsert_edges(edges)
    return failures
