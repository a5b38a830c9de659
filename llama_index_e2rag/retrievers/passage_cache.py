"""The ``narrative`` mode's read model of the stores: its ``PassageTable`` and BM25 index, cached.

Built once per content state (``Stores.version``) from what the stores hold: passage nodes and
their vectors, mention and event nodes, the passages' BM25 index, the chunks' user metadata;
nothing is embedded again. A query then reads the passages it returns from here, not the graph.
What is derived from the mentions and events (the table) and the chunks' metadata is persisted
per content state (``passage_file``), so only the first process after a write derives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Hashable, Iterator

import numpy as np

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.retrievers.filters import DocScope
from llama_index_e2rag.stores.lexical import LexicalIndex
from llama_index_e2rag.ranking.passages import PassageTable, build_table, name_words
from llama_index_e2rag.retrievers import passage_file
from llama_index_e2rag.retrievers.vector import chunk_metadata
from llama_index_e2rag.schema import GraphNode, NodeKind, sort_by_position
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.stores.port import Stores


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
    ids = [p.id for p in passages]
    key = passage_file.content_key(stores, state)
    stored = passage_file.read(stores, key, ids)
    if stored is not None:
        table, metadata = passage_file.decode(stored, stores.matrix(passages))
    else:
        table = build_table(  # mentions and events a page at a time, in story order
            passages, stores.matrix(passages), _scanned(graph, NodeKind.MENTION),
            _scanned(graph, NodeKind.EVENT),
        )
        metadata = chunk_metadata(stores, (p.chunk_id for p in passages))
        passage_file.write(stores, key, passage_file.encode(table, metadata))
    lexical = stores.lexical(passages)
    if lexical.ids != table.ids:  # the graph changed between the two reads: align them
        lexical = LexicalIndex.build(table.ids, [p.text for p in passages])
    return NarrativeState(state, table, lexical, tuple(passages), metadata)


def _scanned(graph: GraphStore, kind: NodeKind) -> Iterator[GraphNode]:
    """The nodes of ``kind`` as ``graph.nodes`` lists them, read a page at a time."""
    return (node for page in graph.scan_nodes(kind) for node in page)


_CACHE: StateCache[NarrativeState] = StateCache(_build)


def save_read_model(stores: Stores) -> None:
    """Derive and persist the read model of the stores' current content now (``e2rag index``
    after its write), so that the next process's first query only reads it."""
    read_model_file.save_now(stores, _CACHE)


def restrict_state(
    state: NarrativeState, scope: DocScope, doc_orders: dict[str, int]
) -> NarrativeState:
    """``state`` with only the passages of ``scope``'s documents, rows renumbered: signals,
    z-scores, ranking and continuation then see those documents as the whole story. BM25 keeps
    the whole index's statistics (its scores are read and cut to the kept rows)."""
    table = state.table
    orders = [order for doc_id, order in doc_orders.items() if scope.allows(doc_id)]
    rows = np.flatnonzero(np.isin(table.doc_of, orders))
    renumber = np.full(len(table), -1, dtype=np.int64)
    renumber[rows] = np.arange(len(rows))
    names = {}
    for name, found in table.names.items():
        kept = renumber[found]
        if (kept >= 0).any():
            names[name] = kept[kept >= 0]
    events = {}
    for lemma, found_events in table.events.items():
        kept_events = [(int(renumber[r]), who) for r, who in found_events if renumber[r] >= 0]
        if kept_events:
            events[lemma] = kept_events
    typed: dict[str, dict[str, np.ndarray]] = {}
    for kind, by_name in table.typed.items():
        for name, found in by_name.items():
            kept = renumber[found]
            if (kept >= 0).any():
                typed.setdefault(kind, {})[name] = kept[kept >= 0]
    sub = PassageTable(
        ids=[table.ids[r] for r in rows],
        doc_of=table.doc_of[rows],
        vectors=table.vectors[rows],
        names=names,
        name_words=name_words(names),
        events=events,
        starts=[table.starts[r] for r in rows],
        named=table.named,
        typed=typed,
        lengths=table.lengths,
        headings=table.headings,
    )
    return NarrativeState(
        state.state,
        sub,
        _RowsLexical(state.lexical, rows),  # type: ignore[arg-type]
        tuple(state.passages[r] for r in rows),
        state.chunk_metadata,
    )


class _RowsLexical:
    """The whole index's BM25 scores, cut to some rows (a ``LexicalIndex`` for ``signals``)."""

    def __init__(self, lexical: Any, rows: np.ndarray) -> None:
        self._lexical = lexical
        self._rows = rows
        self.ids = [lexical.ids[r] for r in rows]

    def scores(self, text: str) -> np.ndarray:
        return np.asarray(self._lexical.scores(text))[self._rows]
