"""Sentence-aligned passages: the retrieval units of the ``narrative`` mode.

Extraction chunks are sized for an LLM (or the embedding's input limit) and overlap; a budget spent
on them buys few places of the story and pays twice for the overlap. Passages are cut once per
document, on sentence ends, about ``target_words`` long and never overlapping, so a 1,500-word
budget reaches some fifty distinct places. Each passage is a ``passage`` node placed at its
character offset (``pos``, ``span``), tied to the chunk that holds its start (for the chunk's
metadata: file name, title) and to the next passage by a ``next`` edge (story order).
"""

from __future__ import annotations

import bisect
from typing import Sequence

from llama_index.core.schema import TextNode

from llama_index_e2rag.extract.base import chunk_offset
from llama_index_e2rag.schema import EdgeKind, GraphEdge, GraphNode, NodeKind, make_id
from llama_index_e2rag.text import passage_spans

#: Passage length in words: fitted with the fusion weights on FairytaleQA train (see
#: ``benchmarks/fit_narrative.py``); short enough for many places per budget, long enough for a
#: sentence's context.
DEFAULT_PASSAGE_WORDS = 30
#: Third element of a passage's ``pos``: after chunks (0), events (1) and mentions (2) at the
#: same offset, so a passage sorts after what starts with it.
PASSAGE_ORDINAL = 3


def document_text(chunks: Sequence[TextNode]) -> tuple[str, int]:
    """Rebuild a document's text (from its first chunk's offset) out of overlapping chunks.

    Used when only pre-chunked nodes were inserted; with a whole document its own text is used.
    Chunks without distinct offsets (hand-made nodes) are joined in the order given, as
    paragraphs, so no text is lost.
    """
    offsets = [chunk_offset(c) for c in chunks]
    if len(set(offsets)) < len(offsets):
        return "\n\n".join(c.get_content() for c in chunks), 0
    ordered = sorted(chunks, key=chunk_offset)
    if not ordered:
        return "", 0
    base = chunk_offset(ordered[0])
    text = ""
    for chunk in ordered:
        start = chunk_offset(chunk) - base
        content = chunk.get_content()
        if start > len(text):
            text += " " * (start - len(text))
        text = text[:start] + content if start + len(content) > len(text) else text
    return text, base


def build_passages(
    doc_id: str,
    doc_order: int,
    text: str,
    chunks: Sequence[TextNode],
    target_words: int = DEFAULT_PASSAGE_WORDS,
    base: int = 0,
) -> tuple[list[GraphNode], list[GraphEdge]]:
    """Passage nodes of one document (``text`` starts at character ``base`` of it)."""
    starts = sorted((chunk_offset(c), c.node_id) for c in chunks)
    offsets = [offset for offset, _ in starts]
    nodes: list[GraphNode] = []
    for start, end in passage_spans(text, target_words):
        piece = text[start:end]
        absolute = base + start
        holder = bisect.bisect_right(offsets, absolute) - 1
        chunk_id = starts[max(holder, 0)][1] if starts else None
        pos = (doc_order, absolute, PASSAGE_ORDINAL)
        nodes.append(
            GraphNode(
                id=make_id(doc_id, NodeKind.PASSAGE, pos, piece),
                kind=NodeKind.PASSAGE,
                text=piece,
                doc_id=doc_id,
                pos=pos,
                span=(absolute, base + end),
                chunk_id=chunk_id,
            )
        )
    edges = [
        GraphEdge(source=a.id, target=b.id, kind=EdgeKind.NEXT, doc_id=doc_id)
        for a, b in zip(nodes, nodes[1:])
    ]
    return nodes, edges
