"""A document's story in words: its chapter headings, length and name, read from its chunks.

A character offset means nothing to a reader and a bare "93%" reads like a confidence, so
positions read "peter_rabbit.txt · Chapter 3 · 93% through the story": the chapter (or book,
part, section, ...) comes from the nearest heading before the evidence, found in the indexed
chunks' text, and the share of the document is said to be one. This module reads a document's
chunks into that map (``read_document``); ``story_position`` keeps the readings, from the
store's read model when it has one.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence

from llama_index_e2rag.context.keys import SOURCE_NAME_KEYS
from llama_index_e2rag.schema import CHUNK_NODE_ATTR, NodeKind

if TYPE_CHECKING:  # not imported at run time: the graph package loads networkx
    from llama_index_e2rag.graph.base import GraphStore

_NUMBER = (
    r"\d+|[ivxlcdm]+|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|first|second|third|fourth|"
    r"fifth|sixth|seventh|eighth|ninth|tenth|last"
)
#: A heading line: "CHAPTER III.", "Chapter 3: The Net", "BOOK ONE", "Part II — Home", also as
#: a Markdown heading ("# Chapter 1": .md files, and HTML or EPUB as LlamaIndex's readers give
#: them); the whole line is the heading, so prose that happens to start with "Part of" is not one.
#: Lines may end in CRLF (every Project Gutenberg file does): ``$`` stops before the ``\n`` only.
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]+)?(chapter|book|part|section|canto|act|scene|stave|letter)[ \t]+(" + _NUMBER + r")"
    r"[ \t]*(?:[.:\-\u2014][^\r\n]{0,70})?[ \t\r]*$",
    re.IGNORECASE | re.MULTILINE,
)


#: Where a Project Gutenberg file's story ends and its licence begins.
_LICENCE = re.compile(r"\*\*\*\s*END OF (?:THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
#: Characters between two headings of a table of contents at most (a title line and a blank
#: line each); a chapter is longer than this.
CONTENTS_GAP = 200


@dataclass(frozen=True)
class StoryMap:
    """A document's length and its headings (absolute offset, label), in order."""

    length: int
    headings: tuple[tuple[int, str], ...] = ()
    #: The document's name from its chunks' metadata (``source_name``), when they carry one.
    source: Optional[str] = None

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


def without_contents(found: Sequence[tuple[int, str]]) -> list[tuple[int, str]]:
    """``found`` (in text order) without a table of contents: two neighbouring headings within
    ``CONTENTS_GAP`` characters whose labels both come again later list chapters rather than
    begin them (a book's "CHAPTER I. ... CHAPTER XIII." at its start; "BOOK TWO" right before
    its "CHAPTER I." is a beginning)."""
    last = {label: i for i, (_, label) in enumerate(found)}
    again = [last[label] > i for i, (_, label) in enumerate(found)]

    def listed_with(i: int, j: int) -> bool:
        return 0 <= j < len(found) and again[j] and abs(found[j][0] - found[i][0]) < CONTENTS_GAP

    return [
        heading
        for i, heading in enumerate(found)
        if not (again[i] and (listed_with(i, i - 1) or listed_with(i, i + 1)))
    ]


def _number_label(number: str) -> str:
    return number.upper() if re.fullmatch(r"[ivxlcdm]+", number, re.IGNORECASE) else (
        number.lower() if number.isdigit() else number.capitalize()
    )


@dataclass(frozen=True)
class DocumentChunks:
    """What one read of a document's chunks tells: its story map, and its first chunk of source
    text (whose metadata is the document's; ChronoRAG's layer-0 chunks are derived text)."""

    story: Optional[StoryMap]
    first_chunk: Optional[str]
    #: (start, end, id) of its chunks of source text, in story order: which chunk a passage of
    #: derived text (a ChronoRAG layer-0 chunk) was read from by the grounded extractor.
    source_spans: tuple[tuple[int, int, str], ...] = ()

    def chunks_at(self, offset: int) -> list[str]:
        """Ids of the source chunks whose span holds ``offset`` (overlapping chunks: several)."""
        return [chunk for start, end, chunk in self.source_spans if start <= offset < end]

def read_document(graph_store: "GraphStore", doc_id: str) -> DocumentChunks:
    """``doc_id``'s ``DocumentChunks`` from one read of its chunks (each decoded: a novel's
    656 take 0.1 s, a million words' 20k about 3 s)."""
    chunks = graph_store.nodes(kind=NodeKind.CHUNK, doc_id=doc_id)
    source = [c for c in chunks if c.attrs.get("layer") != 0]
    spans = sorted((c.span[0], c.span[1], c.id) for c in source if c.span)
    return DocumentChunks(_story_map(chunks), source[0].id if source else None, tuple(spans))


def _story_map(doc_chunks: Sequence[Any]) -> Optional[StoryMap]:
    chunks = [c for c in doc_chunks if c.span]
    if not chunks:
        return None
    found: dict[int, str] = {}
    story_end: Optional[int] = None
    for chunk in chunks:
        found.update(headings(chunk.text, chunk.span[0]))  # type: ignore[index]
        end = _LICENCE.search(chunk.text)
        if end is not None:
            at = chunk.span[0] + end.start()  # type: ignore[index]
            story_end = at if story_end is None else min(story_end, at)
    if story_end is not None:  # the licence's "Section 1." is no chapter
        found = {start: label for start, label in found.items() if start < story_end}
    length = max(c.span[1] for c in chunks)  # type: ignore[index]
    names = (source_name(_chunk_metadata(c), None) for c in chunks)
    return StoryMap(
        length=length,
        headings=tuple(without_contents(sorted(found.items()))),
        source=next((name for name in names if name != "document"), None),
    )


def _chunk_metadata(chunk: Any) -> Mapping[str, Any]:
    stored = chunk.attrs.get(CHUNK_NODE_ATTR)
    return (stored.get("metadata") or {}) if isinstance(stored, dict) else {}


def source_name(
    meta: Mapping[str, Any], doc_id: Optional[str], doc_order: Optional[int] = None
) -> str:
    """The document's file name or title, else its id, else its place among the documents."""
    for key in SOURCE_NAME_KEYS:
        if meta.get(key):
            return str(meta[key]).rsplit("/", 1)[-1] if key == "file_path" else str(meta[key])
    if doc_id:
        return str(doc_id)
    return f"document {doc_order}" if doc_order is not None else "document"


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
