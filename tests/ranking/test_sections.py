"""The coarse-to-fine ``section`` signal (``ranking.sections``) and its place in ``fuse``."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from llama_index_e2rag.ranking.narrative import NarrativeWeights, Signals, fuse
from llama_index_e2rag.ranking.passages import PassageTable
from llama_index_e2rag.ranking.sections import centroid_norms, section_ids, section_signal


@pytest.mark.parametrize("size", [1, 2, 3, 7])
def test_blocks_hold_consecutive_rows_of_one_document_and_restart_at_each(size):
    doc_of = np.array([0] * 8 + [1] * 5 + [2] * 2)
    ids = section_ids(doc_of, size, np.ones(doc_of.size, dtype=bool))
    for section in np.unique(ids):
        rows = np.flatnonzero(ids == section)
        assert rows.size <= size
        assert np.all(np.diff(rows) == 1)
        assert np.unique(doc_of[rows]).size == 1
    starts = np.flatnonzero(np.r_[True, doc_of[1:] != doc_of[:-1]])
    for start in starts[1:]:
        assert ids[start] != ids[start - 1]


def test_rows_outside_the_kept_documents_have_no_section():
    doc_of = np.array([0] * 6 + [1] * 4)
    keep = doc_of == 1
    ids = section_ids(doc_of, 2, keep)
    assert np.all(ids[~keep] == -1)
    assert sorted(set(ids[keep].tolist())) == [0, 1]


def _vectors(rng: np.random.Generator, rows: int, dim: int = 16) -> np.ndarray:
    m = rng.normal(size=(rows, dim))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_the_stretch_that_matches_the_question_lifts_all_its_passages():
    rng = np.random.default_rng(3)
    vectors = _vectors(rng, 40)
    question = _vectors(rng, 1)[0]
    stretch = slice(20, 30)  # section 2 of four sections of 10
    vectors[stretch] = 0.6 * question + 0.4 * vectors[stretch]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = section_ids(np.zeros(40, dtype=int), 10, np.ones(40, dtype=bool))
    cosine = vectors @ question
    out = section_signal(ids, centroid_norms(vectors, ids), cosine, np.zeros(40), 0.5, 0.7)
    inside = out[stretch]
    assert np.all(inside == inside[0]) and inside[0] > 0
    assert inside[0] > np.delete(out, np.arange(20, 30)).max()
    # z-scored over the sections
    assert abs(float(np.mean([out[i * 10] for i in range(4)]))) < 1e-5


def test_passages_that_miss_the_words_cost_their_section_nothing():
    rng = np.random.default_rng(5)
    vectors = _vectors(rng, 20)
    ids = section_ids(np.zeros(20, dtype=int), 10, np.ones(20, dtype=bool))
    cosine = np.zeros(20)
    lexical = np.full(20, -0.2)
    lexical[[2, 12]] = 3.0  # one hit in each section
    lexical[10:] = np.where(lexical[10:] > 0, lexical[10:], -2.0)  # worse misses in the second
    out = section_signal(ids, np.ones(2), cosine, lexical, 0.5, 0.7)
    assert np.allclose(out, 0.0)


def test_one_section_or_none_gives_nothing():
    vectors = _vectors(np.random.default_rng(0), 8)
    one = section_ids(np.zeros(8, dtype=int), 50, np.ones(8, dtype=bool))
    assert np.allclose(section_signal(one, centroid_norms(vectors, one), vectors[:, 0],
                                      vectors[:, 1], 0.5, 0.7), 0.0)
    none = section_ids(np.zeros(8, dtype=int), 2, np.zeros(8, dtype=bool))
    assert np.allclose(section_signal(none, centroid_norms(vectors, none), vectors[:, 0],
                                      vectors[:, 1], 0.5, 0.7), 0.0)


def _table(rows_per_doc: dict[int, int], chars_per_row: int) -> PassageTable:
    rng = np.random.default_rng(1)
    doc_of = np.array([d for d, n in rows_per_doc.items() for _ in range(n)])
    starts = [(d, i * chars_per_row) for d, n in rows_per_doc.items() for i in range(n)]
    lengths = {d: n * chars_per_row for d, n in rows_per_doc.items()}
    return PassageTable(ids=[f"p{i}" for i in range(doc_of.size)], doc_of=doc_of,
                        vectors=_vectors(rng, doc_of.size), starts=starts, lengths=lengths)


def _signals(table: PassageTable) -> Signals:
    rng = np.random.default_rng(2)
    n = len(table)
    zeros = np.zeros(n, dtype=np.float32)
    return Signals(lexical=rng.normal(size=n).astype(np.float32),
                   dense=rng.normal(size=n).astype(np.float32), mention=zeros, event=zeros,
                   co_event=zeros, cosine=rng.uniform(-0.2, 0.6, size=n).astype(np.float32))


def test_only_a_long_document_is_cut_into_sections():
    w = replace(NarrativeWeights(), section=0.25, section_passages=10, long_chars=5_000)
    table = _table({0: 30, 1: 60}, chars_per_row=150)  # 4,500 and 9,000 characters
    total, parts = fuse(table, _signals(table), w)
    assert np.allclose(parts["section"][table.doc_of == 0], 0.0)
    assert np.any(parts["section"][table.doc_of == 1] != 0.0)
    off, _ = fuse(table, _signals(table), w.without("section"))
    short = table.doc_of == 0
    assert np.allclose(total[short], off[short])
    assert not np.allclose(total[~short], off[~short])
