"""Where a piece of evidence sits in its story, in words a reader can use.

A character offset means nothing to a reader and a bare "93%" reads like a confidence, so the
extractive answer labels positions as "Chapter 3 · 93% through the story": the chapter (or book,
part, section, ...) comes from the nearest heading before the evidence, found in the indexed
chunks' text, and the share of the document is said to be one.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Optional

from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.schema import NodeKind

_NUMBER = (
    r"\d+|[ivxlcdm]+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|first|second|third|fourth|"
    r"fifth|sixth|seventh|eighth|ninth|tenth|last"
)
#: A heading line: "CHAPTER III.", "Chapter 3: The Net", "BOOK ONE", "Part II — Home", also as
#: a Markdown heading ("# Chapter 1": .md files, and HTML or EPUB as LlamaIndex's readers give
#: them); the whole line is the heading, so prose that happens to start with "Part of" is not one.
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+)?(chapter|book|part|section|canto|act|scene|stave|letter)[ \t]+(" + _NUMBER + r")"
    r"[ \t]*(?:[.:\-\u2014][^\n]{0,70})?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class StoryMap:
    """A document's length and its headings (absolute offset, label), in order."""

    length: int
    headings: tuple[tuple[int, str], ...] = ()

    def percent_at(self, offset: int) -> float:
        """Share of the document before ``offset``, in percent."""
        return min(100.0, 100.0 * offset / self.length) if self.length else 0.0

    def chapter_at(self, offset: int) -> Optional[str]:
        """Label of the last heading at or before ``offset`` (None before the first)."""
        i = bisect_right([start for start, _ in self.headings], offset)
        return self.headings[i - 1][1] if i else None


def headings(text: str, base: int = 0) -> list[tuple[int, str]]:
    """Chapter-like headings of ``text`` as (``base`` + offset, "Chapter III")."""
    return [
        (base + m.start(1), f"{m.group(1).capitalize()} {_number_label(m.group(2))}")
        for m in _HEADING.finditer(text)
    ]


def _number_label(number: str) -> str:
    return number.upper() if re.fullmatch(r"[ivxlcdm]+", number, re.IGNORECASE) else (
        number.lower() if number.isdigit() else number.capitalize()
    )


def story_map(graph_store: GraphStore, doc_id: str) -> Optional[StoryMap]:
    """The document's ``StoryMap`` from its indexed chunks (None when it has no spanned chunk)."""
    chunks = [c for c in graph_store.nodes(kind=NodeKind.CHUNK, doc_id=doc_id) if c.span]
    if not chunks:
        return None
    found: dict[int, str] = {}
    for chunk in chunks:
        found.update(headings(chunk.text, chunk.span[0]))  # type: ignore[index]
    length = max(c.span[1] for c in chunks)  # type: ignore[index]
    return StoryMap(length=length, headings=tuple(sorted(found.items())))


def describe_position(
    source: str,
    percent: Optional[float] = None,
    chapter: Optional[str] = None,
    char_offset: Optional[int] = None,
) -> str:
    """"peter_rabbit.txt · Chapter 3 · 93% through the story"; the character offset is shown
    only when the share of the story is unknown (it is the only position there is then)."""
    parts = [source]
    if chapter:
        parts.append(chapter)
    if percent is not None:
        parts.append(f"{percent:.0f}% through the story")
    elif char_offset is not None:
        parts.append(f"character {char_offset:,}")
    return " · ".join(parts)
