"""The ``narrative`` mode's read model of an index: its ``PassageTable`` and BM25 index, cached.

Built once per index state (``state_cache.graph_state``) from what the
index stored: passage nodes and their vectors, mention and event nodes; nothing is embedded
again. The BM25 index is the one persisted with the index; if its passages do not line up with
the graph's (a store written before passages existed has none), it is rebuilt from the passages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from llama_index_e2rag.lexical import LexicalIndex
from llama_index_e2rag.node_embeddings import stored_vectors
from llama_index_e2rag.ranking.narrative import PassageTable, build_table
from llama_index_e2rag.schema import NodeKind, sort_by_position
from llama_index_e2rag.state_cache import StateCache


@dataclass(frozen=True)
class NarrativeState:
    """One index state's passages (table) and their lexical index, rows aligned."""

    state: Hashable
    table: PassageTable
    lexical: LexicalIndex
    #: passage row -> id of the chunk holding its start (whose metadata names the source)
    chunk_ids: tuple[str, ...]


def narrative_state(index: Any) -> NarrativeState:
    """The cached read model of ``index``, rebuilt when its content changed."""
    return _CACHE.get(index)


def _build(index: Any, state: Hashable) -> NarrativeState:
    graph = index.graph_store
    passages = sort_by_position(graph.nodes(NodeKind.PASSAGE))
    vectors = stored_vectors(index, passages)
    table = build_table(
        passages, vectors, graph.nodes(NodeKind.MENTION), graph.nodes(NodeKind.EVENT)
    )
    lexical = index.lexical_index()
    if lexical.ids != table.ids:
        lexical = LexicalIndex.build(table.ids, [p.text for p in passages])
    return NarrativeState(state, table, lexical, tuple(p.chunk_id or "" for p in passages))


_CACHE: StateCache[NarrativeState] = StateCache(_build)
