"""llama_index_e2rag.text: sentence spans, sentence-aligned passages, word counts and cuts."""

from __future__ import annotations

import re

import pytest

from llama_index_e2rag.app.demo import SAMPLE_PATH
from llama_index_e2rag.text import (
    count_words,
    paragraph_spans,
    passage_spans,
    split_sentences,
    word_spans,
)

PETER = SAMPLE_PATH.read_text(encoding="utf-8")


def _texts(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def _check_sane(text: str, spans: list[tuple[int, int]]) -> None:
    """Spans are trimmed, non-empty, in order, non-overlapping and cover every non-space char."""
    previous_end = 0
    for start, end in spans:
        assert 0 <= previous_end <= start < end <= len(text)
        piece = text[start:end]
        assert piece == piece.strip() and piece
        assert text[previous_end:start].strip() == ""
        previous_end = end
    assert text[previous_end:].strip() == ""


# -- split_sentences -----------------------------------------------------------------------------
def test_sentences_end_at_stops_followed_by_space():
    text = "Peter ran. Did he stop? No! He ran on."
    assert _texts(text) == ["Peter ran.", "Did he stop?", "No!", "He ran on."]


def test_titles_and_initials_do_not_end_a_sentence():
    text = "Mr. McGregor met Mrs. Rabbit and Dr. Fox. J. R. Smith came later. They all left."
    assert _texts(text) == [
        "Mr. McGregor met Mrs. Rabbit and Dr. Fox.",
        "J. R. Smith came later.",
        "They all left.",
    ]


def test_closing_quotes_and_brackets_stay_with_their_sentence():
    text = "He shouted \"Stop thief!\" Then he ran. (She was sure.) They left."
    assert _texts(text) == [
        "He shouted \"Stop thief!\"",
        "Then he ran.",
        "(She was sure.)",
        "They left.",
    ]


def test_a_blank_line_always_ends_a_sentence():
    text = "A heading without a stop\n\nThe story begins here. It goes on\n\n\nand on"
    assert _texts(text) == [
        "A heading without a stop",
        "The story begins here.",
        "It goes on",
        "and on",
    ]


def test_a_stop_inside_a_word_or_number_is_not_an_end():
    text = "It cost 3.50 pounds at www.example.com today. Next."
    assert _texts(text) == ["It cost 3.50 pounds at www.example.com today.", "Next."]


@pytest.mark.parametrize("text", ["", "   ", "\n\n \n"])
def test_no_sentences_in_blank_text(text):
    assert split_sentences(text) == []


def test_spans_of_a_real_story_are_sane_and_cover_it():
    spans = split_sentences(PETER)
    _check_sane(PETER, spans)
    assert len(spans) > 50
    # every sentence except paragraph ends closes with a stop (the splitter's one rule)
    ends = [PETER[a:b] for a, b in spans]
    assert any(s.startswith("He lost one of his shoes") for s in ends)


@pytest.mark.parametrize(
    "text",
    [
        "." * 48_000,
        "a. " * 16_000,
        "Mr. " * 12_000 + "end.",
        ("word " * 30 + ". ") * 1_500,
        "?!" * 20_000 + " done.",
    ],
    ids=["dots", "initials", "titles", "short-sentences", "bangs"],
)
def test_hostile_text_completes_with_sane_spans(text):
    spans = split_sentences(text)
    _check_sane(text, spans)


def test_initials_repeated_stay_one_sentence_and_titles_too():
    assert split_sentences("B. " * 16_000) == [(0, 3 * 16_000 - 1)]
    # "a" and "I" are words: their stop ends a sentence
    assert len(split_sentences("So did I. Then a. " * 1_000)) == 2_000
    text = "Mr. " * 100 + "end. Next one."
    assert _texts(text) == ["Mr. " * 100 + "end.", "Next one."]


def test_no_ends_a_sentence_unless_a_number_follows():
    assert _texts("She said no. Then she left.") == ["She said no.", "Then she left."]
    assert _texts("Room No. 7 was his. He slept.") == ["Room No. 7 was his.", "He slept."]


def test_what_follows_a_stop_is_read_across_white_space_but_not_a_blank_line():
    assert _texts("J.   \n  R. Smith came. He sat.") == ["J.   \n  R. Smith came.", "He sat."]
    assert _texts("Room No. \t 7 was his. He slept.") == ["Room No. \t 7 was his.", "He slept."]
    assert _texts("He met J.\n\nSmith left.") == ["He met J.", "Smith left."]
    assert _texts("It was No.\n\n7 came next.") == ["It was No.", "7 came next."]


def test_paragraph_spans_split_on_blank_lines_only():
    text = "one\ntwo\n\nthree\n  \nfour"
    assert [text[a:b] for a, b in paragraph_spans(text)] == ["one\ntwo", "three", "four"]


# -- words ---------------------------------------------------------------------------------------
def test_count_words_and_word_spans_agree():
    text = "  Peter   ran\tto the\ngate.  "
    assert count_words(text) == 5
    spans = word_spans(text, 0, len(text))
    assert [text[a:b] for a, b in spans] == ["Peter", "ran", "to", "the", "gate."]
    assert word_spans(text, 8, 13) == [(10, 13)]


# -- passage_spans -------------------------------------------------------------------------------
def _sentence_ends(text: str) -> set[int]:
    return {b for _, b in split_sentences(text)}


def _sentence_starts(text: str) -> set[int]:
    return {a for a, _ in split_sentences(text)}


@pytest.mark.parametrize("target", [5, 12, 30, 80])
def test_passages_cover_every_word_in_order(target):
    passages = passage_spans(PETER, target)
    words = [PETER[a:b] for p in passages for a, b in word_spans(PETER, *p)]
    assert words == PETER.split()
    for (_, end), (start, _) in zip(passages, passages[1:]):
        assert end <= start  # in order, never overlapping


@pytest.mark.parametrize("target", [5, 12, 30, 80])
def test_passages_never_split_a_sentence_unless_it_exceeds_max_words(target):
    limit = 4 * target
    sentences = split_sentences(PETER)
    starts, ends = _sentence_starts(PETER), _sentence_ends(PETER)
    cut = 0
    for start, end in passage_spans(PETER, target):
        if start in starts and end in ends:
            continue
        # otherwise the passage is a piece of one sentence longer than the limit
        holder = [(a, b) for a, b in sentences if a <= start and end <= b]
        assert len(holder) == 1, PETER[start:end]
        assert count_words(PETER[slice(*holder[0])]) > limit
        assert count_words(PETER[start:end]) <= limit
        cut += 1
    longest = max(count_words(PETER[a:b]) for a, b in sentences)
    assert (cut > 0) == (longest > limit)


@pytest.mark.parametrize("target", [12, 30])
def test_passages_reach_their_target_unless_a_paragraph_or_the_text_ends(target):
    passages = passage_spans(PETER, target)
    for (start, end), (next_start, _) in zip(passages, passages[1:]):
        words = count_words(PETER[start:end])
        closed_by_paragraph = re.search(r"\n\s*\n", PETER[end:next_start]) is not None
        assert words >= target or (closed_by_paragraph and words >= target / 2)


def test_only_a_sentence_longer_than_max_words_is_cut_at_words():
    long_sentence = " ".join(f"w{i}" for i in range(25)) + "."
    text = f"Short one here. {long_sentence} Another short one. And a last."
    passages = passage_spans(text, target_words=3, max_words=10)
    texts = [text[a:b] for a, b in passages]
    # the short sentences are whole; the long one comes in pieces of at most 10 words
    assert texts[0] == "Short one here."
    long_pieces = [t for t in texts if t.startswith("w")]
    assert " ".join(long_pieces) == long_sentence
    assert [count_words(t) for t in long_pieces] == [10, 10, 5]
    assert texts[-2:] == ["Another short one.", "And a last."]
    words = [text[a:b] for p in passages for a, b in word_spans(text, *p)]
    assert words == text.split()


def test_a_sentence_at_the_limit_is_not_cut():
    sentence = " ".join(["w"] * 9) + " end."
    passages = passage_spans(sentence + " Next.", target_words=3, max_words=10)
    assert passages[0] == (0, len(sentence))


def test_a_paragraph_break_closes_a_passage_holding_half_its_target():
    first = "One two three four five six."  # 6 words >= 10 / 2
    text = f"{first}\n\nSeven eight nine. Ten eleven twelve thirteen fourteen."
    passages = passage_spans(text, target_words=10)
    assert text[slice(*passages[0])] == first
    tiny = "One two.\n\nThree four five six seven eight nine ten."  # 2 words < 5
    assert passage_spans(tiny, target_words=10) == [(0, len(tiny))]


def test_passage_target_must_be_positive():
    with pytest.raises(ValueError):
        passage_spans("Some text.", 0)


