"""ranking.budget.fill_budget: no sentence twice, never over the budget, cut at sentence ends."""

from __future__ import annotations

import pytest

from llama_index_e2rag.ranking.budget import Kept, Piece, fill_budget
from llama_index_e2rag.text import count_words, split_sentences

#: A document of sentences with 2..6 words; chunks of it overlap like a splitter's.
SENTENCES = [
    "Peter ran.",
    "He lost his shoes.",
    "Mr. McGregor came after him quickly.",
    "The sparrows flew to him.",
    "He hid in the tool shed.",
    "A cat sat by the pond very still.",
    "Peter got home at last.",
    "His mother gave him tea.",
]
DOC = " ".join(SENTENCES)
STARTS = [DOC.index(s) for s in SENTENCES]


def _chunk(first: int, last: int, key: str = "", doc_id: str = "doc") -> Piece:
    """Sentences ``first..last`` (inclusive) as a piece with its document offset."""
    start = STARTS[first]
    end = STARTS[last] + len(SENTENCES[last])
    return Piece(key or f"{first}-{last}", doc_id, start, DOC[start:end])


def _sentences_of(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def _check_kept(kept: list[Kept], budget: int | None) -> None:
    """The invariants every result holds, whatever the input."""
    if budget is not None:
        assert sum(k.words for k in kept) <= budget
    for k in kept:
        assert k.words == count_words(k.text) > 0
        piece_sentences = _sentences_of(k.piece.text)
        assert set(_sentences_of(k.text)) <= set(piece_sentences)  # whole sentences only
        if not k.trimmed:
            assert k.text == k.piece.text.strip()
        if k.start is not None:
            assert k.piece.start <= k.start < k.end <= k.piece.start + len(k.piece.text)


def test_no_budget_keeps_everything_once():
    pieces = [_chunk(0, 2), _chunk(3, 5), _chunk(6, 7)]
    kept = fill_budget(pieces, None)
    assert [k.piece.key for k in kept] == ["0-2", "3-5", "6-7"]
    assert not any(k.trimmed for k in kept)
    assert " ".join(k.text for k in kept) == DOC
    _check_kept(kept, None)


def test_overlapping_chunks_give_their_shared_sentences_once():
    # two chunks that share sentences 2 and 3, as an overlapping splitter makes them
    first, second = _chunk(0, 3), _chunk(2, 5)
    kept = fill_budget([first, second], None)
    assert [k.text for k in kept] == [first.text, " ".join(SENTENCES[4:6])]
    assert kept[1].trimmed
    assert (kept[1].start, kept[1].end) == (STARTS[4], STARTS[5] + len(SENTENCES[5]))
    assert DOC[kept[1].start : kept[1].end] == kept[1].text
    # a chunk entirely inside what was taken contributes nothing
    assert [k.piece.key for k in fill_budget([_chunk(0, 5), _chunk(1, 3)], None)] == ["0-5"]
    _check_kept(kept, None)


def test_a_sentence_reached_through_a_chunk_starting_mid_sentence_is_a_repeat():
    whole = _chunk(0, 3)
    # a chunk starting in the middle of sentence 2: its first "sentence" is a fragment of it
    mid = STARTS[2] + len("Mr. McGregor ")
    tail = Piece("tail", "doc", mid, DOC[mid : STARTS[4] + len(SENTENCES[4])])
    kept = fill_budget([whole, tail], None)
    assert [k.text for k in kept] == [whole.text, SENTENCES[4]]


def test_a_sentence_only_partly_covered_is_kept():
    # the earlier piece took only the first few characters of sentence 2 (under half of it)
    head = Piece("head", "doc", STARTS[2], DOC[STARTS[2] : STARTS[2] + 8])
    kept = fill_budget([head, _chunk(2, 2)], None)
    assert [k.piece.key for k in kept] == ["head", "2-2"]


def test_a_repeat_in_the_middle_is_dropped_and_the_gap_closed_by_a_space():
    kept = fill_budget([_chunk(3, 3), _chunk(2, 4)], None)
    assert kept[1].text == f"{SENTENCES[2]} {SENTENCES[4]}"
    assert kept[1].trimmed
    assert (kept[1].start, kept[1].end) == (STARTS[2], STARTS[4] + len(SENTENCES[4]))


def test_the_same_offsets_in_another_document_are_not_repeats():
    kept = fill_budget([_chunk(0, 1, doc_id="a"), _chunk(0, 1, doc_id="b")], None)
    assert [k.piece.doc_id for k in kept] == ["a", "b"]


def test_without_offsets_sentences_are_deduplicated_by_normalised_text():
    first = Piece("a", "doc", None, "Peter ran. He lost his shoes.")
    # same sentence, other case, spacing and punctuation
    second = Piece("b", "doc", None, "he  LOST his shoes!  The sparrows flew to him.")
    kept = fill_budget([first, second], None)
    assert [k.text for k in kept] == [first.text, "The sparrows flew to him."]
    assert kept[1].start is None and kept[1].end is None and kept[1].trimmed
    # a piece made only of repeats is dropped
    assert len(fill_budget([first, Piece("c", "doc", None, "Peter ran.")], None)) == 1


def test_a_sentence_taken_with_offsets_is_a_repeat_for_a_piece_without():
    kept = fill_budget([_chunk(0, 1), Piece("x", "doc", None, f"{SENTENCES[1]} Extra one.")], None)
    assert [k.text for k in kept] == [_chunk(0, 1).text, "Extra one."]


def test_a_sentence_taken_without_offsets_is_a_repeat_for_a_piece_with_offsets():
    kept = fill_budget([Piece("x", "doc", None, f"{SENTENCES[1]} Extra one."), _chunk(0, 1)], None)
    assert [k.text for k in kept] == [f"{SENTENCES[1]} Extra one.", SENTENCES[0]]


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 7, 10, 13, 20, 26, 40, 60])
def test_never_over_budget_and_filled_to_within_one_sentence(budget):
    # overlapping chunks in a shuffled rank order
    pieces = [_chunk(2, 4), _chunk(0, 2), _chunk(5, 7), _chunk(3, 6), _chunk(1, 1), _chunk(7, 7)]
    kept = fill_budget(pieces, budget)
    _check_kept(kept, budget)
    used = sum(k.words for k in kept)
    total = count_words(DOC)
    longest = max(count_words(s) for s in SENTENCES)
    assert used >= min(total, budget) - longest
    # no sentence twice, each kept text verbatim in the document
    spans = sorted((k.start, k.end) for k in kept)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))
    for k in kept:
        source = DOC[k.start : k.end]
        assert source.startswith(_sentences_of(k.text)[0])
        assert source.endswith(_sentences_of(k.text)[-1])
        assert all(s in source for s in _sentences_of(k.text))


def test_an_overflowing_piece_is_cut_after_its_last_whole_sentence_that_fits():
    piece = _chunk(0, 3)  # 2 + 4 + 6 + 5 words
    kept = fill_budget([piece], 8)
    assert [k.text for k in kept] == [" ".join(SENTENCES[:2])]
    assert kept[0].trimmed and kept[0].words == 6
    assert kept[0].end == STARTS[1] + len(SENTENCES[1])


def test_a_piece_too_long_for_what_is_left_is_skipped_and_later_pieces_fill_the_budget():
    long_piece = Piece("long", "doc", None, "One two three four five six seven eight nine ten.")
    kept = fill_budget(
        [_chunk(0, 0), long_piece, _chunk(3, 3), _chunk(1, 1), _chunk(7, 7)], budget_words=11
    )
    assert [k.piece.key for k in kept] == ["0-0", "3-3", "1-1"]
    assert sum(k.words for k in kept) == 2 + 5 + 4 == 11
    # the first piece that fits nothing does not stop the filling
    assert [k.piece.key for k in fill_budget([long_piece, _chunk(0, 0)], 3)] == ["0-0"]


def test_filling_stops_once_the_budget_is_spent():
    kept = fill_budget([_chunk(0, 1), _chunk(2, 2), _chunk(3, 3)], budget_words=6)
    assert [k.piece.key for k in kept] == ["0-1"]


def test_blank_pieces_contribute_nothing():
    assert fill_budget([Piece("blank", "doc", 0, "   "), _chunk(0, 0)], 5)[0].piece.key == "0-0"


@pytest.mark.parametrize("budget", [0, -3])
def test_budget_must_be_positive(budget):
    with pytest.raises(ValueError):
        fill_budget([_chunk(0, 0)], budget)


def test_the_same_words_told_again_elsewhere_are_not_a_repeat():
    story = "Mirror, mirror on the wall. The queen asked. Mirror, mirror on the wall."
    first = Piece("a", "doc", 0, story[:44])
    again = Piece("b", "doc", 45, story[45:])
    kept = fill_budget([first, again], None)
    assert [k.text for k in kept] == [first.text, again.text]
