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
it serves (``open_nearest``): the index file and a JSON head with the content key it was built
for and the file's size and CRC-32, each replaced atomically. A head that names another key,
another shape or another file (a crash between the two renames, a damaged or truncated file)
means the graph is rebuilt, never used.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Collection, Iterator, Optional, Sequence

import numpy as np

from llama_index_e2rag.disk.checksums import file_sum
from llama_index_e2rag.disk.files import atomic_replace, atomic_write_text

logger = logging.getLogger(__name__)

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
#: Bumped when the index file's parameters change: an older file is rebuilt.
FORMAT = 1


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

    ``graph``: a FAISS HNSW index over the rows (ids are row numbers), or None: exact search.
    """

    def __init__(self, matrix: np.ndarray, graph: Any = None) -> None:
        self.matrix = matrix
        self.graph = graph

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
        asked for when a query excludes rows; one excluding more may get fewer than ``k``)."""
        count = min(len(self), ann_candidates(k) * (2 if any(skip) else 1))
        with _one_thread():
            _, found = self.graph.search(np.ascontiguousarray(units, dtype=np.float32), count)
        return [
            np.asarray([r for r in found[i].tolist() if r >= 0 and r not in skip[i]],
                       dtype=np.int64)
            for i in range(len(units))
        ]


@contextmanager
def _one_thread() -> Iterator[None]:
    """FAISS on one OpenMP thread meanwhile: a build is then the same for the same rows, and a
    search of a few queries does not wake a thread team on a shared machine."""
    import faiss  # deferred: only stores past ANN_MIN_ROWS rows need it

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(threads)


def build_graph(matrix: np.ndarray) -> Any:
    """An HNSW graph of the rows (FAISS ids: row numbers), built on one thread."""
    import faiss  # deferred: as above

    graph = faiss.IndexHNSWSQ(int(matrix.shape[1]), faiss.ScalarQuantizer.QT_fp16,
                              CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = EXPANSION_ADD
    rows = np.ascontiguousarray(matrix, dtype=np.float32)
    with _one_thread():
        graph.train(rows[: min(len(rows), 10_000)])
        graph.add(rows)
    graph.hnsw.efSearch = EXPANSION_SEARCH
    return graph


def _head_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _head(matrix: np.ndarray, key: str) -> dict[str, Any]:
    return {"format": FORMAT, "key": key, "rows": int(matrix.shape[0]),
            "dim": int(matrix.shape[1])}


def _load(path: Path, matrix: np.ndarray, key: str) -> Any:
    """The saved graph of ``path`` when its head names ``key``, this shape and this file."""
    import faiss  # deferred: as above

    try:
        head = json.loads(_head_path(path).read_text(encoding="utf-8"))
        if not isinstance(head, dict) or head.get("sum") is None:
            return None
        if {k: head.get(k) for k in _head(matrix, key)} != _head(matrix, key):
            return None
        if file_sum(path) != head["sum"]:
            logger.warning("%s does not match its head; the search graph is rebuilt", path)
            return None
        graph = faiss.read_index(str(path))
    except (OSError, ValueError, RuntimeError) as exc:
        logger.warning("%s is unreadable (%s); the search graph is rebuilt", path, exc)
        return None
    if graph.ntotal != matrix.shape[0] or graph.d != matrix.shape[1]:
        return None
    graph.hnsw.efSearch = EXPANSION_SEARCH  # read_index gives the HNSW class itself
    return graph


def _save(path: Path, graph: Any, matrix: np.ndarray, key: str) -> None:
    """The graph file, then its head (a crash between them leaves a head that names another
    file: rebuilt). A folder that cannot be written only costs the next process the build."""
    try:
        import faiss  # deferred: as above

        atomic_replace(path, lambda tmp: faiss.write_index(graph, str(tmp)))
        head = dict(_head(matrix, key), sum=file_sum(path))
        atomic_write_text(_head_path(path), json.dumps(head))
    except OSError as exc:
        logger.info("the search graph was not saved in %s (%s)", path, exc)


def open_nearest(matrix: np.ndarray, key: str, path: Optional[Path]) -> NearestRows:
    """``NearestRows`` of ``matrix``: exact below ``ANN_MIN_ROWS`` rows; else with the graph
    saved at ``path`` for content ``key``, built (and saved, when ``path`` is given) if that
    file is missing, stale or damaged."""
    if matrix.shape[0] < ANN_MIN_ROWS or not matrix.shape[1]:
        return NearestRows(matrix)
    if importlib.util.find_spec("faiss") is None:  # a dependency; a platform without it
        logger.warning("faiss is not installed: %d rows are searched exactly", len(matrix))
        return NearestRows(matrix)
    graph = _load(path, matrix, key) if path is not None and path.is_file() else None
    if graph is None:
        graph = build_graph(matrix)
        if path is not None:
            _save(path, graph, matrix, key)
    return NearestRows(matrix, graph)
