"""Filling a word budget with ranked evidence: no sentence twice, cut at a sentence end.

Retrievers rank units of different sizes (chunks that overlap, sentences, passages, facts); a
budget compares them fairly only if text is counted once. Each ranked piece is split into
sentences placed at absolute character offsets of its document; a sentence whose characters are
already mostly covered by text taken earlier (the overlap of two chunks, or the same sentence
reached twice) is dropped; pieces whose offsets are unknown (ChronoRAG's fact lists) are compared
with what was taken from the same document by their sentences' normalised text. The rest is kept
while the budget lasts.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Optional, Sequence

from llama_index_e2rag.schema import normalize_text
from llama_index_e2rag.text import count_words, iter_sentences

#: Share of a sentence's characters already taken above which it counts as a repeat.
REPEAT_SHARE = 0.5


@dataclass(frozen=True)
class Piece:
    """A ranked candidate: the caller's key, its document and where its text starts there."""

    key: Any
    doc_id: str
    start: Optional[int]
    text: str


@dataclass(frozen=True)
class Kept:
    """What a piece contributes: its text without repeats (and cut to the budget)."""

    piece: Piece
    text: str
    start: Optional[int]
    end: Optional[int]
    words: int
    trimmed: bool


class _Coverage:
    """What was taken, per document: character intervals, and sentence texts.

    Placed text is compared by place, so the same words told again elsewhere in the story (a
    refrain) are not a repeat; text without a place (an assembled fact list) can only be
    compared by its words, both ways. The intervals are kept merged and sorted as they are
    taken, so a sentence's overlap is read by bisection, and placed text is normalised only once
    unplaced text asks for it (a placed-only budget never compares words).
    """

    def __init__(self) -> None:
        #: per document: the taken intervals' starts and ends, disjoint and sorted
        self._starts: dict[str, list[int]] = {}
        self._ends: dict[str, list[int]] = {}
        self._placed: set[tuple[str, str]] = set()
        self._placed_pending: list[tuple[str, str]] = []
        self._unplaced: set[tuple[str, str]] = set()

    def repeated(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> bool:
        if start is None or end is None:
            key = (doc_id, normalize_text(text))
            return key in self._placed_keys() or key in self._unplaced
        if self._unplaced and (doc_id, normalize_text(text)) in self._unplaced:
            return True
        return self._covered(doc_id, start, end) > REPEAT_SHARE * max(1, end - start)

    def take(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> None:
        if start is None or end is None:
            self._unplaced.add((doc_id, normalize_text(text)))
            return
        self._placed_pending.append((doc_id, text))
        starts = self._starts.setdefault(doc_id, [])
        ends = self._ends.setdefault(doc_id, [])
        # the intervals [lo, hi) overlap or touch [start, end]: they become one
        lo = bisect.bisect_left(ends, start)
        hi = bisect.bisect_right(starts, end)
        if lo < hi:
            start, end = min(start, starts[lo]), max(end, ends[hi - 1])
        starts[lo:hi] = [start]
        ends[lo:hi] = [end]

    def _covered(self, doc_id: str, start: int, end: int) -> int:
        """How many characters of ``[start, end)`` were taken."""
        starts, ends = self._starts.get(doc_id, []), self._ends.get(doc_id, [])
        covered = 0
        i = bisect.bisect_right(ends, start)
        while i < len(starts) and starts[i] < end:
            covered += min(ends[i], end) - max(starts[i], start)
            i += 1
        return covered

    def _placed_keys(self) -> set[tuple[str, str]]:
        """Normalised texts of the placed sentences taken so far."""
        self._placed.update((doc, normalize_text(text)) for doc, text in self._placed_pending)
        self._placed_pending.clear()
        return self._placed


def budget_depth(budget_words: int, unit_words: int, floor: int = 0) -> int:
    """How many ranked units to consider so a budget can be filled even after repeats."""
    return max(floor, 2 * (budget_words // max(1, unit_words)) + 10)


def fill_budget(
    pieces: Iterable[Piece], budget_words: Optional[int]
) -> list[Kept]:
    """Take ranked pieces until ``budget_words`` is spent; ``None`` means no budget (repeats are
    still removed).

    A piece that would overflow is cut after its last whole sentence that fits; if none fits it
    is skipped and later (shorter) pieces may still fill what is left.
    """
    if budget_words is not None and budget_words < 1:
        raise ValueError(f"budget_words must be at least 1, got {budget_words}")
    coverage = _Coverage()
    left = budget_words
    kept: list[Kept] = []
    for piece in pieces:
        if left is not None and left <= 0:
            break
        taken: list[tuple[Optional[int], Optional[int], str]] = []
        words = seen = 0
        full = False
        for start, end, text in _sentences(piece):  # lazily: most late pieces stop at once
            seen += 1
            if coverage.repeated(piece.doc_id, start, end, text):
                continue
            n = count_words(text)
            if left is not None and words + n > left:
                full = True
                break
            taken.append((start, end, text))
            words += n
        if not taken:
            continue
        for start, end, text in taken:
            coverage.take(piece.doc_id, start, end, text)
        if left is not None:
            left -= words
        kept.append(_kept(piece, taken, words, trimmed=full or len(taken) < seen))
    return kept


def _sentences(piece: Piece) -> Iterator[tuple[Optional[int], Optional[int], str]]:
    text = piece.text
    if piece.start is None:  # assembled text (a list of facts): each line is a unit too
        for a, b in _lines(text):
            for s, e in iter_sentences(text[a:b]):
                yield None, None, text[a + s : a + e]
        return
    for a, b in iter_sentences(text):
        yield piece.start + a, piece.start + b, text[a:b]


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def _kept(
    piece: Piece, taken: Sequence[tuple[Optional[int], Optional[int], str]], words: int,
    trimmed: bool,
) -> Kept:
    """Consecutive kept sentences keep the source's own spacing; gaps are closed by a space."""
    if not trimmed:
        text = piece.text.strip()
    elif piece.start is None:
        text = "\n".join(t for _, _, t in taken)
    else:
        parts = [piece.text[taken[0][0] - piece.start : taken[0][1] - piece.start]]
        for (_, prev_end, _), (start, end, _) in zip(taken, taken[1:]):
            gap = piece.text[prev_end - piece.start : start - piece.start]
            parts.append(gap if gap.strip() == "" else " ")
            parts.append(piece.text[start - piece.start : end - piece.start])
        text = "".join(parts)
    return Kept(piece, text, taken[0][0], taken[-1][1], words, trimmed)
