"""Standardising scores: the one z-score every fused signal of ``ranking`` uses."""

from __future__ import annotations

from typing import Optional

import numpy as np


def zscore(values: np.ndarray, dtype: Optional[type] = np.float32) -> np.ndarray:
    """Standardised scores (all zero when every value is the same), as ``dtype``; ``None``
    keeps the input's precision (section scores are float64 sums standardised twice, and the
    ranking they feed is pinned to that precision)."""
    if values.size == 0:
        return values.astype(dtype or values.dtype)
    std = float(values.std())
    if std == 0.0:
        return np.zeros_like(values, dtype=dtype)
    standard = (values - values.mean()) / std
    return standard if dtype is None else standard.astype(dtype)
