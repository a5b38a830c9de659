"""The embedding phase keeps what builders embedded in a scratch file and reuses it exactly, and
its progress bar measures the work by characters."""

from __future__ import annotations

import asyncio
import gc
import os
from typing import List, Optional

import numpy as np
import pytest
import tqdm.auto
from tqdm.std import tqdm as tqdm_std

from llama_index_e2rag import embeddings as embedding_rows
from llama_index_e2rag.ingest import embedding
from llama_index_e2rag.ingest.embedding import KeptVectors, RecordingEmbedding, embed_texts
from tests.hash_embedding import HashEmbedding


class CountingEmbedding(HashEmbedding):
    """The hash embedding, noting every text it is asked to embed."""

    asked: List[str] = []

    def _get_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        self.asked.extend(texts)
        return super()._get_text_embeddings(texts)

    async def _aget_text_embeddings(self, texts: List[str]) -> List[List[float]]:
        return self._get_text_embeddings(texts)


def _folder(kept: KeptVectors) -> str:
    assert kept._file is not None
    return os.path.dirname(kept._file.name)


def test_kept_vectors_read_back_exactly_whatever_the_order(monkeypatch) -> None:
    monkeypatch.setattr(embedding, "_READ_ROWS", 7)  # several blocks, a partial last one
    rng = np.random.default_rng(0)
    texts = [f"text {i}" for i in range(60)]
    vectors = rng.standard_normal((60, 5)).astype(np.float32)
    kept = KeptVectors()
    for start in range(0, 60, 11):
        kept.add(texts[start : start + 11], vectors[start : start + 11])
    kept.add(["text 3"], [np.ones(5)])  # a text kept already keeps its first vector
    assert len(kept) == 60 and "text 59" in kept and "other" not in kept
    wanted = [texts[i] for i in rng.permutation(60)[:45]] + ["text 3"]
    out = np.zeros((len(wanted), 5), dtype=np.float32)
    kept.read_into(wanted, out)
    np.testing.assert_array_equal(out, vectors[[texts.index(t) for t in wanted]])
    kept.close()


def test_kept_vectors_leave_no_folder_closed_or_collected() -> None:
    kept = KeptVectors()
    kept.add(["a"], [[1.0, 2.0]])
    folder = _folder(kept)
    assert os.path.isdir(folder) and os.path.basename(folder).startswith(embedding.KEPT_PREFIX)
    kept.close()
    assert not os.path.exists(folder)
    dropped = KeptVectors()
    dropped.add(["b"], [[3.0]])
    folder = _folder(dropped)
    del dropped
    gc.collect()
    assert not os.path.exists(folder)


@pytest.mark.parametrize("new", [["a new text", "another one"], []])
def test_texts_the_builders_embedded_are_not_embedded_again(new: list[str]) -> None:
    inner = CountingEmbedding()
    inner.asked = []
    recorder = RecordingEmbedding(inner)
    built = [f"name {i}" for i in range(9)]
    recorded = recorder.get_text_embedding_batch(built)
    inner.asked.clear()
    kept = recorder.take()
    staged = asyncio.run(embed_texts(inner, [*built, *new, "name 2"], known=kept))
    kept.close()
    assert sorted(inner.asked) == sorted(new)
    for text, vector in zip(built, recorded):
        np.testing.assert_array_equal(staged.of(text), np.asarray(vector, dtype=np.float32))
    fresh = HashEmbedding()
    for text in new:
        np.testing.assert_allclose(staged.of(text), fresh.get_text_embedding(text), rtol=1e-6)
    assert len(staged) == len(built) + len(new) and len(recorder.take()) == 0



class RecordedBar(tqdm_std):
    """tqdm's bar, noting its count, total and postfix at each update (the printed bar skips
    updates closer than ``mininterval``)."""

    seen: List[tuple] = []

    def update(self, n: float = 1) -> Optional[bool]:
        shown = super().update(n)
        RecordedBar.seen.append((self.n, self.total, self.postfix, self.unit))
        return shown


def test_the_progress_bar_counts_the_characters_embedded(monkeypatch) -> None:
    """Texts go shortest first, so the bar's share must be the characters, not the texts: the
    short half of the texts is a small share of the work."""
    monkeypatch.setattr(embedding_rows, "EMBED_CALL_TEXTS", 4)  # a bar update per four texts
    monkeypatch.setattr(tqdm.auto, "tqdm", RecordedBar)
    RecordedBar.seen = []
    short = [f"n{i}" for i in range(8)]
    long = [f"a longer sentence number {i} " * 20 for i in range(8)]
    inner = CountingEmbedding()
    recorder = RecordingEmbedding(inner)
    recorder.get_text_embedding_batch(["already embedded"])
    known = recorder.take()
    asyncio.run(embed_texts(inner, [*long, *short, "n1", "already embedded"], True, known))
    known.close()
    todo = sorted(short + long, key=lambda t: (len(t), t))
    total = sum(map(len, todo))
    assert RecordedBar.seen == [
        (sum(map(len, todo[:step])), total, f"{step}/{len(todo)} texts", "char")
        for step in range(4, 17, 4)
    ]
    assert RecordedBar.seen[1][0] < total / 10  # the eight short texts of sixteen
