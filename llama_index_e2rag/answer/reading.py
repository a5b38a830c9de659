"""Reading answer candidates against the question, the offline answer's second pass.

Each candidate sentence (best relevance first) is parsed with spaCy (without its entity
recogniser when the answer asked for is no person, place or time) and scored as an answer: its
relevance rescaled over the candidates, the idf-weighted share of the question's content words
in (or, at half credit, near) it, whether it offers the kind of answer asked for
(``ranking.answer_types``), and its node's retrieval rank. ``ExtractiveSynthesizer`` orders its
evidence by this score; ``benchmarks/answer_line.py`` fits the weights with ``read_candidates``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from llama_index_e2rag.ranking.answer_types import (
    AnswerType, answer_type, content_lemmas, needs_entities, offers, parse)

__all__ = ["AnswerWeights", "Candidate", "Reading", "rank_prior", "read_against_question",
           "read_candidates"]

#: Weights of an answer's score: relevance rescaled to [0, 1] over the candidates, the share of
#: the question's content words present (each weighted by how rare it is among the candidates),
#: offering the kind of answer asked for, and the retrieval rank of the node the sentence comes
#: from (``rank_prior``). Relevance, overlap and answer kind: round values, the relevance weight
#: chosen between 1 and 0.5 on FairytaleQA *train* stories (the retriever already chose every
#: candidate for relevance, so its fine differences say less than the question's words). The
#: rank weight: fitted on FairytaleQA train (``benchmarks/answer_line.py --fit``), so that a
#: sentence of the 10th passage must read clearly better than one of the first to lead;
#: validation untouched.
W_RELEVANCE, W_OVERLAP, W_ANSWER_TYPE, W_RANK = 0.5, 1.0, 0.5, 0.15
#: A question word found only in a candidate starting up to ``NEIGHBOUR_CHARS`` characters away
#: in the same document counts this much: "Who helped Peter when he was caught in the net?" is
#: answered a sentence or two after the one about the net, by one naming the helper, not the net.
NEIGHBOUR_CHARS, NEIGHBOUR_CREDIT = 400, 0.5



class Candidate(Protocol):
    """What reading needs of a candidate (``extractive.Evidence`` is one)."""

    text: str
    doc_id: Optional[str]
    char_offset: Optional[int]
    score: float
    rank: int
    offers_answer: Optional[bool]


@dataclass(frozen=True)
class Reading:
    """How one candidate sentence reads against the question (before weighting)."""

    #: relevance rescaled to [0, 1] over the candidates read
    relevance: float
    #: idf-weighted share of the question's content words in (or, at half credit, near) it
    overlap: float
    #: offers the kind of answer asked for
    offers: bool
    #: retrieval rank of its node (0 = first)
    rank: int


@dataclass(frozen=True)
class AnswerWeights:
    """How a ``Reading`` becomes an answer score (defaults: the module's fitted ``W_*``)."""

    relevance: float = W_RELEVANCE
    overlap: float = W_OVERLAP
    answer_type: float = W_ANSWER_TYPE
    rank: float = W_RANK

    def score(self, reading: Reading) -> float:
        return (
            self.relevance * reading.relevance
            + self.overlap * reading.overlap
            + self.answer_type * reading.offers
            + self.rank * rank_prior(reading.rank)
        )


def rank_prior(rank: int) -> float:
    """What a node's retrieval rank is worth: 0 for the first, −ln(1 + rank) below, so the
    first places differ most (with ``W_RANK``: the 10th passage starts 0.35 behind the first,
    less than the answer-kind bonus, more than small differences of relevance). The shape
    (against 1/(1 + rank) and linear) and the weight were chosen on FairytaleQA train."""
    return -math.log1p(rank)


def read_candidates(nlp: Any, question: str, ranked: list[Candidate]) -> list[Reading]:
    """Read ``ranked`` (best relevance first) against the question; sets ``offers_answer``.

    A question word's weight is its BM25 idf among the candidates: a name in every sentence
    ("Peter") tells them apart less than a word in two ("shoes").
    """
    kind = answer_type(question)
    texts = [question] + [e.text for e in ranked]
    question_doc, *docs = parse(nlp, texts, entities=needs_entities(kind))
    wanted = content_lemmas(question_doc)
    lemmas = [content_lemmas(doc) for doc in docs]
    nearby = _nearby_lemmas(ranked, lemmas)
    n = len(docs)
    weight = {
        lemma: math.log(1 + (n - df + 0.5) / (df + 0.5))
        for lemma in wanted
        for df in [sum(lemma in found for found in lemmas)]
    }
    total = sum(weight.values())
    scores = [e.score for e in ranked]
    low, spread = min(scores), (max(scores) - min(scores)) or 1.0
    readings = []
    for item, doc, found, near in zip(ranked, docs, lemmas, nearby):
        credit = sum(weight[lemma] for lemma in wanted & found)
        credit += NEIGHBOUR_CREDIT * sum(weight[lemma] for lemma in (wanted & near) - found)
        item.offers_answer = kind is not AnswerType.OTHER and offers(doc, kind, wanted)
        readings.append(
            Reading(
                relevance=(item.score - low) / spread,
                overlap=credit / total if total else 0.0,
                offers=item.offers_answer,
                rank=item.rank,
            )
        )
    return readings


def read_against_question(
    nlp: Any, question: str, ranked: list[Candidate], weights: AnswerWeights
) -> list[Candidate]:
    """``ranked`` re-ordered by its ``read_candidates`` scores (ties keep their order)."""
    readings = read_candidates(nlp, question, ranked)
    for item, reading in zip(ranked, readings):
        item.score = weights.score(reading)
    order = sorted(range(len(ranked)), key=lambda i: (-ranked[i].score, i))
    return [ranked[i] for i in order]


def _nearby_lemmas(ranked: list[Candidate], lemmas: list[set[str]]) -> list[set[str]]:
    """Per candidate, the lemmas of the other candidates of its document that start within
    ``NEIGHBOUR_CHARS`` of it (none when positions are unknown)."""
    by_doc: dict[Optional[str], list[int]] = {}
    for i, item in enumerate(ranked):
        if item.char_offset is not None:
            by_doc.setdefault(item.doc_id, []).append(i)
    nearby: list[set[str]] = [set() for _ in ranked]
    for members in by_doc.values():
        for i in members:
            for j in members:
                gap = abs((ranked[i].char_offset or 0) - (ranked[j].char_offset or 0))
                if j != i and gap <= NEIGHBOUR_CHARS:
                    nearby[i] |= lemmas[j]
    return nearby
