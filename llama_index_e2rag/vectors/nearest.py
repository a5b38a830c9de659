"""The rows of a matrix of unit vectors nearest to a batch of queries, flat in the row count.

A mode ranks a kind's vectors (a story's events, entities) for every sub-query of a question.
One exact scan per sub-query costs time linear in the story: at 10M words about 1.4M event
rows, ~2 GB read per scan. ``NearestRows`` answers all of a question's queries at once:

- below ``ANN_MIN_ROWS`` rows, exactly: one matrix product for the whole batch (the rows are
  read once, not once per query);
- from ``ANN_MIN_ROWS`` rows on, an HNSW graph (FAISS ``IndexHNSWSQ``, half-precision rows)
  proposes ``ann_candidates(k)`` rows per query in a few milliseconds, growing with the
  logarithm of the row count.

Either way the proposed rows are scored again in float64, row by row, so a row's score does
not depend on the matrix's layout or the batch (float32 BLAS results do, in the last bits) and
the order is by that score, ties to the lower row. Below the threshold the result is therefore
the exact top ``k``; above it, the exact scores of the rows the graph found (its recall is
measured in ``benchmarks/results/latency-growth.md``).

The HNSW graph takes minutes to build at a million rows, so it is saved beside the read model
it serves and updated by a write rather than rebuilt (``vectors.nearest_graph``): a node of the
graph is a row by id, a removed row's node stays in the graph but is never returned.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Collection, Iterator, Optional, Sequence

import numpy as np

#: Row count from which a matrix is searched through an HNSW graph. Below it an exact batch
#: costs at most ~35 ms (one product of 6 queries with 100k 384-d rows on the 2-core benchmark
#: machine under load; 3 sub-queries ~20 ms), and every store of the quality benchmarks stays
#: below it (the largest book, Bleak House at 356k words, has ~55k rows of its largest kind),
#: so their figures are those of the exact search. About 650k words of one story.
ANN_MIN_ROWS = 100_000
#: float32 products pick the rows within this margin of the k-th best; float64 then ranks them.
SLACK = 1e-5
#: HNSW parameters: links per node, search breadth while building and while querying (1024:
#: recall@10 0.98 at 347k rows synthesised from a real store's vectors and 0.93 at 1.4M, ~4 ms
#: a query; 2048: 0.97 at 1.4M in twice the time; ``benchmarks/results/latency-growth.md``).
CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH = 16, 128, 1024


def ann_candidates(k: int) -> int:
    """Rows the graph is asked for per query to return the best ``k`` of them, rescored."""
    return max(4 * k, 32)


def unit_rows(queries: Sequence[Sequence[float]] | np.ndarray) -> np.ndarray:
    """The queries as float64 unit rows (a zero query stays zero)."""
    q = np.asarray(queries, dtype=np.float64)
    q = q.reshape(len(q), -1) if q.size else q.reshape(len(q), 0)
    norms = np.linalg.norm(q, axis=1, keepdims=True)
    return q / np.where(norms > 0, norms, 1.0)


class NearestRows:
    """Top rows of ``matrix`` (unit rows, zeros for a row without a vector) per query.

    ``graph``: a FAISS HNSW index over the rows, or None: exact search; ``nodes``: the row of
    each of its nodes, -1 for a node whose row was removed since it was added (never returned).
    """

    def __init__(
        self, matrix: np.ndarray, graph: Any = None, nodes: Optional[np.ndarray] = None
    ) -> None:
        self.matrix = matrix
        self.graph = graph
        self.nodes = np.arange(len(matrix)) if nodes is None else nodes
        self._params = _live_only(self.nodes) if graph is not None else None

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def approximate(self) -> bool:
        return self.graph is not None

    def scores(self, query: np.ndarray, rows: Sequence[int]) -> np.ndarray:
        """float64 cosines of one unit ``query`` (a row of ``unit_rows``) with ``rows``, each
        row summed alone (the same score whatever the batch or the layout)."""
        rows = np.asarray(rows, dtype=np.int64)
        if not rows.size or not self.matrix.shape[1]:  # no vectors at all: every cosine is 0
            return np.zeros(rows.size, dtype=np.float64)
        return (self.matrix[rows].astype(np.float64) * query).sum(axis=1)

    def top(
        self,
        queries: Sequence[Sequence[float]] | np.ndarray,
        k: int,
        exclude: Sequence[Collection[int]] = (),
        ties: Optional[Sequence[str]] = None,
    ) -> list[list[tuple[int, float]]]:
        """Per query, its ``k`` best ``(row, cosine)`` pairs, best first, without the rows
        ``exclude[i]`` names for query ``i``; ties go to the lower row, or to the lower
        ``ties[row]`` (a node id) when given."""
        units = unit_rows(queries)
        skip = [set(exclude[i]) if i < len(exclude) else set() for i in range(len(units))]
        if k <= 0 or not len(units) or not len(self):
            return [[] for _ in range(len(units))]
        if self.graph is not None:
            proposed = self._proposed_by_graph(units, k, skip)
        else:
            proposed = self._proposed_exactly(units, k, skip)
        out = []
        for q, rows in zip(units, proposed):
            rows = np.unique(rows)
            scores = self.scores(q, rows)
            if ties is None:
                order = np.lexsort((rows, -scores))[:k].tolist()
            else:
                order = sorted(range(len(rows)), key=lambda i: (-scores[i], ties[rows[i]]))[:k]
            out.append([(int(rows[i]), float(scores[i])) for i in order])
        return out

    def _proposed_exactly(
        self, units: np.ndarray, k: int, skip: list[set[int]]
    ) -> list[np.ndarray]:
        """Per query, the rows within ``SLACK`` of its k-th best float32 product (one product
        for the batch)."""
        n = len(self)
        if not self.matrix.shape[1]:  # no vectors: every row scores 0, the first rows win
            return [np.asarray([r for r in range(min(n, k + len(s))) if r not in s]) for s in skip]
        products = self.matrix @ units.T.astype(np.float32)  # (rows, queries)
        proposed = []
        for i, banned in enumerate(skip):
            column = products[:, i].astype(np.float64)
            if banned:
                column[list(banned)] = -np.inf
            allowed = n - len(banned)
            if allowed <= 0:
                proposed.append(np.zeros(0, dtype=np.int64))
                continue
            kth = np.partition(column, n - min(k, allowed))[n - min(k, allowed)]
            proposed.append(np.flatnonzero((column >= kth - SLACK) & (column > -np.inf)))
        return proposed

    def _proposed_by_graph(
        self, units: np.ndarray, k: int, skip: list[set[int]]
    ) -> list[np.ndarray]:
        """Per query, the rows the HNSW graph finds, excluded rows dropped (twice as many are
        asked for when a query excludes rows; one excluding more may get fewer than ``k``).
        Removed rows' nodes are walked through but never found (a FAISS selector)."""
        count = min(len(self), ann_candidates(k) * (2 if any(skip) else 1))
        with one_thread():
            _, found = self.graph.search(np.ascontiguousarray(units, dtype=np.float32), count,
                                         params=self._params[0] if self._params else None)
        rows = np.where(found >= 0, self.nodes[np.maximum(found, 0)], -1)
        return [
            np.asarray([r for r in rows[i].tolist() if r >= 0 and r not in skip[i]],
                       dtype=np.int64)
            for i in range(len(units))
        ]


def _live_only(nodes: np.ndarray) -> Optional[tuple[Any, ...]]:
    """FAISS search parameters that leave the removed nodes out of the results, with the
    objects they point to (kept alive beside them); None when no node is removed."""
    if (nodes >= 0).all():
        return None
    import faiss  # deferred: as below

    bits = np.packbits(nodes >= 0, bitorder="little")
    selector = faiss.IDSelectorBitmap(len(nodes), faiss.swig_ptr(bits))
    params = faiss.SearchParametersHNSW(sel=selector, efSearch=EXPANSION_SEARCH)
    return params, selector, bits


@contextmanager
def one_thread() -> Iterator[None]:
    """FAISS on one OpenMP thread meanwhile: a build is then the same for the same rows, and a
    search of a few queries does not wake a thread team on a shared machine."""
    import faiss  # deferred: only stores past ANN_MIN_ROWS rows need it

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)
