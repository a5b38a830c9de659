"""The lexical ranker of the ``narrative`` mode: BM25 over passages with ``bm25s``.

``bm25s`` (a maintained, NumPy/SciPy-sparse BM25) scores every passage for a query in one sparse
pass, which keeps a 1M-word index well inside the latency target. The index is persisted with
the E²RAG index in ``bm25s``'s own file format (carried as base64 inside the index struct until
the stores get a directory of their own), so loading never re-tokenises the passages. Tokenisation is ``bm25s.tokenize`` with its
English stop words, the same as the benchmark's BM25 baseline.
"""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any, Sequence

import numpy as np

LEXICAL_FORMAT = 1


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
    def to_json(self) -> str:
        """The ids and ``bm25s``'s own saved files (base64), so loading needs no re-indexing."""
        files: dict[str, str] = {}
        if self.ids:
            with tempfile.TemporaryDirectory() as folder:
                self._model.save(folder, show_progress=False)
                for path in sorted(Path(folder).iterdir()):
                    files[path.name] = base64.b64encode(path.read_bytes()).decode("ascii")
        return json.dumps({"format": LEXICAL_FORMAT, "ids": self.ids, "files": files})

    @classmethod
    def from_json(cls, text: str) -> "LexicalIndex":
        import bm25s

        state = json.loads(text)
        if state.get("format") != LEXICAL_FORMAT:
            raise ValueError(f"unknown lexical index format {state.get('format')!r}")
        if not state["ids"]:
            return cls([], bm25s.BM25())
        with tempfile.TemporaryDirectory() as folder:
            for name, data in state["files"].items():
                (Path(folder) / Path(name).name).write_bytes(base64.b64decode(data))
            model = bm25s.BM25.load(folder, show_progress=False)
        return cls(state["ids"], model)
