"""How build time, memory and query latency grow with the amount of text.

Real books are concatenated and cut to each size (one document per size); each size is measured in
its own process by ``speed.measure_in_subprocess``. The growth exponent is the slope of a
least-squares line in log-log space: 1.0 means linear, 2.0 quadratic.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from tqdm import tqdm

from benchmarks.loaders import Narrative, concatenated_words
from benchmarks.speed import measure_in_subprocess


def growth_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x); ``None`` with fewer than two positive points."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(points) < 2:
        return None
    lx, ly = np.array(points).T
    return float(np.polyfit(lx, ly, 1)[0])


#: Words of the document inserted into each persisted index (``insert`` timing).
INSERT_WORDS = 10_000


def run_scaling(books: Sequence[Narrative], sizes: Sequence[int], modes: Sequence[str],
                queries: Sequence[str], timeout: float | None = None) -> dict[str, Any]:
    """Measure each size; returns rows plus exponents of build time, peak RSS and latency.

    Latency is measured on the persisted index loaded back; each row also times ``e2rag
    query``/``show`` and inserting a further ``INSERT_WORDS``-word text (from the last books,
    so it is new) into the persisted index.
    """
    rows = []
    insert_text = concatenated_words(list(books)[::-1], INSERT_WORDS)
    for size in tqdm(sizes, desc="scaling", unit="size"):
        text = concatenated_words(list(books), size)
        row = measure_in_subprocess([text], modes, queries, timeout=timeout, loaded=True,
                                    cli=True, insert_text=insert_text)
        row["target_words"] = size
        rows.append(row)
    ok = [r for r in rows if "error" not in r]
    words = [r["words"] for r in ok]
    exponents: dict[str, Any] = {
        "build_seconds": growth_exponent(words, [r["build_seconds"] for r in ok]),
        "peak_rss_mb": growth_exponent(
            words, [r.get("peak_rss_build_mb", r["peak_rss_mb"]) for r in ok]),
        "rss_growth_mb": growth_exponent(
            words, [r["rss_after_build_mb"] - r["rss_before_build_mb"] for r in ok]),
        "disk_bytes": growth_exponent(words, [r["disk_bytes"] for r in ok]),
    }
    for mode in modes:
        p50 = [r["latency"].get(mode, {}).get("p50_ms") for r in ok]
        exponents[f"latency_p50_{mode}"] = growth_exponent(words, p50)
    return {"sizes": list(sizes), "rows": rows, "exponents": exponents}
