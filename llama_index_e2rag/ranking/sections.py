"""Coarse-to-fine: a passage inherits how well its stretch of the story matches the question.

A novel's 30-word passages are too short to carry a scene on their own, and LiteraryQA's
questions paraphrase plot summaries, which match a stretch of story better than any one passage.
RAPTOR scores a tree of LLM summaries; this scores the book's own stretches without an LLM:
``section_passages`` consecutive passages of one document (about the retrieval budget: 50
passages of 30 words = 1,500 words) are one section, scored by the question's cosine with the
section's centroid and the section's summed BM25, then z-scored over the index's sections.
Only long documents (novels: over ``NarrativeWeights.long_chars``) are cut into sections: a fairy
tale of two sections would be split in a better and a worse half, which cost FairytaleQA's time
questions (1.161x to 1.146x the hybrid on validation) for nothing on the others.

Fixed blocks were chosen over the book's chapters by the novel cross-validation
(``benchmarks/novels``): chapters vary from a page to a tenth of the book, and a heading the
parser misses joins two of them.
"""

from __future__ import annotations

import numpy as np

from llama_index_e2rag.ranking.stats import zscore


def section_ids(doc_of: np.ndarray, size: int, keep: np.ndarray) -> np.ndarray:
    """Section number per row: blocks of ``size`` consecutive rows, restarting at each document
    (rows are in story order, grouped by document); -1 for rows outside ``keep``."""
    rows = np.arange(doc_of.size)
    out = np.full(doc_of.size, -1, dtype=np.int64)
    if not keep.any():
        return out
    starts = np.flatnonzero(np.r_[True, doc_of[1:] != doc_of[:-1]])
    first = starts[np.searchsorted(starts, rows, side="right") - 1]
    within = (rows - first) // max(size, 1)
    # each document's blocks get numbers of their own
    _, block = np.unique(np.stack([doc_of[keep], within[keep]], axis=1), axis=0,
                         return_inverse=True)
    out[keep] = block.reshape(-1)
    return out


def centroid_norms(vectors: np.ndarray, sections: np.ndarray) -> np.ndarray:
    """The length of each section's summed unit vectors (the denominator of its centroid's
    cosine, which is the same for every question)."""
    kept = sections >= 0
    count = int(sections.max()) + 1 if kept.any() else 0
    sums = np.zeros((count, vectors.shape[1] if vectors.ndim == 2 else 0), dtype=np.float64)
    np.add.at(sums, sections[kept], vectors[kept])
    return np.linalg.norm(sums, axis=1)


def section_signal(
    sections: np.ndarray, norms: np.ndarray, cosine: np.ndarray, lexical: np.ndarray,
    lexical_weight: float, dense_weight: float,
) -> np.ndarray:
    """Per row, its section's z-scored match (zeros outside sections, and everywhere with fewer
    than two sections).

    ``cosine``: each passage's cosine with the question (summed, it is the centroid's dot
    product); ``lexical``: the passages' z-scored BM25, of which only the positive part is summed,
    so a long section is not rewarded for many passages that miss. The two parts are z-scored
    and weighted as the passage-level lexical and dense signals are.
    """
    out = np.zeros(sections.size, dtype=np.float32)
    count = norms.size
    if count < 2 or cosine.size != sections.size:
        return out
    kept = sections >= 0
    ids = sections[kept]
    dot = np.bincount(ids, weights=cosine[kept], minlength=count)
    dense = dot / np.where(norms == 0, 1.0, norms)
    lex = np.bincount(ids, weights=np.maximum(lexical[kept], 0.0), minlength=count)
    score = lexical_weight * zscore(lex, None) + dense_weight * zscore(dense, None)
    out[kept] = zscore(score, None)[ids]
    return out
