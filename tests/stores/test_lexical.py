"""lexical.LexicalIndex: BM25 over passages with bm25s, persisted as JSON without re-indexing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from llama_index_e2rag.app.demo import SAMPLE_PATH
from llama_index_e2rag.stores.lexical import IDS_FILE, LEXICAL_FORMAT, LexicalIndex
from llama_index_e2rag.text import passage_spans

STORY = SAMPLE_PATH.read_text(encoding="utf-8")
PASSAGES = [STORY[a:b] for a, b in passage_spans(STORY, 30)]
IDS = [f"passage-{i}" for i in range(len(PASSAGES))]
QUERIES = [
    "Where did Peter lose his shoes?",
    "camomile tea",
    "Mr. McGregor planting cabbages",
    "friendly sparrows implored him",
    "WHITE CAT gold fish pond",
    "zebra giraffe",
]


@pytest.fixture(scope="module")
def lexical() -> LexicalIndex:
    return LexicalIndex.build(IDS, PASSAGES)


def test_scores_are_aligned_with_the_ids(lexical):
    assert lexical.ids == IDS and len(lexical) == len(PASSAGES)
    for query in QUERIES:
        scores = lexical.scores(query)
        assert scores.shape == (len(IDS),)
        assert np.all(scores >= 0)


def test_only_passages_sharing_a_word_score_and_rarer_words_weigh_more(lexical):
    scores = lexical.scores("camomile")
    holding = [i for i, p in enumerate(PASSAGES) if "camomile" in p.lower()]
    assert holding and set(np.flatnonzero(scores)) == set(holding)
    # "Peter" is everywhere, "camomile" in one place: the rare word dominates
    mixed = lexical.scores("Peter camomile")
    assert int(np.argmax(mixed)) in holding


def test_case_does_not_matter(lexical):
    assert np.allclose(lexical.scores("white cat"), lexical.scores("WHITE Cat"))


@pytest.mark.parametrize("query", ["zebra giraffe", "the and of", "", "?!"])
def test_a_query_without_known_words_scores_zero_everywhere(lexical, query):
    scores = lexical.scores(query)
    assert scores.shape == (len(IDS),) and not scores.any()


def test_save_and_load_give_equal_scores(lexical, tmp_path):
    lexical.save(tmp_path / "bm25")
    state = json.loads((tmp_path / "bm25" / IDS_FILE).read_text())
    assert state == {"format": LEXICAL_FORMAT, "ids": IDS}
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded.ids == IDS
    for query in QUERIES:
        assert np.array_equal(loaded.scores(query), lexical.scores(query))


def test_loading_does_not_tokenise_the_passages_again(lexical, monkeypatch, tmp_path):
    import bm25s

    lexical.save(tmp_path / "bm25")

    def refuse(*args, **kwargs):
        raise AssertionError("the passages were indexed again")

    monkeypatch.setattr(bm25s.BM25, "index", refuse)
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert np.array_equal(loaded.scores(QUERIES[0]), lexical.scores(QUERIES[0]))


def test_the_empty_index_scores_nothing_and_round_trips(tmp_path):
    empty = LexicalIndex.build([], [])
    assert len(empty) == 0
    assert empty.scores("Peter").shape == (0,)
    empty.save(tmp_path / "bm25")
    loaded = LexicalIndex.load(tmp_path / "bm25")
    assert loaded.ids == [] and loaded.scores("anything").shape == (0,)


def test_ids_and_texts_must_line_up():
    with pytest.raises(ValueError):
        LexicalIndex.build(["a", "b"], ["only one text"])


def test_an_unknown_format_is_refused(lexical, tmp_path):
    lexical.save(tmp_path / "bm25")
    ids_file = tmp_path / "bm25" / IDS_FILE
    ids_file.write_text(json.dumps({"format": LEXICAL_FORMAT + 1, "ids": IDS}))
    with pytest.raises(ValueError, match="format"):
        LexicalIndex.load(tmp_path / "bm25")
