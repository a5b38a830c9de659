"""The novel protocol's fixed book groups: length thirds and cross-validation folds.

Every figure on LiteraryQA that is fitted, chosen or broken down uses the same groups, so all
branches and reports agree. The books (the 44 validation books) are sorted by word count
(whitespace words of the text after the Project Gutenberg header and footer are stripped; ties by
``doc_id``). Length thirds are consecutive runs of that order, as equal as possible with the
shorter thirds taking the remainder (44 books: 15 short, 15 medium, 14 long). The book of rank
``r`` (0-based) is in fold A when ``r`` is even, fold B when odd, so each fold holds half of every
third. Groups are always computed over the whole book set, never over the subset a run covers: a
run of the 20 shortest books reports its books in the thirds they belong to among all 44.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from benchmarks.scoring import is_time_question

if TYPE_CHECKING:
    from benchmarks.loaders import Narrative

THIRDS = ("short", "medium", "long")
FOLDS = ("A", "B")
HYBRID = "hybrid"


@dataclass(frozen=True)
class BookPlace:
    """Where one book sits in the protocol."""

    doc_id: str
    words: int
    rank: int
    third: str
    fold: str


def place_books(books: Iterable[tuple[str, int]]) -> dict[str, BookPlace]:
    """Rank, third and fold of every ``(doc_id, words)`` book of the whole set."""
    ordered = sorted(books, key=lambda book: (book[1], book[0]))
    if len({doc_id for doc_id, _ in ordered}) != len(ordered):
        raise ValueError("book ids must be unique")
    n = len(ordered)
    sizes = [n // 3 + (i < n % 3) for i in range(3)]
    bounds = [sum(sizes[: i + 1]) for i in range(3)]
    places = {}
    for rank, (doc_id, words) in enumerate(ordered):
        third = THIRDS[next(i for i, bound in enumerate(bounds) if rank < bound)]
        places[doc_id] = BookPlace(doc_id, words, rank, third, FOLDS[rank % 2])
    return places


def third_ranges(places: Mapping[str, BookPlace],
                 covered: Iterable[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per third: its word range and book count over the whole set, and how many of its books
    ``covered`` (a run's books) includes."""
    chosen = set(places) if covered is None else set(covered)
    out = {}
    for third in THIRDS:
        members = [p for p in places.values() if p.third == third]
        if not members:
            continue
        out[third] = {"min_words": min(p.words for p in members),
                      "max_words": max(p.words for p in members),
                      "books": len(members),
                      "books_run": sum(p.doc_id in chosen for p in members)}
    return out


@dataclass(frozen=True)
class Row:
    """One system's answer-token recall on one question."""

    qid: str
    doc_id: str
    system: str
    atr: float | None
    time: bool


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def pooled(rows: Sequence[Row], base: Sequence[Row]) -> dict[str, Any]:
    """ATR of ``rows`` and its ratio to ``base`` (the hybrid's rows on the same questions), over
    all questions and over the time questions, pooled per question as the benchmark report does
    (mean over questions, then the ratio of the means)."""
    out: dict[str, Any] = {}
    for suffix, keep in (("", lambda r: True), ("_time", lambda r: r.time)):
        mine = [r.atr for r in rows if keep(r)]
        theirs = [r.atr for r in base if keep(r)]
        value, reference = _mean(mine), _mean(theirs)
        out[f"n{suffix}"] = len(mine)
        out[f"atr{suffix}"] = value
        out[f"atr{suffix}_vs_hybrid"] = (value / reference
                                         if value is not None and reference else None)
    return out


def by_third(rows: Sequence[Row], places: Mapping[str, BookPlace],
             hybrid: str = HYBRID) -> dict[str, dict[str, Any]]:
    """Per system and per third (and ``"all"``): ``pooled`` figures against the hybrid rows of
    the same questions. Rows of books outside ``places`` are an error, not dropped."""
    unknown = {r.doc_id for r in rows} - set(places)
    if unknown:
        raise ValueError(f"books not in the protocol's book set: {sorted(unknown)}")
    systems = list(dict.fromkeys(r.system for r in rows))
    base = [r for r in rows if r.system == hybrid]
    out: dict[str, dict[str, Any]] = {}
    for system in systems:
        mine = [r for r in rows if r.system == system]
        entry = {"all": pooled(mine, base)}
        for third in THIRDS:
            inside = [r for r in mine if places[r.doc_id].third == third]
            if inside:
                entry[third] = pooled(inside, [r for r in base
                                               if places[r.doc_id].third == third])
        out[system] = entry
    return out


def length_thirds(per_question: Sequence[Mapping[str, Any]],
                  books: Sequence["Narrative"]) -> dict[str, Any]:
    """A LiteraryQA result's breakdown by length third, from its per-question rows
    (``{"qid", "system", "atr"}``); ``books`` is the whole validation set (the thirds' frame)."""
    places = place_books((b.doc_id, b.words) for b in books)
    asked = {q.qid: (b.doc_id, is_time_question(q.question)) for b in books for q in b.questions}
    rows = [Row(r["qid"], asked[r["qid"]][0], r["system"], r["atr"], asked[r["qid"]][1])
            for r in per_question]
    return {"ranges": third_ranges(places, {r.doc_id for r in rows}),
            "systems": by_third(rows, places)}


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def third_table(breakdown: Mapping[str, Mapping[str, Any]],
                ranges: Mapping[str, Mapping[str, Any]],
                systems: Sequence[str] | None = None) -> list[str]:
    """Markdown: per system, ATR ÷ hybrid / time-question ATR ÷ hybrid over all the run's
    questions and per length third (the hybrid's row gives its own ATR / time ATR)."""
    names = [s for s in (systems or breakdown) if s in breakdown]
    if HYBRID not in breakdown:
        return []
    base = breakdown[HYBRID]
    columns = ["all", *[t for t in THIRDS if t in ranges]]
    head = ["system"]
    for column in columns:
        figures = base.get(column)
        counts = (f"{figures['n']} q. ({figures['n_time']} time)" if figures
                  else "no book in this run")
        if column == "all":
            head.append(f"all: {counts}")
        else:
            r = ranges[column]
            head.append(f"{column}: {r['min_words']:,}–{r['max_words']:,} words, "
                        f"{r['books_run']} of {r['books']} books, {counts}")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        cells = [f"{name} (ATR / time ATR)" if name == HYBRID else name]
        for column in columns:
            figures = breakdown[name].get(column)
            if not figures:
                cells.append("–")
            elif name == HYBRID:
                cells.append(" / ".join("–" if figures[k] is None else f"{figures[k]:.3f}"
                                        for k in ("atr", "atr_time")))
            else:
                cells.append(f"{_ratio(figures['atr_vs_hybrid'])} / "
                             f"{_ratio(figures['atr_time_vs_hybrid'])}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines
