"""Phase 1 of a write: a batch of documents extracted, built and embedded, nothing committed.

One function serves both the index's own process (``writer``) and a Ray worker
(``ray_workers``, which stages one document per call), so a document staged either way goes
through the same steps: extraction a group of chunks at a time (``staging``), the document
layers (``pipeline.stage_document``), then one embedding of every distinct text
(``embedding.embed_staged``), re-using what the builders embedded while staging.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

from llama_index.core.schema import Document, TextNode

from llama_index_e2rag.extract.builders import DocumentBuilder
from llama_index_e2rag.graph.base import GraphStore
from llama_index_e2rag.heap import give_back
from llama_index_e2rag.ingest.embedding import RecordingEmbedding, StagedVectors, embed_staged
from llama_index_e2rag.ingest.models import IndexModels
from llama_index_e2rag.ingest.pipeline import StagedDoc, stage_document
from llama_index_e2rag.ingest.progress import doc_bar
from llama_index_e2rag.ingest.staging import extraction_groups, stage_fragments

#: One document of a batch: the document (``None`` for pre-chunked nodes), its id, story order
#: and chunks.
Group = tuple[Optional[Document], str, int, list[TextNode]]


async def astage_batch(
    groups: Sequence[Group],
    graphs: dict[str, GraphStore],
    words: dict[str, list[int]],
    models: IndexModels,
    doc_builders: Sequence[DocumentBuilder],
    passage_words: int,
    show_progress: bool = False,
) -> tuple[list[StagedDoc], StagedVectors]:
    """Stage every document of ``groups`` into its graph of ``graphs`` (``words``: its chunks'
    lengths) and embed them; returns the staged documents in batch order and their vectors."""
    doc_of = {c.node_id: doc_id for _, doc_id, _, chunks in groups for c in chunks}
    kept: dict[str, list[TextNode]] = {doc_id: [] for _, doc_id, _, _ in groups}
    failures: dict[str, list[dict[str, str]]] = {doc_id: [] for doc_id in kept}
    carry: dict[str, Any] = {}  # what an extractor hands from one group to the next
    all_chunks = [c for *_, doc_chunks in groups for c in doc_chunks]
    all_words = [n for _, doc_id, _, _ in groups for n in words[doc_id]]
    extractors = models.resolve_extractors()
    for group in extraction_groups(all_chunks, all_words, extractors):
        for extractor in extractors:
            group = list(await extractor.acall(group, show_progress=show_progress, carry=carry))
        by_doc: dict[str, list[TextNode]] = {}
        for chunk in group:
            if chunk.node_id in doc_of:
                by_doc.setdefault(doc_of[chunk.node_id], []).append(chunk)
        for doc_id, doc_chunks in by_doc.items():
            kept[doc_id].extend(doc_chunks)
            failures[doc_id] += stage_fragments(graphs[doc_id], doc_id, doc_chunks)
    staged = []
    recorder: Optional[RecordingEmbedding] = None

    def builders_embedding() -> RecordingEmbedding:
        nonlocal recorder
        if recorder is None:
            recorder = RecordingEmbedding(models.embed_model)
        return recorder

    # a book's layers take minutes: the bar names the builder at work, even for one document
    layers = doc_bar(
        groups,
        "Building document layers",
        show_progress and (len(groups) > 1 or bool(doc_builders)),
    )
    for document, doc_id, order, _ in layers:
        staged.append(
            await stage_document(
                document,
                doc_id,
                order,
                kept[doc_id],
                graphs[doc_id],
                failures[doc_id],
                doc_builders,
                lambda: models.llm_runner,
                passage_words,
                builders_embedding,
                on_builder=layers.set_postfix_str,
            )
        )
    known = recorder.take() if recorder is not None else None
    give_back()  # what the builders read whole is free: the embedding starts from less
    try:
        vectors = await embed_staged(
            models.embed_model, [s.graph for s in staged], show_progress, known
        )
    finally:
        if known is not None:
            known.close()
    give_back()
    return staged, vectors
