"""ranking.temporal: the question's time relation and anchor clause; anchor bonus; story edges."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_e2rag.ranking.temporal import (
    MIN_CLAUSE_WORDS,
    TemporalCue,
    anchor_boost,
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


# -- anchor_boost --------------------------------------------------------------------------------
ONE_DOC = [0] * 8


def test_after_rewards_the_following_units_decaying_and_the_anchor_by_self_weight():
    boost = anchor_boost(ONE_DOC, [3], "after", span=3, decay=0.5, self_weight=0.25)
    assert boost.tolist() == [0, 0, 0, 0.25, 1.0, 0.5, 0.25, 0]


def test_before_mirrors_after():
    boost = anchor_boost(ONE_DOC, [4], "before", span=3, decay=0.5, self_weight=0.25)
    expected = np.zeros(8)
    expected[[4, 3, 2, 1]] = [0.25, 1.0, 0.5, 0.25]
    assert np.allclose(boost, expected)


def test_during_rewards_the_anchor_most_and_its_neighbours_on_both_sides():
    boost = anchor_boost(ONE_DOC, [4], "during", span=2, decay=0.5, self_weight=0.1)
    expected = np.zeros(8)
    expected[[2, 3, 4, 5, 6]] = [0.25, 0.5, 1.0, 0.5, 0.25]
    assert np.allclose(boost, expected)


@pytest.mark.parametrize("relation", ["after", "before", "during"])
def test_the_bonus_decays_with_distance(relation):
    boost = anchor_boost([0] * 21, [10], relation, span=6, decay=0.7, self_weight=0.0)
    sign = -1 if relation == "before" else 1
    values = [boost[10 + sign * d] for d in range(1, 7)]
    assert all(a > b > 0 for a, b in zip(values, values[1:]))
    assert boost[10 + sign * 7] == 0  # nothing beyond the span


@pytest.mark.parametrize("relation", ["after", "before", "during"])
def test_the_bonus_never_crosses_a_document_boundary(relation):
    doc_of = [0, 0, 0, 1, 1, 1, 2, 2]
    for anchor in range(len(doc_of)):
        boost = anchor_boost(doc_of, [anchor], relation, span=5, decay=0.9, self_weight=0.5)
        other = [i for i, d in enumerate(doc_of) if d != doc_of[anchor]]
        assert not boost[other].any(), (anchor, boost)


def test_several_anchors_give_the_best_bonus_per_unit_and_bad_anchors_are_ignored():
    single = [anchor_boost(ONE_DOC, [a], "after", 3, 0.5, 0.25) for a in (1, 3)]
    both = anchor_boost(ONE_DOC, [1, 3, -1, 99], "after", 3, 0.5, 0.25)
    assert np.allclose(both, np.maximum(*single))
    assert not anchor_boost(ONE_DOC, [], "after", 3, 0.5, 0.25).any()
    assert anchor_boost([], [0], "after", 3, 0.5, 0.25).shape == (0,)


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


# -- wrong_side ----------------------------------------------------------------------------------
def test_wrong_side_marks_the_story_the_question_does_not_look_at():
    from llama_index_e2rag.ranking.temporal import wrong_side

    docs = [0] * 5 + [1] * 3
    assert list(wrong_side(docs, [2], "after")) == [1, 1, 0, 0, 0, 0, 0, 0]
    assert list(wrong_side(docs, [2], "before")) == [0, 0, 0, 1, 1, 0, 0, 0]
    assert not wrong_side(docs, [2], "during").any()
    assert not wrong_side(docs, [], "after").any()
    # several anchors: wrong only where every anchor says so
    assert list(wrong_side(docs, [1, 3], "after")) == [1, 0, 0, 0, 0, 0, 0, 0]
    assert list(wrong_side(docs, [1, 6], "after")) == [0] * 8


@pytest.mark.parametrize(
    "question, expected",
    [
        ("Who once lived in the castle?", None),  # "once" as an adverb
        ("Once the king had died, who ruled?", ("after", "the king had died")),
        ("What happened then to the prince?", None),  # "then" after the question itself
        ("Peter ate lettuces, then what did he eat?", ("after", "Peter ate lettuces")),
        ("Did he stay until the end?", ("last", "")),
    ],
)
def test_once_then_and_until_the_end(question, expected):
    cue = temporal_cue(question)
    assert (None if cue is None else (cue.relation, cue.clause)) == expected
