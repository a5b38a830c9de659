"""Window baselines run beside every system: BM25, dense, their RRF fusion, random windows.

All of them rank the same fixed, non-overlapping windows of the source (100 words for books,
50 for stories and multi-hop paragraphs). The whole-text ceiling needs no ranking and is scored by
the runner without a budget.
"""

from __future__ import annotations

import random
from typing import Sequence

import bm25s
import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

BASELINES = ("bm25", "dense", "hybrid", "random")

#: Reciprocal-rank-fusion constant (Cormack et al.'s usual 60).
RRF_K = 60
#: How deep each ranking is fused; far more windows than any budget can hold.
FUSION_DEPTH = 100


def make_windows(text: str, size: int) -> list[str]:
    """Consecutive non-overlapping windows of ``size`` whitespace words."""
    tokens = text.split()
    return [" ".join(tokens[i : i + size]) for i in range(0, len(tokens), size)]


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[int]:
    """Reciprocal-rank fusion of several rankings of the same items (ties: first seen first)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank + 1)
    return sorted(scores, key=lambda item: -scores[item])


class WindowBaselines:
    """Rank one source's windows for a batch of questions with every baseline."""

    def __init__(self, windows: list[str], embed_model: BaseEmbedding | None,
                 seed: int = 0) -> None:
        if not windows:
            raise ValueError("no windows to rank")
        self.windows = windows
        self.embed_model = embed_model
        self.seed = seed
        self._bm25 = bm25s.BM25()
        self._bm25.index(bm25s.tokenize(windows, stopwords="en", show_progress=False),
                         show_progress=False)
        self._vectors: np.ndarray | None = None

    def _window_vectors(self) -> np.ndarray:
        if self._vectors is None:
            assert self.embed_model is not None
            vectors = self.embed_model.get_text_embedding_batch(self.windows)
            self._vectors = _unit_rows(np.asarray(vectors, dtype=np.float32))
        return self._vectors

    def bm25(self, questions: Sequence[str]) -> list[list[int]]:
        depth = min(FUSION_DEPTH, len(self.windows))
        tokens = bm25s.tokenize(list(questions), stopwords="en", show_progress=False)
        ids, _ = self._bm25.retrieve(tokens, k=depth, show_progress=False, n_threads=1)
        return [list(map(int, row)) for row in ids]

    def dense(self, questions: Sequence[str]) -> list[list[int]]:
        assert self.embed_model is not None
        depth = min(FUSION_DEPTH, len(self.windows))
        queries = _unit_rows(np.asarray(
            [self.embed_model.get_query_embedding(q) for q in questions], dtype=np.float32))
        scores = queries @ self._window_vectors().T
        return [list(map(int, np.argsort(-row, kind="stable")[:depth])) for row in scores]

    def random(self, qids: Sequence[str]) -> list[list[int]]:
        """A seeded shuffle per question: the floor every system must beat."""
        rankings = []
        for qid in qids:
            order = list(range(len(self.windows)))
            random.Random(f"{self.seed}:{qid}").shuffle(order)
            rankings.append(order[:FUSION_DEPTH])
        return rankings

    def rank_all(self, qids: Sequence[str], questions: Sequence[str]) -> dict[str, list[list[str]]]:
        """Ranked window texts per baseline, one list per question (no dense without a model)."""
        ranked: dict[str, list[list[int]]] = {"bm25": self.bm25(questions),
                                              "random": self.random(qids)}
        if self.embed_model is not None:
            ranked["dense"] = self.dense(questions)
            ranked["hybrid"] = [rrf([b, d]) for b, d in zip(ranked["bm25"], ranked["dense"])]
        return {name: [[self.windows[i] for i in row] for row in rows]
                for name, rows in ranked.items()}


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)
