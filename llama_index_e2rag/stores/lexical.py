"""The lexical ranker of the ``narrative`` mode: BM25 over passages with ``bm25s``.

``bm25s`` (a maintained, NumPy/SciPy-sparse BM25) scores every passage for a query in one sparse
pass, which keeps a 1M-word index well inside the latency target. The index is persisted with
the E²RAG index in ``bm25s``'s own file format (memory-mapped on load), so loading never
re-tokenises the passages. Tokenisation is ``bm25s.tokenize`` with its
English stop words, the same as the benchmark's BM25 baseline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

LEXICAL_FORMAT = 1
IDS_FILE = "ids.json"


class LexicalIndex:
    """BM25 scores of a fixed list of ids (passages), aligned with ``ids``."""

    def __init__(self, ids: Sequence[str], model: Any) -> None:
        self.ids = list(ids)
        self._model = model

    @classmethod
    def build(cls, ids: Sequence[str], texts: Sequence[str]) -> "LexicalIndex":
        import bm25s

        if len(ids) != len(texts):
            raise ValueError("ids and texts differ in length")
        model = bm25s.BM25()
        if texts:
            tokens = bm25s.tokenize(list(texts), stopwords="en", show_progress=False)
            model.index(tokens, show_progress=False)
        return cls(ids, model)

    def __len__(self) -> int:
        return len(self.ids)

    def scores(self, query: str) -> np.ndarray:
        """BM25 of ``query`` for every id (zeros when nothing matches or the index is empty)."""
        import bm25s

        if not self.ids:
            return np.zeros(0, dtype=np.float32)
        words = bm25s.tokenize(query, stopwords="en", return_ids=False, show_progress=False)[0]
        known = [w for w in words if w in self._model.vocab_dict]
        if not known:
            return np.zeros(len(self.ids), dtype=np.float32)
        return np.asarray(self._model.get_scores(known), dtype=np.float32)

    # -- persistence --------------------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write ``bm25s``'s own files and the ids into ``folder`` (which must be new or empty)."""
        folder.mkdir(parents=True, exist_ok=True)
        if self.ids:
            self._model.save(str(folder), show_progress=False)
        (folder / IDS_FILE).write_text(
            json.dumps({"format": LEXICAL_FORMAT, "ids": self.ids}), encoding="utf-8"
        )

    @classmethod
    def load(cls, folder: Path) -> "LexicalIndex":
        import bm25s

        state = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
        if state.get("format") != LEXICAL_FORMAT:
            raise ValueError(f"unknown lexical index format {state.get('format')!r} in {folder}")
        if not state["ids"]:
            return cls([], bm25s.BM25())
        model = bm25s.BM25.load(str(folder), show_progress=False, mmap=True)
        return cls(state["ids"], model)
