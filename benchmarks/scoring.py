"""Retrieval scoring exactly as ``shared/data/README.md`` defines it.

Budget: ranked passages are taken in order until the word budget is spent; the passage that
overflows is cut to fit (words = whitespace-separated tokens). ATR, EC, SEC and the time-question
subset follow the README word for word; multi-hop recall reuses SEC's quoting rule per gold unit.
"""

from __future__ import annotations

import re
from typing import Iterable, Sequence

_WORD = re.compile(r"[a-z0-9]+")

#: "Common stop words": NLTK's English list (179 words), fixed here so scores never depend on an
#: installed corpus.
STOP_WORDS = frozenset("""
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their
theirs themselves what which who whom this that that'll these those am is are was were be been
being have has had having do does did doing a an the and but if or because as until while of at
by for with about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all any both each
few more most other some such no nor not only own same so than too very s t can will just don
don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn
doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn
needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
""".split())

TIME_WORDS = frozenset({"when", "while", "during", "after", "before"})

#: Length of the word run a context must share with a gold unit to "quote" it.
QUOTE_RUN = 8


def words(text: str) -> list[str]:
    """Normalised words: lower-case runs of ``[a-z0-9]``."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Normalised words without stop words (ATR's unit)."""
    return [w for w in words(text) if w not in STOP_WORDS]


def apply_budget(passages: Iterable[str], budget: int) -> str:
    """Concatenate ranked passages until ``budget`` words; the overflowing passage is cut."""
    taken: list[str] = []
    left = budget
    for passage in passages:
        if left <= 0:
            break
        tokens = passage.split()
        if not tokens:
            continue
        taken.append(" ".join(tokens[:left]))
        left -= min(left, len(tokens))
    return "\n".join(taken)


def answer_token_recall(context: str, references: Sequence[str]) -> float | None:
    """Max over references of the share of a reference's content words present in the context.

    A reference made only of stop words is scored on all its words; ``None`` when no reference
    has any word at all (the question is then left out of the mean).
    """
    vocabulary = set(words(context))
    best: float | None = None
    for reference in references:
        target = set(content_words(reference)) or set(words(reference))
        if not target:
            continue
        share = len(target & vocabulary) / len(target)
        best = share if best is None else max(best, share)
    return best


def exact_containment(context: str, references: Sequence[str]) -> float | None:
    """1.0 when a normalised reference occurs verbatim (on word boundaries) in the context."""
    haystack = f" {' '.join(words(context))} "
    normalised = [" ".join(words(r)) for r in references]
    normalised = [n for n in normalised if n]
    if not normalised:
        return None
    return float(any(f" {needle} " in haystack for needle in normalised))


def _runs(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


class QuoteIndex:
    """The context's runs of normalised words, built once to test many gold units."""

    def __init__(self, context: str) -> None:
        self._tokens = words(context)
        self._runs: dict[int, set[tuple[str, ...]]] = {}

    def quotes(self, unit: str) -> bool:
        """True when the context shares a run of 8 consecutive words with ``unit``.

        A unit shorter than 8 words must appear whole.
        """
        unit_tokens = words(unit)
        if not unit_tokens:
            return False
        n = min(QUOTE_RUN, len(unit_tokens))
        if n not in self._runs:
            self._runs[n] = _runs(self._tokens, n)
        return not self._runs[n].isdisjoint(_runs(unit_tokens, n))


def unit_recall(context: str, gold_units: Sequence[str]) -> float | None:
    """Share of gold units (sections, sentences, paragraphs) the context quotes (SEC rule)."""
    if not gold_units:
        return None
    index = QuoteIndex(context)
    return sum(index.quotes(unit) for unit in gold_units) / len(gold_units)


def is_time_question(question: str) -> bool:
    """The ChronoRAG paper's time subset: the question contains when/while/during/after/before."""
    return not TIME_WORDS.isdisjoint(words(question))


def mean(values: Iterable[float | None]) -> float | None:
    """Mean over defined values; ``None`` when there are none."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
