"""A predicate's readable statement (ChronoRAG's LLM-free facts), on the real spaCy model."""

from __future__ import annotations

import time
from typing import Any

import pytest

from llama_index_e2rag.extract.grounded import load_spacy
from llama_index_e2rag.extract.statements import LONGEST_STATEMENT, statement


def _verb(sentence: str, word: str) -> Any:
    doc = load_spacy()(sentence)
    return next(t for t in doc if t.text == word)


def _said(sentence: str, word: str) -> str:
    said = statement(_verb(sentence, word))
    assert said is not None
    return said


def _in_text_order(said: str, sentence: str) -> bool:
    """Every word of ``said`` occurs in ``sentence``, in the same order."""
    rest = sentence.split()
    for word in said.split():
        while rest and rest[0].strip(",;.!?") != word.strip(",;.!?"):
            rest.pop(0)
        if not rest:
            return False
        rest.pop(0)
    return True


@pytest.mark.parametrize(
    ("sentence", "first", "second", "subject"),
    [
        ("Peter gave himself up for lost, and shed big tears.", "gave", "shed", "Peter"),
        ("Mr. McGregor jumped up and ran after Peter.", "jumped", "ran", "Mr. McGregor"),
        ("The old fisherman mended his nets and sailed out at dawn.", "mended", "sailed",
         "The old fisherman"),
        ("Anna opened the letter, read it twice and burned it.", "opened", "burned", "Anna"),
    ],
)
def test_a_conjoined_verb_takes_the_subject_it_shares(sentence, first, second, subject) -> None:
    said_first, said_second = _said(sentence, first), _said(sentence, second)
    assert said_second.startswith(subject + " ") and second in said_second.split()
    # each statement stops at the other verb, and neither keeps the conjunction between them
    assert second not in said_first.split() and first not in said_second.split()
    assert "and" not in said_first.split() and "and" not in said_second.split()
    assert _in_text_order(said_first, sentence) and _in_text_order(said_second, sentence)


@pytest.mark.parametrize(
    ("sentence", "first", "second", "kept"),
    [
        ("Tom had eaten the apples and gone to bed.", "eaten", "gone", "had"),
        ("She did not eat or drink anything.", "eat", "drink", "not"),
        ("Peter could not run and hide.", "run", "hide", "not"),
    ],
)
def test_a_conjunct_that_needs_an_auxiliary_shares_its_heads(sentence, first, second, kept):
    said, subject = _said(sentence, second).split(), sentence.split()[0]
    assert said[0] == subject and said.index(kept) < said.index(second)
    assert kept in _said(sentence, first).split()


@pytest.mark.parametrize(
    ("sentence", "verb", "noun"),
    [
        ("Some friendly sparrows, who flew to him in great excitement, implored him.", "flew",
         "Some friendly sparrows"),
        ("I saw the dog that barked at the postman.", "barked", "the dog"),
        ("The boy who cried wolf was not believed.", "cried", "The boy"),
    ],
)
def test_a_relative_clause_says_the_noun_it_describes(sentence, verb, noun) -> None:
    said = _said(sentence, verb)
    assert said.startswith(noun + " ") and verb in said.split()
    assert not {"who", "that", "which"} & set(said.split())


@pytest.mark.parametrize(
    ("sentence", "verb", "noun"),
    [
        ("The boat which the fisherman painted sank in the harbour.", "painted", "the boat"),
        ("The shoes that he lost were new.", "lost", "the shoes"),
    ],
)
def test_an_object_relative_puts_the_noun_after_its_verb(sentence, verb, noun) -> None:
    said = _said(sentence, verb)
    assert said.endswith(f"{verb} {noun}") and not {"which", "that"} & set(said.split())


def test_a_main_clause_stops_before_the_relative_clause_on_its_argument() -> None:
    sentence = "His sobs were overheard by some friendly sparrows, who flew to him."
    said = _said(sentence, "overheard")
    assert said == "His sobs were overheard by some friendly sparrows"


@pytest.mark.parametrize(
    ("sentence", "verb", "words"),
    [
        ("The letter was not written by Anna.", "written", ["was", "not", "written", "by"]),
        ("Peter was caught in a net and was rescued by the sparrows.", "rescued",
         ["Peter", "was", "rescued", "by"]),
        ("Peter put on his jacket and ran off.", "ran", ["Peter", "ran", "off"]),
        ("He gave up the fight at last.", "gave", ["gave", "up", "the", "fight", "at", "last"]),
        ("She didn't answer the knock.", "answer", ["She", "did", "n't", "answer"]),
    ],
)
def test_passive_negation_and_particles_are_kept_in_text_order(sentence, verb, words) -> None:
    said = _said(sentence, verb)
    tokens = [t.text for t in load_spacy()(said)]
    positions = [tokens.index(w) for w in words]
    assert positions == sorted(positions)


def test_a_clause_chaining_without_end_gives_no_statement_and_stays_fast() -> None:
    sentence = "He said that " * 200 + "it rained."
    doc = load_spacy()(sentence)
    started = time.perf_counter()
    said = [statement(t) for t in doc if t.pos_ == "VERB"]
    assert time.perf_counter() - started < 2.0
    assert said[0] is None  # the first "said" holds the whole chain
    assert all(s is None or len(s.split()) <= LONGEST_STATEMENT for s in said)
