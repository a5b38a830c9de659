"""``ranking.stats.zscore``: the one standardisation of every fused signal."""

import numpy as np

from llama_index_e2rag.ranking.stats import zscore


def test_scores_are_standardised_to_mean_zero_and_unit_spread() -> None:
    values = np.array([1.0, 2.0, 4.0, 9.0])
    z = zscore(values)
    assert z.dtype == np.float32
    assert abs(float(z.mean())) < 1e-6
    assert abs(float(z.std()) - 1.0) < 1e-6
    assert list(np.argsort(z)) == list(np.argsort(values))


def test_equal_scores_standardise_to_zero_not_to_nan() -> None:
    assert zscore(np.full(5, 3.0)).tolist() == [0.0] * 5
    assert zscore(np.zeros(0)).size == 0


def test_dtype_none_keeps_the_inputs_precision() -> None:
    values = np.array([0.1, 0.2, 0.7], dtype=np.float64)
    kept = zscore(values, None)
    assert kept.dtype == np.float64
    assert kept.tolist() == ((values - values.mean()) / values.std()).tolist()
    assert zscore(np.full(3, 0.5), None).dtype == np.float64
