"""The ``narrative`` mode's read model of the stores: its ``PassageTable`` and BM25 index, cached.

Built once per content state (``Stores.version``) from what the stores hold: passage nodes and
their vectors, mention and event nodes, the passages' BM25 index; nothing is embedded again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from llama_index_e2rag.lexical import LexicalIndex
from llama_index_e2rag.ranking.narrative import PassageTable, build_table
from llama_index_e2rag.schema import NodeKind, sort_by_position
from llama_index_e2rag.state_cache import StateCache
from llama_index_e2rag.stores import Stores


@dataclass(frozen=True)
class NarrativeState:
    """One content state's passages (table) and their lexical index, rows aligned."""

    state: Hashable
    table: PassageTable
    lexical: LexicalIndex
    #: passage row -> id of the chunk holding its start (whose metadata names the source)
    chunk_ids: tuple[str, ...]


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
    return NarrativeState(state, table, lexical, tuple(p.chunk_id or "" for p in passages))


_CACHE: StateCache[NarrativeState] = StateCache(_build)
