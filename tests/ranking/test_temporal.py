"""ranking.temporal: the question's time relation and anchor clause; story edges (the anchor's
region: tests/ranking/test_anchor.py)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_e2rag.ranking.temporal import (
    MIN_CLAUSE_WORDS,
    TemporalCue,
    edge_prior,
    temporal_cue,
)


# -- temporal_cue --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("question", "relation", "clause"),
    [
        ("What did Peter do after he lost his shoes?", "after", "he lost his shoes"),
        ("What did Peter do right after he lost his shoes?", "after", "he lost his shoes"),
        ("What did the boys do as soon as they saw the troll?", "after", "they saw the troll"),
        ("What did Peter do once he was free?", "after", "he was free"),
        ("What happened before Peter ran home?", "before", "Peter ran home"),
        ("What did Peter eat before he felt sick?", "before", "he felt sick"),
        ("What did Hermione do until the exams began?", "before", "the exams began"),
        ("What did Peter do during the long chase?", "during", "the long chase"),
        ("What did the cat do while the rabbit hid?", "during", "the rabbit hid"),
        ("What did Peter do as he ran home?", "during", "he ran home"),
    ],
)
def test_a_connective_gives_the_relation_and_the_clause_it_introduces(question, relation, clause):
    cue = temporal_cue(question)
    assert cue is not None
    assert (cue.relation, cue.clause) == (relation, clause)
    assert cue.word in question.lower()


@pytest.mark.parametrize(
    ("question", "relation", "clause"),
    [
        ("After the troll incident, what did Hermione do?", "after", "the troll incident"),
        ("Before the feast, where was Hermione?", "before", "the feast"),
        ("During the storm; who stayed inside?", "during", "the storm"),
    ],
)
def test_the_clause_stops_at_the_next_comma_or_stop(question, relation, clause):
    assert temporal_cue(question) == TemporalCue(relation, clause, question.split()[0].lower())


def test_a_question_opening_with_when_is_about_the_time_of_its_event():
    cue = temporal_cue("When did Peter lose his shoes?")
    assert cue == TemporalCue("during", "did Peter lose his shoes", "when")


def test_the_first_connective_with_a_real_clause_wins():
    # "after that" is too short to be an anchor, so the next connective is used
    assert len("that".split()) < MIN_CLAUSE_WORDS
    cue = temporal_cue("What did he do after that, before the gate closed?")
    assert cue == TemporalCue("before", "the gate closed", "before")
    assert temporal_cue("What did he do after that?") is None


@pytest.mark.parametrize(
    ("question", "clause"),
    [
        ("Peter lost his shoes, and then what did he do?", "Peter lost his shoes"),
        ("The gate shut and then what happened?", "The gate shut"),
    ],
)
def test_then_anchors_on_what_comes_before_it(question, clause):
    cue = temporal_cue(question)
    assert cue is not None and cue.relation == "after" and cue.clause == clause
    assert cue.word in {"then", "and then"}


@pytest.mark.parametrize(
    ("question", "relation", "word"),
    [
        ("What did Peter do first?", "first", "first"),
        ("At first, who lived in the sand bank?", "first", "first"),
        ("What happened in the beginning?", "first", "first"),
        ("What happened last?", "last", "last"),
        ("What did Peter finally do?", "last", "finally"),
        ("What happened at the end of the story?", "last", "at the end"),
        ("Where did Peter eventually sleep?", "last", "eventually"),
    ],
)
def test_first_and_last_carry_no_clause(question, relation, word):
    assert temporal_cue(question) == TemporalCue(relation, "", word)


def test_a_clause_beats_first_and_last():
    cue = temporal_cue("Who first saw Peter after he lost his shoes?")
    assert cue == TemporalCue("after", "he lost his shoes", "after")


@pytest.mark.parametrize(
    "question",
    [
        "Why did Peter go into the garden?",
        "What did Peter eat?",
        "Who is as big as a house?",
        "Name animals such as the rabbit and the cat.",
        "Who ate the afternoon tea in the lasting firstborn sunlight?",
        "",
    ],
)
def test_no_cue_without_a_time_word(question):
    assert temporal_cue(question) is None


def test_as_is_temporal_only_before_a_clause():
    assert temporal_cue("What did Peter see as he ran home?").relation == "during"
    assert temporal_cue("Was the cat as big as a dog?") is None
    assert temporal_cue("Which animals, such as the cat, chased him?") is None


@pytest.mark.parametrize(
    ("question", "relation", "clause"),
    [
        ("What did Peter do after Mr. McGregor saw him?", "after", "Mr. McGregor saw him"),
        ("What did Peter do while Mr. McGregor slept?", "during", "Mr. McGregor slept"),
    ],
)
def test_a_title_inside_the_clause_does_not_end_it(question, relation, clause):
    cue = temporal_cue(question)
    assert cue is not None and (cue.relation, cue.clause) == (relation, clause)


def test_the_second_as_of_a_comparison_is_not_temporal():
    assert temporal_cue("Was Peter as naughty as his sisters?") is None


# -- edge_prior ----------------------------------------------------------------------------------
def test_first_and_last_ramp_over_each_document():
    doc_of = np.array([0, 0, 0, 1, 1, 2])
    first = edge_prior(doc_of, "first")
    last = edge_prior(doc_of, "last")
    assert np.allclose(first, [1.0, 0.5, 0.0, 1.0, 0.0, 1.0])
    assert np.allclose(last, [0.0, 0.5, 1.0, 0.0, 1.0, 1.0])
    for doc in (0, 1):
        rows = doc_of == doc
        assert np.all(np.diff(first[rows]) < 0) and np.all(np.diff(last[rows]) > 0)
