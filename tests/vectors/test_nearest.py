"""``vectors.nearest``: exact below the threshold, a recall floor above it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llama_index_e2rag.vectors import nearest
from llama_index_e2rag.vectors.nearest import NearestRows
from llama_index_e2rag.vectors.nearest_graph import open_nearest

DIM = 32


def unit_matrix(rng: np.random.Generator, n: int, clusters: int = 40) -> np.ndarray:
    """Rows around a few centres (as embeddings of one story are), unit length."""
    centres = rng.standard_normal((clusters, DIM))
    rows = centres[rng.integers(0, clusters, n)] + 0.6 * rng.standard_normal((n, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def row_ids(n: int) -> list[str]:
    return [f"row-{r}" for r in range(n)]


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int, exclude=()) -> list[int]:
    """The reference: every row scored alone in float64, sorted, excluded rows left out."""
    q = np.asarray(query, np.float64)
    q = q / np.sqrt((q * q).sum())
    scores = [float((row.astype(np.float64) * q).sum()) for row in matrix]
    order = sorted((r for r in range(len(matrix)) if r not in set(exclude)),
                   key=lambda r: (-scores[r], r))
    return order[:k]


def test_exact_search_of_a_batch_equals_each_query_sorted_alone() -> None:
    rng = np.random.default_rng(7)
    matrix = unit_matrix(rng, 700)
    matrix[5] = matrix[9]  # a tie: the lower row first
    queries = rng.standard_normal((6, DIM))
    queries[2] = matrix[9]
    search = NearestRows(matrix)
    assert not search.approximate
    for k in (1, 3, 10, 700, 900):
        exclude = [[], [int(r) for r in rng.integers(0, 700, 20)], [9], [], [], list(range(650))]
        found = search.top(queries, k, exclude)
        for i, query in enumerate(queries):
            rows = [row for row, _ in found[i]]
            assert rows == exact_top(matrix, query, k, exclude[i])
            scores = search.scores(nearest.unit_rows(queries)[i], rows)
            assert [score for _, score in found[i]] == scores.tolist()
    assert search.top(queries, 2)[2][:2] == [(5, pytest.approx(1.0)), (9, pytest.approx(1.0))]


def test_a_matrix_without_vectors_ranks_rows_in_order_at_zero() -> None:
    search = NearestRows(np.zeros((4, 0), np.float32))
    assert search.top([[1.0, 0.0]], 3, [[1]]) == [[(0, 0.0), (2, 0.0), (3, 0.0)]]


def test_below_the_threshold_nothing_is_built_or_saved(tmp_path: Path) -> None:
    matrix = unit_matrix(np.random.default_rng(1), nearest.ANN_MIN_ROWS - 1)
    search = open_nearest(matrix, row_ids(len(matrix)), tmp_path / "m.hnsw")
    assert not search.approximate and not list(tmp_path.iterdir())


@pytest.fixture
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(nearest, "ANN_MIN_ROWS", 2_000)
    return 2_000


def test_above_the_threshold_recall_stays_above_the_floor(small_threshold: int) -> None:
    rng = np.random.default_rng(3)
    matrix = unit_matrix(rng, 6_000)
    search = open_nearest(matrix, row_ids(len(matrix)), None)
    assert search.approximate
    queries = rng.standard_normal((100, DIM))
    k = 10
    found = search.top(queries, k)
    hits = sum(len({r for r, _ in got} & set(exact_top(matrix, q, k)))
               for got, q in zip(found, queries))
    assert hits / (k * len(queries)) >= 0.95
    units = nearest.unit_rows(queries)
    for got, unit in zip(found[:10], units):  # the rows found carry their exact scores
        assert [s for _, s in got] == search.scores(unit, [r for r, _ in got]).tolist()
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)


@pytest.mark.parametrize("rows", [50, 2_500])
def test_tied_rows_go_to_the_lower_key_when_keys_are_given(
    small_threshold: int, rows: int
) -> None:
    matrix = unit_matrix(np.random.default_rng(4), rows)
    matrix[[3, 7, 11]] = matrix[20]
    ids = [f"id-{rows - r:05d}" for r in range(rows)]  # the later row, the lower id
    search = open_nearest(matrix, row_ids(len(matrix)), None)
    assert search.approximate == (rows >= small_threshold)
    assert [r for r, _ in search.top([matrix[20]], 3, ties=ids)[0]] == [20, 11, 7]
    assert [r for r, _ in search.top([matrix[20]], 3)[0]] == [3, 7, 11]
