"""A node kind's vector search that stays flat once the kind outgrows an exact scan.

``Stores.search`` asks the vector storage, and the embedded storage scans every vector of the
kind (one mat-vec: ~2 GB read per query for the ~1.4M facts or events of a 10M-word library).
From ``vectors.nearest.ANN_MIN_ROWS`` vectors of a kind on, ``search`` here asks an HNSW graph of
the kind's matrix instead (``vectors.nearest``), saved in ``e2rag/readmodels/`` for the content
state it was built from; below it, and for any other vector storage (Qdrant, Chroma... search
their own indexes), it is ``Stores.search`` unchanged, so results below the threshold are the
exact ones. ``save_read_models`` builds the graphs at write time (``e2rag index``); otherwise
the first query of a kind after a write does, updating the previous content's graph by the
rows the write added and removed (``vectors.nearest_graph``).
"""

from __future__ import annotations

import asyncio
import threading
from functools import partial
from typing import Hashable, Sequence

from llama_index_e2rag.background import available_cores, in_thread
from llama_index_e2rag.schema import NodeKind
from llama_index_e2rag.stores import read_model_file
from llama_index_e2rag.stores.port import Stores
from llama_index_e2rag.stores.state_cache import StateCache
from llama_index_e2rag.vectors import nearest, nearest_graph
from llama_index_e2rag.vectors.base import VectorHit


def _opened(stores: Stores, kind: str) -> tuple[list[str], nearest.NearestRows]:
    """``kind``'s ids and search: its saved graph, updated or built (and saved) if needed."""
    ids, matrix = stores.vectors.kind_matrix(kind)  # type: ignore[attr-defined]
    path = read_model_file.model_path(stores, f"kind-{kind}.hnsw")
    return ids, nearest_graph.open_nearest(matrix, ids, path)


class _KindSearches:
    """The searches of one content state, each kind's built on first use."""

    def __init__(self, stores: Stores, state: Hashable) -> None:
        self._stores = stores
        self._kinds: dict[str, tuple[list[str], nearest.NearestRows]] = {}
        self._lock = threading.Lock()

    def of(self, kind: str) -> tuple[list[str], nearest.NearestRows]:
        with self._lock:
            if kind not in self._kinds:
                self._kinds[kind] = _opened(self._stores, kind)
            return self._kinds[kind]


_SEARCHES: StateCache[_KindSearches] = StateCache(_KindSearches)
#: Kinds whose graphs ``save_read_models`` builds at once (a 1M-word story has three large
#: kinds, a 10M-word library six): two cores, two graphs.
BUILDERS = 2


def large(stores: Stores, kind: str) -> bool:
    """Whether ``kind`` is searched through a graph: an embedded storage (it can hand over a
    kind's matrix) holding at least ``ANN_MIN_ROWS`` vectors of it."""
    storage = stores.vectors
    return hasattr(storage, "kind_matrix") and storage.count(kind) >= nearest.ANN_MIN_ROWS


def search(
    stores: Stores, kind: NodeKind, query: Sequence[float], top_k: int
) -> list[VectorHit]:
    """The ``top_k`` nodes of ``kind`` nearest to ``query`` (cosine, best first, ties by id)."""
    if top_k < 1 or not large(stores, kind.value):
        return stores.search(kind, query, top_k)
    ids, rows = _SEARCHES.get(stores).of(kind.value)
    return [VectorHit(ids[row], score) for row, score in rows.top([query], top_k, ties=ids)[0]]


def save_read_models(stores: Stores) -> None:
    """Build (and save) the graph of every large kind of the stores' current content now, up
    to ``BUILDERS`` kinds at a time on the cores this process may use. Each graph is built on
    one thread (``nearest_graph.build_graph``), so it is the very graph a build alone makes, and
    each graph and the vector pages read for it are let go before its thread takes the next
    kind (``read_model_file.save_now``); a query reads the saved graph back."""
    with stores.reading():
        kinds = [kind.value for kind in NodeKind if large(stores, kind.value)]
        if kinds:
            asyncio.run(_build(stores, kinds, min(BUILDERS, available_cores(), len(kinds))))


async def _build(stores: Stores, kinds: list[str], workers: int) -> None:
    """The kinds' graphs, ``workers`` at once, each on a thread a Ctrl-C stops between blocks
    of rows (``background.in_thread``)."""
    todo = list(reversed(kinds))

    def one(kind: str) -> None:
        _opened(stores, kind)
        stores.release_pages()

    async def worker() -> None:
        while todo:
            kind = todo.pop()
            await in_thread(partial(one, kind))

    await asyncio.gather(*(worker() for _ in range(workers)))
