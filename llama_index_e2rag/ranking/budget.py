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

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Sequence

from llama_index_e2rag.schema import normalize_text
from llama_index_e2rag.text import count_words, split_sentences

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
    compared by its words, both ways.
    """

    def __init__(self) -> None:
        self._spans: dict[str, list[tuple[int, int]]] = {}
        self._placed: set[tuple[str, str]] = set()
        self._unplaced: set[tuple[str, str]] = set()

    def repeated(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> bool:
        key = (doc_id, normalize_text(text))
        if start is None or end is None:
            return key in self._placed or key in self._unplaced
        if key in self._unplaced:
            return True
        covered = 0
        for a, b in _merged(self._spans.get(doc_id, [])):
            covered += max(0, min(b, end) - max(a, start))
        return covered > REPEAT_SHARE * max(1, end - start)

    def take(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> None:
        key = (doc_id, normalize_text(text))
        if start is None or end is None:
            self._unplaced.add(key)
        else:
            self._placed.add(key)
            self._spans.setdefault(doc_id, []).append((start, end))


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping intervals joined, so shared characters are counted once."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


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
        sentences = _sentences(piece)
        fresh = [s for s in sentences if not coverage.repeated(piece.doc_id, *s)]
        taken: list[tuple[Optional[int], Optional[int], str]] = []
        words = 0
        for start, end, text in fresh:
            n = count_words(text)
            if left is not None and words + n > left:
                break
            taken.append((start, end, text))
            words += n
        if not taken:
            continue
        for start, end, text in taken:
            coverage.take(piece.doc_id, start, end, text)
        if left is not None:
            left -= words
        kept.append(_kept(piece, taken, words, trimmed=len(taken) < len(sentences)))
    return kept


def _sentences(piece: Piece) -> list[tuple[Optional[int], Optional[int], str]]:
    text = piece.text
    if piece.start is None:  # assembled text (a list of facts): each line is a unit too
        spans = [(a + s, a + e) for a, b in _lines(text) for s, e in split_sentences(text[a:b])]
    else:
        spans = split_sentences(text)
    if piece.start is None:
        return [(None, None, text[a:b]) for a, b in spans]
    return [(piece.start + a, piece.start + b, text[a:b]) for a, b in spans]


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
