"""Read models derived from an index's content, built once per content state.

Several retrievers keep a read model of the index (GroundedKG's node-embedding matrices, the
narrative mode's passage table); each is worth building once and reusing until the index changes.
``StateCache`` keeps one per graph store (weakly: a dropped index frees it) and rebuilds it when
``graph_state`` — the index's cheap content fingerprint — moves on.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable, Generic, Hashable, TypeVar

T = TypeVar("T")


def graph_state(index: Any) -> Hashable:
    """A cheap fingerprint of the index's content that changes on every insert and delete.

    Document ids and the graph's node count catch added and removed documents; the docstore's
    content hashes (one per document and chunk) catch a document replaced under the same id.
    """
    graph = index.graph_store
    size = len(graph) if hasattr(graph, "__len__") else tuple(graph.counts()["nodes"].items())
    docstore = getattr(index, "docstore", None)
    hashes = tuple(sorted(docstore.get_all_document_hashes())) if docstore is not None else ()
    return (tuple(graph.doc_ids()), size, hashes)


class StateCache(Generic[T]):
    """``build(index, state)`` once per graph store and content state, thread-safe."""

    def __init__(self, build: Callable[[Any, Hashable], T]) -> None:
        self._build = build
        self._values: "weakref.WeakKeyDictionary[Any, tuple[Hashable, T]]" = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self, index: Any) -> T:
        graph = index.graph_store
        state = graph_state(index)
        with self._lock:
            cached = self._values.get(graph)
        if cached is not None and cached[0] == state:
            return cached[1]
        value = self._build(index, state)
        with self._lock:
            self._values[graph] = (state, value)
        return value
