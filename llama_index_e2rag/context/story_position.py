"""Where a piece of evidence sits in its story, asked by every reader the same way.

The extractive answer, ``e2rag query``'s evidence, ``e2rag serve``'s ``where``, the metadata
filters and the story page all ask ``document_chunks`` (or ``story_map``, ``StoryPositions``)
with what they hold. The ``Stores`` of a persisted index answer from its read model
(``document_file``: one small file instead of every chunk, derived and saved when missing or
stale), so no reader can forget to consult it; a graph store alone (or stores without a folder)
reads a document's chunks when it is first asked for (``story_text.read_document``). Either
way once per content state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Union

from llama_index_e2rag.context import document_file
from llama_index_e2rag.context.story_text import (
    DocumentChunks,
    StoryMap,
    describe_position,
    read_document,
    source_name,
)
from llama_index_e2rag.stores.state_cache import StateCache

if TYPE_CHECKING:  # not imported at run time: the graph package loads networkx
    from llama_index_e2rag.graph.base import GraphStore
    from llama_index_e2rag.stores.read_model_file import Stores

#: What a reader asks with: the index's stores (their read model is consulted) or a graph alone.
Source = Union["Stores", "GraphStore"]


def document_chunks(source: Source, doc_id: str) -> DocumentChunks:
    """``doc_id``'s ``DocumentChunks``: a query wants the map (the answer and the lines placing
    its evidence) and the document's metadata (results name their source). Persisted stores
    read every document's from their read model at once; otherwise, or for a document the
    model does not hold, its chunks are read once per graph store and content state."""
    if hasattr(source, "home"):  # Stores: a graph, and a folder when persisted
        if source.home is not None:
            found = document_file.readings(source)
            if doc_id in found:
                return found[doc_id]
        graph = source.graph
    else:
        graph = source
    read = _READINGS.get(graph)
    if doc_id not in read:
        read[doc_id] = read_document(graph, doc_id)
    return read[doc_id]


#: doc id -> its chunks' reading, per graph store and content state (filled as asked for)
_READINGS: StateCache[dict[str, DocumentChunks]] = StateCache(lambda graph, state: {})


def story_map(source: Source, doc_id: str) -> Optional[StoryMap]:
    """The document's ``StoryMap`` (None when it has no spanned chunk; ``document_chunks``)."""
    return document_chunks(source, doc_id).story


class StoryPositions:
    """Readable positions in the documents of one index's stores or graph store (an answer, a
    server response or a story page describes many positions of few documents: each map is
    read once, ``story_map``)."""

    def __init__(self, source: Source) -> None:
        self._source = source

    def story(self, doc_id: Optional[str]) -> Optional[StoryMap]:
        """``doc_id``'s ``StoryMap`` (None for an unknown document)."""
        return story_map(self._source, doc_id) if doc_id else None

    def place(
        self, doc_id: Optional[str], char_offset: Optional[int]
    ) -> tuple[Optional[str], Optional[float]]:
        """(chapter, percent through the document) at ``char_offset``; None where unknown."""
        story = self.story(doc_id) if char_offset is not None else None
        if story is None or char_offset is None:
            return None, None
        return story.chapter_at(char_offset), story.percent_at(char_offset)

    def describe(
        self, doc_id: Optional[str], char_offset: Optional[int], source: Optional[str] = None
    ) -> str:
        """"peter_rabbit.txt · Chapter 3 · 93% through the story" (``describe_position``);
        ``source`` names the document, else its chunks' metadata does, else its id."""
        chapter, percent = self.place(doc_id, char_offset)
        story = self.story(doc_id)
        name = source or (story.source if story else None) or source_name({}, doc_id)
        return describe_position(name, percent, chapter, char_offset)


