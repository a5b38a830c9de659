"""The ``narrative`` mode's read model of the stores: its ``PassageTable`` and BM25 index, cached.

Built once per content state (``Stores.version``) from what the stores hold: passage nodes and
their vectors, mention and event nodes, the passages' BM25 index, the chunks' user metadata;
nothing is embedded again. A query then reads the passages it returns from here, not the graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable

from llama_index_e2rag.lexical import LexicalIndex
from llama_index_e2rag.ranking.narrative import PassageTable, build_table
from llama_index_e2rag.retrievers.vector import chunk_metadata
from llama_index_e2rag.schema import GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.state_cache import StateCache
from llama_index_e2rag.stores import Stores


@dataclass(frozen=True)
class NarrativeState:
    """One content state's passages (table) and their lexical index, rows aligned."""

    state: Hashable
    table: PassageTable
    lexical: LexicalIndex
    #: passage row -> its graph node (text, span, the chunk holding its start)
    passages: tuple[GraphNode, ...]
    #: chunk id -> its user metadata (file name, title …), so results cite their source
    chunk_metadata: dict[str, dict[str, Any]]


def narrative_state(stores: Stores) -> NarrativeState:
    """The cached read model of ``stores``, rebuilt when their content changed."""
    return _CACHE.get(stores)


def _build(stores: Stores, state: Hashable) -> NarrativeState:
    graph = stores.graph
    passages = sort_by_position(graph.nodes(NodeKind.PASSAGE))
    table = build_table(
        passages, stores.matrix(passages), graph.nodes(NodeKind.MENTION), graph.nodes(NodeKind.EVENT)
    )
    lexical = stores.lexical()
    if lexical.ids != table.ids:  # the graph changed between the two reads: align them
        lexical = LexicalIndex.build(table.ids, [p.text for p in passages])
    return NarrativeState(
        state, table, lexical, tuple(passages), chunk_metadata(stores, (p.chunk_id for p in passages))
    )


_CACHE: StateCache[NarrativeState] = StateCache(_build)
