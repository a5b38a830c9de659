"""Sentences, passages and word counts of source text, framework-free and linear in its length.

Every retriever cuts and counts text the same way (passages of the ``narrative`` mode, the word
budget of every mode, extractive answers), so it lives here once. The splitter is a small rule
splitter, not a model: a stop followed by white space ends a sentence unless it closes an
abbreviation such as "Mr." or a single initial; blank lines always do.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Sequence, TypeVar

from llama_index_e2rag.schema import normalize_text

#: Titles written with a stop before a name ("Mr. McGregor"): never the end of a sentence.
TITLE_ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof capt col gen lt sgt rev hon mme mlle messrs esq".split()
)
_ABBREVIATIONS = TITLE_ABBREVIATIONS | frozenset("vs etc viz vol ch chap fig pp cf".split())
#: Abbreviations that end no sentence only before a number ("No. 7", "p. 12").
_NUMBERED = frozenset({"no", "p"})
#: One-letter words that are words, not initials.
_ONE_LETTER_WORDS = frozenset({"i", "a"})
#: A run of stops (matched from its first stop only, so a long run costs one scan, not one per
#: position), closing quotes or brackets, then white space or the end.
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]+['\"’”)\]]*(?=\s|$)")
_PARAGRAPH = re.compile(r"\n\s*\n")
_WORD_BEFORE = re.compile(r"(\w+)[.!?]*$")
_WORD = re.compile(r"\S+")
_NEXT_VISIBLE = re.compile(r"\s*(\S)")
#: How far back from a stop the abbreviation check looks (a word is never longer).
_LOOKBACK = 40

Span = tuple[int, int]
T = TypeVar("T")


def split_sentences(text: str) -> list[Span]:
    """``(start, end)`` character spans of the sentences of ``text``, white space trimmed."""
    return list(iter_sentences(text))


def iter_sentences(text: str) -> Iterator[Span]:
    """``split_sentences`` one sentence at a time: a caller that stops early (a budget that is
    full) does not pay for the rest of the text."""
    for para_start, para_end in paragraph_spans(text):
        start = para_start
        for match in _SENTENCE_END.finditer(text, para_start, para_end):
            end = match.end()
            # a bounded look-back keeps this linear on text with many stops and no spaces
            window = max(start, match.start() - _LOOKBACK)
            word = _WORD_BEFORE.search(text, window, match.start() + 1)
            token = word.group(1).lower() if word else ""
            if match.group() == "." and _abbreviation(token, text, end, para_end):
                continue
            yield from _trimmed(text, start, end)
            start = end
        yield from _trimmed(text, start, para_end)


def _abbreviation(token: str, text: str, end: int, limit: int) -> bool:
    """Whether the stop after ``token`` closes an abbreviation or an initial, not a sentence."""
    if token in _ABBREVIATIONS:
        return True
    if token not in _NUMBERED and (len(token) != 1 or token in _ONE_LETTER_WORDS):
        return False
    # the next visible character, read in place: slicing the rest of the paragraph here made
    # a paragraph of many short sentences quadratic (1 MB of "A. x ": 3.3 s, of "B. ": 20 s)
    after = _NEXT_VISIBLE.match(text, end, limit)
    following = after.group(1) if after else ""
    if token in _NUMBERED:
        return following.isdigit()
    # "J. R. R. Tolkien": a lone letter before a capitalised word is an initial
    return following.isupper()


def paragraph_spans(text: str) -> list[Span]:
    """Spans of the blank-line separated paragraphs (untrimmed, possibly empty)."""
    spans, start = [], 0
    for match in _PARAGRAPH.finditer(text):
        spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def _trimmed(text: str, start: int, end: int) -> Iterator[Span]:
    """The span without its surrounding white space; nothing when it is all white space."""
    piece = text[start:end]
    if not piece.strip():
        return
    lead = len(piece) - len(piece.lstrip())
    trail = len(piece) - len(piece.rstrip())
    yield (start + lead, end - trail)


def count_words(text: str) -> int:
    """Whitespace-separated words, the unit of every budget."""
    return len(text.split())


def word_runs(items: Sequence[T], sizes: Iterable[int], budget: int) -> Iterator[list[T]]:
    """``items`` in order, in runs of at most ``budget`` words, ``sizes`` giving each item's:
    a run closes when its next item would pass the budget, so an item longer than the budget
    is a run of its own. Extraction groups and ``e2rag index``'s commit groups cut this way."""
    run: list[T] = []
    used = 0
    for item, size in zip(items, sizes, strict=True):
        if run and used + size > budget:
            yield run
            run, used = [], 0
        run.append(item)
        used += size
    if run:
        yield run


def word_spans(text: str, start: int, end: int) -> list[Span]:
    """Spans of the whitespace-separated words of ``text[start:end]``."""
    return [m.span() for m in _WORD.finditer(text, start, end)]


def passage_spans(text: str, target_words: int, max_words: int | None = None) -> list[Span]:
    """Sentence-aligned passages of about ``target_words`` words, in text order.

    Consecutive sentences are joined until a passage holds ``target_words``; a paragraph break
    closes a passage once it has half of that, so passages rarely straddle a scene change.
    A single sentence longer than ``max_words`` (default ``4 * target_words``) is cut at word
    boundaries: the only place a passage does not end on a sentence end.
    """
    if target_words < 1:
        raise ValueError(f"target_words must be at least 1, got {target_words}")
    limit = max_words or 4 * target_words
    passages: list[Span] = []
    current: list[Span] = []
    words = 0

    def close() -> None:
        nonlocal current, words
        if current:
            passages.append((current[0][0], current[-1][1]))
        current, words = [], 0

    for start, end in split_sentences(text):
        if current and words >= target_words / 2 and _PARAGRAPH.search(text, current[-1][1], start):
            close()
        n = count_words(text[start:end])
        if n > limit:
            close()
            pieces = word_spans(text, start, end)
            for i in range(0, len(pieces), limit):
                part = pieces[i : i + limit]
                passages.append((part[0][0], part[-1][1]))
            continue
        current.append((start, end))
        words += n
        if words >= target_words:
            close()
    close()
    return passages


_STOP_WORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as is are was were be been
    being it its he she they them his her their him we us our you your i me my this that these
    those there here which who whom whose what when where while not no yes do does did have has
    had will would can could shall should may might must also than too very just into onto over
    under after before since because about up down out off again once""".split()
)


def content_words(text: str) -> set[str]:
    """Normalised words that carry content (no stop words, no one- or two-letter words)."""
    return {w for w in normalize_text(text).split() if len(w) > 2 and w not in _STOP_WORDS}
