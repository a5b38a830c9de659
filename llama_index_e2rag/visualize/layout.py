"""Geometry of the story pictures: the story axis and rows that keep marks from overlapping.

Pure functions over positions, no store and no HTML, so the rules (story order left to right,
documents side by side, every mark on its own spot) are tested on their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from llama_index_e2rag.schema import Position


@dataclass(frozen=True)
class DocExtent:
    """One document on the axis: its order, id and length in characters."""

    order: int
    doc_id: str
    length: int


@dataclass(frozen=True)
class StoryAxis:
    """Maps a story position to [0, 1]: documents in doc order, each as wide as its text, so x
    grows with ``GraphNode.pos`` across the whole story."""

    docs: tuple[DocExtent, ...]
    #: Chapter headings on the axis: (x in [0, 1], label), in story order.
    chapters: tuple[tuple[float, str], ...] = ()

    @property
    def total(self) -> int:
        return sum(doc.length for doc in self.docs)

    def starts(self) -> dict[int, int]:
        """Each document's first character on the story axis, by doc order."""
        starts, offset = {}, 0
        for doc in self.docs:
            starts[doc.order] = offset
            offset += doc.length
        return starts

    def x(self, pos: Sequence[int]) -> float:
        """Share of the story before ``pos`` (0 at the first document's start, 1 at the end)."""
        total = self.total
        if not total:
            return 0.0
        starts = self.starts()
        lengths = {doc.order: doc.length for doc in self.docs}
        order, offset = int(pos[0]), int(pos[1])
        if order not in starts:  # a document the axis does not know: clamp to its neighbours
            before = [o for o in starts if o < order]
            return (starts[max(before)] + lengths[max(before)]) / total if before else 0.0
        return (starts[order] + min(max(offset, 0), lengths[order])) / total


def story_axis(lengths: Iterable[tuple[int, str, int]]) -> StoryAxis:
    """The axis of documents ``(order, doc_id, length)``; a length of 0 counts as 1 character
    so an empty document still has a place."""
    docs = sorted(
        (DocExtent(order, doc_id, max(int(length), 1)) for order, doc_id, length in lengths),
        key=lambda doc: (doc.order, doc.doc_id),
    )
    return StoryAxis(docs=tuple(docs))


def stack_rows(xs: Sequence[float], min_gap: float) -> list[int]:
    """A row per mark so that marks of one row are at least ``min_gap`` apart: close marks
    stack instead of hiding each other. Returns the row of each mark."""
    return stack_spans([(x, x) for x in xs], min_gap)


def stack_spans(spans: Sequence[tuple[float, float]], min_gap: float) -> list[int]:
    """A row per ``(start, end)`` span so that spans of one row are at least ``min_gap`` apart
    (greedy, in start order: the first row with room). Returns the row of each span."""
    rows: list[int] = [0] * len(spans)
    ends: list[float] = []  # right end of the last span placed in each row
    for i in sorted(range(len(spans)), key=lambda i: spans[i]):
        start, end = spans[i]
        for row, right in enumerate(ends):
            if start - right >= min_gap:
                rows[i] = row
                ends[row] = end
                break
        else:
            rows[i] = len(ends)
            ends.append(end)
    return rows


def bin_counts(xs: Iterable[float], bins: int) -> list[int]:
    """How many of ``xs`` (in [0, 1]) fall in each of ``bins`` equal slices of the story."""
    counts = [0] * bins
    for x in xs:
        counts[min(int(x * bins), bins - 1) if x > 0 else 0] += 1
    return counts


def pos_key(pos: Position | Sequence[int]) -> str:
    """A position as a data attribute value (``"0,1234,0"``): story order is the tuple order."""
    return ",".join(str(int(p)) for p in pos)


def spaced_labels(marks: Sequence[tuple[float, str]], min_gap: float) -> list[tuple[float, str]]:
    """The marks whose labels fit: left to right, each at least ``min_gap`` after the last one
    kept (a novel's sixty chapter labels do not overprint each other)."""
    kept: list[tuple[float, str]] = []
    for x, label in sorted(marks):
        if not kept or x - kept[-1][0] >= min_gap:
            kept.append((x, label))
    return kept
