"""Filling a word budget with ranked evidence: no sentence twice, cut at a sentence end.

Retrievers rank units of different sizes (chunks that overlap, sentences, passages, facts); a
budget compares them fairly only if text is counted once. Each ranked piece is split into
sentences placed at absolute character offsets of its document; a sentence whose characters are
already mostly covered by text taken earlier (the overlap of two chunks, or the same sentence
reached twice), or whose normalised text was already taken from the same document (pieces whose
offsets are unknown, such as ChronoRAG's fact lists, can only be compared that way), is dropped;
the rest is kept while the budget lasts.
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
    """Character intervals already taken, per document (few and small: a sorted list will do)."""

    def __init__(self) -> None:
        self._spans: dict[str, list[tuple[int, int]]] = {}
        self._texts: set[tuple[str, str]] = set()

    def repeated(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> bool:
        if (doc_id, normalize_text(text)) in self._texts:
            return True
        if start is None or end is None:
            return False
        covered = 0
        for a, b in self._spans.get(doc_id, ()):
            covered += max(0, min(b, end) - max(a, start))
        return covered > REPEAT_SHARE * max(1, end - start)

    def take(self, doc_id: str, start: Optional[int], end: Optional[int], text: str) -> None:
        self._texts.add((doc_id, normalize_text(text)))
        if start is not None and end is not None:
            self._spans.setdefault(doc_id, []).append((start, end))


def fill_budget(
    pieces: Iterable[Piece], budget_words: Optional[int], *, keep_whole: bool = False
) -> list[Kept]:
    """Take ranked pieces until ``budget_words`` is spent; ``None`` means no budget (repeats are
    still removed).

    A piece that would overflow is cut after its last whole sentence that fits; if none fits it
    is skipped and later (shorter) pieces may still fill what is left. ``keep_whole`` keeps a
    piece's text unsplit when nothing of it repeats (sentence units that must stay verbatim).
    """
    if budget_words is not None and budget_words < 1:
        raise ValueError(f"budget_words must be at least 1, got {budget_words}")
    coverage = _Coverage()
    left = budget_words
    kept: list[Kept] = []
    for piece in pieces:
        if left is not None and left <= 0:
            break
        sentences = _sentences(piece, keep_whole)
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


def _sentences(piece: Piece, keep_whole: bool) -> list[tuple[Optional[int], Optional[int], str]]:
    text = piece.text
    if keep_whole:
        spans = [(0, len(text.rstrip()))] if text.strip() else []
    elif piece.start is None:  # assembled text (a list of facts): each line is a unit too
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
