"""How build time, memory and query latency grow with the amount of text.

Real books are concatenated and cut to each size: one document, or (a ``(words, documents)``
size) that many distinct documents built as ``e2rag index`` builds a library, a group of one
document per write (``--commit-words`` of one document's words: 100k for 10M words in 100), the
store saved between groups. Each size is measured in its own process by
``speed.measure_in_subprocess``. The growth exponent is the slope of a least-squares line in
log-log space (1.0 means linear, 2.0 quadratic), fitted over the one-document sizes.
"""

from __future__ import annotations

import math
from typing import Any, Sequence, Union

import numpy as np
from tqdm import tqdm

from benchmarks.loaders import Narrative, concatenated_words, word_windows
from benchmarks.speed import measure_in_subprocess

#: A size: words as one document, or ``(words, documents)``.
Size = Union[int, tuple[int, int]]


def growth_exponent(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Slope of log(y) against log(x); ``None`` with fewer than two positive points."""
    points = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x > 0 and y and y > 0]
    if len(points) < 2:
        return None
    lx, ly = np.array(points).T
    return float(np.polyfit(lx, ly, 1)[0])


#: Words of the document inserted into each persisted index (``insert`` timing).
INSERT_WORDS = 10_000


def run_scaling(books: Sequence[Narrative], sizes: Sequence[Size], modes: Sequence[str],
                queries: Sequence[str], timeout: float | None = None) -> dict[str, Any]:
    """Measure each size; returns rows plus exponents of build time, peak RSS and latency.

    Latency is measured on the persisted index loaded back; each row also times ``e2rag
    query``/``show`` and inserting a further ``INSERT_WORDS``-word text (from the last books,
    so it is new) into the persisted index.
    """
    rows = []
    insert_text = concatenated_words(list(books)[::-1], INSERT_WORDS)
    for size in tqdm(sizes, desc="scaling", unit="size"):
        words, docs = size if isinstance(size, tuple) else (size, 1)
        texts = ([concatenated_words(list(books), words)] if docs == 1
                 else word_windows(list(books), words, docs))
        row = measure_in_subprocess(texts, modes, queries, timeout=timeout, loaded=True,
                                    cli=True, insert_text=insert_text,
                                    commit_words=words // docs if docs > 1 else None)
        row["target_words"], row["documents"] = words, docs
        if docs > 1:
            row["name"] = f"{words:,} words in {docs} documents"
        rows.append(row)
    ok = [r for r in rows if "error" not in r and r.get("documents", 1) == 1]
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
    return {"sizes": [list(s) if isinstance(s, tuple) else s for s in sizes], "rows": rows,
            "exponents": exponents}
