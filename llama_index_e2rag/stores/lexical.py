"""The lexical ranker of the ``narrative`` mode: BM25 over passages with ``bm25s``.

``bm25s`` (a maintained, NumPy/SciPy-sparse BM25) scores every passage for a query in one sparse
pass, which keeps a 1M-word index well inside the latency target. The index is derived from the
passages: the first query after a write builds it (BM25 over every passage, about a second per
100k words) and keeps it as a read model (``Stores.lexical``: ``bm25s``'s own files in one
checksummed file, trusted only for the passages it was built from), so later processes never
re-tokenise; a save no longer rebuilds it over the whole store. Tokenisation is
``bm25s.tokenize`` with its English stop words, the same as the benchmark's BM25 baseline.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
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

    def encode(self) -> dict[str, Any]:
        """The index as one JSON value: ``bm25s``'s own files, base64 (``decode`` reads it)."""
        with tempfile.TemporaryDirectory(prefix="e2rag-bm25-") as folder:
            self.save(Path(folder))
            return {p.name: base64.b64encode(p.read_bytes()).decode("ascii")
                    for p in sorted(Path(folder).iterdir())}

    @classmethod
    def decode(cls, data: dict[str, Any]) -> "LexicalIndex":
        with tempfile.TemporaryDirectory(prefix="e2rag-bm25-") as folder:
            for name, body in data.items():
                if "/" in name or name.startswith("."):
                    raise ValueError(f"unexpected file name {name!r} in a lexical read model")
                (Path(folder) / name).write_bytes(base64.b64decode(body))
            return cls.load(Path(folder), mmap=False)

    @classmethod
    def load(cls, folder: Path, mmap: bool = True) -> "LexicalIndex":
        import bm25s

        state = json.loads((folder / IDS_FILE).read_text(encoding="utf-8"))
        if state.get("format") != LEXICAL_FORMAT:
            raise ValueError(f"unknown lexical index format {state.get('format')!r} in {folder}")
        if not state["ids"]:
            return cls([], bm25s.BM25())
        model = bm25s.BM25.load(str(folder), show_progress=False, mmap=mmap)
        return cls(state["ids"], model)


def content_key(ids: Sequence[str], texts: Sequence[str]) -> str:
    """What a BM25 index is built from: the format and a digest of the passages in order."""
    digest = hashlib.sha256()
    for id_, text in zip(ids, texts):
        digest.update(f"{len(id_)}:{id_}{len(text)}:{text}".encode("utf-8"))
    return f"{LEXICAL_FORMAT}:{len(ids)}:{digest.hexdigest()}"
