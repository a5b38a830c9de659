"""Build one document's event layer from LightRAG chunks: mentions, events, bipartite edges.

Mentions come from LightRAG's own per-chunk entity records (what ``extract_entities`` returned for
that chunk, before LightRAG merges entities across chunks), so a mention keeps the description it
has *in that chunk*. Events come from a separate LLM pass with the shared event prompt
(``extract/prompts.py``), parsed with one repair round by ``llm_parsing.parse_with_repair`` (the
code ``LLMRunner`` uses); nodes and edges come from the same builder as llama_index_e2rag
(``extract/chunk_graph.build_chunk_graph``: mentions, events, bipartite and co-occurrence edges) and
the same story-order rule (``extract/linking.story_chain_edges``: ``next`` edges).

LLM calls go through LightRAG's ``extract`` role function and LightRAG's LLM response cache under
our own cache types (``e2rag_event``, ``e2rag_mention``; ``cached_llm.CachedStructuredLLM``):
re-running costs nothing, and LightRAG's rebuild-from-cache, which reads only
``cache_type == "extract"``, never sees our answers. A chunk whose event answer cannot be parsed
(any ``LLMOutputError`` of the bounded shared parser, after the repair round) or does not come
within LightRAG's LLM timeout (a ``TimeoutError``) is recorded as failed (its mentions stay);
the document is never lost over it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Optional, TypeVar

from llama_index_e2rag.extract.chunk_graph import build_chunk_graph
from llama_index_e2rag.extract.linking import story_chain_edges
from llama_index_e2rag.extract.prompts import (
    ENTITY_EXTRACTION,
    ENTITY_EXTRACTION_TEXT,
    EVENT_EXTRACTION,
    EVENT_EXTRACTION_TEXT,
    EntityExtraction,
    EventExtraction,
    ExtractedEntity,
)
from llama_index_e2rag.llm.prompt_text import Prompt, format_prompt

from lightrag_ext.cached_llm import CachedStructuredLLM
from lightrag_ext.host import LayerHost, LLMHost
from lightrag_ext.storage import DocLayer

logger = logging.getLogger(__name__)

EVENT_CACHE_TYPE = "e2rag_event"
MENTION_CACHE_TYPE = "e2rag_mention"
_CACHE_TYPES = {ENTITY_EXTRACTION: MENTION_CACHE_TYPE, EVENT_EXTRACTION: EVENT_CACHE_TYPE}
_Extraction = TypeVar("_Extraction", EntityExtraction, EventExtraction)

#: LightRAG's per-chunk extraction result: entity name -> the entity records of that chunk.
ChunkEntities = dict[str, list[dict[str, Any]]]


@dataclass
class ChunkInput:
    """A LightRAG chunk as the layer needs it."""

    chunk_id: str
    doc_id: str
    content: str
    order: int
    file_path: str


def chunk_inputs(chunks: dict[str, dict[str, Any]]) -> list[ChunkInput]:
    """LightRAG chunk records (``text_chunks`` rows) in document order."""
    items = [
        ChunkInput(
            chunk_id=chunk_id,
            doc_id=row["full_doc_id"],
            content=row.get("content", ""),
            order=int(row.get("chunk_order_index", 0)),
            file_path=row.get("file_path") or "unknown_source",
        )
        for chunk_id, row in chunks.items()
    ]
    return sorted(items, key=lambda c: (c.doc_id, c.order, c.chunk_id))


def chunk_offsets(doc_text: Optional[str], chunks: list[ChunkInput]) -> dict[str, int]:
    """Absolute character offset of each chunk in its document (LightRAG does not keep them).

    Chunks are found in order, each search starting after the previous chunk's start, so
    overlapping chunks and repeated text land where they belong; a chunk that cannot be found
    (rewritten by a custom chunker) sits right after its predecessor.
    """
    offsets: dict[str, int] = {}
    cursor = 0
    for chunk in chunks:
        found = doc_text.find(chunk.content.strip(), cursor) if doc_text else -1
        offsets[chunk.chunk_id] = found if found >= 0 else cursor
        cursor = (found if found >= 0 else cursor) + 1
    return offsets


def entities_from_records(records: ChunkEntities) -> list[ExtractedEntity]:
    """Per-chunk LightRAG entity records as the shared ``ExtractedEntity`` model.

    One record per name; if gleaning left several, the longest description wins (LightRAG's own
    rule when it merges a gleaning pass).
    """
    entities = []
    for name, rows in records.items():
        if not rows:
            continue
        best = max(rows, key=lambda r: len(r.get("description") or ""))
        entities.append(
            ExtractedEntity(
                name=best.get("entity_name") or name,
                type=best.get("entity_type") or "Other",
                description=best.get("description") or "",
            )
        )
    return entities


async def build_doc_layer(
    rag: LLMHost,
    doc_id: str,
    chunks: list[ChunkInput],
    entity_records: dict[str, Optional[ChunkEntities]],
    *,
    doc_text: Optional[str],
    doc_created_at: Optional[str],
    event_prompt: Prompt = EVENT_EXTRACTION_TEXT,
    mention_prompt: Prompt = ENTITY_EXTRACTION_TEXT,
) -> DocLayer:
    """The event layer of one document.

    ``entity_records[chunk_id]`` is LightRAG's per-chunk entity extraction; ``None`` means it
    could not be recovered, and a mention pass with the shared entity prompt stands in. Prompts
    are texts or llama-index templates; both receive ``{text}``.
    """
    extractor = CachedStructuredLLM(rag)
    offsets = chunk_offsets(doc_text, chunks)
    layer = DocLayer(
        doc_id=doc_id,
        file_path=chunks[0].file_path if chunks else "unknown_source",
        chunk_ids=[c.chunk_id for c in chunks],
        chunk_offsets=offsets,
        doc_created_at=doc_created_at,
    )

    async def one_chunk(chunk: ChunkInput) -> None:
        records = entity_records.get(chunk.chunk_id)
        entities: list[ExtractedEntity] = []
        if records is None:
            layer.mention_source = "e2rag_mention_pass"
            mentions = await _chunk_pass(
                extractor, mention_prompt, EntityExtraction, chunk, layer, ENTITY_EXTRACTION
            )
            if mentions is not None:
                entities = mentions.entities
        else:
            entities = entities_from_records(records)
        extraction = await _chunk_pass(
            extractor, event_prompt, EventExtraction, chunk, layer, EVENT_EXTRACTION
        )
        events = extraction.events if extraction is not None else []
        nodes, edges = build_chunk_graph(
            entities,
            events,
            text=chunk.content,
            doc_id=chunk.doc_id,
            chunk_id=chunk.chunk_id,
            doc_order=0,
            chunk_start=offsets[chunk.chunk_id],
        )
        layer.nodes.extend(nodes)
        layer.edges.extend(edges)

    await asyncio.gather(*(one_chunk(c) for c in chunks))
    order = {c.chunk_id: i for i, c in enumerate(chunks)}
    layer.nodes.sort(key=lambda n: (order[n.chunk_id or ""], n.kind.value, n.pos, n.id))
    layer.edges.extend(story_chain_edges(layer.nodes, doc_id))
    layer.edges.sort(key=lambda e: (e.source, e.target, e.kind.value))
    layer.cache_keys.sort()
    return layer


async def write_stored_doc_layer(
    rag: LayerHost,
    doc_id: str,
    rows: dict[str, dict[str, Any]],
    entity_records: dict[str, Optional[ChunkEntities]],
    status: Optional[dict[str, Any]],
) -> DocLayer:
    """Build and save the layer of a document LightRAG has stored, with the rag's prompts.

    ``rows`` are its ``text_chunks`` records by chunk id, ``status`` its ``doc_status`` record.
    """
    full_doc = await rag.full_docs.get_by_id(doc_id)
    layer = await build_doc_layer(
        rag,
        doc_id,
        chunk_inputs(rows),
        entity_records,
        doc_text=(full_doc or {}).get("content"),
        doc_created_at=(status or {}).get("created_at"),
        event_prompt=rag_prompt(rag, "event_prompt", EVENT_EXTRACTION_TEXT),
        mention_prompt=rag_prompt(rag, "mention_prompt", ENTITY_EXTRACTION_TEXT),
    )
    await rag.event_layer.write_doc(layer)
    return layer


def rag_prompt(rag: LayerHost, name: str, text: str) -> Prompt:
    """``rag``'s prompt ``name`` if it has been set or built, else ``text``, its default.

    ``E2LightRAG`` builds its llama-index templates on first access (``functools.cached_property``
    keeps them in the instance's ``__dict__``); with the default prompt the text fills to the
    same string, so building the layer never imports llama-index for it.
    """
    return vars(rag).get(name, text)


async def _chunk_pass(
    extractor: CachedStructuredLLM,
    prompt: Prompt,
    output_cls: type[_Extraction],
    chunk: ChunkInput,
    layer: DocLayer,
    kind: str,
) -> Optional[_Extraction]:
    """One cached LLM pass (``kind``: entity or event extraction) over a chunk.

    A failure is recorded in the layer and yields None: it never loses the document, nor the
    chunk's other pass.
    """
    try:
        extraction, key = await extractor.structured(
            format_prompt(prompt, text=chunk.content),
            output_cls,
            cache_type=_CACHE_TYPES[kind],
            chunk_id=chunk.chunk_id,
        )
    except Exception as exc:  # noqa: BLE001 - see docstring
        _record_failure(layer, chunk.chunk_id, kind, exc)
        return None
    if key:
        layer.cache_keys.append(key)
    return extraction


def _record_failure(layer: DocLayer, chunk_id: str, kind: str, exc: Exception) -> None:
    logger.warning("%s failed for chunk %s: %s", kind, chunk_id, exc)
    reason = f"{kind}: {type(exc).__name__}: {exc}"[:400]
    previous = layer.failures.get(chunk_id)
    layer.failures[chunk_id] = f"{previous}; {reason}" if previous else reason
