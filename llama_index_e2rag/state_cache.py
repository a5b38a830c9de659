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
    """``build(index, state)`` once per graph store and content state, thread-safe.

    Concurrent first queries wait for one build instead of each building; a build is stored
    under the state it was computed for, so it never replaces a newer one.
    """

    def __init__(self, build: Callable[[Any, Hashable], T]) -> None:
        self._build = build
        self._values: "weakref.WeakKeyDictionary[Any, tuple[Hashable, T]]" = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        self._building = threading.Lock()

    def _cached(self, graph: Any, state: Hashable) -> tuple[bool, Any]:
        with self._lock:
            cached = self._values.get(graph)
        return (True, cached[1]) if cached is not None and cached[0] == state else (False, None)

    def get(self, index: Any) -> T:
        graph = index.graph_store
        state = graph_state(index)
        hit, value = self._cached(graph, state)
        if hit:
            return value
        with self._building:
            hit, value = self._cached(graph, state)
            if hit:
                return value
            value = self._build(index, state)
            with self._lock:
                self._values[graph] = (state, value)
        return value
