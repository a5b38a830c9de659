"""``answer.reading``: candidates read against the question, without a synthesizer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

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


class _Pipeline:
    """spaCy's pipeline, recording the components each parse skips; ``full`` parses with every
    component whatever is asked."""

    def __init__(self, nlp: Any, full: bool = False) -> None:
        self._nlp, self._full = nlp, full
        self.pipe_names = nlp.pipe_names
        self.skipped: list[list[str]] = []

    def pipe(self, texts: Any, disable: Any = ()) -> Any:
        self.skipped.append(list(disable))
        return self._nlp.pipe(texts) if self._full else self._nlp.pipe(texts, disable=disable)


#: Sentences of a novel (London's *The Little Lady of the Big House*), among them some whose
#: lemmas change without the dependency parser ("going", "came", "having" read as verbs).
NOVEL = (
    "And we're going swimming this afternoon.",
    "After you had been under two minutes I knew it had to be something like this, and I came "
    "exploring.",
    "She attempted to ask, stung almost to shame at thought of her husband having witnessed any "
    "caress of hers and Graham's.",
    "It's growing all the time, and I ain't spending a cent of it, not so as you can notice...",
    "For Dick Forrest was the center of a system which he himself had built.",
    "Dick says that if I build it I must build it for seven, because the sages need it.",
    "Paula Forrest rode to Sacramento in the morning so that the mare could rest.",
    "Graham found Mr. Hennessy at the stallion barns near the big house.",
)


@pytest.mark.parametrize(
    "question, skipped",
    [("What did Dick Forrest build?", ["ner"]), ("Why did Paula ride?", ["ner"]),
     ("Who built the house?", []), ("Where did Graham go?", []), ("When did Paula ride?", [])],
)
def test_only_a_person_place_or_time_answer_needs_the_entity_recogniser(
    nlp: Any, question: str, skipped: list[str]
) -> None:
    pipeline = _Pipeline(nlp)
    read_candidates(pipeline, question, [Sentence(t, 0.5) for t in NOVEL])
    assert pipeline.skipped == [skipped]


@pytest.mark.parametrize("question", ["What did Dick Forrest build?", "Why did Paula ride?"])
def test_readings_without_the_entity_recogniser_are_a_full_parses(nlp: Any, question: str) -> None:
    def read(pipeline: _Pipeline) -> tuple[list[Reading], list[Optional[bool]]]:
        ranked = [Sentence(t, 1.0 - i / 10, rank=i, char_offset=200 * i)
                  for i, t in enumerate(NOVEL)]
        return read_candidates(pipeline, question, ranked), [s.offers_answer for s in ranked]

    fast, full = read(_Pipeline(nlp)), read(_Pipeline(nlp, full=True))
    assert fast == full
    assert any(r.overlap > 0 for r in fast[0]) and any(fast[1]) == question.startswith("Why")
