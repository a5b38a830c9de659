"""The extractive answer leads with the sentence that answers, on the real offline default.

Real retrieved evidence (spaCy grounded extraction + MiniLM, the default narrative retriever at
FairytaleQA's 200-word budget) over a few FairytaleQA *train* stories, whose questions were
written by the dataset's annotators, not by us. The rule under test: a *who* question's first
answer sentence names a person, *where* a place, *why* a cause, more often than the most relevant
sentence does, without losing the gold answer's words.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.loaders import load_fairytaleqa
from benchmarks.scoring import answer_token_recall
from llama_index_e2rag.ranking.answer_types import (
    AnswerType, answer_type, content_lemmas, offers, parse)
from llama_index_e2rag.embeddings import MiniLMEmbedding
from llama_index_e2rag.extract.grounded import GroundedExtractor, load_spacy
from llama_index_e2rag.context.keys import RESPONSE_EVIDENCE_KEY as KEY
from llama_index_e2rag.answer.extractive import ExtractiveSynthesizer
from llama_index_e2rag.index import E2RAGIndex

#: Small train stories with who/where/why questions among their others.
STORIES = ("brother-sister", "cuchulain-of-muirthemne", "dschang-liang", "a-legend-of-confucius")
BUDGET_WORDS = 200


@pytest.fixture(scope="module")
def answers(shared_data: Path) -> list[tuple[str, list[str], str, str]]:
    """(question, gold answers, first sentence re-read, first sentence by relevance only)."""
    from llama_index.core import Document

    embed = MiniLMEmbedding()
    rows = []
    for story in [s for s in load_fairytaleqa(shared_data, "train") if s.doc_id in STORIES]:
        index = E2RAGIndex.from_documents(
            [Document(text=story.text, id_=story.doc_id)],
            embed_model=embed,
            extractors=[GroundedExtractor()],
        )
        retriever = index.as_retriever(budget_words=BUDGET_WORDS)
        reread = ExtractiveSynthesizer.from_index(index, top_n=1)
        relevance = ExtractiveSynthesizer.from_index(index, top_n=1, spacy_model=None)
        for question in story.questions:
            nodes = retriever.retrieve(question.question)
            first = [
                synth.synthesize(question.question, nodes).metadata[KEY][0]["text"]
                for synth in (reread, relevance)
            ]
            rows.append((question.question, question.answers, *first))
    assert len({r[0] for r in rows}) > 80, "the stories' questions were not all read"
    return rows


def _offer_rate(rows: list[tuple[str, list[str], str, str]], column: int) -> float:
    nlp = load_spacy()
    typed = [r for r in rows if answer_type(r[0]) is not AnswerType.OTHER]
    hits = 0
    for row in typed:
        question, sentence = parse(nlp, [row[0], row[column]])
        hits += offers(sentence, answer_type(row[0]), content_lemmas(question))
    return hits / len(typed)


def _answer_rate(rows: list[tuple[str, list[str], str, str]], column: int) -> float:
    recalls = [answer_token_recall(r[column], r[1]) or 0.0 for r in rows]
    return sum(r >= 0.5 for r in recalls) / len(recalls)


def test_typed_questions_lead_with_a_sentence_of_the_kind_asked(answers):
    reread, relevance = _offer_rate(answers, 2), _offer_rate(answers, 3)
    # Measured 77% against 50% by relevance alone (some answers are told in ways the rules do
    # not read, e.g. a cause in a "when she saw" clause); the margins leave room for model noise.
    assert reread >= 0.7, f"only {reread:.0%} of first answers offer the kind asked"
    assert reread > relevance + 0.15, (reread, relevance)


def test_reading_the_question_finds_the_gold_answer_first_more_often(answers):
    """Measured: half of the first sentences hold the gold answer's words, against a third."""
    reread, relevance = _answer_rate(answers, 2), _answer_rate(answers, 3)
    assert reread > relevance + 0.05, (reread, relevance)
