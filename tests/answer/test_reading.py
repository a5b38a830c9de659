"""``answer.reading``: candidates read against the question, without a synthesizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest

from llama_index_e2rag.answer.reading import AnswerWeights, Reading, rank_prior, read_candidates


@dataclass
class Sentence:
    text: str
    score: float
    rank: int = 0
    doc_id: Optional[str] = "d"
    char_offset: Optional[int] = None
    offers_answer: Optional[bool] = None


def test_the_rank_prior_falls_fastest_over_the_first_places() -> None:
    values = [rank_prior(r) for r in range(5)]
    assert values[0] == 0 and all(a > b for a, b in zip(values, values[1:]))
    assert values[0] - values[1] > values[3] - values[4]


def test_each_weight_counts_its_own_part_of_a_reading() -> None:
    reading = Reading(relevance=1.0, overlap=0.5, offers=True, rank=0)
    assert AnswerWeights(1, 0, 0, 0).score(reading) == 1.0
    assert AnswerWeights(0, 1, 0, 0).score(reading) == 0.5
    assert AnswerWeights(0, 0, 1, 0).score(reading) == 1.0


def test_the_sentence_with_the_questions_words_and_answer_kind_reads_best() -> None:
    spacy_model = pytest.importorskip("llama_index_e2rag.extract.spacy_model")
    try:
        nlp = spacy_model.load_spacy()
    except Exception as exc:  # noqa: BLE001 - the model package is optional
        pytest.skip(f"spaCy model unavailable: {exc}")
    ranked = [Sentence("The weather was cold all week.", 0.9),
              Sentence("Mr. McGregor caught Peter in the garden.", 0.5, rank=1)]
    readings = read_candidates(nlp, "Who caught Peter in the garden?", ranked)
    weights = AnswerWeights()
    assert weights.score(readings[1]) > weights.score(readings[0])
    assert readings[1].overlap > readings[0].overlap and ranked[1].offers_answer
