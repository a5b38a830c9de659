"""``top_rows``: the rows a full Python sort keeps, in its order, ties included."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_e2rag.ranking.top import top_rows


@pytest.mark.parametrize("seed", range(5))
def test_top_rows_equal_the_first_k_of_a_full_sort_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n, k = int(rng.integers(0, 40)), int(rng.integers(0, 45))
        # few distinct values, so most cuts fall inside a run of ties
        primary = (rng.integers(0, 4, n) / 3).astype(np.float32)
        secondary = rng.integers(0, 3, n).astype(np.float64)
        assert top_rows(primary, k).tolist() == sorted(
            range(n), key=lambda i: (-primary[i], i)
        )[:k]
        assert top_rows(primary, k, secondary).tolist() == sorted(
            range(n), key=lambda i: (-primary[i], -secondary[i], i)
        )[:k]


def test_a_tie_at_the_cut_goes_to_the_lower_row() -> None:
    scores = np.array([0.1, 0.5, 0.9, 0.5, 0.5], dtype=np.float32)
    assert top_rows(scores, 2).tolist() == [2, 1]
    assert top_rows(scores, 3, np.array([0, 0, 0, 0, 1.0])).tolist() == [2, 4, 1]
    assert top_rows(scores, 0).tolist() == []
